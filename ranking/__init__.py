"""Rank models under user preferences with Vote'n'Rank voting rules.

Pure numpy / pandas / scipy: importing this package never imports torch or
the ``harness`` package, so cached results can be ranked on any laptop.
"""

from ranking.errors import UserError
from ranking.table import Criterion, ScoreTable

__all__ = ["Criterion", "ScoreTable", "UserError"]
