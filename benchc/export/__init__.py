"""Exporters: a finished run's verdict, gated figures, environment and report, sent to W&B
(``--wandb``), MLflow (``--mlflow``) or the Hugging Face Hub (``--push-to-hub``).

Each lives in its own module and imports its library only when used (``pip install
'benchc[wandb]'``, ``'benchc[mlflow]'``, ``'benchc[hub]'``); all of them read the same
:class:`~benchc.export.bundle.Bundle`. docs/guides/exporters.md is the user guide.
"""

from __future__ import annotations

from typing import Any


class ExportError(RuntimeError):
    """An exporter could not run (its optional dependency is missing, or the service refused)."""


def require(module: str, extra: str) -> Any:
    """Import ``module`` or raise one error saying which extra installs it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ExportError(
            f"this exporter needs the optional dependency {module!r}: pip install 'benchc[{extra}]'"
        ) from None


__all__ = ["ExportError", "require"]
