"""lm-evaluation-harness result files in the structure its releases write (written here, never copied).

* :func:`results_04`: a 0.4.x ``results_<date>.json`` (keys as 0.4.8 writes them: ``results`` with group rows,
  ``groups``, ``group_subtasks`` (leaf tasks with ``[]``), ``configs``, ``versions``, ``n-shot`` (0 for a group,
  whatever n-shot its subtasks ran with, as lm-eval writes it),
  ``higher_is_better``, ``n-samples``, ``config`` with ``model_args`` / ``model_dtype``, ``date``, ``model_name``,
  chat-template fields). Group rows are computed as lm-eval's ``aggregate_subtask_metrics`` does: the mean of
  the leaf tasks weighted by their ``n-samples`` (effective), the standard error pooled.
* :func:`results_03`: a 0.3 results file (``"acc"``/``"acc_stderr"`` keys, ``versions``, ``config`` with
  ``model_args`` and ``num_fewshot``), as Pythia's ``evals/`` folder holds them.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

#: MMLU as lm-eval groups it (a part): group → members; leaf sizes are the subjects' test-set sizes.
MMLU = {"mmlu": ["mmlu_stem", "mmlu_humanities"], "mmlu_stem": ["mmlu_anatomy", "mmlu_astronomy"],
        "mmlu_humanities": ["mmlu_formal_logic"]}
SIZES = {"mmlu_anatomy": 135, "mmlu_astronomy": 152, "mmlu_formal_logic": 126, "arc_easy": 2376, "gsm8k": 1319,
         "arc_challenge": 1172}
ALIAS = {"mmlu": "mmlu", "mmlu_stem": " - stem", "mmlu_humanities": " - humanities"}


def leaves(group: str, hierarchy: dict[str, list[str]]) -> list[str]:
    out: list[str] = []
    for sub in hierarchy.get(group, []):
        out.extend(leaves(sub, hierarchy) if sub in hierarchy else [sub])
    return out


def group_row(tasks: dict[str, dict], group: str, hierarchy: dict[str, list[str]], sizes: dict[str, int]) -> dict:
    """lm-eval's group row: size-weighted mean and pooled standard error of the leaves' ``acc,none``."""
    parts = leaves(group, hierarchy)
    n = [sizes[t] for t in parts]
    acc = sum(tasks[t]["acc,none"] * k for t, k in zip(parts, n)) / sum(n)
    pooled = sum((k - 1) * tasks[t]["acc_stderr,none"] ** 2 * k for t, k in zip(parts, n)) / (sum(n) - len(n))
    return {"acc,none": acc, "acc_stderr,none": math.sqrt(pooled / sum(n)), "alias": ALIAS.get(group, group)}


def results_04(model: str, scores: dict[str, float], *, model_args: str | None = None, date: float = 1740964420.8,
               n_shot: int = 0, mmlu: bool = True, extra: dict[str, dict] | None = None,
               hib: dict[str, dict] | None = None) -> dict:
    """A 0.4.8 results file. ``scores``: arc_easy, arc_easy_norm, gsm8k_strict, gsm8k_flex and the MMLU subjects
    (mmlu_anatomy, ...) that are there (a group row needs all of its leaves)."""
    tasks: dict[str, dict] = {}
    if "arc_easy" in scores:
        tasks["arc_easy"] = {"alias": "arc_easy", "acc,none": scores["arc_easy"], "acc_stderr,none": 0.0082,
                             "acc_norm,none": scores["arc_easy_norm"], "acc_norm_stderr,none": 0.0085}
    if "gsm8k_strict" in scores:
        tasks["gsm8k"] = {"alias": "gsm8k", "exact_match,strict-match": scores["gsm8k_strict"],
                          "exact_match_stderr,strict-match": 0.012, "exact_match,flexible-extract":
                          scores["gsm8k_flex"], "exact_match_stderr,flexible-extract": 0.013}
    subjects = [t for t in leaves("mmlu", MMLU) if t in scores]
    for t in subjects:
        tasks[t] = {"alias": "  - " + t.removeprefix("mmlu_"), "acc,none": scores[t], "acc_stderr,none": 0.04}
    groups: dict[str, dict] = {}
    hierarchy: dict[str, list[str]] = {}
    if mmlu and subjects == leaves("mmlu", MMLU):
        hierarchy = MMLU
        for g in ("mmlu", "mmlu_stem", "mmlu_humanities"):
            groups[g] = group_row(tasks, g, MMLU, SIZES)
    for task, metrics in (extra or {}).items():
        tasks[task] = metrics
    results = {}
    for name in sorted(tasks) + sorted(groups):  # lm-eval writes groups before their members; order is free
        results[name] = groups.get(name, tasks.get(name))
    group_subtasks = {t: [] for t in tasks if t not in leaves("mmlu", hierarchy)} | hierarchy
    all_tasks = [t for t in tasks]
    doc = {
        "results": results,
        **({"groups": groups} if groups else {}),
        "group_subtasks": group_subtasks,
        "configs": {t: {"task": t, "num_fewshot": n_shot, "metadata": {"version": 1.0}} for t in all_tasks},
        "versions": {t: 1.0 for t in all_tasks} | ({"mmlu": 2, "mmlu_stem": 2, "mmlu_humanities": 2} if groups else {}),
        "n-shot": {t: n_shot for t in all_tasks} | {g: 0 for g in groups},  # a group's own n-shot: 0, whatever its tasks ran
        "higher_is_better": {t: {m.split(",")[0]: m.split(",")[0] != "perplexity" for m in tasks[t]
                                 if "," in m and "_stderr" not in m}
                             for t in all_tasks} | {g: {"acc": True} for g in groups} | (hib or {}),
        "n-samples": {t: {"original": SIZES.get(t, 100), "effective": SIZES.get(t, 100)} for t in all_tasks},
        "config": {"model": "hf", "model_args": model_args or f"pretrained={model},trust_remote_code=True",
                   "model_num_parameters": 1_000_000, "model_dtype": "torch.bfloat16", "model_revision": "main",
                   "model_sha": "0" * 40, "batch_size": "8", "batch_sizes": [], "device": "cuda", "use_cache": None,
                   "limit": None, "bootstrap_iters": 100000, "gen_kwargs": None, "random_seed": 0,
                   "numpy_seed": 1234, "torch_seed": 1234, "fewshot_seed": 1234},
        "git_hash": "b1b2c3d", "date": date, "transformers_version": "4.49.0", "lm_eval_version": "0.4.8",
        "task_hashes": {}, "model_source": "hf", "model_name": model,
        "model_name_sanitized": model.replace("/", "__"), "system_instruction": None,
        "system_instruction_sha": None, "fewshot_as_multiturn": False, "chat_template": None,
        "chat_template_sha": None, "start_time": 1000.0, "end_time": 2000.0, "total_evaluation_time_seconds": "1000.0",
    }
    return doc


def write_04(root: Path, doc: dict, stamp: str = "2025-03-03T02-29-42.286969") -> Path:
    """``<root>/<model_name_sanitized>/results_<stamp>.json`` as lm-eval's ``--output_path`` folder holds it."""
    folder = root / doc["model_name_sanitized"]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"results_{stamp}.json"
    path.write_text(json.dumps(doc, indent=2))
    return path


def results_03(model_args: str, scores: dict[str, dict[str, float]], n_shot: int = 0) -> dict:
    """A 0.3 results file: task → {metric: score, metric_stderr: se}; versions 0; config with num_fewshot."""
    return {"results": {t: {k: v for m, x in metrics.items() for k, v in ((m, x), (f"{m}_stderr", 0.01))}
                        for t, metrics in scores.items()},
            "versions": {t: 0 for t in scores},
            "config": {"model": "hf-causal", "model_args": model_args, "num_fewshot": n_shot, "batch_size": 16,
                       "device": "cuda:0", "no_cache": True, "limit": None, "bootstrap_iters": 100000,
                       "description_dict": {}}}


SAMPLE_SCORES = {
    "org/small-lm": {"arc_easy": 0.612, "arc_easy_norm": 0.571, "gsm8k_strict": 0.112, "gsm8k_flex": 0.131,
                     "mmlu_anatomy": 0.42, "mmlu_astronomy": 0.38, "mmlu_formal_logic": 0.31},
    "org/medium-lm": {"arc_easy": 0.702, "arc_easy_norm": 0.688, "gsm8k_strict": 0.351, "gsm8k_flex": 0.362,
                      "mmlu_anatomy": 0.55, "mmlu_astronomy": 0.58, "mmlu_formal_logic": 0.40},
    "org/large-lm": {"arc_easy": 0.801, "arc_easy_norm": 0.776, "gsm8k_strict": 0.572, "gsm8k_flex": 0.590,
                     "mmlu_anatomy": 0.66, "mmlu_astronomy": 0.71, "mmlu_formal_logic": 0.49},
}


def write_samples(root: Path) -> list[Path]:
    """The sample folder shipped in configs/import_samples/lm-eval (three models, lm-eval 0.4.8)."""
    return [write_04(root, results_04(model, scores, n_shot=0, date=1740964420.8 + k * 3600),
                     stamp=f"2025-03-03T0{k}-29-42.286969")
            for k, (model, scores) in enumerate(SAMPLE_SCORES.items())]
