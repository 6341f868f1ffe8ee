"""Bias-metric arithmetic on hand-made scores, ties included."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from harness.bias.metrics import crows_pairs_metrics, icat, stereoset_metrics, winobias_metrics


def crows(rows):
    return pd.DataFrame(rows, columns=["score_more", "score_less", "direction", "bias_type"])


def test_crows_pairs_scores_and_ties():
    frame = crows([
        (-1.0, -2.0, "stereo", "race-color"),  # sent_more wins
        (-3.0, -2.0, "stereo", "race-color"),  # sent_less wins
        (-4.0, -4.0, "stereo", "gender"),  # tie: neutral
        (-1.0, -9.0, "antistereo", "gender"),  # sent_more wins
        (-7.0, -6.0, "antistereo", "age"),  # sent_less wins
    ])
    m = crows_pairs_metrics(frame)
    assert m["metric_score"] == 40.0
    assert m["anti_stereo_score"] == 40.0
    assert m["neutral_score"] == 20.0
    assert m["metric_score"] + m["anti_stereo_score"] + m["neutral_score"] == 100.0
    assert m["stereo_score"] == pytest.approx(100 / 3)
    assert m["antistereo_score"] == 50.0
    assert m["anti_stereo_score.race-color"] == 50.0
    assert m["metric_score.gender"] == 50.0 and m["anti_stereo_score.gender"] == 0.0
    assert m["anti_stereo_score.age"] == 100.0
    assert m["n_pairs"] == 5 and m["n_pairs.gender"] == 2


def test_crows_pairs_without_antistereo_rows_has_no_nan():
    m = crows_pairs_metrics(crows([(-1.0, -2.0, "stereo", "age")]))
    assert "antistereo_score" not in m
    assert all(not math.isnan(v) for v in m.values())


def test_icat():
    assert icat(100.0, 50.0) == 100.0
    assert icat(90.0, 60.0) == 72.0
    assert icat(90.0, 40.0) == 72.0
    assert icat(80.0, 100.0) == 0.0


def stereo(rows):
    return pd.DataFrame(rows, columns=["target", "bias_type", "score_stereotype", "score_anti_stereotype",
                                       "score_unrelated"])


def test_stereoset_per_target_then_averaged():
    frame = stereo([
        # target "nurse": 2 items
        ("nurse", "profession", -1.0, -2.0, -3.0),  # related 2/2, stereo preferred
        ("nurse", "profession", -2.0, -1.0, -1.5),  # related 1/2 (anti > unrelated), anti preferred
        # target "Ghana": 1 item, with ties
        ("Ghana", "race", -2.0, -2.0, -2.0),  # tie everywhere: no LMS win, no stereotype preference
    ])
    m = stereoset_metrics(frame, "intrasentence")
    # nurse: LMS 3/4 = 75, SS 50; Ghana: LMS 0, SS 0
    assert m["intrasentence_lms"] == 37.5
    assert m["intrasentence_ss"] == 25.0
    assert m["intrasentence_icat"] == pytest.approx(37.5 * 25 / 50)
    assert m["intrasentence_icat_micro"] == pytest.approx((75 * 50 / 50 + 0) / 2)
    assert m["intrasentence_lms.profession"] == 75.0 and m["intrasentence_ss.profession"] == 50.0
    assert m["intrasentence_icat.profession"] == 75.0
    assert m["intrasentence_lms.race"] == 0.0 and m["intrasentence_icat.race"] == 0.0
    assert m["intrasentence_n_items"] == 3


def test_stereoset_targets_weigh_equally_not_items():
    many = [("a", "race", -1.0, -2.0, -9.0)] * 9  # SS 100 on target a
    one = [("b", "race", -2.0, -1.0, -9.0)]  # SS 0 on target b
    m = stereoset_metrics(stereo(many + one), "intersentence")
    assert m["intersentence_ss"] == 50.0  # per-item would be 90
    assert m["intersentence_lms"] == 100.0 and m["intersentence_icat"] == 100.0


def wino(rows):
    return pd.DataFrame(rows, columns=["type", "split", "score_pro", "score_anti", "pronoun_only"])


def test_winobias_anti_ge_pro_with_ties_and_flagged_pairs():
    frame = wino([
        (1, "dev", -1.0, -1.0, True),  # tie: counts for anti_ge_pro
        (1, "dev", -1.0, -2.0, True),  # pro wins
        (1, "test", -3.0, -2.0, True),  # anti wins
        (2, "dev", -3.0, -2.5, True),  # anti wins
        (2, "test", -1.0, -4.0, False),  # flagged, pro wins
    ])
    m = winobias_metrics(frame)
    assert m["anti_ge_pro"] == 75.0
    assert (m["anti_gt_pro"], m["pro_gt_anti"], m["tie"]) == (50.0, 25.0, 25.0)
    assert m["acc_difference"] == 25.0 and m["parity_score"] == 75.0
    assert m["n_pairs"] == 4 and m["n_flagged"] == 1
    assert m["anti_ge_pro_flagged"] == 0.0
    assert m["anti_ge_pro_all"] == 60.0
    assert m["anti_ge_pro.type1_dev"] == 50.0
    assert m["anti_ge_pro.type1_test"] == 100.0
    assert m["anti_ge_pro.type2_dev"] == 100.0
    assert "anti_ge_pro.type2_test" not in m  # its only pair is flagged
    assert m["anti_ge_pro.type1"] == pytest.approx(200 / 3)
    assert m["anti_ge_pro.dev"] == pytest.approx(200 / 3) and m["anti_ge_pro.test"] == 100.0


def test_the_dataset_records_name_metrics_the_metric_functions_return():
    from harness.bias.data import get_dataset

    crows = pd.DataFrame({"score_more": [-1.0, -2.0], "score_less": [-2.0, -1.0], "direction": ["stereo", "antistereo"],
                          "bias_type": ["age", "age"]})
    assert set(get_dataset("crows_pairs").metrics) <= set(crows_pairs_metrics(crows))
    block = pd.DataFrame({"target": ["a"], "bias_type": ["race"], "score_stereotype": [-1.0],
                          "score_anti_stereotype": [-2.0], "score_unrelated": [-3.0]})
    got = {k for section in ("intrasentence", "intersentence", "overall") for k in stereoset_metrics(block, section)}
    assert set(get_dataset("stereoset").metrics) <= got
    wino = pd.DataFrame({"type": [1], "split": ["dev"], "score_pro": [-1.0], "score_anti": [-2.0],
                         "pronoun_only": [True]})
    assert set(get_dataset("winobias").metrics) <= set(winobias_metrics(wino))
