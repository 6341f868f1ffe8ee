"""The TABLE argument of the `vnr` commands that read a score table: its help, its options (``--data-root``,
``--lower``, ``--higher``) and the table they name, read by the one TABLE loader (:mod:`ranking.loading`).

Apart from :mod:`ranking.cli_types` (the argument types every command shares, the importers' too), so the
argument types sit below the loader and the commands that read a TABLE above it: no import runs back up.
"""

from __future__ import annotations

import argparse

from ranking.cli_types import column_list

TABLE_HELP = (
    "score table: a CSV (+ criteria.yaml sidecar), a results folder with matrix.csv, a leaderboard spec (.yaml), "
    "or a path under the data root such as benchbench/glue or ranking_nlp/glue.data"
)


def add_table_options(parser: argparse.ArgumentParser) -> None:
    """``--data-root``, ``--lower`` and ``--higher``: the options of every command that reads a TABLE (its
    ranking choices, ``--vote`` among them: :func:`ranking.cli_types.add_choice_flags`)."""
    parser.add_argument("--data-root", metavar="DIR", default=None,
                        help="data root for leaderboard specs and benchbench/ranking_nlp paths (default: $VNR_DATA_ROOT)")
    parser.add_argument("--lower", type=column_list, action="extend", default=[], metavar="COL,...",
                        help="these columns are lower-is-better (overrides the sidecar; needed for cost-like "
                        "columns of a CSV without criteria.yaml)")
    parser.add_argument("--higher", type=column_list, action="extend", default=[], metavar="COL,...",
                        help="these columns are higher-is-better (overrides the sidecar)")


def table_from_args(args: argparse.Namespace, source: str | None = None, *, voted: str | None = None):
    """The score table named by ``args.table`` (or ``source``) with the TABLE options, via :func:`ranking.load_table`.

    ``voted`` (a command's name): the table prepared as :func:`ranking.rank` prepares it (its
    :class:`~ranking.plan.RankPlan`'s :meth:`~ranking.plan.RankPlan.prepare`: under ``--vote``'s weights,
    :mod:`ranking.votes`), the vote stated in a note on stderr where it changes them — for the commands that
    rank the table many times (``vnr analyze``, ``vnr prospective``) rather than once with :func:`ranking.rank`.
    """
    from ranking.loading import load_table

    table = load_table(
        args.table if source is None else source,
        data_root=args.data_root,
        lower=getattr(args, "lower", None) or (),
        higher=getattr(args, "higher", None) or (),
    )
    if voted is None:
        return table
    import sys

    from ranking.plan import RankPlan
    from ranking.votes import changes_weights, describe

    prepared = RankPlan(vote=getattr(args, "vote", None) or "benchmark", drop_incomplete=False).prepare(table)
    if changes_weights(prepared.votes):
        print(f"vnr {voted}: note: {describe(prepared.votes)}", file=sys.stderr)
    return prepared.table
