"""``run_bias`` and ``vnr bias`` end to end on tiny models (offline)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

pytest.importorskip("torch")

from harness.bias import run as bias_run  # noqa: E402
from harness.bias import run_bias  # noqa: E402
from harness.bias.data import load_stereoset  # noqa: E402
from harness.bias.metrics import crows_pairs_metrics, winobias_metrics  # noqa: E402
from harness.bias.run import fill_in  # noqa: E402
from harness.cli import main  # noqa: E402
from harness.specs import BiasSpec  # noqa: E402
from harness.store import RunStore  # noqa: E402

RECORD_KEYS = {"run_id", "kind", "model", "dataset", "limit", "metrics", "skipped", "environment", "status",
               "error", "wall_time_s", "n_examples"}


def test_crows_pairs_run_writes_record_and_examples(tmp_path, data_root):
    spec = BiasSpec("tiny:bert", "crows_pairs", limit=12)
    record = run_bias(spec, tmp_path, data_root=data_root, progress=False)
    assert RECORD_KEYS <= set(record)
    assert (record["status"], record["kind"], record["n_examples"], record["error"]) == ("ok", "bias", 12, None)
    store = RunStore(tmp_path)
    assert store.is_done(spec.run_id()) and store.get(spec.run_id())["metrics"] == record["metrics"]
    frame = pd.read_parquet(store.artifact_path(spec.run_id(), "examples.parquet"))
    assert len(frame) == 12 and {"score_more", "score_less", "bias_type", "direction"} <= set(frame.columns)
    assert record["metrics"] == pytest.approx(crows_pairs_metrics(frame))  # metrics come from the stored scores
    m = record["metrics"]
    assert m["anti_stereo_score"] + m["metric_score"] + m["neutral_score"] == pytest.approx(100.0)
    assert "metric_score.race-color" in m and all(isinstance(v, float) for v in m.values())
    assert not store.running_path(spec.run_id()).exists()
    json.dumps(record, allow_nan=False)


def test_a_finished_run_is_not_rerun(tmp_path, data_root, monkeypatch):
    spec = BiasSpec("tiny:gpt2", "winobias", limit=2)
    first = run_bias(spec, tmp_path, data_root=data_root, progress=False)
    assert first["n_examples"] == 8 and {"anti_ge_pro", "anti_ge_pro.type2_test", "acc_difference"} <= set(first["metrics"])
    frame = pd.read_parquet(RunStore(tmp_path).artifact_path(spec.run_id(), "examples.parquet"))
    assert first["metrics"] == pytest.approx(winobias_metrics(frame))

    def boom(*args, **kwargs):
        raise AssertionError("must not score again")

    monkeypatch.setattr(bias_run, "evaluate", boom)
    again = run_bias(spec, tmp_path, data_root=data_root, progress=False)
    assert again["run_id"] == first["run_id"] and again["metrics"] == first["metrics"]


def test_a_failure_is_recorded_and_raised(tmp_path, data_root, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("scoring exploded")

    monkeypatch.setattr(bias_run, "evaluate", broken)
    spec = BiasSpec("tiny:bert", "winobias", limit=1)
    with pytest.raises(RuntimeError, match="exploded"):
        run_bias(spec, tmp_path, data_root=data_root, progress=False)
    rec = RunStore(tmp_path).get(spec.run_id())
    assert rec["status"] == "failed" and "scoring exploded" in rec["error"]
    assert not RunStore(tmp_path).is_done(spec.run_id())


def test_a_crashed_run_is_one_line_on_the_command_line(tmp_path, data_root, monkeypatch, capsys):
    """vnr bias (as vnr finetune): a run that crashes exits 1 with one line, the record's short error and where
    the record and the whole traceback are; no traceback on the terminal."""
    def broken(*args, **kwargs):
        raise RuntimeError("scoring exploded:\n  you tried to allocate 4000000000000 bytes")

    monkeypatch.setattr(bias_run, "evaluate", broken)
    spec = BiasSpec("tiny:bert", "winobias", limit=1)
    code = main(["bias", "--model", "tiny:bert", "--dataset", "winobias", "--limit", "1", "--data-root",
                 str(data_root), "--output", str(tmp_path), "--no-progress"])
    err = capsys.readouterr().err
    rid, store = spec.run_id(), RunStore(tmp_path)
    error = "RuntimeError: scoring exploded: you tried to allocate 4000000000000 bytes"
    assert code == 1 and store.get(rid)["error"] == error
    assert err.splitlines()[-1] == (f"vnr bias: run {rid} failed: {error} (record: {store.result_path(rid)}; "
                                    f"traceback: {tmp_path / 'logs' / (rid + '.log')})")
    assert "Traceback" not in err and "Traceback" in (tmp_path / "logs" / f"{rid}.log").read_text()


def test_stereoset_causal_scores_both_sections(tmp_path, data_root):
    record = run_bias(BiasSpec("tiny:gpt2", "stereoset", limit=6), tmp_path, data_root=data_root, progress=False)
    m = record["metrics"]
    for prefix in ("intrasentence", "intersentence", "overall"):
        assert {f"{prefix}_lms", f"{prefix}_ss", f"{prefix}_icat"} <= set(m)
        assert m[f"{prefix}_icat"] == pytest.approx(m[f"{prefix}_lms"] * min(m[f"{prefix}_ss"], 100 - m[f"{prefix}_ss"]) / 50)
    assert record["skipped"] == {} and record["n_examples"] == 12


def test_stereoset_masked_scores_both_sections(tmp_path, data_root):
    record = run_bias(BiasSpec("tiny:roberta", "stereoset", limit=5), tmp_path, data_root=data_root, progress=False)
    m = record["metrics"]
    assert {"intrasentence_icat", "intersentence_icat", "overall_icat"} <= set(m) and record["skipped"] == {}
    assert m["intersentence_icat"] == m["intersentence_likelihood_icat"] and "intersentence_nsp_icat" not in m
    assert "likelihood" in record["notes"]["intersentence_method"] and "next_sentence" not in record["scoring"]
    frame = pd.read_parquet(RunStore(tmp_path).artifact_path(record["run_id"], "examples.parquet"))
    assert len(frame) == 10 and frame["sentence_stereotype"].iloc[0] == "The chess player was asian."
    assert list(frame["section"].unique()) == ["intrasentence", "intersentence"]


def test_every_public_stereoset_candidate_fits_its_template(data_root):
    items = load_stereoset(data_root, sections=["intrasentence"])["intrasentence"]
    for it in items:
        for sentence in it.sentences.values():
            text, spans, ok = fill_in(it.context, sentence)
            assert ok, (it.context, sentence)
            assert text.lower() == sentence.lower() and all(b > a for a, b in spans)


def test_cli_runs_a_tiny_model(tmp_path, data_root, capsys):
    code = main(["bias", "--model", "tiny:distilbert", "--dataset", "crows_pairs", "--limit", "4", "--output",
                 str(tmp_path), "--data-root", str(data_root), "--batch-tokens", "256", "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0 and "anti_stereo_score=" in out and str(tmp_path) in out
    assert len(list((tmp_path / "runs").glob("*.json"))) == 1


@pytest.mark.parametrize("argv, message", [
    (["--model", "tiny:bert", "--dataset", "winogender"], "--dataset: unknown bias dataset 'winogender'"),
    (["--model", "tiny:bert", "--dataset", "winobias", "--limit", "0"], "--limit: 0 is below 1"),
    (["--model", "tiny:bert", "--dataset", "winobias", "--batch-tokens", "x"], "--batch-tokens: 'x' is not a whole number"),
    (["--model", "bert-huge", "--dataset", "winobias"], "model bert-huge is not in the local Hugging Face cache"),
    (["--model", "tiny:bert", "--dataset", "winobias", "--data-root", "/no/such/dir"], "not a directory"),
])
def test_cli_bad_input_exits_2_with_one_line(argv, message, tmp_path, capsys):
    try:
        code = main(["bias", *argv, "--output", str(tmp_path)])
    except SystemExit as exc:  # argparse errors
        code = exc.code
    err = capsys.readouterr().err.strip()
    assert code == 2 and message in err and len(err.splitlines()) == 1
