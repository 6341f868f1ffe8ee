"""Loaders for the benchbench and ranking_nlp leaderboards, and TABLE resolution."""

from __future__ import annotations

import numpy as np
import pytest

from ranking.floor.errors import UserError
from ranking.loading import load_table
from ranking.published import (
    BENCHBENCH,
    benchbench_kind,
    load_benchbench,
    load_instance_level,
    load_instance_table,
    load_ranking_nlp,
)


def test_glue_conventions(data_root):
    t = load_benchbench("glue", data_root)
    assert t.n_models == 87
    assert t.names == ("CoLA", "SST-2", "MRPC", "STS-B", "QQP", "QNLI", "RTE", "WNLI", "MNLI")
    first = t.frame().iloc[0]
    assert first["MRPC"] == pytest.approx((94.2 + 92.3) / 2)  # an a/b cell is its mean
    assert first["MNLI"] == pytest.approx((92.5 + 92.1) / 2)  # MNLI-m and -mm merged
    assert benchbench_kind("glue") == "cardinal" and benchbench_kind("helm/accuracy") == "ordinal"


def test_helm_missing_and_directions(data_root):
    t = load_benchbench("helm/calibration", data_root)
    assert all(c.direction == "lower" for c in t.criteria)  # ECE
    acc = load_benchbench("helm/accuracy", data_root)
    assert acc.has_missing and all(c.direction == "higher" for c in acc.criteria)
    heim = load_benchbench("heim/quality_auto", data_root)
    lower = [c.name for c in heim.criteria if c.direction == "lower"]
    assert lower and all("↓" in n for n in lower) and not any("[ sort ]" in n for n in heim.names)


def test_mteb_weights_and_vtab_index(data_root):
    mteb = load_benchbench("mteb", data_root)
    assert dict(zip(mteb.names, mteb.weights))["Retrieval"] == 15.0
    vtab = load_benchbench("vtab", data_root)
    assert vtab.models[0] == "Sup-Rotation-100%" and "Mean (selected datasets)" not in vtab.names
    assert vtab.n_criteria == 19


def test_every_benchbench_table_loads(data_root):
    for name in BENCHBENCH:
        if name == "imagenet":
            continue  # 112 × 1000: covered by the CLI / benchmark
        t = load_benchbench(name, data_root)
        assert t.n_models >= 10 and t.n_criteria >= 3, name


def test_ranking_nlp_tables(data_root):
    base = data_root / "leaderboards" / "ranking_nlp"
    glue = load_ranking_nlp(base / "glue.data")
    assert glue.models[0] == "Microsoft Alexander v-team Turing NLR v5"
    w = dict(zip(glue.names, glue.weights))
    assert w["AX"] == 0.0 and w["MRPC-a"] == 0.5 and w["CoLA"] == 1.0
    assert glue.frame().iloc[0]["CoLA"] == 72.6
    xtrem = load_ranking_nlp(base / "xtrem.data")  # 6 header names, 7 fields per row
    assert xtrem.names == ("Classification", "Structured Prediction", "Question Answering", "Sentence Retrieval")
    assert xtrem.frame().iloc[0].tolist() == [90.3, 81.7, 76.3, 93.7]


def test_instance_level_swaps_columns(data_root):
    f = load_instance_level(data_root / "leaderboards" / "ranking_nlp" / "instance_level" / "TAC_08.csv")
    assert list(f.columns) == ["system", "instance", "metric", "value"]
    assert f["system"].str.startswith("M").all()  # the files' Utterance column
    first = f[(f.metric == "H:pyr") & (f.system == "M1") & (f.instance == "0")]["value"].tolist()
    assert first == [0.316]


def test_table_resolution(data_root):
    assert load_table("benchbench/glue", data_root=data_root).n_models == 87
    assert load_table("benchbench/helm/accuracy", data_root=data_root).source == "benchbench/helm/accuracy"
    assert load_table(str(data_root / "leaderboards/benchbench/glue/leaderboard.tsv")).n_models == 87
    assert load_table("ranking_nlp/superglue.data", data_root=data_root).n_models == 24
    assert not np.isnan(load_instance_table("ranking_nlp/instance_level/FLICKR.csv", data_root)["value"]).all()
    with pytest.raises(UserError, match="not found"):
        load_table("benchbench/nope", data_root=data_root)
    with pytest.raises(UserError, match="instance"):
        load_table("ranking_nlp/instance_level/TAC_08.csv", data_root=data_root)
