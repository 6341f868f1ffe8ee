"""What every rule returns: :class:`RuleResult` (scores, positions, winners).

The rules themselves and their name → rule registry live in :mod:`ranking.rules`.

>>> r = RuleResult.from_scores("demo", ("A", "B", "C"), np.array([2.0, 5.0, 2.0]))
>>> r.ranks.tolist(), r.winners
([2.0, 1.0, 2.0], ('B',))
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from ranking.floor.errors import UserError


def positions_from_scores(scores: np.ndarray, atol: float = 0.0) -> np.ndarray:
    """Rank positions (1 = best) from scores (higher = better).

    Tied models share the best position of their block (1 + the number of
    models strictly better, "competition ranking"); NaN scores get NaN.
    Scores closer than ``atol`` count as tied.

    >>> positions_from_scores(np.array([3.0, 1.0, 3.0, np.nan, 2.0])).tolist()
    [1.0, 4.0, 1.0, nan, 3.0]
    """
    s = np.asarray(scores, dtype=float)
    out = np.full(s.shape, np.nan)
    ok = ~np.isnan(s)
    v = s[ok]
    if v.size:
        # number of strictly better scores, vectorised via sorting
        sorted_desc = np.sort(v)[::-1]
        # count of values > x + atol: position in descending order
        better = np.searchsorted(-sorted_desc, -(v + atol), side="left") if atol else np.searchsorted(
            -sorted_desc, -v, side="left"
        )
        out[ok] = better + 1.0
    return out


@dataclass(frozen=True, eq=False)
class RuleResult:
    """Scores (higher = better), positions (1 = best, ties share the best), winners.

    ``scores`` and ``ranks`` are aligned with ``models``; a model the rule could
    not rank (e.g. no score on any criterion it used) has NaN in both.
    """

    rule: str
    models: tuple[str, ...]
    scores: np.ndarray
    ranks: np.ndarray
    params: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_scores(
        cls, rule: str, models: tuple[str, ...], scores: np.ndarray, atol: float = 0.0, **params: Any
    ) -> RuleResult:
        scores = np.asarray(scores, dtype=float)
        return cls(rule, tuple(models), scores, positions_from_scores(scores, atol), dict(params))

    @property
    def winners(self) -> tuple[str, ...]:
        return tuple(m for m, r in zip(self.models, self.ranks) if r == 1)

    def ordering(self) -> list[str]:
        """Models from best to worst (ties in table order; unranked models last)."""
        key = np.where(np.isnan(self.ranks), np.inf, self.ranks)
        return [self.models[i] for i in np.argsort(key, kind="stable")]

    def rank_of(self, model: str) -> float:
        return float(self.ranks[self._index(model)])

    def score_of(self, model: str) -> float:
        return float(self.scores[self._index(model)])

    @cached_property
    def _positions(self) -> dict[str, int]:
        return {m: i for i, m in enumerate(self.models)}

    def _index(self, model: str) -> int:
        try:
            return self._positions[model]
        except KeyError:
            raise UserError(f"unknown model {model!r}") from None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``{"scores": {m: float|None}, "ranks": {m: int|None}, "winners": [...]}``."""

        def num(x: float) -> float | None:
            return None if np.isnan(x) else float(x)

        return {
            "scores": {m: num(s) for m, s in zip(self.models, self.scores)},
            "ranks": {m: (None if np.isnan(r) else int(r)) for m, r in zip(self.models, self.ranks)},
            "winners": list(self.winners),
        }
