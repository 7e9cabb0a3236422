"""The HF backend by concern (issue 41): loading and arguments, the processor and prompt,
batching and forward, option-logit extraction, each its own module, no function over 60 lines.
That the split changed no number: ``test_stored_outputs`` (``-m architectures``)."""

from __future__ import annotations

import ast
from pathlib import Path

MODELS = Path(__file__).resolve().parents[2] / "benchc" / "models"
MODULES = ["hf.py", "hf_load.py", "hf_prompt.py", "hf_batch.py", "hf_logits.py"]
MAX_LINES = 60


def test_no_function_of_the_hf_backend_is_over_60_lines() -> None:
    long = []
    for name in MODULES:
        for node in ast.walk(ast.parse((MODELS / name).read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_LINES:
                    long.append(f"{name}:{node.lineno} {node.name}: {lines} lines")
    assert not long, long


def test_the_backend_is_its_concerns_put_together() -> None:
    from benchc.models.hf import HFBackend
    from benchc.models.hf_batch import HFBatch
    from benchc.models.hf_prompt import HFPrompt

    assert HFBackend.__mro__[1:3] == (HFPrompt, HFBatch)
    assert HFBackend.forward is HFBatch.forward and HFBackend.render is HFPrompt.render
