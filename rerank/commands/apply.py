"""`rerank apply`: rerank with feature weights and write the best hypotheses (and, with --ref,
score them against one or more references)."""

from __future__ import annotations

import contextlib
import sys

from rerank.cliargs import add_quiet
from rerank.commands._common import format_help, nbest_inputs, add_nbest_input, add_output_format, load_nbest, write_output
from rerank.commands._stream import scan, scored_chunks, write_chunks
from rerank.errors import InputError
from rerank.io import atomic_write, output_group, read_references
from rerank.metrics.registry import QUALITY_METRICS
from rerank.nbest import segment_argmax
from rerank.outputs import check_outputs, nbest_outputs
from rerank.weights import best_rows, read_weights, resorted, tuned_toward, weight_vector

SCORED = QUALITY_METRICS


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "apply", help="rerank an n-best list with weights; write the 1-best",
        description="Score every hypothesis as w·f, write the arg-max hypothesis of each sentence "
        "(one line per sentence; ties go to the earlier hypothesis of the list) and optionally the "
        "whole n-best re-sorted by the new score (its total column is w·f). Weights: JSON "
        "{\"feature\": weight} (or {\"weights\": {...}}) or Moses `name= v1 v2` lines; a weight for a "
        "feature the n-best lacks is an error, a feature without weight gets 0 with a warning. "
        "With --ref (repeatable: several references), the 1-best and the first hypotheses of the lists "
        "are scored as `rerank eval` scores them. " + format_help(),
    )
    add_nbest_input(parser)
    add_quiet(parser)
    parser.add_argument("-w", "--weights", required=True, help="weights file (JSON or Moses lines)")
    parser.add_argument("-o", "--output", required=True, help="1-best output, one hypothesis per sentence (- for stdout)")
    parser.add_argument("--nbest-out", help="also write the re-sorted n-best here (default: no n-best output)")
    add_output_format(parser)
    s = parser.add_argument_group("scoring")
    s.add_argument("-r", "--ref", action="append", default=[], metavar="REF",
                   help="score the 1-best against this reference file (repeat for several; default: no scoring)")
    s.add_argument("--metrics", default="bleu", help=f"with --ref, comma-separated: {', '.join(SCORED)} "
                   "(default: %(default)s)")
    s.add_argument("--tokenize", default="13a", help="BLEU tokeniser as sacrebleu -tok (default: %(default)s)")
    s.add_argument("--lowercase", action="store_true", help="case-insensitive BLEU and chrF (default: case-sensitive)")
    s.add_argument("--lang", default="en", help="target language for METEOR (default: %(default)s)")
    s.add_argument("--meteor-modules", help="METEOR modules, e.g. exact,stem (default: the language's modules)")
    parser.set_defaults(func=run)


def _metrics(args) -> list:
    """The metric objects asked for with --ref (checked before any file is read)."""
    if not args.ref:
        return []
    from rerank.metrics.bleu import make_bleu
    from rerank.metrics import make_metric

    names = [m.strip().lower() for m in args.metrics.split(",") if m.strip()]
    unknown = [m for m in names if m not in SCORED]
    if unknown or not names:
        raise InputError(f"--metrics: unknown metric(s) {', '.join(unknown) or '(none)'} (known: {', '.join(SCORED)})")
    make_bleu(args.tokenize, args.lowercase)  # checks the tokeniser's name
    options = {"modules": [m.strip() for m in args.meteor_modules.split(",") if m.strip()]} if args.meteor_modules else {}
    return [make_metric(m, lang=args.lang, tokenize=args.tokenize, lowercase=args.lowercase, meteor_options=options)
            for m in names]


def run(args) -> int:
    metrics = _metrics(args)
    check_outputs([args.output, *nbest_outputs(args.nbest_out, args.out_format)],
                  [*nbest_inputs(args), args.weights, *args.ref])
    both_stdout = args.output == "-" and args.nbest_out == "-"  # the whole-list path writes all the 1-best first
    layout = None if both_stdout else scan(args, [args.out_format] if args.nbest_out else [])
    if layout is not None:  # a regular Moses/Joshua file: two passes, a block at a time
        return _run_streamed(args, layout, metrics)
    nbest, _ = load_nbest(args)
    refs = None
    if args.ref:
        refs = read_references(args.ref, nbest.n_sentences, args.nbest)
    w = weight_vector(read_weights(args.weights), nbest.feature_names, source=args.weights,
                      objective=tuned_toward(args.weights))
    rows = best_rows(nbest, w)
    with output_group():  # both outputs or none
        with atomic_write(args.output) as out:
            for row in rows:
                out.write(nbest.hyps[int(row)] + "\n")
        if args.nbest_out:
            write_output(resorted(nbest, w), args.nbest_out, args.out_format)
    if refs is not None:
        _print_scores(metrics, [nbest.hyps[int(r)] for r in rows], [nbest.hyps[int(i)] for i in nbest.offsets[:-1]],
                      refs, sys.stderr if args.output == "-" else sys.stdout)
    return 0


def _run_streamed(args, layout: dict, metrics: list) -> int:
    """`run` over the sentences of a regular Moses/Joshua file a block at a time (the same outputs)."""
    refs = None
    if args.ref:
        refs = read_references(args.ref, layout["n_sentences"], args.nbest)
    w = weight_vector(read_weights(args.weights), layout["feature_names"], source=args.weights,
                      objective=tuned_toward(args.weights))
    best, first = [], []
    with output_group(), atomic_write(args.output) as out, \
            (atomic_write(args.nbest_out) if args.nbest_out else contextlib.nullcontext()) as nbest_out:
        for first_id, nbest, scores in scored_chunks(args.nbest, layout, w):
            rows = segment_argmax(scores, nbest.offsets)
            out.writelines(nbest.hyps[int(row)] + "\n" for row in rows)
            if refs is not None:
                best += [nbest.hyps[int(row)] for row in rows]
                first += [nbest.hyps[int(i)] for i in nbest.offsets[:-1]]
            if nbest_out is not None:
                write_chunks(nbest_out, [(first_id, resorted(nbest, w, scores))], args.out_format)
    if refs is not None:
        _print_scores(metrics, best, first, refs, sys.stderr if args.output == "-" else sys.stdout)
    return 0


def _print_scores(metrics, best: list[str], first: list[str], refs, out) -> None:
    """Each metric's corpus score of the 1-best and of the first hypotheses, with its signature."""
    for metric in metrics:
        texts = best + first
        metric.prepare(texts + [r for stream in refs for r in stream])
        scores = [metric.corpus_score(h, refs) for h in (best, first)]
        name = metric.info.display
        print(f"{name} = {scores[0]:.2f}  (first hypotheses: {scores[1]:.2f})  {metric.signature()}", file=out)
