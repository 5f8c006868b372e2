"""`rerank oracle`: the best hypothesis per sentence by a sentence-level score (BLEU+1 by default, any
metric of the registry or an n-best column), and the corpus score of the picks."""

from __future__ import annotations

from rerank.cliargs import add_quiet, bars
from rerank.commands._common import format_help, nbest_inputs, add_nbest_input, load_nbest
from rerank.errors import InputError
from rerank.io import atomic_write, read_references
from rerank.metrics.registry import check_metric_options, metric_names, parse_objective
from rerank.outputs import check_outputs


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "oracle", help="write the per-sentence oracle hypotheses and print their score (BLEU, chrF, TER, METEOR or a column)",
        description="Pick, for every sentence, the hypothesis with the best sentence-level score against the references "
        "(ties go to the earlier hypothesis), write those hypotheses, and print the corpus score of the picks next to "
        "that of the first hypothesis of every list. --metric bleu (the default): sentence BLEU+1 (Lin & Och 2004) "
        "picks and sacrebleu's corpus BLEU; chrf, chrf++, ter, meteor: the metric of each hypothesis alone, the "
        "highest (TER: the lowest), and the metric's corpus score of the picks, as `rerank eval` computes it; "
        "column:NAME: the n-best list's own column NAME (e.g. COMET scores joined with `rerank add-feature`), the "
        "highest (--lower-better NAME: the lowest), and the mean of the picked values over the sentences; it needs "
        "no references. " + format_help(),
    )
    add_nbest_input(parser)
    parser.add_argument("-r", "--ref", action="append", help="reference file (repeat for several references; "
                        "required except with --metric column:NAME, default: none)")
    parser.add_argument("-o", "--output", help="write the oracle hypotheses here, one per sentence "
                        "(- for stdout; default: only the scores are printed)")
    parser.add_argument("--metric", default="bleu", metavar="METRIC",
                        help=f"what picks the oracle: {', '.join(metric_names(quality=True, builtin=True))}, or column:NAME for the n-best "
                        "list's column NAME (default: %(default)s)")
    parser.add_argument("--lower-better", metavar="NAME", help="with --metric column:NAME: lower values of the column "
                        "are better (default: higher is better)")
    parser.add_argument("--tokenize", default="13a", help="BLEU tokeniser as sacrebleu -tok, as `rerank tune` and `rerank eval` "
                        "(default: %(default)s; none for pre-tokenised text)")
    parser.add_argument("--lowercase", action="store_true", help="lowercase before scoring, BLEU and chrF "
                        "(default: case-sensitive)")
    parser.add_argument("--ter-case-sensitive", action="store_true", help="case-sensitive TER (sacrebleu's default "
                        "is insensitive)")
    parser.add_argument("--lang", default="en", help="target language for METEOR (en, de, fr, es, cs; "
                        "default: %(default)s)")
    add_quiet(parser)
    parser.set_defaults(func=run)


def run(args) -> int:
    from rerank.api import oracle

    kind, name = parse_objective(args.metric)
    lower = {n.strip() for n in (args.lower_better or "").split(",") if n.strip()}
    if lower and (kind != "column" or lower != {name}):
        raise InputError(f"--lower-better {','.join(sorted(lower))}: not the column of --metric "
                         f"(give --metric column:NAME --lower-better NAME)")
    if kind == "metric" and not args.ref:
        raise InputError(f"--metric {name} needs references (-r REF); only --metric column:NAME needs none")
    refs = args.ref if kind == "metric" else []
    check_outputs([args.output], [*nbest_inputs(args), *refs])
    if kind == "metric":
        check_metric_options(name, tokenize=args.tokenize, lowercase=args.lowercase)  # before reading big files
    nbest, _ = load_nbest(args)
    references = read_references(refs, nbest.n_sentences, args.nbest) if refs else None
    found = oracle(nbest, references, metric=args.metric, tokenize=args.tokenize, lowercase=args.lowercase,
                   lang=args.lang, ter_case_sensitive=args.ter_case_sensitive, lower_better=bool(lower),
                   progress=bars(args))
    if args.output:
        with atomic_write(args.output) as out:
            out.writelines(hyp + "\n" for hyp in found.hypotheses)
    width = len(f"first-hypothesis {found.display}")
    print(f"{'first-hypothesis ' + found.display:<{width}} = {found.first_score:.{found.decimals}f}")
    print(f"{'oracle ' + found.display:<{width}} = {found.score:.{found.decimals}f}  "
          f"({found.changed} of {nbest.n_sentences} sentences changed)")
    print(f"signature: {found.signature}")
    return 0
