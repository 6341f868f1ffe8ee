"""MTEB results folders: ``<model>/<revision>/<Task>.json``, one row per model and revision, one column per task.

**Both file formats, read as mteb's own loader reads them** (``TaskResult.from_disk``):

* mteb >= 1.11: ``task_name`` and ``scores`` → split → a list of ``{"main_score", "hf_subset", ...}``, one
  entry per subset (language, domain);
* older files: ``mteb_dataset_name``, ``mteb_version``, ``dataset_revision`` and every other top-level object
  a split, holding either the metrics (one subset, ``default``) or subset → metrics, and its own
  ``evaluation_time``. Task names mteb has renamed since (:data:`RENAMED`) are read under the new name, and
  an old name spelt in another case than a newer file's (``SciDocs``, ``SCIDOCS``) under the newer file's, so
  old and new files of one task share a column (mteb finds both in its task registry). A subset without ``main_score`` has no score (mteb looks the
  task's main metric up in its task registry, which this importer does not have), as if it were null.

**One vote per task.** A task's score is its ``main_score`` on the ``test`` split (else the only split the
file has), the mean over its subsets — mteb's ``get_score()``. Each task is one criterion with
``benchmark`` = ``task`` = the task name (the file does not say the task's type, so a task is its own
benchmark: MTEB's mean over tasks weights every task alike), ``metric`` ``main_score``, ``settings``
the split and number of subsets, higher is better, group ``performance``, unit "main score (0-1)",
range -1..1 (a correlation main score can be negative). A subset whose ``main_score`` is null leaves the
model's task score missing, with a note (a mean over fewer subsets would not compare). Models scored on
different splits or subsets of a task are refused, every such task named in one message (a file without any
main_score is missing anyway and not compared).

**Units.** A task column whose scores are all in percent (some beyond ±1, none beyond ±100) is divided by
100 with a note; a column mixing percent and 0-1 scores is refused naming both sets of models; a score
beyond ±100 is out of range (refused, or missing with ``options.out_of_range == "missing"``).

**Identity** is model + revision: ``model_meta.json``'s ``name`` and ``revision`` where present, else the
folders (``intfloat__e5-small/<revision>``). A model with one revision in the input is shown by its name,
one with several as ``name (revision)`` (a commit hash shortened to 7 characters), each its own row. The
same task of one model and revision given twice (two result folders) keeps the newest by the files'
own ``date`` (written by recent mteb versions); without one on every copy, copies with equal scores are one,
others are refused (``evaluation_time`` is how long the run took, not when: it says nothing about which
is newer; file modification times are never used). MTEB files carry no standard errors.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ranking.floor.errors import UserError
from ranking.importers.common import (
    Options,
    assemble,
    describe_paths,
    existing,
    expect,
    in_range,
    optional,
    pick_newest,
    read_json,
    score,
)

BOARD = "mteb"
UNIT = "main score (0-1)"
RANGE = (-1.0, 1.0)
PERCENT_RANGE = (-100.0, 100.0)
#: old task names → the names mteb reads them under (mteb's ``renamed_tasks``).
RENAMED = {
    "NorwegianParliament": "NorwegianParliamentClassification",
    "CMedQAv2": "CMedQAv2-reranking",
    "CMedQAv1": "CMedQAv1-reranking",
    "8TagsClustering": "EightTagsClustering",
    "PPC": "PpcPC",
}
#: keys of an old split that hold one score's variants (similarity functions), never a subset.
_NOT_SUBSETS = {"v_measures", "cos_sim", "euclidean", "manhattan", "dot", "max"}
_OLD_TOP = {"dataset_revision", "mteb_dataset_name", "mteb_version"}
_HASH = re.compile(r"[0-9a-f]{40}")


def task_files(paths: Sequence[Path]) -> list[Path]:
    """Every task JSON under the given folders (``model_meta.json`` excepted); an empty folder is an error."""
    out: list[Path] = []
    for p in existing(paths, "MTEB results"):
        found = [p] if p.is_file() else sorted(f for f in p.rglob("*.json") if f.name != "model_meta.json")
        if not found:
            raise UserError(f"{p} holds no MTEB task results (<model>/<revision>/<Task>.json)")
        out.extend(found)
    return out


def model_of(path: Path) -> tuple[str, str]:
    """(model, revision) of a task file: ``name`` / ``revision`` in ``model_meta.json`` beside it, else the folders
    (``<model>/<revision>/<Task>.json``)."""
    name, revision = path.parent.parent.name.replace("__", "/"), path.parent.name
    meta = path.parent / "model_meta.json"
    if meta.is_file():
        doc = read_json(meta, "MTEB model_meta")
        if isinstance(doc, Mapping):
            if isinstance(doc.get("name"), str) and doc["name"].strip():
                name = doc["name"].strip()
            if isinstance(doc.get("revision"), str) and doc["revision"].strip():
                revision = doc["revision"].strip()
    if not name.strip():
        raise UserError(f"{path}: no model name (model_meta.json names none and the folder above the revision is "
                        "empty): keep the <model>/<revision>/<Task>.json layout")
    return name, revision


@dataclass(frozen=True)
class TaskScore:
    """One task file's score: the mean main_score over its subsets (None when a subset has none), which split and
    subsets it is over, the subsets without a score, the file's own date (None when it has none) and whether it
    is in the format before mteb 1.11."""

    task: str
    score: float | None
    split: str
    subsets: tuple[str, ...]
    unscored: tuple[str, ...]
    date: float | None = None
    old: bool = False
    values: tuple[float | None, ...] = ()

    @property
    def how(self) -> str:
        return f"{self.split}, mean of {len(self.subsets)} subset(s)"


def _file_date(doc: Mapping[str, Any]) -> float | None:
    """The file's own ``date`` (a time stamp in seconds, or ISO 8601 text), None when absent or unreadable."""
    from datetime import datetime, timezone

    value = doc.get("date")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str) and value.strip():
        text = value.strip()
        try:
            when = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
        except ValueError:
            return None
        return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).timestamp()
    return None


def _old_splits(doc: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """A pre-1.11 file's splits in the newer shape: split → [{"hf_subset": ..., metrics...}], as mteb converts it."""
    out: dict[str, list[dict[str, Any]]] = {}
    for split, value in doc.items():
        if split in _OLD_TOP or not isinstance(value, Mapping):
            continue  # e.g. a top-level evaluation_time, or a domain label of a derived file
        metrics = {k: v for k, v in value.items() if k != "evaluation_time"}
        subsets = any(isinstance(v, Mapping) for k, v in metrics.items() if k not in _NOT_SUBSETS)
        if subsets:
            out[split] = [{**v, "hf_subset": k} for k, v in metrics.items() if isinstance(v, Mapping)]
        else:
            out[split] = [{**metrics, "hf_subset": "default"}]
    return out


def task_score(doc: Any, path: Path) -> TaskScore:
    """The score of one task file (:class:`TaskScore`), either format; its parts checked for their shape."""
    if not isinstance(doc, Mapping):
        raise UserError(f"{path} is not an MTEB task result: it is not a JSON object")
    old = "scores" not in doc and "task_name" not in doc and (
        "mteb_dataset_name" in doc or any(isinstance(v, Mapping) for v in doc.values()))
    if old:
        splits: Mapping[str, Any] = _old_splits(doc)
        name = optional(doc, "mteb_dataset_name", "text", path, [], "text (the task's name)") or path.stem
        task = RENAMED.get(name, name)
        if not splits:
            raise UserError(f"{path} is not an MTEB task result: it has no split with scores")
    else:
        if not isinstance(doc.get("scores"), Mapping) or not doc["scores"]:
            raise UserError(f"{path} is not an MTEB task result: it has no 'scores' mapping (split → subsets)")
        splits = doc["scores"]
        task = str(optional(doc, "task_name", "text", path, [], "text (the task's name)") or path.stem)
    split = "test" if "test" in splits else (next(iter(splits)) if len(splits) == 1 else None)
    if split is None:
        raise UserError(f"{path}: MTEB task with splits {', '.join(splits)} and no 'test': keep one split's file")
    entries = splits[split] if isinstance(splits[split], list) else [splits[split]]
    if not entries:
        raise UserError(f"{path}: split {split!r} has no main_score")
    values, subsets, unscored = [], [], []
    for i, entry in enumerate(entries):
        at = ["scores", split, i] if isinstance(splits[split], list) and not old else [split]
        expect(entry, "object", path, at, 'an object {"main_score": ..., "hf_subset": ...}')
        subset = optional(entry, "hf_subset", "text", path, at, "text (the subset's name)") or f"subset {i + 1}"
        value = score(entry.get("main_score"), f"{path}: task {task!r}, subset {subset!r}, main_score",
                      absent="null")
        subsets.append(subset)
        if value is None:
            unscored.append(subset)
        values.append(value)
    mean = None if unscored else sum(values) / len(values)
    return TaskScore(task, mean, str(split), tuple(sorted(subsets)), tuple(unscored), _file_date(doc), old,
                     tuple(values))


def _label(name: str, revision: str, several: bool) -> str:
    if not several:
        return name
    return f"{name} ({revision[:7] if _HASH.fullmatch(revision) else revision})"


def read(paths: Sequence[Path], options: Options) -> Any:
    """The score table of MTEB results (module docstring)."""
    from ranking.table import Criterion

    results = [(f, task_score(read_json(f, "MTEB task result"), f)) for f in task_files(paths)]
    olds = sum(r.old for _, r in results)
    # an old file may spell a task in another case (``SciDocs`` for ``SCIDOCS``): mteb finds it case-blind
    canonical: dict[str, str] = {}
    for _, r in sorted(results, key=lambda fr: (fr[1].old, fr[1].task)):  # a newer file's spelling first
        canonical.setdefault(r.task.lower(), r.task)
    runs: dict[tuple[str, str, str], list[tuple[float, Path, TaskScore]]] = {}
    for f, result in results:
        if result.old and canonical[result.task.lower()] != result.task:
            result = replace(result, task=canonical[result.task.lower()])
        name, revision = model_of(f)
        runs.setdefault((name, revision, result.task), []).append((result.date or 0.0, f, result))
    revisions: dict[str, set[str]] = {}
    for name, revision, _ in runs:
        revisions.setdefault(name, set()).add(revision)
    several = sorted(n for n, r in revisions.items() if len(r) > 1)
    if several:
        options.note(f"mteb: {len(several)} model(s) have results of several revisions, each its own row named "
                     f"'MODEL (REVISION)': {', '.join(several[:5])}" + (" …" if len(several) > 5 else ""),
                     kind="identity")
    if olds:
        options.note(f"mteb: read {olds} task file(s) in the format before mteb 1.11 (as mteb's own loader reads "
                     "them)", kind="format")
    chosen: dict[tuple[str, str], tuple[TaskScore, Path]] = {}  # (model, task) → (result, file)
    for (name, revision, task), candidates in sorted(runs.items()):
        model = _label(name, revision, name in several)
        result = _newest(candidates, f"MTEB task {task!r} of model {model!r}", options)
        chosen[model, task] = (result, next(f for _, f, r in candidates if r is result))
    _check_comparable(chosen)
    scores: dict[str, dict[str, float]] = {}
    unscored: list[str] = []
    for (model, task), (result, _) in chosen.items():
        scores.setdefault(model, {})
        if result.score is None:
            unscored.append(f"{model} {task} ({', '.join(result.unscored)})")
        else:
            scores[model][task] = result.score
    if unscored:
        options.note(f"mteb: left missing {len(unscored)} task score(s) with a subset that has no main_score (a mean "
                     f"over fewer subsets would not compare with the others): {'; '.join(unscored)}",
                     kind="missing", ranks=True)
    tasks = sorted({t for _, t in chosen})
    _normalise_units(scores, chosen, tasks, options)
    over = {t: next(r for (_, task), (r, _) in sorted(chosen.items()) if task == t) for t in tasks}
    criteria = [Criterion(t, direction=options.stated(t) or "higher", group="performance", unit=UNIT,
                          source=f"MTEB main_score, {over[t].how}", benchmark=t, task=t, metric="main_score",
                          settings={"split": over[t].split, "subsets": len(over[t].subsets)}, range=RANGE)
                for t in tasks]
    options.note("mteb: one column (one vote) per task, its main_score on the test split averaged over subsets; "
                 "higher is better", kind="format")
    return assemble(scores, criteria, f"mteb {describe_paths(paths)}", options, board=BOARD)


def _newest(candidates: list[tuple[float, Path, TaskScore]], what: str, options: Options) -> TaskScore:
    """The newest of several files of one (model, revision, task), by the files' own ``date``."""
    if len(candidates) > 1 and any(r.date is None for _, _, r in candidates):
        if options.on_duplicate != "error" and len({(r.score, r.split, r.subsets) for _, _, r in candidates}) == 1:
            options.note(f"{what} appears {len(candidates)} times with the same scores ("
                         f"{', '.join(str(f) for _, f, _ in candidates)}): kept one", kind="duplicate")
            return candidates[0][2]
        if options.on_duplicate != "error":
            undated = ", ".join(str(f) for _, f, r in candidates if r.date is None)
            raise UserError(f"{what} appears {len(candidates)} times with different scores and {undated} carries no "
                            "'date', so the newest cannot be told (file times are not used): keep one of them")
    return pick_newest(candidates, what, options, same=lambda r: (r.score, r.split, r.subsets), stamp="date")


def _check_comparable(chosen: Mapping[tuple[str, str], tuple[TaskScore, Path]]) -> None:
    """Every model's score of a task must be over the same split and subsets: one error naming every task that is not."""
    first: dict[str, tuple[str, TaskScore, Path]] = {}
    problems: list[str] = []
    named: set[str] = set()
    for (model, task), (result, file) in sorted(chosen.items()):
        if result.score is None:
            continue  # missing anyway: no mean to compare
        base = first.setdefault(task, (model, result, file))
        if (result.split, result.subsets) != (base[1].split, base[1].subsets) and task not in named:
            named.add(task)
            problems.append(f"{task!r}: {base[0]} is scored on {_over(base[1])} ({base[2]}), {model} on "
                            f"{_over(result)} ({file})")
    if len(problems) == 1:
        raise UserError(f"MTEB task {problems[0]}: the means are not comparable; give every model's results on the "
                        "same split and subsets (or leave the task out)")
    if problems:
        raise UserError(f"{len(problems)} MTEB tasks are scored on different splits or subsets, so their means are "
                        f"not comparable: {'; '.join(problems)}: give every model's results on the same split and "
                        "subsets (or leave these tasks out)")


def _normalise_units(scores: dict[str, dict[str, float]], chosen: Mapping[tuple[str, str], tuple[TaskScore, Path]],
                     tasks: Sequence[str], options: Options) -> None:
    """Per task column: percent (beyond ±1) → 0-1 with a note; a mix of both units refused; beyond ±100 out of range."""
    percent_tasks = []
    for task in tasks:
        have = {m: s[task] for m, s in scores.items() if task in s}
        for model, x in list(have.items()):
            file = chosen[model, task][1]
            kept = in_range(x, *PERCENT_RANGE, f"{file}: task {task!r}, model {model!r}, main_score", options)
            if kept is None:
                del scores[model][task], have[model]
        big = sorted(m for m, x in have.items() if abs(x) > 1)
        if not big:
            continue
        small = sorted(m for m, x in have.items() if abs(x) <= 1)
        if small:
            raise UserError(f"MTEB task {task!r} mixes units: {', '.join(big)} scored in percent (beyond 1), "
                            f"{', '.join(small)} in 0-1: give every model's main_score in one unit (divide the "
                            "percent files' scores by 100)")
        for model in have:
            scores[model][task] = have[model] / 100
        percent_tasks.append(task)
    if percent_tasks:
        options.note(f"mteb: {len(percent_tasks)} task column(s) were in percent and are divided by 100 to 0-1 like "
                     f"the others: {', '.join(percent_tasks)}", kind="unit", ranks=True)


def _over(result: TaskScore) -> str:
    """The split and subsets a score is over, in words (``test, subsets deu, eng``)."""
    shown = ", ".join(result.subsets[:6]) + (f", … ({len(result.subsets)})" if len(result.subsets) > 6 else "")
    return f"{result.split}, subsets {shown}"


def board_scores(table: Any) -> Any:
    """MTEB's own aggregate per model: the mean over its tasks (the leaderboard's "Mean (Task)"), NaN where a model
    lacks a task (the leaderboard leaves that mean blank). Only the table's MTEB task columns count."""
    import numpy as np

    cols = [j for j, c in enumerate(table.criteria)
            if (c.source or "").startswith("MTEB main_score") and not getattr(c, "detail", False)]
    if not cols:
        raise UserError(f"{table.source}: no MTEB task column to average")
    return np.asarray(table.values, dtype=float)[:, cols].mean(axis=1)
