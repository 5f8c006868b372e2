"""`rerank nmt train|translate`: train the attention NMT model and write n-best lists."""

from __future__ import annotations

import json
import os
import sys
import time

from rerank.cliargs import fraction, nonnegative_float, nonnegative_int, positive_float, positive_int, terminal_bars
from rerank.device import add_torch_options, check_run_dir, setup_torch
from rerank.errors import InputError
from rerank.options import Writing, add_option_flags


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "nmt", help="train an attention NMT model and generate n-best lists",
        description="Bahdanau-style attention NMT (bidirectional-GRU encoder, GRU decoder with additive "
        "attention) in plain PyTorch: train it, then write Moses n-best lists with features "
        "nmt (log-prob sum), nmt_norm (length-normalised) and len (word count).",
        epilog="Example: rerank nmt train --data-dir DATA --out runs/opt --flavour optimised --max-minutes 25; "
        "rerank nmt translate --model runs/opt --input DATA/test.en.gz --beam 20 --nbest-out test.20best.gz "
        "--ref DATA/test.de.gz. See docs/nmt.md.")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True
    _add_train(verbs)
    _add_translate(verbs)


def _add_train(verbs) -> None:
    from rerank.nmt.config import SIZE_PRESETS
    from rerank.nmt.config import TrainConfig

    d = TrainConfig()
    t = verbs.add_parser("train", help="train (or resume) a model",
                         description="Train on SPLIT files <data-dir>/train.<lang>[.gz], early-stopping on "
                         "validation BLEU (greedy) of <data-dir>/val. Resumes from OUT/last.pt if it exists.")
    t.add_argument("--data-dir", help="directory with train.<lang>[.gz] and val.<lang>[.gz] (default: none; "
                   "give it or the four split files)")
    for split in ("train", "val"):
        for side in ("src", "tgt"):
            t.add_argument(f"--{split}-{side}", help=f"{split} {side} file (overrides --data-dir; default: none)")
    t.add_argument("--src-lang", default="en", help="source language (default: %(default)s)")
    t.add_argument("--tgt-lang", default="de", help="target language (default: %(default)s)")
    t.add_argument("--out", required=True, help="run directory (checkpoints, config, log)")
    t.add_argument("--preset", "--size", dest="preset", default="cpu", choices=list(SIZE_PRESETS),
                   help="network size preset, the same words as `embed train --preset` (--size: old spelling; "
                   "default: %(default)s)")
    t.add_argument("--flavour", default="optimised", choices=["weak", "regular", "optimised"],
                   help="regularisation preset: weak (no dropout/L2), regular (dropout 0.5, L2 1e-8), "
                   "optimised (dropout 0.2) (default: %(default)s)")
    t.add_argument("--dropout", type=fraction, help="override the flavour's dropout (default: the flavour's)")
    t.add_argument("--l2", type=nonnegative_float, dest="weight_decay", metavar="L2", help="override the flavour's L2 weight "
                   "(default: the flavour's)")
    t.add_argument("--optimizer", choices=["adam", "adadelta"], help=f"(default: {d.optimizer})")
    t.add_argument("--lr", type=positive_float, help="learning rate (default: 1e-3 for adam, 1.0 for adadelta)")
    t.add_argument("--batch-size", type=positive_int, help=f"sentence pairs per batch (default: {d.batch_size})")
    t.add_argument("--min-freq", type=positive_int, help=f"vocabulary frequency cut-off (default: {d.min_freq})")
    t.add_argument("--subword", choices=["bpe", "unigram"],
                   help="SentencePiece subwords over the Moses tokens (default: words with --min-freq)")
    t.add_argument("--subword-size", type=positive_int,
                   help=f"pieces per language, specials included (default: {d.subword_size})")
    t.add_argument("--tie-embeddings", action="store_true", default=None,
                   help="share the target embedding and output matrix (default: off)")
    t.add_argument("--max-epochs", type=positive_int, help=f"(default: {d.max_epochs})")
    t.add_argument("--patience", type=positive_int,
                   help=f"epochs without val BLEU gain before stopping (default: {d.patience})")
    t.add_argument("--lr-decay", type=float, help="multiply the learning rate by this after an epoch without val "
                   f"BLEU gain, in (0, 1]; 1 = constant (default: {d.lr_decay})")
    t.add_argument("--max-minutes", type=positive_float,
                   help="wall-clock budget of this invocation, spent in whole epochs: training stops before an "
                   "epoch that would end after it (expected epoch time = the mean of the run's epochs so far; "
                   "default: none)")
    t.add_argument("--seed", type=nonnegative_int, help=f"(default: {d.seed})")
    t.add_argument("--no-resume", action="store_true", help="start afresh even if OUT/last.pt exists")
    add_option_flags(t, Writing)
    add_torch_options(t)
    t.set_defaults(func=run_train)


def _add_translate(verbs) -> None:
    r = verbs.add_parser("translate", help="write n-best lists / 1-best translations",
                         description="Beam search over every input line (none dropped; an empty line is "
                         "translated from </s> alone, an over-long line is cut to --max-src-len tokens, "
                         "unknown words become <unk>; each case is warned about on stderr). An input "
                         "without lines is refused.")
    r.add_argument("--model", required=True, help="run directory written by `rerank nmt train`")
    r.add_argument("--checkpoint", default="best", choices=["best", "last"], help="(default: %(default)s)")
    r.add_argument("--input", required=True, help="source text, one sentence per line (.gz ok)")
    r.add_argument("--nbest-out", help="Moses n-best output (.gz compresses; default: none)")
    r.add_argument("--output", help="1-best detokenised output (default: standard output when no other "
                   "output or --ref is given)")
    r.add_argument("--beam", type=positive_int, default=20, help="beam size (default: %(default)s)")
    r.add_argument("--nbest", type=positive_int, help="n-best size (<= beam; default: the beam size)")
    r.add_argument("--alpha", type=nonnegative_float, default=1.0,
                   help="length normalisation exponent: score = logprob / length^alpha; 0 = no normalisation "
                   "(default: %(default)s)")
    r.add_argument("--max-len-ratio", type=positive_float, default=2.0,
                   help="max target length = ratio * source length + 5 (default: %(default)s)")
    r.add_argument("--max-src-len", type=positive_int, default=200, help="source tokens kept (default: %(default)s)")
    r.add_argument("--batch-size", type=positive_int, default=32, help="sentences per batch (default: %(default)s)")
    r.add_argument("--ref", help="reference file: print 1-best BLEU/TER and the n-best oracle BLEU (default: none)")
    r.add_argument("--scores-out", help="write the scores (with --ref) as JSON (default: none)")
    add_torch_options(r)
    r.set_defaults(func=run_translate)


def echo_on_stderr(line: str) -> None:
    """A line of the training log on stderr, between the lines of a progress bar."""
    from tqdm import tqdm

    tqdm.write(line, file=sys.stderr)


def run_train(args) -> int:
    from rerank.nmt.data import read_parallel, split_paths
    from rerank.nmt.train import make_config, train
    device = setup_torch(args)
    check_run_dir(args.out)
    paths = {}
    for split in ("train", "val"):
        src, tgt = getattr(args, f"{split}_src"), getattr(args, f"{split}_tgt")
        if not (src and tgt):
            if not args.data_dir:
                raise InputError(f"give --data-dir or both --{split}-src and --{split}-tgt")
            src, tgt = split_paths(args.data_dir, split, args.src_lang, args.tgt_lang)
        paths[split] = (src, tgt)
    try:
        cfg = make_config(args.preset, args.flavour, src_lang=args.src_lang, tgt_lang=args.tgt_lang,
                          dropout=args.dropout, weight_decay=args.weight_decay, optimizer=args.optimizer,
                          lr=args.lr, batch_size=args.batch_size, min_freq=args.min_freq,
                          subword=args.subword, subword_size=args.subword_size,
                          tie_embeddings=args.tie_embeddings, max_epochs=args.max_epochs,
                          patience=args.patience, lr_decay=args.lr_decay, max_minutes=args.max_minutes, seed=args.seed)
    except ValueError as exc:
        raise InputError(str(exc)) from exc
    state = train(cfg, read_parallel(*paths["train"]), read_parallel(*paths["val"]), args.out,
                  device=device, resume=not args.no_resume, echo=echo_on_stderr, progress=terminal_bars(), wait=args.wait)
    print(json.dumps({k: state.get(k) for k in ("epoch", "best_epoch", "best_bleu", "stopped")}))
    return 0


def _translate_files(args) -> list[str]:
    """The files `translate` reads: the input, the reference and the model's."""
    model = [os.path.join(args.model, name) for name in
             ("config.json", "vocab.src.json", "vocab.tgt.json", f"{args.checkpoint}.pt")]
    return [args.input, args.ref, *model]


def _read_inputs(args) -> tuple[list[str], list[str] | None]:
    """The source lines (none is an error) and the reference lines (as many), if --ref."""
    from rerank.io import read_lines

    lines = read_lines(args.input)
    if not lines:
        raise InputError("no lines to translate (the input is empty)", args.input)
    refs = read_lines(args.ref) if args.ref else None
    if refs is not None and len(refs) != len(lines):
        raise InputError(f"{len(refs)} reference lines for {len(lines)} input lines", args.ref)
    return lines, refs


def run_translate(args) -> int:
    from rerank.nmt.checkpoint import load_model
    from rerank.nmt.translate import Search, translate, write_1best, write_nbest
    from rerank.outputs import check_outputs
    device = setup_torch(args)
    nbest = args.nbest or args.beam
    if nbest > args.beam:
        raise InputError(f"--nbest {nbest} must be between 1 and --beam {args.beam}")
    if args.scores_out and not args.ref:
        raise InputError("--scores-out needs --ref (the scores are against the reference)")
    check_outputs([args.nbest_out, args.output, args.scores_out], _translate_files(args))
    if not os.path.exists(os.path.join(args.model, f"{args.checkpoint}.pt")):
        raise InputError(f"no {args.checkpoint}.pt in the model directory", args.model)
    model, src_vocab, tgt_vocab, config = load_model(args.model, args.checkpoint, device)
    lines, refs = _read_inputs(args)
    t0 = time.time()
    search = Search(beam=args.beam, nbest=nbest, batch_size=args.batch_size, alpha=args.alpha,
                    max_len_ratio=args.max_len_ratio, max_src_len=args.max_src_len)
    results = translate(model, src_vocab, tgt_vocab, lines, config["train"]["src_lang"], config["train"]["tgt_lang"],
                        search, device=device, path=args.input, progress=terminal_bars())
    seconds = time.time() - t0
    print(f"translated {len(lines)} sentences in {seconds:.1f}s ({len(lines) / max(seconds, 1e-9):.1f} sent/s)",
          file=sys.stderr)
    if args.nbest_out:
        write_nbest(results, args.nbest_out)
    if args.output or not (args.nbest_out or args.ref):
        write_1best(results, args.output or "-")
    if refs is not None:
        _report_scores(args, results, refs, nbest, seconds)
    return 0


def _report_scores(args, results, refs: list[str], nbest: int, seconds: float) -> None:
    """Print 1-best BLEU/TER and the n-best oracle BLEU as JSON (and write them to --scores-out)."""
    from rerank.nmt.translate import bleu_ter, oracle_bleu
    from rerank.io import atomic_write

    scores = bleu_ter([r[0][0] if r else "" for r in results], refs)
    scores[f"oracle_bleu_{nbest}best"] = oracle_bleu([[e[0] for e in r] for r in results], refs)
    scores.update(beam=args.beam, nbest=nbest, alpha=args.alpha, sentences=len(refs), seconds=seconds,
                  model=os.path.abspath(args.model), checkpoint=args.checkpoint)
    print(json.dumps(scores))
    if args.scores_out:
        with atomic_write(args.scores_out) as f:
            json.dump(scores, f, indent=1)
            f.write("\n")
