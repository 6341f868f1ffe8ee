"""The fine-tuning kind's data for ``vnr prefetch`` and the offline check (:mod:`harness.prefetch`): GLUE tasks
from the data root, else the ``datasets`` cache."""

from __future__ import annotations

from pathlib import Path

from ranking.floor.errors import UserError


def _glue_in_root(task: str, data_root: Path | None) -> bool:
    """Every file of ``task`` is under the data root (the same test the task loader makes)."""
    from harness.finetune.tasks import get_task, local_folder

    return local_folder(get_task(task), data_root) is not None


def _glue_cache_dir(task: str) -> Path:
    import datasets

    from harness.finetune.tasks import HUB_DATASET

    return Path(datasets.config.HF_DATASETS_CACHE) / HUB_DATASET.replace("/", "___") / task


def glue_available(task: str, data_root: Path | None) -> bool:
    """True when ``task`` is in the data root or already in the ``datasets`` cache."""
    if _glue_in_root(task, data_root):
        return True
    folder = _glue_cache_dir(task)
    return folder.is_dir() and any(folder.rglob("*.arrow"))


def prefetch_glue(task: str, data_root: Path | None) -> str:
    """Make ``task`` available offline; returns where it is."""
    if _glue_in_root(task, data_root):
        return f"in the data root {data_root}"
    import datasets

    from harness.finetune.tasks import HUB_DATASET

    try:
        datasets.load_dataset(HUB_DATASET, task)
    except Exception as exc:  # noqa: BLE001 - one line for any hub failure
        raise UserError(f"cannot download {HUB_DATASET}/{task} ({type(exc).__name__}: {exc})") from None
    return str(_glue_cache_dir(task))
