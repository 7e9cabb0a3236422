"""CUDA defaults without a GPU: ``torch.cuda`` and the xdist environment patched, as on a
machine with 8 GPUs."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from benchc.models import gpus


@pytest.fixture
def eight_gpus(monkeypatch):
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 8)
    monkeypatch.setattr(
        torch.cuda, "get_device_properties", lambda i: SimpleNamespace(total_memory=100 << 30)
    )


def _worker(monkeypatch, worker: int, count: int) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", f"gw{worker}")
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", str(count))


def test_device_map_auto_under_xdist_gives_each_worker_its_own_gpus(eight_gpus, monkeypatch):
    seen = []
    for worker in range(4):
        _worker(monkeypatch, worker, 4)
        share, limits = gpus.worker_gpus("auto")
        assert share == [2 * worker, 2 * worker + 1]
        assert set(limits) == set(share) and all(
            v == int(0.9 * (100 << 30)) for v in limits.values()
        )
        seen += share
    assert sorted(seen) == list(range(8))  # every GPU used, none twice


def test_device_map_auto_refused_when_gpus_do_not_divide(eight_gpus, monkeypatch):
    _worker(monkeypatch, 0, 3)
    with pytest.raises(ValueError, match=r"device_map=auto under pytest-xdist -n 3 with 8") as err:
        gpus.worker_gpus("auto")
    assert "-n 1 / -n 2 / -n 4 / -n 8" in str(err.value) and "run -n 8 without it" in str(err.value)
    _worker(monkeypatch, 0, 16)
    with pytest.raises(ValueError, match="-n 16 with 8 visible GPU"):
        gpus.worker_gpus("balanced")


def test_no_limits_outside_xdist_or_without_a_spreading_map(eight_gpus, monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT", raising=False)
    assert gpus.worker_gpus("auto") == (None, None)
    _worker(monkeypatch, 1, 4)
    assert gpus.worker_gpus("cuda:1") == (None, None)
    assert gpus.worker_gpus(None) == (None, None)


def test_flash_attention_is_the_cuda_default_when_importable(monkeypatch):
    loads = []

    def load(attention):
        loads.append(attention)
        return "model"

    monkeypatch.setattr(gpus, "flash_available", lambda: True)
    assert gpus.load_with_attention(load, cuda=True, given=None)[:2] == ("model", gpus.FLASH)
    assert gpus.load_with_attention(load, cuda=True, given="eager")[1] is None
    assert gpus.load_with_attention(load, cuda=False, given=None)[1] is None
    assert loads == [gpus.FLASH, "eager", None]


def test_sdpa_when_flash_is_missing_or_the_model_refuses_it(monkeypatch):
    monkeypatch.setattr(gpus, "flash_available", lambda: False)
    model, chosen, note = gpus.load_with_attention(lambda a: a, cuda=True, given=None)
    assert model == chosen == gpus.SDPA and "flash_attn is not installed" in note

    def refuses(attention):
        if attention == gpus.FLASH:
            raise ValueError("FooForCausalLM does not support Flash Attention 2.0 yet")
        return attention

    monkeypatch.setattr(gpus, "flash_available", lambda: True)
    model, chosen, note = gpus.load_with_attention(refuses, cuda=True, given=None)
    assert model == chosen == gpus.SDPA
    assert note.startswith("attention sdpa: the model does not support flash_attention_2")

    def broken(attention):
        raise ValueError("no model class loads it")

    with pytest.raises(ValueError, match="no model class"):  # other errors are not masked
        gpus.load_with_attention(broken, cuda=True, given=None)


def test_flash_default_enters_the_fingerprint(monkeypatch):
    """An HF backend on 'CUDA': the default kernel is named in the fingerprint like a given
    one (results under flash attention are never reused for sdpa's), sdpa's is not."""
    from benchc.models import hf
    from benchc_tests.unit.test_models_hf import tiny_model_dir

    real_load = hf._load_model
    got = {}

    def load(source, **kwargs):
        got.update(kwargs["extra"])
        return real_load(source, **{**kwargs, "extra": {}})

    monkeypatch.setattr(hf, "_load_model", load)
    monkeypatch.setattr(torch.nn.Module, "to", lambda self, *a, **k: self)
    for flash, named in ((True, True), (False, False)):
        monkeypatch.setattr(gpus, "flash_available", lambda flash=flash: flash)
        backend = hf.HFBackend(str(tiny_model_dir()), device="cuda", dtype="float32")
        assert got["attn_implementation"] == (gpus.FLASH if flash else gpus.SDPA)
        assert ("attn_implementation=flash_attention_2" in backend.fingerprint) is named
        assert backend.notes()[0].startswith(f"{backend.name}: attention")
