"""Gating on results computed elsewhere: the model as a run reported it, and ``--from-store``.

A CPU-only CI job gates on what a GPU cluster computed: it loads no weights (:class:`StandIn`
carries the name, fingerprint, batch size and capabilities the run recorded), takes the run key
from the store's manifest (the cluster's torch and device class, not this machine's), lists
the chunks the store lacks in one line, and computes nothing. A store given as a URL other than
a local path is read through fsspec (``file://``, ``s3://``, ``gs://``, ``memory://``...): the
chosen runs' files are copied into a local folder first, so everything else reads files.
:func:`push` (``benchc push``) is the other direction: the cluster's store copied to a URL.
"""

from __future__ import annotations

import atexit
import contextlib
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchc.fsutil import slug
from benchc.models.base import Backend, BatchOutput, Capabilities, Query
from benchc.results import RunKey, StoreError
from benchc.results.reader import SAMPLES
from benchc.results.store import describe_chunks, read_manifest

if TYPE_CHECKING:
    from benchc.data.sample import Dataset
    from benchc.suite.config import SuiteConfig
    from benchc.suite.run import SuiteRun
    from benchc.suite.session import SuiteSession


class StandIn(Backend):
    """The model as a run reported it; it computes nothing (``forward`` refuses)."""

    def __init__(
        self,
        *,
        name: str,
        fingerprint: str,
        batch_size: int,
        capabilities: Mapping[str, Any] | None = None,
        environment: Mapping[str, Any] | None = None,
        where: str,
    ) -> None:
        self.name = name
        self.fingerprint = fingerprint
        self.batch_size = int(batch_size)
        self.capabilities = Capabilities(**dict(capabilities or {}))
        #: The environment the results were computed in (:func:`benchc.provenance.environment`).
        self.recorded_environment = dict(environment or {})
        self.where = where
        #: The summary's lines (set by whoever computed or checked the results).
        self.lines: list[str] = []

    def forward(self, queries: Sequence[Query], **kwargs: Any) -> BatchOutput:
        raise RuntimeError(f"{self.name}: results come from {self.where}; nothing is computed here")

    @property
    def local_cpu(self) -> bool:
        return True  # no device to keep busy: no threads building batches ahead

    def notes(self) -> list[str]:
        return list(self.lines)


def stand_in_for(key: RunKey, meta: Mapping[str, Any], where: str) -> StandIn:
    """The stand-in of the model a stored run's manifest describes."""
    return StandIn(
        name=key.model_name,
        fingerprint=key.model_fingerprint,
        batch_size=int(key.settings["batch_size"]),
        capabilities=meta.get("capabilities"),
        environment=meta.get("environment"),
        where=where,
    )


# -- finding the runs of a store ---------------------------------------------------------------
def stored_runs(root: Path) -> list[tuple[RunKey, dict[str, Any]]]:
    """Every run folder ``root/<model>/<dataset>-<digest>`` with an intact manifest."""
    out = []
    for manifest in sorted(Path(root).glob("*/*/manifest.json")):
        try:
            meta = read_manifest(manifest.parent)
        except StoreError:
            continue
        key = RunKey(
            model_fingerprint=meta["model_fingerprint"],
            dataset_fingerprint=meta["dataset_fingerprint"],
            settings=meta.get("settings", {}),
            model_name=meta.get("model_name", "model"),
            dataset_name=meta.get("dataset_name", "dataset"),
        )
        if (Path(root) / key.dirname()) == manifest.parent:  # written by this key
            out.append((key, meta))
    return out


def model_matches(meta: Mapping[str, Any], key: RunKey, model: str) -> bool:
    """The run is of ``--model``: the same spec, or the same name (a checkpoint folder mounted
    at another path on the cluster than here keeps its folder name)."""
    names = {slug(model), slug(Path(model).name)}
    return meta.get("model_spec") == model or slug(key.model_name) in names


def pick_run(
    runs: Sequence[tuple[RunKey, dict[str, Any]]], cfg: SuiteConfig, dataset: Dataset, store: str
) -> tuple[RunKey, dict[str, Any]]:
    """The one stored run of ``--model`` on ``dataset`` under this command's settings; a
    :class:`StoreError` naming what the store holds otherwise."""
    wanted = {"seed": cfg.seed, "image_size": cfg.resolved_image_size()}
    if cfg.batch_size is not None:
        wanted["batch_size"] = cfg.batch_size
    found = [
        (key, meta)
        for key, meta in runs
        if key.dataset_fingerprint == dataset.fingerprint
        and model_matches(meta, key, cfg.model)
        and all(key.settings.get(k) == v for k, v in wanted.items())
    ]
    if len(found) == 1:
        return found[0]
    if not found:
        held = ", ".join(sorted({k.dirname() for k, _ in runs})) or "none"
        raise StoreError(
            f"--from-store {store}: no run of --model {cfg.model!r} on {dataset.name} "
            f"(fingerprint {dataset.fingerprint[:12]}, seed {cfg.seed}, image size "
            f"{wanted['image_size']}); runs there: {held}"
        )
    dirs = ", ".join(k.dirname() for k, _ in found)
    raise StoreError(
        f"--from-store {store}: several runs of --model {cfg.model!r} on {dataset.name} "
        f"match ({dirs}); pass --batch-size, or gate on a store holding one of them"
    )


# -- a store at a URL --------------------------------------------------------------------------
def is_url(location: str) -> bool:
    return "://" in str(location)


def local_copy(url: str, pick: Any = None) -> Path:
    """The runs of the store at fsspec ``url`` in a local folder (removed at exit): every
    manifest, then the stored files of the run folders ``pick(manifest_dirs)`` keeps (all by
    default). Needs fsspec (installed with datasets / huggingface_hub)."""
    try:
        import fsspec
    except ImportError:  # pragma: no cover - fsspec comes with the core dependencies
        raise StoreError(
            f"--from-store {url}: reading a URL needs fsspec (pip install fsspec)"
        ) from None
    try:
        fs, root = fsspec.core.url_to_fs(url)
        files = [p for p in fs.find(root) if p.endswith((".npz", "manifest.json"))]
    except (OSError, ValueError, ImportError) as exc:
        raise StoreError(f"--from-store {url}: cannot be listed: {exc}") from None
    local = Path(tempfile.mkdtemp(prefix="benchc-from-store-"))
    atexit.register(shutil.rmtree, local, True)
    root = root.rstrip("/")
    for path in files:
        rel = path[len(root) :].lstrip("/")
        if "/.locks/" in f"/{rel}" or "/claims/" in f"/{rel}":
            continue
        dest = local / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(fs.cat_file(path))
    return local


def _stored_files(root: Path) -> list[Path]:
    """The files of the run folders under ``root`` another machine reads: sample tables,
    entries and chunk parts (``.npz``), then manifests; never locks, claims or a writer's
    temporary files."""
    from benchc.results.reader import find_runs

    runs = find_runs(root)
    files: list[Path] = []
    for run in runs:
        for path in sorted(run.rglob("*.npz")):
            rel = path.relative_to(run).parts
            if path.name.startswith(".") or ".locks" in rel or "claims" in rel:
                continue
            files.append(path)
    return files + [run / "manifest.json" for run in runs]


def push(root: Path, url: str) -> tuple[int, int]:
    """Copy the store at ``root`` to ``url`` with the store its scheme names
    (:func:`store_for`); returns (files copied, files kept)."""
    return store_for(url).write(Path(root), url)


def store_for(url: str) -> Any:
    """The results store of ``url``'s scheme: the ``benchc.stores`` entry point of that name,
    else ``fsspec`` (any scheme fsspec opens)."""
    from benchc.registry import STORES

    scheme = str(url).partition("://")[0]
    return STORES.load(scheme if scheme in STORES else "fsspec")


class FsspecStore:
    """The ``fsspec`` results store (entry point of ``benchc.stores``): ``--from-store URL``
    and ``benchc push`` for every URL fsspec opens (``file://``, ``s3://``, ``gs://``...)."""

    def read(self, url: str) -> Path:
        return local_copy(url)

    def write(self, root: Path, url: str) -> tuple[int, int]:
        return push_fsspec(root, url)


FSSPEC = FsspecStore()


def push_fsspec(root: Path, url: str) -> tuple[int, int]:
    """Copy the store at ``root`` to fsspec ``url`` (``s3://``, ``gs://``, ``file://``...), so
    a CPU-only job gates on it with ``--from-store URL``: entries and parts first, manifests
    last (a reader never finds a manifest whose files are still on their way). An entry
    already there with the same size is kept (stored entries never change once written; a
    recomputed one has the same bytes); manifests are always copied. Returns (files copied,
    files kept)."""
    try:
        import fsspec
    except ImportError:  # pragma: no cover - fsspec comes with the core dependencies
        raise StoreError(f"{url}: writing a URL needs fsspec (pip install fsspec)") from None
    root = Path(root)
    files = _stored_files(root)
    if not files:
        raise StoreError(f"{root}: no benchc results folder (manifest.json) found")
    try:
        fs, base = fsspec.core.url_to_fs(url)
    except (ValueError, ImportError) as exc:
        raise StoreError(f"{url}: not a store location fsspec can open: {exc}") from None
    base = base.rstrip("/")
    copied = kept = 0
    for path in files:
        dest = f"{base}/{path.relative_to(root).as_posix()}"
        try:
            if path.suffix == ".npz" and fs.exists(dest) and fs.size(dest) == path.stat().st_size:
                kept += 1
                continue
            fs.makedirs(dest.rsplit("/", 1)[0], exist_ok=True)
            fs.pipe_file(dest, path.read_bytes())
        except OSError as exc:
            raise StoreError(f"{url}: cannot write {dest}: {exc}") from None
        copied += 1
    return copied, kept


# -- --from-store ------------------------------------------------------------------------------
@contextlib.contextmanager
def executor(state: SuiteSession, *, vsi: bool) -> Iterator[Callable[[dict], None]]:
    """The ``stored`` executor (entry point of ``benchc.executors``, chosen by ``--from-store``):
    the results are read from a finished store; yields what checks the entries the cases read
    are all stored."""
    open_store(state, [state.dataset, *([vsi_dataset(state)] if vsi else [])])
    yield lambda entries: check_stored(state, entries)


def open_store(state: SuiteSession, datasets: Iterable[Dataset]) -> None:
    """Point ``state`` at the stored runs of ``--from-store`` for ``datasets``: run keys from
    the manifests, the stand-in model, nothing written. :class:`StoreError` when a run is
    absent or ambiguous."""
    location = str(state.cfg.from_store)
    root = store_for(location).read(location) if is_url(location) else Path(location)
    if not root.is_dir():
        raise StoreError(f"--from-store {location}: no such folder")
    runs = stored_runs(root)
    first: tuple[RunKey, Mapping[str, Any]] | None = None
    for dataset in datasets:
        key, meta = pick_run(runs, state.cfg, dataset, location)
        state.run_keys[dataset.fingerprint] = key
        first = first or (key, meta)
    assert first is not None, "open_store needs a dataset"
    state.cfg = replace(state.cfg, results_dir=root)
    state.record = False
    state._backend = stand_in_for(*first, f"--from-store {location}")


def check_stored(state: SuiteSession, entries: Mapping[str, Sequence[str]]) -> None:
    """Every chunk of ``entries`` (run tag -> names) is stored, and the stored sample table is
    this dataset's; else one :class:`StoreError` listing what is missing."""
    runs = {"grid": lambda: state.run, "vsi": lambda: state.vsi_run}
    missing, chunks = [], 0
    for tag, names in entries.items():
        run = runs[tag]()
        same_samples(run)
        n = len(run.dataset)
        for name in dict.fromkeys(names):
            lacking = run.store.missing_chunks(name, n, run.chunk_rows)
            if lacking:
                chunks += len(lacking)
                missing.append(f"{name} {describe_chunks(lacking)}")
    if missing:
        raise StoreError(
            f"--from-store {state.cfg.from_store}: {chunks} chunk(s) not stored: "
            + "; ".join(missing)
            + " (compute them first, e.g. with --executor=ray on this store)"
        )
    state.backend.lines.append(  # type: ignore[attr-defined]
        f"from store: {state.cfg.from_store} ({sum(len(v) for v in entries.values())} "
        "entries read, no query scored)"
    )


def same_samples(run: SuiteRun) -> None:
    """The stored run's sample table lists this dataset's samples (ids, answers, options)."""
    import numpy as np

    if not run.store.has(SAMPLES):
        raise StoreError(f"{run.store.run_dir}: no sample table ({SAMPLES}.npz)")
    table = run.store.load(SAMPLES)
    if list(table["ids"]) != list(run.dataset.ids) or not np.array_equal(
        table["answers"], run.dataset.answers
    ):
        raise StoreError(
            f"{run.store.run_dir}: its samples are not --dataset {run.cfg.dataset}'s "
            "(another --limit or --lenient?)"
        )


def vsi_dataset(state: SuiteSession) -> Dataset:
    """The VSI gates' dataset as the session will open it (its fingerprint picks the run)."""
    from benchc.suite.session import open_dataset

    vsi_cfg = replace(state.cfg, dataset=state.cfg.resolved_vsi_dataset())
    return state.dataset if vsi_cfg.dataset == state.cfg.dataset else open_dataset(vsi_cfg)
