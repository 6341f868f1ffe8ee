"""Shared-token alignment for CrowS-Pairs on hand-made pairs."""

from __future__ import annotations

from harness.bias.align import shared_token_positions


def test_one_substituted_token():
    # [CLS] the poor are ignorant [SEP] vs [CLS] the rich are ignorant [SEP]
    a = [101, 5, 50, 7, 8, 102]
    b = [101, 5, 60, 7, 8, 102]
    assert shared_token_positions(a, b, {0, 5}, {0, 5}) == ([1, 3, 4], [1, 3, 4])


def test_substitution_of_different_lengths_shifts_positions():
    # "the african american man" (2 pieces for the group) vs "the white man"
    a = [101, 5, 70, 71, 9, 102]
    b = [101, 5, 80, 9, 102]
    pa, pb = shared_token_positions(a, b, {0, 5}, {0, 4})
    assert (pa, pb) == ([1, 4], [1, 3])
    assert [a[i] for i in pa] == [b[j] for j in pb]


def test_specials_are_never_scored_and_unk_is():
    unk = 100
    a = [101, unk, 5, 6, 102]
    b = [101, unk, 5, 7, 102]
    assert shared_token_positions(a, b, {0, 4}, {0, 4}) == ([1, 2], [1, 2])
    # without skip sets every equal token counts
    assert shared_token_positions(a, b) == ([0, 1, 2, 4], [0, 1, 2, 4])


def test_several_differences_and_repeated_tokens():
    a = [1, 2, 3, 2, 4, 5]
    b = [1, 9, 3, 2, 4, 8, 5]
    pa, pb = shared_token_positions(a, b)
    assert (pa, pb) == ([0, 2, 3, 4, 5], [0, 2, 3, 4, 6])


def test_identical_and_disjoint():
    assert shared_token_positions([3, 4, 5], [3, 4, 5]) == ([0, 1, 2], [0, 1, 2])
    assert shared_token_positions([3, 4], [5, 6]) == ([], [])
    assert shared_token_positions([], []) == ([], [])


def test_long_sequences_are_not_junked():
    # difflib's autojunk would drop a token that appears in >1% of a 200+ long sequence
    a = [7] * 250 + [1]
    b = [7] * 250 + [2]
    pa, pb = shared_token_positions(a, b)
    assert len(pa) == 250 and pa == pb


def test_docstring_examples_of_the_bias_modules():
    import doctest

    from harness.bias import align, data, evaluators, metrics, run, scoring

    for module in (align, data, evaluators, metrics, run, scoring):
        failures, _ = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert failures == 0, module.__name__
