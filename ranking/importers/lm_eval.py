"""lm-evaluation-harness output: ``results_*.json`` files, one row per model, one column per task × metric × filter.

What is read from each results file (the structure lm-eval writes with ``--output_path``):

* ``results`` → task → ``"<metric>,<filter>"`` scores (``"acc,none"``) and ``"<metric>_stderr,<filter>"``
  standard errors (``"N/A"`` = unknown); a score that is null, NaN or ``"N/A"`` is missing, one that is
  there but is no finite number (``"high"``, ``true``, ``1e999``) is an error naming the file, model and metric;
* the model: ``model_name``, else ``pretrained=`` of ``config.model_args``, else the folder's name;
* ``higher_is_better`` → task → metric → bool: the direction (files that disagree on it are refused
  unless it is stated). Where no file states it, the direction comes from :data:`KNOWN_METRICS`;
  any other metric is refused unless stated (``--higher METRIC`` / ``--lower METRIC``);
* ``group_subtasks`` (and ``groups``): a task inside a group gets the group at the top of
  its hierarchy as its criterion group (``mmlu_anatomy`` → ``mmlu``); a task outside any
  group is its own group. Rows of groups themselves are aggregates of their subtasks and
  are left out (stated in a note), so no score counts twice;
* ``versions`` and ``n-shot``: in each criterion's ``source`` (``lm-eval arc_easy v1.0, 0-shot``);
  a task run with different shot counts for different models is pointed out in a note.

Column names: ``<task>/<metric>`` for lm-eval's default filter ``none``, else
``<task>/<metric>/<filter>`` (``gsm8k/exact_match/strict-match``).

The same task of the same model in several files (a re-run): the newest file wins,
by the file's ``date`` (else the time stamp in its name, else its modification time),
said in a note; ``on_duplicate="error"`` refuses, and so do files of the same date with
different scores (none of them is the newest).

Every part read is checked for the shape lm-eval writes; one of another shape is a one-line
error naming the file and the place in it (``.higher_is_better.arc_easy``). Different tasks of one model in
different files are merged into its row.

>>> column_name("arc_easy", "acc", "none"), column_name("gsm8k", "exact_match", "strict-match")
('arc_easy/acc', 'gsm8k/exact_match/strict-match')
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ranking.errors import UserError
from ranking.importers.common import (
    Options,
    assemble,
    describe_paths,
    expect,
    files_in,
    json_kind,
    json_path,
    number,
    optional,
    pick_newest,
    read_json,
    score,
    shown,
    unknown_direction,
)

#: Directions and units of metrics lm-eval reports, for files without ``higher_is_better``.
KNOWN_METRICS: dict[str, tuple[str, str]] = {
    **{m: ("higher", "proportion (0-1)") for m in (
        "acc", "acc_norm", "acc_mutual_info", "exact_match", "em", "f1", "contains", "pass@1", "pass_at_1",
        "prompt_level_strict_acc", "inst_level_strict_acc", "prompt_level_loose_acc", "inst_level_loose_acc",
    )},
    "mcc": ("higher", "correlation (-1 to 1)"),
    "bleu": ("higher", "BLEU (0-100)"),
    "chrf": ("higher", "chrF (0-100)"),
    "ter": ("lower", "TER (0-100)"),
    "perplexity": ("lower", "perplexity"),
    "word_perplexity": ("lower", "perplexity per word"),
    "byte_perplexity": ("lower", "perplexity per byte"),
    "bits_per_byte": ("lower", "bits per byte"),
    "brier_score": ("lower", "Brier score (0-1)"),
}

STAMP = re.compile(r"(\d{4}-\d{2}-\d{2}T\d{2}[-:]\d{2}[-:]\d{2}(?:\.\d+)?)")


def column_name(task: str, metric: str, filter_name: str) -> str:
    """The criterion name of one task's metric under one filter (the filter only when it is not ``none``)."""
    return f"{task}/{metric}" if filter_name == "none" else f"{task}/{metric}/{filter_name}"


def result_files(paths: Sequence[Path]) -> list[Path]:
    """Every ``results*.json`` under the given folders (or the files themselves); an empty folder is an error."""
    return files_in(paths, "lm-eval output", "results*.json",
                    "lm-eval results_*.json: give the folder lm-eval wrote with --output_path", recursive=True)


def checked(doc: Any, path: Path) -> Mapping[str, Any]:
    """A results file whose parts this importer reads each have the shape lm-eval writes, or a one-line
    :class:`UserError` naming the file, the place in it and the shape it must have."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("results"), Mapping):
        raise UserError(f"{path} is not an lm-eval results file: it has no top-level 'results' mapping")
    for task, metrics in doc["results"].items():
        expect(metrics, "object", path, ["results", task], "an object of '<metric>,<filter>' → score")
    optional(doc, "model_name", "text", path, [], "text (the model's name)")
    config = optional(doc, "config", "object", path, [], "an object (model, model_args, ...)")
    if config is not None and not isinstance(config.get("model_args"), (str, Mapping, type(None))):
        raise UserError(f"{path}: {json_path(['config', 'model_args'])} must be text ('pretrained=...,dtype=...') "
                        f"or an object, not {json_kind(config['model_args'])}")
    hib = optional(doc, "higher_is_better", "object", path, [], "an object of task → {metric: true/false}")
    for task, metrics in (hib or {}).items():
        expect(metrics, "object", path, ["higher_is_better", task], "an object of metric → true/false")
        for metric, flag in metrics.items():
            if flag is not None:
                expect(flag, "bool", path, ["higher_is_better", task, metric], "true/false (or null)")
    for key, what in (("versions", "version"), ("n-shot", "number of shots")):
        for task, value in (optional(doc, key, "object", path, [], f"an object of task → {what}") or {}).items():
            if isinstance(value, (Mapping, list)):
                raise UserError(f"{path}: {json_path([key, task])} must be a {what} (a number or text), "
                                f"not {json_kind(value)}")
    subtasks = optional(doc, "group_subtasks", "object", path, [], "an object of group → [subtask, ...]")
    for group, subs in (subtasks or {}).items():
        if subs is not None:
            expect(subs, "list", path, ["group_subtasks", group], "a list of subtask names")
            for i, sub in enumerate(subs):
                expect(sub, "text", path, ["group_subtasks", group, i], "text (a task name)")
    optional(doc, "groups", "object", path, [], "an object of group → scores")
    return doc


def model_of(doc: Mapping[str, Any], path: Path) -> str:
    """The model a results file is about: ``model_name``, else ``pretrained=`` of the model args, else the folder."""
    name = doc.get("model_name")
    if isinstance(name, str) and name.strip():
        return name.strip()
    args = (doc.get("config") or {}).get("model_args")
    if isinstance(args, Mapping):
        for key in ("pretrained", "model", "path"):
            if isinstance(args.get(key), str) and args[key].strip():
                return args[key].strip()
    if isinstance(args, str):
        for part in args.split(","):
            key, _, value = part.partition("=")
            if key.strip() in ("pretrained", "model", "path") and value.strip():
                return value.strip()
    return path.parent.name


def stamp_of(doc: Mapping[str, Any], path: Path) -> float:
    """When a results file was made: its ``date``, else the time stamp in its name, else its modification time."""
    if doc.get("date") is not None:
        date = number(doc["date"])
        if date is None:
            raise UserError(f"{path}: .date must be the run's time as a number (Unix seconds, as lm-eval writes it), "
                            f"not {shown(doc['date'])}")
        return date
    match = STAMP.search(path.name)
    if match:
        from datetime import datetime, timezone

        text = match.group(1)
        day, _, clock = text.partition("T")
        try:
            return datetime.fromisoformat(f"{day}T{clock.replace('-', ':')}").replace(tzinfo=timezone.utc).timestamp()
        except ValueError:
            pass
    return path.stat().st_mtime


def subtask_roots(doc: Mapping[str, Any]) -> tuple[dict[str, str], set[str]]:
    """(task → the group at the top of its hierarchy, the names that are groups) from ``group_subtasks``/``groups``."""
    hierarchy = doc.get("group_subtasks") or {}
    groups = {g for g, subs in hierarchy.items() if subs} | set(doc.get("groups") or {})
    parent: dict[str, str] = {}
    for g, subs in hierarchy.items():
        for s in subs or ():
            parent.setdefault(str(s), str(g))
    roots = {}
    for task in parent:
        top, seen = task, set()
        while top in parent and top not in seen:
            seen.add(top)
            top = parent[top]
        roots[task] = top
    return roots, groups


@dataclass(frozen=True)
class Run:
    """One task of one model in one results file: its scores (column → (metric, score, standard error))."""

    doc: Mapping[str, Any]
    file: Path
    group: str
    scores: dict[str, tuple[str, float, float | None]]


def task_scores(metrics: Mapping[str, Any], path: Path, model: str, task: str) -> dict[str, tuple[str, float, float | None]]:
    """column → (metric, score, standard error or None) of one task's ``results`` entry; a score that is there but
    is no finite number, or a key with an empty metric or filter name, is a one-line :class:`UserError`."""
    out: dict[str, tuple[str, float, float | None]] = {}
    for key, value in metrics.items():
        metric, sep, filter_name = str(key).partition(",")
        if not sep or metric.endswith("_stderr"):
            continue
        if not metric.strip() or not filter_name.strip():
            raise UserError(f"{path}: {json_path(['results', task, key])}: a score key must be '<metric>,<filter>' "
                            "with both names (such as 'acc,none'), not an empty one")
        where = f"{path}: model {model!r}, task {task!r}, metric {key!r}"
        value = score(value, where, missing=["N/A"], absent='null or "N/A"')
        if value is None:
            continue
        se_key = f"{metric}_stderr,{filter_name}"
        se = score(metrics.get(se_key), f"{path}: model {model!r}, task {task!r}, standard error {se_key!r}",
                   missing=["N/A"], absent='null or "N/A"')
        out[column_name(task, metric, filter_name)] = (metric, value, se if se is not None and se >= 0 else None)
    return out


def read(paths: Sequence[Path], options: Options) -> Any:
    """The score table of lm-eval output (module docstring)."""
    files = result_files(paths)
    runs: dict[tuple[str, str], list[tuple[float, Path, Run]]] = {}
    left_out_groups: set[str] = set()
    for f in files:
        doc = checked(read_json(f, "lm-eval results file"), f)
        if doc["results"] and not any("," in str(k) for m in doc["results"].values() for k in m):
            raise UserError(f"{f} has no '<metric>,<filter>' scores (lm-eval 0.3's format?): re-run with "
                            "lm-evaluation-harness >= 0.4, which writes keys such as 'acc,none'")
        model, stamp = model_of(doc, f), stamp_of(doc, f)
        roots, groups = subtask_roots(doc)
        for task, metrics in doc["results"].items():
            if task in groups:
                left_out_groups.add(task)
            else:
                run = Run(doc, f, roots.get(str(task), str(task)), task_scores(metrics, f, model, str(task)))
                runs.setdefault((model, str(task)), []).append((stamp, f, run))
    scores: dict[str, dict[str, float]] = {}
    errors: dict[str, dict[str, float]] = {}
    columns: dict[str, tuple[str, str]] = {}  # column → (task, metric)
    # column → the files' higher_is_better (True / False) → the files that say so; None → every file with the column
    said: dict[str, dict[bool | None, list[Path]]] = {}
    groups_of: dict[str, set[str]] = {}  # task → its criterion group in each file
    shots: dict[str, dict[str, Any]] = {}
    versions: dict[str, dict[str, Any]] = {}
    for (model, task), candidates in runs.items():
        run = pick_newest(candidates, f"lm-eval task {task!r} of model {model!r}", options,
                          same=lambda r: r.scores, stamp="date")
        shot = (run.doc.get("n-shot") or {}).get(task)
        version = (run.doc.get("versions") or {}).get(task)
        shots.setdefault(task, {})[model] = shot
        versions.setdefault(task, {})[model] = version
        groups_of.setdefault(task, set()).add(run.group)
        scores.setdefault(model, {})
        for name, (metric, value, se) in run.scores.items():
            columns[name] = (task, metric)
            scores[model][name] = value
            if se is not None:
                errors.setdefault(model, {})[name] = se
            flag = ((run.doc.get("higher_is_better") or {}).get(task) or {}).get(metric)
            files = said.setdefault(name, {})
            if isinstance(flag, bool):
                files.setdefault(flag, []).append(run.file)
            files.setdefault(None, []).append(run.file)
    group_of = {task: _group(task, found) for task, found in groups_of.items()}
    ordered = [_criterion(name, *columns[name], group_of[columns[name][0]], said[name],
                          shots[columns[name][0]], versions[columns[name][0]], options) for name in sorted(columns)]
    if left_out_groups:
        options.note(f"lm-eval: left out the rows of groups {', '.join(sorted(left_out_groups))} (aggregates of their "
                     "subtasks, which are imported, each with its group as criterion group)")
    for what, by_task in (("n-shot settings", shots), ("versions", versions)):
        for task, by_model in by_task.items():
            if len({str(s) for s in by_model.values()}) > 1:
                options.note(f"lm-eval: task {task!r} was run with different {what}: "
                             + ", ".join(f"{m} {s}" for m, s in by_model.items()))
    for task, found in groups_of.items():
        if len(found) > 1:
            options.note(f"lm-eval: task {task!r} is in different groups in different files "
                         f"({', '.join(sorted(found))}): its criterion group is {group_of[task]!r}")
    return assemble(scores, ordered, f"lm-eval {describe_paths(paths)}", options, errors)


def _group(task: str, groups: set[str]) -> str:
    """A task's criterion group when the files agree; else the first (by name) group of a hierarchy it is in.

    >>> _group("mmlu_anatomy", {"mmlu_anatomy", "mmlu"}), _group("t", {"t"})
    ('mmlu', 't')
    """
    return next(iter(groups)) if len(groups) == 1 else sorted(g for g in groups if g != task)[0]


def _joined(values: Mapping[str, Any]) -> str | None:
    """The distinct values of a setting over the models (``1.0/2.0``), or None when no file states one."""
    distinct = sorted({str(v) for v in values.values() if v is not None})
    return "/".join(distinct) if distinct else None


def _criterion(name: str, task: str, metric: str, group: str, said: Mapping[bool | None, list[Path]],
               shots: Mapping[str, Any], versions: Mapping[str, Any], options: Options) -> Any:
    """One column's criterion: direction stated by the caller, else the files (which must agree), else
    :data:`KNOWN_METRICS`."""
    from ranking.table import Criterion

    direction = options.stated(name, metric)
    if direction is None and True in said and False in said:
        raise UserError(f"lm-eval files disagree on the direction of metric {metric!r} of task {task!r}: "
                        f"{said[True][0]} says higher is better, {said[False][0]} lower: pass --higher {metric} "
                        f"or --lower {metric} (Python: higher=[{metric!r}] / lower=[{metric!r}])")
    if direction is None and (True in said or False in said):
        direction = "higher" if True in said else "lower"
    known = KNOWN_METRICS.get(metric)
    if direction is None and known is not None:
        direction = known[0]
    if direction is None:
        raise unknown_direction(metric, f"{sorted(said[None])[0]}, task {task!r}")
    version, shot = _joined(versions), _joined(shots)
    source = f"lm-eval {task}" + (f" v{version}" if version is not None else "") + (f", {shot}-shot" if shot is not None else "")
    return Criterion(name, direction=direction, group=group, unit=known[1] if known else "as reported", source=source)
