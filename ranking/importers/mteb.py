"""MTEB results folders: ``<model>/<revision>/<Task>.json``, one row per model, one column per task.

Each task file (mteb >= 1.11) holds ``task_name`` and ``scores`` → split → a list of
``{"main_score", "hf_subset", "languages", ...}``, one entry per subset (language, domain).
A task's score is its ``main_score`` on the ``test`` split (else the only split the file has),
the mean over its subsets (stated in the criterion's ``source``); higher is better, group
``performance``, unit "main score (0-1)". A subset whose ``main_score`` is null (or NaN) leaves
the model's task score missing, with a note: a mean over fewer subsets would not compare with
the other models' means (as the MTEB leaderboard leaves such a score blank); a ``main_score``
that is no number is an error, and so are models scored on different splits or subsets of one
task. ``model_meta.json`` (if present) names the model,
else the folder does (``intfloat__e5-small`` → ``intfloat/e5-small``).

The same task of a model under two revisions: the newest file (modification time) wins with a
note, or ``on_duplicate="error"`` refuses. MTEB files carry no standard errors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ranking.errors import UserError
from ranking.importers.common import (
    Options,
    assemble,
    describe_paths,
    existing,
    expect,
    optional,
    pick_newest,
    read_json,
    score,
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


@dataclass(frozen=True)
class TaskScore:
    """One task file's score: the mean main_score over its subsets (None when a subset has none), which split and
    subsets it is over, and the subsets without a score."""

    task: str
    score: float | None
    split: str
    subsets: tuple[str, ...]
    unscored: tuple[str, ...]

    @property
    def how(self) -> str:
        return f"{self.split}, mean of {len(self.subsets)} subset(s)"


def task_score(doc: Any, path: Path) -> TaskScore:
    """The score of one task file (:class:`TaskScore`); its parts checked for their shape."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("scores"), Mapping) or not doc["scores"]:
        raise UserError(f"{path} is not an MTEB task result: it has no 'scores' mapping (split → subsets)")
    splits = doc["scores"]
    split = "test" if "test" in splits else (next(iter(splits)) if len(splits) == 1 else None)
    if split is None:
        raise UserError(f"{path}: MTEB task with splits {', '.join(splits)} and no 'test': keep one split's file")
    entries = splits[split] if isinstance(splits[split], list) else [splits[split]]
    if not entries:
        raise UserError(f"{path}: split {split!r} has no main_score")
    task = str(optional(doc, "task_name", "text", path, [], "text (the task's name)") or path.stem)
    values, subsets, unscored = [], [], []
    for i, entry in enumerate(entries):
        at = ["scores", split, i] if isinstance(splits[split], list) else ["scores", split]
        expect(entry, "object", path, at, 'an object {"main_score": ..., "hf_subset": ...}')
        subset = optional(entry, "hf_subset", "text", path, at, "text (the subset's name)") or f"subset {i + 1}"
        value = score(entry.get("main_score"), f"{path}: task {task!r}, subset {subset!r}, main_score",
                      absent="null")
        subsets.append(subset)
        if value is None:
            unscored.append(subset)
        values.append(value)
    mean = None if unscored else sum(values) / len(values)
    return TaskScore(task, mean, str(split), tuple(sorted(subsets)), tuple(unscored))


def read(paths: Sequence[Path], options: Options) -> Any:
    """The score table of MTEB results (module docstring)."""
    from ranking.table import Criterion

    runs: dict[tuple[str, str], list[tuple[float, Path, TaskScore]]] = {}
    for f in task_files(paths):
        result = task_score(read_json(f, "MTEB task result"), f)
        runs.setdefault((model_of(f), result.task), []).append((f.stat().st_mtime, f, result))
    scores: dict[str, dict[str, float]] = {}
    over: dict[str, tuple[str, TaskScore, Path]] = {}  # task → the first model's (model, result, file), by name
    unscored: list[str] = []
    for (model, task), candidates in sorted(runs.items()):
        result = pick_newest(candidates, f"MTEB task {task!r} of model {model!r}", options,
                             same=lambda r: (r.score, r.split, r.subsets), stamp="modification time")
        file = next(f for _, f, r in candidates if r is result)
        first = over.setdefault(task, (model, result, file))
        if (result.split, result.subsets) != (first[1].split, first[1].subsets):
            raise UserError(f"MTEB task {task!r}: {first[0]} is scored on {_over(first[1])} ({first[2]}), {model} "
                            f"on {_over(result)} ({file}): the means are not comparable; give every model's results "
                            "on the same split and subsets (or leave the task out)")
        scores.setdefault(model, {})
        if result.score is None:
            unscored.append(f"{model} {task} ({', '.join(result.unscored)})")
        else:
            scores[model][task] = result.score
    if unscored:
        options.note(f"mteb: left missing {len(unscored)} task score(s) with a subset that has no main_score (a mean "
                     f"over fewer subsets would not compare with the others): {'; '.join(unscored)}")
    criteria = [Criterion(t, direction=options.stated(t) or "higher", group="performance", unit=UNIT,
                          source=f"MTEB main_score, {over[t][1].how}") for t in sorted(over)]
    options.note("mteb: one column per task, its main_score on the test split averaged over subsets; higher is better")
    return assemble(scores, criteria, f"mteb {describe_paths(paths)}", options)


def _over(result: TaskScore) -> str:
    """The split and subsets a score is over, in words (``test, subsets deu, eng``)."""
    shown = ", ".join(result.subsets[:6]) + (f", … ({len(result.subsets)})" if len(result.subsets) > 6 else "")
    return f"{result.split}, subsets {shown}"
