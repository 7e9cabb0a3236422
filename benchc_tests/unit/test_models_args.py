"""``--model-args key=value,...``: parsing, validation, and what reaches the backend."""

from __future__ import annotations

import pytest
import torch

from benchc.models.args import HF_ARGS, OPENAI_ARGS, fingerprint_part, split_model_args
from benchc.models.hf import HFBackend
from benchc.models.registry import parse_model_args
from benchc_tests.unit.test_models_hf import tiny_model_dir

HF = "org/some-vlm"
OPENAI = "openai:m@http://127.0.0.1:9/v1"


def test_parse_types_each_key() -> None:
    args = parse_model_args(
        "device_map=auto, attn_implementation=sdpa,torch_dtype=bfloat16,max_pixels=401408,"
        "quantization=bnb-4bit",
        HF,
    )
    assert args == {
        "device_map": "auto",
        "attn_implementation": "sdpa",
        "torch_dtype": "bfloat16",
        "max_pixels": 401408,
        "quantization": "bnb-4bit",
    }
    assert parse_model_args("concurrency=8,rate_limit=2.5,logprobs=false", OPENAI) == {
        "concurrency": 8,
        "rate_limit": 2.5,
        "logprobs": False,
    }
    assert parse_model_args(None, HF) == {} and parse_model_args(" ", OPENAI) == {}


@pytest.mark.parametrize(
    ("text", "model", "message"),
    [
        ("device_map", HF, "expected key=value, got 'device_map'"),
        ("=auto", HF, "expected key=value"),
        ("a=1,a=2", HF, "key 'a' given twice"),
        ("flash=yes", HF, "unknown key 'flash' for the hf backend; known: attn_implementation"),
        ("concurrency=4", HF, "unknown key 'concurrency' for the hf backend"),
        ("device_map=auto", OPENAI, "unknown key 'device_map' for the openai backend"),
        ("attn_implementation=fast", HF, "attn_implementation='fast': 'fast' is not one of eager"),
        ("max_pixels=-3", HF, "max_pixels='-3': -3 is not >= 1"),
        ("max_pixels=big", HF, "'big' is not an integer"),
        ("device_map=gpu7", HF, "'gpu7' is not auto, balanced"),
        ("torch_dtype=int8", HF, "'int8' is not one of float32"),
        ("dtype=float32,torch_dtype=bfloat16", HF, "dtype and torch_dtype disagree"),
        ("top_logprobs=21", OPENAI, "21 is not in 1..20"),
        ("rate_limit=0", OPENAI, "must be > 0"),
        ("logprobs=maybe", OPENAI, "'maybe' is not a boolean"),
    ],
)
def test_bad_model_args_name_key_and_problem(text: str, model: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        parse_model_args(text, model)


def test_split_keeps_values_verbatim() -> None:
    assert split_model_args("a=x=y,b=") == {"a": "x=y", "b": ""}


def test_fingerprint_names_only_output_changing_args() -> None:
    args = {"device_map": "auto", "max_pixels": 100, "attn_implementation": "eager"}
    assert fingerprint_part(args, HF_ARGS) == "attn_implementation=eager,max_pixels=100"
    assert fingerprint_part({"concurrency": 3}, OPENAI_ARGS) == ""


def test_hf_backend_applies_model_args(monkeypatch) -> None:
    import transformers

    # what from_pretrained was given (transformers keeps the resolved choice in a private field)
    given: list[dict] = []
    real = transformers.AutoModelForImageTextToText.from_pretrained

    def spy(*args, **kwargs):
        given.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(transformers.AutoModelForImageTextToText, "from_pretrained", spy)
    plain = HFBackend(str(tiny_model_dir()), batch_size=2)
    eager = HFBackend(
        str(tiny_model_dir()),
        batch_size=2,
        model_args={"attn_implementation": "eager", "torch_dtype": "float32"},
    )
    assert "attn_implementation" not in given[0] and given[-1]["attn_implementation"] == "eager"
    assert eager.dtype == torch.float32
    assert "attn_implementation=eager" in eager.fingerprint
    assert eager.fingerprint != plain.fingerprint
    with pytest.raises(ValueError, match="does not take max_pixels"):
        HFBackend(str(tiny_model_dir()), model_args={"max_pixels": 5000})
    with pytest.raises(ValueError, match="disagree"):
        HFBackend(str(tiny_model_dir()), dtype="bfloat16", model_args={"dtype": "float32"})


@pytest.mark.parametrize(
    ("key", "value", "package"),
    [("device_map", "cpu", "accelerate"), ("quantization", "bnb-8bit", "bitsandbytes")],
)
def test_placement_and_quantization_name_their_package(key, value, package) -> None:
    """Without accelerate / bitsandbytes installed these args are one clear error naming the
    package; with it, ``device_map=cpu`` loads (bitsandbytes itself needs a GPU)."""
    import importlib.util

    if importlib.util.find_spec(package) is None:
        with pytest.raises(ValueError, match=f"{key}={value} need the {package} package"):
            HFBackend(str(tiny_model_dir()), model_args={key: value})
    elif key == "device_map":
        backend = HFBackend(str(tiny_model_dir()), model_args={key: value})
        # transformers records a device map only when it dispatches over several devices
        placed = getattr(backend.model, "hf_device_map", None) or {"": "cpu"}
        assert set(placed.values()) == {"cpu"}
        assert {p.device.type for p in backend.model.parameters()} == {"cpu"}


def test_max_pixels_reaches_a_qwen_processor(tmp_path) -> None:
    from benchc.testing.dev.tiny_families import build

    folder = build("qwen2_vl", tmp_path / "qwen")
    small = HFBackend(str(folder), model_args={"max_pixels": 28 * 28 * 2})
    large = HFBackend(str(folder), model_args={"max_pixels": 28 * 28 * 8})
    assert small.processor.image_processor.size["longest_edge"] == 28 * 28 * 2
    image = torch.zeros(112, 112, 3, dtype=torch.uint8).numpy()
    prompt = small.render("?")
    n_small = small._model_inputs([image], [prompt])["input_ids"].shape[1]
    n_large = large._model_inputs([image], [prompt])["input_ids"].shape[1]
    assert n_small < n_large  # fewer image tokens under the smaller pixel budget
    assert small.fingerprint != large.fingerprint


def test_model_args_is_a_usage_error_before_any_model_loads(pytester) -> None:
    pytester.makeconftest('pytest_plugins = ["benchc.plugin"]\n')
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest_inprocess("--model-args=attn_implementation=fast")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--model-args: attn_implementation='fast'*not one of*"])


pytest_plugins = ["pytester"]
