"""The ranking benchmark (small sizes): ours and the straightforward way give the same scores, ranks and LP answers."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from ranking.rules import rule_names

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "bench_ranking.py"


def test_bench_quick_agrees(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("bench_ranking", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--quick", "--json", str(tmp_path / "bench.json")]) == 0
    capsys.readouterr()
    doc = json.loads((tmp_path / "bench.json").read_text())
    assert (doc["models"], doc["criteria"]) == (200, 20)
    assert list(doc["rules"]) == rule_names()  # every registered rule was compared
    for name, r in doc["rules"].items():
        assert r["ranks_equal"], name
        assert r["max_abs_score_diff"] <= 1e-9 * max(1.0, doc["models"] * doc["criteria"]), name
        assert r["agree"], name
    p = doc["prospective"]
    assert p["sample"] == 20 and p["mismatches"] == [] and p["agree"]
    assert 1 <= p["n_prospective"] <= 200
    assert doc["agree"]
