"""`vnr run` / `vnr status` / `vnr collect` and the array-task entry point, through their command lines."""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness import cli
from harness.grid import arrays, entry
from harness.grid import local as local_mod
from harness.grid import slurm as slurm_mod
from harness.grid import status as status_mod
from harness.grid.cli import LiveLine
from harness.grid.config import load_experiment
from harness.store import RunStore

REPO = Path(__file__).resolve().parents[1]
SMOKE = str(REPO / "configs" / "experiments" / "smoke.yaml")


@pytest.fixture
def data_on_disk(data_root, monkeypatch):
    """`vnr run` first checks, offline, that the grid's data is on disk: these grids read RTE / STS-B from the
    shared data root (skipped where there is none)."""
    monkeypatch.setenv("VNR_DATA_ROOT", str(data_root))
    return data_root


def fake_runner(spec, output, **kw):
    rec = {"run_id": spec.run_id(), "kind": spec.kind, "model": spec.model, "status": "ok", "metrics": {}}
    RunStore(output).write(rec)
    return rec


def test_slurm_dry_run_prints_the_sbatch_script_without_a_cluster(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("VNR_DATA_ROOT", str(tmp_path))
    code = cli.main(["run", SMOKE, "--executor", "slurm", "--dry-run", "--output", str(tmp_path),
                     "--partition", "gpu", "--time", "01:30:00", "--gpus", "2", "--cpus", "6", "--mem-gb", "24",
                     "--array-parallelism", "3", "--account", "proj", "--runs-per-gpu", "1"])  # default with GPUs: auto
    out = capsys.readouterr().out
    assert code == 0
    lines = out.splitlines()
    for flag in ("--array=0-13%3", "--partition=gpu", "--time=90", "--gpus-per-node=2", "--cpus-per-task=6",
                 "--mem=24GB", "--account=proj", "--requeue", "--signal=USR2@120", "--job-name=vnr-smoke"):
        assert f"#SBATCH {flag}" in lines, flag
    assert f"#SBATCH --output={tmp_path.resolve()}/logs/slurm/%A_%a/%A_%a_0_log.out" in lines
    assert f"export VNR_DATA_ROOT={tmp_path}" in lines
    assert any(line.startswith("srun ") and sys.executable in line and "submitit.core._submit" in line
               for line in lines)
    # a summary of the runs, not every run id: those come from --list
    assert lines[:5] == [
        "# 14 array tasks (0 done, 0 running or queued); one task per run, 14 runs:",
        "#   kinds: finetune 8, bias 6",
        "#   models: tiny:bert 7, tiny:gpt2 7",
        "#   tasks and bias sets: rte 4, stsb 4, crows_pairs 2, stereoset 2, winobias 2",
        f"#   every run id with its state: vnr run {SMOKE} --output {tmp_path} --list",
    ]
    ids = [s.run_id() for s in load_experiment(SMOKE).specs]
    assert not any(i in out for i in ids)
    assert not (tmp_path / "runs").exists()  # nothing submitted, nothing run
    assert cli.main(["run", SMOKE, "--output", str(tmp_path), "--list"]) == 0
    assert [row.split("\t")[1] for row in capsys.readouterr().out.splitlines()] == ids


def test_config_slurm_section_is_the_default(tmp_path, capsys):
    assert cli.main(["run", SMOKE, "--executor", "slurm", "--dry-run", "--output", str(tmp_path),
                     "--only", "bias"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "#SBATCH --array=0-5%2" in lines and "#SBATCH --time=20" in lines and "#SBATCH --mem=4GB" in lines
    assert not any("gpus" in line for line in lines)  # gpus: 0 in the smoke config


def test_count_list_and_local_dry_run(tmp_path, capsys):
    assert cli.main(["run", SMOKE, "--count"]) == 0
    assert capsys.readouterr().out.strip() == "14"
    assert cli.main(["run", SMOKE, "--count", "--only", "tiny:bert/*,tiny:gpt2/rte"]) == 0
    assert capsys.readouterr().out.strip() == "9"  # tiny:bert: 4 + 3 bias; tiny:gpt2/rte: 2
    assert cli.main(["run", SMOKE, "--list", "--only", "bias", "--output", str(tmp_path)]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert [r[0] for r in rows] == [str(i) for i in range(6)] and {r[2] for r in rows} == {"missing"}
    assert cli.main(["run", SMOKE, "--dry-run", "--output", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[:2] == ["14 to run, 0 done (dry run: nothing ran)", "kinds: finetune 8, bias 6"]
    assert f"every run id with its state: vnr run {SMOKE} --output {tmp_path} --list" in out


def test_local_run_status_and_collect_commands(tmp_path, capsys, monkeypatch, data_on_disk):
    monkeypatch.setattr(local_mod, "default_runner", fake_runner)
    out = str(tmp_path)
    assert cli.main(["run", SMOKE, "--output", out, "--only", "rte", "--no-progress"]) == 0
    assert capsys.readouterr().out.strip().startswith("4 runs: 4 ran, 0 skipped (done), 0 failed")
    # the fake runner's records have no metrics: stored ok but unusable, so status, run and collect agree
    # that they are not done (no dead end where status says done and collect says "run them")
    assert cli.main(["status", SMOKE, "--output", out, "--summary"]) == 0
    assert capsys.readouterr().out.strip() == "14 runs: 0 done, 0 running, 0 queued, 4 failed, 10 missing"
    assert cli.main(["status", SMOKE, "--output", out, "--json", "--state", "failed"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["totals"]["failed"] == 4 and {r["target"] for r in doc["runs"]} == {"rte"}
    assert {r["detail"] for r in doc["runs"]} == {"unusable record: no numeric metrics; `vnr run` redoes it"}

    assert cli.main(["collect", SMOKE, "--output", out]) == 2
    err = capsys.readouterr().err
    assert err.startswith("vnr collect: error: 14 of 14 runs") and "--allow-missing" in err
    assert "10 missing or failed" in err and "4 with an unusable record" in err and len(err.splitlines()) == 1
    assert cli.main(["run", SMOKE, "--output", out, "--only", "rte", "--no-progress"]) == 0
    assert capsys.readouterr().out.strip().startswith("4 runs: 4 ran, 0 skipped (done), 0 failed")  # redone

    def failing(spec, output, **kw):
        raise RuntimeError("no GPU left")

    monkeypatch.setattr(local_mod, "default_runner", failing)
    assert cli.main(["run", SMOKE, "--output", out, "--only", "tiny:bert/stsb", "--no-progress"]) == 1
    captured = capsys.readouterr()
    assert "2 failed" in captured.out and "vnr run` again retries them" in captured.err
    assert cli.main(["status", SMOKE, "--output", out, "--state", "failed"]) == 0
    assert capsys.readouterr().out.count("RuntimeError: no GPU left") == 2


def test_bad_input_is_one_line(tmp_path, capsys, data_on_disk):
    bad = tmp_path / "bad.yaml"
    bad.write_text("finetune: {models: [tiny:bert], tasks: [rte], run_options: {sav_steps: 3}}\n")
    assert cli.main(["run", str(bad), "--output", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "finetune.run_options: unknown key 'sav_steps'" in err and len(err.strip().splitlines()) == 1
    assert cli.main(["run", SMOKE, "--only", "nope"]) == 2
    assert "matches no run" in capsys.readouterr().err
    assert cli.main(["run", SMOKE, "--executor", "slurm", "--dry-run", "--time", "later"]) == 2
    assert "--time: 'later' is not a time" in capsys.readouterr().err


def test_entry_point_runs_the_indexed_spec(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(local_mod, "default_runner", fake_runner)
    monkeypatch.setenv("SLURM_ARRAY_JOB_ID", "41")
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "3")
    monkeypatch.setenv("SLURM_JOB_ID", "44")
    monkeypatch.delenv("VNR_SLURM_NUMERIC_JOB_ID", raising=False)
    assert entry.main([SMOKE, "--count", "--only", "bias"]) == 0
    assert capsys.readouterr().out.strip() == "6"
    assert entry.main([SMOKE, "--output", str(tmp_path), "--only", "bias"]) == 0
    spec = [s for s in load_experiment(SMOKE).specs if s.kind == "bias"][3]
    assert [r["run_id"] for r in RunStore(tmp_path).records()] == [spec.run_id()]
    assert os.environ["SLURM_JOB_ID"] == "41_3"  # codecarbon sees the task, not the whole array
    assert os.environ["VNR_SLURM_NUMERIC_JOB_ID"] == "44"
    assert entry.main([SMOKE, "--output", str(tmp_path), "--index", "99"]) == 2
    assert "outside the grid (0..13)" in capsys.readouterr().err


@pytest.mark.parametrize(("args", "env", "message"), [
    (["--index", "abc"], {}, "argument --index: 'abc' is not an array task index (a whole number, 0 or more)"),
    (["--index", "1.0"], {}, "argument --index: '1.0' is not an array task index (a whole number, 0 or more)"),
    (["--index", ""], {}, "argument --index: '' is not an array task index (a whole number, 0 or more)"),
    ([], {"SLURM_ARRAY_TASK_ID": "x"}, "SLURM_ARRAY_TASK_ID is 'x', not an array task index (a whole number): "
                                       "give --index N"),
    ([], {}, "give --index N or run inside a SLURM array task (SLURM_ARRAY_TASK_ID)"),
    (["--index", "0", "--output", "{file}"], {},
     "cannot write results under {file}: Not a directory; choose another --output"),
    (["--index", "0", "--output", "{file}", "--no-calibrate"], {},
     "cannot write results under {file}: Not a directory; choose another --output"),
    (["--index", "0", "--output", "{file}/under"], {},
     "cannot write results under {file}/under: Not a directory; choose another --output"),
])
def test_entry_refuses_bad_input_in_one_line_and_runs_nothing(tmp_path, capsys, monkeypatch, args, env, message):
    """The sbatch task entry answers a bad input as vnr does: one line, exit 2 (no usage text, no traceback)."""
    config = _packing_grid(tmp_path, "g", 2, {"gpus": 1})  # runs_per_gpu auto: would calibrate first
    file = tmp_path / "plain"
    file.write_text("")
    monkeypatch.delenv("SLURM_ARRAY_TASK_ID", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert entry.main([str(config), *(a.format(file=file) for a in args)]) == 2
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", f"harness.grid.entry: error: {message.format(file=file)}\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.yaml", "plain"]


def test_entry_task_with_a_failed_run_exits_1_naming_it_in_one_line(tmp_path, capsys, monkeypatch):
    """A failed run ends its array task with exit 1 and one line: the run id, its error, where records and logs are;
    the record keeps the error in one line and the run's log the whole traceback."""
    def out_of_memory(spec, output, **kw):
        raise RuntimeError("CUDA out of memory.\n  Tried to allocate 4.00 GiB")

    monkeypatch.setattr(local_mod, "default_runner", out_of_memory)
    config = _packing_grid(tmp_path, "g", 2, {"gpus": 0})  # one spec per task
    out = tmp_path / "g"
    (spec, _) = load_experiment(config).specs
    assert entry.main([str(config), "--index", "0"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    error = "RuntimeError: CUDA out of memory. Tried to allocate 4.00 GiB"
    assert err[-1] == (f"harness.grid.entry: 1 of 1 runs of this task failed: {spec.run_id()} ({error}); records: "
                       f"{out}/runs/<run id>.json, tracebacks and output: {out}/logs/<run id>.log")
    assert not any("Traceback" in line for line in err)
    assert RunStore(out).get(spec.run_id())["error"] == error
    assert "Traceback (most recent call last)" in (out / "logs" / f"{spec.run_id()}.log").read_text()


@pytest.mark.parametrize("path", ["slurm/start-local-cluster.sh", "slurm/grid-array.sbatch", "scripts/smoke.sh"])
def test_shell_scripts_parse(path):
    assert subprocess.run(["bash", "-n", str(REPO / path)], check=False).returncode == 0


def _grid(tmp_path: Path, **extra) -> Path:
    doc = {"name": "g", "output": str(tmp_path / "out"),
           "finetune": {"models": ["tiny:bert"], "tasks": ["rte"], "seeds": [0, 1, 2]}, **extra}
    path = tmp_path / "g.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_sbatch_args_take_resources_and_setup_from_the_config(tmp_path, capsys):
    config = _grid(tmp_path, slurm={"time": "02:00:00", "gpus": 2, "cpus": 4, "mem_gb": 16, "array_parallelism": 2,
                                    "partition": "gpu", "setup": ["module load cuda/12.4"],
                                    "additional": {"mail-type": "END"}})
    assert cli.main(["run", str(config), "--sbatch-args", "--qos", "high", "--sbatch-opt", "exclusive",
                     "--setup", "echo ready"]) == 0
    logs = (tmp_path / "out" / "logs" / "sbatch").resolve()
    lines = capsys.readouterr().out.splitlines()
    array = _array_file(lines)
    assert lines == [  # gpus: 2, so runs_per_gpu auto: one task for the 3 specs
        "--array=0-0%1", "--job-name=vnr-g", "--time=120", "--cpus-per-task=4", "--mem=16GB", "--gres=gpu:2",
        "--partition=gpu", "--qos=high", "--mail-type=END", "--exclusive", f"--output={logs}/%A_%a.out",
        f"--export=ALL,VNR_SETUP_FILE={logs}/setup.sh,VNR_ARRAY_FILE={array}",
    ]
    assert (logs / "setup.sh").read_text().splitlines()[1:] == ["module load cuda/12.4", "echo ready"]
    assert sorted(p.name for p in logs.iterdir()) == [array.name, "setup.sh"]
    # the config's own export value comes first, the two files after it
    assert cli.main(["run", str(config), "--sbatch-args", "--sbatch-opt", "export=NONE"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"--export=NONE,VNR_SETUP_FILE={logs}/setup.sh,VNR_ARRAY_FILE={array}"
    assert not (tmp_path / "out" / "runs").exists()
    # the plain sbatch script sources that file and has no resource or log defaults of its own
    script = (REPO / "slurm" / "grid-array.sbatch").read_text()
    assert '. "$VNR_SETUP_FILE"' in script
    assert not [line for line in script.splitlines()
                if line.startswith("#SBATCH") and any(k in line for k in ("--output", "--time", "--gres", "--mem"))]


def _packing_grid(tmp_path: Path, name: str, seeds: int, slurm: dict, **hyper) -> Path:
    """A tiny:bert / RTE grid of ``seeds`` fine-tuning specs (tiny sizes) with this ``slurm:`` section."""
    doc = {"name": name, "output": str(tmp_path / name),
           "finetune": {"models": ["tiny:bert"], "tasks": ["rte"], "seeds": list(range(seeds)),
                        "hyperparameters": {"max_steps": 1, "batch_size": 4, "max_train_samples": 8,
                                            "max_eval_samples": 8, "max_length": 32, "precision": "fp32", **hyper}},
           "slurm": slurm}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _sbatch_lines(capsys, config: Path, *flags: str) -> list[str]:
    assert cli.main(["run", str(config), "--sbatch-args", *flags]) == 0
    return capsys.readouterr().out.splitlines()


def _entry_count(capsys, config: Path, *flags: str) -> int:
    assert entry.main([str(config), "--count", *flags]) == 0
    return int(capsys.readouterr().out)


def _array_file(lines: list[str]) -> Path:
    """The array file `--sbatch-args` exported (its last line: --export=ALL,...,VNR_ARRAY_FILE=<path>)."""
    assert lines[-1].startswith("--export=ALL,")
    (path,) = [v.split("=", 1)[1] for v in lines[-1].split(",") if v.startswith("VNR_ARRAY_FILE=")]
    return Path(path)


def test_plain_sbatch_array_is_sized_like_the_entry_groups_the_specs(tmp_path, capsys):
    """runs_per_gpu auto / N in the config's slurm: (or the flags): --sbatch-args' --array, entry --count and the
    array file every task reads agree: ceil(specs / 16) tasks for auto, ceil(specs / N) for N, one per spec
    without packing."""
    auto = _packing_grid(tmp_path, "auto", 20, {"runs_per_gpu": "auto", "gpus": 1})
    three = _packing_grid(tmp_path, "three", 20, {"runs_per_gpu": 3, "gpus": 1})
    ids = [s.run_id() for s in load_experiment(auto).specs]
    logs = (tmp_path / "auto" / "logs" / "sbatch").resolve()
    auto_lines = _sbatch_lines(capsys, auto)
    assert auto_lines[0] == "--array=0-1%2" and _entry_count(capsys, auto) == 2  # ceil(20 / 16)
    plan = json.loads(_array_file(auto_lines).read_text())
    assert _array_file(auto_lines).parent == logs
    assert plan == {"only": [], "runs_per_gpu": "auto", "calibrate": True, "gpus": 1, "run_ids": ids}
    three_lines = _sbatch_lines(capsys, three)
    assert three_lines[0] == "--array=0-6%7" and _entry_count(capsys, three) == 7  # ceil(20 / 3)
    # flags size the array for their choice; the file carries it, the entry reading it needs no flag
    lines = _sbatch_lines(capsys, auto, "--runs-per-gpu", "3")
    assert lines[0] == "--array=0-6%7" and json.loads(_array_file(lines).read_text())["runs_per_gpu"] == 3
    assert _entry_count(capsys, auto, "--array-file", str(_array_file(lines))) == 7
    assert _entry_count(capsys, auto, "--runs-per-gpu", "3") == 7
    lines = _sbatch_lines(capsys, auto, "--no-calibrate", "--setup", "echo hi")
    assert lines[0] == "--array=0-19%16"
    assert lines[-1] == f"--export=ALL,VNR_SETUP_FILE={logs}/setup.sh,VNR_ARRAY_FILE={_array_file(lines)}"
    assert json.loads(_array_file(lines).read_text())["calibrate"] is False
    assert _entry_count(capsys, auto, "--array-file", str(_array_file(lines))) == 20
    lines = _sbatch_lines(capsys, three, "--runs-per-gpu", "auto", "--only", "*-s1-*,*-s2-*")
    assert lines[0] == "--array=0-0%1"
    plan = json.loads(_array_file(lines).read_text())
    assert (plan["only"], plan["run_ids"]) == (["*-s1-*", "*-s2-*"], [ids[1], ids[2]])
    # a config without a GPU: one spec per task unless told otherwise
    cpu = _packing_grid(tmp_path, "cpu", 20, {"gpus": 0})
    assert _sbatch_lines(capsys, cpu)[0] == "--array=0-19%16" and _entry_count(capsys, cpu) == 20


def test_plain_sbatch_tasks_refuse_a_script_line_or_a_grid_the_array_was_not_sized_for(tmp_path, capsys):
    """The array file decides: slurm/grid-array.sbatch passes it (run with bash; --count stands in for a task);
    a flag on the script line that says otherwise, or a grid edited since, is one line, exit 2."""
    three = _packing_grid(tmp_path, "three", 20, {"runs_per_gpu": 3, "gpus": 1})
    array = _array_file(_sbatch_lines(capsys, three, "--only", "*-s1*"))  # 11 runs: s1, s10..s19
    env = {**os.environ, "SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_JOB_ID": "9", "SLURM_SUBMIT_DIR": str(REPO),
           "VNR_VENV": str(tmp_path / "no-venv"), "VNR_ARRAY_FILE": str(array), "PYTHONPATH": str(REPO)}
    script = ["bash", str(REPO / "slurm" / "grid-array.sbatch"), str(three), "--count"]
    assert subprocess.run(script, env=env, capture_output=True, text=True, check=True).stdout == "4\n"  # ceil(11 / 3)
    same = subprocess.run([*script, "--only", "*-s1*", "--runs-per-gpu", "3"], env=env, capture_output=True, text=True)
    assert (same.returncode, same.stdout) == (0, "4\n")  # repeating the same choice is fine
    other = subprocess.run([*script, "--only", "bias"], env=env, capture_output=True, text=True)
    assert other.returncode == 2 and other.stderr == (
        f"harness.grid.entry: error: this array was sized for --only *-s1* ({array}); the script line says --only "
        "bias: give both the same, or leave it off the script line\n")
    other = subprocess.run([*script, "--runs-per-gpu", "16"], env=env, capture_output=True, text=True)
    assert other.returncode == 2 and other.stderr == (
        f"harness.grid.entry: error: this array was sized for 3 runs per task ({array}); the script line says 16: "
        "give --sbatch-args the flag, not the script line\n")
    # the config edited after --sbatch-args: another seed list, so other run ids at the array's indices
    doc = yaml.safe_load(three.read_text())
    doc["finetune"]["seeds"] = [0, *range(2, 21)]
    three.write_text(yaml.safe_dump(doc))
    changed = subprocess.run(script, env=env, capture_output=True, text=True)
    assert changed.returncode == 2 and changed.stderr.startswith(
        f"harness.grid.entry: error: the grid has changed since `vnr run --sbatch-args` sized this array ({array}: "
        "11 runs then, 10 now, the first difference at line 0 of `vnr run CONFIG --list`)")
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert entry.main([str(three), "--count", "--array-file", str(broken)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"harness.grid.entry: error: --array-file {broken}: not an array file") and err.count("\n") == 1
    missing = tmp_path / "gone.json"
    assert entry.main([str(three), "--index", "0", "--array-file", str(missing)]) == 2
    assert capsys.readouterr().err == (f"harness.grid.entry: error: --array-file {missing}: cannot be read (No such "
                                       "file or directory); size the array again with `vnr run CONFIG --sbatch-args`\n")
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before  # nothing written


@pytest.mark.parametrize(("value", "message"), [
    ("0", "harness.grid.entry: error: --runs-per-gpu: 0 is below 1"),
    ("x", "harness.grid.entry: error: --runs-per-gpu: 'x' is neither auto nor a whole number of runs"),
    ("65", "harness.grid.entry: error: --runs-per-gpu: 65 is above 64"),
])
def test_entry_refuses_a_bad_runs_per_gpu_in_one_line(tmp_path, capsys, value, message):
    config = _packing_grid(tmp_path, "g", 4, {"gpus": 1})
    assert entry.main([str(config), "--count", "--runs-per-gpu", value]) == 2
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", message + "\n")
    assert entry.main([str(config), "--index", "0", "--runs-per-gpu", value]) == 2
    assert capsys.readouterr().err == message + "\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.yaml"]


def test_plain_sbatch_task_of_n_runs_exactly_its_specs(tmp_path, capsys, data_on_disk):
    """Real tiny fine-tuning on the CPU: --runs-per-gpu 2, task 1 runs specs 2 and 3 of 5 side by side, nothing else."""
    config = _packing_grid(tmp_path, "g", 5, {"gpus": 0})
    specs = load_experiment(config).specs
    assert entry.main([str(config), "--index", "1", "--runs-per-gpu", "2"]) == 0
    store = RunStore(tmp_path / "g")
    assert sorted(r["run_id"] for r in store.records()) == sorted(s.run_id() for s in specs[2:4])
    assert [store.is_done(s) for s in specs] == [False, False, True, True, False]
    capsys.readouterr()


def test_plain_sbatch_auto_task_gets_the_submitit_packing(tmp_path, capsys, monkeypatch, data_on_disk):
    """runs_per_gpu: auto in slurm: (no flag): task i runs specs [16i:16i+16] under the packing payload
    `vnr run --executor slurm` gives its tasks (run_task's arguments captured; on a CPU nothing calibrates here)."""
    config = _packing_grid(tmp_path, "g", 20, {"runs_per_gpu": "auto", "gpus": 1, "calibration_budget_s": 60},
                           max_steps=2)
    exp = load_experiment(config)
    specs = exp.specs
    calls = []
    monkeypatch.setattr(entry, "run_task", lambda mine, output, data_root, **kw: calls.append((mine, output, kw)) or "ran")
    assert entry.main([str(config), "--index", "1"]) == 0
    (mine, output, kw), = calls
    assert [s.run_id() for s in mine] == [s.run_id() for s in specs[16:20]] and output == exp.output
    expected = {"runs_per_gpu": "auto", "first": specs[0], "samples": 20 * 2 * 4, "budget_cap_s": 60.0}
    assert kw["packing"] == expected
    assert kw["options"] == [exp.options_for(s) for s in mine]
    # the submitit path: what vnr run --executor slurm hands slurm.submit for the same grid
    submitted = []
    monkeypatch.setattr(slurm_mod, "submit", lambda todo, output, settings, **k: submitted.append(k) or "5")
    assert cli.main(["run", str(config), "--executor", "slurm"]) == 0
    assert submitted[-1]["runs_per_gpu"] == "auto"
    assert arrays.task_packing("auto", submitted[-1]["calibration"]) == expected
    # task 0 gets the first 16, with the same payload; --no-calibrate: one spec per task, no packing
    assert entry.main([str(config), "--index", "0"]) == 0
    assert [s.run_id() for s in calls[-1][0]] == [s.run_id() for s in specs[:16]] and calls[-1][2]["packing"] == expected
    assert entry.main([str(config), "--index", "19", "--no-calibrate"]) == 0
    assert [s.run_id() for s in calls[-1][0]] == [specs[19].run_id()] and calls[-1][2]["packing"] is None
    # a task whose specs are all done has nothing to run or calibrate
    for s in specs[16:20]:
        RunStore(exp.output).write({"run_id": s.run_id(), "kind": s.kind, "model": s.model, "status": "ok",
                                    "metrics": {"accuracy": 0.5}})
    n_calls = len(calls)
    assert entry.main([str(config), "--index", "1"]) == 0 and len(calls) == n_calls
    # with those done, task 0's payload counts the training samples of the 16 runs left (as vnr run's todo)
    assert entry.main([str(config), "--index", "0"]) == 0
    assert calls[-1][2]["packing"] == {**expected, "samples": 16 * 2 * 4}
    capsys.readouterr()


def test_runs_per_gpu_and_gpus_reach_the_executors(tmp_path, capsys, monkeypatch, data_on_disk):
    calls = []

    def spy_execute(specs, output, **kwargs):
        calls.append(kwargs)
        return []

    monkeypatch.setattr(local_mod, "execute", spy_execute)
    config = _grid(tmp_path)
    assert cli.main(["run", str(config), "--no-progress"]) == 0
    assert "runs_per_gpu" not in calls[-1] and "gpus" not in calls[-1]  # the defaults are not passed
    assert cli.main(["run", str(config), "--no-progress", "--runs-per-gpu", "3"]) == 0
    assert calls[-1]["runs_per_gpu"] == 3
    config = _grid(tmp_path, local={"runs_per_gpu": 2, "gpus": [0, 1]})
    monkeypatch.setattr(local_mod, "gpu_count", lambda: 2)  # a machine with two GPUs: the listed ones exist
    # --no-calibrate: no precision bursts for "GPU" 0 (on this CPU, ~50 s of real training for a check of kwargs)
    assert cli.main(["run", str(config), "--no-progress", "--no-calibrate"]) == 0
    assert calls[-1]["runs_per_gpu"] == 2 and calls[-1]["gpus"] == [0, 1]

    submitted = []
    monkeypatch.setattr(slurm_mod, "submit", lambda specs, output, settings, **kw: submitted.append(kw) or "5")
    config = _grid(tmp_path, slurm={"runs_per_gpu": 4})
    assert cli.main(["run", str(config), "--executor", "slurm"]) == 0
    assert submitted[-1]["runs_per_gpu"] == 4
    assert cli.main(["run", str(config), "--executor", "slurm", "--runs-per-gpu", "1"]) == 0
    assert "runs_per_gpu" not in submitted[-1]
    capsys.readouterr()


def test_wait_shows_a_live_status_line_until_the_array_has_left_the_queue(tmp_path, capsys, monkeypatch, data_on_disk):
    config = _grid(tmp_path)
    exp = load_experiment(config)
    queue = {"77_0": "RUNNING", "77_1": "PENDING", "77_2": "PENDING"}

    def fake_submit(specs, output, settings, **kw):
        slurm_mod.write_manifest(output, "77", specs)
        return "77"

    def fake_sleep(seconds):  # the array runs: every task finishes, two ok and one failed
        for i, spec in enumerate(exp.specs):
            RunStore(exp.output).write({"run_id": spec.run_id(), "kind": "finetune", "model": spec.model,
                                        "status": "ok" if i < 2 else "failed", "error": "boom",
                                        "metrics": {"accuracy": 0.5}})
        queue.clear()

    monkeypatch.setattr(slurm_mod, "submit", fake_submit)
    monkeypatch.setattr(slurm_mod, "squeue_states", lambda user_only=True: dict(queue))
    monkeypatch.setattr(status_mod, "squeue_states", lambda user_only=True: dict(queue))
    monkeypatch.setattr(slurm_mod.time, "sleep", fake_sleep)
    assert cli.main(["run", str(config), "--executor", "slurm", "--wait"]) == 1  # a run failed
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [
        "waiting: 3 runs: 0 done, 1 running, 2 queued, 0 failed, 0 missing",
        "waiting: 3 runs: 2 done, 0 running, 0 queued, 1 failed, 0 missing",
    ]
    assert captured.out.splitlines()[-1] == "3 runs: 2 done, 0 running, 0 queued, 1 failed, 0 missing"


def test_live_line_rewrites_itself_on_a_terminal():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    stream = Tty()
    line = LiveLine(stream)
    line.show("a")
    line.show("a")
    line.show("b")
    line.close()
    assert stream.getvalue() == "\r\033[Ka\r\033[Ka\r\033[Kb\n"


def test_every_flag_and_positional_of_run_status_collect_has_help():
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name in ("run", "status", "collect"):
        for action in sub.choices[name]._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            assert action.help and action.help != argparse.SUPPRESS, (name, action.dest)


def test_dry_run_with_runs_per_gpu_packs_the_array(tmp_path, capsys):
    assert cli.main(["run", SMOKE, "--executor", "slurm", "--dry-run", "--output", str(tmp_path),
                     "--runs-per-gpu", "4"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "#SBATCH --array=0-3%2" in lines  # 14 specs, 4 per task: 4 tasks
    assert lines[0].startswith("# 4 array tasks") and "each task runs 4" in lines[0]


@pytest.mark.parametrize(("flags", "message"), [
    (["--executor", "slurm", "--dry-run", "--mem-gb", "0.0001"],
     "vnr run: error: --mem-gb: 0.0001 GB is below 1 MB, the least sbatch --mem takes (--mem=0 would mean all of a "
     "node's memory): give at least 0.001"),
    (["--count", "--only", ""], "vnr run: error: --only '': an empty pattern is no selection (an unset shell "
     "variable?): give a run id, model, task or model/task glob, or leave --only out for every run"),
    (["--list", "--only", ","], "vnr run: error: --only ',': an empty pattern is no selection (an unset shell "
     "variable?): give a run id, model, task or model/task glob, or leave --only out for every run"),
    (["--dry-run", "--only", "bias", "--only", "rte,"], "vnr run: error: --only 'rte,': an empty pattern is no "
     "selection (an unset shell variable?): give a run id, model, task or model/task glob, or leave --only out for "
     "every run"),
    (["--count", "--only", "finetune,nomatch"], "vnr run: error: --only 'nomatch' matches no run of this grid, though "
     "the other patterns do: fix or remove it (try a run id, model, task or model/task glob)"),
    # flags that contradict each other: refused, not one of them silently ignored
    (["--list", "--count"], "vnr run: error: argument --count: not allowed with argument --list"),
    (["--count", "--sbatch-args"], "vnr run: error: argument --sbatch-args: not allowed with argument --count"),
    (["--dry-run", "--list"], "vnr run: error: argument --list: not allowed with argument --dry-run"),
    (["--executor", "slurm", "--wait", "--dry-run"], "vnr run: error: --wait follows a submitted array, and --dry-run "
     "submits nothing: leave one of them out"),
    (["--wait"], "vnr run: error: --wait follows a submitted SLURM array: add --executor slurm (a local run already "
     "waits), or leave --wait out"),
    (["--executor", "local", "--partition", "gpu"], "vnr run: error: --partition applies to --executor slurm (or "
     "--sbatch-args): add --executor slurm, or leave --partition out for a local run"),
    (["--dry-run", "--sbatch-opt", "exclusive"], "vnr run: error: --sbatch-opt applies to --executor slurm (or "
     "--sbatch-args): add --executor slurm, or leave --sbatch-opt out for a local run"),
    (["--isolate", "--executor", "slurm", "--dry-run"], "vnr run: error: --isolate applies to the local executor (each "
     "SLURM array task is already its own process): leave it out with --executor slurm"),
])
def test_bad_flags_are_one_line_naming_the_flag(tmp_path, capsys, flags, message):
    try:
        code = cli.main(["run", SMOKE, "--output", str(tmp_path), *flags])
    except SystemExit as exc:  # the parser's own refusals (mutually exclusive flags) exit there
        code = exc.code
    assert code == 2
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", message + "\n")
    assert list(tmp_path.iterdir()) == []  # nothing written


@pytest.mark.parametrize(("gpus", "count", "message"), [
    ([0], 0, "g.yaml: local.gpus: [0] but this machine has no GPU: remove local.gpus or run on a GPU node"),
    ([99], 1, "g.yaml: local.gpus: GPU 99 is not on this machine, which has 1 GPU (0 to 0): list indices below 1, "
              "or leave local.gpus out to use every GPU found"),
    ([0, 2], 2, "g.yaml: local.gpus: GPU 2 is not on this machine, which has 2 GPUs (0 to 1): list indices below 2, "
                "or leave local.gpus out to use every GPU found"),
])
def test_local_gpus_this_machine_lacks_are_refused_when_the_grid_runs(tmp_path, capsys, monkeypatch, data_on_disk,
                                                                       gpus, count, message):
    """An explicit local.gpus index this machine lacks ran its runs on the CPU without a word: refused at `vnr run`
    (not at --dry-run or --list, which may run on a login node without a GPU)."""
    ran = []
    monkeypatch.setattr(local_mod, "execute", lambda specs, output, **kw: ran.append(specs) or [])
    monkeypatch.setattr(local_mod, "gpu_count", lambda: count)
    config = _grid(tmp_path, local={"gpus": gpus, "runs_per_gpu": 1})
    assert cli.main(["run", str(config), "--dry-run"]) == 0 and cli.main(["run", str(config), "--list"]) == 0
    capsys.readouterr()
    assert cli.main(["run", str(config), "--no-progress"]) == 2
    assert capsys.readouterr().err == f"vnr run: error: {config.parent / message}\n" and ran == []
    # no list: no check, whatever the machine has (the executor uses what it finds: the CPU without a GPU)
    monkeypatch.setattr(local_mod, "gpu_count", lambda: pytest.fail("counted GPUs without local.gpus"))
    assert cli.main(["run", str(_grid(tmp_path)), "--no-progress"]) == 0 and len(ran) == 1


@pytest.mark.parametrize(("only", "message"), [
    ("", "--only '': an empty pattern is no selection"),
    ("bias,nomatch", "--only 'nomatch' matches no run of this grid, though the other patterns do"),
])
def test_status_and_the_array_entry_refuse_the_same_only_patterns(tmp_path, capsys, only, message):
    assert cli.main(["status", SMOKE, "--output", str(tmp_path), "--only", only]) == 2
    assert capsys.readouterr().err.startswith(f"vnr status: error: {message}")
    assert entry.main([SMOKE, "--count", "--only", only]) == 2
    assert capsys.readouterr().err.startswith(f"harness.grid.entry: error: {message}")


def test_a_fused_plain_sbatch_array_has_one_task_per_fused_group(tmp_path, capsys, data_root):
    """``--sbatch-args --fuse 3`` over two cells of 5 seeds each: each cell's seeds fused 3 at a time give four
    tasks (3 + 2, 3 + 2); the array file records K, entry --count agrees, and the entry runs task 1 as one fused
    group of the first cell's last two seeds."""
    from harness.grid.arrays import array_tasks
    from harness.store import RunStore

    doc = {"name": "f", "output": str(tmp_path / "f"),
           "finetune": {"models": ["tiny:bert"], "tasks": ["rte", "stsb"], "seeds": [0, 1, 2, 3, 4],
                        "hyperparameters": {"max_steps": 1, "batch_size": 4, "max_train_samples": 8,
                                            "max_eval_samples": 8, "max_length": 32, "precision": "fp32"},
                        "run_options": {"track_efficiency": False}},
           "slurm": {"gpus": 0}}
    config = tmp_path / "f.yaml"
    config.write_text(yaml.safe_dump(doc))
    specs = load_experiment(config).specs
    lines = _sbatch_lines(capsys, config, "--fuse", "3")
    tasks = array_tasks(specs, 1, 3)
    assert [[s.seed for s in t] for t in tasks] == [[0, 1, 2], [3, 4], [0, 1, 2], [3, 4]]
    assert lines[0] == "--array=0-3%4"
    array = _array_file(lines)
    plan = json.loads(array.read_text())
    assert plan["fuse"] == 3 and plan["capture"] is False
    assert _entry_count(capsys, config, "--array-file", str(array)) == 4
    assert _entry_count(capsys, config) == 10  # the script line alone: not fused, one task per run
    assert entry.main([str(config), "--array-file", str(array), "--index", "1", "--data-root", str(data_root)]) == 0
    store = RunStore(tmp_path / "f")
    ran = {p.stem for p in (tmp_path / "f" / "runs").glob("*.json")}
    assert ran == {s.run_id() for s in tasks[1]}
    assert {store.get(r)["settings"]["fused"]["size"] for r in ran} == {2}
