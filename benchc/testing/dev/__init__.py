"""Checkout-only test tooling, not in the wheel: :mod:`.tiny_families` (tiny random checkpoints
of 12 VLM families, the architecture matrix) and :mod:`.zoo` (the gates' mutant and benign
models, ``benchmarks/gate_power.py``). Nothing shipped may import it
(``benchc_tests/unit/test_shipped_imports.py``)."""
