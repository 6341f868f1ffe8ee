"""A leaderboard's own aggregate, computed from the table imported from its files: the board's order.

A table imported from a leaderboard records which (``board:`` in its sidecar). ``vnr rank TABLE
--board`` (``ranking.rank(table, board=True)``) then ranks by the board's own method beside the
user's rules, so the two orders can be compared. Each board's function lives with its importer
and is imported only when used:

* ``helm``: HELM's mean win rate;
* ``open-llm-leaderboard``: the average of the normalised benchmark scores;
* ``mteb``: MTEB's English average (the mean over tasks, each on its own split and subset, bitext out);
* ``lm-eval``: the mean of the benchmark (group) scores as lm-eval computed them.

Each function takes the :class:`~ranking.table.ScoreTable` and returns one score per model
(higher = better, NaN where the board gives none); tests compare it with the aggregate the
source files themselves carry.

>>> sorted(BOARDS)
['helm', 'lm-eval', 'mteb', 'open-llm-leaderboard']
"""

from __future__ import annotations

import importlib
from typing import Any

from ranking.floor.errors import UserError

#: board name → "module:function" (imported when used).
BOARDS: dict[str, str] = {
    "helm": "ranking.importers.helm:board_scores",
    "open-llm-leaderboard": "ranking.importers.open_llm:board_scores",
    "mteb": "ranking.importers.mteb:board_scores",
    "lm-eval": "ranking.importers.lm_eval:board_scores",
}


def board_scores(table: Any) -> Any:
    """The board's own aggregate per model of ``table`` (module docstring); a one-line :class:`UserError` when the
    table names no board (it was not imported from one)."""
    import numpy as np

    name = table.board
    if name is None:
        raise UserError("this table names no leaderboard (board: in its sidecar, written by vnr import): --board "
                        "applies to tables imported from HELM, the Open LLM Leaderboard, MTEB or lm-eval")
    if name not in BOARDS:
        raise UserError(f"board {name!r} is not one of {', '.join(BOARDS)}")
    module, _, attr = BOARDS[name].partition(":")
    scores = np.asarray(getattr(importlib.import_module(module), attr)(table), dtype=float)
    if scores.shape != (table.n_models,):
        raise ValueError(f"board {name}: {scores.shape} scores for {table.n_models} models")
    return scores


def board_result(table: Any) -> Any:
    """The board's order as a :class:`~ranking.result.RuleResult` named ``board``."""
    from ranking.result import RuleResult

    return RuleResult.from_scores("board", table.models, board_scores(table), board=table.board)
