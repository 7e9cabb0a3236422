"""Corruption engine: seeded 19 x 5 corruptions, VSI blurs, an on-disk cache, batch generation.

Images are RGB-converted and resized *before* corruption (severities are pixel-absolute), and
every random draw is seeded from ``(seed, sample id, corruption, severity)``, so the same inputs
give bit-identical pixels in any process, worker count or machine.
"""

from benchc.corruptions.batch import (
    READ_THREADS,
    iter_materialize,
    materialize,
    prefill,
    shutdown_pools,
)
from benchc.corruptions.cache import CacheKey, CorruptionCache, default_cache_root
from benchc.corruptions.engine import (
    ENGINE_VERSION,
    content_hash,
    corrupt,
    corrupt_array,
    library_version,
)
from benchc.corruptions.locate import LOCATORS, ForegroundLocator, RegionLocator, resolve_locator
from benchc.corruptions.seeding import derive_seed
from benchc.corruptions.vsi import (
    BlurKey,
    blur_calls,
    cached_blur,
    cached_blur_file,
    region_blur,
    region_mask,
    scale_region,
    whole_blur,
)

__all__ = [
    "ENGINE_VERSION",
    "LOCATORS",
    "READ_THREADS",
    "BlurKey",
    "CacheKey",
    "CorruptionCache",
    "ForegroundLocator",
    "RegionLocator",
    "blur_calls",
    "cached_blur",
    "cached_blur_file",
    "content_hash",
    "corrupt",
    "corrupt_array",
    "default_cache_root",
    "derive_seed",
    "iter_materialize",
    "library_version",
    "materialize",
    "prefill",
    "region_blur",
    "region_mask",
    "resolve_locator",
    "scale_region",
    "shutdown_pools",
    "whole_blur",
]
