"""What a new user meets in the first hour: help texts, hints that can be pasted, analyses of the bundled
leaderboards, error prefixes, short outputs (issue #22)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from vnr_cli import vnr

from harness.cli import main

REPO = Path(__file__).resolve().parents[1]
LEADERBOARDS = sorted((REPO / "configs" / "leaderboards").glob("*.yaml"))


# ---------------------------------------------------------------------- analyze on every bundled leaderboard
@pytest.fixture
def leaderboard_data(data_root, monkeypatch):
    monkeypatch.setenv("VNR_DATA_ROOT", str(data_root))
    return data_root


#: every analysis that reads a leaderboard, with the fewest repetitions that still run it
ANALYSES = {
    "agreement": [],
    "iia": ["--repetitions", "2"],
    "missing": ["--repetitions", "2", "--n-missing", "1"],
    "diversity": [],
    "sensitivity": [],
    "kemeny": [],
}


@pytest.mark.parametrize("analysis", sorted(ANALYSES))
@pytest.mark.parametrize("spec", LEADERBOARDS, ids=lambda p: p.stem)
def test_every_analysis_runs_on_every_bundled_leaderboard(capsys, leaderboard_data, analysis, spec):
    code, out, err = vnr(capsys, "analyze", analysis, spec, "--format", "json", *ANALYSES[analysis])
    assert code == 0, err
    assert json.loads(out)
    assert "--preset" not in err  # analyze has no such flag, so no message may suggest it


def test_agreement_skips_the_geometric_mean_where_a_score_is_zero(capsys, leaderboard_data):
    # GLUE's CoLA column holds a 0 (Skip-Thought): the geometric mean is undefined, so it is left out, said so
    code, out, err = vnr(capsys, "analyze", "agreement", REPO / "configs/leaderboards/glue.yaml", "--format", "json")
    doc = json.loads(out)
    assert code == 0 and "geometric_mean" in doc["skipped"] and "'CoLA'" in doc["skipped"]["geometric_mean"]
    assert "geometric_mean" not in {row["rule"] for row in doc["rows"]}
    assert {"borda", "copeland", "optimality_gap"} <= {row["rule"] for row in doc["rows"]}
    assert "vnr analyze agreement: note: skipped geometric_mean" in err
    # named explicitly it is an error, naming the model and the criterion
    code, out, err = vnr(capsys, "analyze", "agreement", REPO / "configs/leaderboards/glue.yaml",
                         "--rules", "borda,geometric_mean")
    assert code == 2 and out == ""
    assert err.startswith("vnr analyze agreement: error: rule geometric_mean:") and "'Skip-Thought'" in err
    assert "--preset" not in err


def test_agreement_on_a_table_where_every_rule_applies_skips_nothing(capsys, leaderboard_data):
    code, out, _ = vnr(capsys, "analyze", "agreement", REPO / "configs/leaderboards/value.yaml", "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["skipped"] == {} and len(doc["rows"]) == 11


# ---------------------------------------------------------------------- errors name the sub-command
def test_errors_name_the_sub_command(capsys, tmp_path):
    code, _, err = vnr(capsys, "analyze", "kemeny", tmp_path / "none.csv")
    assert code == 2 and err.startswith("vnr analyze kemeny: error: cannot read")
    code, _, err = vnr(capsys, "analyze", "diversity", tmp_path / "none.csv", "--bogus")
    assert code == 2 and err == "vnr analyze diversity: error: unrecognized arguments: --bogus\n"
    code, _, err = vnr(capsys, "rank", tmp_path / "none.csv", "--bogus")
    assert code == 2 and err == "vnr rank: error: unrecognized arguments: --bogus\n"


# ---------------------------------------------------------------------- help texts
def test_bias_help_says_which_scoring_the_votenrank_preset_uses(capsys):
    with pytest.raises(SystemExit):
        main(["bias", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    scoring = text[text.index("--scoring {default,reference,votenrank} "):]
    reference = scoring[scoring.index("reference:"):scoring.index("votenrank:")]
    assert "preset" not in reference  # the preset scores with votenrank, not with the published scripts
    assert "votenrank preset" in scoring[scoring.index("votenrank:"):]


# ---------------------------------------------------------------------- hints that can be pasted
def test_follow_up_commands_keep_the_output_folder_and_selection():
    from harness.grid.cli import follow_up

    args = argparse.Namespace(config="configs/experiments/paper.yaml", output="/scratch/my results", only=None)
    assert follow_up("status", args) == "vnr status configs/experiments/paper.yaml --output '/scratch/my results'"
    args = argparse.Namespace(config="c.yaml", output=None, only=["bias", "roberta-base/*"])
    assert follow_up("run", args, "--list") == "vnr run c.yaml --only bias --only 'roberta-base/*' --list"


# ---------------------------------------------------------------------- prefetch offline: one message
def test_prefetch_offline_says_one_consistent_thing(capsys, tmp_path, monkeypatch, caplog):
    from huggingface_hub import constants

    import harness.models as models

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(models, "_hub_reachable", lambda: False)  # a node without internet
    code, out, err = vnr(capsys, "prefetch", REPO / "configs/experiments/paper.yaml", "--data-root", tmp_path)
    assert code == 2 and out == ""
    assert err.startswith("vnr prefetch: error: not on disk: model bert-base-uncased and ")
    assert "this machine is offline (the hub cannot be reached: no connection within" in err
    assert "working offline" not in err + caplog.text  # no warning that contradicts the error before it
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code, _, err = vnr(capsys, "prefetch", REPO / "configs/experiments/paper.yaml", "--data-root", tmp_path)
    assert code == 2 and "this machine is offline (HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE is set)" in err


# ---------------------------------------------------------------------- after the two commands
def _fake_checkout(tmp_path: Path, *, venv: bool) -> Path:
    """A checkout with scripts/vnr and (optionally) a .venv whose `vnr` prints its data root and arguments."""
    import shutil

    repo = tmp_path / "checkout"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy2(REPO / "scripts" / "vnr", repo / "scripts" / "vnr")
    (tmp_path / "shared" / "data").mkdir(parents=True)
    if venv:
        bin_dir = repo / ".venv" / "bin"
        bin_dir.mkdir(parents=True)
        (bin_dir / "vnr").write_text('#!/bin/sh\necho "root=$VNR_DATA_ROOT args=$*"\n')
        (bin_dir / "vnr").chmod(0o755)
    return repo


def test_the_wrapper_runs_the_checkouts_vnr_with_the_data_root(tmp_path):
    import os
    import subprocess

    repo = _fake_checkout(tmp_path, venv=True)
    env = {k: v for k, v in os.environ.items() if k != "VNR_DATA_ROOT"}
    done = subprocess.run([str(repo / "scripts" / "vnr"), "rank", "a b"], capture_output=True, text=True, env=env,
                          cwd=tmp_path, check=False)
    assert done.returncode == 0 and done.stdout == f"root={(tmp_path / 'shared' / 'data').resolve()} args=rank a b\n"
    done = subprocess.run([str(repo / "scripts" / "vnr"), "status"], capture_output=True, text=True,
                          env={**env, "VNR_DATA_ROOT": "/my/data"}, check=False)
    assert done.stdout == "root=/my/data args=status\n"  # a root the user set is kept


def test_the_wrapper_reached_through_a_symlink_finds_the_checkouts_venv(tmp_path):
    """~/bin/vnr -> <checkout>/scripts/vnr (absolute, relative, or a link to a link) runs the checkout's vnr."""
    import os
    import subprocess

    repo = _fake_checkout(tmp_path, venv=True)
    bin_dir = tmp_path / "home" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "vnr").symlink_to(repo / "scripts" / "vnr")
    (bin_dir / "vnr-rel").symlink_to(os.path.relpath(repo / "scripts" / "vnr", bin_dir))
    (bin_dir / "vnr-chain").symlink_to("vnr-rel")
    env = {k: v for k, v in os.environ.items() if k != "VNR_DATA_ROOT"}
    for link in ("vnr", "vnr-rel", "vnr-chain"):
        done = subprocess.run([str(bin_dir / link), "status"], capture_output=True, text=True, env=env,
                              cwd=tmp_path, check=False)
        assert done.returncode == 0, (link, done.stderr)
        assert done.stdout == f"root={(tmp_path / 'shared' / 'data').resolve()} args=status\n", link


def test_the_wrapper_without_a_venv_says_how_to_make_one(tmp_path):
    import subprocess

    repo = _fake_checkout(tmp_path, venv=False)
    done = subprocess.run([str(repo / "scripts" / "vnr"), "--help"], capture_output=True, text=True, check=False)
    assert done.returncode == 2 and "run 'bash scripts/smoke.sh' first" in done.stderr


def test_the_example_grid_is_three_models_and_runs_offline():
    from harness.grid.config import load_experiment
    from harness.models import resolve_model

    exp = load_experiment(REPO / "configs" / "experiments" / "example_three_models.yaml")
    assert exp.models == ("tiny:bert", "tiny:roberta", "tiny:gpt2")
    assert len(exp.specs) == 3 * 2 * 2 + 3 * 3  # models × tasks × seeds, then models × bias sets
    assert all(resolve_model(m).is_tiny for m in exp.models)  # nothing from a hub


def test_smoke_ends_by_saying_how_to_continue():
    text = (REPO / "scripts" / "smoke.sh").read_text()
    tail = text[text.rindex("\nfi\n"):]
    assert "scripts/vnr" in tail and "example_three_models.yaml" in tail and "Your own models in 10 minutes" in tail
    assert (REPO / "scripts" / "vnr").stat().st_mode & 0o111
    assert "## Your own models in 10 minutes" in (REPO / "README.md").read_text()


def test_report_says_what_it_is_doing_on_stderr(capsys, leaderboard_data, tmp_path):
    code, out, err = vnr(capsys, "report", "--scenario", REPO / "configs/scenarios/paper_case_study.yaml",
                         "--out", tmp_path / "report", "--resolution", "6")
    assert code == 0 and out.startswith(f"wrote {tmp_path / 'report' / 'report.html'}")
    assert "vnr report: weight-simplex maps of 2 column(s) at resolution 6 …" in err
    assert f"vnr report: rendering the report and its figures into {tmp_path / 'report'} …" in err


def test_status_of_the_paper_grid_needs_no_model_cache(tmp_path, capsys, monkeypatch):
    """`vnr status configs/experiments/paper.yaml` works offline without the models on disk, as `run --list`
    does: it reads the config and the run store; what the runs to do still need is one note, not an error."""
    import harness.models as models
    import harness.prefetch as prefetch

    monkeypatch.setattr(prefetch, "model_cached", lambda *a, **k: False)  # an empty model cache
    monkeypatch.setattr(models, "_hub_reachable", lambda: pytest.fail("status probed the hub"))
    config = REPO / "configs" / "experiments" / "paper.yaml"
    code, out, err = vnr(capsys, "status", config, "--output", tmp_path / "results", "--summary")
    assert code == 0, err
    assert out.strip().endswith("missing") and "0 done" in out
    assert err.startswith("note: not on disk yet (needed by the runs to do): model bert-base-uncased")
    assert f"vnr prefetch {config}" in err and len(err.strip().splitlines()) == 1
    code, out, _ = vnr(capsys, "status", config, "--output", tmp_path / "results", "--json")
    assert code == 0 and json.loads(out)["totals"]["done"] == 0
