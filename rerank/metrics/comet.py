"""COMET from a user's local checkpoint (unbabel-comet), offline: the loader that the `qe` and
`comet_ref` features, the `comet` metric of `rerank eval`/`report` and the MBR utility share, and
the metric itself.

A checkpoint is a COMET model directory (hparams.yaml and checkpoints/model.ckpt, as `comet-score`
and `download_model` leave it) or its .ckpt file. Its kind is read from hparams.yaml
(`class_identifier`, and `input_segments` for a unified model) before anything is loaded:

- reference-based (input segments include ref), for `comet_ref` and the metric: regression_metric
  (COMET-22, COMET-20), unified_metric with ref (UniTE-style), xcomet_metric (XCOMET),
  ranking_metric (COMET-rank);
- what scores (src, mt) without a reference, for `qe`: referenceless_regression_metric (COMET-QE),
  unified_metric (CometKiwi; a unified model with ref in its source-only mode) and xcomet_metric
  in its source-only mode, as `comet-score` runs them without -r.

Loading never runs code from the file: the checkpoint is first unpickled with `weights_only=True`,
said explicitly (`check_weights_only`), and a file that pickles anything but tensors and plain
values is refused in one line; COMET then loads it through Lightning (torch's default,
`weights_only=True` since torch 2.6); nothing here passes `weights_only=False`. COMET builds the
encoder named by `pretrained_model` in hparams.yaml without its weights, but it needs that
encoder's config and tokenizer: a local directory named there, or the Hugging Face cache holding
them. unbabel-comet 2.2 needs transformers 4 (the [comet] extra).

Scores are COMET's own (`model.predict(...).scores`), each distinct input once, cut into batches
as COMET's length batching would sort them, cached by model digest and input
(rerank.score_cache), and split over ranks under torchrun (rerank.distributed).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from rerank import distributed
from rerank.errors import InputError, needs_neural
from rerank.metrics.base import SourcedSegments
from rerank.progress import transformers_bars_off

log = logging.getLogger(__name__)

# the input segments of each model class unbabel-comet 2.2 knows (a unified model names its own)
CLASS_SEGMENTS: dict[str, tuple[str, ...] | None] = {
    "regression_metric": ("src", "mt", "ref"),
    "ranking_metric": ("src", "mt", "ref"),
    "xcomet_metric": ("mt", "src", "ref"),
    "unified_metric": None,
    "referenceless_regression_metric": ("src", "mt"),
}


# the classes that score (src, mt) without a reference: reference-free ones, and XCOMET and unified
# models in their source-only mode (as `comet-score` runs them without -r)
REFERENCE_FREE_CLASSES = ("referenceless_regression_metric", "unified_metric", "xcomet_metric")


def checkpoint_file(path: str) -> str:
    """The .ckpt of a COMET model path (its directory or the file itself)."""
    if os.path.isfile(path) and path.endswith(".ckpt"):
        return path
    candidate = os.path.join(path, "checkpoints", "model.ckpt")
    if os.path.isdir(path) and os.path.isfile(candidate):
        return candidate
    raise InputError("not a COMET model: give its directory (hparams.yaml and checkpoints/model.ckpt) or the .ckpt "
                     "file", path)


def hparams_file(ckpt: str) -> str:
    """hparams.yaml of a checkpoint: in the folder above checkpoints/, where COMET looks for it."""
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(ckpt))), "hparams.yaml")
    if not os.path.isfile(path):
        raise InputError("a COMET checkpoint needs hparams.yaml in the folder above checkpoints/", ckpt)
    return path


def model_kind(path: str) -> tuple[str, tuple[str, ...]]:
    """(class identifier, input segments) of a COMET model, read from its hparams.yaml alone."""
    import yaml

    hparams = hparams_file(checkpoint_file(path))
    try:
        with open(hparams, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise InputError(f"cannot read hparams.yaml: {' '.join(str(exc).split())[:200]}", hparams) from exc
    kind = data.get("class_identifier") if isinstance(data, dict) else None
    if kind not in CLASS_SEGMENTS:
        raise InputError(f"class_identifier {kind!r} is not a COMET model class (known: {', '.join(CLASS_SEGMENTS)})",
                         hparams)
    segments = CLASS_SEGMENTS[kind] or tuple(data.get("input_segments") or ("mt", "src", "ref"))
    return kind, segments


def check_kind(path: str, reference: bool, what: str) -> tuple[str, tuple[str, ...]]:
    """`model_kind` of a COMET model, refused in one line unless it fits `what` (the feature, metric
    or utility that asks, for the messages): a reference-based model when `reference`, else one that
    scores without a reference. Nothing is loaded."""
    ckpt = checkpoint_file(path)
    kind, segments = model_kind(path)
    if reference and "ref" not in segments:
        raise InputError(f"a reference-free COMET model ({kind}, input segments {list(segments)}); {what} needs a "
                         "reference-based one (COMET-22, XCOMET): score reference-free models with the qe feature",
                         ckpt)
    if not reference and kind not in REFERENCE_FREE_CLASSES:
        raise InputError(f"a reference-based COMET model ({kind}, input segments {list(segments)}) that cannot score "
                         f"without a reference; {what} needs one that can (CometKiwi, COMET-QE, XCOMET, unified "
                         "models): score with references through the comet_ref feature or the comet "
                         "metric of evaluation", ckpt)
    return kind, segments


def load_comet(path: str, reference: bool, what: str):
    """The COMET model of a local checkpoint, offline, of the kind `check_kind` accepts for `what`."""
    check_kind(path, reference, what)
    ckpt = checkpoint_file(path)
    with needs_neural(what):
        from comet import load_from_checkpoint
    check_weights_only(ckpt)
    try:
        with transformers_bars_off():
            return load_from_checkpoint(ckpt, local_files_only=True)
    except (OSError, ValueError, KeyError, RuntimeError, AttributeError) as exc:   # no encoder offline (OSError), a
        # malformed config or tokenizer (ValueError), a checkpoint without its keys or with weights that do not fit
        # the model; transformers 4 converting a tokenizer whose files are not there (AttributeError, only from its
        # convert_slow_tokenizer: any other AttributeError is a bug)
        if isinstance(exc, AttributeError) and not _raised_in(exc, "transformers.convert_slow_tokenizer"):
            raise
        message = " ".join(str(exc).split())
        raise InputError(f"cannot load the COMET checkpoint offline ({type(exc).__name__}: {message[:300]}); its "
                         "encoder (pretrained_model in hparams.yaml) must be a local directory or in the Hugging Face "
                         "cache", ckpt) from exc


def _raised_in(exc: BaseException, module: str) -> bool:
    """Whether `exc` was raised in the module `module` (its traceback's last frame)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and tb.tb_frame.f_globals.get("__name__", "") == module


def check_weights_only(ckpt: str) -> None:
    """Unpickle the checkpoint with `weights_only=True`, said explicitly (so neither an old torch
    nor TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD turns it off), memory-mapped, before COMET reads it: a
    file that pickles anything but tensors and plain values is refused before any of it runs, and
    COMET's own load then unpickles bytes known to hold nothing else."""
    import pickle

    import torch

    from rerank.device import TORCH_LOAD_ERRORS

    try:
        torch.load(ckpt, map_location="cpu", weights_only=True, mmap=True)
    except pickle.UnpicklingError as exc:
        message = " ".join(str(exc).split())
        found = re.search(r"(?:Unsupported global: GLOBAL|unsupported GLOBAL) (\S+)", message)
        raise InputError("refused: the checkpoint pickles " + (found.group(1) if found else "objects")
                         + ", not only tensors and plain values, and loading it would run code from it; re-save "
                         "its state_dict and hyper_parameters from a trusted copy", ckpt) from exc
    except TORCH_LOAD_ERRORS as exc:
        raise InputError(f"cannot read the COMET checkpoint: {' '.join(str(exc).split())[:200]}", ckpt) from exc


COMET_BLOCK = 4096   # rows scored between two writes of the cache: one Lightning predict per rank and block


def predict_scores(model, rows: Sequence[dict], batch_size: int, device,
                   store: Callable[[list[int], np.ndarray], None] | None = None) -> np.ndarray:
    """The model's segment scores of `rows` (dicts of its input segments), in batches of
    `batch_size` rows cut as COMET's own length batching cuts them (its argsort of the source
    lengths), which COMET is then given in that order to take as they come: a score depends on its
    batch alone, so under torchrun the ranks score whole batches each (rerank.distributed) and the
    scores are those of one process. The batches are predicted a block of about COMET_BLOCK rows
    at a time, each block handed to `store(row positions, scores)` (the score cache) as it
    finishes (rerank.score_cache.score_in_blocks)."""
    from rerank.score_cache import score_in_blocks

    order = np.argsort([len(row.get("src", row["mt"])) for row in rows], kind="stable").tolist()
    batches = [order[k:k + batch_size] for k in range(0, len(order), batch_size)]

    def predict(some: Sequence[Sequence[int]]) -> np.ndarray:
        # whole batches, all full but the very last: COMET cuts them again as they were cut here
        chunk = [rows[i] for batch in some for i in batch]
        quiet = [logging.getLogger(name) for name in ("pytorch_lightning", "lightning.pytorch", "lightning")]
        levels = [logger.level for logger in quiet]
        for logger in quiet:
            logger.setLevel(logging.ERROR)
        try:
            cuda = device.type == "cuda"
            # Lightning would take the torchrun variables for a distributed run of its own
            with distributed.without_launcher_environment() if distributed.active() else contextlib.nullcontext():
                out = model.predict(chunk, batch_size=batch_size, gpus=1 if cuda else 0,
                                    devices=[device.index or 0] if cuda else None, progress_bar=False,
                                    accelerator="cuda" if cuda else "cpu", length_batching=False)
        finally:
            for logger, level in zip(quiet, levels):
                logger.setLevel(level)
        return np.asarray(out.scores, dtype=np.float64)

    weights = [sum(sum(len(v) for v in rows[i].values()) for i in batch) for batch in batches]
    return score_in_blocks(batches, predict, store, weights=weights, per_batch=False, block=COMET_BLOCK)


def cached_scores(path: str, inputs: Sequence[tuple[str, ...]], *, reference: bool, what: str, batch_size: int = 16,
                  device=None, cache: str | None = None) -> np.ndarray:
    """COMET's segment score of each (src, mt) or (src, mt, ref) of `inputs` under the model at
    `path` (`reference`: a reference-based model, inputs with ref; else reference-free, inputs
    without), each distinct input scored once; `cache` a score-cache file (None: none). The model
    is loaded only when some input is not cached. Under torchrun rank 0 alone reads and writes the
    cache, and the ranks split the scoring."""
    from rerank.device import resolve_device
    from rerank.score_cache import lookup, model_digest, open_cache

    ckpt = checkpoint_file(path)
    check_kind(path, reference, what)
    distinct = list(dict.fromkeys(inputs))
    keys = [(src, mt) if len(rest) == 0 else (src + "\0" + rest[0], mt) for src, mt, *rest in distinct]
    values = np.zeros(len(distinct))
    store = open_cache(cache)
    try:
        namespace = ""
        if store is not None:  # the qe namespace is the one its cache has used since qe was written
            namespace = model_digest(ckpt) + model_digest(hparams_file(ckpt)) + ("\0comet_ref" if reference else "\0qe")
        found = lookup(store, namespace, keys, what)
        for i, (value, _) in found.items():
            values[i] = value
        todo = [i for i in range(len(distinct)) if i not in found]
        if todo:
            model = load_comet(path, reference, what)
            names = ("src", "mt", "ref") if reference else ("src", "mt")

            put = None if store is None else (   # each block as it is scored
                lambda items, scores, cache=store: cache.put(namespace, [keys[todo[k]] for k in items], scores,
                                                              np.ones(len(items))))
            values[todo] = predict_scores(model, [dict(zip(names, distinct[i])) for i in todo], batch_size,
                                          resolve_device(device), put)
    finally:
        if store is not None:
            store.close()
    position = {x: i for i, x in enumerate(distinct)}
    return values[[position[x] for x in inputs]]


class COMETMetric(SourcedSegments):
    """Reference-based COMET as a metric of `rerank eval`/`report`: the model's segment score of
    each (source, hypothesis, reference), averaged over a sentence's references (those not None),
    and the corpus score is the mean over sentences, as `comet-score` reports it.

    Statistics per sentence: [score, 1] ([0, 0] for a sentence without a reference), so
    randomisation, bootstrap and the multi-run test treat it like any other metric.
    `prepare_systems` scores the distinct triples of every system and run at once, before the
    tables ask for statistics."""

    name, display = "comet", "COMET"
    decimals = 4
    scale = "the model's segment scores (COMET-22: about 0-1)"
    statistics_doc = "`[score, 1]`: the checkpoint's segment score (mean over the references)"
    score_doc = "the mean of the segment scores, as `comet-score` reports it"
    options_doc = ("EvalOptions `comet_model`, `sources`, `comet_batch_size`, `device`, `score_cache` (`--comet-model`, "
                   "`--src`, ...)")

    def __init__(self, model: str, sources: Sequence[str], batch_size: int = 16, device=None,
                 cache: str | None = None):
        self.model, self.sources = model, list(sources)
        self.batch_size, self.device, self.cache = batch_size, device, cache
        self.kind, _ = check_kind(model, True, "the comet metric")
        self._scores: dict[tuple[str, str, str], float] = {}

    def score_triples(self, todo: list[tuple[str, str, str]]) -> np.ndarray:
        return cached_scores(self.model, todo, reference=True, what="the comet metric",
                             batch_size=self.batch_size, device=self.device, cache=self.cache)

    def signature(self):
        from rerank.score_cache import model_digest

        ckpt = checkpoint_file(self.model)
        from importlib.metadata import PackageNotFoundError, version

        try:
            comet = version("unbabel-comet")
        except PackageNotFoundError:
            comet = "not-installed"
        folder = os.path.dirname(os.path.dirname(os.path.abspath(ckpt)))  # the model's folder, also for a .ckpt
        name = os.path.basename(folder)
        return (f"comet|model:{name}|sha256:{model_digest(ckpt)[:16]}|class:{self.kind}|mean-over-refs|"
                f"unbabel-comet:{comet}")


# ---- COMET as an MBR utility (rerank.consensus) ------------------------------------------------

# the classes whose score decomposes into sentence embeddings and an estimator on them, so that MBR
# encodes each hypothesis once and runs the estimator on its pairs (mbrs's MetricCacheable idea)
EMBEDDING_CLASSES = ("regression_metric",)


def sentence_embeddings(model, texts: Sequence[str], batch_size: int, device):
    """COMET's sentence embedding of every text (its encoder, layerwise mix and pooling, as its
    forward computes them), in batches of similar lengths; a (len(texts), d) tensor on `device`.
    A vector depends on its batch alone, so under torchrun the ranks encode whole batches each
    (rerank.distributed) and the embeddings are those of one process."""
    import torch

    order = np.argsort([len(t) for t in texts], kind="stable").tolist()
    batches = [order[a:a + batch_size] for a in range(0, len(order), batch_size)]

    def encode(a: int, b: int) -> np.ndarray:
        parts = []
        with torch.inference_mode():
            for rows in batches[a:b]:
                inputs = model.encoder.prepare_sample([texts[i] for i in rows])
                parts.append(model.get_sentence_embedding(inputs["input_ids"].to(device),
                                                          inputs["attention_mask"].to(device)).float().cpu().numpy())
        return np.concatenate(parts)

    parts = distributed.map_parts(encode, len(batches), [sum(len(texts[i]) for i in rows) for rows in batches])
    if not parts:
        return torch.zeros((0, 0), device=device)
    vectors = np.zeros((len(texts), parts[0].shape[1]), dtype=np.float32)
    vectors[order] = np.concatenate(parts)
    return torch.as_tensor(vectors, device=device)


class MBRUtility:
    """Reference-based COMET as the utility of MBR: U(h_i, h_j) = COMET(source, h_i, h_j), the list's
    own hypotheses as pseudo-references (rerank.consensus). For a COMET-22-style regression model
    each distinct hypothesis and source is encoded once and the estimator runs on the pairs' embeddings
    (`exact`), or on each candidate against the posterior-weighted mean of its list's embeddings
    (`aggregate`, one estimator call per candidate). Another reference-based class scores every
    (source, candidate, pseudo-reference) triple with COMET's predict (exact only), cached."""

    needs_sources = True

    def __init__(self, path: str, batch_size: int | None = 16, device=None, cache: str | None = None,
                 lang: str | None = None):
        from rerank.device import resolve_device

        self.path, self.batch_size, self.cache = path, batch_size or 16, cache
        self.kind, _ = check_kind(path, True, "the comet MBR utility")
        self.device = resolve_device(device)
        self._model: Any = None

    @property
    def decomposes(self) -> bool:
        return self.kind in EMBEDDING_CLASSES

    def model(self):
        if self._model is None:
            self._model = load_comet(self.path, True, "the comet MBR utility")
            self._model.eval()
            self._model.to(self.device)
        return self._model

    def exact(self, sources: Sequence[str], texts: Sequence[str], group: np.ndarray, I: np.ndarray,
              J: np.ndarray) -> np.ndarray:
        """COMET(sources[group[i]], texts[i], texts[j]) of every pair (I, J) of rows, (P,)."""
        if not self.decomposes:
            triples = [(sources[group[i]], texts[i], texts[j]) for i, j in zip(I.tolist(), J.tolist())]
            return cached_scores(self.path, triples, reference=True, what="the comet MBR utility",
                                 batch_size=self.batch_size, device=self.device, cache=self.cache)
        import torch

        model = self.model()
        hyp, src = self._embeddings(model, sources, texts, group)
        out = np.zeros(len(I))
        step = 4096
        with torch.inference_mode():
            for a in range(0, len(I), step):
                i, j = torch.as_tensor(I[a:a + step]), torch.as_tensor(J[a:a + step])
                score = model.estimate(src[torch.as_tensor(group)[i]], hyp[i], hyp[j]).score
                out[a:a + len(i)] = score.double().cpu().numpy()
        return out

    def aggregate(self, sources: Sequence[str], texts: Sequence[str], group: np.ndarray, p: np.ndarray) -> np.ndarray:
        """COMET of every row against its list's aggregate pseudo-reference: the embedding
        sum_j p_j e_j of its list (p: the posterior, 0 for rows that are no pseudo-reference), (T,)."""
        if not self.decomposes:
            raise InputError(f"the aggregate MBR method needs a COMET model whose score is an estimator on "
                             f"sentence embeddings (COMET-22-style regression_metric); {self.kind} encodes the "
                             "hypothesis and the reference together: use the exact method", self.path)
        import torch

        model = self.model()
        hyp, src = self._embeddings(model, sources, texts, group)
        weights = torch.as_tensor(p, dtype=hyp.dtype, device=hyp.device)[:, None] * hyp
        lists = torch.as_tensor(group, device=hyp.device)
        reference = torch.zeros((int(group.max(initial=-1)) + 1, hyp.shape[1]), dtype=hyp.dtype, device=hyp.device)
        reference.index_add_(0, lists, weights)
        with torch.inference_mode():
            score = model.estimate(src[lists], hyp, reference[lists]).score
        return score.double().cpu().numpy()

    # the interface of the centroid method and of the decoders that score some pairs (rerank.mbr_decoders)
    @property
    def embeds(self) -> bool:
        return self.decomposes

    @property
    def no_embeddings(self) -> str:
        return (f"the centroid MBR method needs a COMET model whose score is an estimator on sentence embeddings "
                f"(COMET-22-style regression_metric); {self.kind} encodes the hypothesis and the reference together: "
                "use another method")

    def embed(self, sources: Sequence[str], texts: Sequence[str], group: np.ndarray) -> np.ndarray:
        """COMET's sentence embedding of every row's text, (T, d) float64 (what the centroid
        method clusters), encoded as `exact` encodes them; the sources' are kept for `against`."""
        hyp, src = self._embeddings(self.model(), sources, texts, group)
        self._sources = (list(sources), src)
        return hyp.double().cpu().numpy()

    def against(self, sources: Sequence[str], group: np.ndarray, vectors: np.ndarray, I: np.ndarray,
                references: np.ndarray, K: np.ndarray) -> np.ndarray:
        """COMET's estimator on (the source of row I's list, row I's embedding `vectors[I]`, the
        reference embedding references[K]) of every pair, (P,): a centroid is a mean embedding."""
        import torch

        model = self.model()
        kept = getattr(self, "_sources", None)
        src = kept[1] if kept is not None and kept[0] == list(sources) else self._embeddings(model, sources, [], group)[1]
        hyp = torch.as_tensor(vectors, dtype=src.dtype, device=src.device)
        ref = torch.as_tensor(references, dtype=src.dtype, device=src.device)
        lists = torch.as_tensor(group, device=src.device)
        out = np.zeros(len(I))
        with torch.inference_mode():
            for a in range(0, len(I), 4096):
                i, k = torch.as_tensor(I[a:a + 4096]), torch.as_tensor(K[a:a + 4096])
                out[a:a + len(i)] = model.estimate(src[lists[i]], hyp[i], ref[k]).score.double().cpu().numpy()
        return out

    def _embeddings(self, model, sources, texts, group):
        """(embedding of every row's text, of every list's source), each distinct string encoded once;
        the last block's kept, so that a decoder that reads a block twice (c2f: the aggregate
        method, then pairs) encodes it once."""
        key = (tuple(texts), tuple(sources))
        kept = getattr(self, "_block", None)
        if kept is None or kept[0] != key:
            kept = self._block = (key, self._encode(model, sources, texts))
        return kept[1]

    def _encode(self, model, sources, texts):
        distinct = list(dict.fromkeys([*texts, *sources]))
        position = {t: k for k, t in enumerate(distinct)}
        table = sentence_embeddings(model, distinct, self.batch_size, self.device)
        return table[[position[t] for t in texts]], table[[position[s] for s in sources]]
