"""Reference-based metrics that score (hypothesis, reference) pairs with a user's local model,
BERTScore (rerank.metrics.bertscore) and BLEURT (rerank.metrics.bleurt): what they share, so that
each is usable wherever COMET is.

- `PairModel`: the model of one metric, loaded on first use, that scores a list of distinct pairs
  in batches bounded by tokens (length-sorted) and hands each finished block to the score cache;
- `cached_pair_scores`: each distinct pair scored once, cached (rerank.score_cache) under the
  model's digest and settings, as COMET's `cached_scores` is;
- `PairModelMetric`: the `rerank eval`/`report` metric (statistics [score, 1], a mean over
  sentences, so significance treats it like any metric), a sentence's references reduced by the
  model's rule (BERTScore: their maximum, as `bert_score.score` takes it; BLEURT: their mean);
- `PairModelFeature`: the column of `rerank features` against the given references (`-r`), what
  `rerank tune --metric column:NAME` tunes toward and `rerank oracle --metric column:NAME` picks by;
- `PairModelUtility`: the MBR utility U(h_i, h_j) = score(hypothesis h_i, reference h_j), exact
  only (both models read the two texts together: no vector form, no aggregate reference).

Higher is better for both.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np

from rerank.errors import InputError, require
from rerank.features import Feature, FeatureContext
from rerank.metrics.base import MeanOfSegments

log = logging.getLogger(__name__)

Pair = tuple[str, str]   # (hypothesis, reference)
Store = Callable[[list[int], np.ndarray], None]

MAX_TOKENS = 8192   # padded tokens (rows x longest row) per batch (rerank.score_cache.token_batches)
MAX_ROWS = 64       # rows per batch
# a batch's padded tokens at most (1 + PAD_SLACK) x its real ones, once it holds PAD_FLOOR padded
# tokens (token_batches' slack and floor; below the floor a forward's own overhead counts): chosen
# on BLEURT-20's size, docs/benchmarks/bleurt_port.md
PAD_SLACK = 0.1
PAD_FLOOR = 256


def pair_batches(lengths: Sequence[int], max_rows: int) -> list[list[int]]:
    """The pair models' batches of items of these token lengths: rerank.score_cache.token_batches
    within MAX_TOKENS, `max_rows` and the padding bound (PAD_SLACK past PAD_FLOOR)."""
    from rerank.score_cache import token_batches

    return token_batches(lengths, MAX_TOKENS, max_rows, PAD_SLACK, PAD_FLOOR)


def model_directory(path: str, what: str, needs: Sequence[str] = ("config.json",)) -> str:
    """`path` when it is a directory holding the files `needs`, else an InputError in one line."""
    if not os.path.isdir(path):
        raise InputError(f"{what} needs a model directory; this is " + ("a file" if os.path.exists(path) else
                                                                         "not there"), path)
    missing = [name for name in needs if not os.path.isfile(os.path.join(path, name))]
    if missing:
        raise InputError(f"not a model directory for {what}: {missing[0]} is missing", path)
    return path


def loading_failed(path: str, what: str, exc: BaseException) -> InputError:
    """The one-line InputError of a model directory that transformers cannot load offline."""
    message = " ".join(str(exc).split())
    return InputError(f"cannot load the model of {what} offline ({type(exc).__name__}: {message[:300]})", path)


class PairModel:
    """The model of a pair metric: `name` (the metric, feature and utility name), `reduce` (how a
    sentence's references combine: mean or max), `package` (whose version the signature names).
    A subclass checks its directory in `__init__` without loading it, and gives `namespace` (the
    score cache's: the model's digest and every setting that changes a raw score), `settings`
    (for the signature) and `score` (the raw scores of distinct pairs); `finish` maps raw scores
    to the metric's (after the cache, so one cache serves every value of such an option)."""

    name: ClassVar[str] = ""
    display: ClassVar[str] = ""
    reduce: ClassVar[str] = "mean"
    package: ClassVar[str] = ""

    def __init__(self, path: str, device: Any = None, batch_size: int | None = None):
        self.path = os.fspath(path)
        self.device_name = device
        self.max_rows = batch_size or MAX_ROWS
        self._loaded: Any = None
        self._device: Any = None

    @property
    def device(self):
        """The torch device of `device_name`, resolved once (a CUDA fallback is said once)."""
        if self._device is None:
            from rerank.device import resolve_device

            self._device = resolve_device(self.device_name)
        return self._device

    def namespace(self) -> str:
        raise NotImplementedError

    def settings(self) -> str:
        return ""

    def score(self, pairs: Sequence[Pair], store: Store | None) -> np.ndarray:
        raise NotImplementedError

    def finish(self, values: np.ndarray) -> np.ndarray:
        return values

    def record(self) -> dict[str, Any]:
        """What an evaluation's config records of the model: its path, device and settings."""
        return {"model": self.path, "device": str(self.device_name or "cpu")}

    def combine(self, values: Sequence[float]) -> float:
        return float(np.max(values) if self.reduce == "max" else np.mean(values))

    def signature(self) -> str:
        from importlib.metadata import PackageNotFoundError, version

        from rerank.score_cache import model_digest

        try:
            package = f"{self.package}:{version(self.package)}"
        except PackageNotFoundError:
            package = f"{self.package}:not-installed"
        name = os.path.basename(os.path.normpath(os.path.abspath(self.path)))
        return (f"{self.name}|model:{name}|sha256:{model_digest(self.path)[:16]}|{self.settings()}|"
                f"{self.reduce}-over-refs|{package}")


def cached_pair_scores(model: PairModel, pairs: Sequence[Pair], cache: str | None, what: str) -> np.ndarray:
    """The model's score of each (hypothesis, reference) of `pairs`, each distinct pair scored once;
    `cache` a score-cache file (None: none). The model is loaded only when some pair is not cached."""
    from rerank.score_cache import lookup, open_cache

    distinct = list(dict.fromkeys(pairs))
    values = np.zeros(len(distinct))
    store = open_cache(cache)
    try:
        namespace = model.namespace() if store is not None else ""
        found = lookup(store, namespace, distinct, what)
        for i, (value, _) in found.items():
            values[i] = value
        todo = [i for i in range(len(distinct)) if i not in found]
        if todo:
            put = None if store is None else (   # each block as it is scored
                lambda items, scores, cache=store: cache.put(namespace, [distinct[todo[k]] for k in items], scores,
                                                              np.ones(len(items))))
            values[todo] = model.score([distinct[i] for i in todo], put)
    finally:
        if store is not None:
            store.close()
    position = {pair: i for i, pair in enumerate(distinct)}
    return model.finish(values[[position[pair] for pair in pairs]])


class PairModelMetric(MeanOfSegments):
    """A pair model as a metric of `rerank eval`/`report`: per sentence the model's score of the
    hypothesis against each of its references (those not None), combined by the model's rule;
    statistics [score, 1] ([0, 0] without a reference); the corpus score is the mean over
    sentences. `prepare_systems` scores the distinct pairs of every system and run at once."""

    decimals = 4

    def __init__(self, model: PairModel, cache: str | None = None):
        self.model, self.cache = model, cache
        self._scores: dict[Pair, float] = {}

    def prepare_systems(self, runs: Sequence[Sequence[str]], refs: Sequence[Sequence[str]]) -> None:
        """Score every distinct (hypothesis, reference) of `runs` once."""
        todo = list(dict.fromkeys((hyp, stream[i]) for hyps in runs for i, hyp in enumerate(hyps) for stream in refs
                                  if stream[i] is not None and (hyp, stream[i]) not in self._scores))
        if todo:
            log.info("%s: %d distinct (hypothesis, reference) pairs", self.display, len(todo))
            scores = cached_pair_scores(self.model, todo, self.cache, f"the {self.name} metric")
            self._scores.update(zip(todo, scores.tolist()))

    def sentence_stats(self, hyps, refs):
        self.prepare_systems([hyps], refs)
        out = np.zeros((len(hyps), 2))
        for i, hyp in enumerate(hyps):
            values = [self._scores[(hyp, stream[i])] for stream in refs if stream[i] is not None]
            if values:
                out[i] = (self.model.combine(values), 1.0)
        return out

    def signature(self):
        return self.model.signature()

    def record(self) -> dict[str, Any]:
        return self.model.record()


class PairModelFeature(Feature):
    """The pair model's column of every hypothesis against its sentence's references
    (`rerank features -r REF`), combined by the model's rule, as the metric scores a sentence."""

    requires: tuple[str, ...] = ("torch", "transformers")

    def make_model(self, options, device) -> PairModel:
        raise NotImplementedError

    def compute(self, nbest, which, context: FeatureContext | None = None, options=None):
        context = context or FeatureContext()
        options = self.make_options(options)
        name = self.columns[0]
        require(self.requires, f"the {name} feature")
        if not options.model:
            raise InputError(f"{name} needs its model directory", option="model")
        if not context.references:
            raise InputError(f"{name} needs the references")
        model = self.make_model(options, context.device)
        sentence = nbest.sentence_of_hyp.tolist()
        counts = [sum(stream[i] is not None for stream in context.references) for i in sentence]
        if 0 in counts:
            raise InputError(f"{name}: sentence {sentence[counts.index(0)] + context.first_sentence} has no "
                             "reference", context.nbest_path)
        context.use_threads()
        pairs = [(hyp, stream[i]) for i, hyp in zip(sentence, nbest.hyps) for stream in context.references
                 if stream[i] is not None]
        scores = iter(cached_pair_scores(model, pairs, context.cache, f"the {name} feature").tolist())
        values = np.array([model.combine([next(scores) for _ in range(k)]) for k in counts])
        return {name: values} if name in which else {}


class PairModelUtility:
    """A pair model as the utility of MBR: U(h_i, h_j) = score(hypothesis h_i, reference h_j), the
    list's own hypotheses as pseudo-references (rerank.consensus), each distinct pair scored once
    and cached. Exact only: the model reads the hypothesis and the reference together, so there is
    no vector of a text to average into an aggregate reference."""

    needs_model = True
    needs_sources = False
    Model: ClassVar[type[PairModel]]

    def __init__(self, path: str, batch_size: int | None = None, device=None, cache: str | None = None,
                 lang: str | None = None):
        self.model = self.Model(path, device=device, batch_size=batch_size)
        self.path, self.cache = self.model.path, cache   # path: what names the utility (its matrix signature)

    def exact(self, sources, texts: Sequence[str], group: np.ndarray, I: np.ndarray, J: np.ndarray) -> np.ndarray:
        """score(texts[i], texts[j]) of every pair (I, J) of rows, (P,)."""
        pairs = [(texts[i], texts[j]) for i, j in zip(I.tolist(), J.tolist())]
        return cached_pair_scores(self.model, pairs, self.cache, f"the {self.model.name} MBR utility")
