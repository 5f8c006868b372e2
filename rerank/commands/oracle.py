"""`rerank oracle`: the best hypothesis per sentence by sentence BLEU+1, and its corpus BLEU."""

from __future__ import annotations

from rerank.metrics.bleu import make_bleu
from rerank.cliargs import add_quiet, bars
from rerank.commands._common import format_help, nbest_inputs, add_nbest_input, load_nbest
from rerank.io import atomic_write, read_references
from rerank.outputs import check_outputs


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "oracle", help="write the per-sentence oracle hypotheses and print the oracle BLEU",
        description="Pick, for every sentence, the hypothesis with the highest sentence-level "
        "BLEU+1 (Lin & Och 2004; ties go to the earlier hypothesis) against the references, write "
        "those hypotheses, and print the corpus BLEU of the picks next to that of the first "
        "hypothesis of every list. Corpus BLEU is sacrebleu's. " + format_help(),
    )
    add_nbest_input(parser)
    parser.add_argument("-r", "--ref", action="append", required=True, help="reference file (repeat for several references)")
    parser.add_argument("-o", "--output", help="write the oracle hypotheses here, one per sentence "
                        "(- for stdout; default: only the BLEU is printed)")
    parser.add_argument("--tokenize", default="13a", help="BLEU tokeniser as sacrebleu -tok, as `rerank tune` and `rerank eval` "
                        "(default: %(default)s; none for pre-tokenised text)")
    parser.add_argument("--lowercase", action="store_true", help="lowercase before scoring (default: case-sensitive)")
    add_quiet(parser)
    parser.set_defaults(func=run)


def run(args) -> int:
    from rerank.api import oracle

    check_outputs([args.output], [*nbest_inputs(args), *args.ref])
    make_bleu(args.tokenize, args.lowercase)  # validates the tokenizer before reading big files
    nbest, _ = load_nbest(args)
    refs = read_references(args.ref, nbest.n_sentences, args.nbest)
    found = oracle(nbest, refs, tokenize=args.tokenize, lowercase=args.lowercase, progress=bars(args))
    if args.output:
        with atomic_write(args.output) as out:
            out.writelines(hyp + "\n" for hyp in found.hypotheses)
    print(f"first-hypothesis BLEU = {found.first_bleu:.2f}")
    print(f"oracle BLEU           = {found.bleu:.2f}  ({found.changed} of {nbest.n_sentences} sentences changed)")
    print(f"signature: {found.signature}")
    return 0
