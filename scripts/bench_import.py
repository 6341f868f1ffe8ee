"""How long ``vnr import lm-eval`` takes on many results files, beside a plain ``json.load`` of the same files and
beside other checkouts of the project (the importer as it was), in alternating fresh processes.

    python scripts/bench_import.py                                   # this checkout, 500 files, 5 rounds
    python scripts/bench_import.py --files 500 --rounds 5 --other /tmp/imp-a7 --other /tmp/imp-base

The files are written here (never copied from anywhere), in the structure lm-eval 0.4.8 writes: one
``<org>__<model>/results_<date>.json`` per model with MMLU's 57 subjects in its four categories and their group
rows, ARC-Easy (acc, acc_norm), HellaSwag and GSM8K (two filters), ``higher_is_better``, ``n-shot``,
``n-samples``, ``versions``, ``configs`` and ``config``. Each round runs every case once, in a fresh interpreter
(``sys.executable -m harness import lm-eval FOLDER -o OUT --force``, ``PYTHONPATH`` the checkout's root), the cases
in turn, so that a loaded machine slows them alike; the table gives each case's median and its ratio to this
checkout's and to ``json.load``'s median (a ratio is what compares on a shared machine).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CATEGORIES = {"stem": 19, "humanities": 13, "social_sciences": 12, "other": 13}


def results_file(model: str, rng: random.Random, date: float) -> dict:
    """One lm-eval 0.4.8 results file of ``model`` (random scores; group rows size-weighted as lm-eval's)."""
    results: dict[str, dict] = {}
    hierarchy: dict[str, list[str]] = {"mmlu": []}
    sizes: dict[str, int] = {}
    for cat, k in CATEGORIES.items():
        group = f"mmlu_{cat}"
        hierarchy["mmlu"].append(group)
        hierarchy[group] = []
        for i in range(k):
            task = f"mmlu_{cat}_subject{i}"
            hierarchy[group].append(task)
            sizes[task] = rng.randint(100, 1600)
            results[task] = {"alias": f"  - {task}", "acc,none": rng.random(), "acc_stderr,none": 0.03}
    for group in ["mmlu", *(f"mmlu_{c}" for c in CATEGORIES)]:
        leaves = [t for g in (hierarchy[group] if group == "mmlu" else [group]) for t in hierarchy[g]]
        n = sum(sizes[t] for t in leaves)
        acc = sum(results[t]["acc,none"] * sizes[t] for t in leaves) / n
        results[group] = {"alias": group, "acc,none": acc, "acc_stderr,none": math.sqrt(0.2 / n)}
    results["arc_easy"] = {"alias": "arc_easy", "acc,none": rng.random(), "acc_stderr,none": 0.008,
                           "acc_norm,none": rng.random(), "acc_norm_stderr,none": 0.008}
    results["hellaswag"] = {"alias": "hellaswag", "acc,none": rng.random(), "acc_stderr,none": 0.004,
                            "acc_norm,none": rng.random(), "acc_norm_stderr,none": 0.004}
    results["gsm8k"] = {"alias": "gsm8k", "exact_match,strict-match": rng.random(),
                        "exact_match_stderr,strict-match": 0.01, "exact_match,flexible-extract": rng.random(),
                        "exact_match_stderr,flexible-extract": 0.01}
    sizes.update(arc_easy=2376, hellaswag=10042, gsm8k=1319)
    tasks = [t for t in results if t not in hierarchy]
    hib = {t: {k.split(",")[0]: True for k in results[t] if "," in k and "_stderr" not in k} for t in results}
    return {
        "results": results,
        "groups": {g: results[g] for g in hierarchy},
        "group_subtasks": {**hierarchy, **{t: [] for t in ("arc_easy", "hellaswag", "gsm8k")}},
        "configs": {t: {"task": t, "num_fewshot": 0, "metadata": {"version": 1.0}} for t in tasks},
        "versions": {**{t: 1.0 for t in tasks}, **{g: 2 for g in hierarchy}},
        "n-shot": {t: 0 for t in results},
        "higher_is_better": hib,
        "n-samples": {t: {"original": sizes[t], "effective": sizes[t]} for t in tasks},
        "config": {"model": "hf", "model_args": f"pretrained={model},dtype=bfloat16", "batch_size": "8",
                   "device": "cuda", "limit": None, "bootstrap_iters": 100000, "random_seed": 0},
        "git_hash": "b1b2c3d", "date": date, "lm_eval_version": "0.4.8", "model_name": model,
        "model_name_sanitized": model.replace("/", "__"), "chat_template": None, "fewshot_as_multiturn": False,
    }


def write_files(root: Path, n: int, seed: int = 0) -> list[Path]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        model = f"org{i % 7}/model-{i}"
        folder = root / model.replace("/", "__")
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "results_2025-03-03T02-29-42.286969.json"
        path.write_text(json.dumps(results_file(model, rng, 1740964420.8 + i), indent=2))
        out.append(path)
    return out


def plain_load(files: list[Path]) -> float:
    """Seconds of a plain ``json.load`` of every file, in a fresh interpreter (start-up included)."""
    code = ("import json, sys\nfor f in sys.argv[1:]:\n    json.load(open(f))\n")
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code, *map(str, files)], check=True)
    return time.perf_counter() - t0


def import_once(checkout: Path, folder: Path, out: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "harness", "import", "lm-eval", str(folder), "-o", str(out),
                           "--force"], cwd=checkout, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True)
    took = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{checkout}: vnr import failed: {proc.stderr.strip().splitlines()[-1:]}")
    return took


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=500, help="results files (one model each; default 500)")
    ap.add_argument("--rounds", type=int, default=5, help="rounds of every case (median reported; default 5)")
    ap.add_argument("--other", action="append", default=[], metavar="CHECKOUT",
                    help="another checkout of the project to time beside this one (repeatable)")
    args = ap.parse_args(argv)
    checkouts = [ROOT, *(Path(o).resolve() for o in args.other)]
    load = f", load average {os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else ""
    print(f"# vnr import lm-eval of {args.files} files: median of {args.rounds} alternating rounds; "
          f"{os.cpu_count()} CPUs{load}")
    times: dict[str, list[float]] = {"json.load": [], **{str(c): [] for c in checkouts}}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "lm-eval"
        files = write_files(folder, args.files)
        for _ in range(args.rounds):
            times["json.load"].append(plain_load(files))
            for c in checkouts:
                times[str(c)].append(import_once(c, folder, Path(tmp) / f"out-{c.name}"))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{'case':40s} {'median (s)':>10s} {'min (s)':>8s} {'/ this':>7s} {'/ json.load':>11s}")
    for k, v in times.items():
        print(f"{k:40s} {med[k]:10.3f} {min(v):8.3f} {med[k] / med[str(ROOT)]:7.2f} {med[k] / med['json.load']:11.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
