"""`rerank recipe multi30k`: the paper's reproduction as one resumable command."""

from __future__ import annotations


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "recipe", help="end-to-end reproductions (multi30k: Calixto & Liu 2017, Tables 3/4)",
        description="Run a whole reproduction: embedding models, NMT flavours, n-best lists, "
        "features, k-best MIRA tuning (R runs), reranking and significance tables. Every step "
        "is skipped when its output exists, so a killed run resumes where it stopped.",
    )
    verbs = parser.add_subparsers(dest="recipe", metavar="RECIPE")
    verbs.required = True
    m = verbs.add_parser("multi30k", help="Multi30k En→De reranking (Tables 3/4 of the paper)",
                         description="Without --image-features the run is text-only (said in the log and "
                         "in every table): one text-only MLMME model gives s_s; VSE and the beta sweep need images.")
    m.add_argument("--data-dir", required=True, help="Multi30k directory (task1/, task2/), e.g. ../shared/data/multi30k")
    m.add_argument("--out", required=True, help="run directory (everything is written here)")
    m.add_argument("--image-features", help="directory with {train,val,test_2016_flickr}*.npy image features")
    m.add_argument("--preset", default="cpu", choices=["cpu", "paper", "tiny"],
                   help="model sizes for NMT and embeddings (tiny: smoke tests only)")
    m.add_argument("--nbest", default="20,50", help="n-best sizes (default 20,50)")
    m.add_argument("--flavours", default="weak,regular,optimised", help="NMT flavours (default all three)")
    m.add_argument("--betas", default="1,0.75,0.5,0.25", help="MLMME beta values (with image features)")
    m.add_argument("--nmt-dir", help="reuse NMT run directories DIR/<flavour> (from `rerank nmt train`)")
    m.add_argument("--nbest-dir", help="reuse n-best lists DIR/<flavour>.<val|test_2016>.<n>best.gz "
                   "(`shipped` = the lists inside the package)")
    m.add_argument("--embedding-config", metavar="JSON", help="embedding training settings (keys of "
                   "embeddings/train.py DEFAULTS, e.g. {\"dropout\": 0.0}); recorded with every model")
    m.add_argument("--nmt-config", metavar="JSON", help="NMT training settings (fields of nmt/train.py TrainConfig, "
                   "e.g. {\"subword\": \"bpe\"}); recorded with every run")
    m.add_argument("--nmt-max-minutes", type=float, help="training budget per NMT flavour")
    m.add_argument("--embed-max-minutes", type=float, help="training budget per embedding model")
    m.add_argument("--nmt-max-epochs", type=int, help="epoch limit per NMT flavour")
    m.add_argument("--embed-max-epochs", type=int, help="epoch limit per embedding model")
    m.add_argument("--runs", type=int, default=3, help="MIRA runs per system (default 3)")
    m.add_argument("--epochs", type=int, default=60, help="MIRA epochs (default 60)")
    m.add_argument("--ar", type=int, default=10000, help="approximate randomisation trials")
    m.add_argument("--bootstrap", type=int, default=1000)
    m.add_argument("--seed", type=int, default=1)
    m.add_argument("--device", default="cpu", help="cpu or cuda (falls back to the CPU with a message)")
    parser.set_defaults(func=run)


def _json_object(path: str | None) -> dict:
    import json

    from rerank.errors import InputError
    from rerank.io import read_lines

    if not path:
        return {}
    try:
        value = json.loads("\n".join(read_lines(path)))
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON: {exc.msg}", path, exc.lineno) from None
    if not isinstance(value, dict):
        raise InputError("expected a JSON object of settings", path)
    return value


def run(args) -> int:
    import os

    from recipes.multi30k import Recipe, RecipeConfig

    nbest_dir = args.nbest_dir
    if nbest_dir == "shipped":
        from recipes.demo import data_dir

        nbest_dir = os.path.join(data_dir(), "multi30k")
    cfg = RecipeConfig(
        data_dir=args.data_dir, out=args.out, image_features=args.image_features, preset=args.preset,
        nbest_sizes=[int(x) for x in args.nbest.split(",")], flavours=args.flavours.split(","),
        betas=[float(x) for x in args.betas.split(",")], nmt_dir=args.nmt_dir, nbest_dir=nbest_dir,
        nmt_max_minutes=args.nmt_max_minutes, embed_max_minutes=args.embed_max_minutes,
        nmt_max_epochs=args.nmt_max_epochs, embed_max_epochs=args.embed_max_epochs, runs=args.runs,
        epochs=args.epochs, ar_trials=args.ar, bootstrap=args.bootstrap, seed=args.seed, device=args.device,
        embedding_config=_json_object(args.embedding_config), nmt_config=_json_object(args.nmt_config),
    )
    Recipe(cfg).run()
    print(f"tables: {os.path.join(args.out, 'tables')}")
    return 0
