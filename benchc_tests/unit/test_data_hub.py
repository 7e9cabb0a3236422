"""Hub datasets through ``datasets.load_dataset``: a Hub-style folder of parquet files with an
image column, a column mapping (``--dataset-args``), Hub ids routed to the same call, and one
clear error for bad columns. Offline: the files are written here."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from benchc.data import load_dataset, save_jsonl
from benchc.data.hf import parse_columns, parse_hub_spec
from benchc.data.synthetic import generate
from benchc.spec import LETTERS
from benchc.suite.config import SuiteConfig
from benchc.suite.session import open_dataset

datasets = pytest.importorskip("datasets")

#: The mapping a Hub dataset with other column names needs.
MAPPING = "id=qid,image=img,question=prompt,options=A|B|C|D,answer=label,category=cat"


def _write_hub_folder(folder: Path, samples: dict[str, list]) -> Path:
    """``folder/data/<split>-00000-of-00001.parquet`` per split, as the Hub stores them: the
    image column an ``Image`` feature (bytes in the parquet, the feature in its metadata)."""
    features = datasets.Features(
        {
            "qid": datasets.Value("string"),
            "img": datasets.Image(),
            "prompt": datasets.Value("string"),
            **{c: datasets.Value("string") for c in "ABCD"},
            "label": datasets.Value("int64"),
            "cat": datasets.Value("string"),
        }
    )
    (folder / "data").mkdir(parents=True)
    for split, rows in samples.items():
        table = {
            "qid": [s.id for s in rows],
            "img": [{"bytes": s.image_bytes, "path": None} for s in rows],
            "prompt": [s.question for s in rows],
            **{c: [s.options[i] for s in rows] for i, c in enumerate("ABCD")},
            "label": [s.answer for s in rows],
            "cat": [s.category for s in rows],
        }
        ds = datasets.Dataset.from_dict(table, features=features)
        ds.to_parquet(str(folder / "data" / f"{split}-00000-of-00001.parquet"))
    return folder


@pytest.fixture(scope="module")
def four_option_samples():
    return [s for s in generate(40, 11) if s.k == 4][:12]


@pytest.fixture(scope="module")
def hub_folder(tmp_path_factory, four_option_samples) -> Path:
    root = tmp_path_factory.mktemp("hub") / "org" / "mmbench-mini"
    rows = four_option_samples
    return _write_hub_folder(root, {"test": rows[:8], "dev": rows[8:]})


def test_hub_style_parquet_with_a_column_mapping(hub_folder, four_option_samples, tmp_path):
    ds = load_dataset(f"{hub_folder}::test", columns=parse_columns(MAPPING))
    want = four_option_samples[:8]
    assert ds.ids == [s.id for s in want]
    for got, s in zip(ds, want, strict=True):
        assert got.image_bytes == s.image_bytes  # undecoded: the original bytes
        assert (got.question, got.options, got.answer) == (s.question, s.options, s.answer)
        assert got.category == s.category
    assert ds.name == "mmbench-mini-test" and ds.source.endswith("[test]")
    # the fingerprint is the content's: the same samples (with the one meta field carried) as
    # native JSONL hash the same, and a second load is identical (deterministic)
    carried = [replace(s, meta={"category": s.category}) for s in want]
    save_jsonl(carried, tmp_path / "native")
    assert ds.fingerprint == load_dataset(tmp_path / "native").fingerprint
    assert load_dataset(f"{hub_folder}::test", columns=parse_columns(MAPPING)).fingerprint == (
        ds.fingerprint
    )
    dev = load_dataset(f"{hub_folder}::dev", columns=parse_columns(MAPPING))
    assert dev.ids == [s.id for s in four_option_samples[8:]]


def test_several_splits_need_one_named(hub_folder):
    with pytest.raises(ValueError, match=r"holds splits \['dev', 'test'\]|\['test', 'dev'\]"):
        load_dataset(str(hub_folder), columns=parse_columns(MAPPING))


def test_a_hub_id_goes_through_load_dataset(hub_folder, monkeypatch):
    """``org/name:config:split`` is passed to ``datasets.load_dataset`` as repo, config and
    split (here answered from the local clone, as the Hub's cache would)."""
    calls = []
    real = datasets.load_dataset

    def load(repo, config=None, **kw):
        calls.append((repo, config, kw))
        return real(str(hub_folder), **kw)

    monkeypatch.setattr(datasets, "load_dataset", load)
    ds = load_dataset("org/mmbench-mini::test", columns=parse_columns(MAPPING))
    assert calls == [("org/mmbench-mini", None, {"split": "test"})]
    assert len(ds) == 8 and ds.name == "mmbench-mini-test"
    load_dataset("org/mmbench-mini:en:dev", columns=parse_columns(MAPPING))
    assert calls[-1] == ("org/mmbench-mini", "en", {"split": "dev"})


def test_bad_columns_are_one_error_naming_them(hub_folder):
    bad = "image=picture,question=prompt,options=A|B|X,answer=label"
    with pytest.raises(ValueError) as info:
        load_dataset(f"{hub_folder}::test", columns=parse_columns(bad))
    message = str(info.value)
    assert "names columns the dataset does not have: image='picture', options='X'" in message
    assert "'prompt'" in message  # the columns it has are listed
    with pytest.raises(ValueError) as info:
        load_dataset(f"{hub_folder}::test")  # the defaults find no image, question, answer
    message = str(info.value)
    assert "no column for image (looked for image), question (looked for question)" in message
    assert "answer (looked for answer|answer_index|label)" not in message  # label exists
    assert "--dataset-args image=<column>" in message


def test_parse_errors_name_the_pair():
    with pytest.raises(ValueError, match=r"unknown field 'picture' in 'picture=img'"):
        parse_columns("picture=img")
    with pytest.raises(ValueError, match=r"expected field=column, got 'image'"):
        parse_columns("image")
    assert parse_hub_spec("lmms-lab/MMBench") == ("lmms-lab/MMBench", None, None)
    assert parse_hub_spec("lmms-lab/MMBench:en:dev") == ("lmms-lab/MMBench", "en", "dev")
    assert parse_hub_spec("not a/hub id") is None


def test_the_suite_reads_dataset_args(hub_folder):
    cfg = SuiteConfig(dataset=f"{hub_folder}::test", dataset_args=parse_columns(MAPPING))
    ds = open_dataset(cfg)
    assert len(ds) == 8 and all(s.answer_letter in LETTERS[:4] for s in ds)


def test_a_relative_hub_folder_keeps_its_suffix(hub_folder):
    """``--dataset=org/mmbench-mini::test`` relative to the rootdir: the folder is made absolute
    (every xdist worker agrees), the suffix kept; a Hub id stays as given."""
    root = hub_folder.parent.parent
    get = {"benchc_dataset": "org/mmbench-mini::test"}.get
    assert SuiteConfig.from_options(get, rootdir=root).dataset == f"{hub_folder}::test"
    get = {"benchc_dataset": "lmms-lab/MMBench:en:dev"}.get
    assert SuiteConfig.from_options(get, rootdir=root).dataset == "lmms-lab/MMBench:en:dev"
