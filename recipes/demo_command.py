"""`rerank demo`: the whole pipeline on the data shipped inside the package."""

from __future__ import annotations


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "demo", help="rerank the shipped Multi30k n-best lists end to end (a few minutes on a CPU)",
        description="Reads the Multi30k En→De val and test_2016 n-best lists shipped in the package, "
        "adds the sentence-sentence embedding feature s_s(source, hyp) with the shipped small "
        "MLMME model (text only: no image features exist for the shipped data, so s_i is not "
        "used), tunes feature weights on val with k-best MIRA (R runs per system), reranks "
        "test_2016 and prints BLEU, METEOR and TER with stratified approximate-randomisation "
        "significance: † against the NMT 1-best, ‡ against MIRA on the NMT features alone.",
    )
    parser.add_argument("--out", help="keep every file here: feature n-best lists, weights, outputs, tables, plot")
    parser.add_argument("--flavour", help="NMT flavour of the shipped lists (weak, regular, optimised; default optimised)")
    parser.add_argument("--nbest-size", type=int, default=20, help="20 or 50 (default 20)")
    parser.add_argument("--runs", type=int, default=3, help="MIRA runs (seeds) per system (default 3)")
    parser.add_argument("--epochs", type=int, default=60, help="MIRA epochs (default 60)")
    parser.add_argument("--ar", type=int, default=10000, help="approximate randomisation trials (default 10000)")
    parser.add_argument("--bootstrap", type=int, default=1000, help="bootstrap samples for s_sel and CIs (default 1000)")
    parser.add_argument("--metrics", default="bleu,meteor,ter", help="comma-separated metrics (default bleu,meteor,ter)")
    parser.add_argument("--model", help="embedding model to use instead of the shipped one")
    parser.add_argument("--sentences", type=int, help="use only the first N sentences of val and test (a quick look)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--device", default="cpu", help="cpu or cuda (falls back to the CPU with a message)")
    parser.set_defaults(func=run)


def run(args) -> int:
    from recipes.demo import run_demo

    report = run_demo(out_dir=args.out, flavour=args.flavour, n=args.nbest_size, runs=args.runs, epochs=args.epochs,
                      ar_trials=args.ar, bootstrap=args.bootstrap, model=args.model, seed=args.seed,
                      metrics=tuple(args.metrics.split(",")), device=args.device,
                      sentences=args.sentences)
    print(report)
    return 0
