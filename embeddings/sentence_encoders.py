"""`sim`: cosine similarity of the source and the hypothesis under a users' sentence encoder
(`sentence-transformers`, a local directory), as a `rerank features` plug-in.

Cross-lingual encoders (LaBSE, multilingual MiniLM/mpnet, distilled USE) put a sentence and its
translation close together, so `sim` rewards hypotheses that keep the source's meaning, the same
role as this project's s_s under MLMME (embeddings/features.py), with the user's stronger encoder.
Each distinct source and hypothesis is encoded once, in length-sorted batches, and the embeddings
are L2-normalised, so `sim` = cos(source, hypothesis) exactly as sentence-transformers' own
`similarity` (cosine) computes it. Scores are cached by model digest and pair (rerank.score_cache).
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass

import numpy as np

from rerank import distributed
from rerank.device import resolve_device
from rerank.consensus import VectorUtility
from rerank.errors import InputError, needs_neural, require
from rerank.features import Feature, FeatureContext
from rerank.options import PATH, POSITIVE_INT, option
from rerank.progress import progress_bar, track, transformers_bars_off
from rerank.score_cache import block_ranges, lookup, model_digest, open_cache


@dataclass(frozen=True)
class SimOptions:
    """Options of the sim feature (flags of `rerank features`: --sim-model, --sim-batch-size)."""

    model: str | None = option(None, "sentence-transformers model directory, e.g. a multilingual encoder that maps "
                               "the source and target languages together", check=PATH, metavar="DIR",
                               default_text="none, needed for sim")
    batch_size: int = option(64, "sentences per batch", check=POSITIVE_INT)


def encoder_load_errors() -> tuple[type[Exception], ...]:
    """What loading a sentence-transformers directory raises when its files are bad, found by
    loading directories with each file removed, cut or garbled: OSError
    (no weights, a config that is no JSON to transformers), ValueError (JSON and UTF-8 errors of
    the files sentence-transformers reads itself, no tokenizer, an unknown model type, an empty
    module list), TypeError (a module without its config: Pooling without its dimension),
    RuntimeError (weights of another shape), the safetensors and unpickling errors of a damaged
    weights file. Anything else is a bug, not bad input."""
    import pickle

    from safetensors import SafetensorError

    return OSError, ValueError, TypeError, RuntimeError, EOFError, pickle.UnpicklingError, SafetensorError


def load_sentence_encoder(path: str, device):
    """A SentenceTransformer from a local directory, offline; a bad directory is an InputError
    (its cause the loader's own exception, one of `encoder_load_errors`)."""
    with needs_neural("the sim feature"):
        from sentence_transformers import SentenceTransformer
    if not os.path.isdir(path) or not (os.path.isfile(os.path.join(path, "modules.json"))
                                       or os.path.isfile(os.path.join(path, "config.json"))):
        raise InputError("not a sentence-transformers model directory (no modules.json or config.json)", path)
    expected = encoder_load_errors()
    try:
        return SentenceTransformer(path, device=str(device), local_files_only=True)
    except expected as exc:
        failure = exc
    with tempfile.TemporaryDirectory(prefix="rerank-st-") as mirror:
        if _portable_mirror(path, mirror):
            try:
                return SentenceTransformer(mirror, device=str(device), local_files_only=True)
            except expected:   # the first failure is the one to report
                pass
    message = " ".join(str(failure).split())[:300]
    raise InputError(f"cannot load the sentence encoder: {type(failure).__name__}: {message}", path) from failure


def _portable_mirror(path: str, mirror: str) -> bool:
    """Link the model's files into `mirror`, with every tokenizer_config.json that names a tokenizer
    class this transformers lacks (transformers 5 saves "TokenizersBackend", 4.x has no such class)
    rewritten to the portable PreTrainedTokenizerFast over tokenizer.json. False if nothing to rewrite."""
    import transformers

    rewritten = False
    for root, _, names in os.walk(path):
        target = os.path.join(mirror, os.path.relpath(root, path))
        os.makedirs(target, exist_ok=True)
        for name in names:
            source = os.path.join(root, name)
            config = None
            if name == "tokenizer_config.json" and os.path.isfile(os.path.join(root, "tokenizer.json")):
                config = _json_object(source)
                if config is not None and hasattr(transformers, str(config.get("tokenizer_class"))):
                    config = None
            if config is None:
                os.symlink(os.path.abspath(source), os.path.join(target, name))
                continue
            config["tokenizer_class"] = "PreTrainedTokenizerFast"
            config.pop("backend", None)
            with open(os.path.join(target, name), "w", encoding="utf-8") as f:
                json.dump(config, f)
            rewritten = True
    return rewritten


def _json_object(path: str) -> dict | None:
    """The JSON object of a file; None for one that is unreadable or no JSON object (the first
    load's error is then the one reported)."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):   # ValueError: JSON and UTF-8 errors
        return None
    return data if isinstance(data, dict) else None


def cosine_pairs(encoder, lefts: list[str], rights: list[str], batch_size: int, progress=False) -> np.ndarray:
    """cos(left_i, right_i), each distinct sentence encoded once (`normalized_embeddings`)."""
    texts = list(dict.fromkeys(lefts + rights))
    position = {t: i for i, t in enumerate(texts)}
    vectors = normalized_embeddings(encoder, texts, batch_size, progress)
    left = vectors[[position[t] for t in lefts]]
    right = vectors[[position[t] for t in rights]]
    return np.einsum("ij,ij->i", left, right)


def normalized_embeddings(encoder, texts: list[str], batch_size: int, progress=False) -> np.ndarray:
    """The L2-normalised embedding of every text, float64 (len(texts), d), in batches of
    `batch_size` sentences of similar length, cut as sentence-transformers cuts them (its argsort of
    minus the character count). Each batch is encoded on its own, so a vector depends on its batch
    alone: under torchrun the ranks encode whole batches each (rerank.distributed) and the vectors
    are those of one process."""
    order = np.argsort([-len(t) for t in texts]).tolist()   # the order sentence-transformers sorts in
    batches = [order[k:k + batch_size] for k in range(0, len(order), batch_size)]

    def encode(a: int, b: int) -> np.ndarray:
        return np.concatenate([encoder.encode([texts[i] for i in batch], batch_size=len(batch), convert_to_numpy=True,
                                              normalize_embeddings=True, show_progress_bar=False)
                               for batch in track(batches[a:b], progress, "sim", unit="batch")])

    parts = distributed.map_parts(encode, len(batches), [sum(len(texts[i]) for i in batch) for batch in batches])
    vectors = np.zeros((len(texts), parts[0].shape[1] if parts else 0), dtype=np.float32)
    vectors[order] = distributed.concat(parts, vectors[:0])
    return vectors.astype(np.float64)


class SimMBRUtility(VectorUtility):
    """The cosine of a sentence-transformers encoder as an MBR utility (`--mbr-utility sim
    --mbr-model DIR`, entry-point group rerank.mbr_utilities): U(h_i, h_j) = e_i . e_j for the
    L2-normalised embeddings, each distinct hypothesis encoded once; exact = aggregate
    (rerank.consensus.VectorUtility). The source is not read."""

    def __init__(self, path: str, batch_size: int | None = 64, device=None, cache: str | None = None,
                 lang: str | None = None):
        require(("torch", "sentence_transformers"), "the sim MBR utility")
        self.path, self.batch_size, self.device = path, batch_size or 64, resolve_device(device)
        self._encoder = None

    def vectors(self, texts: list[str]) -> np.ndarray:
        if self._encoder is None:
            with transformers_bars_off():
                self._encoder = load_sentence_encoder(self.path, self.device)
        distinct = list(dict.fromkeys(texts))
        position = {t: i for i, t in enumerate(distinct)}
        return normalized_embeddings(self._encoder, distinct, self.batch_size)[[position[t] for t in texts]]


class SimFeature(Feature):
    columns = ("sim",)
    description = "cosine of source and hypothesis under a sentence-transformers encoder (--sim-model)"
    Options = SimOptions
    option_prefix = "sim-"
    requires = ("torch", "sentence_transformers")

    def compute(self, nbest, which, context: FeatureContext | None = None, options=None):
        context = context or FeatureContext()
        options = self.make_options(options)
        require(self.requires, "the sim feature")
        if not options.model:
            raise InputError("sim needs a sentence-transformers model directory")
        if context.sources is None:
            raise InputError("sim needs the source sentences")
        context.use_threads()
        pairs = list(dict.fromkeys(zip((context.sources[i] for i in nbest.sentence_of_hyp.tolist()), nbest.hyps)))
        position = {p: i for i, p in enumerate(pairs)}
        values = np.zeros(len(pairs))
        cache = open_cache(context.cache)
        try:
            namespace = model_digest(options.model) + "\0sim" if cache is not None else ""
            found = lookup(cache, namespace, pairs, "sim")
            for i, (value, _) in found.items():
                values[i] = value
            todo = [i for i in range(len(pairs)) if i not in found]
            if todo:
                with transformers_bars_off():
                    encoder = load_sentence_encoder(options.model, resolve_device(context.device))
                # a block of pairs at a time, each written to the cache as it finishes (a killed run
                # keeps them); the bar counts pairs
                with progress_bar(context.progress, "sim", len(todo), unit="pair") as bar:
                    for start, stop in block_ranges([1] * len(todo)):
                        block = todo[start:stop]
                        values[block] = cosine_pairs(encoder, [pairs[i][0] for i in block],
                                                     [pairs[i][1] for i in block], options.batch_size)
                        if cache is not None:
                            cache.put(namespace, [pairs[i] for i in block], values[block], np.ones(len(block)))
                        bar.update(len(block))
        finally:
            if cache is not None:
                cache.close()
        index = np.array([position[p] for p in zip((context.sources[i] for i in nbest.sentence_of_hyp.tolist()),
                                                    nbest.hyps)], dtype=np.int64)
        return {"sim": values[index]} if "sim" in which else {}
