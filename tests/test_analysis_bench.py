"""The analysis benchmark (quick mode): each fast implementation gives the straightforward one's values."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "bench_analysis.py"


def test_bench_quick_agrees(tmp_path):
    out = tmp_path / "bench.json"
    subprocess.run([sys.executable, str(SCRIPT), "--quick", "--json", str(out)], capture_output=True, text=True,
                   check=True)
    rows = {r["computation"]: r for r in json.loads(out.read_text())["rows"]}
    assert set(rows) == {"Kemeny exact (permutations vs DP)", "Kemeny disagreement matrix",
                         "Kendall's W (tie-corrected)", "win-rate matrix", "IIA experiment (copeland)"}
    kemeny = rows["Kemeny exact (permutations vs DP)"]
    assert kemeny["ours"] == kemeny["straightforward"]  # [optimal cost, number of optimal orders]
    w = rows["Kendall's W (tie-corrected)"]
    assert abs(w["ours"] - w["straightforward"]) < 1e-12 and 0.0 <= w["ours"] <= 1.0
    assert rows["Kemeny disagreement matrix"]["max_abs_diff"] == 0.0
    assert rows["win-rate matrix"]["max_abs_diff"] < 1e-12
    iia = rows["IIA experiment (copeland)"]
    assert iia["ours"] == iia["straightforward"] and len(iia["ours"]) == 5  # flips per repetition
    assert all(r["agree"] for r in rows.values())
