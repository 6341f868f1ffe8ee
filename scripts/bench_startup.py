"""How long ``vnr`` takes to start: the lazy dispatcher beside the eager way, and a full ``vnr rank``.

    python scripts/bench_startup.py                 # 7 repetitions each, median wall time
    python scripts/bench_startup.py --repeat 3 --json out.json

Each case runs in a fresh interpreter (``sys.executable``), so the numbers are
what a user waits for. Cases:

* ``python -c pass``: the interpreter alone (the floor);
* ``vnr --help`` and ``vnr rank --help``: the lazy dispatcher (only the
  command's own module is imported; no numpy / pandas);
* ``eager parser``: every command module imported and ``ranking.table``
  loaded, which is what ``vnr --help`` did before the dispatcher became lazy;
* ``import pandas``: what that eager start mostly paid for;
* ``vnr rank 1000x50 --rule all``: every rule on a random 1000 × 50 table
  (CSV + sidecar), start-up included.

Beside each wall time, the import time ``python -X importtime`` reports (sum
of the top-level imports' cumulative times) where it applies.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ranking.floor.paths import write_text_atomic  # noqa: E402

VNR = [sys.executable, "-m", "harness"]


def cases(table: Path) -> dict[str, list[str]]:
    eager = ("from harness.cli import build_parser; build_parser(every=True); import ranking.table")
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "vnr --help": [*VNR, "--help"],
        "vnr rank --help": [*VNR, "rank", "--help"],
        "eager parser (before)": [sys.executable, "-c", eager],
        "import pandas": [sys.executable, "-c", "import pandas"],
        "vnr rank 1000x50 --rule all": [*VNR, "rank", str(table), "--rule", "all", "--format", "csv"],
    }


def wall(cmd: list[str], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
        out.append(time.perf_counter() - t0)
    return out


def import_time(cmd: list[str]) -> float | None:
    """Seconds of imports ``-X importtime`` reports for ``cmd`` (top-level imports' cumulative sum)."""
    if cmd[0] != sys.executable:
        return None
    proc = subprocess.run([cmd[0], "-X", "importtime", *cmd[1:]], capture_output=True, text=True, cwd=ROOT)
    total = 0
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = line.split("|", 2)
        if not name[1:].startswith(" "):  # a top-level import (nested ones are indented)
            total += int(cumulative)
    return total / 1e6


def write_table(path: Path, n: int = 1000, m: int = 50, seed: int = 0) -> None:
    import numpy as np

    rng = np.random.default_rng(seed)
    x = rng.random((n, m))
    lines = ["model," + ",".join(f"task{j}" for j in range(m))]
    lines += [f"model{i}," + ",".join(f"{v:.6f}" for v in row) for i, row in enumerate(x)]
    path.write_text("\n".join(lines) + "\n")
    sidecar = "criteria:\n" + "".join(f"  task{j}: {{direction: higher}}\n" for j in range(m))
    path.with_name("criteria.yaml").write_text(sidecar)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7, help="runs per case (median reported; default 7)")
    ap.add_argument("--json", metavar="FILE", help="also write the measurements as JSON")
    args = ap.parse_args(argv)
    env_note = f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else ""
    print(f"# vnr start-up: median of {args.repeat} fresh interpreters; {env_note}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        table = Path(tmp) / "matrix.csv"
        write_table(table)
        print(f"{'case':32s} {'median (s)':>11s} {'min (s)':>9s} {'imports (s)':>12s}")
        for name, cmd in cases(table).items():
            times = wall(cmd, args.repeat)
            imports = import_time(cmd) if "1000x50" not in name else None
            rows.append({"case": name, "median_s": statistics.median(times), "min_s": min(times),
                         "import_s": imports, "runs": times})
            imp = "-" if imports is None else f"{imports:.3f}"
            print(f"{name:32s} {statistics.median(times):11.3f} {min(times):9.3f} {imp:>12s}")
    if args.json:
        write_text_atomic(args.json, json.dumps({"repeat": args.repeat, "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
