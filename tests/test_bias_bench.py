"""The benchmark script runs and its two sides agree (quick mode)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("torch")


@pytest.mark.slow
def test_bench_quick_agrees(data_root, capsys):
    path = Path(__file__).resolve().parents[1] / "scripts" / "bench_bias.py"
    spec = importlib.util.spec_from_file_location("bench_bias", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--quick", "--pairs", "2", "--data-root", str(data_root)]) == 0
    out = capsys.readouterr().out
    assert "OK: scores agree" in out and "speed-up" in out
