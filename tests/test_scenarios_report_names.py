"""The HTML report is safe with any model or criterion name, and its files follow the umask."""

from __future__ import annotations

import json
import os
from html.parser import HTMLParser

from test_scenarios_util import USER, write_results

from harness.cli import main

HOSTILE = {"A": "<!--<script>", "B": "</script><b>x", "C": "a&amp;b \u2028 c"}
HOSTILE_CRITERION = {"crows": "crows<!--&"}


class Page(HTMLParser):
    """The page's tables (id or position → body rows, each a list of cell texts) and its scripts' texts."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[dict] = []
        self.scripts: list[tuple[dict, str]] = []
        self._open: list[dict] = []
        self._script: dict | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self._open.append({"id": attrs.get("id"), "rows": []})
        elif tag == "tr" and self._open:
            self._open[-1]["rows"].append([])
        elif tag in ("td", "th") and self._open:
            self._cell = []
        elif tag == "script":
            self._script = {"attrs": attrs, "text": ""}

    def handle_endtag(self, tag):
        if tag == "table" and self._open:
            self.tables.append(self._open.pop())
        elif tag in ("td", "th") and self._cell is not None and self._open and self._open[-1]["rows"]:
            self._open[-1]["rows"][-1].append("".join(self._cell))
            self._cell = None
        elif tag == "script" and self._script is not None:
            self.scripts.append((self._script["attrs"], self._script["text"]))
            self._script = None

    def handle_data(self, data):
        if self._script is not None:
            self._script["text"] += data
        elif self._cell is not None:
            self._cell.append(data)


def _hostile_results(folder):
    results = write_results(folder, seeds=False)
    matrix = results / "matrix.csv"
    lines = matrix.read_text().splitlines()
    out = [lines[0].replace("crows", HOSTILE_CRITERION["crows"])]
    for line in lines[1:]:
        model, rest = line.split(",", 1)
        out.append(f"{HOSTILE.get(model, model)},{rest}")
    matrix.write_text("\n".join(out) + "\n")
    side = results / "criteria.yaml"
    side.write_text(side.read_text().replace("  crows:", '  "crows<!--&":'))
    return results


def test_hostile_names_leave_the_tables_and_the_live_weights_intact(tmp_path, capsys):
    results = _hostile_results(tmp_path / "r")
    out = tmp_path / "report"
    old = os.umask(0o022)
    try:
        code = main(["report", "--scenario", str(USER), "--results", str(results), "--out", str(out),
                     "--resolution", "4"])
    finally:
        os.umask(old)
    assert code == 0, capsys.readouterr().err
    page_text = (out / "report.html").read_text(encoding="utf-8")
    page = Page()
    page.feed(page_text)
    page.close()
    names = [HOSTILE.get(m, m) for m in "ABCDE"]

    # the live-weights block: two scripts, the data parses back to the very names
    assert [a.get("id") for a, _ in page.scripts] == ["live-data", None]
    data_text = page.scripts[0][1]
    assert "<" not in data_text and ">" not in data_text and "&" not in data_text and "\u2028" not in data_text
    data = json.loads(data_text)
    assert data["models"] == names
    assert HOSTILE_CRITERION["crows"] in data["criteria"]
    assert "function" in page.scripts[1][1]  # the script itself is still a script

    # every table has its rows: comparison (5 models), raw values (7 criteria), the others as built
    comparison = page.tables[0]
    assert len(comparison["rows"]) == 1 + 5
    assert len(comparison["rows"][0]) == 1 + 8  # '#' and the scenario's 8 columns
    for row in comparison["rows"][1:]:  # each cell: a model's name (as text), its score, its change
        assert len(row) == 1 + 8 and all(any(cell.startswith(n + " ") for n in names) for cell in row[1:]), row
    raw = next(t for t in page.tables if t["id"] == "raw-values")
    assert len(raw["rows"]) == 1 + 7
    assert sorted(raw["rows"][0][5:]) == sorted(names)
    assert HOSTILE_CRITERION["crows"] in [row[1] for row in raw["rows"][1:]]
    # nothing of the names leaked into markup: the page has exactly the report's own script tags
    assert page_text.count("<script") == 2 and page_text.count("</script>") == 2

    # files written with the umask's permissions
    for name in ("report.html", "comparison.csv", "comparison.json", "bump_chart.png"):
        assert (out / name).stat().st_mode & 0o777 == 0o644, name
