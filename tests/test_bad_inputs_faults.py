"""No dead ends, no impossible numbers, faults in one line (issue #20).

* a stored record whose metrics are not numbers is not "done" anywhere: ``vnr status`` shows it failed with
  the reason, ``vnr run`` redoes it, ``vnr collect`` names it (one predicate: ``harness.store.record_problem``);
* energy-ledger lines with negative, non-finite or physically impossible values are charged to no run;
* disk full, read-only output, an output under a file and ``report --out`` naming a file: one line, exit 2,
  nothing half-written.

Real runs on a tiny model, real record files edited on disk, a hand-written ledger; faults are injected into
the store's real atomic writer.
"""

from __future__ import annotations

import errno
import json
import logging
import os
from pathlib import Path

import pytest

from harness.cli import main
from harness.energy.ledger import GpuLedger, attribute, measured_total
from harness.grid.config import load_experiment
from harness.store import RunStore
from ranking.floor import paths as floor_paths


def one_line(argv, capsys, code: int = 2) -> str:
    capsys.readouterr()
    got = main(argv)
    err = capsys.readouterr().err.strip()
    assert got == code, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def leftovers(root: Path) -> list[str]:
    """Temporary or half-written files under ``root`` (what an interrupted atomic write would leave)."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.name.endswith(".tmp"))


# ---------------------------------------------------------------------- an unusable record is no dead end
@pytest.fixture
def grid(tmp_path, data_root, monkeypatch):
    monkeypatch.setenv("VNR_DATA_ROOT", str(data_root))
    config = tmp_path / "grid.yaml"
    config.write_text(
        f"name: one\noutput: {tmp_path / 'results'}\n"
        "finetune:\n  models: [tiny:bert]\n  tasks: [rte]\n  seeds: [0]\n"
        "  hyperparameters: {max_steps: 1, batch_size: 4, max_train_samples: 8, max_eval_samples: 8, "
        "max_length: 32, precision: fp32}\n")
    return config


def test_a_record_whose_metrics_are_not_numbers_is_redone_not_a_dead_end(grid, capsys):
    exp = load_experiment(grid)
    (spec,) = exp.specs
    store = RunStore(exp.output)
    assert main(["run", str(grid), "--no-progress"]) == 0
    path = store.result_path(spec.run_id())
    record = json.loads(path.read_text())
    assert record["status"] == "ok" and isinstance(record["metrics"]["accuracy"], float)

    record["metrics"] = {key: str(value) for key, value in record["metrics"].items()}  # edited on disk
    path.write_text(json.dumps(record))
    capsys.readouterr()
    assert main(["status", str(grid), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["runs"]
    assert (row["state"], row["detail"]) == ("failed", "unusable record: no numeric metrics; `vnr run` redoes it")
    assert not store.is_done(spec) and store.done_record(spec) is None
    err = one_line(["collect", str(grid)], capsys)
    assert f"1 with an unusable record ({spec.run_id()}: no numeric metrics)" in err

    assert main(["run", str(grid), "--no-progress"]) == 0  # redone, not skipped
    assert capsys.readouterr().out.strip().startswith("1 runs: 1 ran, 0 skipped (done), 0 failed")
    redone = json.loads(path.read_text())
    assert isinstance(redone["metrics"]["accuracy"], float) and redone["attempt"] != record["attempt"]
    assert main(["status", str(grid), "--summary"]) == 0
    assert capsys.readouterr().out.strip() == "1 runs: 1 done, 0 running, 0 queued, 0 failed, 0 missing"
    assert main(["collect", str(grid)]) == 0
    capsys.readouterr()
    assert main(["run", str(grid), "--no-progress"]) == 0
    assert capsys.readouterr().out.strip().startswith("1 runs: 0 ran, 1 skipped (done)")


# ---------------------------------------------------------------------- the energy ledger
LEDGER = """\
{"attempt": "a", "run": "A", "kind": "start", "t": 0.0, "mj": 0, "pid": 1}
{"attempt": "b", "run": "B", "kind": "start", "t": 10.0, "mj": 2000, "pid": 2}
{"attempt": "a", "run": "A", "kind": "tick", "t": 20.0, "mj": -5, "pid": 1}
{"attempt": "a", "run": "A", "kind": "tick", "t": NaN, "mj": 5000, "pid": 1}
{"attempt": "b", "run": "B", "kind": "tick", "t": 30.0, "mj": 6000, "pid": 2, "util": {"2": Infinity}}
{"attempt": "b", "run": "B", "kind": "tick", "t": 30.0, "mj": 6000, "pid": 2}
{"attempt": "a", "run": "A", "kind": "tick", "t": 40.0, "mj": 500006000, "pid": 1}
{"attempt": "a", "run": "A", "kind": "stop", "t": 50.0, "mj": 500008000, "pid": 1}
{"attempt": "b", "run": "B", "kind": "tick", "t": 45.0, "mj": 500009000, "pid": 2}
{"attempt": "b", "run": "B", "kind": "tick", "t": 50.0, "mj": "lots", "pid": 2}
{"attempt": "b", "run": "B", "kind": "stop", "t": 60.0, "mj": 500011000, "pid": 2}
"""


def test_impossible_ledger_lines_are_charged_to_no_run(tmp_path, caplog):
    """Lines 3, 4, 5 and 10 are not possible events (negative counter, NaN time, infinite utilisation, a
    counter that is not a number): skipped. The interval ending at line 7 implies 50 kW and the one ending at
    line 9 goes back in time: charged to nobody. What remains is split exactly as without them."""
    path = tmp_path / "GPU-x.jsonl"
    path.write_text(LEDGER)
    ledger = GpuLedger(path)
    with caplog.at_level(logging.WARNING, logger="harness.energy.ledger"):
        events = ledger.events()
        a, b = attribute(events, "a", alive=lambda e: False), attribute(events, "b", alive=lambda e: False)
    assert [e["line"] for e in events] == [1, 2, 6, 7, 8, 9, 11]
    assert ledger.rejected == ["GPU-x.jsonl:3: mj is -5 (negative)", "GPU-x.jsonl:4: t is nan (not finite)",
                               "GPU-x.jsonl:5: util of pid 2 is inf (not a percentage)",
                               "GPU-x.jsonl:10: mj is 'lots' (not a number)"]
    # [0, 10] A alone 2000; [10, 30] A+B 4000; [30, 40] refused; [40, 50] A+B 2000; [50 → 45] refused;
    # [45, 60] B alone 2000
    assert (a["gpu_mj"], b["gpu_mj"]) == (2000 + 2000 + 1000, 2000 + 1000 + 2000)
    assert a["gpu_mj"] + b["gpu_mj"] == measured_total(events, alive=lambda e: False)["gpu_mj"] == 10000
    assert (a["gpu_seconds"], b["gpu_seconds"]) == (10 + 10 + 5, 10 + 5 + 15)
    assert a["rejected"] == ["line 7: the interval implies 50000 W on one GPU (more than 10000 W)"]
    assert b["rejected"] == ["line 7: the interval implies 50000 W on one GPU (more than 10000 W)",
                             "line 9: the interval ends before it starts (t 50.0 then 45.0)"]
    assert a["counter_gaps"] == b["counter_gaps"] == 0
    warned = " ".join(r.getMessage() for r in caplog.records)
    for where in ("GPU-x.jsonl:3", "GPU-x.jsonl:4", "GPU-x.jsonl:5", "GPU-x.jsonl:10", "line 7", "line 9"):
        assert where in warned


def test_a_clean_ledger_is_unchanged_by_the_checks(tmp_path):
    path = tmp_path / "GPU-y.jsonl"
    path.write_text("".join(line + "\n" for i, line in enumerate(LEDGER.splitlines(), start=1)
                            if i in (1, 2, 6, 8, 11)).replace("500008000", "8000").replace("500011000", "11000"))
    ledger = GpuLedger(path)
    events = ledger.events()
    a, b = attribute(events, "a", alive=lambda e: False), attribute(events, "b", alive=lambda e: False)
    assert ledger.rejected == [] and a["rejected"] == b["rejected"] == []
    assert (a["gpu_mj"], b["gpu_mj"]) == (2000 + 2000 + 1000, 2000 + 1000 + 3000)
    assert a["gpu_mj"] + b["gpu_mj"] == 11000


# ---------------------------------------------------------------------- I/O faults: one line, nothing half-written
def finetune_argv(out, data_root):
    return ["finetune", "--model", "tiny:bert", "--task", "rte", "--seed", "0", "--output", str(out),
            "--data-root", str(data_root), "--max-steps", "1", "--max-train-samples", "8", "--max-eval-samples", "8",
            "--batch-size", "4", "--max-length", "32", "--precision", "fp32", "--no-progress"]


def fail_writes(monkeypatch, code: int, when=lambda path: True):
    """Every atomic write (whose target ``when`` accepts) fails half-way with ``code``: the real writer's
    temporary file is half filled, then the error comes, as on a full disk."""
    real = floor_paths.write_atomic

    def failing(path, fill, **options):
        if not when(Path(path)):
            return real(path, fill, **options)

        def half(tmp):
            Path(tmp).write_bytes(b'{"half')
            raise OSError(code, os.strerror(code), str(path))

        return real(path, half, **options)

    monkeypatch.setattr(floor_paths, "write_atomic", failing)


@pytest.mark.parametrize("code, words", [(errno.ENOSPC, "No space left on device (free some space"),
                                         (errno.EROFS, "Read-only file system (the file system is read-only")])
def test_a_full_or_read_only_disk_at_the_start_is_one_line(tmp_path, data_root, capsys, monkeypatch, code, words):
    out = tmp_path / "out"
    fail_writes(monkeypatch, code)
    err = one_line(finetune_argv(out, data_root), capsys)
    assert err.startswith("vnr finetune: error: ") and words in err and str(out / "runs") in err
    assert leftovers(tmp_path) == [] and not list((out / "runs").glob("*.json"))
    assert not list((out / "runs").glob("*.running"))


def test_a_disk_that_fills_when_the_record_is_written_is_one_line(tmp_path, data_root, capsys, monkeypatch):
    out = tmp_path / "out"
    fail_writes(monkeypatch, errno.ENOSPC, when=lambda path: path.suffix == ".json" and path.parent.name == "runs")
    err = one_line(finetune_argv(out, data_root), capsys)
    assert "No space left on device" in err and "free some space" in err
    assert leftovers(tmp_path) == [] and not list((out / "runs").glob("*.json"))  # no record, not half a one
    assert not list((out / "runs").glob("*.running"))


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_read_only_output_folder_is_one_line(tmp_path, data_root, capsys):
    out = tmp_path / "out"
    out.mkdir()
    out.chmod(0o555)
    try:
        err = one_line(finetune_argv(out, data_root), capsys)
    finally:
        out.chmod(0o755)
    assert f"cannot write results under {out}" in err and not (out / "runs").exists()


def test_an_output_under_a_regular_file_is_one_line(tmp_path, data_root, grid, capsys):
    blocker = tmp_path / "somefile"
    blocker.write_text("not a folder")
    under = blocker / "x"
    err = one_line(finetune_argv(under, data_root), capsys)
    assert f"cannot write results under {under}: Not a directory" in err
    err = one_line(["bias", "--model", "tiny:bert", "--dataset", "crows_pairs", "--output", str(under),
                    "--data-root", str(data_root), "--limit", "2", "--no-progress"], capsys)
    assert "Not a directory" in err
    for command in ("run", "status", "collect"):
        err = one_line([command, str(grid), "--output", str(under)], capsys)
        assert f"output {under}: {blocker} is a file, not a folder" in err
        err = one_line([command, str(grid), "--output", str(blocker)], capsys)
        assert f"output {blocker} is a file: give a folder" in err
    assert blocker.read_text() == "not a folder"


def test_report_out_naming_a_file_is_refused_before_any_work(tmp_path, capsys):
    scenario = Path(__file__).resolve().parents[1] / "configs" / "scenarios" / "paper_case_study.yaml"
    page = tmp_path / "report.html"
    page.write_text("mine")
    err = one_line(["report", "--scenario", str(scenario), "--out", str(page)], capsys)
    assert err == f"vnr report: error: --out {page} is a file: give a folder (it is created if missing)"
    err = one_line(["report", "--scenario", str(scenario), "--out", str(page / "sub")], capsys)
    assert f"{page} is a file, not a folder" in err
    assert page.read_text() == "mine" and sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]


def test_an_os_error_anywhere_in_a_command_is_one_line(tmp_path, capsys, monkeypatch):
    """The CLI's edge: an OSError no check foresaw still gives the path and the system's words, no traceback."""
    import ranking.cli as ranking_cli

    def broken(args):
        raise PermissionError(errno.EACCES, "Permission denied", str(tmp_path / "locked.csv"))

    monkeypatch.setattr(ranking_cli, "run_rank", broken)
    table = tmp_path / "t.csv"
    table.write_text("model,a\nx,1\ny,2\n")
    err = one_line(["rank", str(table)], capsys)
    assert err == (f"vnr rank: error: {tmp_path / 'locked.csv'}: Permission denied "
                   "(no permission: choose a folder you can write to)")


# ---------------------------------------------------------------------- a record edited to other settings (#38)
@pytest.mark.parametrize("edit", ["hyperparameters", "identity"])
def test_a_record_edited_to_another_hyperparameter_is_redone_with_a_warning(tmp_path, edit, caplog):
    from harness.specs import FinetuneSpec

    spec = FinetuneSpec("tiny:bert", "rte", 0, learning_rate=2e-5)
    store = RunStore(tmp_path)
    with store.run(spec) as run:
        assert run.state == "run"
        run.finish({"task": "rte", "hyperparameters": {"learning_rate": 2e-5, "batch_size": 16},
                    "metrics": {"accuracy": 0.5}})
    with store.run(spec) as run:
        assert run.state == "done"  # a usable record of this run is reused
    path = store.result_path(spec.run_id())
    record = json.loads(path.read_text())
    record[edit]["learning_rate"] = 5e-5  # status still ok, metrics still numbers
    path.write_text(json.dumps(record))
    assert store.done_record(spec) is None
    with caplog.at_level(logging.WARNING, logger="harness.store"), store.run(spec) as run:
        assert run.state == "run"  # redone, not reused
        run.finish({"task": "rte", "metrics": {"accuracy": 0.6}})
    assert (f"{spec.run_id()}: its stored record is not a usable result (its {edit}.learning_rate is 5e-05, not "
            "2e-05 (the run's setting: the record was edited or is another run's)): redoing the run") in caplog.text
    assert store.done_record(spec)["metrics"] == {"accuracy": 0.6}


# ---------------------------------------------------------------------- YAML merge keys (#38)
@pytest.mark.parametrize("where", ["grid config", "sidecar", "scenario"])
def test_a_yaml_merge_key_is_refused_in_one_line(tmp_path, capsys, where):
    if where == "grid config":
        path = tmp_path / "grid.yaml"
        path.write_text("name: one\nfinetune:\n  models: [tiny:bert]\n  tasks: [rte]\n  seeds: [0]\n"
                        "  hyperparameters:\n    learning_rate: 0.001\n    <<: {learning_rate: 0.5}\n")
        argv, line = ["run", str(path), "--dry-run"], 8
    elif where == "sidecar":
        (tmp_path / "t.csv").write_text("model,a,b\nm1,1,2\nm2,2,1\n")
        path = tmp_path / "criteria.yaml"
        path.write_text("table: t.csv\ncriteria:\n  a: {direction: higher}\n  b:\n    direction: higher\n"
                        "    <<: {direction: lower}\n")
        argv, line = ["rank", str(tmp_path / "t.csv")], 6
    else:
        (tmp_path / "t.csv").write_text("model,a,b\nm1,1,2\nm2,2,1\n")
        (tmp_path / "criteria.yaml").write_text("table: t.csv\ncriteria:\n  a: {direction: higher}\n"
                                                "  b: {direction: higher}\n")
        path = tmp_path / "s.yaml"
        path.write_text("name: s\nreference: b\ncolumns:\n  - name: b\n    rule: borda\n    <<: {rule: copeland}\n")
        argv, line = ["report", "--scenario", str(path), "--results", str(tmp_path), "--out", str(tmp_path / "r")], 6
    err = one_line(argv, capsys)
    assert f"{path}: line {line}: a merge key (<<) — config files take none" in err


def test_a_calibration_naming_a_layout_no_run_knows_is_refused(tmp_path):
    from harness.grid.calibration_file import read_calibration_file
    from ranking.floor.errors import UserError

    path = tmp_path / "cpu-x-2.json"
    chosen = {"runs_per_gpu": 2, "precision": "fp32", "padding": "zigzag"}
    path.write_text(json.dumps({"device_kind": "cpu-x-2", "entries": {"k": {
        "device": {"kind": "cpu-x-2", "type": "cpu"}, "chosen": chosen}}}))
    with pytest.raises(UserError) as err:
        read_calibration_file(path)
    assert str(err.value) == (f"calibration file {path}: entries.k.chosen.padding: 'zigzag' is not one of flatten, "
                              "bucket, pad; move it aside (or delete it) and the grid calibrates again on this device")
    path.write_text(path.read_text().replace("zigzag", "flatten"))
    assert read_calibration_file(path)["entries"]["k"]["chosen"]["padding"] == "flatten"


# ---------------------------------------------------------------------- bounds refused at entry (#38)
def _slurm_grid(tmp_path, slurm: str = "") -> Path:
    config = tmp_path / "g.yaml"
    config.write_text(f"name: g\noutput: {tmp_path / 'out'}\nfinetune:\n  models: [tiny:bert]\n  tasks: [rte]\n"
                      f"  seeds: [0]\n{slurm}")
    return config


@pytest.mark.parametrize("argv, slurm, words", [
    (["finetune", "--model", "tiny:bert", "--task", "rte", "--seed", "0", "--eval-batch-size", "1e9"], "",
     "--eval-batch-size: 1000000000 is above 65536"),
    (["finetune", "--model", "tiny:bert", "--task", "rte", "--seed", "0", "--batch-size", "1e9"], "",
     "--batch-size: 1000000000 is above 65536"),
    (["run", "CONFIG", "--local-gpus", "100000", "--dry-run"], "",
     "--local-gpus: 100000 GPUs is above 256 (the most one machine or task has)"),
    (["run", "CONFIG", "--local-gpus", "0,100000", "--dry-run"], "", "--local-gpus[1]: 100000 is above 255"),
    (["run", "CONFIG", "--executor", "slurm", "--dry-run"], "slurm:\n  time: 2\n  signal_delay_s: 300\n",
     "slurm.signal_delay_s: 300 s is not below the time limit (2 min = 120 s)"),
    (["run", "CONFIG", "--executor", "slurm", "--dry-run", "--time", "1"], "",
     "slurm.signal_delay_s: 120 s is not below the time limit (1 min = 60 s)"),
])
def test_counts_and_delays_beyond_their_bounds_are_refused_in_one_line_before_any_work(tmp_path, capsys, argv,
                                                                                        slurm, words):
    config = _slurm_grid(tmp_path, slurm)
    err = one_line([str(config) if a == "CONFIG" else a for a in argv], capsys)
    assert words in err
    assert not (tmp_path / "out").exists()


def test_a_huge_sidecar_is_refused_before_it_is_parsed(tmp_path, capsys, monkeypatch):
    from ranking.floor import yaml_io

    (tmp_path / "t.csv").write_text("model,a\nm1,1\nm2,2\n")
    entries = "".join(f"  absent_{i:06d}: {{direction: higher}}\n" for i in range(20000))  # about 0.6 MB
    (tmp_path / "criteria.yaml").write_text("table: t.csv\ncriteria:\n  a: {direction: higher}\n" + entries)
    monkeypatch.setattr(yaml_io, "MAX_YAML_BYTES", 2**19)  # the bound, scaled down: the test stays small
    err = one_line(["rank", str(tmp_path / "t.csv")], capsys)
    assert err.endswith(f"criteria sidecar {tmp_path / 'criteria.yaml'} is 0.7 MB: a config file is at most 0.5 MB (a "
                        "sidecar of 40,000 criteria fits in a few MB); check that it is the file you meant")


def test_sbatch_args_with_a_file_pattern_are_refused_not_globbed_by_the_shell(tmp_path, capsys, monkeypatch):
    config = _slurm_grid(tmp_path)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "--comment=x1").write_text("")  # what the shell would put in place of --comment=x*
    err = one_line(["run", str(config), "--sbatch-args", "--sbatch-opt", "comment=x*"], capsys)
    assert err == ("vnr run: error: --sbatch-args: --comment=x* has *, which the shell expands as a file pattern in "
                   "sbatch $(vnr run CONFIG --sbatch-args), where no quoting protects it: give the option without * ? "
                   "[, or submit with --executor slurm (no shell between vnr and sbatch)")
    assert not (tmp_path / "out").exists()  # refused before the log folder is made
    assert main(["run", str(config), "--sbatch-args", "--sbatch-opt", "comment=x1"]) == 0
    assert "--comment=x1" in capsys.readouterr().out.split()


# ---------------------------------------------------------------------- fused groups and captured steps (#35)
@pytest.mark.parametrize("argv, yaml_extra, words", [
    (["run", "CONFIG", "--capture", "sometimes", "--dry-run"], "", "--capture: 'sometimes' is not one of auto, on, off"),
    (["run", "CONFIG", "--fuse", "0", "--dry-run"], "", "--fuse"),
    (["run", "CONFIG", "--fuse", "65", "--dry-run"], "", "65 is above 64"),
    (["run", "CONFIG", "--dry-run"], "local:\n  capture: sometimes\n", "local.capture"),
    (["run", "CONFIG", "--dry-run"], "local:\n  fuse: off\n  capture: on\n",
     "local.capture: on captures a fused group's step, and fuse is off"),
    (["run", "CONFIG", "--executor", "slurm", "--capture", "on", "--dry-run"], "",
     "slurm.capture: on captures a fused group's step, and fuse is auto, which SLURM does not measure"),
    (["run", "CONFIG", "--executor", "slurm", "--fuse", "2", "--runs-per-gpu", "4", "--dry-run"], "",
     "slurm.fuse: 2 makes each array task one fused group, and runs_per_gpu 4 asks each task for 4 runs"),
    (["run", "CONFIG", "--sbatch-args", "--fuse", "2", "--runs-per-gpu", "4"], "", "slurm.fuse: 2 makes each"),
])
def test_fusion_and_capture_settings_beyond_what_they_mean_are_refused_in_one_line(tmp_path, capsys, argv,
                                                                                    yaml_extra, words):
    config = _slurm_grid(tmp_path, yaml_extra)
    err = one_line([str(config) if a == "CONFIG" else a for a in argv], capsys)
    assert words in err, err
    assert not (tmp_path / "out").exists()
