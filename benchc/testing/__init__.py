"""Tooling for testing benchc and the models it runs, apart from the library proper.

- :mod:`benchc.testing.serve`: the reference OpenAI-compatible server (log-probs, and
  :class:`~benchc.testing.serve.Quirks` that switch capabilities off); it ships, so a local
  checkpoint can stand in for an API (``python -m benchc.testing.serve --model DIR``).
- :mod:`benchc.testing.degrade`: ``--benchc-degrade``'s wrapper; ships with the plugin option.
- :mod:`benchc.testing.dev`: tiny random checkpoints of the VLM families and the mutant zoo;
  checkout-only, excluded from the wheel (see pyproject's ``packages.find``).
"""
