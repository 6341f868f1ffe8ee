"""The bias kind's data for ``vnr prefetch`` and the offline check (:mod:`harness.prefetch`): bias sets from the
data root, else the download cache of :mod:`harness.bias.data` (``$VNR_CACHE_DIR``)."""

from __future__ import annotations

from pathlib import Path


def bias_available(dataset: str, data_root: Path | None) -> bool:
    """True when every file of ``dataset`` is in the data root or in the download cache (a data root is per
    set: one that lacks the set reads it from the cache, like :func:`harness.bias.data.resolve_files`)."""
    from harness.bias.data import cache_dir, get_dataset

    files = list(get_dataset(dataset).sources)
    roots = [Path(data_root)] if data_root is not None else []
    return any(all((root / rel).is_file() for rel in files) for root in [*roots, cache_dir()])


def prefetch_bias(dataset: str, data_root: Path | None) -> str:
    """Make ``dataset`` available offline; returns where it is."""
    from harness.bias.data import resolve_files

    return str(resolve_files(dataset, data_root) / "bias" / dataset)
