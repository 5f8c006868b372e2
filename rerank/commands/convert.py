"""`rerank convert`: from any n-best format of the table to any it can write."""

from __future__ import annotations

from rerank.commands._common import format_help, nbest_inputs, add_nbest_input, add_output_format, load_nbest, write_output
from rerank.commands._stream import scan, write_chunks
from rerank.cliargs import add_quiet
from rerank.errors import InputError
from rerank.formats import moses
from rerank.io import atomic_write, output_group
from rerank.outputs import check_outputs, nbest_outputs


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "convert", help="convert an n-best list between formats",
        description="Read an n-best list in one format and write it in another, keeping every "
        "hypothesis, its order and its features (a fairseq H/D score becomes feature `nmt`); what "
        "the output format cannot hold (features in fairseq, totals in plain) is named on stderr. "
        + format_help(),
    )
    add_nbest_input(parser)
    add_quiet(parser)
    parser.add_argument("-o", "--output", required=True, help="output file (.gz compresses; - for stdout)")
    add_output_format(parser)
    parser.add_argument("--save-refs", metavar="FILE", help="fairseq input: write the T- lines (references) here (default: not written)")
    parser.add_argument("--save-sources", metavar="FILE", help="fairseq input: write the S- lines (sources) here (default: not written)")
    parser.set_defaults(func=run)


def _write_side(lines, kind: str, path: str, source: str) -> None:
    if lines is None:
        raise InputError(f"--save-{kind} asks for fairseq {kind}, but the input has none", source)
    missing = [i for i, line in enumerate(lines) if line is None]
    if missing:
        raise InputError(f"sentence {missing[0]} has no line for --save-{kind}", source)
    with atomic_write(path) as out:
        out.writelines(line + "\n" for line in lines)


def run(args) -> int:
    check_outputs([*nbest_outputs(args.output, args.out_format), args.save_refs, args.save_sources], nbest_inputs(args))
    layout = None if args.save_refs or args.save_sources else scan(args, [args.out_format])
    if layout is not None:  # a regular Moses/Joshua file to Moses/Joshua: two passes, a block at a time
        with output_group(), atomic_write(args.output) as out:
            write_chunks(out, moses.iter_moses_chunks(args.nbest, layout), args.out_format)
        return 0
    nbest, report = load_nbest(args)
    with output_group():  # every output or none
        if args.save_refs:
            _write_side(report.fairseq_refs, "refs", args.save_refs, args.nbest)
        if args.save_sources:
            _write_side(report.fairseq_sources, "sources", args.save_sources, args.nbest)
        write_output(nbest, args.output, args.out_format)
    return 0
