"""Constants fixed by the project's specification, docs/spec.md, that every stage shares.

docs/spec.md §1-§6 say what each constant means and where it comes from in the papers; the
comments below name the section. Keeping them in one module means a corruption name, a letter
or a threshold is spelled once.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from typing import Final

#: The 19 corruptions, in ``imagecorruptions.get_corruption_names('all')`` order.
CORRUPTIONS: Final[tuple[str, ...]] = (
    "gaussian_noise",
    "shot_noise",
    "impulse_noise",
    "defocus_blur",
    "glass_blur",
    "motion_blur",
    "zoom_blur",
    "snow",
    "frost",
    "fog",
    "brightness",
    "contrast",
    "elastic_transform",
    "pixelate",
    "jpeg_compression",
    "speckle_noise",
    "gaussian_blur",
    "spatter",
    "saturate",
)

#: Corruption families (docs/spec.md §1), used for plots and ``-k`` selection.
FAMILIES: Final[dict[str, tuple[str, ...]]] = {
    "noise": ("gaussian_noise", "shot_noise", "impulse_noise", "speckle_noise"),
    "blur": ("defocus_blur", "glass_blur", "motion_blur", "zoom_blur", "gaussian_blur"),
    "weather": ("snow", "frost", "fog", "spatter"),
    "photometric": ("brightness", "contrast", "saturate"),
    "digital": ("elastic_transform", "pixelate", "jpeg_compression"),
}

FAMILY_OF: Final[dict[str, str]] = {c: fam for fam, cs in FAMILIES.items() for c in cs}

SEVERITIES: Final[tuple[int, ...]] = (1, 2, 3, 4, 5)

#: Option letters; a sample has 2 <= K <= 26 options lettered in order.
LETTERS: Final[str] = string.ascii_uppercase
MIN_OPTIONS: Final[int] = 2
MAX_OPTIONS: Final[int] = 26

#: The instruction closing every user turn (docs/spec.md §2).
ANSWER_INSTRUCTION: Final[str] = "Answer with the option's letter from the given choices directly."
#: Bumped whenever the prompt text changes, so cached model outputs are invalidated.
PROMPT_VERSION: Final[str] = "benchc-prompt-1"

#: A clean sample whose letters carry less vocabulary mass than this is flagged.
OPTION_MASS_FLAG: Final[float] = 0.5
#: |dC| or |dS| below this counts as the boundary sign regime (Table IV).
BOUNDARY_EPS: Final[float] = 1e-6

#: VSI (docs/spec.md §5).
VSI_SIGMA: Final[float] = 20.0
VSI_DILATE_PX: Final[int] = 4
VSI_INSENSITIVE: Final[float] = 0.05
VSI_TOPK: Final[int] = 50
#: Which VSI the gates read (``--vsi-support``): the full-vocabulary KL or the top-50 variant.
VSI_SUPPORTS: Final[tuple[str, ...]] = ("full", "top50")
VSI_SUPPORT: Final[str] = "top50"
#: The name each support's gated VSI is recorded under (``vsi_variant`` in a VSI snapshot); a
#: server's top-k VSI is ``vsi_top<k>`` whichever support was asked for.
VSI_VARIANTS: Final[dict[str, str]] = {"full": "vsi (full distribution)", "top50": "vsi_top50"}
#: The VSI paper's statistics (App. E): bootstrap B = 1000, permutation tests 10^5 shuffles,
#: seed 42 for both (Table 3 intervals, cross-model rank agreement).
VSI_PAPER_SEED: Final[int] = 42
VSI_PAPER_N_BOOT: Final[int] = 1000
VSI_PAPER_PERMUTATIONS: Final[int] = 100_000

#: Black-box sampling proxy (docs/spec.md §3).
PROXY_SAMPLES: Final[int] = 20
PROXY_TEMPERATURE: Final[float] = 1.0
JEFFREYS_ALPHA: Final[float] = 0.5

#: Default global seed for corruptions, bootstrap and selection.
DEFAULT_SEED: Final[int] = 0
#: Default longer image side for real models (docs/spec.md §1).
DEFAULT_IMAGE_SIZE: Final[int] = 448

CLEAN: Final[str] = "clean"


def condition_key(corruption: str | None = None, severity: int | None = None) -> str:
    """Canonical string for a condition: ``"clean"`` or ``"<corruption>-<severity>"``."""
    if corruption is None:
        return CLEAN
    return f"{corruption}-{severity}"


def parse_condition(key: str) -> tuple[str | None, int | None]:
    """Inverse of :func:`condition_key`; raises ``ValueError`` naming the bad key."""
    if key == CLEAN:
        return None, None
    name, sep, sev = key.rpartition("-")
    if not sep or name not in CORRUPTIONS or not sev.isdigit() or int(sev) not in SEVERITIES:
        raise ValueError(
            f"not a condition key: {key!r} (expected 'clean' or '<corruption>-<1..5>')"
        )
    return name, int(sev)


def family_cells(conditions: Sequence[str]) -> dict[str, list[str]]:
    """The selected cells of each corruption family present (docs/spec.md §1), in family order."""
    out: dict[str, list[str]] = {}
    for fam, members in FAMILIES.items():
        cells = [c for c in conditions if parse_condition(c)[0] in members]
        if cells:
            out[fam] = cells
    return out


#: The severity each corruption's rotations are scored at (docs/spec.md §1, option order): the
#: middle of the scale; a selection without it uses its severity nearest to it (ties: lower).
ORDER_SEVERITY: Final[int] = 3


def order_conditions(conditions: Sequence[str]) -> list[str]:
    """The conditions whose option rotations are scored: ``clean`` and, for each corruption in
    ``conditions``, the one cell at :data:`ORDER_SEVERITY` (or nearest it). Fixed by the
    selection alone, so a baseline and a run over the same cells rotate the same ones."""
    by_corruption: dict[str, list[int]] = {}
    for key in conditions:
        name, sev = parse_condition(key)
        if name is not None and sev is not None:
            by_corruption.setdefault(name, []).append(sev)
    out = [CLEAN]
    for name, sevs in by_corruption.items():
        out.append(condition_key(name, min(sevs, key=lambda s: (abs(s - ORDER_SEVERITY), s))))
    return out


def all_conditions() -> list[str]:
    """The 95 corrupted condition keys in (corruption, severity) order."""
    return [condition_key(c, s) for c in CORRUPTIONS for s in SEVERITIES]


def format_question(
    question: str, options: tuple[str, ...] | list[str], hint: str | None = None
) -> str:
    """The model-independent user turn: optional hint, question, lettered options, instruction."""
    lines = []
    if hint:
        lines.append(f"Hint: {hint}")
    lines.append(question.strip())
    lines.extend(f"{LETTERS[i]}. {opt}" for i, opt in enumerate(options))
    lines.append(ANSWER_INSTRUCTION)
    return "\n".join(lines)
