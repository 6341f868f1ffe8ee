"""Bad input to the ranking commands: exit 2, exactly one line on stderr, no traceback, nothing written.

Each case runs ``python -m harness ...`` in a subprocess (the real entry point), in a
folder holding a few small inputs; the folder's files must be unchanged afterwards.
"""

from __future__ import annotations

import os
import subprocess
import sys
import traceback
from pathlib import Path

import pytest
from hang_bound import HANG_S

REPO = Path(__file__).resolve().parents[1]

GOOD_CSV = "model,acc,f1\nA,0.9,0.8\nB,0.7,0.9\nC,0.5,0.6\n"
GOOD_SIDECAR = "criteria:\n  acc: {direction: higher}\n  f1: {direction: higher}\n"
SCENARIO = (
    "groups:\n  g: {criteria: [acc]}\n  h: {criteria: [f1]}\n"
    "columns:\n  - {name: b, rule: borda, setting: weighted}\n"
)

FILES = {
    "good.csv": GOOD_CSV,
    "good.yaml": GOOD_SIDECAR,
    "scenario.yaml": SCENARIO,
    "blank_header.csv": "model,acc,,f1\nA,1,2,3\nB,2,3,4\n",
    "blank_header.yaml": "criteria: {acc: {direction: higher}, f1: {direction: higher}}\n",
    "no_model.csv": "model,acc\nA,1\n,2\n",
    "no_model.yaml": "criteria: {acc: {direction: higher}}\n",
    "inf.csv": "model,acc\nA,inf\nB,2\n",
    "inf.yaml": "criteria: {acc: {direction: higher}}\n",
    "text.csv": "model,acc\nA,high\nB,2\n",
    "text.yaml": "criteria: {acc: {direction: higher}}\n",
    "dup.csv": "model,acc,acc\nA,1,2\nB,2,3\n",
    "neg_weight.csv": GOOD_CSV,
    "neg_weight.yaml": "criteria:\n  acc: {direction: higher, weight: -1}\n  f1: {direction: higher}\n",
    "direction_up.csv": GOOD_CSV,
    "direction_up.yaml": "criteria:\n  acc: {direction: up}\n  f1: {direction: higher}\n",
    "zero.csv": "model,acc,f1\nA,0,0.8\nB,0.7,0.9\n",
    "zero.yaml": GOOD_SIDECAR,
    "lb.csv": "Model,acc,f1\nA,1,2\nB,2,3\n",
    "lb_neg.yaml": "file: {dir}/lb.csv\nmodel_column: Model\ncriteria: {{acc: {{weight: -1}}, f1: {{}}}}\n",
    "lb_nan.yaml": "file: {dir}/lb.csv\nmodel_column: Model\ncriteria: {{acc: {{weight: .nan}}, f1: {{}}}}\n",
    "lb_up.yaml": "file: {dir}/lb.csv\nmodel_column: Model\ncriteria: {{acc: {{direction: up}}, f1: {{}}}}\n",
    "lb_text_weight.yaml": "file: {dir}/lb.csv\nmodel_column: Model\ncriteria: {{acc: {{weight: abc}}, f1: {{}}}}\n",
    "lb_blank.csv": "Model,acc,\nA,1,2\nB,2,3\n",
    "lb_blank.yaml": "file: {dir}/lb_blank.csv\nmodel_column: Model\n",
    "lb_no_model.csv": "Model,acc\nA,1\n,2\n",
    "lb_no_model.yaml": "file: {dir}/lb_no_model.csv\nmodel_column: Model\n",
    "scenario_bad_preset.yaml": "preset: paper\n" + SCENARIO,
    "scenario_bad_gamma.yaml": "og_gamma: .nan\n" + SCENARIO,
    "scenario_num_groups.yaml": (
        "groups:\n  1: {criteria: [acc]}\n  2: {criteria: [f1]}\n"
        "columns:\n  - {name: b, rule: borda, group: 3}\n"
    ),
    "holes.csv": "model,acc,f1\nA,1,\nB,,2\n",
    "plain.csv": "model,a\nA,0\nB,1\n",  # no sidecar: read with a note, which must not precede the error
    "semicolon.csv": "model;acc\nA;1\nB;2\n",
    "short.csv": "model,acc,f1\nA,1\nB,2,3\n",
    "results.json": '{"model": "A", "acc": 0.5}',  # another tool's results: imported, not ranked
    "holes.yaml": GOOD_SIDECAR,
    "method_number.csv": GOOD_CSV,
    "method_number.yaml": "criteria:\n  acc: {direction: higher, method: 3}\n  f1: {direction: higher}\n",
    "broken_sidecar.csv": GOOD_CSV,
    "broken_sidecar.yaml": "criteria: [unclosed\n",
    "dup.yaml": "criteria: {acc: {direction: higher}}\n",
    "cost.csv": "model,acc,energy_kwh\nA,0.9,2.0\nB,0.7,1.0\n",
    "groups.csv": GOOD_CSV,
    "groups.yaml": "criteria:\n  acc: {direction: higher, group: g}\n  f1: {direction: higher, group: h}\n",
}

CASES = {
    # rank
    "rank missing file": ["rank", "nope.csv"],
    "rank blank header": ["rank", "blank_header.csv"],
    "rank empty model cell": ["rank", "no_model.csv"],
    "rank infinite score": ["rank", "inf.csv"],
    "rank text score": ["rank", "text.csv"],
    "rank duplicate column": ["rank", "dup.csv"],
    "rank negative weight": ["rank", "neg_weight.csv"],
    "rank direction up": ["rank", "direction_up.csv"],
    "rank unknown rule": ["rank", "good.csv", "--rule", "bordaa"],
    "rank geometric mean of 0": ["rank", "zero.csv", "--rule", "geometric_mean"],
    "rank og-gamma nan": ["rank", "good.csv", "--og-gamma", "nan"],
    "rank og-gamma inf": ["rank", "good.csv", "--og-gamma", "inf"],
    "rank og-gamma negative": ["rank", "good.csv", "--og-gamma", "-1"],
    "rank unknown preset": ["rank", "good.csv", "--preset", "paper"],
    "rank group weights basic": ["rank", "good.csv", "--group-weights", "g=1"],
    "rank group weights nan": ["rank", "good.csv", "--setting", "weighted", "--group-weights", "g=nan"],
    "rank weighted without groups": ["rank", "good.csv", "--setting", "weighted"],
    "rank leaderboard weight -1": ["rank", "lb_neg.yaml"],
    "rank leaderboard weight nan": ["rank", "lb_nan.yaml"],
    "rank leaderboard direction up": ["rank", "lb_up.yaml"],
    "rank leaderboard weight text": ["rank", "lb_text_weight.yaml"],
    "rank leaderboard blank header": ["rank", "lb_blank.yaml"],
    "rank leaderboard empty model": ["rank", "lb_no_model.yaml"],
    "rank scenario unknown preset": ["rank", "--scenario", "scenario_bad_preset.yaml", "--results", "good.csv"],
    "rank scenario og_gamma nan": ["rank", "--scenario", "scenario_bad_gamma.yaml", "--results", "good.csv"],
    "rank scenario unknown numeric group": ["rank", "--scenario", "scenario_num_groups.yaml", "--results", "good.csv"],
    "rank broken sidecar yaml": ["rank", "broken_sidecar.csv"],
    "rank scenario with --preset": ["rank", "--scenario", "scenario.yaml", "--results", "good.csv", "--preset", "votenrank"],
    "rank cost column without direction": ["rank", "cost.csv"],
    "rank --lower unknown column": ["rank", "good.csv", "--lower", "nope"],
    "rank every model incomplete under the preset": ["rank", "holes.csv", "--preset", "votenrank"],
    "rank --drop-incomplete with --keep-incomplete": ["rank", "good.csv", "--drop-incomplete", "--keep-incomplete"],
    "rank sidecar method not text": ["rank", "method_number.csv"],
    "rank note then error": ["rank", "plain.csv", "--rule", "geometric_mean"],
    "rank semicolon-separated": ["rank", "semicolon.csv"],
    "rank short row": ["rank", "short.csv"],
    "rank a JSON file": ["rank", "results.json"],
    "rank group weights miss a group": ["rank", "groups.csv", "--setting", "weighted", "--group-weights", "g=1"],
    # criteria init
    "criteria init not a csv": ["criteria", "init", "scenario.yaml"],
    "criteria init missing file": ["criteria", "init", "nope.csv"],
    "criteria init --lower unknown column": ["criteria", "init", "cost.csv", "--lower", "nope", "--print"],
    # prospective
    "prospective --higher unknown column": ["prospective", "good.csv", "--higher", "nope"],
    "prospective missing file": ["prospective", "nope.csv"],
    "prospective infinite score": ["prospective", "inf.csv"],
    "prospective unknown preset": ["prospective", "good.csv", "--preset", "paper"],
    "prospective leaderboard weight -1": ["prospective", "lb_neg.yaml"],
    "prospective every model incomplete under the preset": ["prospective", "holes.csv", "--preset", "votenrank"],
    # analyze
    "analyze kemeny tie-cost nan": ["analyze", "kemeny", "good.csv", "--tie-cost", "nan"],
    "analyze kemeny tie-cost inf": ["analyze", "kemeny", "good.csv", "--tie-cost", "inf"],
    "analyze kemeny tie-cost negative": ["analyze", "kemeny", "good.csv", "--tie-cost", "-1"],
    "analyze kemeny max-exact too big": ["analyze", "kemeny", "good.csv", "--max-exact", "30"],
    "analyze kemeny blank header": ["analyze", "kemeny", "blank_header.csv"],
    "analyze agreement unknown rule": ["analyze", "agreement", "good.csv", "--rules", "bordaa"],
    "analyze agreement bad k": ["analyze", "agreement", "good.csv", "-k", "0"],
    "analyze diversity direction up": ["analyze", "diversity", "direction_up.csv"],
    # report
    "report resolution too big": ["report", "--scenario", "scenario.yaml", "--results", "good.csv",
                                  "--out", "out", "--resolution", "100000"],
    "report resolution zero": ["report", "--scenario", "scenario.yaml", "--results", "good.csv",
                               "--out", "out", "--resolution", "0"],
    "report unknown preset": ["report", "--scenario", "scenario_bad_preset.yaml", "--results", "good.csv",
                              "--out", "out"],
    "report empty model cell": ["report", "--scenario", "scenario.yaml", "--results", "no_model.csv", "--out", "out"],
    # whatif
    "whatif unknown model": ["whatif", "--scenario", "scenario.yaml", "--results", "good.csv", "--model", "Z"],
    "whatif resolution too big": ["whatif", "--scenario", "scenario.yaml", "--results", "good.csv",
                                  "--model", "A", "--resolution", "100000"],
    "whatif og_gamma nan": ["whatif", "--scenario", "scenario_bad_gamma.yaml", "--results", "good.csv",
                            "--model", "A"],
}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad_inputs")
    for name, text in FILES.items():
        (d / name).write_text(text.replace("{dir}", str(d)).replace("{{", "{").replace("}}", "}"))
    return d


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


#: One case per command also runs as a real ``python -m harness`` subprocess; the others run in a forked
#: copy of this process (the same ``main`` and exit path, without paying the imports again).
REAL = {"rank leaderboard weight -1", "rank note then error", "prospective unknown preset", "analyze kemeny tie-cost nan",
        "report resolution too big", "whatif og_gamma nan"}


def _run_subprocess(argv: list[str], cwd: Path) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "VNR_DATA_ROOT": str(cwd)}
    proc = subprocess.run(
        [sys.executable, "-m", "harness", *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=HANG_S
    )
    return proc.returncode, proc.stderr


def _run_forked(argv: list[str], cwd: Path) -> tuple[int, str]:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: the CLI with stderr into the pipe; never returns into pytest
        code = 1
        try:
            os.close(read)
            os.dup2(write, 2)
            os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
            os.chdir(cwd)
            os.environ["VNR_DATA_ROOT"] = str(cwd)
            sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
            sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
            from harness.cli import main

            try:
                code = main(argv)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            except BaseException:
                traceback.print_exc()
                code = 1
            sys.stderr.flush()
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "r") as fh:
        err = fh.read()
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), err


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_exits_2_with_one_line(inputs, case):
    argv = CASES[case]
    before = _snapshot(inputs)
    code, stderr = (_run_subprocess if case in REAL else _run_forked)(argv, inputs)
    lines = stderr.strip().splitlines()
    assert code == 2, (code, stderr)
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    assert "error" in lines[0]
    assert _snapshot(inputs) == before  # nothing written (no report folder, no partial output)
