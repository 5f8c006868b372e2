"""`rerank report`: the evaluation of `rerank eval` as one self-contained HTML page (rerank.htmlreport)."""

from __future__ import annotations

import argparse
import os
import sys

from rerank.cliargs import add_quiet, command_line, positive_int
from rerank.commands._evaluation import _meteor_options, add_evaluation_arguments, check_options, evaluate
from rerank.errors import InputError
from rerank.htmlreport.analysis import FREQ_EDGES, LENGTH_EDGES
from rerank.metrics.registry import metric_names, parse_objective

EPILOG = """\
The inputs are those of `rerank eval` (see `rerank eval --help`): references (-r, repeatable), the
baseline (-b), systems as [NAME=]PATH (a file, a quoted glob or a run prefix PATH.run1 ...), n-best
lists with weights (--nbest/--weights, which also give the oracle curve), metrics and
--segment-scores NAME=FILE.tsv. Systems with several runs: tables and buckets average the runs,
the changed sentences compare the first run of each.

The page: the significance table (\u2020/\u2021, bootstrap intervals of each improvement) with a plot;
scores by reference-length bucket and word F-measure by word-frequency bucket (as compare-mt), with
each system's difference from the baseline; for every system the sentences whose output changed,
sorted by sentence-level gain, in a "better" and a "worse" section with the differing words marked;
the oracle BLEU of the top k hypotheses of the n-best lists (--oracle-metric: chrF, TER, METEOR or an
n-best column instead, as `rerank oracle --metric`); the metric signatures and this command line.
Style and pictures (SVG) are inside the file: it opens from disk without a server or network.

examples:
  rerank report -r test.de -b base.de mlmme=rerank.de -o report.html --metrics bleu,chrf,ter
  rerank report -r ref.0 -r ref.1 -b base.txt --nbest test.nbest --weights w.json -o report.html
  rerank report -r ref.de -b base.de --nbest test.nbest --weights w.json --oracle-metric ter -o report.html
"""


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "report", help="write an HTML report: significance, buckets, changed sentences, oracle curve",
        description="Score a baseline and systems exactly as `rerank eval` does and write one static, "
        "self-contained HTML page that shows where each system wins and loses.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_evaluation_arguments(p)
    r = p.add_argument_group("report")
    r.add_argument("-o", "--output", required=True, metavar="HTML", help="the HTML file to write")
    r.add_argument("--title", default="rerank report", help="page title (default: %(default)s)")
    r.add_argument("--examples", type=positive_int, default=30, metavar="N",
                   help="changed sentences shown in each better/worse section of a system (default: %(default)s)")
    r.add_argument("--sentence-metric", metavar="NAME", help="metric of the sentence-level gains (BLEU: BLEU+1; "
                   "default: the first metric of --metrics)")
    r.add_argument("--oracle-metric", metavar="METRIC",
                   help=f"what the oracle curve of the --nbest lists picks and scores by, as `rerank oracle --metric`: "
                   f"{', '.join(metric_names(quality=True, builtin=True))}, or column:NAME for the lists' column NAME "
                   "(default: bleu, sentence BLEU+1 picks and corpus BLEU)")
    r.add_argument("--oracle-lower-better", metavar="NAME", help="with --oracle-metric column:NAME: lower values of "
                   "the column are better (default: higher is better; --lower-better is for --segment-scores)")
    r.add_argument("--freq-corpus", metavar="FILE", help="text whose word counts make the frequency buckets, e.g. "
                   "the training target side (default: the references)")
    r.add_argument("--length-buckets", default=",".join(map(str, LENGTH_EDGES)), metavar="E1,E2,...",
                   help="bucket edges of the mean reference length in tokens (default: %(default)s)")
    r.add_argument("--freq-buckets", default=",".join(map(str, FREQ_EDGES)), metavar="E1,E2,...",
                   help="bucket edges of word frequencies (default: %(default)s)")
    add_quiet(r)
    p.set_defaults(func=run)


def edges(text: str, option: str) -> list[int]:
    """Increasing positive integers from 'E1,E2,...'."""
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"{option} {text!r}: expected increasing integers, e.g. 10,20,30") from None
    if not values or values[0] < 1 or any(b <= a for a, b in zip(values, values[1:])):
        raise InputError(f"{option} {text!r}: expected increasing integers >= 1, e.g. 10,20,30")
    return values


def oracle_options(args) -> tuple[str, bool]:
    """(the oracle curve's metric, lower is better for its column) from --oracle-metric and
    --oracle-lower-better, checked before any file is read."""
    metric = args.oracle_metric or "bleu"
    kind, name = parse_objective(metric, "oracle_metric")
    lower = {n.strip() for n in (args.oracle_lower_better or "").split(",") if n.strip()}
    if lower and (kind != "column" or lower != {name}):
        raise InputError(f"--oracle-lower-better {','.join(sorted(lower))}: not the column of --oracle-metric "
                         "(give --oracle-metric column:NAME --oracle-lower-better NAME)")
    if (args.oracle_metric or lower) and not args.nbest:
        raise InputError("--oracle-metric: the oracle curve is of n-best lists, and no --nbest (with --weights) is given")
    return metric, bool(lower)


def run(args) -> int:
    from rerank.htmlreport import write_report
    from rerank.io import read_lines

    oracle_metric, oracle_lower = oracle_options(args)
    length_edges = edges(args.length_buckets, "--length-buckets")
    freq_edges = edges(args.freq_buckets, "--freq-buckets")
    names = [m for m in check_options(args)[0] if m != "length"]
    metric = args.sentence_metric
    if metric is not None and metric not in names:
        raise InputError(f"--sentence-metric {metric}: not one of the scored metrics ({', '.join(names) or 'none'})")
    ev = evaluate(args, [args.output], extra_inputs=[args.freq_corpus])
    frequencies, freq_source = None, "the references"
    if args.freq_corpus:
        from rerank.metrics.bleu import make_bleu
        from rerank.htmlreport.analysis import word_counts

        frequencies = word_counts(read_lines(args.freq_corpus), make_bleu(args.tokenize).tokenizer, args.lowercase)
        freq_source = os.path.basename(args.freq_corpus)
    page = ev.to_html(title=args.title, examples=args.examples, sentence_metric=metric, frequencies=frequencies,
                      freq_source=freq_source, command=command_line(), length_edges=length_edges, freq_edges=freq_edges,
                      oracle_metric=oracle_metric, oracle_lower_better=oracle_lower,
                      oracle_options={"ter_case_sensitive": args.ter_case_sensitive, "meteor_options": _meteor_options(args)})
    write_report(args.output, page)
    if not args.quiet:
        print(f"wrote {args.output}", file=sys.stderr)
    return 0
