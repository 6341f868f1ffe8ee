"""Shared-token alignment for CrowS-Pairs scoring (Nangia et al. 2020).

The two sentences of a pair differ in a few words (the group mentioned); the
metric scores only the tokens they share, so that the comparison is between
how likely the *same* words are given each group. The shared tokens are found
by aligning the two token-id sequences with :class:`difflib.SequenceMatcher`
and keeping its ``equal`` blocks; special tokens ([CLS], [SEP], <s>, ...)
are never scored.

>>> shared_token_positions([101, 7, 8, 9, 102], [101, 7, 5, 9, 102], skip_a={0, 4}, skip_b={0, 4})
([1, 3], [1, 3])
>>> shared_token_positions([1, 2, 3], [1, 9, 9, 3])
([0, 2], [0, 3])
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Sequence


def shared_token_positions(
    ids_a: Sequence[int], ids_b: Sequence[int], skip_a: Collection[int] = (), skip_b: Collection[int] = ()
) -> tuple[list[int], list[int]]:
    """Positions (in ``ids_a`` and in ``ids_b``) of the tokens the two sequences share.

    ``skip_a`` / ``skip_b`` are positions never scored (the special tokens the
    tokenizer added; an [UNK] inside the text is an ordinary token here).

    The two lists have equal length and pair up: ``ids_a[pa[k]] == ids_b[pb[k]]``.
    ``autojunk`` is off so long sequences align the same way short ones do.
    """
    matcher = difflib.SequenceMatcher(None, list(ids_a), list(ids_b), autojunk=False)
    pos_a: list[int] = []
    pos_b: list[int] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            continue
        for i, j in zip(range(i1, i2), range(j1, j2)):
            if i in skip_a or j in skip_b:
                continue
            pos_a.append(i)
            pos_b.append(j)
    return pos_a, pos_b
