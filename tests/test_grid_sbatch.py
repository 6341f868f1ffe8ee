"""The generated sbatch script cannot be injected: every value that reaches it is checked and quoted.

Hostile values (a newline, shell syntax, an unknown or reserved #SBATCH option) in the config or on
the command line are refused with one line naming the key or flag (exit 2, nothing written); odd
but legal values give a script that ``bash -n`` accepts, with exactly one option per ``#SBATCH`` line.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness import cli
from harness.grid.config import SlurmSettings, parse_experiment
from harness.grid.slurm import sbatch_script
from ranking.floor.errors import UserError

REPO = Path(__file__).resolve().parents[1]
GRID = {"finetune": {"models": ["tiny:bert"], "tasks": ["rte"], "seeds": [0]}}
PWN = "x\ntouch /tmp/PWNED\n#"


def _config(tmp_path: Path, **top) -> Path:
    doc = {"name": "t", "output": str(tmp_path / "out"), **GRID, **top}
    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _sbatch_lines_are_one_option_each(script: str) -> None:
    for line in script.splitlines():
        if line.startswith("#SBATCH"):
            words = shlex.split(line[len("#SBATCH"):])
            assert len(words) == 1 and words[0].startswith("--"), line


@pytest.mark.parametrize(
    ("top", "message"),
    [
        ({"name": PWN}, "name: 'x\\ntouch /tmp/PWNED\\n#' contains a control character"),
        ({"name": "my grid; rm -rf ~"}, "name: 'my grid; rm -rf ~' is not a name SLURM accepts"),
        ({"output": "out\ntouch /tmp/PWNED"}, "output: 'out\\ntouch /tmp/PWNED' contains a control character"),
        ({"slurm": {"job_name": PWN}}, "slurm.job_name: 'x\\ntouch"),
        ({"slurm": {"partition": PWN}}, "slurm.partition: 'x\\ntouch"),
        ({"slurm": {"partition": "gpu --wrap=id"}}, "slurm.partition: 'gpu --wrap=id' is not a SLURM partition"),
        ({"slurm": {"account": "a$(id)"}}, "slurm.account: 'a$(id)' is not a SLURM account"),
        ({"slurm": {"qos": "normal\r"}}, "slurm.qos: 'normal\\r' contains a control character"),
        ({"slurm": {"constraint": "a100 `id`"}}, "slurm.constraint: 'a100 `id`' is not a SLURM constraint"),
        ({"slurm": {"additional": {PWN: "1"}}}, "slurm.additional: option: 'x\\ntouch /tmp/PWNED\\n#' contains a control"),
        ({"slurm": {"additional": {"mail-type": PWN}}}, "slurm.additional.mail-type: 'x\\ntouch"),
        ({"slurm": {"additional": {"mail-user": "me@x.org --wrap=id"}}}, "must be one word on an #SBATCH line"),
        ({"slurm": {"additional": {"mail-usr": "me@x.org"}}}, "'mail-usr' is not an sbatch long option vnr knows"),
        ({"slurm": {"additional": {"array": "0-99"}}}, "--array is set by vnr itself"),
        ({"slurm": {"additional": {"output": "/tmp/x"}}}, "--output is set by vnr itself"),
        ({"slurm": {"additional": {"exclusive": False}}}, "give a value, or true for a flag"),
        ({"slurm": {"setup": ["module load cuda\ntouch /tmp/PWNED"]}}, "slurm.setup[0]: 'module load cuda\\ntouch"),
        ({"slurm": {"setup": ["echo 'unterminated"]}}, "is not a complete shell command"),
        ({"slurm": {"time": "1:00\n"}}, "slurm.time: '1:00\\n' contains a control character"),
    ],
)
def test_hostile_config_values_are_refused_before_anything_is_written(tmp_path, capsys, top, message):
    config = _config(tmp_path, **top)
    assert cli.main(["run", str(config), "--executor", "slurm", "--dry-run"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grid.yaml"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--partition", "gpu\ntouch /tmp/PWNED"], "--partition: 'gpu\\ntouch /tmp/PWNED' contains a control"),
        (["--account", "x y"], "--account: 'x y' is not a SLURM account"),
        (["--job-name", "a'b"], "--job-name: \"a'b\" is not a name SLURM accepts"),
        (["--setup", "echo hi\nid"], "--setup[0]: 'echo hi\\nid' contains a control character"),
        (["--sbatch-opt", "mail-type=END\nid"], "--sbatch-opt mail-type: 'END\\nid' contains a control"),
        (["--sbatch-opt", "wrap=id"], "--sbatch-opt wrap: --wrap is set by vnr itself"),
        (["--sbatch-opt", "begin="], "give KEY=VALUE, or KEY alone for a flag"),
        (["--sbatch-opt", "nosuch=1"], "'nosuch' is not an sbatch long option"),
        (["--mem-gb", "nan"], "--mem-gb: nan is not a finite number"),
        (["--mem-gb", "0"], "--mem-gb: 0 must be above 0"),
        (["--gpus", "-1"], "--gpus: -1 is below 0"),
        (["--cpus", "0"], "--cpus: 0 is below 1"),
        (["--array-parallelism", "1.5"], "--array-parallelism: 1.5 is not a whole number"),
        (["--runs-per-gpu", "0"], "--runs-per-gpu: 0 is below 1"),
        (["--time", "0"], "--time: the time limit must be at least one minute"),
    ],
)
def test_hostile_flags_are_refused(tmp_path, capsys, flags, message):
    config = _config(tmp_path)
    assert cli.main(["run", str(config), "--executor", "slurm", "--dry-run", *flags]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert captured.out == "" and len(err.splitlines()) == 1 and message in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grid.yaml"]


def test_output_unfit_for_slurm_logs_is_refused_for_the_slurm_executor_only(tmp_path, capsys):
    config = _config(tmp_path, output=str(tmp_path / "out 100%"))
    assert cli.main(["run", str(config), "--dry-run"]) == 0  # the local executor does not care
    capsys.readouterr()
    assert cli.main(["run", str(config), "--executor", "slurm", "--dry-run"]) == 2
    assert "cannot hold SLURM logs" in capsys.readouterr().err


def test_settings_built_in_python_are_checked_too(tmp_path):
    with pytest.raises(UserError, match="slurm.partition"):
        sbatch_script(SlurmSettings(partition=PWN), tmp_path, 2, name="x")
    with pytest.raises(UserError, match="name"):
        sbatch_script(SlurmSettings(), tmp_path, 2, name=PWN)


def test_odd_but_legal_values_give_a_script_bash_accepts(tmp_path, capsys):
    config = _config(tmp_path, name="odd.grid+v2", slurm={
        "partition": "gpu,gpu-long", "account": "proj_1.x", "qos": "high", "constraint": "[a100*2&ib]|h100",
        "job_name": "my.job-1", "time": "1-00:00:00", "mem_gb": 7.5,
        "setup": ["module load cuda/12.4 && echo \"it's $HOME\"  # a comment", "export A='b c'"],
        "additional": {"mail_type": "END,FAIL", "mail-user": "me@example.org", "exclusive": True,
                       "gres": "gpu:a100:2", "begin": "now+1hour"},
    })
    assert cli.main(["run", str(config), "--executor", "slurm", "--dry-run", "--sbatch-opt", "nice=10",
                     "--sbatch-opt", "hold", "--setup", "cd /tmp"]) == 0
    script = capsys.readouterr().out
    _sbatch_lines_are_one_option_each(script)
    lines = script.splitlines()
    for flag in ("--partition=gpu,gpu-long", "--account=proj_1.x", "--qos=high", "--job-name=my.job-1",
                 "--time=1440", "--mem=7680MB", "--mail-type=END,FAIL", "--mail-user=me@example.org",
                 "--exclusive", "--gres=gpu:a100:2", "--begin=now+1hour", "--nice=10", "--hold"):
        assert f"#SBATCH {flag}" in lines, flag
    assert "#SBATCH --constraint='[a100*2&ib]|h100'" in lines  # shell-quoted, still one word
    assert lines.index("cd /tmp") == lines.index("export A='b c'") + 1  # CLI setup lines after the config's
    proc = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / "out").exists()


def test_the_shipped_grids_render_clean_scripts(capsys):
    for name in ("smoke", "paper"):
        exp = parse_experiment(yaml.safe_load((REPO / "configs" / "experiments" / f"{name}.yaml").read_text()))
        script = sbatch_script(exp.slurm, Path("results") / name, len(exp.specs), name=exp.name)
        _sbatch_lines_are_one_option_each(script)
        assert subprocess.run(["bash", "-n"], input=script, text=True, check=False).returncode == 0
        assert sys.executable in script
