"""README and the reference pages: README stays short, and every example runs as written.

README's `vnr` examples run top to bottom in a scratch folder (with `configs` linked in, outputs kept out of
the checkout), except those in ``README_NOT_RUN``, which train, download a model or submit to SLURM: those are
run with ``--dry-run`` where the command has it, else their flags are parsed by `vnr`'s own parser. The
ranking lines that read a grid's output get a stand-in collected folder. The reference pages' ranking and
configs examples run the same way; harness/README.md's are parsed (its `--dry-run` and `--sbatch-args` lines
run). No example calls a bare `python` (the system Python has no project): `.venv/bin/python`, or a Python
block that says so in its first line.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from hang_bound import HANG_S
from test_scenarios_util import write_results

from harness.cli import build_parser, main

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
PAGES = {name: REPO / name for name in ("README.md", "harness/README.md", "ranking/README.md", "configs/README.md")}
PYTHON_FIRST_LINE = "# .venv/bin/python from the repository root (or python after: source .venv/bin/activate)"

# README's examples that are not run as written, and why; "dry-run": run with --dry-run added, "parse": the
# flags are parsed by vnr's parser (no work is done)
README_NOT_RUN = {
    "vnr run configs/experiments/example_three_models.yaml": ("dry-run", "trains 21 runs (minutes on a CPU)"),
    "vnr collect configs/experiments/example_three_models.yaml": ("parse", "needs the grid's finished runs"),
    "vnr run configs/experiments/paper.yaml --executor slurm --partition gpu --time 24:00:00 --array-parallelism 16":
        ("dry-run", "submits a SLURM job array"),
    "vnr collect configs/experiments/paper.yaml --epoch best": ("parse", "needs the paper grid's 336 runs"),
    "vnr finetune --model roberta-base --task rte --seed 0 --output results/one":
        ("parse", "downloads roberta-base and fine-tunes it (a GPU)"),
    "vnr bias --model roberta-base --dataset crows_pairs --output results/one": ("parse", "downloads roberta-base"),
}
# folders a grid would have written, which ranking examples read: a stand-in collected matrix (3 seeds)
STAND_INS = ("results/example_three_models", "results/smoke")


def blocks(path: Path, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", path.read_text(), flags=re.S)


def commands(path: Path) -> list[str]:
    """Every command line of the page's bash blocks: continuations joined, comments dropped."""
    out = []
    for block in blocks(path, "bash"):
        text = re.sub(r"\\\n\s*", " ", block)
        for line in text.splitlines():
            words = shlex.split(line, comments=True)
            if words:
                out.append(shlex.join(words))
    return out


def _parse(argv: list[str]) -> None:
    try:
        build_parser(argv[0]).parse_args(argv)
    except SystemExit as exc:  # a usage error exits 2
        raise AssertionError(f"vnr {shlex.join(argv)}: its flags do not parse (exit {exc.code})") from None


def _run(argv: list[str], capsys) -> str:
    redirect = argv.index(">") if ">" in argv else None
    if redirect is not None:
        argv, target = argv[:redirect], argv[redirect + 1]
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 0, f"vnr {shlex.join(argv)}: exit {code}\n{captured.err[-2000:]}"
    if redirect is not None:
        Path(target).write_text(captured.out)
    return captured.out


@pytest.fixture
def scratch(tmp_path, monkeypatch, data_root):
    """A folder laid out like the checkout's root for the examples: configs linked in, a data root set, and
    the stand-in collected folders the ranking examples read."""
    (tmp_path / "configs").symlink_to(REPO / "configs")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("VNR_DATA_ROOT", str(data_root))
    for folder in STAND_INS:
        write_results(tmp_path / folder)
    return tmp_path


def test_readme_is_short_and_links_its_reference_pages():
    size = len(README.read_bytes())
    assert size < 25_000, f"README.md is {size} bytes: move detail to a reference page"
    text = README.read_text()
    for name, page in PAGES.items():
        assert page.is_file(), name
        if name != "README.md":
            assert f"]({name})" in text, f"README does not link {name}"
    # the two commands stay at the top, as CI runs them
    head = text[:text.index("## Your own models in 10 minutes")]
    assert "bash scripts/smoke.sh" in head and "bash scripts/test.sh" in head
    assert "scripts/test.sh --runslow" in (REPO / ".ci" / "run").read_text()


def test_no_example_calls_the_system_python():
    for name, page in PAGES.items():
        for cmd in commands(page):
            assert not cmd.startswith(("python ", "python3 ")), f"{name}: {cmd} (write .venv/bin/python)"
        for block in blocks(page, "python"):
            assert block.startswith(PYTHON_FIRST_LINE), f"{name}: a Python block that does not say which Python"
        prose = page.read_text()
        for code in re.findall(r"`(python[3]? [^`]*)`", prose):
            assert code.startswith("python -m harness.grid.entry CONFIG --index"), f"{name}: `{code}`"  # in sbatch


def test_readme_examples_run_as_written(scratch, capsys):
    cmds = commands(README)
    assert set(README_NOT_RUN) <= set(cmds), set(README_NOT_RUN) - set(cmds)  # the list names real lines
    ran = []
    for cmd in cmds:
        words = shlex.split(cmd)
        if words[0] == "export":
            assert words == ["export", "PATH=$PWD/scripts:$PATH"] and (REPO / "scripts" / "vnr").stat().st_mode & 0o111
            continue
        if words[0] == "bash":
            assert (REPO / words[1]).is_file()  # the two commands: tests/test_grid_smoke.py and CI run them
            continue
        assert words[0] == "vnr", cmd
        how = README_NOT_RUN.get(cmd, ("run", ""))[0]
        if how == "parse":
            _parse(words[1:])
        elif how == "dry-run":
            _run([*words[1:], "--dry-run"], capsys)
        else:
            _run(words[1:], capsys)
            ran.append(cmd)
    assert len(ran) >= 12  # the ranking path, the imports and the intervals
    assert (scratch / "results" / "example_three_models" / "report" / "report.html").is_file()
    assert (scratch / "results" / "reports" / "paper_case_study" / "report.html").is_file()


def test_readme_python_example_runs_with_the_checkouts_python():
    (python,) = blocks(README, "python")
    if not (REPO.parent / "shared" / "data").is_dir():
        pytest.skip("the example reads ../shared/data")
    done = subprocess.run([sys.executable, "-c", python], cwd=REPO, capture_output=True, text=True, timeout=HANG_S)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "borda_rank" in done.stdout and "copeland_rank" in done.stdout


@pytest.mark.parametrize("name", ["ranking/README.md", "configs/README.md"])
def test_reference_page_ranking_examples_run_as_written(name, scratch, capsys):
    cmds = commands(PAGES[name])
    assert cmds
    for cmd in cmds:
        words = shlex.split(cmd)
        assert words[0] == "vnr", f"{name}: {cmd}"
        _run(words[1:], capsys)


def test_harness_page_examples_parse(scratch, capsys):
    """They train, download or submit: each line's flags are parsed; the --dry-run and --sbatch-args lines run."""
    config = None
    seen = 0
    for cmd in commands(PAGES["harness/README.md"]):
        words = shlex.split(cmd)
        if words[0].startswith("CONFIG="):
            config = words[0].split("=", 1)[1]
            continue
        if words[0] == "sbatch":  # sbatch $(vnr run $CONFIG --sbatch-args ...) slurm/grid-array.sbatch $CONFIG
            inner = re.search(r"\$\((vnr [^)]*)\)", cmd.replace("'", "")).group(1).replace("$CONFIG", config)
            assert (REPO / "slurm" / "grid-array.sbatch").is_file()
            _run(shlex.split(inner)[1:], capsys)
            seen += 1
            continue
        if words[0] == ".venv/bin/python":
            done = subprocess.run([sys.executable, *words[1:]], capture_output=True, text=True, timeout=HANG_S)
            assert done.returncode == 0, done.stderr[-2000:]
            continue
        assert words[0] == "vnr", cmd
        _parse(words[1:])
        if "--dry-run" in words:
            _run(words[1:], capsys)
        seen += 1
    assert seen >= 10


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_links_between_the_pages_reach_a_heading():
    anchors = {}
    for name, page in PAGES.items():
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        anchors[name] = {_slug(h) for h in re.findall(r"^#+ (.*)$", text, flags=re.M)}
    for name, page in PAGES.items():
        for target, anchor in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]+))?\)", page.read_text()):
            if target.startswith("http"):
                continue
            path = (page.parent / target).resolve() if target else page
            assert path.exists(), f"{name}: link to {target}"
            if anchor:
                key = str(path.relative_to(REPO))
                assert anchor in anchors[key], f"{name}: #{anchor} is no heading of {key}"
