"""End-to-end fine-tuning runs of tiny models on the real RTE data: record, skip, kill and resume, bad input."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.cli import main as vnr
from harness.finetune import run_finetune
from harness.finetune.checkpoints import COMPLETE_MARKER, latest_checkpoint
from harness.specs import FinetuneSpec
from harness.store import RunStore
from ranking.floor.errors import UserError

REPO = Path(__file__).resolve().parents[1]
SMOKE = {"max_steps": 12, "max_train_samples": 64, "max_eval_samples": 48, "batch_size": 8, "learning_rate": 5e-4}


def _check_record(rec: dict, spec: FinetuneSpec, steps: int) -> None:
    assert rec["status"] == "ok" and rec["error"] is None
    assert rec["run_id"] == spec.run_id() and rec["kind"] == "finetune"
    assert (rec["model"], rec["task"], rec["seed"]) == (spec.model, "rte", spec.seed)
    assert rec["hyperparameters"]["learning_rate"] == spec.learning_rate
    assert rec["hyperparameters"]["max_steps"] == steps
    assert set(rec["metrics"]) == {"accuracy"} and 0.0 <= rec["metrics"]["accuracy"] <= 1.0
    assert rec["metrics"]["accuracy"] * 48 == pytest.approx(round(rec["metrics"]["accuracy"] * 48))  # k of 48
    assert rec["metrics_best"]["accuracy"] >= rec["metrics"]["accuracy"]
    assert rec["metrics_best_epoch"]["accuracy"] in [row["epoch"] for row in rec["history"]]
    # 64 examples / batch 8 = 8 steps per epoch; 12 steps = evaluations after epoch 1 and at step 12
    assert [row["step"] for row in rec["history"]] == [8, 12]
    assert [row["epoch"] for row in rec["history"]] == [1.0, 1.5]
    assert all(math.isfinite(row["eval_loss"]) and math.isfinite(row["train_loss"]) for row in rec["history"])
    assert rec["train"]["global_step"] == steps
    tokens = rec["tokens"]  # harness.finetune.callbacks.TokenAccountingCallback
    assert tokens["samples"] == steps * spec.batch_size
    assert 0 < tokens["real_tokens"] <= tokens["computed_tokens"] <= tokens["samples"] * spec.max_length
    assert tokens["computed_tokens"] % 8 == 0  # bucketed: every batch's width is a multiple of 8
    assert tokens["padding_share"] == pytest.approx(1 - tokens["real_tokens"] / tokens["computed_tokens"])
    assert tokens["tokens_per_s"] == pytest.approx(tokens["real_tokens"] / tokens["train_seconds"])
    assert 0 < tokens["train_seconds"] < rec["wall_time_s"]
    assert rec["settings"]["batching"] == {"mode": "bucketed", "pad_to_multiple_of": 8, "requested": "auto"}
    eff = rec["efficiency"]
    for key in ("energy_kwh", "duration_h", "gpu_hours", "co2_kg", "grid_intensity_g_per_kwh"):
        assert isinstance(eff[key], float) and eff[key] >= 0
    assert eff["energy_kwh"] > 0 and 0 < eff["duration_h"] * 3600 < rec["wall_time_s"]
    assert eff["gpu_hours"] == 0.0  # CPU run
    assert eff["packing"] == 1 and eff["attribution"] == {"method": "no GPU", "colocated": [], "share": 1.0}
    assert eff["energy_kwh"] == pytest.approx(sum(eff["breakdown"].values()))
    assert eff["co2_kg"] == pytest.approx(eff["energy_kwh"] * eff["grid_intensity_g_per_kwh"] / 1000)
    assert eff["backend"] and eff["country_iso_code"] == "USA"
    _check_cpu_only_basis(eff)
    env = rec["environment"]
    assert env["torch"] and env["transformers"] and env["host"]


def _check_cpu_only_basis(eff: dict) -> None:
    """A CPU-only run: codecarbon's CPU and RAM models, so an estimate (RAPL, where readable, measures the CPU)."""
    parts = eff["breakdown"]
    if eff["methods"]["cpu"].startswith("codecarbon intel_rapl"):  # pragma: no cover - not this project's machines
        assert eff["energy_basis"] == "mixed" and eff["modelled_kwh"] == pytest.approx(parts["ram_kwh"])
    else:
        assert eff["energy_basis"] == "estimate" and eff["modelled_fraction"] == 1.0
        assert eff["breakdown_basis"] == {"cpu": "modelled", "ram": "modelled", "gpu": "none"}


def test_tiny_bert_end_to_end_then_skipped(data_root: Path, tmp_path: Path):
    spec = FinetuneSpec("tiny:bert", "rte", 0, **SMOKE)
    rec = run_finetune(spec, tmp_path, data_root=data_root, progress=False)
    _check_record(rec, spec, 12)
    path = RunStore(tmp_path).result_path(spec.run_id())
    assert json.loads(path.read_text())["metrics"] == rec["metrics"]
    assert not RunStore(tmp_path).checkpoint_dir(spec.run_id()).exists()  # removed after the result
    assert not RunStore(tmp_path).running_path(spec.run_id()).exists()
    # a second invocation returns the stored result without training (even with an unreadable data root)
    mtime = path.stat().st_mtime_ns
    again = run_finetune(spec, tmp_path, data_root=tmp_path / "nowhere", progress=False)
    assert again == json.loads(path.read_text()) and path.stat().st_mtime_ns == mtime


def test_tiny_gpt2_end_to_end(data_root: Path, tmp_path: Path):
    spec = FinetuneSpec("tiny:gpt2", "rte", 1, **SMOKE)
    rec = run_finetune(spec, tmp_path, data_root=data_root, progress=False, keep_checkpoints=True)
    _check_record(rec, spec, 12)
    ckpt = latest_checkpoint(RunStore(tmp_path).checkpoint_dir(spec.run_id()))
    assert ckpt is not None and ckpt.name == "checkpoint-12"  # kept on request


def test_failure_is_recorded_then_raised(tmp_path: Path, data_root: Path):
    root = tmp_path / "data"
    (root / "glue" / "RTE").mkdir(parents=True)
    (root / "glue" / "RTE" / "train.tsv").write_text("index\tsentence1\tsentence2\tlabel\n0\ta\tb\tperhaps\n")
    (root / "glue" / "RTE" / "dev.tsv").write_text((data_root / "glue" / "RTE" / "dev.tsv").read_text())
    spec = FinetuneSpec("tiny:bert", "rte", 0, **SMOKE)
    with pytest.raises(UserError, match="label 'perhaps'"):
        run_finetune(spec, tmp_path / "out", data_root=root, progress=False)
    rec = RunStore(tmp_path / "out").get(spec.run_id())
    assert rec["status"] == "failed" and rec["error"].startswith("UserError: ") and "perhaps" in rec["error"]
    assert not RunStore(tmp_path / "out").is_done(spec.run_id())


def test_a_crashed_run_is_one_line_on_the_command_line(tmp_path: Path, data_root: Path, monkeypatch, capsys):
    """vnr finetune: a crash in training (here the allocation error a batch_size of 10**12 gives) exits 1 with one
    line: the record's short error, the record and the log that holds the whole traceback."""
    from harness.finetune import train

    def out_of_memory(*args, **kwargs):
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:127] can't allocate memory:\n you tried to allocate "
                           "4000000000000 bytes")

    monkeypatch.setattr(train, "_train", out_of_memory)
    spec = FinetuneSpec("tiny:bert", "rte", 0, max_steps=1, max_train_samples=8, max_eval_samples=8, batch_size=8)
    code = vnr(["finetune", "--model", "tiny:bert", "--task", "rte", "--seed", "0", "--data-root", str(data_root),
                "--output", str(tmp_path), "--max-steps", "1", "--max-train-samples", "8", "--max-eval-samples", "8",
                "--batch-size", "8", "--no-progress"])
    err = capsys.readouterr().err
    rid, store = spec.run_id(), RunStore(tmp_path)
    error = ("RuntimeError: [enforce fail at alloc_cpu.cpp:127] can't allocate memory: you tried to allocate "
             "4000000000000 bytes")
    assert code == 1 and store.get(rid)["error"] == error
    assert err.splitlines()[-1] == (f"vnr finetune: run {rid} failed: {error} (record: {store.result_path(rid)}; "
                                    f"traceback: {tmp_path / 'logs' / (rid + '.log')})")
    assert "Traceback" not in err and "Traceback" in (tmp_path / "logs" / f"{rid}.log").read_text()


def test_only_complete_checkpoints_are_trusted(tmp_path: Path):
    run_dir = tmp_path / "ck"
    good = run_dir / "checkpoint-4"
    good.mkdir(parents=True)
    (good / "trainer_state.json").write_text(json.dumps({"global_step": 4}))
    (good / COMPLETE_MARKER).write_text("{}")
    torn = run_dir / "checkpoint-8"  # killed while saving: no marker
    torn.mkdir()
    (torn / "trainer_state.json").write_text(json.dumps({"global_step": 8}))
    half = run_dir / "checkpoint-12"  # marker but a torn trainer_state.json
    half.mkdir()
    (half / "trainer_state.json").write_text('{"global_st')
    (half / COMPLETE_MARKER).write_text("{}")
    assert latest_checkpoint(run_dir) == good
    assert latest_checkpoint(tmp_path / "none") is None


def test_killed_run_resumes_from_its_checkpoint(data_root: Path, tmp_path: Path):
    out = tmp_path / "out"
    args = ["--model", "tiny:bert", "--task", "rte", "--seed", "3", "--data-root", str(data_root),
            "--output", str(out), "--max-steps", "24", "--max-train-samples", "64", "--max-eval-samples", "32",
            "--batch-size", "4", "--lr", "5e-4", "--save-steps", "4"]
    spec = FinetuneSpec("tiny:bert", "rte", 3, max_steps=24, max_train_samples=64, max_eval_samples=32,
                        batch_size=4, learning_rate=5e-4)
    store = RunStore(out)
    env = {**os.environ, "PYTHONPATH": str(REPO), "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.Popen([sys.executable, "-m", "harness", "finetune", *args, "--no-progress"], cwd=REPO,
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 240
    try:
        while latest_checkpoint(store.checkpoint_dir(spec.run_id())) is None:
            assert proc.poll() is None, f"run ended before its first checkpoint: {proc.stderr.read().decode()[-2000:]}"
            assert time.time() < deadline, "no checkpoint within 240 s"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
        proc.stderr.close()
    killed_at = int(latest_checkpoint(store.checkpoint_dir(spec.run_id())).name.split("-")[1])
    assert killed_at < 24
    assert not store.result_path(spec.run_id()).exists()  # no partial result after the kill
    assert store.running_path(spec.run_id()).exists()  # the marker says it was running

    rec = run_finetune(spec, out, data_root=data_root, progress=False)
    assert rec["status"] == "ok" and rec["resumed_from"] == killed_at
    assert rec["train"]["global_step"] == 24
    assert [row["step"] for row in rec["history"]] == [16, 24]  # 16 steps per epoch; evaluations before the kill kept
    assert rec["efficiency"]["attempts"] == 2 and rec["efficiency"]["energy_kwh"] > 0
    _check_cpu_only_basis(rec["efficiency"])  # both attempts' energy modelled: still an estimate, all of it
    assert rec["efficiency"]["previous_attempts"]["energy_basis"] == rec["efficiency"]["energy_basis"]
    assert not store.checkpoint_dir(spec.run_id()).exists()

    # the resumed run ends where an uninterrupted one does (CPU, same seed: deterministic)
    straight = run_finetune(spec, tmp_path / "straight", data_root=data_root, progress=False)
    assert [r["eval_loss"] for r in rec["history"]] == pytest.approx([r["eval_loss"] for r in straight["history"]],
                                                                      abs=1e-5)
    # the token totals spent before the kill were restored from the checkpoint: same counts as straight through
    counts = ("samples", "real_tokens", "computed_tokens")
    assert [rec["tokens"][k] for k in counts] == [straight["tokens"][k] for k in counts]
    assert rec["tokens"]["samples"] == 24 * 4


# ---------------------------------------------------------------------- CLI
def test_cli_runs_and_prints_summary(data_root: Path, tmp_path: Path, capsys, caplog):
    argv = ["finetune", "--model", "tiny:bert", "--task", "RTE", "--seed", "0", "--data-root", str(data_root),
            "--output", str(tmp_path), "--max-steps", "3", "--max-train-samples", "32", "--max-eval-samples", "16",
            "--batch-size", "8", "--no-progress"]
    caplog.set_level("INFO")
    assert vnr(argv) == 0
    captured = capsys.readouterr()
    lines = captured.out.strip().splitlines()
    # a line before the seconds of loading, then readable log lines: no raw Trainer dicts, no bar fragments
    assert caplog.messages[0] == "fine-tuning tiny:bert on rte, seed 0: loading torch, the data and the model …"
    assert "loading model tiny:bert" in caplog.text and "eval_loss " in caplog.text and "train_loss " in caplog.text
    assert "{'" not in captured.out + captured.err and "\r" not in captured.out + captured.err
    assert lines[-2].startswith("result: ") and lines[-2].endswith(".json") and Path(lines[-2][8:]).is_file()
    assert lines[-1].startswith("tiny:bert rte seed=0 | final: accuracy=")
    assert " kWh (estimate) co2=" in lines[-1] or " kWh (mixed: " in lines[-1]  # CPU-only: (mixed) where RAPL reads
    assert vnr(argv) == 0
    assert capsys.readouterr().out.splitlines()[-2].startswith("already done: ")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--task", "glue-x"], "unknown GLUE task 'glue-x'"),
        (["--model", "bert-huge"], "model bert-huge is not in the local Hugging Face cache"),
        (["--task", "qqp"], "task QQP is not in the data root"),
        (["--task", "qnli"], "QNLI/, which lacks train.tsv"),  # a data root is per task: offline, no hub
        (["--max-steps", "0"], "--max-steps: 0 is below 1"),
        (["--data-root", "/nonexistent/dir"], "is not a directory"),
        (["--output", "/dev/null/out"], "cannot write results under /dev/null/out"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(data_root: Path, tmp_path: Path, capsys, extra, message):
    base = {"--model": "tiny:bert", "--task": "rte", "--seed": "0", "--data-root": str(data_root),
            "--output": str(tmp_path / "o"), "--max-steps": "2"}
    for flag, value in zip(extra[::2], extra[1::2]):
        base[flag] = value
    argv = ["finetune", *[x for kv in base.items() for x in kv], "--no-progress"]
    assert vnr(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_a_diverged_run_is_a_failure_with_its_reason_unless_allowed(data_root: Path, tmp_path: Path, capsys):
    """A learning rate of 1e30 blows the weights up: NaN losses make a failed run, stored as strict JSON."""
    spec = FinetuneSpec("tiny:bert", "rte", 0, max_steps=4, max_train_samples=16, max_eval_samples=8,
                        batch_size=8, learning_rate=1e30)
    argv = ["finetune", "--model", "tiny:bert", "--task", "rte", "--seed", "0", "--data-root", str(data_root),
            "--output", str(tmp_path), "--max-steps", "4", "--max-train-samples", "16", "--max-eval-samples", "8",
            "--batch-size", "8", "--lr", "1e30", "--no-progress"]
    assert vnr(argv) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if "vnr finetune" in line]
    assert len(err) == 1 and "run failed" in err[0] and "the run diverged: non-finite" in err[0]
    assert "allow_nonfinite" in err[0]
    store = RunStore(tmp_path)
    text = store.result_path(spec.run_id()).read_text()
    rec = json.loads(text, parse_constant=lambda token: pytest.fail(f"non-standard JSON {token}"))
    assert rec["status"] == "failed" and rec["error"].startswith("the run diverged: non-finite ")
    assert rec["nonfinite"] and all(v in ("nan", "inf", "-inf") for v in rec["nonfinite"].values())
    assert any(path.startswith("history[") for path in rec["nonfinite"])
    assert rec["history"] and not store.is_done(spec.run_id())
    # --allow-nonfinite keeps such a run: ok, the non-finite values named
    assert vnr([*argv, "--allow-nonfinite"]) == 0
    rec = store.get(spec.run_id())
    assert rec["status"] == "ok" and rec["nonfinite"] and rec["error"] is None
