"""How a run's answers are scored (its route), checked against its baseline's, and the errors
that end a run once instead of failing case after case.

Why: a baseline scored by log-probs and a candidate scored by the sampling proxy differ by
sampling error alone, so comparing them gives FAILs that say nothing about the model. The
route is decided before the first query (the backend's probe), recorded in the run's and the
baseline's manifests (``option_access``), and a candidate that can only be scored by another
route than its baseline stops with one usage error naming both. A fault outside the model
(:class:`benchc.errors.InfrastructureError`) ends the run with the infrastructure exit code.
"""

from __future__ import annotations

from benchc.errors import InfrastructureError
from benchc.gates.states import EXIT_INFRA, EXIT_USAGE


class RouteMismatch(ValueError):
    """The candidate can only be scored by another route than its baseline was."""


def family(route: str | None) -> str | None:
    """``log-probs`` for white-box logits and served log-probs (the same §2 reading, equal
    within 4e-6 on the embedded model), ``sampling`` for the §3 proxy."""
    if route is None:
        return None
    return "sampling" if route == "sampling" else "log-probs"


def check_route(baseline: str | None, candidate: str, name: str = "the baseline") -> None:
    """:class:`RouteMismatch` when the baseline recorded another route family than the
    candidate's (nothing to check when the baseline recorded none: recorded before routes
    were)."""
    if baseline is None or family(baseline) == family(candidate):
        return
    raise RouteMismatch(
        f"{name} was scored by {baseline} (option_access in its baseline.manifest) and this "
        f"candidate can only be scored by {candidate}: their figures differ by the route, not "
        "the model. Serve the candidate so it gives the baseline's route (log-probs: "
        "--max-logprobs 20 on vLLM), or record a baseline of this route (--snapshot-update)"
    )


def stopping_error(exc: BaseException | None) -> tuple[int, str] | None:
    """(exit code, one-line message) when ``exc``, or an exception it wraps, ends the run:
    an infrastructure fault (:data:`EXIT_INFRA`) or a route mismatch (:data:`EXIT_USAGE`)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, InfrastructureError):
            return EXIT_INFRA, f"infrastructure error: {exc}"
        if isinstance(exc, RouteMismatch):
            return EXIT_USAGE, f"usage error: {exc}"
        exc = exc.__cause__  # raised from it (a wrapper), not while handling it
    return None


__all__ = ["RouteMismatch", "check_route", "family", "stopping_error"]
