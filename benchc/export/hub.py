"""``--push-to-hub REPO``: the report, ``report.json``, the threshold snapshots and a dataset
card, uploaded as a Hugging Face dataset repository (``pip install 'benchc[hub]'``).

:func:`stage` lays out what is uploaded in a temporary folder of its own (never in the report
folder: a ``hub/`` folder there is the user's) and writes the card; :func:`upload` is the one
network call, ``HfApi.upload_folder`` (the token is the Hub's own setting: ``HF_TOKEN`` or
``huggingface-cli login``), after the Hub's endpoint answered within a few seconds
(:mod:`benchc.export.reach`). The repository is created (private) when it does not exist.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from benchc.export import ExportError, reach, require
from benchc.export.bundle import Bundle


def card_text(bundle: Bundle) -> str:
    """The dataset card: YAML metadata (``huggingface_hub.DatasetCardData``) and a body with
    the verdict, the gate counts, every gated figure and the environment."""
    hub = require("huggingface_hub", "hub")
    data = hub.DatasetCardData(
        pretty_name=bundle.title or "benchc report",
        tags=["benchc", "robustness", "vision-language-model", f"verdict-{bundle.verdict}"],
        benchc={"verdict": bundle.verdict, "counts": bundle.counts, "model": bundle.model,
                "dataset": bundle.dataset},
    )  # fmt: skip
    lines = [
        "---",
        data.to_yaml(),
        "---",
        "",
        f"# {bundle.title or 'benchc report'}",
        "",
        f"**Verdict: {bundle.verdict}** "
        f"({', '.join(f'{v} {k}' for k, v in sorted(bundle.counts.items())) or 'no gates'})",
        "",
        "Written by [benchc](https://pypi.org/project/benchc/): `report.html` is the "
        "self-contained report page, `report.json` its data, `benchc-summary.json` the "
        "verdict, gated figures and environment below, `snapshots/` the threshold snapshots "
        "the gates read"
        + (", `sample-log.jsonl` the per-sample log." if _has_log(bundle) else "."),
        "",
        "## Gated figures",
        "",
        "| scope | figure | status | current | baseline | change |",
        "|---|---|---|---|---|---|",
    ]
    for g in bundle.gates:
        lines.append(
            f"| {g['scope']} | {g['figure']} | {g['status']} | {_fmt(g['current'])} | "
            f"{_fmt(g['baseline'])} | {_fmt(g['change'])} |"
        )
    lines += ["", "## Environment", "", "| | |", "|---|---|"]
    lines += [f"| {k} | `{v}` |" for k, v in sorted(bundle.environment.items())]
    return "\n".join(lines) + "\n"


def _has_log(bundle: Bundle) -> bool:
    from benchc.results.sample_log import SAMPLE_LOG

    return any(p.name == SAMPLE_LOG for p in bundle.files)


def _fmt(value: object) -> str:
    return f"{value:.4f}" if isinstance(value, float) else ("" if value is None else str(value))


def stage(bundle: Bundle, folder: Path) -> Path:
    """Lay out what is uploaded in ``folder`` (a new or empty folder benchc owns: a temporary
    one); returns it."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if any(folder.iterdir()):
        raise ExportError(f"{folder}: the Hub staging folder must be empty")
    for path in bundle.files:
        shutil.copy2(path, folder / path.name)
    (folder / "benchc-summary.json").write_text(
        json.dumps(bundle.summary(), indent=1, sort_keys=True) + "\n", encoding="utf-8"
    )
    if bundle.snapshots_dir is not None:
        shutil.copytree(bundle.snapshots_dir, folder / "snapshots" / bundle.snapshots_dir.name)
    (folder / "README.md").write_text(card_text(bundle), encoding="utf-8")
    return folder


def upload(folder: Path, repo: str) -> str:
    """The network call: create ``repo`` (a private dataset repo) if needed and upload
    ``folder`` in one commit; returns the commit URL."""
    hub = require("huggingface_hub", "hub")
    constants = require("huggingface_hub.constants", "hub")
    if constants.HF_HUB_OFFLINE:
        raise ExportError("HF_HUB_OFFLINE is set: nothing was uploaded")
    reach.check("the Hugging Face Hub", constants.ENDPOINT)
    api = hub.HfApi()
    api.create_repo(repo, repo_type="dataset", private=True, exist_ok=True)
    info = api.upload_folder(
        repo_id=repo,
        folder_path=str(folder),
        repo_type="dataset",
        commit_message="benchc report",
    )
    return str(getattr(info, "commit_url", info))


def export(bundle: Bundle, repo: str, *, local_dir: Path | None = None) -> str:
    """Stage the folder in a temporary folder and upload it to ``repo`` (``local_dir``:
    unused, nothing is kept locally)."""
    with tempfile.TemporaryDirectory(prefix="benchc-hub-") as tmp:
        return upload(stage(bundle, Path(tmp) / "hub"), repo)
