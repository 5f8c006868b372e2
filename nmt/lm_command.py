"""`rerank lm train|score`: the GRU language model behind the `lm` reranking feature."""

from __future__ import annotations

import dataclasses
import json
import sys


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
    t = verbs.add_parser("train", help="train (or resume) a language model")
    t.add_argument("--train", required=True, help="training text, one sentence per line (.gz ok)")
    t.add_argument("--val", required=True, help="validation text (early stopping on its perplexity)")
    t.add_argument("--lang", default="de", help="language, for Moses tokenisation (default de)")
    t.add_argument("--out", required=True, help="run directory (checkpoints, config, vocabulary, log)")
    t.add_argument("--subword", choices=["bpe", "unigram"], help="SentencePiece subwords (default: words)")
    defaults = lm_defaults()
    for name in ("emb_dim", "hidden", "dropout", "min_freq", "subword_size", "lr", "batch_size", "max_epochs",
                 "patience", "seed"):
        t.add_argument("--" + name.replace("_", "-"), type=type(defaults[name]), default=defaults[name],
                       help=f"(default {defaults[name]})")
    t.add_argument("--max-minutes", type=float, help="wall-clock budget of this invocation, spent in whole epochs: "
                   "one is started only if it is expected to end in time (as nmt train and embed train; default: none)")
    t.add_argument("--no-resume", action="store_true", help="start afresh even if OUT/last.pt exists")
    _device_options(t)
    t.set_defaults(func=run_train)
    s = verbs.add_parser("score", help="log-probability of every line (TSV: logprob, tokens)")
    s.add_argument("--model", required=True, help="run directory of `rerank lm train`")
    s.add_argument("--input", required=True, help="text, one sentence per line (.gz ok; - for stdin)")
    s.add_argument("-o", "--output", default="-", help="output TSV (default: stdout)")
    s.add_argument("--batch-size", type=int, default=128, help="sentences per batch (default 128)")
    _device_options(s)
    s.set_defaults(func=run_score)


def lm_defaults() -> dict:
    from nmt.lm import LMConfig

    return dataclasses.asdict(LMConfig())


def _device_options(p) -> None:
    p.add_argument("--device", default="cpu", help="cpu or cuda (falls back to the CPU with a message; default cpu)")
    p.add_argument("--threads", type=int, default=2, help="torch CPU threads (default 2)")


def _setup(args):
    import torch

    from rerank.device import resolve_device
    from rerank.errors import InputError

    if args.threads < 1:
        raise InputError(f"--threads must be >= 1, got {args.threads}")
    torch.set_num_threads(args.threads)
    return resolve_device(args.device)


def run_train(args) -> int:
    from nmt.lm import LMConfig, train_lm
    from rerank.errors import InputError
    from rerank.io import read_lines

    device = _setup(args)
    fields = {f.name for f in dataclasses.fields(LMConfig)}
    cfg = LMConfig(**{k: v for k, v in vars(args).items() if k in fields and k != "lang"}, lang=args.lang)
    for name in ("emb_dim", "hidden", "batch_size", "max_epochs", "patience", "subword_size", "min_freq"):
        if getattr(cfg, name) < 1:
            raise InputError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(cfg, name)}")
    if cfg.max_minutes is not None and not cfg.max_minutes > 0:
        raise InputError(f"--max-minutes must be > 0, got {cfg.max_minutes}")
    train, val = read_lines(args.train), read_lines(args.val)
    if not any(line.strip() for line in train):
        raise InputError("no training sentences", args.train)
    state = train_lm(cfg, train, val, args.out, device, resume=not args.no_resume, progress=sys.stderr.isatty(),
                     log=lambda msg: print(msg, file=sys.stderr))
    print(json.dumps({k: state[k] for k in ("epoch", "best_ppl", "stopped")}))
    return 0


def run_score(args) -> int:
    from nmt.lm import LanguageModel
    from rerank.io import atomic_write, read_lines

    device = _setup(args)
    lm = LanguageModel.load(args.model, device)
    sums, counts = lm.score(read_lines(args.input), args.batch_size, progress=sys.stderr.isatty())
    with atomic_write(args.output) as out:
        for value, n in zip(sums, counts):
            out.write(f"{value:.6f}\t{n}\n")
    return 0
