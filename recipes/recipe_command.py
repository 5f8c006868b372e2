"""`rerank recipe multi30k`: the paper's reproduction as one resumable command."""

from __future__ import annotations

import argparse

from rerank.recipes.demo_command import bootstrap_count
from rerank.cliargs import nonnegative_int, positive_float, positive_int
from rerank.device import add_torch_options, setup_torch


def _list_of(kind, what: str, test):
    """argparse type: a comma-separated list of `kind` values that pass `test`."""
    def parse(text: str) -> list:
        try:
            values = [kind(x) for x in text.split(",")]
        except ValueError:
            values = []
        if not values or not all(test(v) for v in values):
            raise argparse.ArgumentTypeError(f"must be a comma-separated list of {what}, got {text!r}")
        return values
    return parse


sizes = _list_of(int, "positive integers", lambda v: v >= 1)
betas = _list_of(float, "numbers in [0, 1]", lambda v: 0 <= v <= 1)


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
    m.add_argument("--image-features", help="directory with {train,val,test_2016_flickr}*.npy image features "
                   "(default: none, text-only)")
    m.add_argument("--preset", default="cpu", choices=["cpu", "paper", "tiny"],
                   help="model sizes for NMT and embeddings, as `nmt train --preset` and `embed train --preset` "
                   "(tiny: smoke tests only; default: %(default)s)")
    m.add_argument("--nbest", type=sizes, default=[20, 50], help="n-best sizes (default: 20,50)")
    m.add_argument("--flavours", default="weak,regular,optimised", help="NMT flavours (default: %(default)s)")
    m.add_argument("--betas", type=betas, default=[1.0, 0.75, 0.5, 0.25],
                   help="MLMME beta values (with image features; default: 1,0.75,0.5,0.25)")
    m.add_argument("--nmt-dir", help="reuse NMT run directories DIR/<flavour> (from `rerank nmt train`; default: "
                   "train them)")
    m.add_argument("--nbest-dir", help="reuse n-best lists DIR/<flavour>.<val|test_2016>.<n>best.gz "
                   "(`shipped` = the lists inside the package; default: translate with the NMT models)")
    m.add_argument("--embedding-config", metavar="JSON", help="embedding training settings (keys of "
                   "embeddings/config.py DEFAULTS, e.g. {\"dropout\": 0.0}); recorded with every model (default: none)")
    m.add_argument("--embedding-model", metavar="MODEL", help="use this trained text-only embedding model for "
                   "s_s instead of training one (e.g. the shipped rerank/data/models/mlmme-small.pt; default: train)")
    m.add_argument("--nmt-config", metavar="JSON", help="NMT training settings (fields of nmt/train.py TrainConfig, "
                   "e.g. {\"subword\": \"bpe\"}); recorded with every run (default: none)")
    m.add_argument("--nmt-max-minutes", type=positive_float, help="training budget per NMT flavour (default: none)")
    m.add_argument("--embed-max-minutes", type=positive_float,
                   help="training budget per embedding model (default: none)")
    m.add_argument("--nmt-max-epochs", type=positive_int, help="epoch limit per NMT flavour (default: nmt train's)")
    m.add_argument("--embed-max-epochs", type=positive_int,
                   help="epoch limit per embedding model (default: embed train's)")
    m.add_argument("--runs", type=positive_int, default=3, help="MIRA runs per system (default: %(default)s)")
    m.add_argument("--epochs", type=positive_int, default=60, help="MIRA epochs (default: %(default)s)")
    m.add_argument("--ar", type=positive_int, default=10000,
                   help="approximate randomisation trials (default: %(default)s)")
    m.add_argument("--bootstrap", type=bootstrap_count, default=1000,
                   help="bootstrap samples for s_sel and CIs; 0: none (default: %(default)s)")
    m.add_argument("--seed", type=nonnegative_int, default=1, help="(default: %(default)s)")
    add_torch_options(m)
    _add_reproduce(verbs)
    parser.set_defaults(func=run)


def _add_reproduce(verbs) -> None:
    r = verbs.add_parser("reproduce", help="every model, list, table and figure of docs/results, from the data",
                         description="Train the embedding model, the three NMT flavours, the LM and the channel "
                         "model with the committed configurations (recipes/configs/), run `recipe multi30k` and "
                         "the stronger reranker, and score the NMT lists; resumable. About seven and a half hours "
                         "on two CPU cores. `make reproduce DATA=../shared/data` runs it with --publish.")
    r.add_argument("--data-dir", required=True, help="data root with multi30k/ (task1/, task2/) and sts/, "
                   "e.g. ../shared/data")
    r.add_argument("--out", required=True, help="run directory (everything is written here)")
    r.add_argument("--configs", metavar="DIR", help="configurations embedding, nmt, recipe, lm, channel, stronger "
                   ".json (default: the committed recipes/configs)")
    r.add_argument("--publish", action="store_true", help="when finished, copy the results into docs/results and "
                   "the lists and the embedding model into rerank/data (default: off)")
    add_torch_options(r)


def _json_object(path: str | None) -> dict:
    from rerank.io import read_json_object

    return read_json_object(path) if path else {}


def run(args) -> int:
    """The recipe, with the models' training lines (INFO records of the `rerank` loggers: NMT and
    embedding training) on stderr, as `rerank nmt train` and `rerank embed train` show them."""
    import logging

    from rerank.cliargs import stderr_log

    with stderr_log(logging.INFO):
        return _run(args)


def _run(args) -> int:
    import os

    from rerank.recipes.multi30k import Recipe, RecipeConfig

    if args.recipe == "reproduce":
        return run_reproduce(args)
    setup_torch(args)
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        from rerank.errors import InputError

        raise InputError("--out must be a directory, this is a file", args.out)
    nbest_dir = args.nbest_dir
    if nbest_dir == "shipped":
        from rerank.recipes.demo import data_dir

        nbest_dir = os.path.join(data_dir(), "multi30k")
    cfg = RecipeConfig(
        data_dir=args.data_dir, out=args.out, image_features=args.image_features, preset=args.preset,
        nbest_sizes=args.nbest, flavours=args.flavours.split(","), betas=args.betas, nmt_dir=args.nmt_dir,
        nbest_dir=nbest_dir, nmt_max_minutes=args.nmt_max_minutes, embed_max_minutes=args.embed_max_minutes,
        nmt_max_epochs=args.nmt_max_epochs, embed_max_epochs=args.embed_max_epochs, runs=args.runs,
        epochs=args.epochs, ar_trials=args.ar, bootstrap=args.bootstrap, seed=args.seed, device=args.device,
        embedding_config=_json_object(args.embedding_config), nmt_config=_json_object(args.nmt_config),
        embedding_model=args.embedding_model,
    )
    Recipe(cfg).run()
    print(f"tables: {os.path.join(args.out, 'tables')}")
    return 0


def run_reproduce(args) -> int:
    import os

    from rerank.recipes.reproduce import CONFIGS, Reproduction, publish
    from rerank.errors import InputError

    device = setup_torch(args)
    for needed in (os.path.join("multi30k", "task1", "raw"), "sts"):
        if not os.path.isdir(os.path.join(args.data_dir, needed)):
            raise InputError(f"not the data root: {needed}/ is missing", args.data_dir)
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise InputError("--out must be a directory, this is a file", args.out)
    configs = args.configs or CONFIGS
    Reproduction(args.data_dir, args.out, device, args.threads, configs).run()
    if args.publish:
        for path in publish(args.out, configs=configs):
            print(f"wrote {path}")
    return 0
