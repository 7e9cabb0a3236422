"""Browser tests run only when asked for (``pytest -m browser``): they need Chromium from the
distribution's packages (``.ci/run`` installs it), and the default ``pytest`` stays cheap."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if "browser" in (config.getoption("markexpr", "") or ""):
        return
    skipped = [i for i in items if i.get_closest_marker("browser")]
    if skipped:
        config.hook.pytest_deselected(items=skipped)
        items[:] = [i for i in items if not i.get_closest_marker("browser")]
