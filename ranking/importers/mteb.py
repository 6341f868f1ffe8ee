"""MTEB results folders: ``<model>/<revision>/<Task>.json``, one row per model, one column per task.

Each task file (mteb >= 1.11) holds ``task_name`` and ``scores`` → split → a list of
``{"main_score", "hf_subset", "languages", ...}``, one entry per subset (language, domain).
A task's score is its ``main_score`` on the ``test`` split (else the only split the file has),
the mean over its subsets (stated in the criterion's ``source``); higher is better, group
``performance``, unit "main score (0-1)". ``model_meta.json`` (if present) names the model,
else the folder does (``intfloat__e5-small`` → ``intfloat/e5-small``).

The same task of a model under two revisions: the newest file (modification time) wins with a
note, or ``on_duplicate="error"`` refuses. MTEB files carry no standard errors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ranking.errors import UserError
from ranking.importers.common import (
    Options,
    assemble,
    describe_paths,
    existing,
    number,
    pick_newest,
    read_json,
)

UNIT = "main score (0-1)"


def task_files(paths: Sequence[Path]) -> list[Path]:
    """Every task JSON under the given folders (``model_meta.json`` excepted); an empty folder is an error."""
    out: list[Path] = []
    for p in existing(paths, "MTEB results"):
        found = [p] if p.is_file() else sorted(f for f in p.rglob("*.json") if f.name != "model_meta.json")
        if not found:
            raise UserError(f"{p} holds no MTEB task results (<model>/<revision>/<Task>.json)")
        out.extend(found)
    return out


def model_of(path: Path) -> str:
    """The model of a task file: ``name`` in ``model_meta.json`` beside it, else the folder above the revision."""
    meta = path.parent / "model_meta.json"
    if meta.is_file():
        doc = read_json(meta, "MTEB model_meta")
        if isinstance(doc, Mapping) and isinstance(doc.get("name"), str) and doc["name"].strip():
            return doc["name"].strip()
    return path.parent.parent.name.replace("__", "/")


def task_score(doc: Any, path: Path) -> tuple[str, float, str]:
    """(task name, mean main_score over subsets, split used) of one task file."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("scores"), Mapping) or not doc["scores"]:
        raise UserError(f"{path} is not an MTEB task result: it has no 'scores' mapping (split → subsets)")
    splits = doc["scores"]
    split = "test" if "test" in splits else (next(iter(splits)) if len(splits) == 1 else None)
    if split is None:
        raise UserError(f"{path}: MTEB task with splits {', '.join(splits)} and no 'test': keep one split's file")
    entries = splits[split] if isinstance(splits[split], list) else [splits[split]]
    values = [number(e.get("main_score")) for e in entries if isinstance(e, Mapping)]
    values = [v for v in values if v is not None]
    if not values:
        raise UserError(f"{path}: split {split!r} has no main_score")
    task = str(doc.get("task_name") or path.stem)
    return task, sum(values) / len(values), f"{split}, mean of {len(values)} subset(s)"


def read(paths: Sequence[Path], options: Options) -> Any:
    """The score table of MTEB results (module docstring)."""
    from ranking.table import Criterion

    runs: dict[tuple[str, str], list[tuple[float, Path, tuple[float, str]]]] = {}
    for f in task_files(paths):
        task, score, how = task_score(read_json(f, "MTEB task result"), f)
        runs.setdefault((model_of(f), task), []).append((f.stat().st_mtime, f, (score, how)))
    scores: dict[str, dict[str, float]] = {}
    how_of: dict[str, str] = {}
    for (model, task), candidates in runs.items():
        score, how = pick_newest(candidates, f"MTEB task {task!r} of model {model!r}", options)
        scores.setdefault(model, {})[task] = score
        how_of.setdefault(task, how)
    criteria = [Criterion(t, direction=options.stated(t) or "higher", group="performance", unit=UNIT,
                          source=f"MTEB main_score, {how_of[t]}") for t in sorted(how_of)]
    options.note("mteb: one column per task, its main_score on the test split averaged over subsets; higher is better")
    return assemble(scores, criteria, f"mteb {describe_paths(paths)}", options)
