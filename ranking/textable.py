"""The one terminal table formatter and the one number formatter of every ``vnr`` command.

A :class:`TextTable` holds a header, rows of cells, an optional title line (what the
rows are sorted by, the weights / setting / ties used) and an optional legend line
(what the markers in the cells mean). :func:`render` lays it out in aligned columns
that fit ``width`` characters (120 by default):

1. long names in the name columns are shortened to ``name_width`` characters with a
   numbered key printed below the table (``[1] the-full-name``);
2. if the table is still too wide, it is wrapped: the columns are split into blocks
   that fit, each block repeating the ``index`` leading columns (a column group given by
   ``spans`` is never split);
3. a single block that is still too wide has its last column cut with ``…``.

``wide=True`` (the CLI's ``--wide``) does none of this: every cell in full, one block.

>>> t = TextTable(["model", "score"], [["A", 2.5], ["B", float("nan")]], title="sorted by score",
...               legend="–: no score")
>>> print(render(t))
sorted by score
model  score
A        2.5
B          –
–: no score
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: Default width of a terminal table (characters).
DEFAULT_WIDTH = 120
#: Names longer than this are shortened (with a key) when a table does not fit.
NAME_WIDTH = 24
#: The gap between two columns.
GAP = "  "
#: What a missing number prints as.
MISSING = "–"


def number(x: Any, digits: int = 4) -> str:
    """A number for a terminal table: integers in full, others to ``digits`` significant digits.

    >>> [number(v) for v in (3.0, -2, 82.7153, 0.123456, 1234.56, 0.0001234, 1.5e-6, float("nan"), None)]
    ['3', '-2', '82.72', '0.1235', '1235', '0.0001234', '1.5e-06', '–', '–']
    """
    if x is None:
        return MISSING
    x = float(x)
    if math.isnan(x):
        return MISSING
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x.is_integer() and abs(x) < 1e15:
        return str(int(x))
    if 1e-4 <= abs(x) < 10 ** max(digits, 6):
        decimals = max(digits - 1 - math.floor(math.log10(abs(x))), 0)
        text = f"{x:.{decimals}f}"
        return text.rstrip("0").rstrip(".") if "." in text else text
    return f"{x:.{digits - 1}g}"


def cell_text(value: Any) -> str:
    """A cell as text: numbers through :func:`number`, sequences joined with commas."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)) or value is None:
        return number(value)
    if hasattr(value, "dtype") and getattr(value, "shape", None) == ():  # a numpy scalar
        return number(float(value))
    if isinstance(value, (list, tuple)):
        return ", ".join(cell_text(v) for v in value)
    return str(value)


@dataclass
class TextTable:
    """A table for the terminal; see the module docstring for how :func:`render` fits it.

    ``columns``: header of each column (a ``\\n`` makes a two-line header);
    ``align``: one ``l``/``r`` per column (default: ``r`` where every cell is a number);
    ``spans``: a label above each column, consecutive equal labels printed once over
    their columns (e.g. a rule's name over its score and rank); ``index``: how many
    leading columns each wrapped block repeats; ``name_columns``: columns whose long
    values are shortened with a key.
    """

    columns: Sequence[str]
    rows: Sequence[Sequence[Any]]
    title: str = ""
    legend: str = ""
    align: str = ""
    spans: Sequence[str] | None = None
    index: int = 1
    name_columns: Sequence[int] = (0,)


def render(table: TextTable, *, width: int = DEFAULT_WIDTH, wide: bool = False) -> str:
    """The table as aligned text (see the module docstring).

    >>> t = TextTable(["#", "a", "b", "c"], [[1, "x" * 30, "y" * 30, "z" * 30]])
    >>> print(render(t, width=70))
    #  a                               b
    1  xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx  yyyyyyyyyyyyyyyyyyyyyyyyyyyyyy
    <BLANKLINE>
    #  c
    1  zzzzzzzzzzzzzzzzzzzzzzzzzzzzzz
    """
    ncol = len(table.columns)
    rows = [[cell_text(v) for v in row] for row in table.rows]
    for row in rows:
        if len(row) != ncol:
            raise ValueError(f"a row has {len(row)} cells for {ncol} columns")
    headers = [str(c).split("\n") for c in table.columns]
    depth = max((len(h) for h in headers), default=1)
    headers = [h + [""] * (depth - len(h)) for h in headers]
    align = table.align or "".join(
        "r" if rows and all(_numeric(v) for v in (r[j] for r in table.rows)) else "l" for j in range(ncol)
    )
    spans = list(table.spans) if table.spans is not None else None

    def col_width(j: int) -> int:
        return max([len(x) for x in headers[j]] + [len(r[j]) for r in rows] + [0])

    key: list[str] = []
    widths = [col_width(j) for j in range(ncol)]
    if not wide and _total(widths) > width:
        full: dict[str, str] = {}
        for j in table.name_columns:
            for r in rows:
                if len(r[j]) > NAME_WIDTH:
                    if r[j] not in full:
                        full[r[j]] = f"[{len(full) + 1}]"
                        key.append(f"{full[r[j]]} {r[j]}")
                    tag = full[r[j]]
                    r[j] = r[j][: NAME_WIDTH - len(tag) - 1] + "…" + tag
        widths = [col_width(j) for j in range(ncol)]

    blocks = [list(range(ncol))]
    if not wide and _total(widths) > width:
        blocks = _wrap(widths, spans, min(table.index, ncol), width)

    out: list[str] = [table.title] if table.title else []
    cut = False
    for b, cols in enumerate(blocks):
        w = [widths[j] for j in cols]
        if not wide and _total(w) > width and len(cols) > 1:
            room = width - _total(w[:-1]) - len(GAP)
            if room >= 8:
                w[-1], cut = room, True
        if b:
            out.append("")
        if spans is not None:
            out.append(_span_line([spans[j] for j in cols], w))
        for d in range(depth):
            out.append(_line([headers[j][d] for j in cols], w, "".join(align[j] for j in cols)))
        for r in rows:
            out.append(_line([r[j] for j in cols], w, "".join(align[j] for j in cols)))
    if cut:
        out.append(f"(long cells cut with … to fit {width} columns; --wide shows them in full)")
    if table.legend:
        out.append(table.legend)
    out += key
    return "\n".join(out)


def _numeric(v: Any) -> bool:
    return v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) or (
        hasattr(v, "dtype") and getattr(v, "shape", None) == ()
    )


def _total(widths: Sequence[int]) -> int:
    return sum(widths) + len(GAP) * max(len(widths) - 1, 0)


def _fit(text: str, w: int, how: str) -> str:
    if len(text) > w:
        return text[: max(w - 1, 0)] + "…"
    return text.rjust(w) if how == "r" else text.ljust(w)


def _line(cells: Sequence[str], widths: Sequence[int], align: str) -> str:
    return GAP.join(_fit(c, w, a) for c, w, a in zip(cells, widths, align)).rstrip()


def _span_line(labels: Sequence[str], widths: Sequence[int]) -> str:
    parts = []
    k = 0
    while k < len(labels):
        stop = k
        while stop + 1 < len(labels) and labels[stop + 1] == labels[k] and labels[k]:
            stop += 1
        parts.append(labels[k].ljust(_total(widths[k:stop + 1])))
        k = stop + 1
    return GAP.join(parts).rstrip()


def _wrap(widths: Sequence[int], spans: Sequence[str] | None, index: int, width: int) -> list[list[int]]:
    """Blocks of column indices, each the ``index`` leading columns plus whole span groups that fit."""
    groups: list[list[int]] = []
    for j in range(index, len(widths)):
        if groups and spans is not None and spans[j] and spans[j] == spans[groups[-1][-1]]:
            groups[-1].append(j)
        else:
            groups.append([j])
    lead = list(range(index))
    blocks: list[list[int]] = []
    current: list[int] = []
    for g in groups:
        if current and _total([widths[j] for j in lead + current + g]) > width:
            blocks.append(lead + current)
            current = []
        current += g
    if current or not blocks:
        blocks.append(lead + current)
    return blocks
