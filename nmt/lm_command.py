"""`rerank lm train|score`: the GRU language model behind the `lm` reranking feature."""

from __future__ import annotations

import dataclasses
import json
import os
import sys

from rerank.cliargs import fraction, nonnegative_int, positive_float, positive_int, terminal_bars
from rerank.device import add_torch_options, check_run_dir, setup_torch
from rerank.errors import InputError
from rerank.options import Writing, add_option_flags

# option -> (argparse type, help); the defaults are LMConfig's
_TRAIN_OPTIONS = {
    "emb_dim": (positive_int, "word embedding size"),
    "hidden": (positive_int, "GRU size"),
    "dropout": (fraction, "dropout rate, in [0, 1)"),
    "min_freq": (positive_int, "vocabulary frequency cut-off (words)"),
    "subword_size": (positive_int, "SentencePiece pieces, specials included (with --subword)"),
    "lr": (positive_float, "Adam learning rate"),
    "batch_size": (positive_int, "sentences per batch"),
    "max_epochs": (positive_int, "epoch limit"),
    "patience": (positive_int, "epochs without a better validation perplexity before stopping"),
    "seed": (nonnegative_int, "random seed"),
}


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "lm", help="train a GRU language model of the target language (the lm feature); score text",
        description="A GRU language model over Moses tokens (words or SentencePiece subwords), trained on "
        "the target side of the training data; `rerank features NBEST --which lm,lm_norm --lm-model DIR` "
        "adds its log-probabilities to an n-best list.",
        epilog="Example: rerank lm train --train DATA/train.de.gz --val DATA/val.de.gz --lang de --out runs/lm.de "
        "--max-minutes 20")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True
    _add_train(verbs)
    s = verbs.add_parser("score", help="log-probability of every line (TSV: logprob, tokens)",
                         description="One output line per input line: the sum of token log-probabilities "
                         "(</s> included) and the number of tokens. An input without lines is refused.")
    s.add_argument("--model", required=True, help="run directory of `rerank lm train`")
    s.add_argument("--input", required=True, help="text, one sentence per line (.gz ok; - for stdin)")
    s.add_argument("-o", "--output", default="-", help="output TSV (default: standard output)")
    s.add_argument("--batch-size", type=positive_int, default=128, help="sentences per batch (default: %(default)s)")
    add_torch_options(s)
    s.set_defaults(func=run_score)


def _add_train(verbs) -> None:
    t = verbs.add_parser("train", help="train (or resume) a language model")
    t.add_argument("--train", required=True, nargs="+", metavar="FILE",
                   help="training text, one sentence per line (.gz ok); several files are read in the order given")
    t.add_argument("--val", required=True, help="validation text (early stopping on its perplexity)")
    t.add_argument("--lang", default="de", help="language, for Moses tokenisation (default: %(default)s)")
    t.add_argument("--out", required=True, help="run directory (checkpoints, config, vocabulary, log)")
    t.add_argument("--subword", choices=["bpe", "unigram"], help="SentencePiece subwords (default: words)")
    defaults = lm_defaults()
    for name, (kind, text) in _TRAIN_OPTIONS.items():
        t.add_argument("--" + name.replace("_", "-"), type=kind, default=defaults[name],
                       help=f"{text} (default: %(default)s)")
    t.add_argument("--max-minutes", type=positive_float, help="wall-clock budget of this invocation, spent in whole "
                   "epochs: one is started only if it is expected to end in time (as nmt train and embed train; "
                   "default: none)")
    t.add_argument("--no-resume", action="store_true", help="start afresh even if OUT/last.pt exists")
    add_option_flags(t, Writing)
    add_torch_options(t)
    t.set_defaults(func=run_train)


def lm_defaults() -> dict:
    from rerank.nmt.lm_config import LMConfig

    return dataclasses.asdict(LMConfig())


def run_train(args) -> int:
    from rerank.nmt.lm import LMConfig, read_training_text, train_lm
    from rerank.io import read_lines

    device = setup_torch(args)
    check_run_dir(args.out)
    fields = {f.name for f in dataclasses.fields(LMConfig)}
    cfg = LMConfig(**{k: v for k, v in vars(args).items() if k in fields and k != "lang"}, lang=args.lang)
    train, val = read_training_text(args.train), read_lines(args.val)
    if not val:
        raise InputError("no validation sentences", args.val)
    state = train_lm(cfg, train, val, args.out, device, resume=not args.no_resume, progress=terminal_bars(),
                     log=lambda msg: print(msg, file=sys.stderr), wait=args.wait)
    print(json.dumps({k: state[k] for k in ("epoch", "best_ppl", "stopped")}))
    return 0


def run_score(args) -> int:
    from rerank.nmt.lm import LanguageModel
    from rerank.io import atomic_write, read_lines
    from rerank.outputs import check_outputs

    device = setup_torch(args)
    model_files = [os.path.join(args.model, name) for name in ("config.json", "vocab.json", "best.pt")]
    check_outputs([args.output], [args.input, *model_files])
    lm = LanguageModel.load(args.model, device)
    lines = read_lines(args.input)
    if not lines:
        raise InputError("no lines to score (the input is empty)", args.input)
    sums, counts = lm.score(lines, args.batch_size, progress=terminal_bars())
    with atomic_write(args.output) as out:
        for value, n in zip(sums, counts):
            out.write(f"{value:.6f}\t{n}\n")
    return 0
