"""`rerank embed pseudopairs` (Kadar et al. 2019) and `rerank embed backretrieval` (Fain et al.
2021); the parsers are added by embeddings.command."""

from __future__ import annotations

import argparse
import json
import sys

from rerank.cliargs import bars, positive_int
from rerank.device import add_torch_options, setup_torch
from rerank.errors import InputError
from rerank.io import atomic_write
from rerank.outputs import check_outputs


def percentile(text: str) -> float:
    """argparse type: a percentile in [0, 100]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= value <= 100:
        raise argparse.ArgumentTypeError(f"must be a percentile between 0 and 100, got {text}")
    return value


def k_list(text: str) -> list[int]:
    """argparse type: comma-separated positive integers (recall cut-offs), e.g. 1,5,10."""
    try:
        return sorted({positive_int(x.strip()) for x in text.split(",")})
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: comma-separated positive integers, e.g. 1,5,10 ({exc})") from None


def add_pseudopairs(verbs) -> None:
    p = verbs.add_parser("pseudopairs", help="pair every target caption with its most similar source caption",
                         description="Pseudo-pairs (Kadar et al. 2019): for every --tgt caption, in order, its most "
                         "similar --src caption under the model (cosine), as TSV lines: target caption, source "
                         "caption, cosine (no header). Use the file as extra training data: rerank embed train "
                         "--pseudo-pairs FILE --pseudo-src-lang L --pseudo-tgt-lang L [--init MODEL].")
    p.add_argument("-m", "--model", required=True, help="model .pt (its .json beside it) or run directory")
    p.add_argument("--src", required=True, help="source captions, one per line (gzip ok)")
    p.add_argument("--src-lang", required=True, help="their language")
    p.add_argument("--tgt", required=True, help="target captions, one per line (gzip ok)")
    p.add_argument("--tgt-lang", required=True, help="their language")
    p.add_argument("--filter", type=percentile, metavar="P",
                   help="keep only pairs whose cosine is at or above the P-th percentile of all pairs' cosines "
                   "(25: drop the bottom quarter, 75: keep the top quarter; default: keep all)")
    p.add_argument("-o", "--output", required=True, help="TSV output")
    p.add_argument("--batch-size", type=positive_int, default=256, help="sentences per batch (default: %(default)s)")
    p.add_argument("--quiet", action="store_true", help="no progress bar (default: bars on stderr when it is a terminal)")
    add_torch_options(p)
    p.set_defaults(func=run_pseudopairs)


def add_backretrieval(verbs) -> None:
    b = verbs.add_parser("backretrieval", help="image-pivoted cross-lingual retrieval metric (no parallel text needed)",
                         description="Backretrieval (Fain et al. 2021): for each source text take its nearest target "
                         "text, that text's image, and the rank of the source text's own image among all source images "
                         "by image cosine; report Recall@k. With --parallel (line i of --src and --tgt are "
                         "translations) also the cross-lingual retrieval XLR R@k. CORR, the paper's baseline "
                         "(Spearman between text and image cosine distances of all source-target pairs), is always given.")
    b.add_argument("-m", "--model", required=True, help="model .pt (its .json beside it) or run directory")
    b.add_argument("--src", required=True, help="source texts, one per line (gzip ok)")
    b.add_argument("--src-lang", required=True, help="their language")
    b.add_argument("--src-images", required=True, help="image features of the source texts (.npy/.npz, one row per line)")
    b.add_argument("--tgt", required=True, help="target texts, one per line (gzip ok)")
    b.add_argument("--tgt-lang", required=True, help="their language")
    b.add_argument("--tgt-images", required=True, help="image features of the target texts (.npy/.npz, one row per line)")
    b.add_argument("--k", type=k_list, default=[10], help="recall cut-offs, comma-separated (default: 10, the paper's)")
    b.add_argument("--parallel", action="store_true", help="line i of --src and --tgt are translations: also report "
                   "XLR (default: not parallel)")
    b.add_argument("--corr-pairs", type=positive_int, default=1_000_000,
                   help="CORR over all source-target pairs, or this many drawn at random when there are more "
                   "(default: %(default)s)")
    b.add_argument("--json", action="store_true", help="print the results as JSON (default: a table)")
    b.add_argument("--batch-size", type=positive_int, default=256, help="sentences per batch (default: %(default)s)")
    add_torch_options(b)
    b.set_defaults(func=run_backretrieval)


def _texts(path: str, lang: str, enc) -> list[str]:
    from rerank.embeddings.pseudopairs import read_captions

    if lang not in enc.languages:
        raise InputError(f"language {lang!r} is not in the model (it has {', '.join(enc.languages)})", path)
    return read_captions(path)


def run_pseudopairs(args: argparse.Namespace) -> int:
    from rerank.embeddings.encoder import Encoder, model_paths
    from rerank.embeddings.pseudopairs import format_pairs, pseudo_pairs

    device = setup_torch(args)
    check_outputs([args.output], [*model_paths(args.model), args.src, args.tgt])
    enc = Encoder.load(args.model)
    src, tgt = _texts(args.src, args.src_lang, enc), _texts(args.tgt, args.tgt_lang, enc)
    progress = bars(args)
    rows = pseudo_pairs(enc, src, args.src_lang, tgt, args.tgt_lang, args.filter, device, args.batch_size, progress)
    with atomic_write(args.output) as f:
        f.write(format_pairs(rows))
    distinct = len({s for _, s, _ in rows})
    print(f"{args.output}: {len(rows)} of {len(tgt)} target captions paired ({distinct} distinct source captions "
          f"of {len(src)})", file=sys.stderr)
    return 0


def _features(path: str, rows: int, option: str, text: str):
    from rerank.embeddings.data import load_features

    feats = load_features(path, None)
    if len(feats) != rows:
        raise InputError(f"{len(feats)} feature rows, but {option} {text} has {rows} lines", path)
    return feats


def run_backretrieval(args: argparse.Namespace) -> int:
    from rerank.embeddings.backretrieval import backretrieval_ranks, corr, paired_ranks, recalls
    from rerank.embeddings.encoder import Encoder, model_paths

    device = setup_torch(args)
    enc = Encoder.load(args.model)
    src, tgt = _texts(args.src, args.src_lang, enc), _texts(args.tgt, args.tgt_lang, enc)
    si = _features(args.src_images, len(src), "--src", args.src)
    ti = _features(args.tgt_images, len(tgt), "--tgt", args.tgt)
    if si.shape[1] != ti.shape[1]:
        raise InputError(f"{ti.shape[1]}-d image features, but --src-images has {si.shape[1]}", args.tgt_images)
    if args.parallel and len(src) != len(tgt):
        raise InputError(f"--parallel: {len(tgt)} lines, but --src has {len(src)}", args.tgt)
    vs = enc.encode(src, args.src_lang, args.batch_size, device)
    vt = enc.encode(tgt, args.tgt_lang, args.batch_size, device)
    ranks, _ = backretrieval_ranks(vs, vt, si, ti)
    result: dict[str, object] = {"backretrieval": recalls(ranks, args.k)}
    if args.parallel:
        result["xlr"] = recalls(paired_ranks(vs, vt), args.k)
    c = corr(vs, vt, si, ti, args.corr_pairs)
    result.update(corr=c["spearman"], corr_pairs=c["pairs"], n_src=len(src), n_tgt=len(tgt),
                  languages=f"{args.src_lang}->{args.tgt_lang}", model=model_paths(args.model)[0])
    print(json.dumps(result, indent=1) if args.json else _table(result))
    return 0


def _table(result: dict) -> str:
    keys = list(result["backretrieval"])
    lines = [f"# Backretrieval {result['languages']} ({result['n_src']} source, {result['n_tgt']} target texts)", "",
             "| metric | " + " | ".join(k.upper() for k in keys) + " |", "|---|" + "---|" * len(keys)]
    for name in ("backretrieval", "xlr"):
        if name in result:
            lines.append(f"| {'BkR' if name == 'backretrieval' else 'XLR'} | "
                         + " | ".join(f"{result[name][k]:.1f}" for k in keys) + " |")
    lines += ["", f"CORR (Spearman, text vs image cosine distances, {result['corr_pairs']} pairs): {result['corr']:.4f}"]
    return "\n".join(lines)
