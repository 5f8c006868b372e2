"""`rerank eval`: BLEU/METEOR/TER/chrF (and segment scores from elsewhere) with MultEval-style
significance tables. The flags are those of `rerank.EvalOptions` and the inputs are shared with
`rerank report` (rerank.commands._evaluation); `rerank.evaluate` reads and scores, and the
Evaluation it returns writes the table, its config and the plot."""

from __future__ import annotations

import argparse
import sys

from rerank.cliargs import add_quiet, bars
from rerank.commands._common import reading
from rerank.commands._evaluation import add_evaluation_arguments, eval_options, inputs
from rerank.errors import InputError

FORMATS = ("table", "markdown", "latex", "csv", "json")

EPILOG = """\
systems: each SYSTEM is [NAME=]PATH. PATH is one hypothesis file (one run), or a glob in quotes
('sys.run*'), or a prefix whose optimizer runs are PATH.run1, PATH.run2, ... (any PATH.run* files).
Each system keeps its own number of runs, and each pair is tested on its two systems' runs
(a decoder 1-best given as one file against 3 tuning runs: 1 + 3 outputs per sentence).

columns per metric: mean score over runs, then s_sel/s_opt/p: s_sel = bootstrap std dev of the
test-set score (mean over runs), s_opt = std dev over runs, p = approximate randomisation against
the baseline (paired, each system's runs averaged per sentence; --stratified: Clark et al.'s
split). \u2020 = significantly better than the baseline, \u2021 = significantly better than
--second-baseline: both the randomisation test (p < --alpha) and the paired bootstrap (its
interval of the improvement clear of 0; bs_p in CSV/JSON) must say so. "Better" is the direction
of the difference the test judges (each system's average run), which with several runs can differ
from the order of the mean scores. TER is lower-is-better; its marks and deltas follow that
direction.

segment scores: --segment-scores comet=comet.tsv adds the metric comet, the mean of the scores in
comet.tsv: a header row of system names as named here (baseline included; a system with R runs has
the columns NAME.run1 .. NAME.runR) and one row per segment, tab-separated. It gets the same tests.

examples:
  rerank eval -r test.de -b base.de rerank.de --metrics bleu,meteor,ter --lang de \\
      --meteor-modules exact,stem -o table.md
  rerank eval -r test.en -b 'base.run*' mlmme='mlmme.run*' vse='vse.run*' --second-baseline vse --plot d.png
  rerank eval -r test.de -b base.de --nbest test.nbest --weights tuned.weights --to latex
  rerank eval -r test.de -b base.de mlmme=rerank.de --segment-scores comet=comet.tsv --metrics bleu,comet
"""


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "eval", help="score systems with BLEU/METEOR/TER/chrF and significance tests",
        description="Score a baseline and systems against references (BLEU, chrF and TER with sacrebleu's numbers; "
        "METEOR 1.5 natively or through the Meteor jar; segment scores computed elsewhere) and report "
        "MultEval-style tables with approximate randomisation p-values, optimizer-instability estimates "
        "and paired-bootstrap intervals. `rerank report` takes the same inputs and writes an HTML page.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_evaluation_arguments(p)
    o = p.add_argument_group("output")
    o.add_argument("--to", dest="out_format", choices=FORMATS,
                   help="table format (default: from -o's extension: .md markdown, .tex latex, .csv csv, .json json; "
                   "else the text table)")
    o.add_argument("--format", dest="old_format", choices=FORMATS, help="deprecated alias of --to")
    o.add_argument("-o", "--output", default="-", help="output file (default: - for stdout); a .config.json is "
                   "written beside it")
    o.add_argument("--plot", metavar="PNG", help="plot of each system's delta from the baseline with bootstrap 95%% CI (default: no plot)")
    add_quiet(o)
    p.set_defaults(func=run)


def run(args) -> int:
    import rerank

    options = eval_options(args)
    if args.plot:
        rerank.Evaluation.check_plot(options)   # before any work
    baseline, systems = inputs(args)
    with reading("nbest-"):
        ev = rerank.evaluate(args.ref, baseline, systems, options, progress=bars(args),
                             outputs=rerank.Evaluation.saved_files(args.output, args.plot))
    written = ev.save(args.output, _table_format(args), plot=args.plot, meta={"command": sys.argv})
    if written and not args.quiet:   # as `report` says: the files, the table's config beside it among them
        print(f"wrote {', '.join(written)}", file=sys.stderr)
    return 0


def _table_format(args) -> str | None:
    """--to, else the deprecated --format (None: from the output's extension, `Evaluation.table_format`)."""
    if args.out_format and args.old_format and args.out_format != args.old_format:
        raise InputError(f"--to {args.out_format} and --format {args.old_format} disagree "
                         "(--format is a deprecated alias of --to)")
    if args.old_format:
        print("note: `eval --format` is deprecated, use --to (--format is the input n-best format elsewhere)",
              file=sys.stderr)
    return args.out_format or args.old_format
