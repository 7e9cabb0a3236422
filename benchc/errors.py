"""Faults outside the model: the one exception type that ends a run as an infrastructure error.

A server that fails for good (the same request refused after every retry, a server that never
answers within its deadline), a store that cannot be written: none of these says anything about
the candidate, so none may become a FAIL. Raised anywhere below the suite, it ends the run once
(no other case re-sends the request), with one message and the verdict table's infrastructure
exit code (:data:`benchc.gates.states.EXIT_INFRA`).
"""

from __future__ import annotations


class InfrastructureError(RuntimeError):
    """A fault outside the model. ``where``: the server or file; ``what``: the status or
    exception; ``item``: the sample and condition it was computing (when known); ``attempts``:
    how many times it was tried. The message says all of them in one paragraph."""

    def __init__(
        self,
        where: str,
        what: str,
        *,
        item: str | None = None,
        attempts: int | None = None,
        hint: str | None = None,
    ) -> None:
        self.where, self.what, self.item, self.attempts, self.hint = (
            where,
            what,
            item,
            attempts,
            hint,
        )
        parts = [f"{where}: {what}"]
        if item:
            parts.append(f"while computing {item}")
        if attempts:
            parts.append(f"after {attempts} attempt(s)")
        text = ", ".join(parts)
        super().__init__(f"{text}; {hint}" if hint else text)


__all__ = ["InfrastructureError"]
