"""Loaders for the three bias benchmarks: CrowS-Pairs, StereoSet and WinoBias.

Each loader reads the benchmark from a data root laid out like the shared
data (``<root>/bias/crows_pairs/crows_pairs_anonymized.csv``,
``<root>/bias/stereoset/dev.json``, ``<root>/bias/winobias/*.txt.{dev,test}``);
with no data root it downloads the same files once from their public sources
(:data:`SOURCES`) into a cache folder with the same layout.

``limit`` keeps the first N examples in file order: CrowS-Pairs pairs;
StereoSet items of each section (intrasentence, intersentence); WinoBias
pairs of each (type, split) file pair, so every type and split is present.

>>> strip_winobias_line("12 [The developer] argued with the designer because [he] did not like it.")
'The developer argued with the designer because he did not like it.'
"""

from __future__ import annotations

import json
import logging
import os
import re
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ranking.errors import UserError

log = logging.getLogger(__name__)

DATASETS = ("crows_pairs", "stereoset", "winobias")

# Public sources, used only when no data root is given. Relative path under the data root → URL.
_WINOBIAS_URL = "https://raw.githubusercontent.com/uclanlp/corefBias/master/WinoBias/wino/data/{name}"
WINOBIAS_TYPES = (1, 2)
WINOBIAS_SPLITS = ("dev", "test")
WINOBIAS_FILES = tuple(
    f"{stance}_stereotyped_type{t}.txt.{split}"
    for t in WINOBIAS_TYPES
    for split in WINOBIAS_SPLITS
    for stance in ("pro", "anti")
)
SOURCES: dict[str, str] = {
    "bias/crows_pairs/crows_pairs_anonymized.csv":
        "https://raw.githubusercontent.com/nyu-mll/crows-pairs/master/data/crows_pairs_anonymized.csv",
    "bias/stereoset/dev.json": "https://raw.githubusercontent.com/moinnadeem/StereoSet/master/data/dev.json",
    **{f"bias/winobias/{name}": _WINOBIAS_URL.format(name=name) for name in WINOBIAS_FILES},
}
CACHE_ENV = "VNR_CACHE_DIR"


# ---------------------------------------------------------------------- examples
@dataclass(frozen=True)
class CrowsPair:
    index: int  # the CSV's own (unnamed) index column
    sent_more: str
    sent_less: str
    direction: str  # stereo | antistereo
    bias_type: str


@dataclass(frozen=True)
class StereoSetItem:
    section: str  # intrasentence | intersentence
    id: str
    target: str
    bias_type: str
    context: str  # intrasentence: contains BLANK
    sentences: dict[str, str]  # gold label (stereotype | anti-stereotype | unrelated) → sentence


@dataclass(frozen=True)
class WinoBiasPair:
    type: int  # 1 | 2
    split: str  # dev | test
    line: int  # 0-based line number in both files
    pro: str
    anti: str
    pronoun_only: bool  # False for the pairs that differ in more than the gendered pronouns


# ---------------------------------------------------------------------- sources
def cache_dir() -> Path:
    """Where downloaded benchmark files go: ``$VNR_CACHE_DIR`` or ``~/.cache/vnr``."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "vnr").expanduser()


def download(url: str, dest: Path) -> None:
    """Fetch ``url`` to ``dest`` (atomically; tests monkeypatch this function)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".part")
    log.info("downloading %s", url)
    try:
        with urllib.request.urlopen(url, timeout=60) as response, open(tmp, "wb") as fh:  # noqa: S310 - fixed https URLs
            fh.write(response.read())
    except OSError as exc:
        raise UserError(f"could not download {url} ({exc}); pass --data-root DIR with a local copy") from None
    os.replace(tmp, dest)


def resolve_files(dataset: str, data_root: Path | None) -> Path:
    """The root that holds ``dataset``'s files: ``data_root``, or the download cache (filled on demand)."""
    rels = [rel for rel in SOURCES if rel.startswith(f"bias/{dataset}/")]
    if data_root is not None:
        root = Path(data_root)
        missing = [rel for rel in rels if not (root / rel).is_file()]
        if missing:
            raise UserError(
                f"data root {root} has no {missing[0]} ({len(missing)} {dataset} file(s) missing); "
                "point --data-root at the shared data folder or leave it out to download the public files"
            )
        return root
    root = cache_dir()
    for rel in rels:
        if not (root / rel).is_file():
            download(SOURCES[rel], root / rel)
    return root


# ---------------------------------------------------------------------- loaders
def _check_limit(limit: int | None) -> None:
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        raise UserError(f"--limit must be a positive integer, not {limit!r}")


def load_crows_pairs(data_root: Path | None = None, limit: int | None = None) -> list[CrowsPair]:
    """CrowS-Pairs pairs in file order (1508 in the public file)."""
    import pandas as pd

    _check_limit(limit)
    path = resolve_files("crows_pairs", data_root) / "bias/crows_pairs/crows_pairs_anonymized.csv"
    try:
        frame = pd.read_csv(path, keep_default_na=False, dtype=str)
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: not a readable CSV ({exc})") from None
    needed = ("sent_more", "sent_less", "stereo_antistereo", "bias_type")
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise UserError(f"{path}: missing column {missing[0]!r} (need {', '.join(needed)})")
    index_col = frame.columns[0] if frame.columns[0] not in needed else None
    pairs = []
    for row_number, rec in enumerate(frame.to_dict("records")):
        direction = rec["stereo_antistereo"].strip()
        if direction not in ("stereo", "antistereo"):
            raise UserError(f"{path}: row {row_number}: stereo_antistereo is {direction!r}, expected stereo or antistereo")
        index = int(rec[index_col]) if index_col and str(rec[index_col]).strip().isdigit() else row_number
        pairs.append(CrowsPair(index, rec["sent_more"], rec["sent_less"], direction, rec["bias_type"].strip()))
        if limit is not None and len(pairs) >= limit:
            break
    return pairs


STEREOSET_LABELS = ("stereotype", "anti-stereotype", "unrelated")
STEREOSET_SECTIONS = ("intrasentence", "intersentence")


def load_stereoset(
    data_root: Path | None = None, limit: int | None = None, sections: Iterable[str] = STEREOSET_SECTIONS
) -> dict[str, list[StereoSetItem]]:
    """StereoSet dev items per section, each with one sentence per gold label."""
    _check_limit(limit)
    path = resolve_files("stereoset", data_root) / "bias/stereoset/dev.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))["data"]
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as exc:
        raise UserError(f"{path}: not a StereoSet JSON file with a 'data' key ({exc})") from None
    out: dict[str, list[StereoSetItem]] = {}
    for section in sections:
        if section not in data:
            raise UserError(f"{path}: no {section!r} section")
        items = []
        for raw in data[section][: limit if limit is not None else None]:
            by_label: dict[str, str] = {}
            for sent in raw["sentences"]:
                label = sent["gold_label"]
                if label in by_label:
                    raise UserError(f"{path}: {section} item {raw['id']} has two {label!r} sentences")
                by_label[label] = sent["sentence"]
            if set(by_label) != set(STEREOSET_LABELS):
                raise UserError(f"{path}: {section} item {raw['id']} has labels {sorted(by_label)}, "
                                f"expected {', '.join(STEREOSET_LABELS)}")
            items.append(StereoSetItem(section, raw["id"], raw["target"], raw["bias_type"], raw["context"], by_label))
        out[section] = items
    return out


_LINE_ID = re.compile(r"^\s*\d+\s+")
GENDERED_PRONOUNS = frozenset({"he", "she", "him", "her", "his", "hers", "himself", "herself"})


def strip_winobias_line(line: str) -> str:
    """Drop the leading id and the brackets that mark the entity and pronoun; squeeze spaces."""
    text = _LINE_ID.sub("", line).replace("[", "").replace("]", "")
    return re.sub(r"\s+", " ", text).strip()


def differs_only_in_pronouns(a: str, b: str) -> bool:
    """True when the two sentences are the same words once the gendered pronouns are removed.

    >>> differs_only_in_pronouns("The nurse met him.", "The nurse met her.")
    True
    >>> differs_only_in_pronouns("He won the lottery.", "She won a lottery.")
    False
    """

    def rest(s: str) -> list[str]:
        return [w for w in re.findall(r"\w+", s.lower()) if w not in GENDERED_PRONOUNS]

    return rest(a) == rest(b)


def load_winobias(data_root: Path | None = None, limit: int | None = None) -> list[WinoBiasPair]:
    """WinoBias (pro, anti) pairs: types 1 and 2, dev and test; line i of a pro file pairs with line i of anti."""
    _check_limit(limit)
    root = resolve_files("winobias", data_root) / "bias/winobias"
    pairs = []
    for t in WINOBIAS_TYPES:
        for split in WINOBIAS_SPLITS:
            pro_path = root / f"pro_stereotyped_type{t}.txt.{split}"
            anti_path = root / f"anti_stereotyped_type{t}.txt.{split}"
            pro = [ln for ln in pro_path.read_text(encoding="utf-8").splitlines() if ln.strip()]
            anti = [ln for ln in anti_path.read_text(encoding="utf-8").splitlines() if ln.strip()]
            if len(pro) != len(anti):
                raise UserError(f"{pro_path} has {len(pro)} lines but {anti_path} has {len(anti)}: they must pair line by line")
            for i, (p, a) in enumerate(zip(pro, anti)):
                if limit is not None and i >= limit:
                    break
                ps, as_ = strip_winobias_line(p), strip_winobias_line(a)
                pairs.append(WinoBiasPair(t, split, i, ps, as_, differs_only_in_pronouns(ps, as_)))
    return pairs


def tokenizer_texts(dataset: str, data_root: Path | None) -> list[str]:
    """Every sentence of ``dataset`` (all examples, not only a limited subset): what a tiny tokenizer trains on."""
    if dataset == "crows_pairs":
        return [s for p in load_crows_pairs(data_root) for s in (p.sent_more, p.sent_less)]
    if dataset == "stereoset":
        texts = []
        for items in load_stereoset(data_root).values():
            for it in items:
                texts.append(it.context.replace("BLANK", ""))
                texts.extend(it.sentences[label] for label in STEREOSET_LABELS)
        return texts
    if dataset == "winobias":
        return [s for p in load_winobias(data_root) for s in (p.pro, p.anti)]
    raise UserError(f"unknown bias dataset {dataset!r}: use one of {', '.join(DATASETS)}")
