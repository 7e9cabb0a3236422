"""A generated corpus of broken datasets (issue 11): each fails with one clear error naming the
file and the sample before any model forward, or is a counted skip under ``--lenient``.

Every dataset is built here in a temporary folder from three valid samples (``a``, ``b``,
``c``) by breaking sample ``b`` one way; nothing binary is committed. The loader-level cases run
in-process (fast); a few cases, and the option values, go through the suite end to end.
"""

# ruff: noqa: E501  (the corpus table below is one dataset per line)
from __future__ import annotations

import base64
import csv
import io
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from PIL import Image

from benchc.data import SampleError, load_dataset, skip_summary
from benchc.data.limits import MAX_TEXT_CHARS
from benchc.suite.inputs import check_for_run

IDS = ("a", "b", "c")
#: The image size of a run on a user dataset (docs/spec.md §1 default).
RUN_IMAGE_SIZE = 448


def png(
    size: tuple[int, int] = (64, 64), mode: str = "RGB", color: object = (90, 30, 200)
) -> bytes:
    buf = io.BytesIO()
    Image.new(mode, size, color).save(buf, format="PNG")
    return buf.getvalue()


def record(sid: str) -> dict:
    return {
        "id": sid,
        "image": f"images/{sid}.png",
        "question": f"What colour is the square in {sid}?",
        "options": ["red", "green", "blue", "purple"],
        "answer": "D",
    }


# -- native JSONL -------------------------------------------------------------------------------
def write_jsonl(root: Path, change: Callable[[dict, Path], None] | None = None) -> Path:
    """``root/ds/samples.jsonl`` + images; ``change(rec_b, folder)`` breaks sample b."""
    folder = root / "ds"
    (folder / "images").mkdir(parents=True)
    lines = []
    for sid in IDS:
        (folder / "images" / f"{sid}.png").write_bytes(png())
        rec = record(sid)
        if sid == "b" and change is not None:
            change(rec, folder)
        lines.append(rec)
    with (folder / "samples.jsonl").open("wb") as fh:
        for rec in lines:
            raw = rec.pop("_raw", None)
            fh.write(raw if raw is not None else json.dumps(rec).encode("utf-8"))
            fh.write(b"\n")
    return folder


def image_file(data: bytes) -> Callable[[dict, Path], None]:
    def change(rec: dict, folder: Path) -> None:
        (folder / "images" / "b.png").write_bytes(data)

    return change


def set_field(key: str, value: object) -> Callable[[dict, Path], None]:
    def change(rec: dict, folder: Path) -> None:
        rec[key] = value

    return change


def outside_file(rel: str, key: str = "image") -> Callable[[dict, Path], None]:
    """A real image outside the dataset folder, referenced by ``rel``."""

    def change(rec: dict, folder: Path) -> None:
        (folder.parent / "outside.png").write_bytes(png())
        if key == "mask":
            rec["meta"] = {"region": {"mask": rel}}
        else:
            rec[key] = rel.replace("ABS", str(folder.parent / "outside.png"))

    return change


def symlink_outside(rec: dict, folder: Path) -> None:
    (folder.parent / "outside.png").write_bytes(png())
    (folder / "images" / "b.png").unlink()
    os.symlink(folder.parent / "outside.png", folder / "images" / "b.png")


def raw_line(raw: bytes) -> Callable[[dict, Path], None]:
    def change(rec: dict, folder: Path) -> None:
        rec["_raw"] = raw

    return change


def image_dir(rec: dict, folder: Path) -> None:
    (folder / "images" / "b.png").unlink()
    (folder / "images" / "b.png").mkdir()


def big_png(rec: dict, folder: Path) -> None:
    # 12000 x 12000 (144 MP; RGB-decoded it would be ~430 MB): only its header may be read.
    Image.new("1", (12000, 12000)).save(folder / "images" / "b.png")


# -- VLMEvalKit TSV -------------------------------------------------------------------------------
TSV_HEADER = ["index", "image", "image_path", "question", "A", "B", "C", "D", "answer", "category"]


def write_tsv(
    root: Path, change: Callable[[list[str], Path], list[str]] | None = None, bom: bool = False
) -> Path:
    folder = root / "tsv"
    (folder / "img").mkdir(parents=True)
    buf = io.StringIO(newline="")
    w = csv.writer(buf, delimiter="\t", lineterminator="\n")
    w.writerow(TSV_HEADER)
    lines = [buf.getvalue()]
    for sid in IDS:
        (folder / "img" / f"{sid}.png").write_bytes(png())
        row = [sid, "", f"img/{sid}.png", f"Colour of {sid}?", "red", "green", "blue", "purple"]
        row += ["D", "colour"]
        if sid == "b" and change is not None:
            row = change(row, folder)
        buf = io.StringIO(newline="")
        csv.writer(buf, delimiter="\t", lineterminator="\n").writerow(row)
        lines.append(buf.getvalue())
    text = "".join(lines)
    (folder / "data.tsv").write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))
    return folder / "data.tsv"


def tsv_cell(column: str, value: str) -> Callable[[list[str], Path], list[str]]:
    def change(row: list[str], folder: Path) -> list[str]:
        row[TSV_HEADER.index(column)] = value.replace("ABS", str(folder.parent / "outside.png"))
        (folder.parent / "outside.png").write_bytes(png())
        return row

    return change


def tsv_truncated(row: list[str], folder: Path) -> list[str]:
    return row[:6]  # the file was cut in the middle of this row's options


# -- Hugging Face save_to_disk ---------------------------------------------------------------------
def write_hf(root: Path, image_b: dict) -> Path:
    import datasets

    (root / "outside.png").write_bytes(png())
    folder = root / "hfds"
    images = [{"bytes": png(), "path": None}, image_b, {"bytes": png(), "path": None}]
    ds = datasets.Dataset.from_dict(
        {
            "id": list(IDS),
            "image": images,
            "question": ["Colour?"] * 3,
            "options": [["red", "green", "blue", "purple"]] * 3,
            "answer": ["D"] * 3,
        },
        features=datasets.Features(
            {
                "id": datasets.Value("string"),
                # a plain struct: datasets would embed the bytes of an Image feature's file
                "image": {"bytes": datasets.Value("binary"), "path": datasets.Value("string")},
                "question": datasets.Value("string"),
                "options": datasets.List(datasets.Value("string")),
                "answer": datasets.Value("string"),
            }
        ),
    )
    ds.save_to_disk(str(folder))
    return folder


@dataclass(frozen=True)
class Broken:
    """One broken dataset: how to build it, the error kind, and what the message must say."""

    name: str
    build: Callable[[Path], Path]
    kind: str
    says: str
    #: The sample the error names (None: the line could not be parsed into a record).
    sample: str | None = "b"


def jsonl(change: Callable[[dict, Path], None]) -> Callable[[Path], Path]:
    return lambda root: write_jsonl(root, change)


def tsv(change: Callable[[list[str], Path], list[str]]) -> Callable[[Path], Path]:
    return lambda root: write_tsv(root, change)


LONG = "x" * (MAX_TEXT_CHARS + 1)
# one row per broken dataset: a table reads better unwrapped
CORPUS = [
    # paths escaping the dataset folder (issue item 1)
    Broken("jsonl-image-dotdot", jsonl(outside_file("../outside.png")), "path_outside_root", "outside the dataset folder"),
    Broken("jsonl-image-absolute", jsonl(outside_file("ABS")), "path_outside_root", "outside the dataset folder"),
    Broken("jsonl-image-symlink-out", jsonl(symlink_outside), "path_outside_root", "outside the dataset folder"),
    Broken("jsonl-mask-dotdot", jsonl(outside_file("../outside.png", key="mask")), "path_outside_root", "region mask path"),
    Broken("jsonl-image-etc-passwd", jsonl(set_field("image", "../../../../etc/passwd")), "path_outside_root", "outside the dataset folder"),
    Broken("tsv-image-path-dotdot", tsv(tsv_cell("image_path", "../outside.png")), "path_outside_root", "outside the dataset folder"),
    Broken("tsv-image-path-absolute", tsv(tsv_cell("image_path", "ABS")), "path_outside_root", "outside the dataset folder"),
    Broken("hf-image-path-absolute", lambda root: write_hf(root, {"bytes": None, "path": str(root / "outside.png")}), "path_outside_root", "outside the dataset folder"),
    # size limits (item 2)
    Broken("question-5MB", jsonl(set_field("question", "why " * 1_300_000)), "text_too_long", "above the limit"),
    Broken("question-20k-chars", jsonl(set_field("question", "q" * 20_000)), "text_too_long", "above the limit"),
    Broken("option-too-long", jsonl(set_field("options", ["a", LONG, "c", "d"])), "text_too_long", "option B"),
    Broken("hint-too-long", jsonl(set_field("hint", LONG)), "text_too_long", "longest field: 'hint'"),
    Broken("image-12000x12000", jsonl(big_png), "image_too_large", "144 MP, above the 64 MP limit"),
    Broken("image-1x1", jsonl(image_file(png((1, 1)))), "image_too_small", "1x1 px"),
    Broken("image-2000x4", jsonl(image_file(png((2000, 4)))), "image_too_small", "2000x4"),
    Broken("image-2000x40-too-thin-at-448", jsonl(image_file(png((2000, 40)))), "image_too_thin", "becomes 448x9 px"),
    # image tokens in the text (item 3)
    Broken("question-image-token", jsonl(set_field("question", "What is <image> here?")), "image_token_in_text", "'<image>'"),
    Broken("option-qwen-image-pad", jsonl(set_field("options", ["<|image_pad|>", "b", "c", "d"])), "image_token_in_text", "option A"),
    Broken("hint-idefics-token", jsonl(set_field("hint", "<fake_token_around_image>")), "image_token_in_text", "field 'hint'"),
    Broken("tsv-question-image-token", tsv(tsv_cell("question", "see <image>")), "image_token_in_text", "'<image>'"),
    # messages that used to be unclear (item 7)
    Broken("image-garbage-bytes", jsonl(image_file(b"this is not an image at all")), "undecodable_image", "not a known image format"),
    Broken("image-truncated-png", jsonl(image_file(png()[:60])), "undecodable_image", "cannot be decoded"),
    Broken("answer-index-7-of-4", jsonl(set_field("answer", 7)), "answer_out_of_range", "answer index 7 is out of range for 4 options"),
    Broken("answer-letter-E-of-4", jsonl(set_field("answer", "E")), "answer_out_of_range", "answer 'E' is out of range"),
    Broken("tsv-truncated-row", tsv(tsv_truncated), "bad_record", "truncated row"),
    # the rest of the loader checks, in the same corpus
    Broken("not-json", jsonl(raw_line(b'{"id": "b", "image": ')), "bad_record", "not valid JSON", None),
    Broken("not-utf8", jsonl(raw_line(b'{"id": "b", "question": "\xff\xfe"}')), "non_utf8", "not UTF-8"),
    Broken("missing-image-file", jsonl(set_field("image", "images/nope.png")), "missing_image", "not found"),
    Broken("image-is-a-folder", jsonl(image_dir), "missing_image", "is not a file"),
    Broken("one-option", jsonl(set_field("options", ["only"])), "bad_option_count", "1 options"),
    Broken("27-options", jsonl(set_field("options", [f"o{i}" for i in range(27)])), "bad_option_count", "27 options"),
    Broken("duplicate-id", jsonl(set_field("id", "a")), "duplicate_id", "id already used at", "a"),
    Broken("empty-question", jsonl(set_field("question", "  ")), "empty_question", "'question' is empty"),
    Broken("region-outside-image", jsonl(set_field("meta", {"region": [0, 0, 500, 10]})), "bad_region", "outside the 64x64 image"),
    Broken("mask-missing", jsonl(set_field("meta", {"region": {"mask": "masks/b.png"}})), "bad_region", "not found"),
    Broken("tsv-bad-base64", tsv(tsv_cell("image", "@" * 100)), "undecodable_image", "not valid base64"),
    Broken("tsv-option-gap", tsv(tsv_cell("B", "")), "bad_record", "option B is empty but option C is given"),
    Broken("tsv-no-answer", tsv(tsv_cell("answer", "")), "bad_answer", "no answer given"),
]  # fmt: skip


def load_for_run(path: Path, *, lenient: bool = False):
    """What the suite does before the model loads: load, then check against the image size."""
    return check_for_run(load_dataset(path, lenient=lenient), RUN_IMAGE_SIZE, lenient=lenient)


def test_the_corpus_is_large_and_covers_every_new_kind():
    assert len(CORPUS) >= 30
    kinds = {b.kind for b in CORPUS}
    assert {
        "path_outside_root",
        "text_too_long",
        "image_too_large",
        "image_too_small",
        "image_too_thin",
        "image_token_in_text",
    } <= kinds


@pytest.mark.parametrize("broken", CORPUS, ids=[b.name for b in CORPUS])
def test_one_clear_error_naming_file_and_sample(broken, tmp_path):
    path = broken.build(tmp_path)
    with pytest.raises(SampleError) as info:
        load_for_run(path)
    err = info.value
    message = str(err)
    assert err.kind == broken.kind, message
    assert broken.says in message, message
    assert err.location.sample_id == broken.sample, message
    assert err.location.file.startswith(str(tmp_path)), message
    if err.location.line is not None:
        assert f"{err.location.unit} {err.location.line}" in message
    assert "BytesIO" not in message and "Traceback" not in message
    assert "\n" not in message  # one line


@pytest.mark.parametrize("broken", CORPUS, ids=[b.name for b in CORPUS])
def test_lenient_skips_and_counts_exactly_the_broken_sample(broken, tmp_path):
    path = broken.build(tmp_path)
    ds = load_for_run(path, lenient=True)
    assert ds.ids == ["a", "c"]  # (a duplicate of "a" is the one dropped)
    assert skip_summary(ds.skipped) == {broken.kind: 1}


def test_a_huge_image_is_rejected_from_its_header_without_a_bomb_warning(tmp_path):
    import warnings

    path = write_jsonl(tmp_path, big_png)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with pytest.raises(SampleError, match="image_too_large"):
            load_dataset(path)
    assert not [w for w in seen if issubclass(w.category, Image.DecompressionBombWarning)]


def test_paths_outside_the_root_load_with_the_opt_in(tmp_path):
    for build in (outside_file("../outside.png"), outside_file("ABS"), symlink_outside):
        root = tmp_path / build.__name__ / str(id(build))
        root.mkdir(parents=True)
        ds = load_dataset(write_jsonl(root, build), allow_outside_root=True)
        assert ds.ids == list(IDS)


def test_a_symlink_inside_the_root_is_fine(tmp_path):
    def inside(rec: dict, folder: Path) -> None:
        os.symlink(folder / "images" / "a.png", folder / "images" / "b-link.png")
        rec["image"] = "images/b-link.png"

    assert load_dataset(write_jsonl(tmp_path, inside)).ids == list(IDS)


def test_a_utf8_bom_in_the_tsv_header_is_accepted(tmp_path):
    ds = load_dataset(write_tsv(tmp_path, bom=True))
    assert ds.ids == list(IDS)


def test_image_token_check_of_the_loaded_model(tmp_path):
    """What only the model knows: its own special tokens, and its context in tokens."""
    from benchc.models import load_backend
    from benchc.suite.inputs import check_for_model

    backend = load_backend(str(Path(__file__).resolve().parents[2] / "fixtures" / "tiny-vlm"))
    special = load_dataset(write_jsonl(tmp_path / "s", set_field("question", "<|im_start|>hi")))
    with pytest.raises(SampleError, match=r"sample 'b'.*special token '<\|im_start\|>'"):
        check_for_model(special, backend)
    long = load_dataset(write_jsonl(tmp_path / "l", set_field("question", "why ze " * 1500)))
    with pytest.raises(SampleError, match=r"sample 'b'.*longer than the model's context of 512"):
        check_for_model(long, backend)
    kept = check_for_model(long, backend, lenient=True)
    assert kept.ids == ["a", "c"] and skip_summary(kept.skipped) == {"prompt_too_long": 1}


def test_tsv_image_cell_base64_roundtrip_still_loads(tmp_path):
    """The size check on base64 cells leaves ordinary embedded images alone."""
    encoded = base64.b64encode(png()).decode()
    assert load_dataset(write_tsv(tmp_path, tsv_cell("image", encoded))).ids == list(IDS)
