"""Embedding features for n-best lists: s_s(source, hyp), s_i(image, hyp), s_i(image, source),
registered as the `mlmme` plug-in of `rerank features` (entry-point group rerank.features).

Sentences are processed in chunks of consecutive sentences; inside a chunk every distinct
hypothesis string is encoded once (n-best lists repeat strings across and within lists), so
memory stays bounded by the chunk, not the list. A vector does not depend on which strings are
encoded with it (see embeddings.encoder) and the cosines are summed in float64, so a shard of a
list (`rerank features --shard`) gets exactly the values of the unsharded run, and so do the
torchrun ranks, which split every chunk into sentence ranges of about equal hypothesis counts
(rerank.distributed).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rerank import distributed
from rerank.consensus import VectorUtility
from rerank.dedup import distinct_index
from rerank.embeddings.numpy_encoder import BACKENDS
from rerank.errors import InputError, require
from rerank.features import Feature, FeatureContext
from rerank.nbest import NBestList
from rerank.options import PATH, POSITIVE_INT, option
from rerank.progress import progress_bar

FEATURES = ("s_s", "s_i", "s_i_src")


def check_request(encoder, which: Sequence[str], src_lang: str, tgt_lang: str, has_sources: bool, has_images: bool,
                  model_path: str) -> None:
    unknown = [w for w in which if w not in FEATURES]
    if unknown:
        raise InputError(f"unknown feature {unknown[0]!r} (known: {', '.join(FEATURES)})")
    for lang in {tgt_lang} | ({src_lang} if {"s_s", "s_i_src"} & set(which) else set()):
        if lang not in encoder.languages:
            raise InputError(f"the model encodes {', '.join(encoder.languages)}, not {lang!r}", model_path)
    if {"s_s", "s_i_src"} & set(which) and not has_sources:
        raise InputError("s_s and s_i_src need the source sentences")
    if {"s_i", "s_i_src"} & set(which):
        if not encoder.has_images:
            raise InputError("s_i needs a model trained with images; this one is text-only (no W_I)", model_path)
        if not has_images:
            raise InputError("s_i needs image features (a .npy/.npz file, one row per sentence)")


def row_dots(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise dot products of float32 vectors, multiplied and summed in float64 (exact
    products; each row summed on its own, so a value does not depend on the other rows)."""
    return (a.astype(np.float64) * b.astype(np.float64)).sum(axis=1)


def embedding_features(nbest: NBestList, encoder, which: Sequence[str], context: FeatureContext | None = None,
                       images: np.ndarray | None = None, chunk_sentences: int = 2000,
                       batch_size: int = 256) -> dict[str, np.ndarray]:
    """Feature name -> (n_hyps,) float64 similarities. Empty hypotheses score 0. `context` gives
    what the run shares with the other features (rerank.features.FeatureContext; None: its
    defaults): the hypotheses' language `tgt_lang`, the `sources` (one per n-best sentence; s_s,
    s_i_src) in `src_lang`, the `device` and the `progress` bar; its other fields are the plug-in's
    (`MLMMEFeatures.compute`: threads, notes, the shard's place). `images`: one image feature row
    per n-best sentence (s_i, s_i_src)."""
    context = context or FeatureContext()
    sources = context.sources
    device = None   # the numpy encoder: the CPU
    if getattr(encoder, "backend", "torch") == "torch":
        from rerank.device import resolve_device

        device = resolve_device(context.device)  # once: a CUDA fallback is said once, an unknown device refused early
    if sources is not None and len(sources) != nbest.n_sentences:
        raise InputError(f"{len(sources)} source sentences for {nbest.n_sentences} n-best sentences")
    if images is not None and len(images) != nbest.n_sentences:
        raise InputError(f"{len(images)} image feature rows for {nbest.n_sentences} n-best sentences")
    out = {name: np.zeros(nbest.n_hyps) for name in which}
    bar = progress_bar(context.progress, "features", total=nbest.n_hyps, unit="hyp")
    for start in range(0, nbest.n_sentences, chunk_sentences):
        end = min(start + chunk_sentences, nbest.n_sentences)
        lo, hi = int(nbest.offsets[start]), int(nbest.offsets[end])

        def columns(a: int, b: int, start=start) -> dict[str, np.ndarray]:
            return _sentence_columns(nbest, encoder, which, context, images, start + a, start + b, batch_size, device)

        # torchrun: each rank takes sentences of about equal hypothesis counts (rerank.distributed);
        # a vector does not depend on the sentences encoded with it, so neither do the values
        parts = distributed.map_parts(columns, end - start, np.diff(nbest.offsets[start:end + 1]))
        for name in which:
            out[name][lo:hi] = distributed.concat([part[name] for part in parts])
        bar.update(hi - lo)
    bar.close()
    return out


def _sentence_columns(nbest: NBestList, encoder, which, context: FeatureContext, images, start: int, end: int,
                      batch_size: int, device) -> dict[str, np.ndarray]:
    """The columns of the hypotheses of sentences start..end-1, each distinct string encoded once."""
    lo, hi = int(nbest.offsets[start]), int(nbest.offsets[end])
    sent = nbest.sentence_of_hyp[lo:hi]
    index, distinct = distinct_index(nbest.hyps[lo:hi])
    hyp_vecs = encoder.encode(distinct, context.tgt_lang, batch_size=batch_size, device=device, empty="zero")[index]
    src_vecs = img_vecs = None
    if context.sources is not None and {"s_s", "s_i_src"} & set(which):
        src_vecs = encoder.encode(list(context.sources[start:end]), context.src_lang, batch_size=batch_size,
                                  device=device, empty="zero")
    if images is not None and {"s_i", "s_i_src"} & set(which):
        img_vecs = encoder.encode_images(images[start:end], device=device)
    local = sent - start
    out = {}
    if "s_s" in which:
        out["s_s"] = row_dots(hyp_vecs, src_vecs[local])
    if "s_i" in which:
        out["s_i"] = row_dots(hyp_vecs, img_vecs[local])
    if "s_i_src" in which:
        out["s_i_src"] = row_dots(src_vecs, img_vecs)[local]
    return out


@dataclass(frozen=True)
class MLMMEOptions:
    """Options of the mlmme plug-in (flags of `rerank features`: -m/--model, --prefix, --images,
    --mlmme-backend, --batch-size, --chunk-sentences)."""

    models: tuple[str, ...] = option((), "embedding model (NAME.pt with NAME.json beside it); repeat for several",
                                     flag=("-m", "--model"), many=True, check=PATH)
    prefixes: tuple[str, ...] = option((), "column-name prefix for the matching --model (required for several)",
                                       flag="--prefix", many=True, default_text="none for one model")
    images: str | None = option(None, "image features (.npy/.npz), one row per n-best sentence", check=PATH)
    backend: str = option("auto", "encoder: numpy (no torch, the CPU), torch (also a GPU), or auto: numpy unless "
                          "--device asks for a GPU or the model is a variant only torch runs",
                          flag="--mlmme-backend", choices=BACKENDS)
    batch_size: int = option(256, "rows of every torch encoder batch; its values depend on it, not on which "
                             "sentences share a batch, so give shards the same value (the numpy encoder's "
                             "depend on neither)", check=POSITIVE_INT)
    chunk_sentences: int = option(2000, "n-best sentences encoded per chunk (bounds memory)", check=POSITIVE_INT)


class MLMMEFeatures(Feature):
    """s_s, s_i, s_i_src from one or more MLMME/VSE models (`-m MODEL`, each with `--prefix`)."""

    columns = FEATURES
    description = ("cosine similarities of MLMME/VSE embeddings: s_s = v_src·v_hyp, s_i = d_img·v_hyp, "
                   "s_i_src = d_img·v_src (broadcast); empty hypotheses get 0")
    Options = MLMMEOptions
    requires = ("sacremoses",)   # and torch for the torch encoder (MLMMEOptions.backend)

    def default_columns(self, options):
        if not options.models:
            return []
        return ["s_s"] + (["s_i"] if options.images else [])

    def compute(self, nbest: NBestList, which, context: FeatureContext | None = None,
                options: MLMMEOptions | None = None) -> dict[str, np.ndarray]:
        context = context or FeatureContext()
        options = self.make_options(options)
        what = f"the {', '.join(which)} feature"
        require(("torch",) * (options.backend == "torch") + self.requires, what)
        from rerank.embeddings.data import load_features
        from rerank.embeddings.numpy_encoder import load_encoder

        if not options.models:
            raise InputError(f"{', '.join(which)} need an embedding model (MODEL.pt)")
        models, prefixes = list(options.models), list(options.prefixes)
        if len(models) > 1 and len(prefixes) != len(models):
            raise InputError(f"{len(models)} models need {len(models)} column prefixes to name their columns")
        if len(prefixes) > len(models):
            raise InputError(f"{len(prefixes)} column prefixes for {len(models)} models")
        images = None
        if options.images:
            whole = load_features(options.images, context.total_sentences or nbest.n_sentences)
            images = whole[context.first_sentence:context.first_sentence + nbest.n_sentences]
        out = {}
        for model_path, prefix in zip(models, prefixes or [""]):
            encoder = load_encoder(model_path, options.backend, context.device, context.threads)
            if encoder.backend == "torch":
                context.use_threads()
            check_request(encoder, which, context.src_lang, context.tgt_lang, context.sources is not None,
                          images is not None, model_path)
            if images is not None and encoder.has_images and images.shape[1] != encoder.image_dim:
                raise InputError(f"feature dimension {images.shape[1]}, but the model {model_path} expects "
                                 f"{encoder.image_dim}", options.images)
            if not encoder.has_images:
                context.notes.append(f"{model_path} is a text-only model (trained without image features)")
            columns = embedding_features(nbest, encoder, which, context, images, options.chunk_sentences,
                                         options.batch_size)
            out.update({prefix + name: values for name, values in columns.items()})
        return out


class MLMMEMBRUtility(VectorUtility):
    """The cosine of an MLMME/VSE model's embeddings of the target language as an MBR utility
    (`rerank features --which mbr --mbr-utility mlmme --mbr-model MODEL.pt`, entry-point group
    rerank.mbr_utilities): U(h_i, h_j) = v_i . v_j of the model's unit vectors (empty hypotheses: 0),
    each distinct hypothesis encoded once, in float64; exact = aggregate
    (rerank.consensus.VectorUtility). The source is not read. `backend`: the encoder
    (embeddings.numpy_encoder.load_encoder: auto, numpy or torch); `threads` the numpy encoder's."""

    def __init__(self, path: str, batch_size: int | None = None, device=None, cache: str | None = None,
                 lang: str = "de", backend: str = "auto", threads: int | None = None):
        require(("torch",) * (backend == "torch") + ("sacremoses",), "the mlmme MBR utility")
        from rerank.embeddings.numpy_encoder import load_encoder

        self.encoder = load_encoder(path, backend, device, threads)
        if lang not in self.encoder.languages:
            raise InputError(f"the model encodes {', '.join(self.encoder.languages)}, not {lang!r}", path)
        self.lang, self.batch_size = lang, batch_size or 256
        self.device = device if self.encoder.backend == "torch" else None

    @classmethod
    def from_context(cls, path: str, batch_size: int | None, context: FeatureContext) -> "MLMMEMBRUtility":
        """The utility of rerank.consensus.make_utility: `context` gives the device, the threads
        (torch's, applied only when the torch encoder serves, or the numpy encoder's) and the language."""
        utility = cls(path, batch_size, context.device, context.cache, lang=context.tgt_lang, threads=context.threads)
        if utility.encoder.backend == "torch":
            context.use_threads()
        return utility

    def vectors(self, texts) -> np.ndarray:
        index, distinct = distinct_index(texts)
        vectors = self.encoder.encode(distinct, self.lang, batch_size=self.batch_size, device=self.device,
                                      empty="zero")
        return vectors.astype(np.float64)[index]
