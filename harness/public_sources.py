"""Whether public sources (the Hugging Face hub, the benchmarks' URLs) may be reached, and what to say when not.

A data root is per task: a GLUE task or bias set that is not under the data
root comes from its public source. On a node without network the user says so
with ``HF_HUB_OFFLINE`` / ``HF_DATASETS_OFFLINE``; then nothing is downloaded
(what an earlier ``vnr prefetch`` put in the caches is still read), and a set
that is in no cache fails at once with :func:`offline_error`'s one line.

>>> offline({"HF_DATASETS_OFFLINE": "1"}), offline({"HF_HUB_OFFLINE": "0"}), offline({})
(True, False, False)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from ranking.floor.errors import UserError

OFFLINE_ENV = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
PREFETCH = "vnr prefetch CONFIG"


def offline(environ: Mapping[str, str] | None = None) -> bool:
    """True when ``HF_HUB_OFFLINE`` or ``HF_DATASETS_OFFLINE`` is set to a true value (1, true, yes, on)."""
    env = os.environ if environ is None else environ
    return any(str(env.get(k, "")).strip().lower() in ("1", "true", "yes", "on") for k in OFFLINE_ENV)


def offline_error(what: str, data_root: Path | None, looked_for: str, source: str) -> UserError:
    """The one-line error for ``what`` (e.g. ``GLUE task QQP``) missing from the data root while offline.

    >>> str(offline_error("GLUE task QQP", Path("/d"), "/d/glue/QQP/train.tsv", "hub:nyu-mll/glue/qqp"))[:80]
    'GLUE task QQP is not in the data root /d (looked for /d/glue/QQP/train.tsv) and '
    """
    where = (f"is not in the data root {data_root} (looked for {looked_for})" if data_root is not None
             else "has no data root to come from (--data-root / VNR_DATA_ROOT unset)")
    return UserError(
        f"{what} {where} and its public source {source} cannot be reached offline "
        f"({'/'.join(OFFLINE_ENV)} set): run `{PREFETCH}` on a machine with network access, "
        "or put its files under the data root"
    )
