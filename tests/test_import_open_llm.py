"""The Open LLM Leaderboard importer on the structures of the real published tables (issue #27).

The fixtures copy the STRUCTURE of the real exports (written here, never copied): the v2 table
``open-llm-leaderboard/contents`` as its CSV export (a leading unnamed index column, the HTML ``Model``
column, ``<benchmark> Raw`` beside each normalised score, float16 and bfloat16 rows of one model submitted
the same day, ``#Params (B)`` of 0 and of -1 for "unknown"), and the archived v1 table
``open-llm-leaderboard-old/contents`` (percent scores, a ``date`` column instead of ``Submission Date``).
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import numpy as np
import pytest

import ranking
from harness.cli import main
from ranking.boards import board_scores
from ranking.floor.errors import UserError
from ranking.importers import open_llm
from ranking.importers.common import Options

V2_COLUMNS = [
    "", "eval_name", "Precision", "Type", "T", "Weight type", "Architecture", "Model", "fullname", "Model sha",
    "Average ⬆️", "Hub License", "Hub ❤️", "#Params (B)", "Available on the hub", "MoE", "Flagged", "Chat Template",
    "CO₂ cost (kg)", "IFEval Raw", "IFEval", "BBH Raw", "BBH", "MATH Lvl 5 Raw", "MATH Lvl 5", "GPQA Raw", "GPQA",
    "MUSR Raw", "MUSR", "MMLU-PRO Raw", "MMLU-PRO", "Merged", "Official Providers", "Upload To Hub Date",
    "Submission Date", "Generation", "Base Model",
]
V1_COLUMNS = [
    "eval_name", "Precision", "Type", "T", "Weight type", "Architecture", "Model", "fullname", "Model sha",
    "Average ⬆️", "Hub License", "Hub ❤️", "#Params (B)", "Available on the hub", "Merged", "MoE", "Flagged", "date",
    "Chat Template", "ARC", "HellaSwag", "MMLU", "TruthfulQA", "Winogrande", "GSM8K", "Maintainers Choice",
]
#: v2 benchmark → (random baseline of the raw score, as the normalisation subtracts it).
BASELINES = {"IFEval": 0.0, "BBH": 0.25, "MATH Lvl 5": 0.0, "GPQA": 0.25, "MUSR": 0.33, "MMLU-PRO": 0.1}


def normalised(raw: float, baseline: float) -> float:
    """The leaderboard's normalisation: below the baseline is 0, else rescaled to 0-100."""
    return 0.0 if raw < baseline else (raw - baseline) / (1 - baseline) * 100


def v2_row(index: int, fullname: str, precision: str, raws: list[float], params: float, co2: float,
           date: str = "2024-06-12") -> dict:
    row = {c: "" for c in V2_COLUMNS}
    scores = {b: normalised(r, base) for (b, base), r in zip(BASELINES.items(), raws)}
    row.update({f"{b} Raw": r for b, r in zip(BASELINES, raws)})
    row.update(scores)
    row.update({
        "": index, "eval_name": f"{fullname.replace('/', '_')}_{precision}", "Precision": precision,
        "Type": "🟢 pretrained", "T": "🟢", "Weight type": "Original", "Architecture": "LlamaForCausalLM",
        "Model": f'<a target="_blank" href="https://huggingface.co/{fullname}">{fullname}</a>  <a href="x">📑</a>',
        "fullname": fullname, "Model sha": "4b486f81c935a2dadde84c6baa1e1370d40a098f",
        "Average ⬆️": sum(scores.values()) / 6, "Hub License": "apache-2.0", "Hub ❤️": 47, "#Params (B)": params,
        "Available on the hub": True, "MoE": False, "Flagged": False, "Chat Template": False, "CO₂ cost (kg)": co2,
        "Merged": False, "Official Providers": True, "Upload To Hub Date": "2024-05-11", "Submission Date": date,
        "Generation": 0, "Base Model": fullname,
    })
    return row


def write_rows(path: Path, columns: list[str], rows: list[dict]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=columns)
        w.writeheader()
        w.writerows(rows)
    return path


@pytest.fixture
def v2_table(tmp_path) -> Path:
    return write_rows(tmp_path / "open_llm_leaderboard.csv", V2_COLUMNS, [
        v2_row(0, "01-ai/Yi-1.5-34B", "bfloat16", [0.28, 0.60, 0.15, 0.37, 0.42, 0.47], 34.389, 11.35),
        # one model in two precisions, submitted the same day: two entries of the board
        v2_row(1, "AtAndDev/Qwen2.5-1.5B", "float16", [0.31, 0.42, 0.09, 0.28, 0.37, 0.28], 1.544, 1.2),
        v2_row(2, "AtAndDev/Qwen2.5-1.5B", "bfloat16", [0.30, 0.43, 0.08, 0.29, 0.36, 0.28], 1.544, 1.3),
        # "unknown" parameter counts: 0 and -1, as the real table writes them
        v2_row(3, "google/gemma-2-2b", "float16", [0.20, 0.36, 0.03, 0.26, 0.42, 0.22], 0.0, 2.5),
        v2_row(4, "google/umt5-base", "float16", [0.17, 0.29, 0.0, 0.24, 0.34, 0.11], -1.0, 0.4),
    ])


def read(paths: list[Path], notes: list[str] | None = None, **options: object):
    return open_llm.read(paths, Options(sink=(notes if notes is not None else []).append, **options))


def test_v2_identity_is_fullname_and_precision(v2_table):
    notes: list[str] = []
    table = read([v2_table], notes)
    assert table.models == ("01-ai/Yi-1.5-34B", "AtAndDev/Qwen2.5-1.5B (float16)", "AtAndDev/Qwen2.5-1.5B (bfloat16)",
                            "google/gemma-2-2b", "google/umt5-base")
    assert ("open-llm-leaderboard: 1 model(s) are listed in several precisions, each one its own entry as on the "
            "board (named 'MODEL (PRECISION)'): AtAndDev/Qwen2.5-1.5B") in notes
    j = table.names.index("BBH Raw")
    assert table.values[1, j] == 0.42 and table.values[2, j] == 0.43


def test_params_placeholders_are_missing_with_one_note(v2_table):
    notes: list[str] = []
    table = read([v2_table], notes)
    j = table.names.index("#Params (B)")
    assert np.isnan(table.values[3:, j]).all() and table.values[0, j] == 34.389
    placeholder = [n for n in notes if "'#Params (B)' is 0 or -1" in n]
    assert placeholder == ["open-llm-leaderboard: '#Params (B)' is 0 or -1 (the leaderboard's 'unknown') for 2 row(s), "
                           "left missing: google/gemma-2-2b, google/umt5-base"]


def test_each_benchmark_is_one_criterion_with_its_raw_score_as_detail(v2_table):
    table = read([v2_table])
    by_name = {c.name: c for c in table.criteria}
    bbh, raw, co2 = by_name["BBH"], by_name["BBH Raw"], by_name["CO₂ cost (kg)"]
    assert (bbh.benchmark, bbh.task, bbh.metric, dict(bbh.settings), bbh.range, bbh.detail) == (
        "BBH", "BBH", "normalized score", {"n_shot": 3, "leaderboard": "v2"}, (0.0, 100.0), False)
    assert (raw.benchmark, raw.metric, raw.range, raw.detail) == ("BBH", "raw score", (0.0, 1.0), True)
    assert (co2.benchmark, co2.direction, co2.group, co2.range) == ("CO₂ cost (kg)", "lower", "efficiency",
                                                                          (0.0, None))
    voting = [c.name for c in table.criteria if not c.detail]
    assert voting == ["#Params (B)", "CO₂ cost (kg)", "IFEval", "BBH", "MATH Lvl 5", "GPQA", "MUSR", "MMLU-PRO"]


def test_board_parity_with_the_average_the_file_carries(v2_table):
    table = read([v2_table])
    with open(v2_table, encoding="utf-8") as fh:
        published = [float(r["Average ⬆️"]) for r in csv.DictReader(fh)]
    np.testing.assert_allclose(open_llm.board_scores(table), published, rtol=0, atol=1e-12)


def test_a_row_whose_average_is_not_the_mean_is_named(tmp_path):
    row = v2_row(0, "org/a", "bfloat16", [0.5] * 6, 7.0, 1.0)
    row["Average ⬆️"] = 99.0
    notes: list[str] = []
    read([write_rows(tmp_path / "c.csv", V2_COLUMNS, [row])], notes)
    assert any(n.startswith("open-llm-leaderboard: 1 row(s) carry an 'Average ⬆️' that is not the mean") for n in notes)


@pytest.mark.parametrize("column, value, shown", [
    ("BBH", 150.0, "150"), ("GPQA Raw", 1.2, "1.2"), ("CO₂ cost (kg)", -0.5, "-0.5"), ("#Params (B)", -7.0, "-7"),
])
def test_impossible_values_are_refused_or_missing(tmp_path, column, value, shown):
    row = v2_row(0, "org/a", "bfloat16", [0.5] * 6, 7.0, 1.0)
    row[column] = value
    other = v2_row(1, "org/b", "bfloat16", [0.6] * 6, 8.0, 1.0)
    path = write_rows(tmp_path / "c.csv", V2_COLUMNS, [row, other])
    with pytest.raises(UserError, match=rf"line 2, model 'org/a', column '{re.escape(column)}'.*{re.escape(shown)}.*--out-of-range missing"):
        read([path])
    table = read([path], out_of_range="missing")
    assert np.isnan(table.values[0, table.names.index(column)])
    assert not np.isnan(table.values[1, table.names.index(column)])


def test_the_real_normalisation_never_goes_below_zero():
    """A raw score below the random baseline is 0, not negative (the board's documented normalisation)."""
    assert normalised(0.2, 0.25) == 0.0 and open_llm.V2["GPQA"].lo == 0.0


def test_v1_export_reads_with_its_date_column_and_parity(tmp_path):
    def row(fullname: str, precision: str, scores: list[float], params: float, date: str) -> dict:
        r = {c: "" for c in V1_COLUMNS}
        r.update(dict(zip(["ARC", "HellaSwag", "MMLU", "TruthfulQA", "Winogrande", "GSM8K"], scores)))
        r.update({"eval_name": f"{fullname.replace('/', '_')}_{precision}", "Precision": precision,
                  "fullname": fullname, "Average ⬆️": sum(scores) / 6, "#Params (B)": params, "date": date,
                  "Type": "pretrained", "T": "🟢", "Model": f"<a href='x'>{fullname}</a>", "Flagged": False})
        return r
    path = write_rows(tmp_path / "v1.csv", V1_COLUMNS, [
        row("EleutherAI/pythia-12b", "float16", [39.6, 68.8, 26.8, 31.8, 64.2, 1.7], 12.0, "2023-09-09T10:52:17Z"),
        row("EleutherAI/pythia-12b", "float16", [39.7, 68.8, 26.8, 31.8, 64.2, 1.7], 12.0, "2023-10-01T10:52:17Z"),
        row("tiiuae/falcon-7b", "bfloat16", [47.9, 78.1, 27.8, 34.3, 72.4, 4.6], 0.0, "2023-09-09T10:52:17Z"),
    ])
    notes: list[str] = []
    table = read([path], notes)
    assert table.models == ("EleutherAI/pythia-12b", "tiiuae/falcon-7b")
    assert table.values[0, table.names.index("ARC")] == 39.7  # the newest `date`
    assert any("appears 2 times: kept the newest (" in n for n in notes)
    arc = table.criteria[table.names.index("ARC")]
    assert (arc.benchmark, arc.metric, dict(arc.settings), arc.unit) == ("ARC", "acc_norm", {"n_shot": 25, "leaderboard": "v1"},
                                                                  "score (0-100)")
    np.testing.assert_allclose(open_llm.board_scores(table), [sum([39.7, 68.8, 26.8, 31.8, 64.2, 1.7]) / 6,
                                                              sum([47.9, 78.1, 27.8, 34.3, 72.4, 4.6]) / 6])
    assert np.isnan(table.values[1, table.names.index("#Params (B)")])


def test_eval_name_alone_is_the_key(tmp_path):
    path = tmp_path / "c.csv"
    path.write_text("eval_name,Precision,IFEval,BBH\norg_a_float16,float16,40,30\norg_a_bfloat16,bfloat16,41,31\n")
    assert read([path]).models == ("org_a_float16", "org_a_bfloat16")


SAMPLES = Path(__file__).resolve().parents[1] / "configs" / "import_samples" / "open-llm-leaderboard"


def test_the_readme_example_imports_the_shipped_sample_and_ranks(tmp_path, capsys):
    out = tmp_path / "results" / "imported" / "open-llm-leaderboard"
    code = main(["import", "open-llm-leaderboard", str(SAMPLES / "contents_v2.csv"), "-o", str(out)])
    _, err = capsys.readouterr()
    assert code == 0, err
    table = ranking.load_table(out)
    assert "demo-org/tiny-chat (bfloat16)" in table.models and "demo-org/tiny-chat (float16)" in table.models
    assert table.board == "open-llm-leaderboard"
    with open(SAMPLES / "contents_v2.csv", encoding="utf-8") as fh:
        published = {(r["fullname"], r["Precision"]): float(r["Average ⬆️"]) for r in csv.DictReader(fh)}
    expected = [published["demo-org/base-7b", "bfloat16"], published["demo-org/tiny-chat", "bfloat16"],
                published["demo-org/tiny-chat", "float16"], published["demo-org/mystery-3b", "bfloat16"]]
    assert table.models == ("demo-org/base-7b", "demo-org/tiny-chat (bfloat16)", "demo-org/tiny-chat (float16)",
                            "demo-org/mystery-3b")
    np.testing.assert_allclose(board_scores(table), expected, rtol=0, atol=1e-9)  # the board's own Average, rounded
    assert main(["rank", str(out), "--board"]) == 0
    printed = capsys.readouterr().out
    assert "demo-org/tiny-chat (bfloat16)" in printed and "votes: one per benchmark (8 benchmarks from 14 columns" in printed


# ---------------------------------------------------------------------- issue 36: the table as its page shows it
def test_the_page_table_reads_with_its_model_column_units_and_repeated_rows(tmp_path, capsys):
    """The board's page (v2 and v1) copied as a table: 'Model' (a link), 'Average', scores as '6.51 %', CO₂ as
    '0.09 kg', parameters as '7.24 B', one row listed twice; --board equals the page's own Average."""
    v2 = tmp_path / "page_v2.csv"
    head = ["T", "Model", "Average", "IFEval", "BBH", "MATH Lvl 5", "GPQA", "MUSR", "MMLU-PRO", "Type", "Precision",
            "#Params (B)", "CO₂ cost (kg)"]
    rows = {"org/a-7b": [60.2, 30.1, 10.0, 5.5, 8.25, 28.0, "7.24 B", "0.09 kg"],
            "org/b-1b": [25.0, 6.51, 1.2, 0.0, 2.4, 3.5, "1.1 B", "0.02 kg"]}
    with open(v2, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(head)
        for name, values in [*rows.items(), ("org/a-7b", rows["org/a-7b"])]:
            scores = values[:6]
            w.writerow(["🟢", f"[{name}](https://huggingface.co/{name})", f"{np.mean(scores):.2f} %",
                        *(f"{x} %" for x in scores), "🟢 pretrained", "bfloat16", *values[6:]])
    notes: list[str] = []
    table = ranking.load_table(v2, format="open-llm-leaderboard", note=notes.append)
    assert table.models == ("org/a-7b", "org/b-1b")
    assert table.values[1, table.names.index("BBH")] == 6.51
    assert table.values[0, table.names.index("CO₂ cost (kg)")] == 0.09
    assert table.values[0, table.names.index("#Params (B)")] == 7.24
    np.testing.assert_allclose(board_scores(table), [round(np.mean(v[:6]), 2) for v in rows.values()], atol=0.005)
    assert any("listed in identical rows, read once: org/a-7b (2 rows)" in n for n in notes)
    v1 = tmp_path / "page_v1.csv"
    v1.write_text("T,Model,Average,ARC,HellaSwag,MMLU,TruthfulQA,Winogrande,GSM8K\n"
                  "🔶,org/c,70.5,70 %,80 %,60 %,55 %,80 %,78 %\n🟢,org/d,50.0,50,60,40,45,60,45\n")
    table = ranking.load_table(v1, format="open-llm-leaderboard", note=None)
    np.testing.assert_allclose(board_scores(table), [70.5, 50.0])
