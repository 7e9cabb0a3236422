"""What changed since the baseline: two checkpoint identities compared, key by key.

A gate names a drop; a release manager at 2 a.m. needs to know first whether the candidate is a
new set of weights or the released one with an edited ``processor_config.json``. Given the
identity a baseline recorded and the candidate's (:mod:`benchc.models.identity`), this names
every change: configs and templates as semantic diffs (re-formatted JSON with equal values is no
change), weights as same or changed (with the relative change per top-level module when both
folders are local), other files by digest, and the settings the backend used. The list goes to
the summary, the failing case's message, report.json, the page and the export bundle.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchc.models.identity import file_digest, is_weight

#: What a gate run against a baseline without an identity says (and still gates).
NOT_RECORDED = "the baseline recorded no checkpoint identity (re-record to get one)"
#: Changes named on the failing case's "look first" line (the summary lists them all).
LOOK_FIRST = 3
_WIDTH = 80
#: The settings a server reported of itself (:func:`benchc.models.identity.server_settings`).
SERVED = "server reported"


@dataclass(frozen=True)
class Change:
    """One difference: ``where`` (a file, ``settings``, ``revision``), the dotted ``key`` in
    it (empty: the whole file), both values as recorded, and a ``detail`` (a weight file's
    per-module change)."""

    kind: str  # config, text, file, weights, setting, revision
    where: str
    key: str = ""
    was: Any = None
    now: Any = None
    detail: str | None = None

    def line(self) -> str:
        head = f"{self.where}: {self.key}" if self.key else self.where
        if self.kind == "weights":
            return f"{head}: {self.detail or 'changed (digest)'}"
        if self.kind == "text":
            return f"{head}: {text_change(self.was, self.now)}"
        if self.kind == "file":
            return f"{head}: {self.detail}"
        return f"{head} {fmt(self.was)} -> {fmt(self.now)}"

    def to_json(self) -> dict[str, Any]:
        out = {"kind": self.kind, "where": self.where, "key": self.key, "line": self.line()}
        if self.kind not in ("weights", "file", "text"):
            out.update(was=self.was, now=self.now)
        return out


def fmt(value: Any) -> str:
    """A value short enough for one line: floats to 4 significant digits, lists to 4 items."""
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) else str(value)
    if isinstance(value, list):
        items = [fmt(v) for v in value[:4]] + (["..."] if len(value) > 4 else [])
        return _cut("[" + ", ".join(items) + "]")
    if isinstance(value, dict):
        return _cut(json.dumps(value, sort_keys=True))
    if isinstance(value, str):
        return _cut(repr(value))
    return "absent" if value is None else str(value)


def _cut(text: str) -> str:
    return text if len(text) <= _WIDTH else text[: _WIDTH - 3] + "..."


def text_change(was: Any, now: Any) -> str:
    """Where two texts differ: the differing span of each, with a little context before it."""
    a, b = str(was or ""), str(now or "")
    p = 0
    while p < min(len(a), len(b)) and a[p] == b[p]:
        p += 1
    s = 0
    while s < min(len(a), len(b)) - p and a[-1 - s] == b[-1 - s]:
        s += 1
    start = max(0, p - 20)
    return (
        f"changed at character {p}: {_cut(repr(a[start : len(a) - s]))} -> "
        f"{_cut(repr(b[start : len(b) - s]))}"
    )


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Nested JSON as ``{dotted key: leaf}``; lists of objects by index, other lists whole."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out or {prefix: {}}
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        out = {}
        for i, v in enumerate(value):
            out.update(flatten(v, f"{prefix}[{i}]"))
        return out
    return {prefix: value}


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return (type(a) is type(b) and a == b) or (_number(a) and _number(b) and a == b)


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def diff_values(where: str, was: Any, now: Any, kind: str = "config") -> list[Change]:
    """Every key whose value differs between two JSON values (added or removed: ``absent``)."""
    if isinstance(was, str) and isinstance(now, str):
        return [] if was == now else [Change("text", where, "", was, now)]
    a, b = flatten(was), flatten(now)
    out = []
    for key in sorted(set(a) | set(b)):
        if key in a and key in b and _equal(a[key], b[key]):
            continue
        x, y = a.get(key), b.get(key)
        long_text = isinstance(x, str) and isinstance(y, str) and max(len(x), len(y)) > 40
        out.append(Change("text" if long_text else kind, where, key, x, y))
    return out


def weight_change(old: Path, new: Path) -> str | None:
    """``||W_new - W_old|| / ||W_old||`` per top-level module of two safetensors files (read
    tensor by tensor), worst first; None when either cannot be read that way."""
    try:
        import numpy as np
        from safetensors import safe_open

        with safe_open(str(old), "np") as a, safe_open(str(new), "np") as b:
            names_a, names_b = set(a.keys()), set(b.keys())
            depth = _module_depth(names_a | names_b)
            diff: dict[str, float] = {}
            norm: dict[str, float] = {}
            odd: dict[str, str] = {}
            for name in sorted(names_a | names_b):
                group = ".".join(name.split(".")[:depth])
                if name not in names_a or name not in names_b:
                    odd[group] = "tensors added or removed"
                    continue
                x = a.get_tensor(name).astype(np.float64)
                y = b.get_tensor(name).astype(np.float64)
                if x.shape != y.shape:
                    odd[group] = f"{name} reshaped {x.shape} -> {y.shape}"
                    continue
                diff[group] = diff.get(group, 0.0) + float(((y - x) ** 2).sum())
                norm[group] = norm.get(group, 0.0) + float((x**2).sum())
    except Exception:
        return None
    rel = {g: math.sqrt(diff[g]) / math.sqrt(norm[g]) if norm[g] > 0 else math.inf for g in diff}
    parts = [f"{g} {odd[g]}" for g in sorted(odd)]
    parts += [f"{g} {r:.3g}" for g, r in sorted(rel.items(), key=lambda kv: (-kv[1], kv[0]))]
    return "changed; relative change by module: " + ", ".join(parts)


def _module_depth(names: set[str]) -> int:
    """Group by the first name component, or the first two when every tensor shares its first
    (``model.vision_tower``, ``model.language_model`` rather than one ``model``)."""
    firsts = {n.split(".")[0] for n in names}
    return 2 if len(firsts) == 1 and all("." in n for n in names) else 1


def _weights(name: str, was: dict, now: dict, old_root: Path | None, new_root: Path | None):
    if was.get("sha256") == now.get("sha256"):
        return None
    detail = None
    old, new = (r / name if r is not None else None for r in (old_root, new_root))
    local = old is not None and new is not None and old.is_file() and new.is_file()
    # the baseline's folder still holds what was recorded: only then is the change measured
    if local and name.endswith(".safetensors") and file_digest(old) == was.get("sha256"):
        detail = weight_change(old, new)
    return Change("weights", name, detail=detail or "changed (digest)")


def compare(
    old: dict[str, Any],
    new: dict[str, Any],
    *,
    old_root: Path | None = None,
    new_root: Path | None = None,
) -> list[Change]:
    """Every change from identity ``old`` (the baseline's) to ``new`` (the candidate's).
    ``old_root``/``new_root``: the local folders, for the weights' per-module change."""
    out: list[Change] = []
    if old.get("revision") != new.get("revision") and (old.get("revision") or new.get("revision")):
        out.append(Change("revision", "revision", "", old.get("revision"), new.get("revision")))
    # a side that was not read (a server, a run computed elsewhere) is not compared, so its
    # files never read as removed
    both = "files" in old and "files" in new
    configs_a, configs_b = (
        (old.get("configs") or {}, new.get("configs") or {}) if both else ({}, {})
    )
    files_a, files_b = (old.get("files") or {}, new.get("files") or {}) if both else ({}, {})
    for name in sorted(set(files_a) | set(files_b) | set(configs_a) | set(configs_b)):
        if name in configs_a and name in configs_b:
            out += diff_values(name, configs_a[name], configs_b[name])
        elif name not in files_a and name not in configs_a:
            out.append(Change("file", name, detail="added"))
        elif name not in files_b and name not in configs_b:
            out.append(Change("file", name, detail="removed"))
        elif is_weight(name):
            change = _weights(name, files_a[name], files_b[name], old_root, new_root)
            out += [change] if change else []
        elif (files_a.get(name) or {}).get("sha256") != (files_b.get(name) or {}).get("sha256"):
            out.append(Change("file", name, detail="changed (digest)"))
    named = {c.key.rsplit(".", 1)[-1] for c in out if c.key}
    templates = any("template" in c.where for c in out)
    settings = "settings" in old and "settings" in new
    pairs = (old["settings"], new["settings"]) if settings else ({}, {})
    for c in diff_values("settings", *pairs, "setting"):
        leaf = c.key.rsplit(".", 1)[-1]
        if leaf in named or (templates and leaf == "chat template"):
            continue  # the config change above names it already
        if c.key.startswith(SERVED) and (c.was is None or c.now is None):
            continue  # a server reports itself only once asked: unknown is no change
        out.append(c)
    if not both and old.get("fingerprint") != new.get("fingerprint"):
        out.append(Change("setting", "fingerprint", "", old.get("fingerprint"),
                          new.get("fingerprint")))  # fmt: skip
    return out


def local_root(identity: dict[str, Any]) -> Path | None:
    """The local folder an identity was taken from (its ``model`` as given), if it is one."""
    model = identity.get("model")
    if not model or identity.get("revision"):
        return None
    path = Path(str(model)).expanduser()
    return path if path.is_dir() else None


def baseline_changes(
    manifest: dict[str, Any], identity: dict[str, Any] | None, *, candidate_root: Path | None
) -> dict[str, Any]:
    """The JSON-able "changed since baseline" of a run: ``recorded`` (the baseline has an
    identity), ``changes`` (each with its printed ``line``) and a ``note`` when nothing could be
    compared."""
    recorded = manifest.get("identity")
    if not isinstance(recorded, dict):
        return {"recorded": False, "changes": [], "note": NOT_RECORDED}
    if identity is None:
        return {"recorded": True, "changes": [], "note": "the candidate's identity is unknown"}
    changes = compare(recorded, identity, old_root=local_root(recorded), new_root=candidate_root)
    return {"recorded": True, "changes": [c.to_json() for c in changes], "note": None}


def offline_changes(manifest: dict[str, Any], model_spec: str | None) -> dict[str, Any] | None:
    """A stored run's changes read later (``benchc report``): the files and configs of its
    model folder against the baseline's identity (the backend's settings are not known then,
    so only files and configs are compared); None when the model is no local folder."""
    from benchc.models.identity import config_contents, file_digests

    if not isinstance(manifest.get("identity"), dict):
        return {"recorded": False, "changes": [], "note": NOT_RECORDED} if manifest else None
    folder = Path(str(model_spec)).expanduser() if model_spec else None
    if folder is None or not folder.is_dir():
        return None
    files = {"model": str(model_spec), "files": file_digests(folder),
             "configs": config_contents(folder)}  # fmt: skip
    recorded = {k: v for k, v in manifest["identity"].items() if k != "settings"}
    changes = compare(recorded, files, old_root=local_root(recorded), new_root=folder)
    return {"recorded": True, "changes": [c.to_json() for c in changes], "note": None,
            "scope": "files and configs (the backend's settings were not loaded)"}  # fmt: skip


def summary_lines(doc: dict[str, Any] | None) -> list[str]:
    """The summary's "changed since baseline" lines (none, each change, or why unknown)."""
    if not doc:
        return []
    if doc.get("note"):
        return [f"changed since baseline: unknown: {doc['note']}"]
    changes = doc.get("changes") or []
    if not changes:
        return ["changed since baseline: nothing (files, configs and settings as recorded)"]
    return [f"changed since baseline ({len(changes)}):"] + [f"  {c['line']}" for c in changes]


def look_first(doc: dict[str, Any] | None) -> str | None:
    """A failing case's first pointer: the changed settings (None: nothing changed)."""
    if not doc:
        return None
    if doc.get("note"):
        return f"look first: changed since baseline unknown: {doc['note']}"
    changes = doc.get("changes") or []
    if not changes:
        return None
    shown = "; ".join(c["line"] for c in changes[:LOOK_FIRST])
    more = f" (and {len(changes) - LOOK_FIRST} more in the summary)" if len(changes) > 3 else ""
    return f"look first: changed since baseline: {shown}{more}"


__all__ = [
    "NOT_RECORDED",
    "Change",
    "baseline_changes",
    "compare",
    "diff_values",
    "flatten",
    "fmt",
    "local_root",
    "look_first",
    "offline_changes",
    "summary_lines",
    "text_change",
    "weight_change",
]
