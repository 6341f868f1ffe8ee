"""lm-evaluation-harness output (0.3 and 0.4.x results files): one row per model, one column per task × metric × filter
× setting, each column knowing its benchmark so that a benchmark casts one vote.

Files. Every ``*.json`` under the folders given (lm-eval 0.4 writes ``<model>/results_<date>.json``; 0.3 wrote
whatever ``--output_path`` named, e.g. Pythia's ``160m_step143000.json``), or the files themselves:

* 0.4.x: ``results`` → task → ``"<metric>,<filter>"`` scores (``"acc,none"``) and ``"<metric>_stderr,<filter>"``
  standard errors; ``groups``, ``group_subtasks``, ``versions``, ``n-shot``, ``higher_is_better``, ``n-samples``,
  ``config.model_args``, ``model_name``, ``date``;
* 0.3: ``results`` → task → ``"<metric>"`` and ``"<metric>_stderr"`` (filter ``none``), ``versions``, and
  ``config`` with ``model_args`` and ``num_fewshot``.

A JSON file of another shape found in a folder (a BigScience-fork result list, a bare results mapping, a file that
is no JSON) is skipped and named in one note; given by name, or when no file is readable, it is a one-line error.
A score that is null, NaN or ``"N/A"`` is missing; one that is no finite number is an error naming the file.

**One benchmark, one vote** (``Criterion.benchmark`` / ``detail`` / ``aggregate``, :mod:`ranking.votes`):

* A task inside a group (``group_subtasks``) belongs to the benchmark at the top of its hierarchy (``mmlu_anatomy``
  → ``mmlu``), except that a group listed in :data:`SUITES` (a collection of separate benchmarks, such as
  ``leaderboard``) is never a benchmark: its members are. lm-eval 0.3 has no groups: the task families of
  :data:`FAMILIES_03` (``hendrycksTest-*`` → ``hendrycksTest``, ...) play their part.
* The benchmark's own group row, as lm-eval computed it, is its ``aggregate`` column and casts the vote; its
  subtasks and intermediate groups (``mmlu_stem``) are ``detail`` columns. A benchmark without a group row
  (lm-eval 0.3's MMLU) is voted for by its subtasks, which share the one vote.
* A group row's metrics that only some of its subtasks report, where others come from more of them, are details
  (:func:`carried`: TruthfulQA's group row carries its generative task's BLEU/ROUGE, 0-100, beside the ``acc`` of
  mc1 and mc2). A benchmark its suite scores by one member task votes through that task (:data:`CONVENTIONS`:
  TruthfulQA by ``truthfulqa_mc2``, as the Open LLM Leaderboard does). A benchmark whose vote still goes through
  columns of different units is stated in a note, and :func:`board_scores` refuses to average it.
* A task (or group) with several metrics votes with its primary metric(s): in each chain of :data:`PREFERENCES`
  the first metric present is primary and the later ones present are details (``acc_norm`` over ``acc``, except
  for MMLU whose answers are single letters, :data:`ACC_TASKS`); metrics in no chain share the vote. Filters
  likewise (:data:`FILTER_PREFERENCES`: gsm8k's ``strict-match`` over ``flexible-extract``).
* Group columns that do not vote under ``--vote benchmark`` (an intermediate group, a group's secondary metric)
  are details with weight 0: their parts vote in their place under ``--vote column``, so nothing counts twice.
* A file that ran all of a group's subtasks but has no row for the group (GLUE's tasks run one by one) while
  other files have one gets the row lm-eval would have written (:func:`_complete_groups`: the subtasks' mean
  weighted by ``n-samples``, the pooled standard error), with a note, so that model votes for the group too.

**Each score once, one meaning per column, one model per identity.**

* Column names ``<task>/<metric>`` (``/<filter>`` when not ``none``); ``%`` and ``/`` inside a name part are
  written ``%25`` and ``%2F``, so two metrics never share a column (two that still would are refused).
* A column holds one setting (n-shot, task version, ``limit``, chat template, few-shot as multi-turn): a task run
  with several settings gets one column per setting, named with ``@`` and what differs (``mmlu/acc@5-shot``),
  all in the task's benchmark (they share its vote), with a note naming the models of each setting. A group's
  n-shot is the one its subtasks ran with in that file (lm-eval writes ``n-shot: 0`` for MMLU whatever its
  subjects ran; subtasks of several n-shots give ``0+5``), so a 0-shot and a 5-shot run of one model are two
  settings, never one run replacing the other as a duplicate.
* A model is ``model_name`` (else ``model`` or ``pretrained=`` of the model args) with its model args, less
  the ones that only say how it ran (:data:`RUNTIME_ARGS`: ``trust_remote_code``, ``batch_size``, ...) and the
  ones at a value that changes nothing (:data:`DEFAULT_ARGS`: ``dtype=auto``, ``revision=main``), the same rule for
  every model and for 0.3 and 0.4 files: two runs of one local path with another ``tmix_backend`` or ``dtype`` are
  two models. Local paths are shown by their last part(s); where two models
  would show alike, the differing args are added (``v7-1B5-world (tmix_backend=fla)``).
* Re-runs of one model, task and setting: the newest wins by the file's ``date`` (else the time stamp in its
  name); never by file time. ``on_duplicate="error"`` refuses; so do re-runs that cannot be ordered.

**Directions, ranges**: a file's ``higher_is_better`` (top level, else ``configs.<task>.metric_list``; a group's
metric, else its subtasks'); where none says, :data:`KNOWN_METRICS` (lm-eval 0.3's files state none: its metric
conventions are in that table); else refused unless stated (``--higher`` / ``--lower``), every such metric named
in one refusal. A file that contradicts the documented direction of a known metric
needs ``--higher``/``--lower`` to confirm. Known metrics carry their valid range (proportions 0-1): a score
outside it is refused, or missing with ``--out-of-range missing``; a negative standard error is refused.
RULER's metrics are named by context length (``"4096"``): proportions, higher is better, and its -1 ("no
sample of this length") is a placeholder, imported as missing with a note.

**Board**: :func:`board_scores` is the mean of the benchmark scores as lm-eval computed them (its group rows);
:func:`group_parity` recomputes a file's group rows from its subtasks, size-weighted by ``n-samples`` as lm-eval
does.

>>> column_name("arc_easy", "acc", "none"), column_name("gsm8k", "exact_match", "strict-match")
('arc_easy/acc', 'gsm8k/exact_match/strict-match')
>>> column_name("t", "rouge/f", "none"), column_name("t", "rouge", "f")
('t/rouge%2Ff', 't/rouge/f')
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from ranking.floor.errors import UserError
from ranking.importers.common import (
    Options,
    assemble,
    describe_paths,
    existing,
    expect,
    in_range,
    json_kind,
    json_path,
    number,
    optional,
    pick_newest,
    read_json,
    score,
    shown,
)

PROPORTION = "proportion (0-1)"

#: metric → (direction, unit), for files without ``higher_is_better`` and to check the files that have one
#: (lm-eval's own metric registry and task configs: ``lm_eval/api/metrics.py``, ``tasks/*/*.yaml``).
KNOWN_METRICS: dict[str, tuple[str, str]] = {
    **{m: ("higher", PROPORTION) for m in (
        "acc", "acc_norm", "acc_mutual_info", "exact_match", "em", "f1", "contains", "pass@1", "pass_at_1",
        "prompt_level_strict_acc", "inst_level_strict_acc", "prompt_level_loose_acc", "inst_level_loose_acc",
        "mc1", "mc2", "math_verify",
    )},
    "mcc": ("higher", "correlation (-1 to 1)"),
    "bleu": ("higher", "BLEU (0-100)"),
    "chrf": ("higher", "chrF (0-100)"),
    "ter": ("lower", "TER (0 or more)"),
    "perplexity": ("lower", "perplexity"),
    "ppl": ("lower", "perplexity"),
    "word_perplexity": ("lower", "perplexity per word"),
    "byte_perplexity": ("lower", "perplexity per byte"),
    "bits_per_byte": ("lower", "bits per byte"),
    "brier_score": ("lower", "Brier score (0 or more)"),
    # CrowS-Pairs: lm-eval's crows_pairs configs say lower is better for both
    "pct_stereotype": ("lower", PROPORTION),
    "likelihood_diff": ("lower", "log-likelihood difference (0 or more)"),
    "likelihood_difference": ("lower", "log-likelihood difference (0 or more)"),
    # TruthfulQA's generative task (truthfulqa_gen, 0.3 and 0.4): the best answer's similarity to a true reference
    # (_max), whether it is closer to a true than to a false one (_acc), by how much (_diff); all higher is better
    **{f"{s}_acc": ("higher", PROPORTION) for s in ("bleu", "rouge1", "rouge2", "rougeL", "bleurt")},
    "bleu_max": ("higher", "BLEU (0-100)"),
    "bleu_diff": ("higher", "BLEU difference (-100 to 100)"),
    **{f"{s}_max": ("higher", "ROUGE (0-100)") for s in ("rouge1", "rouge2", "rougeL")},
    **{f"{s}_diff": ("higher", "ROUGE difference (-100 to 100)") for s in ("rouge1", "rouge2", "rougeL")},
    "bleurt_max": ("higher", "BLEURT"),
    "bleurt_diff": ("higher", "BLEURT difference"),
}

#: RULER (``ruler``, ``niah_*``) names its metrics by the context length (``"4096"``): the share of needles
#: found, higher is better (what its task configs say), and -1 where it had no sample of that length (its
#: aggregation's placeholder, imported as missing with a note).
RULER_PLACEHOLDER = -1.0


def known_metric(metric: str) -> tuple[str, str] | None:
    """(direction, unit) of a metric this importer knows (:data:`KNOWN_METRICS`, RULER's context lengths).

    >>> known_metric("acc_norm"), known_metric("4096"), known_metric("toxicity")
    (('higher', 'proportion (0-1)'), ('higher', 'proportion (0-1)'), None)
    """
    if metric in KNOWN_METRICS:
        return KNOWN_METRICS[metric]
    return ("higher", PROPORTION) if metric.isdigit() else None


#: unit → the valid (lo, hi) of its scores (None: open).
RANGES: dict[str, tuple[float | None, float | None]] = {
    PROPORTION: (0.0, 1.0),
    "correlation (-1 to 1)": (-1.0, 1.0),
    "BLEU (0-100)": (0.0, 100.0),
    "chrF (0-100)": (0.0, 100.0),
    "ROUGE (0-100)": (0.0, 100.0),
    "BLEU difference (-100 to 100)": (-100.0, 100.0),
    "ROUGE difference (-100 to 100)": (-100.0, 100.0),
    "TER (0 or more)": (0.0, None),
    "perplexity": (0.0, None),
    "perplexity per word": (0.0, None),
    "perplexity per byte": (0.0, None),
    "bits per byte": (0.0, None),
    "Brier score (0 or more)": (0.0, None),
    "log-likelihood difference (0 or more)": (0.0, None),
}

#: Primary metrics: in each chain, the first metric a task reports is primary, the later ones it reports are
#: details. ``acc_norm`` (accuracy normalised by answer length) is what the Open LLM Leaderboard used for every
#: multiple-choice task whose answers differ in length (v1: ARC, HellaSwag; v2: BBH, GPQA, MuSR), ``mc2`` its
#: TruthfulQA score; LAMBADA and CrowS-Pairs report accuracy / the stereotype rate as their headline and the
#: perplexity / likelihood difference beside it; wikitext's headline is word perplexity.
PREFERENCES: tuple[tuple[str, ...], ...] = (
    ("acc_norm", "acc"),
    ("mc2", "mc1"),
    ("acc", "perplexity", "ppl"),
    ("pct_stereotype", "likelihood_diff", "likelihood_difference"),
    ("word_perplexity", "byte_perplexity", "bits_per_byte"),
)
#: Tasks (name prefixes) whose primary accuracy is ``acc``: MMLU's answers are the letters A-D, so length
#: normalisation changes nothing it should (the Open LLM Leaderboard v1 used ``acc`` for MMLU).
ACC_TASKS: tuple[str, ...] = ("mmlu", "hendrycksTest")
#: For one metric under several filters: the first filter present is primary (gsm8k's ``strict-match`` is
#: the answer in the format asked for, the one lm-eval's gsm8k config lists first).
FILTER_PREFERENCES: tuple[tuple[str, ...], ...] = (("strict-match", "flexible-extract"),)

#: A benchmark whose suite scores it by one member task: that task's primary metric votes for the benchmark and
#: the group row is a detail. The Open LLM Leaderboard (v1), whose task set lm-eval's ``openllm`` group copies,
#: scores TruthfulQA by mc2 (the normalised probability of the true answers), not lm-eval's group row (the mean
#: of mc1 and mc2 beside the generative task's BLEU/ROUGE).
CONVENTIONS: dict[str, str] = {"truthfulqa": "truthfulqa_mc2"}

#: Groups that collect separate benchmarks (each member is its own benchmark, with its own vote).
SUITES: frozenset[str] = frozenset({"leaderboard", "openllm", "tinyBenchmarks", "metabench"})

#: lm-eval 0.3 task families (name prefix → benchmark): 0.3 wrote no groups, so the benchmarks its suites were
#: made of stand for them, as lm-eval 0.4 groups the same tasks: MMLU (``hendrycksTest-*``), AGIEval
#: (``agieval_*``), BIG-Bench (``bigbench_*``), BLiMP, arithmetic, CrowS-Pairs, the Pile, multilingual LAMBADA,
#: ETHICS, MATH (``math_*``), ANLI's rounds and the multilingual sets (XCOPA, XNLI, XStoryCloze, XWinograd,
#: PAWS-X, MGSM). A task named like the benchmark itself (0.3's ``crows_pairs_english``, the whole set) is its
#: aggregate. Tasks sharing a prefix of no family here each vote alone, and are named in a note (never guessed:
#: ``arc_easy`` and ``arc_challenge`` are two benchmarks).
FAMILIES_03: dict[str, str] = {
    "hendrycksTest-": "hendrycksTest",
    "agieval_": "agieval",
    "bigbench_": "bigbench",
    "blimp_": "blimp",
    "crows_pairs_english_": "crows_pairs_english",
    "crows_pairs_french_": "crows_pairs_french",
    "arithmetic_": "arithmetic",
    "pile_": "pile",
    "lambada_openai_mt_": "lambada_openai_mt",
    "ethics_": "ethics",
    "math_": "math",
    "anli_r": "anli",
    "xcopa_": "xcopa",
    "xnli_": "xnli",
    "xstory_cloze_": "xstory_cloze",
    "xwinograd_": "xwinograd",
    "pawsx_": "pawsx",
    "mgsm_": "mgsm",
}

#: model args that say how a model was run, not which model it is (left out of its identity).
RUNTIME_ARGS: frozenset[str] = frozenset({
    "parallelize", "device_map", "device", "batch_size", "max_batch_size", "trust_remote_code", "use_accelerate",
    "device_map_option", "max_memory_per_gpu", "max_cpu_memory", "offload_folder", "low_cpu_mem_usage",
    "gpu_memory_utilization", "tensor_parallel_size", "data_parallel_size", "pipeline_parallel_size",
    "swap_space", "enforce_eager", "max_num_seqs", "num_concurrent", "max_retries", "timeout", "cache_dir",
})
#: model args at a value that changes nothing (the default lm-eval and transformers use anyway): left out of
#: identity, so ``dtype=auto`` (the checkpoint's own dtype) or ``revision=main`` never splits a model.
DEFAULT_ARGS: frozenset[tuple[str, str]] = frozenset({
    ("dtype", "auto"), ("torch_dtype", "auto"), ("revision", "main"), ("peft", "None"), ("delta", "None"),
})
NAME_ARGS = ("pretrained", "model", "path")

STAMP = re.compile(r"(\d{4}-\d{2}-\d{2}T\d{2}[-:]\d{2}[-:]\d{2}(?:\.\d+)?)")
STAMP_03 = re.compile(r"(\d{2})-(\d{2})-(\d{4})-(\d{2})-(\d{2})-(\d{2})")  # 0.3 forks: _eval_results_MM-DD-YYYY-HH-MM-SS


# ---------------------------------------------------------------------- names
def _escape(part: str) -> str:
    return str(part).replace("%", "%25").replace("/", "%2F")


def column_name(task: str, metric: str, filter_name: str) -> str:
    """The criterion name of one task's metric under one filter (the filter only when it is not ``none``); the
    parts are escaped, so a ``/`` inside a metric name never makes it another metric's column."""
    base = f"{_escape(task)}/{_escape(metric)}"
    return base if filter_name == "none" else f"{base}/{_escape(filter_name)}"


def _note(options: Options, message: str, kind: str, ranks: bool = False) -> None:
    """A note of ``kind`` (ranks: it changes a ranking)."""
    options.note(message, kind=kind, ranks=ranks)


def _listed(items: Sequence[str], limit: int = 4) -> str:
    items = list(items)
    return ", ".join(items[:limit]) + (f", … ({len(items)} in all)" if len(items) > limit else "")


# ---------------------------------------------------------------------- files
def result_files(paths: Sequence[Path]) -> list[tuple[Path, bool]]:
    """(file, named by the user) for every ``*.json`` under the given folders and every file given."""
    out: list[tuple[Path, bool]] = []
    for p in existing(paths, "lm-eval output"):
        if p.is_dir():
            found = sorted(f for f in p.rglob("*.json") if f.is_file())
            if not found:
                raise UserError(f"{p} holds no lm-eval results_*.json (nor lm-eval 0.3 *.json): give the folder "
                                "lm-eval wrote with --output_path")
            out.extend((f, False) for f in found)
        else:
            out.append((p, True))
    return out


def _is_03(results: Mapping[str, Any]) -> bool:
    """Whether a results mapping is lm-eval 0.3's (``"acc"`` keys, no ``"<metric>,<filter>"`` ones)."""
    seen = False
    for m in results.values():
        if isinstance(m, Mapping):
            for k in m:
                if "," in str(k):
                    return False
                seen = True
    return seen


def checked(doc: Any, path: Path) -> Mapping[str, Any]:
    """A results file whose parts this importer reads each have the shape lm-eval writes, or a one-line
    :class:`UserError` naming the file, the place in it and the shape it must have."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("results"), Mapping):
        raise UserError(f"{path} is not an lm-eval results file: it has no top-level 'results' mapping")
    for task, metrics in doc["results"].items():
        if type(metrics) is not dict:
            expect(metrics, "object", path, ["results", task], "an object of '<metric>,<filter>' → score")
    optional(doc, "model_name", "text", path, [], "text (the model's name)")
    config = optional(doc, "config", "object", path, [], "an object (model, model_args, ...)")
    if config is not None and not isinstance(config.get("model_args"), (str, Mapping, type(None))):
        raise UserError(f"{path}: {json_path(['config', 'model_args'])} must be text ('pretrained=...,dtype=...') "
                        f"or an object, not {json_kind(config['model_args'])}")
    hib = optional(doc, "higher_is_better", "object", path, [], "an object of task → {metric: true/false}")
    for task, metrics in (hib or {}).items():
        if type(metrics) is not dict:
            expect(metrics, "object", path, ["higher_is_better", task], "an object of metric → true/false")
        for metric, flag in metrics.items():
            if flag is not None and flag is not True and flag is not False:
                expect(flag, "bool", path, ["higher_is_better", task, metric], "true/false (or null)")
    for key, what in (("versions", "version"), ("n-shot", "number of shots")):
        for task, value in (optional(doc, key, "object", path, [], f"an object of task → {what}") or {}).items():
            if type(value) not in (int, float, str) and isinstance(value, (Mapping, list)):
                raise UserError(f"{path}: {json_path([key, task])} must be a {what} (a number or text), "
                                f"not {json_kind(value)}")
    subtasks = optional(doc, "group_subtasks", "object", path, [], "an object of group → [subtask, ...]")
    for group, subs in (subtasks or {}).items():
        if subs is not None:
            expect(subs, "list", path, ["group_subtasks", group], "a list of subtask names")
            if not all(type(sub) is str for sub in subs):
                for i, sub in enumerate(subs):
                    expect(sub, "text", path, ["group_subtasks", group, i], "text (a task name)")
    cycle = _cycle({str(g): [str(x) for x in subs] for g, subs in (subtasks or {}).items() if subs})
    if cycle:
        raise UserError(f"{path}: group_subtasks hold a cycle ({' → '.join(cycle)}): a group cannot be inside "
                        "itself; fix the file's group_subtasks")
    optional(doc, "groups", "object", path, [], "an object of group → scores")
    samples = optional(doc, "n-samples", "object", path, [], "an object of task → {original, effective}")
    for task, counts in (samples or {}).items():
        expect(counts, "object", path, ["n-samples", task], "an object {original, effective}")
    return doc


# ---------------------------------------------------------------------- models
def _is_path(name: str) -> bool:
    return name.startswith(("/", "~", "./", "../")) or bool(re.match(r"^[A-Za-z]:[\\/]", name)) or "\\" in name


def _args(doc: Mapping[str, Any]) -> dict[str, str]:
    """The model args of a file as text → text (``pretrained=x,dtype=float16`` or an object)."""
    args = (doc.get("config") or {}).get("model_args")
    out: dict[str, str] = {}
    if isinstance(args, Mapping):
        if "load" in args and not any(k in args for k in NAME_ARGS):  # gpt-neox's whole config: its checkpoint
            for key in ("load", "iteration", "precision"):
                if args.get(key) is not None:
                    out[key] = str(args[key])
            return out
        items = [(str(k), v) for k, v in args.items() if not isinstance(v, (Mapping, list))]
    elif isinstance(args, str):
        items = [(k.strip(), v) for k, _, v in (part.partition("=") for part in args.split(",")) if k.strip()]
    else:
        items = []
    for key, value in items:
        text = str(value).strip().strip("'\"")
        out[key] = {"true": "True", "false": "False"}.get(text.lower(), text)
    return out


class Identity(NamedTuple):
    """A model as its source identifies it: its name and the model args that change what it is (a named tuple:
    it keys every run, and a tuple hashes fast)."""

    name: str
    args: tuple[tuple[str, str], ...]


def identity_of(doc: Mapping[str, Any], path: Path) -> Identity:
    """The model a results file is about: ``model_name`` (else ``model``, else the name args, else the folder)
    with its model args less :data:`RUNTIME_ARGS` (how it ran) and :data:`DEFAULT_ARGS` (a default's value), the same
    rule for every model and both lm-eval versions."""
    args = _args(doc)
    name = None
    for candidate in (doc.get("model_name"), doc.get("model")):
        if isinstance(candidate, str) and candidate.strip():
            name = candidate.strip()
            break
    if name is None:
        name = next((args[k] for k in (*NAME_ARGS, "load") if args.get(k)), None) or path.parent.name
    kept = tuple(sorted((k, v) for k, v in args.items()
                        if k not in RUNTIME_ARGS and (k, v) not in DEFAULT_ARGS
                        and not (k in (*NAME_ARGS, "load") and v.rstrip("/") == name.rstrip("/"))))
    return Identity(name.rstrip("/") if _is_path(name) and name != "/" else name, kept)


def display_names(identities: Sequence[Identity]) -> dict[Identity, str]:
    """A short, distinct row name per model: a local path by its last part(s), a hub id as it is; where two
    would still show alike, the model args that differ in parentheses.

    >>> a = Identity("/ws/build/v7-1B5-world", (("tmix_backend", "fla"),))
    >>> b = Identity("/ws/build/v7-1B5-world", (("tmix_backend", "pytorch"),))
    >>> c = Identity("org/m", ())
    >>> sorted(display_names([a, b, c]).values())
    ['org/m', 'v7-1B5-world (tmix_backend=fla)', 'v7-1B5-world (tmix_backend=pytorch)']
    """
    names = {i.name for i in identities}
    shown_name: dict[str, str] = {}
    depth = {n: 1 for n in names if _is_path(n)}
    while True:
        shown_name = {n: ("/".join(re.split(r"[\\/]", n)[-depth[n]:]) if n in depth else n) for n in names}
        clash = {n for n in depth for m in names if m != n and shown_name[m] == shown_name[n]}
        grow = {n for n in clash if depth[n] < len(re.split(r"[\\/]", n))}
        if not grow:
            break
        for n in grow:
            depth[n] += 1
    by_shown: dict[str, list[Identity]] = {}
    for i in identities:
        by_shown.setdefault(shown_name[i.name], []).append(i)
    out: dict[Identity, str] = {}
    for base, group in by_shown.items():
        if len(group) == 1:
            out[group[0]] = base
            continue
        keys = sorted({k for i in group for k, _ in i.args})
        differ = [k for k in keys if len({dict(i.args).get(k) for i in group}) > 1]
        for i in group:
            args = dict(i.args)
            shown_args = " ".join(f"{k}={args[k]}" for k in differ if k in args) or "default args"
            out[i] = f"{base} ({shown_args})"
    return out


# ---------------------------------------------------------------------- stamps
def stamp_of(doc: Mapping[str, Any], path: Path) -> float | None:
    """When a results file was made: its ``date`` (Unix seconds), else the time stamp in its name, else None
    (never the file's modification time: a checkout or a copy changes it)."""
    from datetime import datetime, timezone

    if doc.get("date") is not None:
        date = number(doc["date"])
        if date is None:
            raise UserError(f"{path}: .date must be the run's time as a number (Unix seconds, as lm-eval writes it), "
                            f"not {shown(doc['date'])}")
        return date
    match = STAMP.search(path.name)
    if match:
        day, _, clock = match.group(1).partition("T")
        try:
            return datetime.fromisoformat(f"{day}T{clock.replace('-', ':')}").replace(tzinfo=timezone.utc).timestamp()
        except ValueError:
            pass
    match = STAMP_03.search(path.name)
    if match:
        mo, d, y, h, mi, s = (int(x) for x in match.groups())
        try:
            return datetime(y, mo, d, h, mi, s, tzinfo=timezone.utc).timestamp()
        except ValueError:
            pass
    return None


# ---------------------------------------------------------------------- runs
class Run(NamedTuple):
    """One task (or group) of one model in one results file under one setting (a named tuple: a folder of
    results files makes tens of thousands)."""

    model: Identity
    task: str
    setting: tuple[tuple[str, Any], ...]
    scores: dict[tuple[str, str], tuple[float, float | None]]  # (metric, filter) → (score, standard error)
    file: Path
    stamp: float | None
    directions: Mapping[str, Any]  # metric → the file's higher_is_better (True / False / None)
    precision: str | None


def _score_key(key: str, old: bool) -> tuple[str, str, str, tuple[float | None, float | None] | None] | None:
    """(metric, filter, its standard error's key, its valid range or None) of a ``results`` key; None for a key
    that holds no score (``alias``, a standard error); "" as the metric for a key with an empty part."""
    if old:
        if key in ("alias", "samples") or key.endswith("_stderr"):
            return None
        metric, filter_name, se_key = key, "none", f"{key}_stderr"
    else:
        metric, sep, filter_name = key.partition(",")
        if not sep or metric.endswith("_stderr"):
            return None
        if not metric.strip() or not filter_name.strip():
            return "", "", "", None
        se_key = f"{metric}_stderr,{filter_name}"
    known = known_metric(metric)
    return metric, filter_name, se_key, (RANGES.get(known[1]) if known is not None else None)


#: what :func:`_score_key` made of each key (0.4, 0.3): every file repeats the same few keys (bounded)
_SCORE_KEYS: dict[bool, dict[str, Any]] = {False: {}, True: {}}


def task_scores(metrics: Mapping[str, Any], path: Path, model: str, task: str, old: bool,
                options: Options, placeholders: list[str]) -> dict[tuple[str, str], tuple[float, float | None]]:
    """(metric, filter) → (score, standard error or None) of one task's ``results`` entry; a score that is there
    but is no finite number (or outside its metric's range), a negative standard error, or a key with an empty
    metric or filter name is a one-line :class:`UserError`."""
    out: dict[tuple[str, str], tuple[float, float | None]] = {}
    known_keys = _SCORE_KEYS[old]
    for key, value in metrics.items():
        key = str(key)
        parsed = known_keys.get(key, False)
        if parsed is False:
            parsed = _score_key(key, old)
            if len(known_keys) < 10_000:
                known_keys[key] = parsed
        if parsed is None:
            continue
        metric, filter_name, se_key, bounds = parsed
        if not metric:
            raise UserError(f"{path}: {json_path(['results', task, key])}: a score key must be "
                            "'<metric>,<filter>' with both names (such as 'acc,none'), not an empty one")
        if type(value) is not float or not math.isfinite(value):  # else a plain score (the fast path)
            value = score(value, f"{path}: model {model!r}, task {task!r}, metric {key!r}", missing=["N/A"],
                          absent='null or "N/A"')
            if value is None:
                continue
        if metric.isdigit() and value == RULER_PLACEHOLDER:
            placeholders.append(f"{task} {metric}")
            continue
        if bounds is not None and not ((bounds[0] is None or value >= bounds[0])
                                       and (bounds[1] is None or value <= bounds[1])):
            value = in_range(value, *bounds, f"{path}: model {model!r}, task {task!r}, metric {key!r}", options)
            if value is None:
                continue
        se = metrics.get(se_key)
        if type(se) is not float or not math.isfinite(se) or se < 0:
            se_where = f"{path}: model {model!r}, task {task!r}, standard error {se_key!r}"
            se = score(se, se_where, missing=["N/A"], absent='null or "N/A"')
            if se is not None and se < 0:
                raise UserError(f"{se_where} is {se:g}: a standard error is never negative (fix the file, or write "
                                "\"N/A\" for an unknown one)")
        out[(metric, filter_name)] = (value, se)
    return out


def _setting(doc: Mapping[str, Any], task: str, old: bool, leaves: Sequence[str]) -> tuple[tuple[str, Any], ...]:
    """The settings a task ran under (n_shot, version, limit, chat template, few-shot as multi-turn).

    >>> doc = {"n-shot": {"mmlu": 0, "mmlu_a": 5, "mmlu_b": 5}, "versions": {"mmlu": 2}}
    >>> _setting(doc, "mmlu", False, ["mmlu_a", "mmlu_b"]), _setting(doc, "mmlu_a", False, [])
    ((('n_shot', 5), ('version', '2')), (('n_shot', 5),))
    """
    return _settings(doc, old)(task, leaves)


def _settings(doc: Mapping[str, Any], old: bool, overridden: list[str] | None = None) -> Any:
    """:func:`_setting` of one file, its file-wide parts read once: ``(task, leaves) → settings`` (``overridden``
    receives ``group (n-shot)`` where the subtasks' n-shot replaces another the file gives the group)."""
    config = doc.get("config") or {}
    shots = doc.get("n-shot") or {}
    versions = doc.get("versions") or {}
    base: list[tuple[str, Any]] = []  # in the order of the keys' names
    if doc.get("chat_template") is not None:
        base.append(("chat_template", True))
    if doc.get("fewshot_as_multiturn"):
        base.append(("fewshot_as_multiturn", True))
    if config.get("limit") is not None:
        base.append(("limit", config["limit"]))
    fallback = config.get("num_fewshot", doc.get("num_fewshot")) if old else doc.get("num_fewshot")

    made: dict[tuple[Any, Any], tuple[tuple[str, Any], ...]] = {}

    def setting(task: str, leaves: Sequence[str]) -> tuple[tuple[str, Any], ...]:
        if not leaves and not old:  # a task: its own n-shot and version (one tuple per pair, made once)
            shot, version = shots.get(task), versions.get(task)
            key = (shot if shot is not None else fallback, version)
            got = made.get(key)
            if got is None:
                got = made[key] = _settled_tuple(base, *key)
            return got
        if old:
            shot = fallback
        else:
            # a group: the n-shot its subtasks ran with (lm-eval writes 0, or nothing, for the group itself)
            found = {_shot(x) for t in leaves if (x := shots.get(t)) is not None} if leaves else None
            if found:
                shot = found.pop() if len(found) == 1 else "+".join(str(x) for x in sorted(found, key=str))
                own = shots.get(task)
                if overridden is not None and own is not None and _shot(own) != shot:
                    overridden.append(f"{task} ({shot}-shot, not {own})")
            else:
                shot = shots.get(task)
                if shot is None:
                    shot = fallback
        return _settled_tuple(base, shot, versions.get(task))

    return setting


def _settled_tuple(base: Sequence[tuple[str, Any]], shot: Any, version: Any) -> tuple[tuple[str, Any], ...]:
    out = list(base)
    if shot is not None:
        out.append(("n_shot", _shot(shot)))
    if version is not None:
        out.append(("version", str(version)))
    return tuple(out)


def stated_directions(doc: Mapping[str, Any]) -> Mapping[str, Mapping[str, bool | None]]:
    """task → metric → higher is better (True / False; None: not stated), wherever the file states it: the
    top-level ``higher_is_better`` (0.4.x), else the task's ``configs.<task>.metric_list`` entries (some 0.4
    versions state it only there).

    >>> d = stated_directions({"higher_is_better": {"t": {"acc": True, "x": None}},
    ...                        "configs": {"t": {"metric_list": [{"metric": "x", "higher_is_better": False}]},
    ...                                    "u": {"metric_list": [{"metric": "y", "higher_is_better": True}]}}})
    >>> dict(d["t"]), dict(d["u"])
    ({'x': False, 'acc': True}, {'y': True})
    """
    hib = doc.get("higher_is_better") or {}
    configs = doc.get("configs")
    extra: dict[str, dict[str, bool]] = {}
    for task, config in (configs.items() if isinstance(configs, Mapping) else ()):
        own = hib.get(task)
        if own and None not in own.values():
            continue  # the top level states this task's every metric
        metric_list = config.get("metric_list") if isinstance(config, Mapping) else None
        if not metric_list or not isinstance(metric_list, list):
            continue
        for entry in metric_list:
            if isinstance(entry, Mapping) and isinstance(entry.get("metric"), str) \
                    and isinstance(entry.get("higher_is_better"), bool):
                extra.setdefault(str(task), {})[entry["metric"]] = entry["higher_is_better"]
    if not extra:
        return hib
    merged = {t: {**flags, **{m: f for m, f in (hib.get(t) or {}).items() if f is not None}}
              for t, flags in extra.items()}
    return {**hib, **merged}


def _group_directions(stated: Mapping[str, Mapping[str, bool | None]], task: str, leaves: Sequence[str],
                      metrics: Any = ()) -> Mapping[str, bool | None]:
    """A task's stated directions; a group's metric the file states none for takes its subtasks' (when they agree:
    a group row's metric is its subtasks' metric). ``metrics``: the ones wanted (a group stating all of them
    needs no look at its subtasks)."""
    own = stated.get(task) or {}
    if not leaves or (metrics and all(own.get(m) is not None for m in metrics)):
        return own
    found: dict[str, set[bool]] = {}
    for leaf in leaves:
        for metric, flag in (stated.get(leaf) or {}).items():
            if flag is not None:
                found.setdefault(metric, set()).add(flag)
    inherited = {m: next(iter(flags)) for m, flags in found.items() if len(flags) == 1 and own.get(m) is None}
    return {**own, **inherited} if inherited else own


def _shot(value: Any) -> Any:
    """An n-shot as one value (``5.0`` → ``5``)."""
    if type(value) is int:
        return value
    return int(value) if isinstance(value, (int, float)) and float(value).is_integer() else value


def _precision(doc: Mapping[str, Any], identity: Identity) -> str | None:
    args = dict(identity.args)
    for key in ("dtype", "torch_dtype", "precision"):
        if args.get(key):
            return args[key]
    dtype = (doc.get("config") or {}).get("model_dtype")
    return str(dtype).removeprefix("torch.") if dtype else None


# ---------------------------------------------------------------------- hierarchy
def _parents(docs: Sequence[tuple[Path, Mapping[str, Any], bool]], options: Options) -> dict[str, str]:
    """task → its group, from every file's ``group_subtasks`` (0.3: :data:`FAMILIES_03`); a task that files put
    in different groups gets the first by name (noted)."""
    found: dict[str, set[str]] = {}
    alone: dict[str, set[str]] = {}  # 0.3 tasks of no family, by the prefix they share
    for _, doc, old in docs:
        if old:
            for task in doc["results"]:
                family = next((f for prefix, f in FAMILIES_03.items() if str(task).startswith(prefix)), None)
                if family is not None:
                    found.setdefault(str(task), set()).add(family)
                elif re.search(r"[_-]", str(task)):
                    alone.setdefault(re.split(r"[_-]", str(task))[0], set()).add(str(task))
        for group, subs in (doc.get("group_subtasks") or {}).items():
            for sub in subs or ():
                if str(sub) != str(group):
                    found.setdefault(str(sub), set()).add(str(group))
    families: dict[str, int] = {}
    for _, doc, old in docs:
        if old:
            for task in doc["results"]:
                family = next((f for prefix, f in FAMILIES_03.items() if str(task).startswith(prefix)), None)
                if family is not None and str(task) != family:
                    families[family] = families.get(family, 0) + 1
    if families:
        _note(options, "lm-eval: lm-eval 0.3 tasks grouped into their benchmark by name (FAMILIES_03), one vote "
                       "each: " + _listed([f"{f} ({n} runs)" for f, n in sorted(families.items())], 4), "vote",
              ranks=True)
    shared = {p: ts for p, ts in alone.items() if len(ts) > 1}
    if shared:
        _note(options, "lm-eval: lm-eval 0.3 tasks sharing a name prefix that is no known task family (FAMILIES_03) "
                       "each vote as their own benchmark: " + "; ".join(
                           f"{p}: {_listed(sorted(ts), 3)}" for p, ts in sorted(shared.items())[:4]), "vote", ranks=True)
    parent = {task: sorted(groups)[0] for task, groups in found.items()}
    children: dict[str, list[str]] = {}
    for task, group in parent.items():
        children.setdefault(group, []).append(task)
    cycle = _cycle(children)
    if cycle:
        where = next((str(f) for f, doc, _ in docs if any(
            str(s) == cycle[1] for s in (doc.get("group_subtasks") or {}).get(cycle[0]) or ())), "the files")
        raise UserError(f"lm-eval: group_subtasks hold a cycle ({' → '.join(cycle)}; {where}): a group cannot be "
                        "inside itself; fix the file's group_subtasks")
    for task, groups in sorted(found.items()):
        if len(groups) > 1:
            _note(options, f"lm-eval: task {task!r} is in different groups in different files "
                           f"({', '.join(sorted(groups))}): its group is {parent[task]!r}", "format")
    return parent


def _ancestors(task: str, parent: Mapping[str, str]) -> list[str]:
    chain, seen = [], {task}
    while task in parent and parent[task] not in seen:
        task = parent[task]
        seen.add(task)
        chain.append(task)
    return chain


def benchmark_of(task: str, parent: Mapping[str, str]) -> str:
    """The benchmark a task belongs to: the top of its group hierarchy, a :data:`SUITES` group not counting.

    >>> benchmark_of("mmlu_anatomy", {"mmlu_anatomy": "mmlu_stem", "mmlu_stem": "mmlu"})
    'mmlu'
    >>> benchmark_of("leaderboard_bbh_navigate", {"leaderboard_bbh_navigate": "leaderboard_bbh",
    ...                                           "leaderboard_bbh": "leaderboard"})
    'leaderboard_bbh'
    """
    chain = [g for g in _ancestors(task, parent) if g not in SUITES]
    return chain[-1] if chain else task


def _leaves(task: str, children: Mapping[str, list[str]], _above: frozenset[str] = frozenset()) -> list[str]:
    """The leaf tasks under a group (a group met again below itself, a cycle, is not followed)."""
    out: list[str] = []
    above = _above | {task}
    for sub in children.get(task, ()):
        if sub in above:
            continue
        out.extend(_leaves(sub, children, above) if children.get(sub) else [sub])
    return out


def _cycle(children: Mapping[str, Sequence[str]]) -> list[str] | None:
    """A cycle of groups (``[a, b, a]``: a holds b, b holds a), or None.

    >>> _cycle({"a": ["b"], "b": ["c", "a"]}), _cycle({"a": ["b"], "b": ["c"]})
    (['a', 'b', 'a'], None)
    """
    done: set[str] = set()
    for start in children:
        if start in done:
            continue
        stack: list[tuple[str, Any]] = [(start, iter(children.get(start, ())))]
        on_path = {start}
        while stack:
            node, subs = stack[-1]
            sub = next(subs, None)
            if sub is None:
                stack.pop()
                on_path.discard(node)
                done.add(node)
            elif sub in on_path and sub != node:
                path = [n for n, _ in stack]
                return path[path.index(sub):] + [sub]
            elif sub not in done and sub != node and children.get(sub):
                stack.append((sub, iter(children[sub])))
                on_path.add(sub)
    return None


def carried(keys: Sequence[tuple[str, str]], leaves: Sequence[str],
            reported: Mapping[str, set[str]]) -> set[tuple[str, str]]:
    """The (metric, filter) pairs of a group row that it carries from only some of its subtasks, where others of
    its metrics come from more of them: details, not the group's score. TruthfulQA's group row holds ``acc``
    (of mc1 and mc2) beside the generative task's BLEU/ROUGE (0-100): its vote is ``acc``.

    >>> sorted(carried([("acc", "none"), ("bleu_max", "none")], ["gen", "mc1", "mc2"],
    ...                {"gen": {"bleu_max"}, "mc1": {"acc"}, "mc2": {"acc"}}))
    [('bleu_max', 'none')]
    """
    if not leaves:
        return set()
    coverage = {m: sum(m in reported.get(t, ()) for t in leaves) for m, _ in keys}
    top = max(coverage.values(), default=0)
    return {k for k in keys if coverage[k[0]] < top} if top > 0 else set()


def _note_mixed_units(criteria: Sequence[Any], options: Options) -> None:
    """A note for every benchmark whose vote goes through columns of different units (the board refuses it)."""
    mixed = {b: sorted(u) for b, u in vote_units(criteria).items() if len(u) > 1}
    if mixed:
        _note(options, "lm-eval: " + "; ".join(f"{b!r} votes through columns of different units ({', '.join(u)})"
                                               for b, u in sorted(mixed.items())[:3])
              + ": their scores share one vote as they are (give the benchmark one metric with --vote column, or "
                "leave some out)", "unit", ranks=True)


def vote_units(criteria: Sequence[Any]) -> dict[str, set[str]]:
    """benchmark → the units of the columns that vote for it under ``--vote benchmark``."""
    from ranking.votes import vote_weights

    out: dict[str, set[str]] = {}
    for c, w in zip(criteria, vote_weights(criteria, "benchmark")):
        if w > 0:
            out.setdefault(c.vote_unit, set()).add(c.unit)
    return out


def secondary(keys: Sequence[tuple[str, str]], task: str) -> set[tuple[str, str]]:
    """The (metric, filter) pairs of one task that are details behind its primary ones (:data:`PREFERENCES`,
    :data:`FILTER_PREFERENCES`, :data:`ACC_TASKS`).

    >>> sorted(secondary([("acc", "none"), ("acc_norm", "none")], "arc_easy"))
    [('acc', 'none')]
    >>> sorted(secondary([("acc", "none"), ("acc_norm", "none")], "hendrycksTest-anatomy"))
    [('acc_norm', 'none')]
    >>> sorted(secondary([("exact_match", "strict-match"), ("exact_match", "flexible-extract")], "gsm8k"))
    [('exact_match', 'flexible-extract')]
    """
    metrics = {m for m, _ in keys}
    chains = [c for c in PREFERENCES if not (c[:2] == ("acc_norm", "acc") and task.startswith(ACC_TASKS))]
    if task.startswith(ACC_TASKS):
        chains.append(("acc", "acc_norm"))
    later_metrics: set[str] = set()
    for chain in chains:
        present = [m for m in chain if m in metrics]
        later_metrics.update(present[1:])
    out = {k for k in keys if k[0] in later_metrics}
    for chain in FILTER_PREFERENCES:
        for metric in metrics:
            present = [f for f in chain if (metric, f) in keys]
            out.update((metric, f) for f in present[1:])
    return out


# ---------------------------------------------------------------------- reading
def _read_files(paths: Sequence[Path], options: Options) -> list[tuple[Path, Mapping[str, Any], bool]]:
    """(file, checked document, is lm-eval 0.3) of every results file; foreign files in folders are skipped
    (one note), unless none is readable."""
    docs: list[tuple[Path, Mapping[str, Any], bool]] = []
    skipped: list[tuple[Path, UserError]] = []
    for f, named in result_files(paths):
        try:
            doc = read_json(f, "lm-eval results file")
            if not isinstance(doc, Mapping) or not isinstance(doc.get("results"), Mapping):
                raise UserError(f"{f} is not an lm-eval results file: it has no top-level 'results' mapping")
        except UserError as exc:
            if named:
                raise
            skipped.append((f, exc))
            continue
        docs.append((f, checked(doc, f), _is_03(doc["results"])))
    if not docs:
        raise skipped[0][1]
    if skipped:
        _note(options, f"lm-eval: skipped {len(skipped)} file(s) that are no lm-eval results file: "
                       + _listed([str(f) for f, _ in skipped], 3), "left-out")
    old = [f for f, _, o in docs if o]
    if old:
        _note(options, f"lm-eval: read {len(old)} file(s) in lm-eval 0.3's format ('acc' keys without a filter; "
                       f"filter 'none'): {_listed([str(f) for f in old], 2)}", "format")
    return docs


def _pooled_stderr(errors: Sequence[float], sizes: Sequence[float]) -> float:
    """lm-eval's ``pooled_sample_stderr``: the standard error of a size-weighted mean of subtasks."""
    pooled = sum((n - 1) * e * e * n for e, n in zip(errors, sizes)) / (sum(sizes) - len(sizes))
    return math.sqrt(pooled / sum(sizes))


def _complete_groups(docs: list[tuple[Path, Mapping[str, Any], bool]], parent: Mapping[str, str],
                     options: Options) -> list[tuple[Path, Mapping[str, Any], bool]]:
    """Files that ran a group's subtasks without its group row (others have one) get the row lm-eval would have
    written: the mean of the subtasks weighted by their ``n-samples``, the pooled standard error, the version
    the other files give the group. So a model that ran GLUE's tasks one by one still votes for GLUE."""
    children: dict[str, list[str]] = {}
    for task, group in parent.items():
        children.setdefault(group, []).append(task)
    keys: dict[str, set[str]] = {}
    versions: dict[str, set[str]] = {}
    for _, doc, old in docs:
        for group in children:
            row = doc["results"].get(group)
            if not old and isinstance(row, Mapping) and any(
                    "," in str(k) and "_stderr" not in str(k) and number(v) is not None for k, v in row.items()):
                keys.setdefault(group, set()).update(
                    str(k) for k, v in row.items() if "," in str(k) and "_stderr" not in str(k) and number(v) is not None)
                if (doc.get("versions") or {}).get(group) is not None:
                    versions.setdefault(group, set()).add(str(doc["versions"][group]))
    made: dict[str, list[str]] = {}
    out = []
    for f, doc, old in docs:
        results = doc["results"]
        added: dict[str, dict[str, Any]] = {}
        for group, metric_keys in sorted(keys.items()):
            if old or any("," in str(k) for k in (results.get(group) or {})):
                continue
            leaves = _leaves(group, children)
            sizes = [number(((doc.get("n-samples") or {}).get(t) or {}).get("effective")) for t in leaves]
            if not leaves or any(t not in results for t in leaves) or any(n is None or n <= 1 for n in sizes):
                continue
            row: dict[str, Any] = {}
            for key in sorted(metric_keys):  # as lm-eval does: over the subtasks that report the metric
                have = [(number(results[t].get(key)), n, results[t].get(key.replace(",", "_stderr,", 1)))
                        for t, n in zip(leaves, sizes) if number(results[t].get(key)) is not None]
                if not have:
                    continue
                total = sum(n for _, n, _ in have)  # type: ignore[misc]
                row[key] = sum(x * n for x, n, _ in have) / total  # type: ignore[operator]
                errors = [number(e) for _, _, e in have]
                if not any(e is None for e in errors):
                    row[key.replace(",", "_stderr,", 1)] = _pooled_stderr(errors, [n for _, n, _ in have])  # type: ignore[arg-type,misc]
            if row:
                added[group] = row
                made.setdefault(group, []).append(str(f))
        if added:
            doc = dict(doc, results={**results, **added},
                       versions={**(doc.get("versions") or {}),
                                 **{g: next(iter(versions[g])) for g in added if len(versions.get(g, ())) == 1}})
        out.append((f, doc, old))
    for group, files in made.items():
        _note(options, f"lm-eval: {len(files)} file(s) ran the subtasks of {group!r} without its group row: its score "
                       "computed as lm-eval does (mean weighted by n-samples), so they vote for it too: "
                       f"{_listed(files, 2)}", "aggregate", ranks=True)
    return out


def _runs(docs: Sequence[tuple[Path, Mapping[str, Any], bool]], parent: Mapping[str, str],
          options: Options) -> list[Run]:
    children: dict[str, list[str]] = {}
    for task, group in parent.items():
        children.setdefault(group, []).append(task)
    runs: list[Run] = []
    placeholders: list[str] = []
    leaves_of: dict[str, list[str]] = {}
    overridden: list[str] = []
    for f, doc, old in docs:
        model = identity_of(doc, f)
        stamp, precision = stamp_of(doc, f), _precision(doc, model)
        hib = stated_directions(doc)
        setting_of = _settings(doc, old, overridden)
        for task, metrics in doc["results"].items():
            task = str(task)
            scores = task_scores(metrics, f, model.name, task, old, options, placeholders)
            if not scores:
                continue
            leaves = leaves_of.get(task)
            if leaves is None:
                leaves = leaves_of[task] = _leaves(task, children)
            runs.append(Run(model, task, setting_of(task, leaves), scores, f, stamp,
                            _group_directions(hib, task, leaves, {m for m, _ in scores}) if leaves
                            else hib.get(task) or {}, precision))
    if overridden:
        _note(options, f"lm-eval: {len(overridden)} group row(s) take the n-shot their subtasks ran with, not the one "
                       f"the file gives the group (lm-eval writes 0 for a group): {_listed(sorted(set(overridden)), 3)}",
              "settings", ranks=True)
    if placeholders:
        _note(options, f"lm-eval: {len(placeholders)} RULER score(s) of -1 (no sample of that context length) "
                       f"imported as missing: {_listed(sorted(set(placeholders)), 3)}", "placeholder", ranks=True)
    return runs


def _newest(candidates: list[Run], shown_as: str, options: Options,
            collected: list[tuple[str, str, str, list[str], str]]) -> Run:
    """The newest of several runs of one model (``shown_as``), task and setting (:func:`pick_newest`)."""
    first = candidates[0]
    if len(candidates) == 1:
        return first
    what = f"lm-eval task {first.task!r} of model {shown_as!r}"
    if len(candidates) > 1 and any(r.stamp is None for r in candidates) and options.on_duplicate != "error":
        if all(r.scores == first.scores for r in candidates):
            return first
        raise UserError(f"{what} appears {len(candidates)} times with different scores and "
                        f"{', '.join(str(r.file) for r in candidates if r.stamp is None)} carries no date (no 'date', "
                        "no time stamp in its name), so none is the newest: keep one of them")
    messages: list[str] = []
    quiet = copy.copy(options)  # pick_newest's note, collected here: the re-runs are summarised in one note
    quiet.note = messages.append  # type: ignore[method-assign]
    picked = pick_newest([(r.stamp, r.file, r) for r in candidates], what, quiet, same=lambda r: r.scores,
                         stamp="date")
    if len(candidates) > 1:
        left = sorted(str(r.file) for r in candidates if r is not picked)
        collected.append((shown_as, first.task, str(picked.file), left, messages[0]))
    return picked


def _note_duplicates(collected: list[tuple[str, str, str, list[str], str]], options: Options) -> None:
    """One note per (model, kept file, left-out files) of re-runs; one line for the rest when there are many."""
    if not collected:
        return
    if len(collected) == 1:
        _note(options, collected[0][4], "duplicate", ranks=True)
        return
    patterns: dict[tuple[str, str, tuple[str, ...]], list[str]] = {}
    for model, task, kept, left, _ in collected:
        patterns.setdefault((model, kept, tuple(left)), []).append(task)
    lines = []
    for (model, kept, left), tasks in patterns.items():
        names = _listed([repr(t) for t in sorted(tasks)], 4)
        lines.append(f"lm-eval tasks {names} of model {model!r} appear {len(left) + 1} times: kept the newest "
                     f"({kept}), left out {_listed(list(left), 2)}")
    shown_lines = lines[:3]
    more = f"; and {len(lines) - 3} more re-runs like these" if len(lines) > 3 else ""
    _note(options, "; ".join(shown_lines) + more + " (--on-duplicate error refuses duplicates)", "duplicate",
          ranks=True)


def _describe_setting(setting: Mapping[str, Any], keys: Sequence[str]) -> str:
    """The part of a column name that says its setting (``5-shot``, ``v2``, ``limit100``, ``chat``)."""
    parts = []
    for key in keys:
        value = setting.get(key)
        if key == "n_shot":
            parts.append(f"{value}-shot" if value is not None else "n-shot-unknown")
        elif key == "version":
            parts.append(f"v{value}" if value is not None else "v-unknown")
        elif key == "limit":
            parts.append(f"limit{value}" if value is not None else "no-limit")
        elif key == "chat_template":
            parts.append("chat" if value else "no-chat")
        elif key == "fewshot_as_multiturn":
            parts.append("multiturn" if value else "single-turn")
    return "@".join(_escape(p) for p in parts)


def _settled(runs: list[Run]) -> list[Run]:
    """The runs with the settings that tell a task's columns apart: a setting some files state and others leave
    out (a file without ``versions``) splits nothing unless two files state different values; where only one
    value is stated, every run of the task has it.

    >>> r = lambda s: Run(Identity("m", ()), "t", s, {}, Path("f"), None, {}, None)
    >>> [x.setting for x in _settled([r((("n_shot", 0), ("version", "1"))), r((("n_shot", 0),))])]
    [(('n_shot', 0), ('version', '1')), (('n_shot', 0), ('version', '1'))]
    >>> [x.setting for x in _settled([r((("version", "1"),)), r((("version", "2"),)), r(())])]
    [(('version', '1'),), (('version', '2'),), (('version', None),)]
    """
    stated: dict[str, dict[str, set[Any]]] = {}
    count: dict[str, set[int]] = {}  # task → how many settings its runs state
    for r in runs:
        task_stated = stated.get(r.task)
        if task_stated is None:
            task_stated = stated[r.task] = {}
            count[r.task] = set()
        count[r.task].add(len(r.setting))
        for key, value in r.setting:
            task_stated.setdefault(key, set()).add(value)
    settled = {t for t, keys in stated.items()  # every run states every setting: nothing to settle
               if count[t] == {len(keys)} and all(len(v) == 1 for v in keys.values())}
    out = []
    for r in runs:
        task_stated = stated[r.task]
        if r.task in settled or (len(task_stated) == len(r.setting)
                                 and all(len(task_stated[k]) == 1 for k, _ in r.setting)):
            out.append(r)
            continue
        own = dict(r.setting)
        setting = {k: (next(iter(v)) if len(v) == 1 else own.get(k)) for k, v in task_stated.items()}
        out.append(r._replace(setting=tuple(sorted(setting.items()))))
    return out


@dataclass
class Column:
    task: str
    metric: str
    filter: str
    setting: tuple[tuple[str, Any], ...]
    name: str = ""


def read(paths: Sequence[Path], options: Options) -> Any:
    """The score table of lm-eval output (module docstring)."""
    docs = _read_files(paths, options)
    parent = _parents(docs, options)
    docs = _complete_groups(docs, parent, options)
    children: dict[str, list[str]] = {}
    for task, group in parent.items():
        children.setdefault(group, []).append(task)
    runs = _settled(_runs(docs, parent, options))

    by_key: dict[tuple[Identity, str, tuple[tuple[str, Any], ...]], list[Run]] = {}
    for run in runs:
        by_key.setdefault((run.model, run.task, run.setting), []).append(run)
    # every file's model, the ones without any score too (assemble names them in a note)
    models = sorted({identity_of(doc, f) for f, doc, _ in docs}, key=lambda i: (i.name, i.args))
    defaults = sorted({f"{k}={v}" for _, doc, _ in docs for k, v in _args(doc).items() if (k, v) in DEFAULT_ARGS})
    if defaults:
        _note(options, f"lm-eval: model args at a value that changes nothing ({', '.join(defaults)}) are left out of "
                       "every model's identity, as the runtime ones (trust_remote_code, batch_size, ...) are",
              "identity", ranks=True)
    names = display_names(models)
    _note_identities(models, names, options)
    collected: list[tuple[str, str, str, list[str], str]] = []
    kept = [c[0] if len(c) == 1 else _newest(sorted(c, key=lambda r: str(r.file)), names[key[0]], options, collected)
            for key, c in by_key.items()]
    _note_duplicates(collected, options)

    # one column per task × metric × filter × setting; the setting named only where a task has several
    settings_of: dict[str, dict[tuple[tuple[str, Any], ...], set[str]]] = {}
    shown_of: dict[int, str] = {}  # id(a run's Identity) → its row name (runs of one file share one Identity)
    for r in kept:
        shown = shown_of.get(id(r.model))
        if shown is None:
            shown = shown_of[id(r.model)] = names[r.model]
        settings_of.setdefault(r.task, {}).setdefault(r.setting, set()).add(shown)
    _note_settings(settings_of, options)
    columns: dict[tuple[str, str, str, tuple[tuple[str, Any], ...]], Column] = {}
    scores: dict[str, dict[str, float]] = {names[m]: {} for m in models}
    errors: dict[str, dict[str, float]] = {}
    said: dict[str, dict[bool | None, Path]] = {}  # column → direction → the first file saying it (None: any file)
    precisions: dict[tuple[str, Any], set[str | None]] = {}  # (task, setting) → the precisions its runs used
    escaped: set[str] = set()
    differs: dict[str, list[str]] = {}
    for task, variants in settings_of.items():
        if len(variants) > 1:
            differs[task] = sorted({k for s in variants for k, _ in s if len({dict(t).get(k) for t in variants}) > 1})
    named: dict[tuple[str, Any], dict[tuple[str, str], str]] = {}  # (task, setting) → (metric, filter) → column
    for r in kept:
        differ = differs.get(r.task)
        shown = shown_of[id(r.model)]
        row, row_errors, flags = scores[shown], errors.setdefault(shown, {}), r.directions
        ts = (r.task, r.setting)
        names_of = named.get(ts)
        if names_of is None:
            names_of, precisions[ts] = named[ts], _ = {}, set()
        precisions[ts].add(r.precision)
        for mf, (value, se) in r.scores.items():
            name = names_of.get(mf)
            if name is None:
                metric, filter_name = mf
                name = column_name(r.task, metric, filter_name)
                if "%" in name:
                    escaped.add(f"{r.task} {metric}" + ("" if filter_name == "none" else f" {filter_name}"))
                if differ is not None:
                    name += "@" + _describe_setting(dict(r.setting), differ)
                columns[(r.task, metric, filter_name, r.setting)] = Column(r.task, metric, filter_name, r.setting, name)
                names_of[mf] = name
                said[name] = {None: r.file}
            row[name] = value
            if se is not None:
                row_errors[name] = se
            flag = flags.get(mf[0])
            if flag is not None and flag not in said[name]:
                said[name][flag] = r.file
    if escaped:
        _note(options, "lm-eval: names with '/' or '%' are written escaped (%2F, %25) so that no two "
                       f"metrics share a column: {_listed(sorted(escaped), 3)}", "format")
    names_seen: dict[str, Column] = {}
    for col in columns.values():
        if col.name in names_seen:
            raise UserError(f"lm-eval: tasks {names_seen[col.name].task!r} and {col.task!r} would share column "
                            f"{col.name!r}: rename one of the tasks")
        names_seen[col.name] = col

    scored_groups = {c.task for c in columns.values() if children.get(c.task)}
    keys_of: dict[tuple[str, Any], list[tuple[str, str]]] = {}
    for c in columns.values():
        keys_of.setdefault((c.task, c.setting), []).append((c.metric, c.filter))
    reported: dict[str, set[str]] = {}
    for r in kept:
        reported.setdefault(r.task, set()).update(m for m, _ in r.scores)
    carried_of = {k: carried(v, _leaves(k[0], children), reported) for k, v in keys_of.items()}
    details = {k: secondary(v, k[0]) | carried_of[k] for k, v in keys_of.items()}
    demoted = sorted({f"{task}: {', '.join(sorted({m for m, _ in keys}))}" for (task, _), keys in carried_of.items()
                      if keys})
    if demoted:
        _note(options, "lm-eval: group rows carry metrics of only some of their subtasks (beside metrics of more of "
                       "them): kept as details, not the group's vote — " + _listed(demoted, 2), "vote", ranks=True)
    voters = {b: t for b, t in CONVENTIONS.items() if t in reported and benchmark_of(t, parent) == b}
    criteria = []
    unstated: list[tuple[str, str, Path]] = []
    for col in sorted(columns.values(), key=lambda c: c.name):
        primary = (col.metric, col.filter) not in details[(col.task, col.setting)]
        criteria.append(_criterion(col, primary, parent, children, scored_groups, said[col.name],
                                   precisions[(col.task, col.setting)], options, unstated, voters))
    if unstated:
        raise unstated_directions(unstated)
    if voters:
        _note(options, "lm-eval: " + "; ".join(f"{b!r} votes through {t!r} (the suite's own score), its group row "
                                               "is a detail" for b, t in sorted(voters.items())), "vote", ranks=True)
    _note_mixed_units(criteria, options)
    _check_parity(docs, parent, children, options)
    source = f"lm-eval {describe_paths(paths)}"
    return assemble(scores, criteria, source, options, errors, board="lm-eval")


def unstated_directions(unstated: Sequence[tuple[str, str, Path]]) -> UserError:
    """One refusal naming every metric without a stated direction (metric, task, a file), with the one option
    that imports them all.

    >>> print(unstated_directions([("bleu_x", "t1", Path("a.json")), ("bleu_x", "t2", Path("a.json")),
    ...                            ("tox", "t3", Path("b.json"))]))
    lm-eval: 2 metrics have no stated direction (the files do not say and this importer does not know them): bleu_x (task t1, a.json), tox (task t3, b.json): pass them all at once, --higher bleu_x,tox (any that is lower-is-better under --lower instead; Python: higher=['bleu_x', 'tox'] / lower=[...])
    """
    first: dict[str, tuple[str, Path]] = {}
    for metric, task, file in unstated:
        first.setdefault(metric, (task, file))
    metrics = sorted(first)
    listed = ", ".join(f"{m} (task {first[m][0]}, {first[m][1]})" for m in metrics[:12])
    more = f", … ({len(metrics)} in all)" if len(metrics) > 12 else ""
    return UserError(f"lm-eval: {len(metrics)} metric{'s have' if len(metrics) > 1 else ' has'} no stated direction "
                     f"(the files do not say and this importer does not know them): {listed}{more}: pass them all "
                     f"at once, --higher {','.join(metrics)} (any that is lower-is-better under --lower instead; Python: "
                     f"higher={metrics!r} / lower=[...])")


def _note_identities(models: Sequence[Identity], names: Mapping[Identity, str], options: Options) -> None:
    split = sorted({m.name for m in models if names[m] != m.name and "(" in names[m]})
    if split:
        _note(options, "lm-eval: " + "; ".join(
            f"{n!r} ran with different model args, one row each: "
            + _listed(sorted(names[m] for m in models if m.name == n), 3) for n in split[:3])
            + (f"; and {len(split) - 3} more" if len(split) > 3 else ""), "identity", ranks=True)
    short = sorted((names[m].split(" (")[0], m.name) for m in models if _is_path(m.name))
    if short:
        _note(options, "lm-eval: local paths shown short: "
                       + _listed(sorted({f"{s} = {full}" for s, full in short}), 3), "identity")


def _note_settings(settings_of: Mapping[str, Mapping[tuple[tuple[str, Any], ...], set[str]]],
                   options: Options) -> None:
    """One note per pattern of mixed settings (tasks whose models split alike), naming the models."""
    patterns: dict[str, list[str]] = {}
    for task, variants in settings_of.items():
        if len(variants) < 2:
            continue
        keys = sorted({k for s in variants for k, _ in s if len({dict(t).get(k) for t in variants}) > 1})
        described = "; ".join(
            f"{', '.join(f'{k}={dict(s).get(k)}' for k in keys)}: {_listed(sorted(models), 3)}"
            for s, models in sorted(variants.items(), key=lambda kv: str(kv[0])))
        patterns.setdefault(described, []).append(task)
    for described, tasks in patterns.items():
        _note(options, f"lm-eval: {len(tasks)} task(s) ({_listed(sorted(tasks), 3)}) were run with different "
                       f"settings, one column per setting (sharing the task's vote) — {described}", "settings",
              ranks=True)


def _criterion(col: Column, primary: bool, parent: Mapping[str, str], children: Mapping[str, list[str]],
               scored_groups: set[str], said: Mapping[bool | None, Path], precisions: set[str | None],
               options: Options, unstated: list[tuple[str, str, Path]], voters: Mapping[str, str]) -> Any:
    """One column's criterion: what it is (benchmark, task, metric, settings, range), whether it votes, and its
    direction (stated by the caller, else the files, which must agree with each other and with
    :data:`KNOWN_METRICS`, else :data:`KNOWN_METRICS`)."""
    from ranking.table import Criterion

    task, metric = col.task, col.metric
    direction = options.stated(col.name, metric)
    known = known_metric(metric)
    if direction is None and True in said and False in said:
        raise UserError(f"lm-eval files disagree on the direction of metric {metric!r} of task {task!r}: "
                        f"{said[True]} says higher is better, {said[False]} lower: pass --higher {metric} "
                        f"or --lower {metric} (Python: higher=[{metric!r}] / lower=[{metric!r}])")
    if direction is None and (True in said or False in said):
        direction = "higher" if True in said else "lower"
        if known is not None and direction != known[0]:
            file = said[direction == "higher"]
            raise UserError(f"{file} says {metric!r} of task {task!r} is {direction}-is-better, but {metric} is "
                            f"documented {known[0]}-is-better: pass --{direction} {metric} to confirm the file, or "
                            f"--{known[0]} {metric}")
    if direction is None and known is not None:
        direction = known[0]
    if direction is None:
        unstated.append((metric, task, said[None]))
        direction = "higher"  # placeholder: read() refuses the import, naming every unstated metric at once

    benchmark = benchmark_of(task, parent)
    is_group = bool(children.get(task))
    weight, detail, aggregate = 1.0, False, False
    if benchmark in voters:  # the suite's convention: one member task votes (CONVENTIONS)
        if is_group:
            detail, weight = True, 0.0
        else:
            detail = task != voters[benchmark] or not primary
    elif is_group:
        aggregate = task == benchmark and primary
        if not aggregate:  # an intermediate group, or a group's secondary metric: its parts vote in its place
            detail, weight = True, 0.0
    elif task != benchmark and benchmark in scored_groups:
        detail = True  # behind its benchmark's group score
    else:
        detail = not primary
    setting = dict(col.setting)
    settings: dict[str, Any] = {"filter": col.filter, **{k: v for k, v in setting.items() if v is not None}}
    if len(precisions) == 1 and None not in precisions:
        settings["precision"] = next(iter(precisions))
    version, shot = setting.get("version"), setting.get("n_shot")
    source = f"lm-eval {task}" + (f" v{version}" if version is not None else "") + (
        f", {shot}-shot" if shot is not None else "")
    unit = known[1] if known else "as reported"
    return Criterion(col.name, direction=direction, weight=weight, group=benchmark, unit=unit, source=source,
                     benchmark=benchmark, task=task, metric=metric, settings=settings,
                     range=RANGES.get(unit), detail=detail, aggregate=aggregate)


# ---------------------------------------------------------------------- board
def group_parity(doc: Mapping[str, Any]) -> list[tuple[str, str, float, float]]:
    """(group, score key, the file's group score, the group score recomputed from its subtasks) for every scored
    group of a 0.4 results file: the mean of its leaf tasks' scores weighted by their ``n-samples`` (effective),
    as lm-eval's ``aggregate_subtask_metrics`` computes it (``weight_by_size``, the default of its groups)."""
    return [(group, key, given, weighted) for group, key, given, weighted, _ in _parity(doc)]


def _parity(doc: Mapping[str, Any], leaves_of: Any = None,
            only: Any = None) -> list[tuple[str, str, float, float, float]]:
    """:func:`group_parity`'s rows with the plain (unweighted) mean of the subtasks too (``leaves_of``: group →
    its leaf tasks, where the caller has them; else from the file's ``group_subtasks``; ``only``: these groups)."""
    results = doc.get("results") or {}
    if leaves_of is None:
        hierarchy = {str(g): [str(s) for s in subs or ()] for g, subs in (doc.get("group_subtasks") or {}).items()}
        leaves_of = lambda g: _leaves(g, hierarchy)  # noqa: E731
    sizes = doc.get("n-samples") or {}
    out = []
    for group, subs in (doc.get("group_subtasks") or {}).items():
        group = str(group)
        if not subs or not isinstance(results.get(group), Mapping) or (only is not None and group not in only):
            continue
        rows = [(results[t], number((sizes.get(t) or {}).get("effective")))
                for t in leaves_of(group) if isinstance(results.get(t), Mapping)]
        for key, value in results[group].items():
            key = str(key)
            if "," not in key or "_stderr" in key:
                continue
            given = number(value)
            if given is None:
                continue
            parts = [(x if type(x := row.get(key)) is float and math.isfinite(x) else number(x), n) for row, n in rows]
            parts = [(x, n) for x, n in parts if x is not None]
            if not parts or any(n is None for _, n in parts):
                continue
            total = sum(n for _, n in parts)  # type: ignore[misc]
            if total > 0:
                out.append((group, key, given, sum(x * n for x, n in parts) / total,  # type: ignore[misc]
                            sum(x for x, _ in parts) / len(parts)))
    return out


def _check_parity(docs: Sequence[tuple[Path, Mapping[str, Any], bool]], parent: Mapping[str, str],
                  children: Mapping[str, list[str]], options: Options) -> None:
    """A note for the group rows that vote (a benchmark's, not an intermediate group's) that are neither the
    size-weighted nor the plain mean of their subtasks (the leaves of every file's hierarchy that the file holds)."""
    odd = []
    memo: dict[str, list[str]] = {}
    benchmarks = {g for g in children if benchmark_of(g, parent) == g}

    def leaves_of(group: str) -> list[str]:
        if group not in memo:
            memo[group] = _leaves(group, children)
        return memo[group]

    for f, doc, old in docs:
        if old:
            continue
        for group, key, given, weighted, plain in _parity(doc, leaves_of, benchmarks):
            if not (math.isclose(given, weighted, rel_tol=1e-9, abs_tol=1e-12)
                    or math.isclose(given, plain, rel_tol=1e-9, abs_tol=1e-12)):
                odd.append(f"{f}: {group} {key} {given:.6g} (subtasks: {weighted:.6g} by size)")
    if odd:
        _note(options, f"lm-eval: {len(odd)} group score(s) are no mean of the subtasks the file holds (kept as "
                       f"lm-eval wrote them): {_listed(odd, 2)}", "format")


def board_scores(table: Any) -> Any:
    """lm-eval's own aggregate per model: the mean over benchmarks of each benchmark's voting score (its group
    row as lm-eval computed it; a benchmark without one, the mean of the columns that share its vote).
    Lower-is-better benchmarks (perplexities) are left out of the mean; a model without a score on every
    benchmark gets NaN."""
    import numpy as np

    from ranking.votes import vote_weights

    mixed = {b: sorted(u) for b, u in vote_units(table.criteria).items() if len(u) > 1}
    if mixed:
        b, u = sorted(mixed.items())[0]
        raise UserError(f"lm-eval board: benchmark {b!r} votes through columns of different units ({', '.join(u)}): "
                        "a mean of them is no score lm-eval computes; import it with one metric per benchmark")
    weights = vote_weights(table.criteria, "benchmark")
    units: dict[str, list[int]] = {}
    for j, c in enumerate(table.criteria):
        if weights[j] > 0 and c.direction == "higher":
            units.setdefault(c.vote_unit, []).append(j)
    if not units:
        return np.full(table.n_models, np.nan)
    per_benchmark = np.column_stack([
        (table.values[:, cols] * weights[cols]).sum(axis=1) / weights[cols].sum() for cols in units.values()])
    return per_benchmark.mean(axis=1)
