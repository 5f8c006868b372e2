"""`rerank features`: add embedding similarities s_s, s_i (and s_i_src) as n-best columns."""

from __future__ import annotations

import sys

import numpy as np

from rerank.commands._common import FORMAT_HELP, add_nbest_input, add_output_format, load_nbest
from rerank.errors import InputError
from rerank.features import FEATURES, check_request, embedding_features, shard_range
from rerank.formats import write_nbest
from rerank.io import read_lines


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "features", help="add embedding features s_s(source, hyp) and s_i(image, hyp) to an n-best list",
        description="Encode the source sentences, every distinct hypothesis and (optionally) the "
        "images with trained MLMME/VSE models, and add the cosine similarities as named columns "
        "next to the existing features: s_s = v_src·v_hyp, s_i = d_img·v_hyp, s_i_src = "
        "d_img·v_src (broadcast). Several --model options (each with its own --prefix) add "
        "several sets of columns. Empty hypotheses get 0. --shard i/N processes the i-th of N "
        "sentence ranges and keeps the original ids, so `cat` of the N outputs (Moses/Joshua) "
        "equals the unsharded output. " + FORMAT_HELP,
    )
    add_nbest_input(parser, positional=False)
    parser.add_argument("--nbest", required=True, help="input n-best file")
    parser.add_argument("-m", "--model", action="append", required=True, help="embedding model (NAME.pt with NAME.json beside it)")
    parser.add_argument("--prefix", action="append", help="column-name prefix for the matching --model (default: none for one model; required for several)")
    parser.add_argument("--src", help="source sentences, one per n-best sentence (raw text)")
    parser.add_argument("--src-lang", default="en", help="source language (default en)")
    parser.add_argument("--tgt-lang", default="de", help="hypothesis language (default de)")
    parser.add_argument("--images", help="image features (.npy/.npz), one row per n-best sentence, e.g. test_2016-resnet50-avgpool.npy")
    parser.add_argument("--which", default=None, help=f"comma-separated features out of {', '.join(FEATURES)} (default: s_s, plus s_i when --images is given)")
    parser.add_argument("--shard", help="process shard i of N (e.g. 1/4) of the sentences")
    parser.add_argument("--batch-size", type=int, default=256, help="sentences per encoder batch")
    parser.add_argument("--chunk-sentences", type=int, default=2000, help="n-best sentences encoded per chunk (bounds memory)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (falls back to the CPU with a message)")
    parser.add_argument("-o", "--output", required=True, help="output n-best file")
    add_output_format(parser)
    parser.set_defaults(func=run)


def _load_images(path: str, n_rows: int):
    from embeddings.data import load_features

    return np.array(load_features(path, n_rows))  # a writable copy, not the read-only memory map


def run(args) -> int:
    from embeddings.encoder import Encoder

    prefixes = args.prefix or []
    if len(args.model) > 1 and len(prefixes) != len(args.model):
        raise InputError(f"{len(args.model)} models need {len(args.model)} --prefix options to name their columns")
    if len(prefixes) > len(args.model):
        raise InputError(f"{len(prefixes)} --prefix options for {len(args.model)} models")
    prefixes = prefixes or [""]
    which = args.which.split(",") if args.which else ["s_s"] + (["s_i"] if args.images else [])

    nbest, _ = load_nbest(args)
    start, end = shard_range(nbest.n_sentences, args.shard)
    sources = None
    if args.src:
        sources = read_lines(args.src)
        if len(sources) != nbest.n_sentences:
            raise InputError(f"{len(sources)} source lines for {nbest.n_sentences} n-best sentences", args.src)
        sources = sources[start:end]
    images = _load_images(args.images, nbest.n_sentences)[start:end] if args.images else None
    part = nbest.select_sentences(range(start, end)) if (start, end) != (0, nbest.n_sentences) else nbest

    for model_path, prefix in zip(args.model, prefixes):
        encoder = Encoder.load(model_path)
        check_request(encoder, which, args.src_lang, args.tgt_lang, sources is not None, images is not None, model_path)
        if not encoder.has_images:
            print(f"note: {model_path} is a text-only model (trained without image features)", file=sys.stderr)
        columns = embedding_features(
            part, encoder, which, args.tgt_lang, sources=sources, src_lang=args.src_lang, images=images,
            chunk_sentences=args.chunk_sentences, batch_size=args.batch_size, device=args.device,
            progress=sys.stderr.isatty(),
        )
        for name in which:
            column = prefix + name
            if column in part.feature_names:
                raise InputError(f"the n-best already has a feature {column!r}: give --prefix", args.nbest)
            part = part.with_feature(column, columns[name])
    write_nbest(part, args.output, args.out_format, first_id=start)
    return 0
