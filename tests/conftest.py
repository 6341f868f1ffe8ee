"""Shared test fixtures: the data root, and the ``slow`` marker (run with --runslow or RUN_SLOW=1)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", default=False, help="also run tests marked slow")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--runslow") or os.environ.get("RUN_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="slow: run with --runslow or RUN_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def _data_root() -> Path | None:
    env = os.environ.get("VNR_DATA_ROOT")
    for candidate in (env, REPO.parent / "shared" / "data"):
        if candidate and Path(candidate).is_dir():
            return Path(candidate).resolve()
    return None


@pytest.fixture(scope="session")
def data_root() -> Path:
    """The shared data root (``$VNR_DATA_ROOT`` or ``../shared/data``); skips where there is none."""
    root = _data_root()
    if root is None:
        pytest.skip("no data root: set VNR_DATA_ROOT or place the shared data at ../shared/data")
    return root


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    """Tests never reach a hub."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture
def stand_in_sbatch(tmp_path, monkeypatch):
    """sbatch/srun stand-ins first on PATH (sbatch is the external edge): ``submit(job_id)`` makes sbatch copy
    the script it is given to ``tmp_path/script.sh`` and answer ``Submitted batch job <job_id>``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")

    def submit(job_id: str) -> Path:
        (bin_dir / "sbatch").write_text(f'#!/bin/sh\ncp "$1" {tmp_path / "script.sh"}\necho "Submitted batch job {job_id}"\n')
        (bin_dir / "srun").write_text("#!/bin/sh\nexit 0\n")
        for tool in ("sbatch", "srun"):
            (bin_dir / tool).chmod(0o755)
        return tmp_path / "script.sh"

    return submit
