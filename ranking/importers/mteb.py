"""MTEB results folders: one row per model (and revision), one column per task, compared as mteb computes it.

**Both file formats, read as mteb's own loader reads them** (``TaskResult.from_disk``):

* mteb >= 1.11: ``task_name`` and ``scores`` → split → a list of ``{"main_score", "hf_subset", ...}``, one
  entry per subset (language, domain); the score is ``main_score``;
* older files: ``mteb_dataset_name``, ``mteb_version``, ``dataset_revision`` and every other top-level object
  a split, holding either the metrics (one subset, ``default``) or subset → metrics. Early mteb wrote
  ``main_score`` for classification only (and for AmazonCounterfactual the ``ap``): the score is the main metric
  mteb declares for the task's type, told by the metrics the file holds (:data:`MAIN_METRICS`: retrieval
  ``ndcg_at_10``, reranking ``map``, clustering ``v_measure``, pair classification ``cos_sim`` ``ap``, STS and
  summarization ``cos_sim`` ``spearman``, bitext mining ``f1``, classification ``accuracy``), as mteb's loader
  recomputes it. Task names mteb has renamed (:data:`RENAMED`) are read under the new name, and an old name spelt
  in another case than a newer file's (``SciDocs``, ``SCIDOCS``) under the newer file's.

**The benchmark's own split and subset** (:func:`benchmark_split`, :func:`_plans`): a task is compared on its
test split (or ``test.*``, such as ``test.full``; MSMARCO on dev, which some mteb versions call ``validation``);
a multilingual task votes through its English subset (``en``, ``en-en``, ``eng``, ..., :data:`ENGLISH`), as MTEB's
English benchmark does, else through the mean of the subsets every model has; its other subsets are detail
columns ``TASK [SUBSET]``. A model without the voting subset has no score there (noted); a task whose models share
no split, or no subset (and none is English), is refused, every such task in one message. A task of one subset
that one mteb version names by its language (``fr``) and another ``default`` is compared as one (noted).

**One vote per task**: ``benchmark`` = ``task``, except CQADupstack's subforums, which share one vote as
``CQADupstackRetrieval`` (their merged file, where there is one, is their aggregate); ``metric`` ``main_score``;
``settings`` the split, the subsets and the task's type; higher is better, group ``performance``, unit "main
score (0-1)", range -1..1.

**Units.** A column whose scores are all in percent (some beyond ±1, none beyond ±100) is divided by 100 with a
note; a column mixing percent and 0-1 scores is refused naming both sets of models; a score beyond ±100 is out
of range (refused, or missing with ``options.out_of_range == "missing"``).

**Identity** is model + revision: ``model_meta.json``'s ``name`` and ``revision`` where present, else the folders
under the one given: mteb >= 1.11 writes ``<org>__<model>/<revision>/<Task>.json`` (or ``<org>/<model>/...``);
older files were written flat, ``<model>/<Task>.json`` or ``<org>/<model>/<Task>.json``, unless their folder is a
revision's (a commit hash, ``no_revision_available``). A model with one revision in the input is shown by its
name, one with several as ``name (revision)``, each its own row. The same task of one model and revision given
twice keeps the newest by the files' own ``date``; without one on every copy, copies with equal scores are one,
others are refused (file modification times are never used). MTEB files carry no standard errors.

**Board** (:func:`board_scores`): MTEB's English average, the mean over tasks of each task's voting score,
CQADupstack one task, bitext mining left out; it equals the MTEB paper's published averages on the paper's own
result files (ranking/README.md lists the check).
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
_REVISION = re.compile(r"[0-9a-f]{7,40}")


def task_files(paths: Sequence[Path]) -> list[tuple[Path, Path]]:
    """(task JSON, the folder given that holds it) under the given folders (``model_meta.json`` excepted); an empty
    folder is an error."""
    out: list[tuple[Path, Path]] = []
    for p in existing(paths, "MTEB results"):
        found = [p] if p.is_file() else sorted(f for f in p.rglob("*.json") if f.name != "model_meta.json")
        if not found:
            raise UserError(f"{p} holds no MTEB task results (<model>/<revision>/<Task>.json)")
        out.extend((f, p if p.is_dir() else p.parent) for f in found)
    return out


def _is_revision(name: str) -> bool:
    """Whether a folder name is one mteb gives a revision: a commit hash, ``no_revision_available``, ``external``."""
    return bool(_REVISION.fullmatch(name)) or name in ("no_revision_available", "external")


def model_of(path: Path, root: Path | None = None, old: bool = False) -> tuple[str, str]:
    """(model, revision) of a task file: ``name`` / ``revision`` in ``model_meta.json`` beside it, else its folders:
    mteb >= 1.11 writes ``<model>/<revision>/<Task>.json`` (the model folder ``org__name``, or ``org/name``);
    files before 1.11 were written flat, ``<model>/<Task>.json`` (``<org>/<model>/``), unless their folder is a
    revision's (a commit hash, ``no_revision_available``). ``root``: the folder the user gave (never a name part).

    >>> model_of(Path("r/BAAI/bge-m3/Banking77Classification.json"), Path("r"), old=True)
    ('BAAI/bge-m3', '')
    >>> model_of(Path("results/LASER2/STS12.json"), Path("results"), old=True)
    ('LASER2', '')
    >>> model_of(Path("r/intfloat__e5-base/abc1234/T.json"), Path("r"))
    ('intfloat/e5-base', 'abc1234')
    """
    if root is None or not path.parent.is_relative_to(root):
        root = path.parent.parent
    folders = list(path.parent.relative_to(root).parts)
    revision = ""
    if folders and (not old or _is_revision(folders[-1])):
        revision = folders.pop()
    elif not folders and (not old or _is_revision(root.name)):  # the folder given is a revision's
        revision, root = root.name, root.parent
    if not folders:
        folders = [root.name]
    if len(folders) >= 2 and "__" not in folders[-1]:
        name = f"{folders[-2]}/{folders[-1]}"  # <org>/<model>/
    else:
        name = folders[-1].replace("__", "/") if folders else ""
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


#: the main metric mteb declares for each task type, for files before mteb 1.11 that carry no ``main_score``
#: (early mteb wrote it for classification only): (type, the keys that tell the type, the path to the main metric)
MAIN_METRICS: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("Retrieval", ("ndcg_at_10",), ("ndcg_at_10",)),
    ("Reranking", ("map", "mrr"), ("map",)),
    ("Clustering", ("v_measure",), ("v_measure",)),
    ("PairClassification", ("cos_sim.ap",), ("cos_sim", "ap")),
    ("STS", ("cos_sim.spearman",), ("cos_sim", "spearman")),
    ("BitextMining", ("f1", "precision", "recall"), ("f1",)),
    ("Classification", ("accuracy",), ("accuracy",)),
)
#: subset names of the English part of a multilingual task (mteb's English benchmark compares these)
ENGLISH = ("en", "en-en", "eng", "eng-eng", "eng-Latn", "eng_Latn", "eng-Latn-eng-Latn")
#: tasks whose benchmark split is dev, not test (MTEB evaluates MS MARCO on its dev set)
DEV_TASKS = frozenset({"MSMARCO"})
#: split names of one split in different mteb versions
SPLIT_ALIASES = {"validation": "dev"}
#: the subforum tasks of CQADupstack, which MTEB averages into one task (``CQADupstackRetrieval``)
CQADUPSTACK = "CQADupstackRetrieval"


def _has(metrics: Mapping[str, Any], key: str) -> bool:
    head, _, tail = key.partition(".")
    value = metrics.get(head)
    return isinstance(value, Mapping) and tail in value if tail else value is not None


def main_metric(metrics: Mapping[str, Any], old: bool = False) -> tuple[str | None, Any]:
    """(task type, main score) of one subset's metrics: in a file of mteb >= 1.11 its ``main_score``; in an older
    file the main metric mteb declares for the task's type (told by the metrics the file holds,
    :data:`MAIN_METRICS`), as mteb's loader recomputes it (early files lack ``main_score`` or hold another metric
    there, such as AmazonCounterfactual's ``ap``), else its ``main_score``.

    >>> main_metric({"ndcg_at_10": 0.31, "map_at_10": 0.2})
    ('Retrieval', 0.31)
    >>> main_metric({"cos_sim": {"pearson": 0.8, "spearman": 0.79}, "euclidean": {"spearman": 0.7}})
    ('STS', 0.79)
    >>> main_metric({"accuracy": 0.7, "ap": 0.3, "main_score": 0.3}), main_metric({"accuracy": 0.7, "ap": 0.3}, old=True)
    (('Classification', 0.3), ('Classification', 0.7))
    """
    kind = next((k for k, keys, _ in MAIN_METRICS if all(_has(metrics, key) for key in keys)), None)
    if "main_score" in metrics and (not old or kind is None):
        return kind, metrics["main_score"]
    for k, _, path in MAIN_METRICS:
        if k == kind:
            value: Any = metrics
            for part in path:
                value = value.get(part) if isinstance(value, Mapping) else None
            return kind, value
    return kind, None


@dataclass(frozen=True)
class TaskScore:
    """One task file: its task, its type (None: unknown), split → subset → main score (None where a subset has
    none), the file's own date (None when it has none), whether it is in the format before mteb 1.11."""

    task: str
    kind: str | None
    splits: Mapping[str, Mapping[str, float | None]]
    date: float | None = None
    old: bool = False
    computed: bool = False  # a main score taken from the type's main metric (no main_score in the file)


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
    """The scores of one task file (:class:`TaskScore`), either format; its parts checked for their shape."""
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
    out: dict[str, dict[str, float | None]] = {}
    kinds: set[str] = set()
    computed = False
    for split, listed in splits.items():
        entries = listed if isinstance(listed, list) else [listed]
        values: dict[str, float | None] = {}
        for i, entry in enumerate(entries):
            at = ["scores", split, i] if isinstance(listed, list) and not old else [split]
            expect(entry, "object", path, at, 'an object {"main_score": ..., "hf_subset": ...}')
            subset = optional(entry, "hf_subset", "text", path, at, "text (the subset's name)") or f"subset {i + 1}"
            kind, raw = main_metric(entry, old)
            computed = computed or (raw is not None and raw is not entry.get("main_score"))
            if kind:
                kinds.add(kind)
            values[subset] = score(raw, f"{path}: task {task!r}, subset {subset!r}, main_score", absent="null")
        if values:
            out[str(split)] = values
    if not out:
        raise UserError(f"{path}: task {task!r} has no split with a main_score")
    kind = "Summarization" if task.startswith("SummEval") else next(iter(kinds)) if len(kinds) == 1 else None
    return TaskScore(task, kind, out, _file_date(doc), old, computed)


def benchmark_split(task: str, splits: Sequence[str]) -> str | None:
    """The split a task is compared on: test (or a split named test.*, such as ``test.full``), dev for
    :data:`DEV_TASKS` (``validation`` in some mteb versions), else the only one.

    >>> benchmark_split("T", ["validation.full", "test.full"]), benchmark_split("MSMARCO", ["test", "validation"])
    ('test.full', 'validation')
    """
    def rank(split: str) -> int:
        name = SPLIT_ALIASES.get(split, split)
        if task in DEV_TASKS:
            return 0 if name == "dev" else 2
        return 0 if name == "test" else 1 if name.startswith("test") else 2
    best = sorted(splits, key=lambda s: (rank(s), s))
    if len(best) == 1 or rank(best[0]) < 2:
        return best[0]
    return None


def _label(name: str, revision: str, several: bool) -> str:
    if not several:
        return name
    return f"{name} ({revision[:7] if _HASH.fullmatch(revision) else revision})"


def read(paths: Sequence[Path], options: Options) -> Any:
    """The score table of MTEB results (module docstring)."""
    results = []
    for f, root in task_files(paths):
        result = task_score(read_json(f, "MTEB task result"), f)
        results.append((f, root, result))
    olds = sum(r.old for _, _, r in results)
    computed = sorted({r.task for _, _, r in results if r.computed})
    # an old file may spell a task in another case (``SciDocs`` for ``SCIDOCS``): mteb finds it case-blind
    canonical: dict[str, str] = {}
    for _, _, r in sorted(results, key=lambda fr: (fr[2].old, fr[2].task)):  # a newer file's spelling first
        canonical.setdefault(r.task.lower(), r.task)
    runs: dict[tuple[str, str, str], list[tuple[float, Path, TaskScore]]] = {}
    for f, root, result in results:
        if result.old and canonical[result.task.lower()] != result.task:
            result = replace(result, task=canonical[result.task.lower()])
        name, revision = model_of(f, root, result.old)
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
    if computed:
        options.note(f"mteb: {len(computed)} task(s) have files before mteb 1.11 without main_score (early mteb "
                     "wrote it for classification only) or with another metric in it: their main score is the main "
                     "metric mteb declares for the task's type, as mteb's own loader recomputes it "
                     "(retrieval ndcg_at_10, reranking map, clustering v_measure, pair classification cos_sim ap, "
                     f"STS and summarization cos_sim spearman, bitext mining f1): {', '.join(computed[:6])}"
                     + (" …" if len(computed) > 6 else ""), kind="format", ranks=True)
    chosen: dict[tuple[str, str], tuple[TaskScore, Path]] = {}  # (model, task) → (result, file)
    for (name, revision, task), candidates in sorted(runs.items()):
        model = _label(name, revision, name in several)
        result = _newest(candidates, f"MTEB task {task!r} of model {model!r}", options)
        chosen[model, task] = (result, next(f for _, f, r in candidates if r is result))
    plans = _plans(chosen, options)
    scores: dict[str, dict[str, float]] = {m: {} for m, _ in chosen}
    file_of: dict[str, dict[str, Path]] = {}
    unscored: list[str] = []
    lacking: list[str] = []
    for (model, task), (result, file) in chosen.items():
        plan = plans[task]
        values = result.splits[plan.split_of[model]]
        picked = [values.get(s) for s in plan.subsets] if plan.subsets else list(values.values())
        if any(s not in values for s in plan.subsets):
            lacking.append(f"{model} {task} ({', '.join(plan.subsets)})")
        elif any(v is None for v in picked):
            unscored.append(f"{model} {task} ({', '.join(s for s, v in values.items() if v is None)})")
        else:
            scores[model][task] = sum(picked) / len(picked)  # type: ignore[arg-type]
        file_of.setdefault(task, {})[model] = file
        for subset in plan.details:
            if values.get(subset) is not None:
                scores[model][f"{task} [{subset}]"] = values[subset]  # type: ignore[assignment]
                file_of.setdefault(f"{task} [{subset}]", {})[model] = file
    if lacking:
        options.note(f"mteb: left missing {len(lacking)} task score(s) of models not scored on the task's voting "
                     f"subset (their other subsets are detail columns): {'; '.join(lacking[:5])}"
                     + (" …" if len(lacking) > 5 else ""), kind="missing", ranks=True)
    if unscored:
        options.note(f"mteb: left missing {len(unscored)} task score(s) with a subset that has no main_score (a mean "
                     f"over fewer subsets would not compare with the others): {'; '.join(unscored)}",
                     kind="missing", ranks=True)
    columns = sorted(file_of)
    _normalise_units(scores, file_of, columns, options)
    criteria = _criteria(plans, columns, options)
    options.note("mteb: one vote per task (CQADupstack's subforums share one), its main_score on the task's own split "
                 "(test; MSMARCO dev) and subset (the English one where the task has one, else the subsets all "
                 "models share, averaged); other subsets are detail columns; higher is better", kind="format")
    return assemble(scores, criteria, f"mteb {describe_paths(paths)}", options, board=BOARD)


@dataclass
class Plan:
    """How one task is compared: each model's split, the subsets that vote (empty: a task of one subset, whatever
    its name), the other subsets (detail columns), the task's type."""

    split_of: dict[str, str]
    subsets: list[str]
    details: list[str]
    kind: str | None


def _plans(chosen: Mapping[tuple[str, str], tuple[TaskScore, Path]], options: Options) -> dict[str, Plan]:
    """Each task's :class:`Plan`; tasks with no split or subset every model shares are refused together."""
    by_task: dict[str, dict[str, tuple[TaskScore, Path]]] = {}
    for (model, task), found in sorted(chosen.items()):
        by_task.setdefault(task, {})[model] = found
    plans: dict[str, Plan] = {}
    problems: list[str] = []
    renamed: list[str] = []
    english: list[str] = []
    for task, found in by_task.items():
        split_of = {m: benchmark_split(task, list(r.splits)) for m, (r, _) in found.items()}
        named = {m: SPLIT_ALIASES.get(s, s) if s else None for m, s in split_of.items()}
        if None in named.values() or len(set(named.values())) > 1:
            (m0, (r0, f0)), *rest = found.items()
            other = next(((m, r, f) for m, (r, f) in rest if named[m] != named[m0]), None) or (m0, r0, f0)
            problems.append(f"{task!r}: {m0} has splits {', '.join(r0.splits)} ({f0})"
                            + (f", {other[0]} {', '.join(other[1].splits)} ({other[2]})" if other[0] != m0 else "")
                            + " (no test split, nor one split of the same name)")
            continue
        subsets = {m: [s for s in r.splits[split_of[m]]] for m, (r, _) in found.items()}  # type: ignore[index]
        kinds = {r.kind for r, _ in found.values() if r.kind}
        kind = next(iter(kinds)) if len(kinds) == 1 else None
        names = {s[0] for s in subsets.values() if len(s) == 1}
        if all(len(s) == 1 for s in subsets.values()) and len(names - {"default"}) <= 1:
            if len(names) > 1:  # a monolingual task whose subset one mteb version names by its language
                renamed.append(f"{task} ({', '.join(sorted({s[0] for s in subsets.values()}))})")
            plans[task] = Plan(split_of, [], [], kind)  # type: ignore[arg-type]
            continue
        everyone = set.intersection(*(set(s) for s in subsets.values()))
        union = sorted(set().union(*subsets.values()))
        en = next((e for e in ENGLISH if e in union), None)
        vote = [en] if en else sorted(everyone)
        if not vote:
            (m0, s0), *others = subsets.items()
            m1, s1 = next(((m, x) for m, x in others if not set(x) & set(s0)), others[0])
            problems.append(f"{task!r}: {m0} is scored on subsets {', '.join(sorted(s0))} ({found[m0][1]}), {m1} on "
                            f"{', '.join(sorted(s1))} ({found[m1][1]}), and no subset is English or every model's")
            continue
        if en or len(everyone) < len(union):
            english.append(f"{task} ({', '.join(vote)})")
        plans[task] = Plan(split_of, vote, [s for s in union if s not in vote], kind)  # type: ignore[arg-type]
    if len(problems) == 1:
        raise UserError(f"MTEB task {problems[0]}: the scores are not comparable; give every model's results on the "
                        "same split and a common subset (or leave the task out)")
    if problems:
        raise UserError(f"{len(problems)} MTEB tasks are scored on no common split or subset, so their scores are not "
                        f"comparable: {'; '.join(problems)}: give every model's results on the same split and a "
                        "common subset (or leave these tasks out)")
    if renamed:
        options.note(f"mteb: {len(renamed)} task(s) of one subset named differently by different mteb versions, "
                     f"compared as one: {', '.join(renamed[:5])}", kind="format")
    if english:
        options.note(f"mteb: {len(english)} multilingual task(s) vote through the English subset, as MTEB's English "
                     f"benchmark does (else the subsets every model has); the other subsets are detail "
                     f"columns 'TASK [SUBSET]': {', '.join(english[:5])}" + (" …" if len(english) > 5 else ""),
                     kind="vote", ranks=True)
    return plans


def _criteria(plans: Mapping[str, Plan], columns: Sequence[str], options: Options) -> list[Any]:
    from ranking.table import Criterion

    merged = CQADUPSTACK in columns
    out = []
    for column in columns:
        task, _, rest = column.partition(" [")
        plan = plans[task]
        subset = rest[:-1] if rest else None
        cqa = task.startswith("CQADupstack") and task.endswith("Retrieval") and task != CQADUPSTACK
        benchmark = CQADUPSTACK if cqa else task
        split = next(iter(plan.split_of.values()))
        over = subset or ", ".join(plan.subsets) or "its one subset"
        settings: dict[str, Any] = {"split": split, "subsets": over}
        if plan.kind:
            settings["type"] = plan.kind
        out.append(Criterion(column, direction=options.stated(column, task) or "higher", group="performance",
                             unit=UNIT, source=f"MTEB main_score, {split}, {over}", benchmark=benchmark, task=task,
                             metric="main_score", settings=settings, range=RANGE,
                             detail=bool(subset) or (cqa and merged), aggregate=task == CQADUPSTACK and not subset))
    return out


def _newest(candidates: list[tuple[float, Path, TaskScore]], what: str, options: Options) -> TaskScore:
    """The newest of several files of one (model, revision, task), by the files' own ``date``."""
    if len(candidates) > 1 and any(r.date is None for _, _, r in candidates):
        if options.on_duplicate != "error" and len({repr(r.splits) for _, _, r in candidates}) == 1:
            options.note(f"{what} appears {len(candidates)} times with the same scores ("
                         f"{', '.join(str(f) for _, f, _ in candidates)}): kept one", kind="duplicate")
            return candidates[0][2]
        if options.on_duplicate != "error":
            undated = ", ".join(str(f) for _, f, r in candidates if r.date is None)
            raise UserError(f"{what} appears {len(candidates)} times with different scores and {undated} carries no "
                            "'date', so the newest cannot be told (file times are not used): keep one of them")
    return pick_newest(candidates, what, options, same=lambda r: repr(r.splits), stamp="date")


def _normalise_units(scores: dict[str, dict[str, float]], file_of: Mapping[str, Mapping[str, Path]],
                     columns: Sequence[str], options: Options) -> None:
    """Per column: percent (beyond ±1) → 0-1 with a note; a mix of both units refused; beyond ±100 out of range."""
    percent_tasks = []
    for task in columns:
        have = {m: s[task] for m, s in scores.items() if task in s}
        for model, x in list(have.items()):
            file = file_of[task][model]
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


def board_scores(table: Any) -> Any:
    """MTEB's own average per model: the mean over its tasks of each task's voting score (its own split and subset;
    CQADupstack's subforums one task, their mean), bitext mining left out as MTEB's English average leaves it; NaN
    where a model lacks a task (the leaderboard leaves that mean blank). Only the table's MTEB columns count."""
    import numpy as np

    from ranking.votes import vote_weights

    weights = vote_weights(table.criteria, "benchmark")
    units: dict[str, list[int]] = {}
    for j, c in enumerate(table.criteria):
        if not (c.source or "").startswith("MTEB main_score") or weights[j] <= 0:
            continue
        if dict(c.settings or ()).get("type") == "BitextMining":
            continue
        units.setdefault(c.vote_unit, []).append(j)
    if not units:
        raise UserError(f"{table.source}: no MTEB task column to average")
    values = np.asarray(table.values, dtype=float)
    return np.column_stack([(values[:, cols] * weights[cols]).sum(axis=1) / weights[cols].sum()
                            for cols in units.values()]).mean(axis=1)
