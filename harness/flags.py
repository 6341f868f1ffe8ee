"""Command-line flags generated from declared fields: the floor's one generator (:mod:`ranking.floor.flags`),
used by ``vnr finetune``, ``vnr bias`` and ``vnr run`` as by the ranking commands.

>>> import argparse
>>> from harness.specs import BiasSpec
>>> p = argparse.ArgumentParser()
>>> add_flags(p, BiasSpec, skip=("model", "model_args"))
>>> values(p.parse_args(["--dataset", "winobias", "--limit", "3"]), BiasSpec, skip=("model", "model_args"))
{'dataset': 'winobias', 'limit': '3'}
>>> flag(BiasSpec, "limit")
'--limit'
"""

from __future__ import annotations

from ranking.floor.flags import Cli, add_flags, flag, names, unused, values

__all__ = ["Cli", "add_flags", "flag", "names", "unused", "values"]
