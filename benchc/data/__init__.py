"""Samples, validation, loaders (native JSONL, VLMEvalKit TSV, HF folders) and the generator."""

from benchc.data.errors import SampleError
from benchc.data.fingerprint import fingerprint
from benchc.data.loaders import load_dataset
from benchc.data.native import load_jsonl, save_jsonl
from benchc.data.sample import Dataset, Sample
from benchc.data.validate import skip_summary

__all__ = [
    "Dataset",
    "Sample",
    "SampleError",
    "fingerprint",
    "load_dataset",
    "load_jsonl",
    "save_jsonl",
    "skip_summary",
]
