"""`rerank apply`: rerank with feature weights and write the best hypotheses."""

from __future__ import annotations

from rerank.cliargs import add_quiet, nbest_inputs
from rerank.commands._common import FORMAT_HELP, add_nbest_input, add_output_format, load_nbest, write_output
from rerank.io import atomic_write, output_group
from rerank.outputs import check_outputs, nbest_outputs
from rerank.weights import best_rows, read_weights, resorted, weight_vector


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "apply", help="rerank an n-best list with weights; write the 1-best",
        description="Score every hypothesis as w·f, write the arg-max hypothesis of each sentence "
        "(one line per sentence; ties go to the earlier hypothesis of the list) and optionally the "
        "whole n-best re-sorted by the new score (its total column is w·f). Weights: JSON "
        "{\"feature\": weight} (or {\"weights\": {...}}) or Moses `name= v1 v2` lines; a weight for a "
        "feature the n-best lacks is an error, a feature without weight gets 0 with a warning. "
        + FORMAT_HELP,
    )
    add_nbest_input(parser)
    add_quiet(parser)
    parser.add_argument("-w", "--weights", required=True, help="weights file (JSON or Moses lines)")
    parser.add_argument("-o", "--output", required=True, help="1-best output, one hypothesis per sentence (- for stdout)")
    parser.add_argument("--nbest-out", help="also write the re-sorted n-best here (default: no n-best output)")
    add_output_format(parser)
    parser.set_defaults(func=run)


def run(args) -> int:
    check_outputs([args.output, *nbest_outputs(args.nbest_out, args.out_format)], [*nbest_inputs(args), args.weights])
    nbest, _ = load_nbest(args)
    w = weight_vector(read_weights(args.weights), nbest.feature_names, source=args.weights)
    rows = best_rows(nbest, w)
    with output_group():  # both outputs or none
        with atomic_write(args.output) as out:
            for row in rows:
                out.write(nbest.hyps[int(row)] + "\n")
        if args.nbest_out:
            write_output(resorted(nbest, w), args.nbest_out, args.out_format)
    return 0
