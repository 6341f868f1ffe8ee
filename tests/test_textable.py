"""The one terminal table formatter: exact layout, fitting to a width, legend, key and --wide."""

from __future__ import annotations

import pytest

from ranking.textable import TextTable, number, render


def test_small_table_exact_layout_with_title_and_legend():
    t = TextTable(["model", "score", "rank"], [["B", 9.0, 1.0], ["A", 6.5, 2.0], ["C", float("nan"), None]],
                  title="sorted by rank", legend="–: not ranked")
    assert render(t).splitlines() == [
        "sorted by rank",
        "model  score  rank",
        "B          9     1",
        "A        6.5     2",
        "C          –     –",
        "–: not ranked",
    ]


def test_spans_label_groups_of_columns():
    t = TextTable(["model", "score", "rank", "score", "rank"], [["A", 1, 2, 3, 4]],
                  spans=["", "borda", "borda", "copeland", "copeland"])
    assert render(t).splitlines() == [
        "       borda        copeland",
        "model  score  rank  score  rank",
        "A          1     2      3     4",
    ]


def test_wrapping_repeats_the_index_column_and_never_splits_a_span():
    t = TextTable(["#", "a", "b", "c", "d"], [[1, "x" * 10, "y" * 10, "z" * 10, "w" * 10]],
                  spans=["", "p", "p", "q", "q"], legend="L")
    lines = render(t, width=30).splitlines()
    assert lines == [
        "   p",
        "#  a           b",
        "1  xxxxxxxxxx  yyyyyyyyyy",
        "",
        "   q",
        "#  c           d",
        "1  zzzzzzzzzz  wwwwwwwwww",
        "L",
    ]
    assert all(len(line) <= 30 for line in lines)
    assert render(t, width=30, wide=True).splitlines()[1] == "#  a           b           c           d"


def test_long_names_are_shortened_with_a_key_only_when_the_table_does_not_fit():
    long = "a-model-name-that-is-far-too-long-for-a-column"
    t = TextTable(["model", "v"], [[long, 1.0], ["short", 2.0]], legend="legend")
    assert render(t, width=120).splitlines()[1].startswith(long)  # it fits: nothing shortened
    lines = render(t, width=40).splitlines()
    assert lines == [
        "model                     v",
        "a-model-name-that-is…[1]  1",
        "short                     2",
        "legend",
        f"[1] {long}",
    ]
    assert long in render(t, width=40, wide=True)


def test_a_last_column_too_wide_for_any_block_is_cut_with_a_note():
    t = TextTable(["state", "detail"], [["failed", "E" * 200]], name_columns=())
    lines = render(t, width=60).splitlines()
    assert lines[1] == "failed  " + "E" * 51 + "…"
    assert lines[2] == "(long cells cut with … to fit 60 columns; --wide shows them in full)"
    assert render(t, width=60, wide=True).splitlines()[1] == "failed  " + "E" * 200


@pytest.mark.parametrize("value, text", [
    (3.0, "3"), (-2, "-2"), (82.7153, "82.72"), (0.123456, "0.1235"), (1234.56, "1235"), (-0.0913512, "-0.09135"),
    (1.5e-6, "1.5e-06"), (float("nan"), "–"), (None, "–"), (float("inf"), "inf"),
])
def test_one_number_formatter(value, text):
    assert number(value) == text


@pytest.mark.parametrize("name", ["ranking.textable", "ranking.scenarios.live", "ranking.scenarios.report",
                                  "ranking.scenarios.plots"])
def test_docstring_examples(name):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
