"""One scoring interface, ``score(sentences) -> log-likelihoods``, for masked and causal LMs, batched.

* :class:`MaskedLMScorer` — pseudo-log-likelihood (Salazar et al. 2020):
  mask each token in turn (special tokens excluded) and sum ``log p`` of the
  true token. Underneath is :meth:`MaskedLMScorer.token_log_probs`, which
  scores arbitrary (sequence, masked position) queries; the CrowS-Pairs
  variant (only the tokens two sentences share) and the StereoSet fill-in
  score are queries too.
* :class:`CausalLMScorer` — sentence log-probability, the first token
  conditioned on the BOS token; :meth:`CausalLMScorer.token_log_probs` also
  scores a continuation given a context.

How the masked scorer batches (the reference implementations run one forward
pass per masked token):

1. every (sentence, masked position) copy becomes a row; identical rows are
   scored once;
2. rows are sorted by length and packed into batches of at most
   ``batch_tokens`` padded tokens (right padding + attention mask, so
   position ids are those of the unpadded sentence);
3. the encoder runs under :func:`torch.inference_mode`, hidden states are
   gathered at the masked position of each row only, and the LM head runs on
   those rows alone (a ``B × H`` matmul instead of ``B × L × H``);
4. log-softmax in float32.

Precision: exact by default. The model runs in fp32 with TF32 switched off in
the scoring matmuls (:meth:`LMScorer.exact_matmuls`), on a CPU and a GPU alike:
bf16 changed the preferred sentence of 7.8 % of CrowS-Pairs pairs on an H100
(bert-base shape) for no useful speed-up. ``precision="bf16"`` / ``"fp16"`` (or
``"auto"``: bf16, else fp16, on a GPU) is the user's explicit choice, and the
bias record states which was used; ``scripts/bench_bias.py`` measures how far
bf16 agrees with fp32.

The LM head is split off the model per family (BERT ``cls``, RoBERTa
``lm_head``, ALBERT ``predictions``, DeBERTa ``cls`` or ``lm_predictions``,
DistilBERT ``vocab_*``); the split is checked once against the full model's
logits and the scorer falls back to the full head if they disagree, so the
numbers never depend on the shortcut.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.schema import PRECISIONS  # one list of precisions for every run kind
from ranking.floor.errors import UserError

log = logging.getLogger(__name__)

DEFAULT_BATCH_TOKENS = {"cpu": 4096, "cuda": 65536}
HEAD_ROWS = {"cpu": 1024, "cuda": 8192}  # rows per LM-head chunk (bounds the rows × vocab float32 buffer)
DEFAULT_PRECISION = "fp32"


def resolve_device_dtype(precision: str = DEFAULT_PRECISION, device: str | None = None) -> tuple[Any, Any]:
    """(torch device, torch dtype) for a precision name; ``fp32`` is the default everywhere, ``auto`` asks
    for bf16 (else fp16) on a GPU and fp32 on a CPU."""
    import torch

    if precision not in PRECISIONS:
        raise UserError(f"unknown precision {precision!r}: use one of {', '.join(PRECISIONS)}")
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if precision == "auto":
        if dev.type == "cuda":
            dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        else:
            dtype = torch.float32
    else:
        dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[precision]
    return dev, dtype


def loading_kwargs(precision: str = DEFAULT_PRECISION, model_args: Any = ()) -> dict[str, Any]:
    """``from_pretrained`` options that load a checkpoint's weights straight in the scoring dtype.

    transformers 5 always loads the low-memory way (an empty model on the meta device, then the weights;
    its ``low_cpu_mem_usage`` flag is ignored) and by default in the checkpoint's own dtype
    (``dtype="auto"``): a float32 checkpoint scored in bf16 would sit in memory in float32 first, twice
    the size, before the scorer casts it. Asking for the scorer's dtype at load time gives the same
    weights without that peak. ``model_args``' own ``dtype`` is the user's choice and is kept.

    >>> loading_kwargs("bf16"), loading_kwargs("bf16", (("dtype", "float32"),))
    ({'dtype': torch.bfloat16}, {})
    """
    if "dtype" in dict(model_args or ()):
        return {}
    return {"dtype": resolve_device_dtype(precision)[1]}


def pack_batches(lengths: np.ndarray, batch_tokens: int, *, max_padding: float = 0.1, min_tokens: int = 1024
                 ) -> list[tuple[int, int]]:
    """Split rows sorted by ascending length into [start, stop) batches of ≤ ``batch_tokens`` padded tokens.

    A batch is also closed early when the next row would make its padding
    exceed ``max_padding`` of its real tokens, once it holds ``min_tokens``
    (so a few rows of mixed lengths still share one efficient pass).

    >>> pack_batches(np.array([2, 2, 3, 3, 5]), 6)
    [(0, 2), (2, 4), (4, 5)]
    >>> pack_batches(np.array([4, 4, 4, 5, 9]), 100, min_tokens=8)
    [(0, 3), (3, 5)]
    """
    batches = []
    start, real = 0, 0
    for i, length in enumerate(lengths):
        length = int(length)
        if i > start:
            padded = (i - start + 1) * length
            too_big = padded > batch_tokens
            wasteful = padded > (1.0 + max_padding) * (real + length) and (i - start) * int(lengths[i - 1]) >= min_tokens
            if too_big or wasteful:
                batches.append((start, i))
                start, real = i, 0
        real += length
    if len(lengths):
        batches.append((start, len(lengths)))
    return batches


def _max_positions(model: Any) -> int | None:
    cfg = model.config
    n = getattr(cfg, "max_position_embeddings", None) or getattr(cfg, "n_positions", None)
    if n and getattr(cfg, "model_type", "") in ("roberta", "xlm-roberta", "camembert"):
        n -= (cfg.pad_token_id or 0) + 1  # RoBERTa positions start after the padding index
    return int(n) if n else None


class LMScorer:
    """``score(sentences) -> np.ndarray`` of log-likelihoods (float64), one per sentence."""

    lm_kind = ""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        precision: str = DEFAULT_PRECISION,
        batch_tokens: int | None = None,
        device: str | None = None,
        progress: bool = False,
    ):
        import torch

        self.device, self.dtype = resolve_device_dtype(precision, device)
        if batch_tokens is not None and batch_tokens < 1:
            raise UserError(f"--batch-tokens must be a positive integer, not {batch_tokens}")
        self.batch_tokens = int(batch_tokens or DEFAULT_BATCH_TOKENS[self.device.type])
        self.head_rows = HEAD_ROWS[self.device.type]
        self.model = model.to(device=self.device, dtype=self.dtype).eval()
        self.tokenizer = tokenizer
        self.progress = progress
        self.max_positions = _max_positions(model)
        self._torch = torch
        self.stats = {"forward_passes": 0, "rows": 0, "padded_tokens": 0, "real_tokens": 0}

    def score(self, sentences: Sequence[str]) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def tf32(self) -> bool:
        """Whether TF32 is allowed in the scoring matmuls: never (fp32 stays exact fp32)."""
        return False

    @contextlib.contextmanager
    def exact_matmuls(self) -> Iterator[None]:
        """TF32 off for cuBLAS and cuDNN while scoring (restored afterwards), so fp32 means fp32."""
        torch = self._torch
        matmul, cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        try:
            yield
        finally:
            torch.backends.cuda.matmul.allow_tf32 = matmul
            torch.backends.cudnn.allow_tf32 = cudnn

    # shared pieces
    def _check_length(self, seq: Sequence[int]) -> None:
        if self.max_positions and len(seq) > self.max_positions:
            text = self.tokenizer.decode(list(seq)[:30])
            raise UserError(f"a sentence has {len(seq)} tokens, more than the model's {self.max_positions} "
                            f"positions ({text!r}...); shorten or drop it")

    def _head_log_probs(self, head: Callable[[Any], Any], hidden_rows: Any, true_ids: Any) -> Any:
        """log p(true_ids) from hidden rows (n × H), the head applied in chunks; float32 log-softmax."""
        torch = self._torch
        out = []
        for start in range(0, hidden_rows.shape[0], self.head_rows):
            logits = head(hidden_rows[start : start + self.head_rows]).float()
            true = true_ids[start : start + self.head_rows, None]
            out.append((logits.gather(1, true) - torch.logsumexp(logits, dim=-1, keepdim=True)).squeeze(1))
        return torch.cat(out) if out else hidden_rows.new_zeros(0, dtype=torch.float32)

    def _count_pass(self, rows: int, width: int, real_tokens: int) -> None:
        """Book one forward pass of ``rows`` rows padded to ``width`` (``self.stats``, stored in the record)."""
        self.stats["forward_passes"] += 1
        self.stats["rows"] += rows
        self.stats["padded_tokens"] += rows * width
        self.stats["real_tokens"] += real_tokens

    def _progress_bar(self, total: int, desc: str) -> Any:
        """A bar on stderr while scoring, drawn on a terminal only (redirected stderr gets no carriage-return
        frames, as the grid's bar: :mod:`harness.grid.local`)."""
        import sys

        from tqdm.auto import tqdm

        try:
            terminal = sys.stderr.isatty()
        except (AttributeError, ValueError, OSError):
            terminal = False
        return tqdm(total=total, desc=desc, unit="row", disable=not (self.progress and terminal), leave=False,
                    dynamic_ncols=True, file=sys.stderr)

    def _tol(self) -> float:
        return 1e-3 if self.dtype == self._torch.float32 else 0.15


# ---------------------------------------------------------------------- masked LMs
@dataclass(frozen=True)
class MaskQuery:
    """Score ``log p(seq[target])`` with ``target`` and ``also_masked`` replaced by the mask token."""

    seq: int  # index into the list of sequences
    target: int
    also_masked: tuple[int, ...] = ()


def split_masked_lm(model: Any) -> tuple[Any, Callable[[Any], Any]] | None:
    """(encoder, head) for the families whose MLM head can run on gathered rows alone; None otherwise."""
    name = type(model).__name__
    if name == "BertForMaskedLM":
        return model.bert, model.cls
    if name in ("RobertaForMaskedLM", "XLMRobertaForMaskedLM", "CamembertForMaskedLM"):
        return model.roberta, model.lm_head
    if name == "AlbertForMaskedLM":
        return model.albert, model.predictions
    if name == "DebertaForMaskedLM":
        if getattr(model, "legacy", True) and hasattr(model, "cls"):
            return model.deberta, model.cls
        return model.deberta, lambda h: model.lm_predictions(h, model.deberta.embeddings.word_embeddings)
    if name == "DistilBertForMaskedLM":

        def head(h: Any) -> Any:
            return model.vocab_projector(model.vocab_layer_norm(model.activation(model.vocab_transform(h))))

        return model.distilbert, head
    return None


class MaskedLMScorer(LMScorer):
    """Pseudo-log-likelihood scorer for masked LMs (BERT, RoBERTa, ALBERT, DeBERTa, DistilBERT, ...).

    ``score(["The cat sat."])`` masks ``the``, ``cat``, ``sat``, ``.`` one at a
    time (never [CLS]/[SEP]) and sums the four log-probabilities; all those
    copies, for all sentences, go through the model in a few batched passes.
    """

    lm_kind = "masked"

    def __init__(self, model: Any, tokenizer: Any, **kwargs: Any):
        super().__init__(model, tokenizer, **kwargs)
        if tokenizer.mask_token_id is None:
            raise UserError(f"{type(model).__name__}: the tokenizer has no mask token, so it cannot be scored as a masked LM")
        self.mask_id = int(tokenizer.mask_token_id)
        self.pad_id = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0)
        split = split_masked_lm(self.model)
        self._encoder, self._head = split if split else (None, None)
        self._split_checked = split is None
        # the same checkpoint's next-sentence scorer, set by a run whose dataset uses one (StereoSet
        # intersentence, harness.bias.intersentence) when the checkpoint has a trained head
        self.next_sentence: Any = None

    # tokenisation
    def encode(self, texts: Sequence[str], *, offsets: bool = False) -> list[dict[str, list]]:
        """Token ids with the tokenizer's special tokens, which positions are special, and (optionally) char offsets."""
        enc = self.tokenizer(
            list(texts), add_special_tokens=True, return_special_tokens_mask=True,
            return_offsets_mapping=offsets, truncation=False,
        )
        out = []
        for i in range(len(texts)):
            item = {"ids": list(enc["input_ids"][i]), "special": [bool(s) for s in enc["special_tokens_mask"][i]]}
            if offsets:
                item["offsets"] = [tuple(o) for o in enc["offset_mapping"][i]]
            out.append(item)
        return out

    def score(self, sentences: Sequence[str]) -> np.ndarray:
        """Pseudo-log-likelihood of each sentence (sum over its non-special tokens)."""
        return self.pseudo_log_likelihood(sentences)

    def pseudo_log_likelihood(self, sentences: Sequence[str]) -> np.ndarray:
        encoded = self.encode(sentences)
        seqs = [e["ids"] for e in encoded]
        queries = [MaskQuery(i, p) for i, e in enumerate(encoded) for p, sp in enumerate(e["special"]) if not sp]
        lp = self.token_log_probs(seqs, queries, desc="PLL")
        sums = np.zeros(len(seqs))
        np.add.at(sums, np.array([q.seq for q in queries], dtype=np.int64), lp)
        return sums

    def token_log_probs(self, sequences: Sequence[Sequence[int]], queries: Sequence[MaskQuery], desc: str = "scoring") -> np.ndarray:
        """``log p(sequences[q.seq][q.target])`` for each query, the target (and ``also_masked``) masked."""
        torch = self._torch
        if not queries:
            return np.zeros(0)
        # unique sequences and unique queries: identical rows are scored once
        seq_index: dict[tuple[int, ...], int] = {}
        uniq_seqs: list[tuple[int, ...]] = []
        seq_map = []
        for s in sequences:
            key = tuple(int(t) for t in s)
            if key not in seq_index:
                self._check_length(key)
                seq_index[key] = len(uniq_seqs)
                uniq_seqs.append(key)
            seq_map.append(seq_index[key])
        q_index: dict[tuple, int] = {}
        uniq_q: list[tuple[int, int, tuple[int, ...]]] = []
        q_map = np.empty(len(queries), dtype=np.int64)
        for i, q in enumerate(queries):
            key = (seq_map[q.seq], int(q.target), tuple(sorted(set(q.also_masked) - {q.target})))
            if not 0 <= key[1] < len(uniq_seqs[key[0]]):
                raise IndexError(f"query target {q.target} outside sequence {q.seq} of length {len(uniq_seqs[key[0]])}")
            if key not in q_index:
                q_index[key] = len(uniq_q)
                uniq_q.append(key)
            q_map[i] = q_index[key]

        lengths = np.array([len(s) for s in uniq_seqs])
        max_len = int(lengths.max())
        padded = np.full((len(uniq_seqs), max_len), self.pad_id, dtype=np.int64)
        for i, s in enumerate(uniq_seqs):
            padded[i, : len(s)] = s
        attention = (np.arange(max_len)[None, :] < lengths[:, None]).astype(np.int64)
        row_seq = np.array([q[0] for q in uniq_q], dtype=np.int64)
        row_target = np.array([q[1] for q in uniq_q], dtype=np.int64)
        row_len = lengths[row_seq]
        order = np.argsort(row_len, kind="stable")
        result = np.empty(len(uniq_q))
        self._check_split()
        with torch.inference_mode(), self.exact_matmuls(), self._progress_bar(len(uniq_q), desc) as bar:
            for start, stop in pack_batches(row_len[order], self.batch_tokens):
                rows = order[start:stop]
                width = int(row_len[rows].max())
                ids = torch.from_numpy(padded[row_seq[rows], :width]).to(self.device)
                att = torch.from_numpy(attention[row_seq[rows], :width]).to(self.device)
                tgt = torch.from_numpy(row_target[rows]).to(self.device)
                ar = torch.arange(len(rows), device=self.device)
                true = ids[ar, tgt].clone()
                ids[ar, tgt] = self.mask_id
                for r, qi in enumerate(rows):
                    extra = uniq_q[qi][2]
                    if extra:
                        ids[r, list(extra)] = self.mask_id
                result[rows] = self._masked_forward(ids, att, tgt, true).double().cpu().numpy()
                self._count_pass(len(rows), width, int(row_len[rows].sum()))
                bar.update(len(rows))
        return result[q_map]

    def _masked_forward(self, ids: Any, att: Any, tgt: Any, true: Any) -> Any:
        ar = self._torch.arange(ids.shape[0], device=ids.device)
        if self._encoder is not None:
            hidden = self._encoder(input_ids=ids, attention_mask=att)[0]
            return self._head_log_probs(self._head, hidden[ar, tgt], true)
        logits = self.model(input_ids=ids, attention_mask=att).logits[ar, tgt]
        return self._head_log_probs(lambda x: x, logits, true)

    def _check_split(self) -> None:
        """Once: the split head on gathered rows must give the full model's logits; else use the full head."""
        if self._split_checked:
            return
        self._split_checked = True
        torch = self._torch
        enc = self.encode(["the quick brown fox jumps over the lazy dog ."])[0]["ids"]
        ids = torch.tensor([enc], device=self.device)
        ids[0, 1] = self.mask_id
        att = torch.ones_like(ids)
        with torch.inference_mode(), self.exact_matmuls():
            full = self.model(input_ids=ids, attention_mask=att).logits[0].float()
            split = self._head(self._encoder(input_ids=ids, attention_mask=att)[0][0]).float()
        diff = float((full - split).abs().max())
        if not diff <= self._tol() * max(1.0, float(full.abs().max())):
            log.warning("%s: the split LM head differs from the full model by %.3g; using the full head",
                        type(self.model).__name__, diff)
            self._encoder, self._head = None, None


# ---------------------------------------------------------------------- causal LMs
class CausalLMScorer(LMScorer):
    """Sentence log-probability for causal LMs (GPT-2): ``log p(w1 | BOS) + log p(w2 | BOS w1) + ...``.

    Sentences are batched by length with right padding (GPT-2's position ids
    are 0..L-1 for the real tokens either way, and a causal mask never lets a
    real token see the padding after it); the LM head runs only on the rows
    that predict a scored token.
    """

    lm_kind = "causal"

    def __init__(self, model: Any, tokenizer: Any, **kwargs: Any):
        super().__init__(model, tokenizer, **kwargs)
        bos = tokenizer.bos_token_id
        if bos is None:
            bos = getattr(model.config, "bos_token_id", None)
        if bos is None:
            raise UserError(f"{type(model).__name__}: no BOS token to condition the first token on")
        self.bos_id = int(bos)
        pad = tokenizer.pad_token_id
        self.pad_id = int(pad if pad is not None else self.bos_id)
        base = getattr(self.model, "base_model", None)
        head = self.model.get_output_embeddings()
        self._split = base is not None and base is not self.model and head is not None
        self._split_checked = not self._split

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids without special tokens (the caller prepends BOS)."""
        enc = self.tokenizer(list(texts), add_special_tokens=False, truncation=False)
        return [list(x) for x in enc["input_ids"]]

    def score(self, sentences: Sequence[str]) -> np.ndarray:
        """log p(sentence) = sum of the token log-probs, the first conditioned on BOS."""
        seqs = [[self.bos_id, *ids] for ids in self.encode(sentences)]
        return np.array([lp.sum() for lp in self.token_log_probs(seqs, [1] * len(seqs), desc="log-prob")])

    def score_continuations(self, contexts: Sequence[str], continuations: Sequence[str]) -> list[np.ndarray]:
        """Token log-probs of each continuation given BOS + its context (the continuation tokenised after a space)."""
        ctx = self.encode(contexts)
        cont = self.encode([" " + c.lstrip() for c in continuations])
        seqs = [[self.bos_id, *a, *b] for a, b in zip(ctx, cont)]
        return self.token_log_probs(seqs, [1 + len(a) for a in ctx], desc="log-prob")

    def token_log_probs(self, sequences: Sequence[Sequence[int]], score_from: Sequence[int], desc: str = "scoring") -> list[np.ndarray]:
        """For each sequence, ``log p(seq[t] | seq[:t])`` for ``t >= score_from[i]`` (≥ 1)."""
        torch = self._torch
        keys: dict[tuple, int] = {}
        uniq: list[tuple[tuple[int, ...], int]] = []
        back = []
        for s, f in zip(sequences, score_from):
            key = (tuple(int(t) for t in s), max(1, int(f)))
            if key not in keys:
                self._check_length(key[0])
                keys[key] = len(uniq)
                uniq.append(key)
            back.append(keys[key])
        results: list[np.ndarray] = [np.zeros(0)] * len(uniq)
        lengths = np.array([len(s) for s, _ in uniq], dtype=np.int64)
        order = np.argsort(lengths, kind="stable")
        self._check_split()
        with torch.inference_mode(), self.exact_matmuls(), self._progress_bar(len(uniq), desc) as bar:
            for start, stop in pack_batches(lengths[order], self.batch_tokens) if len(uniq) else []:
                rows = order[start:stop]
                width = int(lengths[rows].max())
                ids = np.full((len(rows), width), self.pad_id, dtype=np.int64)
                att = np.zeros((len(rows), width), dtype=np.int64)
                b_idx, p_idx, spans = [], [], []
                for r, u in enumerate(rows):
                    seq, first = uniq[u]
                    ids[r, : len(seq)] = seq
                    att[r, : len(seq)] = 1
                    n = max(0, len(seq) - first)
                    spans.append(n)
                    b_idx.extend([r] * n)
                    p_idx.extend(range(first - 1, len(seq) - 1))
                ids_t = torch.from_numpy(ids).to(self.device)
                att_t = torch.from_numpy(att).to(self.device)
                b_t = torch.tensor(b_idx, dtype=torch.long, device=self.device)
                p_t = torch.tensor(p_idx, dtype=torch.long, device=self.device)
                true = ids_t[b_t, p_t + 1]
                if self._split:
                    hidden = self.model.base_model(input_ids=ids_t, attention_mask=att_t, use_cache=False)[0]
                    lp = self._head_log_probs(self.model.get_output_embeddings(), hidden[b_t, p_t], true)
                else:
                    logits = self.model(input_ids=ids_t, attention_mask=att_t, use_cache=False).logits
                    lp = self._head_log_probs(lambda x: x, logits[b_t, p_t], true)
                lp_np = lp.double().cpu().numpy()
                for u, piece in zip(rows, np.split(lp_np, np.cumsum(spans)[:-1])):
                    results[u] = piece
                self._count_pass(len(rows), width, int(lengths[rows].sum()))
                bar.update(len(rows))
        return [results[i] for i in back]

    def _check_split(self) -> None:
        if self._split_checked:
            return
        self._split_checked = True
        torch = self._torch
        ids = torch.tensor([[self.bos_id, *self.encode(["the quick brown fox jumps over the lazy dog."])[0]]],
                           device=self.device)
        att = torch.ones_like(ids)
        with torch.inference_mode(), self.exact_matmuls():
            full = self.model(input_ids=ids, attention_mask=att, use_cache=False).logits[0].float()
            hidden = self.model.base_model(input_ids=ids, attention_mask=att, use_cache=False)[0][0]
            split = self.model.get_output_embeddings()(hidden).float()
        diff = float((full - split).abs().max())
        if not diff <= self._tol() * max(1.0, float(full.abs().max())):
            log.warning("%s: base model + output embeddings differ from the full model by %.3g; using the full model",
                        type(self.model).__name__, diff)
            self._split = False


def make_scorer(model: Any, tokenizer: Any, lm_kind: str, **kwargs: Any) -> LMScorer:
    """The scorer for a model of kind ``masked`` or ``causal``."""
    if lm_kind == "masked":
        return MaskedLMScorer(model, tokenizer, **kwargs)
    if lm_kind == "causal":
        return CausalLMScorer(model, tokenizer, **kwargs)
    raise ValueError(f"unknown LM kind {lm_kind!r}")
