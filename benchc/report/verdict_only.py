"""The page of a gate run that stored nothing to draw: its verdict alone.

A run whose every case raised before a forward pass finished, or that was stopped before its
first grid row, has no stored grid to tabulate; its page still says what the engine decided
(CRASHED, INTERRUPTED, an infrastructure fault), why, what finished and the command that
resumes it, in ``report.html`` and ``report.json`` (``mode: verdict``), never a comparison page.
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchc.gates.verdict import HEADINGS, Overall
from benchc.results.store import atomic_write_text

_STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}"
    ".verdict-box{border:2px solid #b00;padding:1rem;border-radius:.4rem}"
    "pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#f4f4f4;padding:.5rem}"
)


def _body(overall: Overall, notes: Sequence[str]) -> list[str]:
    e = html.escape
    out = [f'<div class="verdict-box" id="verdict-state" data-state="{e(overall.state)}">',
           f"<b>{e(overall.headline)}</b>"]  # fmt: skip
    for heading, kinds in HEADINGS:
        group = [r for r in overall.reasons if r.kind in kinds]
        if group:
            out.append(f"<p>{e(heading)}:</p><ul>")
            out += [f'<li class="reason-{e(r.kind)}">{e(r.text)}</li>' for r in group]
            out.append("</ul>")
    p = overall.progress
    if p is not None and p.resume:
        out.append(f'<p id="progress">{p.finished} of {p.selected} gated case(s) finished; what '
                   f"was computed is stored. Resume with:</p><pre>{e(p.resume)}</pre>")  # fmt: skip
    out.append("</div>")
    out += [f'<p class="note">note: {e(n)}</p>' for n in notes]
    return out


def write_verdict_only(
    out_dir: Path, overall: Overall, *, title: str, notes: Sequence[str] = ()
) -> Path:
    """``out_dir/report.html`` and ``report.json`` holding the verdict alone."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    page = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
            f"</title><style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1>",
            *_body(overall, notes), "</body></html>"]  # fmt: skip
    atomic_write_text(out_dir / "report.html", "\n".join(page) + "\n")
    doc: dict[str, Any] = {
        "title": title,
        "mode": "verdict",
        "overall": overall.to_dict(),
        "notes": list(notes),
        "verdicts": {"available": False, "items": []},
    }
    atomic_write_text(out_dir / "report.json", json.dumps(doc, indent=1, sort_keys=True) + "\n")
    for name in ("report.html", "report.json"):
        os.chmod(out_dir / name, 0o644)
    return out_dir / "report.html"


__all__ = ["write_verdict_only"]
