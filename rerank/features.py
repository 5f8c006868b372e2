"""Embedding features for n-best lists: s_s(source, hyp), s_i(image, hyp), s_i(image, source).

Sentences are processed in chunks of consecutive sentences; inside a chunk every distinct
hypothesis string is encoded once (n-best lists repeat strings across and within lists), so
memory stays bounded by the chunk, not the list.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import numpy as np
from tqdm import tqdm

from rerank.errors import InputError
from rerank.nbest import NBestList

FEATURES = ("s_s", "s_i", "s_i_src")


def shard_range(n_sentences: int, shard: str | None) -> tuple[int, int]:
    """Sentence range [start, end) of shard `i/N` (1-based i); whole range for None."""
    if not shard:
        return 0, n_sentences
    try:
        i, n = (int(x) for x in shard.split("/"))
    except ValueError:
        raise InputError(f"--shard must look like i/N (e.g. 2/8), got {shard!r}") from None
    if not 1 <= i <= n:
        raise InputError(f"--shard {shard}: i must be between 1 and N")
    return (i - 1) * n_sentences // n, i * n_sentences // n


def check_request(encoder, which: Sequence[str], src_lang: str, tgt_lang: str, has_sources: bool, has_images: bool,
                  model_path: str) -> None:
    unknown = [w for w in which if w not in FEATURES]
    if unknown:
        raise InputError(f"unknown feature {unknown[0]!r} (known: {', '.join(FEATURES)})")
    for lang in {tgt_lang} | ({src_lang} if {"s_s", "s_i_src"} & set(which) else set()):
        if lang not in encoder.languages:
            raise InputError(f"the model encodes {', '.join(encoder.languages)}, not {lang!r}", model_path)
    if {"s_s", "s_i_src"} & set(which) and not has_sources:
        raise InputError("s_s and s_i_src need the source sentences (--src)")
    if {"s_i", "s_i_src"} & set(which):
        if not encoder.has_images:
            raise InputError("s_i needs a model trained with images; this one is text-only (no W_I)", model_path)
        if not has_images:
            raise InputError("s_i needs image features (--images FILE.npy, one row per sentence)")


def embedding_features(
    nbest: NBestList,
    encoder,
    which: Sequence[str],
    tgt_lang: str,
    sources: Sequence[str] | None = None,
    src_lang: str | None = None,
    images: np.ndarray | None = None,
    chunk_sentences: int = 2000,
    batch_size: int = 256,
    device: str = "cpu",
    progress: bool = False,
) -> dict[str, np.ndarray]:
    """Feature name -> (n_hyps,) float64 similarities. Empty hypotheses score 0."""
    if sources is not None and len(sources) != nbest.n_sentences:
        raise InputError(f"{len(sources)} source sentences for {nbest.n_sentences} n-best sentences")
    if images is not None and len(images) != nbest.n_sentences:
        raise InputError(f"{len(images)} image feature rows for {nbest.n_sentences} n-best sentences")
    out = {name: np.zeros(nbest.n_hyps) for name in which}
    starts = range(0, nbest.n_sentences, chunk_sentences)
    bar = tqdm(total=nbest.n_hyps, desc="features", unit="hyp", disable=not progress, file=sys.stderr)
    for start in starts:
        end = min(start + chunk_sentences, nbest.n_sentences)
        lo, hi = int(nbest.offsets[start]), int(nbest.offsets[end])
        sent = nbest.sentence_of_hyp[lo:hi]
        distinct: dict[str, int] = {}
        index = np.array([distinct.setdefault(h, len(distinct)) for h in nbest.hyps[lo:hi]], dtype=np.int64)
        hyp_vecs = encoder.encode(list(distinct), tgt_lang, batch_size=batch_size, device=device, empty="zero")[index]
        src_vecs = img_vecs = None
        if sources is not None and {"s_s", "s_i_src"} & set(which):
            src_vecs = encoder.encode(list(sources[start:end]), src_lang, batch_size=batch_size, device=device, empty="zero")
        if images is not None and {"s_i", "s_i_src"} & set(which):
            img_vecs = encoder.encode_images(images[start:end], device=device)
        local = sent - start
        if "s_s" in which:
            out["s_s"][lo:hi] = np.einsum("ij,ij->i", hyp_vecs, src_vecs[local])
        if "s_i" in which:
            out["s_i"][lo:hi] = np.einsum("ij,ij->i", hyp_vecs, img_vecs[local])
        if "s_i_src" in which:
            out["s_i_src"][lo:hi] = np.einsum("ij,ij->i", src_vecs, img_vecs)[local]
        bar.update(hi - lo)
    bar.close()
    return out
