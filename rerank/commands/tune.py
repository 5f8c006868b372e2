"""`rerank tune`: tune feature weights on an n-best list with k-best MIRA, MERT or PRO."""

from __future__ import annotations

import os
import sys
import time

import numpy as np

from rerank.commands._common import FORMAT_HELP, add_nbest_input, load_nbest
from rerank.errors import InputError
from rerank.formats import read_references
from rerank.weights import read_weights, weight_vector, write_weights

TUNERS = ("mira", "mert", "pro")
MERT_METRICS = ("bleu", "ter", "chrf", "chrf++", "meteor")


def add_parser(subparsers):
    p = subparsers.add_parser(
        "tune", help="tune feature weights (k-best MIRA, MERT or PRO)",
        description="Tune the feature weights of a reranker on an n-best list and its references. "
        "mira (default) is k-best batch MIRA as Moses kbmira runs it (C=0.01, 60 epochs, averaged "
        "weights, background BLEU with decay 0.999, best epoch by corpus BLEU); mert is Och's MERT with "
        "exact line search, random directions and restarts (any metric: BLEU, TER, chrF, METEOR); "
        "pro is Hopkins & May's pairwise ranking with logistic regression. The tuning metric is sacrebleu's "
        "corpus BLEU, equal to `rerank eval`'s for the same 1-best and tokenisation. " + FORMAT_HELP,
        epilog="Example: rerank tune --nbest dev.nbest --ref dev.ref --tuner mira --runs 3 -o w.json "
        "(writes w.run1.json .. w.run3.json and w.json = the run with the best tuning score).",
    )
    p.add_argument("--nbest", required=True, help="tuning n-best list")
    add_nbest_input(p, positional=False)
    p.add_argument("-r", "--ref", action="append", required=True, metavar="REF", help="reference file (repeat for several)")
    p.add_argument("-o", "--output", required=True, help="output weights (JSON; the run config is in its \"meta\")")
    p.add_argument("--tuner", choices=TUNERS, default="mira", help="tuning algorithm (default: mira)")
    p.add_argument("--runs", type=int, default=1, help="independent runs with seeds seed..seed+R-1; R > 1 writes "
                   "OUTPUT.run1.json .. runR.json for the optimizer-instability report of `rerank eval` (default 1)")
    p.add_argument("--seed", type=int, default=1, help="random seed of the first run (default 1)")
    p.add_argument("--init", metavar="WEIGHTS", help="starting weights (JSON or Moses lines; default: all zero as kbmira)")
    p.add_argument("--tune", dest="tune_features", metavar="F1,F2", help="tune only these features; the others stay at their start value")
    p.add_argument("--fix", metavar="F1,F2", help="keep these features at their start value")
    p.add_argument("--normalize", choices=["none", "l1", "max"], default="none",
                   help="rescale the output weights (sum |w| = 1 or max |w| = 1; ranking unchanged; default none)")
    p.add_argument("--sentences", metavar="A-B", help="tune on sentences A..B only (0-based, inclusive; the references are cut the same way)")
    m = p.add_argument_group("metric")
    m.add_argument("--metric", choices=MERT_METRICS, default="bleu", help="metric to optimise (mert only; mira/pro use BLEU)")
    m.add_argument("--tokenize", default="none", help="BLEU tokeniser as sacrebleu -tok (default none: n-best lists are "
                   "usually tokenised like their references; 13a, intl, ... otherwise)")
    m.add_argument("--lowercase", action="store_true", help="case-insensitive BLEU")
    m.add_argument("--lang", default="en", help="target language for METEOR (default en)")
    k = p.add_argument_group("mira")
    k.add_argument("--epochs", type=int, default=60, help="epochs (default 60)")
    k.add_argument("--C", dest="C", type=float, default=0.01, help="step-size cap C (default 0.01)")
    k.add_argument("--decay", type=float, default=0.999, help="background BLEU decay (default 0.999)")
    k.add_argument("--model-bg", action="store_true", help="background from the model 1-best instead of the hope")
    k.add_argument("--no-shuffle", action="store_true", help="visit sentences in file order")
    t = p.add_argument_group("mert")
    t.add_argument("--restarts", type=int, default=20, help="start points: the initial one plus random ones (default 20)")
    t.add_argument("--random-directions", type=int, default=10, help="random directions per iteration besides the coordinates (default 10)")
    t.add_argument("--max-iterations", type=int, default=100, help="line-search rounds per start point (default 100)")
    r = p.add_argument_group("pro")
    r.add_argument("--pro-samples", type=int, default=5000, help="pairs sampled per sentence (default 5000)")
    r.add_argument("--pro-keep", type=int, default=50, help="pairs kept per sentence (default 50)")
    r.add_argument("--pro-threshold", type=float, default=0.05, help="minimum sentence-BLEU difference (default 0.05)")
    r.add_argument("--pro-C", type=float, default=0.01, help="inverse L2 strength of the logistic regression (default 0.01)")
    o = p.add_argument_group("output")
    o.add_argument("-v", "--verbose", action="store_true", help="print the tuning metric per epoch / iteration")
    o.add_argument("--plot", metavar="PNG", help="draw the tuning curve and the final weights")
    o.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def _names(text: str | None) -> list[str] | None:
    return [n.strip() for n in text.split(",") if n.strip()] if text else None


def _sentence_range(text: str, n: int) -> np.ndarray:
    try:
        a, _, b = text.partition("-")
        lo, hi = int(a), int(b) if b else int(a)
    except ValueError:
        raise InputError(f"--sentences {text!r}: expected A-B (0-based, inclusive)") from None
    if not 0 <= lo <= hi < n:
        raise InputError(f"--sentences {text!r}: out of range for {n} sentences")
    return np.arange(lo, hi + 1)


def run_paths(output: str, runs: int) -> list[str]:
    if runs == 1:
        return [output]
    stem, ext = os.path.splitext(output)
    return [f"{stem}.run{r}{ext or '.json'}" for r in range(1, runs + 1)]


def run(args) -> int:
    from mira.common import normalize, prepare

    if args.runs < 1:
        raise InputError("--runs must be at least 1")
    if args.tuner != "mert" and args.metric != "bleu":
        raise InputError(f"--metric {args.metric} needs --tuner mert (mira and pro optimise BLEU)")
    start = time.time()
    nbest, _ = load_nbest(args, args.nbest)
    refs = read_references(args.ref)
    if len(refs[0]) != nbest.n_sentences:
        raise InputError(f"{len(refs[0])} reference lines for {nbest.n_sentences} n-best sentences", args.ref[0])
    if args.sentences:
        keep = _sentence_range(args.sentences, nbest.n_sentences)
        nbest = nbest.select_sentences(keep)
        refs = [[stream[i] for i in keep] for stream in refs]
    w0 = np.zeros(len(nbest.feature_names))
    if args.init:
        w0 = weight_vector(read_weights(args.init), nbest.feature_names, source=args.init)
    data = prepare(nbest, refs, metric=args.metric, tokenize=args.tokenize, lowercase=args.lowercase,
                   tune=_names(args.tune_features), fix=_names(args.fix), lang=args.lang,
                   progress=not args.quiet, source=args.nbest)
    if args.normalize != "none" and not data.tuned.all():
        raise InputError(f"--normalize {args.normalize} would rescale fixed features; use --normalize none with --fix/--tune")
    metric = args.metric.upper() if args.metric != "chrf++" else "chrF++"
    merged = data.n_input_hyps - data.nbest.n_hyps
    print(f"tuning set: {nbest.n_sentences} sentences, {data.nbest.n_hyps} hypotheses"
          + (f" ({merged} exact duplicates merged)" if merged else "")
          + f", {int(data.tuned.sum())} of {len(data.feature_names)} features tuned", file=sys.stderr)

    results = []
    for r, path in enumerate(run_paths(args.output, args.runs), start=1):
        seed = args.seed + r - 1
        label = f"run {r}: " if args.runs > 1 else ""
        curve, w, initial, best, extra = _tune_once(args, data, w0, seed, label)
        w = normalize(w, args.normalize, data.tuned)
        print(f"{label}{metric} initial {initial:.2f} -> tuned {best:.2f} ({args.tuner}, seed {seed})")
        meta = {
            "tuner": args.tuner, "seed": seed, "run": r, "runs": args.runs, "command": sys.argv,
            "nbest": os.path.abspath(args.nbest), "references": [os.path.abspath(x) for x in args.ref],
            "sentences": args.sentences, "metric": args.metric, "tokenize": args.tokenize, "lowercase": args.lowercase,
            "init": args.init, "tuned_features": [n for n, t in zip(data.feature_names, data.tuned) if t],
            "fixed_features": [n for n, t in zip(data.feature_names, data.tuned) if not t],
            "normalize": args.normalize, "options": _tuner_options(args),
            "hypotheses": data.nbest.n_hyps, "duplicates_merged": merged,
            "initial_score": initial, "tuned_score": best, "curve": curve, **extra,
        }
        write_weights(path, dict(zip(data.feature_names, w.tolist())), meta)
        results.append((best, path, w, curve, r))
    if args.runs > 1:
        best_run = max(results, key=lambda x: x[0])
        meta = {"tuner": args.tuner, "best_of_runs": best_run[1], "run": best_run[4], "runs": args.runs,
                "tuned_scores": [x[0] for x in results], "command": sys.argv}
        write_weights(args.output, dict(zip(data.feature_names, best_run[2].tolist())), meta)
        scores = np.array([x[0] for x in results])
        print(f"{args.runs} runs: {metric} mean {scores.mean():.2f}, sd {scores.std(ddof=1):.2f}; "
              f"best run {best_run[4]} copied to {args.output}")
    if args.plot:
        from mira.plot import plot_tuning

        plot_tuning(args.plot, [(f"run {x[4]}", x[3]) for x in results], data.feature_names, results[0][2] if args.runs == 1
                    else max(results, key=lambda x: x[0])[2], metric=metric, tuner=args.tuner)
    print(f"done in {time.time() - start:.1f}s", file=sys.stderr)
    return 0


def _tuner_options(args) -> dict:
    if args.tuner == "mira":
        return {"epochs": args.epochs, "C": args.C, "decay": args.decay, "model_bg": args.model_bg, "shuffle": not args.no_shuffle}
    if args.tuner == "mert":
        return {"restarts": args.restarts, "random_directions": args.random_directions, "max_iterations": args.max_iterations}
    return {"samples": args.pro_samples, "keep": args.pro_keep, "threshold": args.pro_threshold, "C": args.pro_C}


def _tune_once(args, data, w0, seed, label):
    """One tuning run; returns (curve [(step, score)], weights, initial, tuned, extra meta)."""
    progress = not args.quiet
    if args.tuner == "mira":
        from mira.kbmira import kbmira

        def show(rec):
            if args.verbose:
                print(f"{label}epoch {rec['epoch']}: BLEU {rec['score']:.2f}, {rec['updates']} updates, "
                      f"avg loss {rec['avg_loss']:.4f}", file=sys.stderr)

        res = kbmira(data, w0, C=args.C, epochs=args.epochs, decay=args.decay, model_bg=args.model_bg, seed=seed,
                     shuffle=not args.no_shuffle, progress=progress, on_epoch=show)
        curve = [[h["epoch"], h["score"]] for h in res.history]
        return curve, res.weights, res.initial_score, res.best_score, {"best_epoch": res.best_epoch}
    if args.tuner == "mert":
        from mira.mert import mert

        def show(rec):
            if args.verbose:
                print(f"{label}start {rec['restart']} iteration {rec['iteration']}: {args.metric.upper()} {rec['score']:.2f}",
                      file=sys.stderr)

        res = mert(data, w0, seed=seed, restarts=args.restarts, random_directions=args.random_directions,
                   max_iterations=args.max_iterations, progress=progress, on_iteration=show)
        curve = [[k + 1, h["score"]] for k, h in enumerate(res.history)]
        return curve, res.weights, res.initial_score, res.best_score, {}
    from mira.pro import pro

    res = pro(data, w0, seed=seed, samples=args.pro_samples, keep=args.pro_keep, threshold=args.pro_threshold, C=args.pro_C)
    if args.verbose:
        print(f"{label}PRO: {res.n_pairs} pairs", file=sys.stderr)
    return [[1, res.best_score]], res.weights, res.initial_score, res.best_score, {"pairs": res.n_pairs}
