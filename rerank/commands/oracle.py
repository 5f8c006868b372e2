"""`rerank oracle`: the best hypothesis per sentence by sentence BLEU+1, and its corpus BLEU."""

from __future__ import annotations

import numpy as np

from rerank.bleu import bleu_signature, corpus_bleu, hypothesis_stats, make_bleu, oracle_rows
from rerank.cliargs import add_quiet, nbest_inputs, show_progress
from rerank.commands._common import FORMAT_HELP, add_nbest_input, load_nbest
from rerank.formats import read_references
from rerank.io import atomic_write
from rerank.outputs import check_outputs


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "oracle", help="write the per-sentence oracle hypotheses and print the oracle BLEU",
        description="Pick, for every sentence, the hypothesis with the highest sentence-level "
        "BLEU+1 (Lin & Och 2004; ties go to the earlier hypothesis) against the references, write "
        "those hypotheses, and print the corpus BLEU of the picks next to that of the first "
        "hypothesis of every list. Corpus BLEU is sacrebleu's. " + FORMAT_HELP,
    )
    add_nbest_input(parser)
    parser.add_argument("-r", "--ref", action="append", required=True, help="reference file (repeat for several references)")
    parser.add_argument("-o", "--output", help="write the oracle hypotheses here, one per sentence (- for stdout; default: only the BLEU is printed)")
    parser.add_argument("--tokenize", default="13a", help="BLEU tokeniser as sacrebleu -tok, as `rerank tune` and `rerank eval` "
                        "(default: %(default)s; none for pre-tokenised text)")
    parser.add_argument("--lowercase", action="store_true", help="lowercase before scoring (default: case-sensitive)")
    add_quiet(parser)
    parser.set_defaults(func=run)


def run(args) -> int:
    check_outputs([args.output], [*nbest_inputs(args), *args.ref])
    make_bleu(args.tokenize, args.lowercase)  # validates the tokenizer before reading big files
    nbest, _ = load_nbest(args)
    refs = read_references(args.ref, nbest.n_sentences, args.nbest)
    stats = hypothesis_stats(nbest.hyps, nbest.offsets, refs, args.tokenize, args.lowercase, progress=show_progress(args))
    picks = oracle_rows(stats, nbest.offsets)
    first = nbest.offsets[:-1]
    if args.output:
        with atomic_write(args.output) as out:
            for row in picks:
                out.write(nbest.hyps[int(row)] + "\n")
    signature = bleu_signature(args.tokenize, args.lowercase, len(refs))
    changed = int(np.sum(picks != first))
    print(f"first-hypothesis BLEU = {corpus_bleu(stats[first].sum(0)):.2f}")
    print(f"oracle BLEU           = {corpus_bleu(stats[picks].sum(0)):.2f}  ({changed} of {nbest.n_sentences} sentences changed)")
    print(f"signature: {signature}")
    return 0
