"""The benchmark's quick mode runs and its sanity check (plain and ours agree on the loss) passes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_bench_quick_runs(data_root: Path):
    out = subprocess.run([sys.executable, str(REPO / "scripts" / "bench_finetune.py"), "--quick",
                          "--data-root", str(data_root)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "plain Trainer defaults" in out.stdout and "sanity:" in out.stdout and ": OK" in out.stdout
    assert "tracker cost" in out.stdout
