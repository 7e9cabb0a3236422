"""The Bench-C candidate pool: several VLMEvalKit-format sources balanced over source and task
family to a target size (Bench-C Sec. IV-A), its composition recorded by ``benchc.select``."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchc.data import synthetic as syn
from benchc.data.loaders import load_dataset
from benchc.data.tsv import save_tsv
from benchc.select.pool import balance, water_fill
from benchc.select.report import REPORT_JSON, REPORT_MD
from benchc_tests.unit.test_select_pipeline import CORR, fakebright  # noqa: F401


@given(st.dictionaries(st.text("abcdef", min_size=1, max_size=3), st.integers(0, 40), min_size=1),
       st.data())  # fmt: skip
def test_water_fill_is_an_equal_split_under_capacities(capacity, data) -> None:
    total = data.draw(st.integers(0, sum(capacity.values())))
    quota = water_fill(capacity, total)
    assert sum(quota.values()) == total
    assert all(0 <= quota[k] <= capacity[k] for k in capacity)
    # max-min fair: a key below its capacity has at most one less than any other key
    for k in capacity:
        if quota[k] < capacity[k]:
            assert all(quota[k] >= quota[j] - 1 for j in capacity)
    with pytest.raises(ValueError, match="cannot take"):
        water_fill(capacity, sum(capacity.values()) + 1)


#: Three small sources in VLMEvalKit's TSV format: (name, {category: count}).
SOURCES = (
    ("SEEDBench2_Plus", {"chart": 20, "map": 5, "web": 5}),
    ("LEGO_Puzzles", {"rotation": 6}),
    ("MMStar", {"coarse perception": 20, "math": 5}),
)


def _tsvs(tmp_path):
    paths, seed = [], 0
    for name, cats in SOURCES:
        samples = []
        for cat, count in cats.items():
            for s in syn.generate(count, seed=seed, size=64):
                samples.append(replace(s, meta={**s.meta, "category": cat}))
            seed += 1
        samples = [replace(s, id=str(i)) for i, s in enumerate(samples)]  # ids repeat
        paths.append(save_tsv(samples, tmp_path / f"{name}.tsv"))
    return paths


def test_sources_and_families_share_the_target_equally(tmp_path) -> None:
    pools = [load_dataset(p) for p in _tsvs(tmp_path)]
    pool, comp = balance(pools, 36, seed=3)
    assert len(pool) == 36 and comp["size"] == 36 and comp["available"] == 61
    taken = {s: c["taken"] for s, c in comp["sources"].items()}
    assert taken == {"SEEDBench2_Plus": 15, "LEGO_Puzzles": 6, "MMStar": 15}
    fams = {
        s: {f: v["taken"] for f, v in c["families"].items()} for s, c in comp["sources"].items()
    }
    assert fams["SEEDBench2_Plus"] == {"chart": 5, "map": 5, "web": 5}
    assert fams["MMStar"] == {"coarse perception": 10, "math": 5}
    # ids carry their source (the files reuse 0, 1, ...), meta names it, file order is kept
    assert len(set(pool.ids)) == 36 and pool.ids[0].startswith("SEEDBench2_Plus-")
    assert {s.meta["source"] for s in pool} == {name for name, _ in SOURCES}
    seed_ids = [int(i.split("-")[1]) for i in pool.ids if i.startswith("SEEDBench2_Plus-")]
    assert seed_ids == sorted(seed_ids)
    again, _ = balance(pools, 36, seed=3)
    other, _ = balance(pools, 36, seed=4)
    assert again.ids == pool.ids and again.fingerprint == pool.fingerprint
    assert other.ids != pool.ids
    with pytest.raises(ValueError, match="the pools hold 61 samples"):
        balance(pools, 62)
    with pytest.raises(ValueError, match="both named"):
        balance([pools[0], pools[0]], 4)


def test_select_takes_several_pools_and_records_the_composition(tmp_path, capsys, fakebright):  # noqa: F811
    from benchc.select.cli import main

    paths = _tsvs(tmp_path)
    argv = [a for p in paths for a in ("--pool", str(p))]
    argv += ["--pool-size", "18", "--selector", "fakebright:0", "--selector", "fakebright:1",
             "--corruptions", ",".join(CORR), "--no-cache", "--text-embed", "tfidf",
             "--out", str(tmp_path / "sel")]  # fmt: skip
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out.splitlines()[0])
    assert summary["n_pool"] == 18
    report = json.loads((tmp_path / "sel" / REPORT_JSON).read_text())
    comp = report["run"]["pool_composition"]
    assert {s: c["taken"] for s, c in comp["sources"].items()} == {
        "SEEDBench2_Plus": 6, "LEGO_Puzzles": 6, "MMStar": 6,
    }  # fmt: skip
    md = (tmp_path / "sel" / REPORT_MD).read_text()
    assert "## Pool composition" in md and "| LEGO_Puzzles | rotation | 6 | 6 |" in md
    too_many = [*argv[:6], "--pool-size", "99", "--selector", "fakebright:0"]
    with pytest.raises(SystemExit, match="the pools hold 61"):
        main([*too_many, "--out", str(tmp_path / "sel2")])
