"""BERTScore (Zhang et al. 2020) from a user's local transformers model directory, with the
`bert-score` package's own tokenisation and layer cut (`bert_score.utils.get_tokenizer`,
`get_model`, `sent_encode`): the `bertscore` metric of `rerank eval`/`report`, feature column and
MBR utility (rerank.metrics.pair_models says what they share).

The score is F1 of the greedy matching of the hypothesis's and the reference's token embeddings
at layer `layer` (bert_score's num_layers; default: bert_score's layer for the model the
directory is named after, roberta-large 17, else the model's last layer), cosine similarities,
[CLS] and [SEP] weighted 0 and every other token 1 (bert_score without idf), an empty side 0; with
`rescale` (a baseline file as the package ships them, rescale_baseline/LANG/MODEL.tsv: a row per
layer of P, R, F baselines) F1 becomes (F1 - b) / (1 - b). A sentence with several references
takes the best, as `bert_score.score` does.

Each distinct sentence is encoded once (its embeddings reused by every pair that holds it, and
kept across blocks of pairs up to HELD_VALUES numbers), in batches of similar token lengths
bounded by MAX_TOKENS padded tokens; each
token's best match is taken over the other text's tokens alone. (bert_score's own batched call
pads a batch of pairs and matches against the padding too, which floors a token's best
similarity at 0 when its pair was padded: its values equal these when it runs a pair at a time,
batch_size=1, or when no similarity is negative.)
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rerank.errors import InputError, needs_neural
from rerank.metrics.pair_models import (MAX_TOKENS, Pair, PairModel, PairModelFeature, PairModelMetric,
                                        PairModelUtility, Store, loading_failed, model_directory, pair_batches)
from rerank.options import NONNEGATIVE_INT, PATH, POSITIVE_INT, option
from rerank.progress import transformers_bars_off

HELD_VALUES = 1 << 27   # token-embedding numbers kept between blocks of pairs (512 MB of float32)


def token_ids(tokenizer, text: str) -> list[int]:
    """bert_score's tokens of `text` (`sent_encode`: stripped, truncated to the model's length);
    an empty text is [CLS] [SEP], as sent_encode makes it under transformers 4 (under 5 its call
    for an empty text fails)."""
    from bert_score.utils import sent_encode

    if not text.strip():
        return [tokenizer.cls_token_id, tokenizer.sep_token_id]
    return sent_encode(tokenizer, text)


def default_layer(path: str, layers: int) -> int:
    """bert_score's tuned layer for the model the directory is named after, when it knows the name
    (`bert_score.utils.model2layers`: roberta-large 17, bert-base-multilingual-cased 9, ...), as
    `bert_score.score(model_type=NAME)` takes it; else the model's last layer."""
    with needs_neural("the bertscore metric"):
        from bert_score.utils import model2layers

    name = os.path.basename(os.path.normpath(os.path.abspath(path)))
    known = {key.split("/")[-1]: value for key, value in model2layers.items()}
    return int(known.get(name, layers))


def read_baseline(path: str, layer: int) -> float:
    """The F baseline of `layer` in a bert_score baseline file (a CSV with a header, LAYER,P,R,F,
    and the row of layer L at position L, as bert_score reads it with pandas' iloc)."""
    try:
        with open(path, encoding="utf-8", newline="") as f:
            rows = list(csv.reader(f))
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read the BERTScore baseline file: {' '.join(str(exc).split())[:200]}", path) from exc
    body = rows[1:]
    if layer >= len(body):
        raise InputError(f"the BERTScore baseline file has rows for layers 0-{len(body) - 1}, not layer {layer}", path)
    row = body[layer]
    try:
        value = float(row[3])
    except (IndexError, ValueError):
        raise InputError(f"line {layer + 2} of the BERTScore baseline file is not LAYER,P,R,F numbers: "
                         f"{','.join(row)[:80]!r}", path) from None
    if not (np.isfinite(value) and value < 1):
        raise InputError(f"the F baseline of layer {layer} is {value}; a baseline is a number below 1", path)
    return value


class BERTScoreModel(PairModel):
    """BERTScore F1 of the model at `path` at layer `layer` (None: the last), rescaled with the F
    baseline of the bert_score baseline file `rescale` when given."""

    name, display, reduce, package = "bertscore", "BERTScore", "max", "bert-score"

    def __init__(self, path: str, layer: int | None = None, rescale: str | None = None, device=None,
                 batch_size: int | None = None):
        super().__init__(path, device, batch_size)
        model_directory(self.path, "bertscore")
        try:
            with open(os.path.join(self.path, "config.json"), encoding="utf-8") as f:
                layers = int(json.load(f).get("num_hidden_layers"))
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            raise InputError("config.json has no number of layers (num_hidden_layers) to cut BERTScore's layer from",
                             self.path) from exc
        self.layer = default_layer(self.path, layers) if layer is None else layer
        if not 0 <= self.layer <= layers:
            raise InputError(f"BERTScore layer {self.layer}: the model has {layers} layers (give 0-{layers})",
                             self.path, option="layer")
        self.rescale = None if rescale is None else os.fspath(rescale)
        self.baseline = None if self.rescale is None else read_baseline(self.rescale, self.layer)
        self._embeddings: dict[str, Any] = {}
        self._held = 0   # numbers in _embeddings

    def namespace(self) -> str:
        from rerank.score_cache import model_digest

        return model_digest(self.path) + f"\0bertscore\0layer {self.layer}\0F1"   # the raw F1: rescaling is after

    def settings(self) -> str:
        rescaled = f"rescaled:{os.path.basename(self.rescale)}" if self.rescale else "no-rescale"
        return f"layer:{self.layer}|F1|no-idf|{rescaled}"

    def record(self) -> dict[str, Any]:
        return {**super().record(), "layer": self.layer, "rescale": self.rescale}

    def finish(self, values: np.ndarray) -> np.ndarray:
        return values if self.baseline is None else (values - self.baseline) / (1.0 - self.baseline)

    def load(self):
        """(tokenizer, model cut at the layer) as bert_score makes them, offline, on the device."""
        if self._loaded is None:
            with needs_neural("the bertscore metric"):
                from bert_score.utils import get_model, get_tokenizer
            try:
                with transformers_bars_off():
                    tokenizer = get_tokenizer(self.path, use_fast=False)
                    model = get_model(self.path, self.layer)
            except (OSError, ValueError, KeyError, RuntimeError) as exc:
                raise loading_failed(self.path, "bertscore", exc) from exc
            self._loaded = (tokenizer, model.to(self.device).eval())
        return self._loaded

    def encode(self, texts: Sequence[str]) -> None:
        """The unit-norm token embeddings and token weights of every text of `texts` not yet held."""
        import torch

        tokenizer, model = self.load()
        todo = [t for t in dict.fromkeys(texts) if t not in self._embeddings]
        ids = [token_ids(tokenizer, t) for t in todo]
        special = {tokenizer.cls_token_id, tokenizer.sep_token_id}
        device = next(model.parameters()).device
        for batch in pair_batches([len(x) for x in ids], self.max_rows):
            width = max(len(ids[k]) for k in batch)
            padded = torch.full((len(batch), width), tokenizer.pad_token_id or 0, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for row, k in enumerate(batch):
                padded[row, :len(ids[k])] = torch.tensor(ids[k])
                mask[row, :len(ids[k])] = 1
            with torch.inference_mode():
                out = model(padded.to(device), attention_mask=mask.to(device))[0].float()
            out = out / out.norm(dim=-1, keepdim=True)
            for row, k in enumerate(batch):
                weights = torch.tensor([0.0 if i in special else 1.0 for i in ids[k]], device=out.device)
                self._embeddings[todo[k]] = (out[row, :len(ids[k])], weights)
                self._held += len(ids[k]) * out.shape[-1]

    def score(self, pairs: Sequence[Pair], store: Store | None) -> np.ndarray:
        """F1 of each distinct pair, a block of whole batches at a time (rerank.score_cache)."""
        from rerank.score_cache import score_in_blocks, token_batches

        tokenizer, _ = self.load()
        lengths = {t: len(token_ids(tokenizer, t)) for pair in pairs for t in pair}
        batches = token_batches([lengths[h] + lengths[r] for h, r in pairs], MAX_TOKENS, self.max_rows)

        def block(some: Sequence[Sequence[int]]) -> np.ndarray:
            if self._held > HELD_VALUES:   # memory bounded by HELD_VALUES and one block's sentences
                self._embeddings.clear()
                self._held = 0
            self.encode([t for batch in some for k in batch for t in pairs[k]])
            return np.concatenate([f1([self._embeddings[pairs[k][0]] for k in batch],
                                      [self._embeddings[pairs[k][1]] for k in batch]) for batch in some])

        weights = [sum(lengths[h] + lengths[r] for h, r in (pairs[k] for k in batch)) for batch in batches]
        return score_in_blocks(batches, block, store, weights=weights, per_batch=False)


def f1(hyps: Sequence[tuple], refs: Sequence[tuple]) -> np.ndarray:
    """BERTScore's F1 of a batch of pairs from each side's (unit-norm token embeddings, token
    weights), bert_score's greedy_cos_idf without matching against padding: precision and recall
    are the weighted means of each token's best cosine against the other side's tokens; 0 where
    a side has no weighted token (an empty text: [CLS] [SEP] alone)."""
    import torch
    from torch.nn.utils.rnn import pad_sequence

    def side(items):
        vectors = pad_sequence([v for v, _ in items], batch_first=True)
        weights = pad_sequence([w for _, w in items], batch_first=True)
        real = pad_sequence([torch.ones(len(w), dtype=torch.bool, device=w.device) for _, w in items],
                            batch_first=True)
        return vectors, weights, real

    hyp, hyp_weights, hyp_real = side(hyps)
    ref, ref_weights, ref_real = side(refs)
    sim = torch.bmm(hyp, ref.transpose(1, 2))
    sim = sim.masked_fill(~(hyp_real[:, :, None] & ref_real[:, None, :]), -torch.inf)
    best_of_hyp = sim.max(dim=2).values.masked_fill(~hyp_real, 0.0)
    best_of_ref = sim.max(dim=1).values.masked_fill(~ref_real, 0.0)
    p_weights, r_weights = hyp_weights.sum(dim=1), ref_weights.sum(dim=1)
    empty = (p_weights == 0) | (r_weights == 0)
    precision = (best_of_hyp * hyp_weights).sum(dim=1) / torch.where(empty, 1.0, p_weights)
    recall = (best_of_ref * ref_weights).sum(dim=1) / torch.where(empty, 1.0, r_weights)
    f = 2 * precision * recall / (precision + recall)
    f = torch.where(empty | torch.isnan(f), 0.0, f)
    return f.double().cpu().numpy()


class BERTScoreMetric(PairModelMetric):
    """BERTScore F1 as a metric of `rerank eval`/`report` (the best over a sentence's references)."""

    name, display = "bertscore", "BERTScore"
    scale = "F1 of token-embedding matches, 0-1 (rescaled: about 0-1 for real text, below 0 possible)"
    statistics_doc = "`[score, 1]`: BERTScore F1 (the best over the references)"
    score_doc = "the mean of the segment F1 scores, as `bert-score` reports it"
    options_doc = ("EvalOptions `bertscore_model`, `bertscore_layer`, `bertscore_rescale`, `device`, `score_cache` "
                   "(`--bertscore-model`, ...)")

    @classmethod
    def from_eval(cls, options, cache: str | None) -> BERTScoreMetric:
        """The metric of an EvalOptions (its bertscore_model, bertscore_layer, bertscore_rescale, device)."""
        return cls(BERTScoreModel(os.fspath(options.bertscore_model), options.bertscore_layer, options.bertscore_rescale,
                                  options.device), cache)


@dataclass(frozen=True)
class BERTScoreOptions:
    """Options of the bertscore feature (flags of `rerank features`: --bertscore-model, ...)."""

    model: str | None = option(None, "a transformers model directory (config.json, weights, tokenizer) for BERTScore",
                               check=PATH, metavar="DIR", default_text="none, needed for bertscore")
    layer: int | None = option(None, "the layer whose embeddings are matched (bert_score's num_layers)",
                               check=NONNEGATIVE_INT, metavar="L", default_text="bert_score's for the directory's "
                               "name (roberta-large: 17), else the model's last")
    rescale: str | None = option(None, "rescale F1 with this bert_score baseline file (rescale_baseline/LANG/MODEL.tsv)",
                                 check=PATH, metavar="FILE", default_text="no rescaling")
    batch_size: int = option(64, "sentences per encoder batch (also at most 8,192 padded tokens)", check=POSITIVE_INT)


class BERTScoreFeature(PairModelFeature):
    columns = ("bertscore",)
    description = ("BERTScore F1 of each hypothesis against its references (--bertscore-model, -r): a column to tune "
                   "toward or pick oracles by")
    Options = BERTScoreOptions
    option_prefix = "bertscore-"
    requires = ("torch", "transformers", "bert_score")

    def make_model(self, options, device) -> PairModel:
        return BERTScoreModel(options.model, options.layer, options.rescale, device, options.batch_size)


class BERTScoreUtility(PairModelUtility):
    """BERTScore F1 as the MBR utility (the default layer, no rescaling: an affine map of F1
    with a positive slope, which leaves MBR's choice as it is)."""

    Model = BERTScoreModel
    no_aggregate = ("the aggregate MBR method needs a utility with a vector or n-gram form; BERTScore's greedy token "
                    "matching is pairwise only: use the exact method for bertscore")
