"""Hypotheses/second of `rerank features` (s_s) on a real n-best list, per model preset.

Reference run in the same process: encoding every hypothesis as it comes (no de-duplication
of repeated strings), so the printed ratio shows what the cache and chunking buy; its values
must equal the features' bit for bit (a vector does not depend on its batch). Models are
randomly initialised at each preset's sizes (speed does not depend on the weights). Each time
is the best of --repeat runs (the machine may be shared).

    python benchmarks/bench_features.py [--nbest F --src F] [--presets cpu,paper] [--sentences 1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from rerank.embeddings.encoder import Encoder
from rerank.embeddings.model import MLMME, PRESETS, ModelConfig
from rerank.embeddings.tokenize import tokenize
from rerank.embeddings.vocab import Vocab
from rerank.recipes.demo import data_dir, shipped_lists
from rerank.embeddings.features import embedding_features, row_dots
from rerank.features import FeatureContext
from rerank.formats import read_nbest
from rerank.io import read_lines


def random_encoder(preset: str, sources, hyps) -> Encoder:
    vocabs = {"en": Vocab.build(tokenize(s, "en") for s in sources), "de": Vocab.build(tokenize(h, "de") for h in hyps)}
    cfg = ModelConfig(languages=["en", "de"], vocab_sizes={k: len(v) for k, v in vocabs.items()}, **PRESETS[preset])
    torch.manual_seed(0)
    return Encoder(MLMME(cfg), vocabs)


def best_of(repeat: int, run):
    """(smallest wall-clock seconds over `repeat` calls of run(), the last result)."""
    best, result = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - t0)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nbest", help="n-best list (default: the shipped optimised test_2016 50-best)")
    parser.add_argument("--src", help="source sentences (default: shipped test_2016_flickr.en.gz)")
    parser.add_argument("--presets", default="cpu,paper")
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=1, help="runs per measurement; the fastest counts")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.nbest is None:
        lists = shipped_lists()
        key = max((k for k in lists), key=lambda k: (k[1], k[0] == "optimised"))
        args.nbest = lists[key]["test_2016"]
    args.src = args.src or os.path.join(data_dir(), "multi30k", "test_2016_flickr.en.gz")
    nbest = read_nbest(args.nbest)
    nbest = nbest.select_sentences(range(min(args.sentences, nbest.n_sentences)))
    sources = read_lines(args.src)[: nbest.n_sentences]
    hyps = list(nbest.hyps)
    distinct = len(set(hyps))
    print(f"{args.nbest}: {nbest.n_sentences} sentences, {nbest.n_hyps} hypotheses ({distinct} distinct), "
          f"{torch.get_num_threads()} threads, device {args.device}")
    print(f"{'preset':<8} {'features hyps/s':>16} {'no-cache hyps/s':>16} {'speed-up':>9}")
    for preset in args.presets.split(","):
        encoder = random_encoder(preset, sources, hyps)
        context = FeatureContext(sources=sources, src_lang="en", tgt_lang="de", device=args.device)
        fast, values = best_of(args.repeat, lambda: embedding_features(nbest, encoder, ["s_s"], context)["s_s"])

        def naive():
            src = encoder.encode(sources, "en", device=args.device)
            every = encoder.encode(hyps, "de", device=args.device, empty="zero")
            return row_dots(every, src[nbest.sentence_of_hyp])

        slow, reference = best_of(args.repeat, naive)
        assert np.array_equal(values, reference), "cached and uncached features differ"
        print(f"{preset:<8} {nbest.n_hyps / fast:>16,.0f} {nbest.n_hyps / slow:>16,.0f} {slow / fast:>8.2f}x")


if __name__ == "__main__":
    main()
