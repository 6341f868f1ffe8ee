"""The rank-interval benchmark (small sizes): ours and the plain bootstrap score the very same draws alike."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from ranking.rules import rule_names

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "bench_rank.py"


def test_bench_quick_agrees(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("bench_rank", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--quick", "--json", str(tmp_path / "bench.json")]) == 0
    capsys.readouterr()
    doc = json.loads((tmp_path / "bench.json").read_text())
    assert [r["rule"] for r in doc["runs"]] == ["borda", "plurality", "dowdall", "threshold"]
    for r in doc["runs"]:
        assert r["agree"] and r["max_abs_score_diff"] <= 1e-9, r
    assert sorted(doc["all_rules"]["seconds"]) == sorted(rule_names())
    assert doc["all_rules"]["rules"] == sorted(rule_names())
    assert doc["agree"]
