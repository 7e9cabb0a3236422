"""The embedded tiny VLM: a real LLaVA checkpoint built and trained on CPU from the synthetic data.

``python -m benchc.tinyvlm.build --out DIR`` rebuilds ``fixtures/tiny-vlm`` deterministically.
"""
