"""Where a Hugging Face checkpoint lives, and what identifies its exact weights.

Result caches are keyed by the fingerprint, so it must change whenever the weights, processor
or tokenizer change, and stay the same across machines: a hub snapshot is identified by its
commit, a local folder by a hash of its files (not its path).
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from benchc.fsutil import slug  # noqa: F401  (re-exported: model names use the one slug rule)

#: Files whose full content is hashed when the total is small; larger weights are sampled.
_FULL_HASH_LIMIT = 512 * 2**20
_SAMPLE_BYTES = 2**20
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


@dataclass(frozen=True)
class Source:
    """A resolved checkpoint: local folder, the id the user gave, and its resolved revision."""

    spec: str
    path: Path
    revision: str | None  # hub commit hash, or None for a local folder

    @property
    def is_hub(self) -> bool:
        return self.revision is not None


def resolve_source(model_id_or_path: str, revision: str | None = None) -> Source:
    """Resolve a folder or hub id to a local folder without slow network retries.

    A hub id is looked up in the local cache first; only when it is missing and ``HF_HUB_OFFLINE``
    is not set is a download attempted (which fails fast without network). Raises ``ValueError``
    naming the id and what was tried.
    """
    path = Path(model_id_or_path).expanduser()
    if path.is_dir():
        if revision is not None:
            msg = f"--revision {revision!r} given, but {model_id_or_path!r} is a local folder"
            raise ValueError(msg)
        if not (path / "config.json").is_file():
            msg = f"model folder {str(path)!r} has no config.json: not a transformers checkpoint"
            raise ValueError(msg)
        return Source(model_id_or_path, path.resolve(), None)
    if path.exists():
        msg = f"model path {str(path)!r} is a file, expected a checkpoint folder or hub id"
        raise ValueError(msg)
    if not _HUB_ID.match(model_id_or_path):
        raise ValueError(
            f"model {model_id_or_path!r} is neither an existing folder nor a hub id of the form "
            "'org/name'"
        )
    from huggingface_hub import snapshot_download

    try:
        local = snapshot_download(model_id_or_path, revision=revision, local_files_only=True)
    except Exception as cached_err:  # not in the local cache (or revision unknown there)
        if _offline():
            raise ValueError(
                f"hub model {model_id_or_path!r} (revision {revision or 'main'}) is not in the "
                "local Hugging Face cache and HF_HUB_OFFLINE is set; download it first or pass "
                "a folder"
            ) from cached_err
        try:
            local = snapshot_download(model_id_or_path, revision=revision)
        except Exception as err:
            raise ValueError(
                f"hub model {model_id_or_path!r} (revision {revision or 'main'}) is neither a "
                f"local folder nor in the Hugging Face cache, and downloading it failed: "
                f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
            ) from err
    local_path = Path(local)
    return Source(model_id_or_path, local_path, local_path.name)


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def folder_hash(path: Path) -> str:
    """SHA-256 over every file's relative name, size and content (sampled for huge files).

    Markdown (model cards, build reports) is skipped: it cannot change a single output, and a
    fixed typo should not invalidate every stored result. Files up to a 512 MiB total are
    hashed in full; above that, each file contributes its first and last MiB, which still
    changes with any retrained or re-quantised weights in practice.
    """
    files = sorted(
        p
        for p in path.rglob("*")
        if p.is_file() and not p.name.startswith(".") and p.suffix.lower() != ".md"
    )
    total = sum(p.stat().st_size for p in files)
    digest = hashlib.sha256()
    for p in files:
        size = p.stat().st_size
        digest.update(f"{p.relative_to(path).as_posix()}\0{size}\0".encode())
        with p.open("rb") as fh:
            if total <= _FULL_HASH_LIMIT:
                for chunk in iter(lambda fh=fh: fh.read(2**20), b""):
                    digest.update(chunk)
            else:
                digest.update(fh.read(_SAMPLE_BYTES))
                fh.seek(max(0, size - _SAMPLE_BYTES))
                digest.update(fh.read(_SAMPLE_BYTES))
    return digest.hexdigest()
