"""lm-evaluation-harness output: ``results_*.json`` files, one row per model, one column per task × metric × filter.

What is read from each results file (the structure lm-eval writes with ``--output_path``):

* ``results`` → task → ``"<metric>,<filter>"`` scores (``"acc,none"``) and ``"<metric>_stderr,<filter>"``
  standard errors (``"N/A"`` = unknown);
* the model: ``model_name``, else ``pretrained=`` of ``config.model_args``, else the folder's name;
* ``higher_is_better`` → task → metric → bool: the direction. Where a file has none, the
  direction comes from :data:`KNOWN_METRICS`; any other metric is refused unless stated
  (``--higher METRIC`` / ``--lower METRIC``);
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
said in a note; ``on_duplicate="error"`` refuses. Different tasks of one model in
different files are merged into its row.

>>> column_name("arc_easy", "acc", "none"), column_name("gsm8k", "exact_match", "strict-match")
('arc_easy/acc', 'gsm8k/exact_match/strict-match')
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ranking.errors import UserError
from ranking.importers.common import (
    Options,
    assemble,
    describe_paths,
    files_in,
    number,
    pick_newest,
    read_json,
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
    date = number(doc.get("date"))
    if date is not None:
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


def read(paths: Sequence[Path], options: Options) -> Any:
    """The score table of lm-eval output (module docstring)."""
    from ranking.table import Criterion

    files = result_files(paths)
    runs: dict[tuple[str, str], list[tuple[float, Path, tuple[Mapping[str, Any], Mapping[str, Any], str, Path]]]] = {}
    left_out_groups: set[str] = set()
    for f in files:
        doc = read_json(f, "lm-eval results file")
        if not isinstance(doc, Mapping) or not isinstance(doc.get("results"), Mapping):
            raise UserError(f"{f} is not an lm-eval results file: it has no top-level 'results' mapping")
        if doc["results"] and not any("," in str(k) for m in doc["results"].values() if isinstance(m, Mapping)
                                      for k in m):
            raise UserError(f"{f} has no '<metric>,<filter>' scores (lm-eval 0.3's format?): re-run with "
                            "lm-evaluation-harness >= 0.4, which writes keys such as 'acc,none'")
        model, stamp = model_of(doc, f), stamp_of(doc, f)
        roots, groups = subtask_roots(doc)
        for task, metrics in doc["results"].items():
            if task in groups:
                left_out_groups.add(task)
            elif isinstance(metrics, Mapping):
                group = roots.get(str(task), str(task))
                runs.setdefault((model, str(task)), []).append((stamp, f, (doc, metrics, group, f)))
    scores: dict[str, dict[str, float]] = {}
    errors: dict[str, dict[str, float]] = {}
    criteria: dict[str, Criterion] = {}
    shots: dict[str, dict[str, Any]] = {}
    for (model, task), candidates in runs.items():
        doc, metrics, group, chosen = pick_newest(candidates, f"lm-eval task {task!r} of model {model!r}", options)
        shot = (doc.get("n-shot") or {}).get(task)
        shots.setdefault(task, {})[model] = shot
        scores.setdefault(model, {})
        for key, value in metrics.items():
            metric, sep, filter_name = str(key).partition(",")
            if not sep or metric.endswith("_stderr"):
                continue
            score = number(value)
            if score is None:
                continue
            name = column_name(task, metric, filter_name)
            if name not in criteria:
                criteria[name] = _criterion(name, task, metric, group, doc, shot, options, where=str(chosen))
            scores[model][name] = score
            se = number(metrics.get(f"{metric}_stderr,{filter_name}"))
            if se is not None and se >= 0:
                errors.setdefault(model, {})[name] = se
    if left_out_groups:
        options.note(f"lm-eval: left out the rows of groups {', '.join(sorted(left_out_groups))} (aggregates of their "
                     "subtasks, which are imported, each with its group as criterion group)")
    for task, by_model in shots.items():
        if len({str(s) for s in by_model.values()}) > 1:
            options.note(f"lm-eval: task {task!r} was run with different n-shot settings: "
                         + ", ".join(f"{m} {s}" for m, s in by_model.items()))
    ordered = [criteria[n] for n in sorted(criteria)]
    return assemble(scores, ordered, f"lm-eval {describe_paths(paths)}", options, errors)


def _criterion(name: str, task: str, metric: str, group: str, doc: Mapping[str, Any], shot: Any,
               options: Options, where: str) -> Any:
    """One column's criterion: direction stated by the caller, else the file, else :data:`KNOWN_METRICS`."""
    from ranking.table import Criterion

    direction = options.stated(name, metric)
    stated_by_file = ((doc.get("higher_is_better") or {}).get(task) or {}).get(metric)
    if direction is None and isinstance(stated_by_file, bool):
        direction = "higher" if stated_by_file else "lower"
    known = KNOWN_METRICS.get(metric)
    if direction is None and known is not None:
        direction = known[0]
    if direction is None:
        raise unknown_direction(metric, f"{where}, task {task!r}")
    version = (doc.get("versions") or {}).get(task)
    source = f"lm-eval {task}" + (f" v{version}" if version is not None else "") + (f", {shot}-shot" if shot is not None else "")
    return Criterion(name, direction=direction, group=group, unit=known[1] if known else "as reported", source=source)
