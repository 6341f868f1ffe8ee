"""Bad input to the harness commands (``vnr run / status / collect / finetune / bias``), as a user types it.

Every case runs ``python -m harness ...`` in a fresh process from an empty working directory and
must end with exit status 2, exactly one line on stderr, no traceback, and nothing written
anywhere under that directory: each is refused before any run starts.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hang_bound import HANG_S

REPO = Path(__file__).resolve().parents[1]
SMOKE = str(REPO / "configs" / "experiments" / "smoke.yaml")
PAPER = str(REPO / "configs" / "experiments" / "paper.yaml")
GRID = "finetune: {models: [tiny:bert], tasks: [rte], seeds: [0]}\n"
BIAS = "bias: {models: [tiny:bert], datasets: [winobias]}\n"

# (case id, config text or None for the smoke grid, command line with {config}/{file}, what stderr names)
CASES = [
    # vnr run: the config, checked at load (--dry-run included)
    ("run-no-config", None, "run does-not-exist.yaml", "no such file"),
    ("run-not-yaml", "finetune: [unclosed\n", "run {config}", "not valid YAML"),
    ("run-injected-name", 'name: "x\\ntouch PWNED\\n#"\n' + GRID, "run {config} --executor slurm --dry-run",
     "name: 'x\\ntouch PWNED\\n#' contains a control character"),
    ("run-epochs-0", GRID.replace("seeds: [0]", "seeds: [0], hyperparameters: {epochs: 0}"), "run {config} --dry-run",
     "finetune.hyperparameters.epochs: 0 must be above 0"),
    ("run-batch-size-0", GRID.replace("seeds: [0]", "seeds: [0], hyperparameters: {batch_size: 0}"),
     "run {config} --dry-run", "finetune.hyperparameters.batch_size: 0 is below 1"),
    ("run-lr-inf", GRID.replace("seeds: [0]", "seeds: [0], hyperparameters: {learning_rate: .inf}"),
     "run {config} --dry-run", "finetune.hyperparameters.learning_rate: inf is not a finite number"),
    ("run-precision-fp8", GRID.replace("seeds: [0]", "seeds: [0], hyperparameters: {precision: fp8}"),
     "run {config} --dry-run", "finetune.hyperparameters.precision: 'fp8' is not one of"),
    ("run-huge-seed", GRID.replace("seeds: [0]", "seeds: [4294967296]"), "run {config} --dry-run",
     "finetune.seeds[0]: 4294967296 is above 4294967295"),
    ("run-bias-limit", BIAS.replace("]}", "], options: {limit: -3}}"), "run {config} --dry-run",
     "bias.options.limit: -3 is below 1"),
    ("run-mem-nan", GRID + "slurm: {mem_gb: .nan}\n", "run {config} --executor slurm --dry-run",
     "slurm.mem_gb: nan is not a finite number"),
    ("run-cpus-0", GRID + "slurm: {cpus: 0}\n", "run {config} --executor slurm --dry-run", "slurm.cpus: 0 is below 1"),
    ("run-unknown-sbatch-key", GRID + "slurm: {additional: {'--wrap': id}}\n", "run {config} --executor slurm --dry-run",
     "--wrap is set by vnr itself"),
    # vnr run: flags
    ("run-output-is-a-file", None, "run {smoke} --output {file} --dry-run", "is a file"),
    ("run-partition-newline", None, "run {smoke} --executor slurm --dry-run --partition gpu\ntouch",
     "--partition: 'gpu\\ntouch' contains a control character"),
    ("run-mem-gb-nan", None, "run {smoke} --executor slurm --dry-run --mem-gb nan", "--mem-gb: nan is not a finite"),
    ("run-runs-per-gpu-0", None, "run {smoke} --dry-run --runs-per-gpu 0", "--runs-per-gpu: 0 is below 1"),
    ("run-sbatch-opt", None, "run {smoke} --sbatch-args --sbatch-opt mail-usr=me", "'mail-usr' is not an sbatch"),
    ("run-only-nothing", None, "run {smoke} --only nope --dry-run", "matches no run"),
    # vnr status / collect
    ("status-output-is-a-file", None, "status {smoke} --output {file}", "is a file"),
    ("status-bad-config", GRID.replace("rte", "sst-2"), "status {config}", "unknown task 'sst-2'"),
    ("collect-output-is-a-file", None, "collect {smoke} --output {file}", "is a file"),
    # vnr finetune / vnr bias: the same checks as the config keys
    ("finetune-seed-negative", None, "finetune --model tiny:bert --task rte --seed -1 --output out",
     "--seed: -1 is below 0"),
    ("finetune-seed-huge", None, "finetune --model tiny:bert --task rte --seed 4294967296 --output out",
     "--seed: 4294967296 is above 4294967295"),
    ("finetune-lr-nan", None, "finetune --model tiny:bert --task rte --seed 0 --lr nan --output out",
     "--lr: nan is not a finite number"),
    ("finetune-epochs-0", None, "finetune --model tiny:bert --task rte --seed 0 --epochs 0 --output out",
     "--epochs: 0 must be above 0"),
    ("bias-scoring", None, "bias --model tiny:bert --dataset winobias --scoring published --output out", "--scoring"),
    ("run-preset", "preset: paper\n" + BIAS, "run {config} --dry-run", "preset: 'paper' is not one of default, votenrank"),
    ("run-bias-scoring", BIAS.replace("]}", "], options: {scoring: published}}"), "run {config} --dry-run",
     "bias.options.scoring: 'published' is not one of default, reference, votenrank"),
    ("bias-limit", None, "bias --model tiny:bert --dataset winobias --limit -3 --output out", "--limit"),
    ("finetune-model-args-typo", None,
     "finetune --model tiny:bert --task rte --seed 0 --model-args revison=main --output out",
     "unknown model argument 'revison'"),
    ("finetune-output-empty", None, "finetune --model tiny:bert --task rte --seed 0 --output=",
     "--output: is empty: give a folder"),  # an unset shell variable wrote runs/ into the current folder
    ("bias-output-empty", None, "bias --model tiny:bert --dataset winobias --output=", "--output: is empty"),
    ("bias-model-args-dtype", None, "bias --model tiny:bert --dataset winobias --model-args dtype=fp8 --output out",
     "dtype 'fp8'"),
    ("run-config-model-args-typo", GRID.replace("[tiny:bert]", "[{name: tiny:bert, model_args: {revison: main}}]"),
     "run {config} --dry-run", "unknown model argument 'revison'"),
    ("run-offline-nothing-on-disk", None, "run {smoke} --data-root . --output out", "vnr prefetch"),  # a root without glue/
    # vnr prefetch
    ("prefetch-missing-config", None, "prefetch nope.yaml --data-root .", "nope.yaml"),
    ("prefetch-offline", None, "prefetch {paper} --data-root .", "offline"),
    ("bias-unknown-model", None, "bias --model nosuch/model-xyz --dataset winobias --data-root . --output out", "nosuch/model-xyz"),
]


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize(("config", "command", "names"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, config, command, names):
    (tmp_path / "a-file").write_text("not a directory\n")
    if config is not None:
        (tmp_path / "grid.yaml").write_text(config)
    before = _tree(tmp_path)
    # split on spaces only: a case may carry a newline inside one argument
    argv = [part.format(config="grid.yaml", smoke=SMOKE, paper=PAPER, file="a-file") for part in command.split(" ")]
    env = {**os.environ, "PYTHONPATH": str(REPO), "VNR_DATA_ROOT": str(tmp_path / "no-data"),
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-m", "harness", *argv], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=HANG_S, check=False)
    err = proc.stderr.strip()
    assert proc.returncode == 2, (proc.returncode, err[-2000:])
    assert "Traceback" not in proc.stderr
    assert len(err.splitlines()) == 1, err
    assert names in err, err
    assert _tree(tmp_path) == before
