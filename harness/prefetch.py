"""``vnr prefetch CONFIG``: put every model and dataset a grid needs on disk, for nodes without internet.

::

    vnr prefetch configs/experiments/paper.yaml          # on a login node with internet
    HF_HUB_OFFLINE=1 vnr run configs/experiments/paper.yaml --executor slurm ...

Models (with their ``model_args``: revision, subfolder, ...) go to the Hugging Face cache
(``$HF_HUB_CACHE``, default ``~/.cache/huggingface/hub``): the config, tokenizer files and one set of
weights (safetensors where the repo has them, else the PyTorch ``.bin``). Each run kind's targets go
where the kind's :class:`~harness.kinds.Data` puts them: GLUE tasks that the data root does not hold to
the ``datasets`` cache (:mod:`harness.finetune.prefetch`); bias benchmarks that it does not hold to the
download cache of :mod:`harness.bias.data` (``$VNR_CACHE_DIR``, default ``~/.cache/vnr``;
:mod:`harness.bias.prefetch`). Tiny models and local checkpoint directories need nothing.

:func:`check_available` is the up-front check ``vnr run`` / ``vnr status`` make: when the hub cannot be
reached (``HF_HUB_OFFLINE``, or a 3 s connection probe fails), anything the grid needs that is not on
disk is named in one :class:`~ranking.floor.errors.UserError` with the prefetch command, before any work,
with no download attempts and no retries.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.kinds import get_kind, kind_of, kinds
from ranking.floor.errors import UserError
from ranking.floor.json_io import JsonProblem, read_json_object

log = logging.getLogger(__name__)

# Files a model needs besides its weights (config, tokenizer, remote code); weights are chosen per repo.
SUPPORT_PATTERNS = ("*.json", "*.txt", "*.model", "*.py", "*.tiktoken", "*.spm")
WEIGHT_FILES = {
    "safetensors": ("model.safetensors", "model.safetensors.index.json"),
    "pytorch": ("pytorch_model.bin", "pytorch_model.bin.index.json"),
}


@dataclass(frozen=True)
class Needs:
    """What a grid reads: hub models (name, model_args), and per run kind the targets it downloads (GLUE tasks,
    bias sets: the kind's :class:`~harness.kinds.Data`)."""

    models: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...]
    targets: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # kind → its targets, in order


def needs(specs: Iterable[Any]) -> Needs:
    """The hub models and the kinds' targets ``specs`` read (tiny and local models need no download)."""
    from harness.models import TINY_PREFIX, is_local

    models: dict[tuple[str, tuple], None] = {}
    targets: dict[str, dict[str, None]] = {}
    for spec in specs:
        model_args = tuple(getattr(spec, "model_args", ()) or ())
        if not spec.model.startswith(TINY_PREFIX) and not is_local(spec.model):
            models[(spec.model, model_args)] = None
        kind = kind_of(spec)
        if kind.prefetch is not None:  # a kind's targets to download (a GLUE task, a bias set)
            targets.setdefault(kind.name, {})[kind.target_of(spec)] = None
    ordered = {k.name: tuple(targets[k.name]) for k in kinds() if k.name in targets}  # the table's order
    return Needs(tuple(models), ordered)


# ---------------------------------------------------------------------- models
def _hub_id(name: str, model_args: Sequence[tuple[str, Any]]) -> str:
    from harness.models import REGISTRY

    return REGISTRY[name].hub_id if name in REGISTRY else name


def _weight_patterns(repo_files: Sequence[str], subfolder: str) -> list[str]:
    """Weight file patterns: safetensors where the repo has them, else PyTorch .bin (never both)."""
    prefix = f"{subfolder.strip('/')}/" if subfolder else ""
    names = {f[len(prefix):] for f in repo_files if f.startswith(prefix)}
    if any(n.endswith(".safetensors") and "/" not in n for n in names):
        return [f"{prefix}*.safetensors", f"{prefix}*.safetensors.index.json"]
    if any(n.endswith(".bin") and "/" not in n for n in names):
        return [f"{prefix}pytorch_model*.bin", f"{prefix}*.bin.index.json"]
    return [f"{prefix}*.safetensors", f"{prefix}*.bin"]


def prefetch_model(name: str, model_args: Sequence[tuple[str, Any]] = ()) -> Path:
    """Download ``name``'s config, tokenizer and weights (at ``model_args``' revision) into the HF cache.

    Returns the snapshot folder. Errors (typo, gated, no network) are one-line ``ModelError``.
    """
    from huggingface_hub import HfApi, snapshot_download

    from harness.models import hub_errors, resolve_model

    args = dict(model_args)
    hub_id = _hub_id(name, model_args)
    revision = args.get("revision")
    with hub_errors(name):
        files = HfApi().list_repo_files(hub_id, revision=revision)
        patterns = [*SUPPORT_PATTERNS, *_weight_patterns(files, args.get("subfolder", ""))]
        folder = snapshot_download(hub_id, revision=revision, allow_patterns=patterns)
    resolve_model(name, model_args)  # the config reads from the cache now: family and LM kind known
    return Path(folder)


def model_cached(name: str, model_args: Sequence[tuple[str, Any]] = ()) -> bool:
    """True when the HF cache holds ``name``'s config and a full set of weights (no network)."""

    from huggingface_hub import try_to_load_from_cache

    args = dict(model_args)
    hub_id = _hub_id(name, model_args)
    revision = args.get("revision")
    sub = f"{args['subfolder'].strip('/')}/" if args.get("subfolder") else ""

    def cached(filename: str) -> str | None:
        path = try_to_load_from_cache(hub_id, sub + filename, revision=revision)
        return path if isinstance(path, str) else None

    if cached("config.json") is None:
        return False
    for single, index in WEIGHT_FILES.values():
        if cached(single):
            return True
        index_path = cached(index)
        if index_path:
            try:
                weight_map = read_json_object(index_path).get("weight_map")
            except (OSError, JsonProblem):  # unreadable: as if not cached (a download fetches it again)
                continue
            if not isinstance(weight_map, dict) or not all(isinstance(s, str) for s in weight_map.values()):
                continue
            shards = set(weight_map.values())
            if shards and all(cached(s) for s in shards):
                return True
    return False


# ---------------------------------------------------------------------- the check
def missing(specs: Iterable[Any], data_root: Path | None) -> list[str]:
    """What ``specs`` need that is not on disk (read from disk only, no network)."""
    need = needs(specs)
    out = [f"model {m}" + (f" ({', '.join(f'{k}={v}' for k, v in a)})" if a else "")
           for m, a in need.models if not model_cached(m, a)]
    for name, targets in need.targets.items():
        data = get_kind(name).prefetch
        out += [f"{data.label} {t}" for t in targets if not data.is_available(t, data_root)]
    return out


def check_available(exp: Any, *, specs: Sequence[Any] | None = None, data_root: Path | None = None,
                    config: str | None = None) -> None:
    """Offline (``HF_HUB_OFFLINE`` or the hub unreachable): raise one ``UserError`` naming every missing
    model and dataset and the ``vnr prefetch`` command. Online: nothing to check (loading downloads).

    The disk is read first: when everything is there (the usual case on a cluster), no hub probe (up to
    ``HUB_PROBE_TIMEOUT_S`` on a node without internet) is spent on finding out whether we are offline."""
    from harness.models import hub_offline

    gone = missing(exp.specs if specs is None else specs, data_root)
    if gone and hub_offline():
        shown = ", ".join(gone[:6]) + (f" and {len(gone) - 6} more" if len(gone) > 6 else "")
        where = config or getattr(exp, "source", "CONFIG")
        raise UserError(f"offline and not on disk: {shown}; run `vnr prefetch {where}` on a machine with "
                        "internet (same HF_HOME / VNR_CACHE_DIR), then retry")


# ---------------------------------------------------------------------- the command
def prefetch(config: str | Path, *, data_root: Path | None = None, only: Sequence[str] | None = None,
             echo: Any = print) -> Needs:
    """Download everything ``config``'s grid needs; ``echo`` gets one line per item saying where it is."""
    from harness.grid.config import load_experiment, select_specs
    from harness.models import offline_reason

    exp = load_experiment(config)  # a bad config is named before anything else
    specs = select_specs(exp.specs, list(only) if only else None)
    need = needs(specs)
    gone = missing(specs, data_root)
    if gone:  # all on disk already: no hub needed
        reason = offline_reason(announce=False)  # one message, the error below, not a warning before it
        if reason is not None:
            shown = gone[0] + (f" and {len(gone) - 1} more" if len(gone) > 1 else "")
            raise UserError(f"not on disk: {shown}, to be downloaded from the hub, but this machine is offline "
                            f"({reason}): run `vnr prefetch` on a machine with internet")
    for model, model_args in need.models:
        folder = prefetch_model(model, model_args)
        suffix = f" ({', '.join(f'{k}={v}' for k, v in model_args)})" if model_args else ""
        echo(f"model {model}{suffix}: {folder}")
    for name, targets in need.targets.items():
        data = get_kind(name).prefetch
        for target in targets:
            echo(f"{data.label} {target}: {data.download(target, data_root)}")
    skipped = sorted({s.model for s in specs} - {m for m, _ in need.models})
    if skipped:
        echo(f"nothing to fetch for {', '.join(skipped)} (tiny or local)")
    return need


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "prefetch",
        help="download every model and dataset a grid needs (for compute nodes without internet)",
        description="Download every model (with its model_args) and dataset CONFIG's grid needs into the "
        "Hugging Face cache (and the benchmark download cache), and say where each went. Run it on a "
        "machine with internet that shares HF_HOME / VNR_CACHE_DIR with the compute nodes; there, "
        "HF_HUB_OFFLINE=1 vnr run CONFIG then needs no network.",
    )
    p.add_argument("config", help="experiment config, e.g. configs/experiments/paper.yaml")
    p.add_argument("--data-root", default=None,
                   help="data root: tasks and bias sets in it are not downloaded (default: $VNR_DATA_ROOT)")
    p.add_argument("--only", action="append", default=None, metavar="PATTERN",
                   help="only the specs matching this glob (as in vnr run)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from huggingface_hub import constants

    from ranking.floor.paths import resolve_data_root

    root = resolve_data_root(args.data_root)
    prefetch(args.config, data_root=root, only=args.only)
    print(f"HF cache: {constants.HF_HUB_CACHE}")
    return 0
