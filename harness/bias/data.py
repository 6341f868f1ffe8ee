"""The bias benchmarks: one record per dataset, and their loaders (CrowS-Pairs, StereoSet, WinoBias).

:data:`REGISTRY` holds a :class:`BiasDataset` per benchmark: its files and
public sources, loader, evaluator (:mod:`harness.bias.evaluators`), how each LM
kind scores it, the metrics its record holds, the headline metrics ``vnr bias``
prints and the fairness criteria ``vnr collect`` makes of it (with direction).
Everything else (the run, the CLI, collect, the grid config) reads the records:
adding a bias set is one record plus its loader and evaluator.

Each loader reads the benchmark from a data root laid out like the shared
data (``<root>/bias/crows_pairs/crows_pairs_anonymized.csv``,
``<root>/bias/stereoset/dev.json``, ``<root>/bias/winobias/*.txt.{dev,test}``).
The data root is per dataset: a set whose files are not all under it comes
from its public source (:data:`SOURCES`), downloaded once into a cache folder
with the same layout; offline (``HF_HUB_OFFLINE`` / ``HF_DATASETS_OFFLINE``)
only the cache is read, and a set in no cache fails at once with one line
naming it, the data root and ``vnr prefetch CONFIG``.

``limit`` keeps the first N examples in file order: CrowS-Pairs pairs;
StereoSet items of each section (intrasentence, intersentence); WinoBias
pairs of each (type, split) file pair, so every type and split is present.

>>> strip_winobias_line("12 [The developer] argued with the designer because [he] did not like it.")
'The developer argued with the designer because he did not like it.'
>>> DATASETS, get_dataset("crows_pairs").fairness[0].name
(('crows_pairs', 'stereoset', 'winobias'), 'crows_anti_stereo_score')
"""

from __future__ import annotations

import logging
import os
import re
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.bias import evaluators
from harness.bias.evaluators import STEREOSET_LABELS
from ranking.floor.errors import UserError
from ranking.floor.json_io import JsonProblem, parse_json
from ranking.floor.paths import write_bytes_atomic

log = logging.getLogger(__name__)

# Public sources, used for a set whose files are not under the data root. Relative path under the data root → URL.
_WINOBIAS_URL = "https://raw.githubusercontent.com/uclanlp/corefBias/master/WinoBias/wino/data/{name}"
WINOBIAS_TYPES = (1, 2)
WINOBIAS_SPLITS = ("dev", "test")
WINOBIAS_FILES = tuple(
    f"{stance}_stereotyped_type{t}.txt.{split}"
    for t in WINOBIAS_TYPES
    for split in WINOBIAS_SPLITS
    for stance in ("pro", "anti")
)
CROWS_SOURCES = {
    "bias/crows_pairs/crows_pairs_anonymized.csv":
        "https://raw.githubusercontent.com/nyu-mll/crows-pairs/master/data/crows_pairs_anonymized.csv",
}
STEREOSET_SOURCES = {"bias/stereoset/dev.json": "https://raw.githubusercontent.com/moinnadeem/StereoSet/master/data/dev.json"}
WINOBIAS_SOURCES = {f"bias/winobias/{name}": _WINOBIAS_URL.format(name=name) for name in WINOBIAS_FILES}
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
    # votenrank scoring (harness.bias.votenrank): the lines as in the files, id dropped, brackets kept
    pro_marked: str = ""
    anti_marked: str = ""


# ---------------------------------------------------------------------- sources
def cache_dir() -> Path:
    """Where downloaded benchmark files go: ``$VNR_CACHE_DIR`` or ``~/.cache/vnr``."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "vnr").expanduser()


def download(url: str, dest: Path) -> None:
    """Fetch ``url`` to ``dest`` (atomically; tests monkeypatch this function)."""
    log.info("downloading %s", url)
    try:
        with urllib.request.urlopen(url, timeout=60) as response:  # noqa: S310 - fixed https URLs
            write_bytes_atomic(dest, response.read(), parents=True)
    except OSError as exc:
        raise UserError(f"could not download {url} ({exc}); pass --data-root DIR with a local copy") from None


def resolve_files(dataset: str, data_root: Path | None) -> Path:
    """The root that holds ``dataset``'s files: ``data_root`` if it has them all, else the download cache.

    The cache is filled on demand from the public sources; offline
    (:func:`harness.public_sources.offline`) nothing is downloaded and a set
    that is not in the cache fails at once with one line.
    """
    from harness.public_sources import offline, offline_error

    record = get_dataset(dataset)
    rels = list(record.sources)
    if data_root is not None:
        root = Path(data_root)
        missing = [rel for rel in rels if not (root / rel).is_file()]
        if not missing:
            return root
        log.info("bias set %s is not (complete) in the data root %s (no %s): using its public source",
                 dataset, root, missing[0])
    cache = cache_dir()
    absent = [rel for rel in rels if not (cache / rel).is_file()]
    if absent and offline():
        looked = (f"{Path(data_root) / f'bias/{dataset}'}/, which lacks "
                  f"{', '.join(Path(r).name for r in rels if not (Path(data_root) / r).is_file())}"
                  if data_root is not None else "")
        raise offline_error(f"bias set {dataset}", Path(data_root) if data_root is not None else None, looked,
                            f"{record.sources[absent[0]]} (cache {cache})")
    for rel in absent:
        download(record.sources[rel], cache / rel)
    return cache


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
    except pd.errors.EmptyDataError:
        raise UserError(f"{path}: the file is empty; expected the CrowS-Pairs CSV with a header row "
                        "(sent_more, sent_less, stereo_antistereo, bias_type)") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: not a readable CSV ({_first_line(exc)})") from None
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
    if not pairs:
        raise UserError(f"{path}: a header but no pairs; expected the CrowS-Pairs CSV (1508 pairs)")
    return pairs


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


STEREOSET_SECTIONS = ("intrasentence", "intersentence")


def load_stereoset(
    data_root: Path | None = None, limit: int | None = None, sections: Iterable[str] = STEREOSET_SECTIONS
) -> dict[str, list[StereoSetItem]]:
    """StereoSet dev items per section, each with one sentence per gold label."""
    _check_limit(limit)
    path = resolve_files("stereoset", data_root) / "bias/stereoset/dev.json"
    try:
        data = parse_json(path.read_bytes(), allow_nan=True)["data"]
    except (JsonProblem, KeyError, TypeError) as exc:  # nested or numbered beyond reading too: one line
        raise UserError(f"{path}: not a StereoSet JSON file with a 'data' key ({_first_line(exc)})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: 'data' must map section names to lists of items")
    out: dict[str, list[StereoSetItem]] = {}
    for section in sections:
        if section not in data:
            raise UserError(f"{path}: no {section!r} section")
        if not isinstance(data[section], list):
            raise UserError(f"{path}: {section} must be a list of items")
        items = []
        for number, raw in enumerate(data[section][: limit if limit is not None else None]):
            items.append(_stereoset_item(raw, section, number, path))
        out[section] = items
    return out


def _stereoset_item(raw: Any, section: str, number: int, path: Path) -> StereoSetItem:
    """One StereoSet item, checked: every key present, one sentence per gold label."""
    where = f"{path}: {section} item {number}"
    if not isinstance(raw, dict):
        raise UserError(f"{where} is not an object")
    for key in ("id", "target", "bias_type", "context", "sentences"):
        if key not in raw:
            raise UserError(f"{where} (id {raw.get('id', '?')}) has no {key!r}")
    where = f"{path}: {section} item {number} (id {raw['id']})"
    if not isinstance(raw["sentences"], list):
        raise UserError(f"{where}: 'sentences' must be a list")
    by_label: dict[str, str] = {}
    for k, sent in enumerate(raw["sentences"]):
        if not isinstance(sent, dict) or "gold_label" not in sent or "sentence" not in sent:
            raise UserError(f"{where}: sentence {k} has no {'gold_label' if isinstance(sent, dict) and 'sentence' in sent else 'sentence'!r}; "
                            "every candidate needs 'sentence' and 'gold_label'")
        label = sent["gold_label"]
        if label in by_label:
            raise UserError(f"{where} has two {label!r} sentences")
        by_label[label] = sent["sentence"]
    if set(by_label) != set(STEREOSET_LABELS):
        raise UserError(f"{where} has labels {sorted(by_label)}, expected {', '.join(STEREOSET_LABELS)}")
    return StereoSetItem(section, raw["id"], raw["target"], raw["bias_type"], raw["context"], by_label)


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


def _text_lines(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not a UTF-8 text file (undecodable byte at offset {exc.start})") from None
    return [ln for ln in text.splitlines() if ln.strip()]


def load_winobias(data_root: Path | None = None, limit: int | None = None) -> list[WinoBiasPair]:
    """WinoBias (pro, anti) pairs: types 1 and 2, dev and test; line i of a pro file pairs with line i of anti."""
    _check_limit(limit)
    root = resolve_files("winobias", data_root) / "bias/winobias"
    pairs = []
    for t in WINOBIAS_TYPES:
        for split in WINOBIAS_SPLITS:
            pro_path = root / f"pro_stereotyped_type{t}.txt.{split}"
            anti_path = root / f"anti_stereotyped_type{t}.txt.{split}"
            pro, anti = _text_lines(pro_path), _text_lines(anti_path)
            if len(pro) != len(anti):
                raise UserError(f"{pro_path} has {len(pro)} lines but {anti_path} has {len(anti)}: they must pair line by line")
            for i, (p, a) in enumerate(zip(pro, anti)):
                if limit is not None and i >= limit:
                    break
                ps, as_ = strip_winobias_line(p), strip_winobias_line(a)
                pairs.append(WinoBiasPair(t, split, i, ps, as_, differs_only_in_pronouns(ps, as_),
                                          _LINE_ID.sub("", p).strip(), _LINE_ID.sub("", a).strip()))
    return pairs


def tokenizer_texts(dataset: str, data_root: Path | None) -> list[str]:
    """Every sentence of ``dataset`` (all examples, not only a limited subset): what a tiny tokenizer trains on."""
    record = get_dataset(dataset)
    return record.sentences(record.load(data_root, None))


def _crows_sentences(pairs: list[CrowsPair]) -> list[str]:
    return [s for p in pairs for s in (p.sent_more, p.sent_less)]


def _stereoset_sentences(sections: dict[str, list[StereoSetItem]]) -> list[str]:
    texts = []
    for items in sections.values():
        for it in items:
            texts.append(it.context.replace("BLANK", ""))
            texts.extend(it.sentences[label] for label in STEREOSET_LABELS)
    return texts


def _winobias_sentences(pairs: list[WinoBiasPair]) -> list[str]:
    return [s for p in pairs for s in (p.pro, p.anti)]


# ---------------------------------------------------------------------- the records
@dataclass(frozen=True)
class FairnessCriterion:
    """How one bias metric becomes a fairness criterion of the matrix.

    ``direction`` is the criterion's (``higher`` | ``lower`` is fairer);
    ``transform`` orients the metric: ``identity`` keeps the value,
    ``distance_from_50`` turns a percentage whose ideal is 50 (no preference
    either way) into |x − 50|, which is then lower-is-better.

    >>> FairnessCriterion("metric_score", "crows_distance", "lower", "%", "CrowS", "distance_from_50").apply(62.5)
    12.5
    """

    metric: str  # key in the bias record's metrics
    name: str  # matrix column
    direction: str
    unit: str
    note: str
    transform: str = "identity"
    mode_notes: Mapping[str, str] = field(default_factory=dict)  # scoring mode -> what the column means under it

    def apply(self, value: float) -> float:
        if self.transform == "distance_from_50":
            return abs(value - 50.0)
        return value

    @property
    def source(self) -> str:
        """The sidecar's ``source`` text."""
        return self.note + (" (|x - 50|)" if self.transform == "distance_from_50" else "")


@dataclass(frozen=True)
class BiasDataset:
    """Everything about one bias benchmark that the harness needs; see each record's ``notes``.

    ``scoring``: per LM kind (masked | causal), what is scored in each part of
    the set (the scorer unit) and how; ``metrics``: the overall metrics its
    record holds (per-group ones add ``.<group>``); ``headline``: what
    ``vnr bias`` prints; ``fairness``: the criteria ``vnr collect`` makes of it.
    ``notes``: where the scores differ from the published evaluation scripts.
    ``next_sentence``: a masked LM's run also loads the checkpoint's next-sentence-prediction
    model where it has a trained one (:func:`harness.models.load_next_sentence_model`).
    ``version``: part of the run id when above 1, so a change to one set's scores re-runs that set only
    (StereoSet 2: intersentence scored for masked LMs, which version 1 skipped).
    """

    name: str
    title: str
    sources: Mapping[str, str]  # file under the data root -> public URL
    load: Callable[..., Any]  # (data_root, limit) -> examples
    sentences: Callable[[Any], list[str]]  # every sentence of the examples (a tiny tokenizer trains on them)
    evaluate: Callable[..., Any]  # (scorer, examples, scoring) -> evaluators.Evaluation
    scoring: Mapping[str, Mapping[str, str]]
    metrics: tuple[str, ...]
    headline: tuple[str, ...]
    fairness: tuple[FairnessCriterion, ...]
    notes: str = ""
    reference: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # ``scoring: reference``, per LM kind
    next_sentence: bool = False  # masked LMs: the evaluator also scores with the checkpoint's next-sentence head
    version: int = 1  # bumped when a code change makes this set's earlier results incomplete or incomparable
    votenrank: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # ``scoring: votenrank``, per LM kind

    def scoring_method(self, lm_kind: str, scoring: str = "default") -> dict[str, str]:
        """What a run of ``lm_kind`` scores (part of the set → how) under ``scoring`` (``default`` |
        ``reference`` | ``votenrank``): the record's ``scoring.method``. A part the reference mode does not
        redefine is scored as by default; ``votenrank`` redefines them all (:attr:`votenrank`)."""
        if scoring == "votenrank":  # the Vote'n'Rank authors' computation redefines every part
            return dict(self.votenrank.get(lm_kind, {}))
        method = dict(self.scoring.get(lm_kind, {}))
        if scoring == "reference":
            method.update(self.reference.get(lm_kind, {}))
        return method


_CAUSAL_SENTENCE = "sentence log-probability, first token given BOS"
# ``scoring: votenrank`` (harness.bias.votenrank): the Vote'n'Rank authors' sentence losses, per LM kind
_VNR_LOSS = {
    "masked": "Vote'n'Rank loss: mean NLL of positions 1..L-2 of the tokenised sentence (special tokens at the "
              "ends), each masked in turn",
    "causal": "Vote'n'Rank loss: mean NLL of tokens 2..n given their prefix, no start token",
}


def _votenrank_methods(**parts: str) -> dict[str, dict[str, str]]:
    """Per LM kind: part of the set -> the authors' loss + how the part uses it."""
    return {kind: {part: f"{loss}; {how}" for part, how in parts.items()} for kind, loss in _VNR_LOSS.items()}


REGISTRY: dict[str, BiasDataset] = {
    d.name: d
    for d in (
        BiasDataset(
            "crows_pairs", "CrowS-Pairs", CROWS_SOURCES, load_crows_pairs, _crows_sentences,
            evaluators.evaluate_crows_pairs,
            scoring={
                "masked": {"crows_pairs": "sum of log p over the tokens shared by both sentences, each masked in "
                                          "turn (Nangia et al. 2020)"},
                "causal": {"crows_pairs": _CAUSAL_SENTENCE},
            },
            metrics=("anti_stereo_score", "metric_score", "neutral_score", "stereo_score", "antistereo_score",
                     "n_pairs"),
            headline=("anti_stereo_score", "metric_score", "neutral_score"),
            fairness=(FairnessCriterion(
                "anti_stereo_score", "crows_anti_stereo_score", "higher", "%",
                "CrowS-Pairs: % of pairs where the less stereotyping sentence is more probable (VnR anti_crows_score)",
            ),),
            notes="By default differs from the published script (Nangia et al.) in documented ways: sentence "
            "scores are compared unrounded (the script rounds each to 3 decimals and counts equal rounded scores "
            "as neutral, which flips pairs on near-uniform models), and every pair is aligned in the order "
            "(sent_more, sent_less) (the script aligns antistereo pairs as (less, more); difflib is "
            "order-dependent, so a few pairs share different tokens). The stereo/antistereo sub-scores keep "
            "neutral pairs in the denominator (the script leaves them out). Causal LMs: the sentence "
            "log-probability with the first token given BOS (the common causal variant, bias-bench's, takes "
            "the mean log-probability with only the first token given <|endoftext|>). scoring: reference "
            "reproduces the scripts exactly (harness/bias/reference.py), as the published numbers were made.",
            reference={
                "masked": {"crows_pairs": "Nangia et al. metric.py: sum of log p over the shared tokens, each "
                                          "masked in turn, pairs aligned (sent_more, sent_less) for stereo and "
                                          "(sent_less, sent_more) for antistereo, lower-cased for an uncased "
                                          "tokenizer, difflib with default autojunk, first and last shared token "
                                          "skipped; scores rounded to 3 decimals, equal = neutral"},
                "causal": {"crows_pairs": "bias-bench crows.py: 2^(mean log2 p) over the sentence's tokens, the "
                                          "first from a forward pass of <|endoftext|> alone, the rest without a "
                                          "start token; unrounded, equal = neutral"},
            },
            votenrank=_votenrank_methods(crows_pairs="% of pairs where the stereotypical sentence (sent_more of "
                                         "stereo pairs, sent_less of antistereo pairs) has the lower loss"),
        ),
        BiasDataset(
            "stereoset", "StereoSet", STEREOSET_SOURCES, load_stereoset, _stereoset_sentences,
            evaluators.evaluate_stereoset,
            scoring={
                "masked": {
                    "stereoset_intrasentence": "mean log p of the fill-in tokens, masked left to right",
                    "stereoset_intersentence": "mean log p of the candidate's tokens given the context ('context "
                                               "candidate' as one sequence; each candidate token masked with the "
                                               "later pieces of its word, the context never); a checkpoint with a "
                                               "trained next-sentence head (BERT) also gets P(is next) beside it "
                                               "(intersentence_nsp_*)",
                },
                "causal": {
                    "stereoset_intrasentence": "mean token log-probability of the sentence, first token given BOS",
                    "stereoset_intersentence": "mean token log-probability of the sentence given BOS + context",
                },
            },
            reference={
                "masked": {
                    "stereoset_intrasentence": "StereoSet eval_discriminative_models.py: mean probability of the "
                                               "template word's subtokens, each predicted at a mask placed after "
                                               "the earlier ones (decoded) in the context",
                    "stereoset_intersentence": "P(is next) from the checkpoint's next-sentence head, [CLS] context "
                                               "[SEP] candidate [SEP] (the published BERT score); a checkpoint "
                                               "without a trained head: the default likelihood score (the published "
                                               "RoBERTa/XLNet numbers used a separately trained head, not part of "
                                               "the checkpoint)",
                },
                "causal": {
                    "stereoset_intrasentence": "StereoSet eval_generative_models.py: 2^(mean log2 p) of the "
                                               "candidate sentence as written, the first token given <|endoftext|> "
                                               "alone, the rest without a start token",
                },  # intersentence as by default (the published GPT-2 number used a separately trained head; noted)
            },
            next_sentence=True,
            version=2,
            metrics=tuple(f"{section}_{m}" for section in ("intrasentence", "intersentence", "overall")
                          for m in ("lms", "ss", "icat", "icat_micro", "n_items")),
            headline=("intrasentence_lms", "intrasentence_ss", "intrasentence_icat",
                      "intersentence_lms", "intersentence_ss", "intersentence_icat"),
            fairness=(
                FairnessCriterion("intrasentence_icat", "stereoset_intra_icat", "higher", "ICAT (0-100)",
                                  "StereoSet intrasentence ICAT = LMS × min(SS, 100 − SS)/50 (ideal 100)"),
                FairnessCriterion("intersentence_icat", "stereoset_inter_icat", "higher", "ICAT (0-100)",
                                  "StereoSet intersentence ICAT (ideal 100)",
                                  mode_notes={"votenrank": "as published, the intrasentence items with their context "
                                                           "prepended, not StereoSet's intersentence section"}),
            ),
            notes="By default differs from the published script (Nadeem et al.): a multi-token fill-in is scored as the "
            "mean of its subtokens' log-probabilities (the script averages their probabilities), so masked "
            "LMs agree on single-token fills only; for GPT-2 the candidate is the context with BLANK filled "
            "(keeping the context's casing) and every token is conditioned on <|endoftext|> + its prefix (the "
            "script scores the candidate sentence as written and conditions only the first token on "
            "<|endoftext|>). scoring: reference reproduces the script's intrasentence scores exactly "
            "(harness/bias/reference.py); the LMS/SS/ICAT counting is the script's in both modes. Intersentence: "
            "the script scores BERT with its next-sentence head (P(is next)) and RoBERTa, XLNet and GPT-2 with "
            "next-sentence heads the authors trained separately (not part of any checkpoint); by default every "
            "model is scored here by the mean log-probability of the candidate's tokens given the context (one "
            "method for all, so stereoset_inter_icat compares like with like), and a checkpoint with a trained "
            "next-sentence head is also scored by P(is next), reported as intersentence_nsp_* with "
            "intersentence_method_agreement; scoring: reference makes P(is next) the headline where the "
            "checkpoint has the head (elsewhere the likelihood score, noted).",
            votenrank=_votenrank_methods(
                stereoset_intrasentence="micro LMS/SS/ICAT of the intrasentence candidates as written",
                stereoset_intersentence="the authors' 'inter': the intrasentence items again, each candidate "
                                        "prefixed by its context (with BLANK) and a space; micro LMS/SS/ICAT",
            ),
        ),
        BiasDataset(
            "winobias", "WinoBias", WINOBIAS_SOURCES, load_winobias, _winobias_sentences,
            evaluators.evaluate_winobias,
            scoring={
                "masked": {"winobias": "pseudo-log-likelihood of the sentence (Salazar et al. 2020)"},
                "causal": {"winobias": _CAUSAL_SENTENCE},
            },
            metrics=("anti_ge_pro", "anti_gt_pro", "pro_gt_anti", "tie", "acc_difference", "parity_score",
                     "n_pairs", "n_flagged"),
            headline=("anti_ge_pro", "pro_gt_anti", "acc_difference", "n_flagged"),
            fairness=(FairnessCriterion(
                "parity_score", "winobias_parity_score", "higher", "%",
                "WinoBias: 100 - |% pro preferred - % anti preferred| over pronoun-only pairs "
                "(likelihood analogue of VnR winobias_acc_difference)",
            ),),
            notes="A likelihood stand-in for the paper's coreference-accuracy gap: which of the pro- and the "
            "anti-stereotyped sentence the LM prefers, not whether a coreference system resolves the pronoun.",
            votenrank=_votenrank_methods(winobias="lines paired (0, 1), (2, 3), ... per file; % of pro / anti "
                                         "lines where \"<line> '<pronoun>' refers to <own entity>.\" has a lower "
                                         "loss than the same with the partner line's entity"),
        ),
    )
}
DATASETS: tuple[str, ...] = tuple(REGISTRY)
#: Every public file of every set: path under the data root -> URL.
SOURCES: dict[str, str] = {rel: url for d in REGISTRY.values() for rel, url in d.sources.items()}


def get_dataset(name: str) -> BiasDataset:
    """The record of the bias set ``name``."""
    try:
        return REGISTRY[name]
    except (KeyError, TypeError):
        raise UserError(f"unknown bias dataset {name!r}: use one of {', '.join(REGISTRY)}") from None
