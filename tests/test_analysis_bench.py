"""The analysis benchmark runs in quick mode and both implementations agree."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "bench_analysis.py"


def test_bench_quick_agrees():
    out = subprocess.run([sys.executable, str(SCRIPT), "--quick"], capture_output=True, text=True, check=True).stdout
    assert "DIFFER" not in out and out.count("agree") >= 5
