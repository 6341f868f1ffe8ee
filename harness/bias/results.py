"""What an evaluator returns: :class:`Evaluation` (a whole benchmark) and :class:`SectionScores` (one
StereoSet section's candidates scored).

Defined apart from :mod:`harness.bias.evaluators` (which re-exports them) so that the modules the
evaluators dispatch to (:mod:`harness.bias.reference`) can build them without importing the evaluators.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Evaluation:
    frame: Any  # pandas DataFrame, one row per example
    metrics: dict[str, float]
    skipped: dict[str, str] = field(default_factory=dict)  # what was not scored, and why
    n_examples: int = 0
    notes: dict[str, str] = field(default_factory=dict)  # scored, but worth knowing (flagged pairs, ...)


def crows_pair_columns(pairs: list) -> dict[str, list]:
    """The columns that name each CrowS-Pairs pair in every scoring mode's frame (index, bias type,
    direction, both sentences); the modes add their scores."""
    return {
        "index": [p.index for p in pairs],
        "bias_type": [p.bias_type for p in pairs],
        "direction": [p.direction for p in pairs],
        "sent_more": [p.sent_more for p in pairs],
        "sent_less": [p.sent_less for p in pairs],
    }


@dataclass
class SectionScores:
    """One StereoSet section scored: per candidate row (item, gold label), the text scored and its score.

    ``columns``: more per-candidate values to keep in the frame (name → one value per row);
    ``metrics``: section metrics beyond LMS/SS/ICAT of ``scores``; ``skipped``: why the
    section was not scored (then ``scores`` is empty).
    """

    texts: list[str]
    scores: list[float]
    columns: dict[str, list] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    skipped: str | None = None

