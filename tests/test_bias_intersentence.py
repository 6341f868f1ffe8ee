"""StereoSet intersentence for masked LMs: the likelihood method and the next-sentence head, each equal to a
plain one-forward-per-query loop; which one the headline uses in each mode; the agreement metric by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")

from harness.bias import run as bias_run  # noqa: E402
from harness.bias import run_bias  # noqa: E402
from harness.bias.data import STEREOSET_LABELS, load_stereoset  # noqa: E402
from harness.bias.evaluators import evaluate_stereoset  # noqa: E402
from harness.bias.intersentence import NextSentenceScorer, masked_candidate_log_likelihood  # noqa: E402
from harness.bias.metrics import stereoset_decision_agreement  # noqa: E402
from harness.bias.scoring import MaskedLMScorer  # noqa: E402
from harness.models import ModelError, load_model, load_next_sentence_model, resolve_model  # noqa: E402
from harness.specs import BiasSpec  # noqa: E402
from harness.store import RunStore  # noqa: E402

N_ITEMS = 10
TOL = 1e-4


@pytest.fixture(scope="module")
def items(data_root):
    return load_stereoset(data_root, N_ITEMS, sections=["intersentence"])["intersentence"]


@pytest.fixture(scope="module")
def pairs(items):
    """(context, candidate) per row, in the evaluator's order (item, then gold label)."""
    return [(it.context, it.sentences[label]) for it in items for label in STEREOSET_LABELS]


def _texts(items):
    return [t for it in items for t in (it.context, *it.sentences.values())]


@pytest.fixture(scope="module", params=["bert", "roberta"])
def masked(request, items):
    model, tokenizer, _ = load_model(f"tiny:{request.param}", "masked_lm", texts=_texts(items) * 2, seed=0)
    return request.param, model, tokenizer


@pytest.fixture(scope="module")
def bert(items):
    model, tokenizer, _ = load_model("tiny:bert", "masked_lm", texts=_texts(items) * 2, seed=0)
    nsp, why = load_next_sentence_model("tiny:bert", tokenizer=tokenizer, seed=0, encoder=model.base_model)
    assert why == ""
    return model, tokenizer, nsp


def loop_likelihood(model, tokenizer, context, candidate):
    """One forward per candidate token: that token and the later pieces of its word masked, context visible."""
    context, candidate = context.strip(), candidate.strip()
    text = f"{context} {candidate}"
    enc = tokenizer(text, return_offsets_mapping=True, return_special_tokens_mask=True)
    words = enc.word_ids()
    ids = torch.tensor([enc["input_ids"]])
    cand = [k for k, ((_, end), special) in enumerate(zip(enc["offset_mapping"], enc["special_tokens_mask"]))
            if not special and end > len(context)]
    total = 0.0
    with torch.no_grad():
        for j, p in enumerate(cand):
            x = ids.clone()
            x[0, [p, *(q for q in cand[j + 1:] if words[q] == words[p])]] = tokenizer.mask_token_id
            total += torch.log_softmax(model(input_ids=x).logits[0, p].float(), -1)[ids[0, p]].item()
    return total / len(cand), [int(ids[0, k]) for k in cand]


def test_likelihood_equals_the_loop(masked, pairs):
    family, model, tokenizer = masked
    scorer = MaskedLMScorer(model, tokenizer, batch_tokens=256, device="cpu")
    ours, n_tokens, whole_words = masked_candidate_log_likelihood(scorer, [c for c, _ in pairs], [x for _, x in pairs])
    assert whole_words and scorer.stats["forward_passes"] > 1
    for (context, candidate), got, n in zip(pairs, ours, n_tokens):
        want, cand_ids = loop_likelihood(model, tokenizer, context, candidate)
        assert got == pytest.approx(want, abs=TOL)
        # exactly the candidate's own tokens are scored (byte-level BPE: the candidate after its space)
        alone = tokenizer((" " if family == "roberta" else "") + candidate.strip(), add_special_tokens=False)
        assert cand_ids == alone["input_ids"] and n == len(cand_ids)


def test_next_sentence_equals_the_loop(bert, pairs):
    mlm, tokenizer, nsp = bert
    shared = dict(nsp.bert.named_parameters())
    assert all(torch.equal(p, shared[k]) for k, p in mlm.bert.named_parameters())  # one encoder, two heads
    ours = NextSentenceScorer(nsp, tokenizer, batch_tokens=256, device="cpu").log_p_next(
        [c for c, _ in pairs], [x for _, x in pairs])
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    for (context, candidate), got in zip(pairs, ours):
        a = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(context))  # as the published loader builds the pair
        b = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(candidate))
        ids = torch.tensor([[cls, *a, sep, *b, sep]])
        types = torch.tensor([[0] * (len(a) + 2) + [1] * (len(b) + 1)])
        with torch.no_grad():
            p_next = torch.softmax(nsp(input_ids=ids, token_type_ids=types).logits, dim=1)[0, 0].item()
        assert np.exp(got) == pytest.approx(p_next, abs=1e-6)


def _frame_scores(frame, prefix):
    return frame[[f"{prefix}_{label.replace('-', '_')}" for label in STEREOSET_LABELS]].to_numpy()


@pytest.mark.parametrize("mode", ["default", "reference"])
def test_headline_method_by_mode(bert, items, mode):
    mlm, tokenizer, nsp = bert
    scorer = MaskedLMScorer(mlm, tokenizer, device="cpu")
    scorer.next_sentence = NextSentenceScorer(nsp, tokenizer, device="cpu")
    result = evaluate_stereoset(scorer, {"intersentence": items}, mode)
    frame, m = result.frame, result.metrics
    used = "nsp" if mode == "reference" else "likelihood"
    np.testing.assert_array_equal(_frame_scores(frame, "score"), _frame_scores(frame, used))
    assert m["intersentence_icat"] == m[f"intersentence_{used}_icat"]
    assert {"intersentence_nsp_lms", "intersentence_likelihood_ss", "intersentence_method_agreement"} <= set(m)
    by_hand = stereoset_decision_agreement(
        frame.assign(**{f"score_{c}": frame[f"likelihood_{c}"] for c in ("stereotype", "anti_stereotype", "unrelated")}),
        frame.assign(**{f"score_{c}": frame[f"nsp_{c}"] for c in ("stereotype", "anti_stereotype", "unrelated")}))
    assert m["intersentence_method_agreement"] == by_hand["agreement"]
    assert f"from the {'next-sentence' if used == 'nsp' else 'likelihood'}" in result.notes["intersentence_method"]
    assert len(frame) == N_ITEMS and (frame["n_tokens_unrelated"] > 0).all()


@pytest.mark.parametrize("mode", ["default", "reference"])
def test_a_model_without_next_sentence_head_gets_the_likelihood(items, mode):
    model, tokenizer, _ = load_model("tiny:distilbert", "masked_lm", texts=_texts(items), seed=0)
    result = evaluate_stereoset(MaskedLMScorer(model, tokenizer, device="cpu"), {"intersentence": items}, mode)
    frame, m = result.frame, result.metrics
    np.testing.assert_array_equal(_frame_scores(frame, "score"), _frame_scores(frame, "likelihood"))
    assert not any(c.startswith("nsp_") for c in frame.columns) and "intersentence_nsp_icat" not in m
    assert m["intersentence_icat"] == m["intersentence_likelihood_icat"] and result.skipped == {}
    note = result.notes["intersentence_method"]
    assert "likelihood" in note and (("trained separately" in note) == (mode == "reference"))


def test_agreement_counted_by_hand():
    # item 1: both prefer stereotype over anti, both rank unrelated last -> 3 of 3 decisions agree
    # item 2: a ties stereotype with unrelated (no LMS win), b does not -> LMS 1 of 2; SS agrees
    # item 3: opposite SS decisions, LMS agree -> 2 of 3
    a = pd.DataFrame({"score_stereotype": [-1.0, -3.0, -1.0], "score_anti_stereotype": [-2.0, -1.0, -2.0],
                      "score_unrelated": [-5.0, -3.0, -9.0]})
    b = pd.DataFrame({"score_stereotype": [-0.1, -0.2, -0.3], "score_anti_stereotype": [-0.2, -0.1, -0.2],
                      "score_unrelated": [-0.9, -0.5, -0.9]})
    m = stereoset_decision_agreement(a, b)
    assert m["agreement_lms"] == pytest.approx(100 * 5 / 6)
    assert m["agreement_ss"] == pytest.approx(100 * 2 / 3)
    assert m["agreement"] == pytest.approx(100 * 7 / 9)
    with pytest.raises(ValueError, match="items"):
        stereoset_decision_agreement(a, b.iloc[:2])


def test_a_checkpoint_without_a_trained_head_is_not_scored_with_a_random_one(bert, tmp_path):
    """The loading info decides: a checkpoint saved from BertForMaskedLM lacks the pooler and the NSP head."""
    import transformers as tf

    mlm, tokenizer, nsp = bert
    mlm_only, full = tmp_path / "mlm_only", tmp_path / "pretraining"
    mlm.save_pretrained(mlm_only)
    pretraining = tf.BertForPreTraining(mlm.config)
    pretraining.bert.load_state_dict(nsp.bert.state_dict())
    pretraining.cls.seq_relationship.load_state_dict(nsp.cls.seq_relationship.state_dict())
    pretraining.save_pretrained(full)
    for folder in (mlm_only, full):
        tokenizer.save_pretrained(folder)
    model, why = load_next_sentence_model(str(mlm_only), tokenizer=tokenizer)
    assert model is None and "no trained next-sentence head" in why and "cls.seq_relationship.weight" in why
    model, why = load_next_sentence_model(str(full), tokenizer=tokenizer)
    assert why == "" and torch.equal(model.cls.seq_relationship.weight, nsp.cls.seq_relationship.weight)
    with pytest.raises(ModelError, match="not in the local Hugging Face cache"):  # offline, as load_model
        load_next_sentence_model("bert-large-cased", tokenizer=tokenizer)


def test_run_records_both_methods_and_loads_the_head_only_for_stereoset(tmp_path, data_root, monkeypatch):
    record = run_bias(BiasSpec("tiny:bert", "stereoset", limit=5), tmp_path, data_root=data_root, progress=False)
    m = record["metrics"]
    assert record["skipped"] == {} and {"intersentence_icat", "overall_icat", "intersentence_nsp_icat",
                                        "intersentence_method_agreement"} <= set(m)
    assert m["intersentence_icat"] == m["intersentence_likelihood_icat"]  # default mode: the likelihood headline
    nsp = record["scoring"]["next_sentence"]
    assert nsp["head"] == "random" and nsp["rows"] == 15 and "likelihood" in record["notes"]["intersentence_method"]
    frame = pd.read_parquet(RunStore(tmp_path).artifact_path(record["run_id"], "examples.parquet"))
    inter = frame[frame["section"] == "intersentence"]
    assert len(inter) == 5 and inter["nsp_unrelated"].notna().all() and (inter["nsp_unrelated"] <= 0).all()

    ref = run_bias(BiasSpec("tiny:bert", "stereoset", limit=3, scoring="reference"), tmp_path, data_root=data_root,
                   progress=False)
    assert ref["metrics"]["intersentence_icat"] == ref["metrics"]["intersentence_nsp_icat"]
    assert "P(is next)" in ref["scoring"]["method"]["stereoset_intersentence"]

    def refuse(*args, **kwargs):
        raise AssertionError("the next-sentence model is loaded for StereoSet only")

    monkeypatch.setattr("harness.models.load_next_sentence_model", refuse)
    other = run_bias(BiasSpec("tiny:bert", "winobias", limit=1), tmp_path, data_root=data_root, progress=False)
    assert other["status"] == "ok" and "next_sentence" not in other["scoring"]
    uses = {(model, dataset): bias_run._uses_next_sentence(BiasSpec(model, dataset), resolve_model(model))
            for model in ("tiny:bert", "tiny:roberta", "tiny:gpt2") for dataset in ("stereoset", "crows_pairs")}
    assert [k for k, v in uses.items() if v] == [("tiny:bert", "stereoset")]


def test_stereoset_runs_of_the_version_that_skipped_masked_intersentence_are_not_reused():
    spec = BiasSpec("tiny:bert", "stereoset")
    assert spec.identity()["dataset_version"] == 2
    assert "dataset_version" not in BiasSpec("tiny:bert", "crows_pairs").identity()  # other sets keep their ids
