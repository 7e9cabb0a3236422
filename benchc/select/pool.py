"""The candidate pool of a Bench-C-style testbed: several source benchmarks balanced across source
and task family to a target size (Bench-C Sec. IV-A: six VLMEvalKit benchmarks -> 4,000 samples).

Why a rule of its own: the paper balances "across source benchmarks and task families" without
saying how; this module fixes it so a pool can be rebuilt. Sources share the target equally; a
source with fewer samples than its share gives all of them and the rest is shared among the
others (water-filling), and likewise among the task families (``meta[family_key]``) within a
source. Within a family the samples are a seeded random draw, kept in their file order. Every
count (available and taken, per source and family) is returned as the pool's composition, which
``python -m benchc.select`` records in its report.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from benchc.data.fingerprint import fingerprint
from benchc.data.sample import Dataset, Sample

#: Family of samples whose ``meta`` lacks the family key.
NO_FAMILY = "(none)"


def water_fill(capacity: Mapping[str, int], total: int) -> dict[str, int]:
    """Split ``total`` as equally as possible over the keys, none above its capacity.

    Keys that cannot take their share give it to the others; an indivisible remainder goes
    one each to the keys with room left, in sorted key order (deterministic)."""
    if total < 0:
        raise ValueError(f"cannot share a negative total {total}")
    if total > sum(capacity.values()):
        raise ValueError(f"cannot take {total} from {sum(capacity.values())} available")
    quota = dict.fromkeys(capacity, 0)
    left = total
    while left:
        room = sorted(k for k in capacity if quota[k] < capacity[k])
        share = left // len(room)
        if share == 0:  # fewer units than keys with room: one each, in key order
            for k in room[:left]:
                quota[k] += 1
            break
        for k in room:
            step = min(share, capacity[k] - quota[k])
            quota[k] += step
            left -= step
    return quota


def _rng(seed: int, source: str, family: str) -> np.random.Generator:
    digest = hashlib.sha256(f"{seed}\0{source}\0{family}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "big"))


def balance(
    pools: Sequence[Dataset],
    size: int | None = None,
    *,
    family_key: str = "category",
    seed: int = 0,
) -> tuple[Dataset, dict[str, Any]]:
    """One pool of ``size`` samples drawn from ``pools`` (every sample when ``size`` is None),
    balanced over sources (each dataset's name) and, within each, over task families.

    Sample ids are prefixed with their source when several pools are given (ids repeat across
    benchmarks) and ``meta["source"]`` names it. Returns the pool and its composition.
    """
    if not pools:
        raise ValueError("no pools given")
    names = [p.name for p in pools]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise ValueError(f"two pools are both named {dup!r}: sources must have distinct names")
    available = sum(len(p) for p in pools)
    size = available if size is None else size
    if not 1 <= size <= available:
        raise ValueError(
            f"--pool-size {size}: the pools hold {available} samples "
            f"({', '.join(f'{p.name} {len(p)}' for p in pools)}); choose 1..{available}"
        )
    by_source = {p.name: _families(p, family_key) for p in pools}
    per_source = water_fill({s: len(p) for s, p in zip(names, pools, strict=True)}, size)
    chosen: list[Sample] = []
    composition: dict[str, Any] = {
        "size": size,
        "available": available,
        "family_key": family_key,
        "seed": seed,
        "sources": {},
    }
    prefix = len(pools) > 1
    for source, pool in zip(names, pools, strict=True):
        families = by_source[source]
        quota = water_fill({f: len(ix) for f, ix in families.items()}, per_source[source])
        keep: list[int] = []
        for fam, ix in families.items():
            draw = _rng(seed, source, fam).permutation(len(ix))[: quota[fam]]
            keep.extend(ix[j] for j in draw)
        for i in sorted(keep):
            s = pool[i]
            meta = {**s.meta, "source": source}
            chosen.append(replace(s, id=f"{source}-{s.id}" if prefix else s.id, meta=meta))
        composition["sources"][source] = {
            "available": len(pool),
            "taken": per_source[source],
            "families": {
                f: {"available": len(ix), "taken": quota[f]} for f, ix in sorted(families.items())
            },
        }
    name = "+".join(names) if prefix else names[0]
    dataset = Dataset(
        name=f"{name}-pool{size}",
        samples=tuple(chosen),
        fingerprint=fingerprint(chosen),
        source=", ".join(str(p.source or p.name) for p in pools),
    )
    return dataset, composition


def _families(pool: Dataset, key: str) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for i, s in enumerate(pool):
        fam = s.meta.get(key)
        out.setdefault(str(fam) if fam not in (None, "") else NO_FAMILY, []).append(i)
    return out


def composition_markdown(composition: Mapping[str, Any]) -> list[str]:
    """The composition as a Markdown table (source, family, available, taken)."""
    lines = [
        f"Balanced over sources and `{composition['family_key']}` to {composition['size']} of "
        f"{composition['available']} (seed {composition['seed']}).",
        "",
        "| source | family | available | taken |",
        "|---|---|---|---|",
    ]
    for source, c in composition["sources"].items():
        lines.append(f"| {source} | (all) | {c['available']} | {c['taken']} |")
        for fam, f in c["families"].items():
            lines.append(f"| {source} | {fam} | {f['available']} | {f['taken']} |")
    return lines
