"""`rerank recipe multi30k`: the paper's reproduction as one resumable command."""

from __future__ import annotations

from rerank.device import add_torch_options, setup_torch
from rerank.options import add_option_flags, options_from_args
from rerank.recipes.multi30k_config import RecipeConfig


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
    add_option_flags(m, RecipeConfig)   # one flag per RecipeConfig field (rerank.options), but these:
    # the settings' flags name JSON files, read by the command (an error names the file and line, exit 2)
    for name, settings in (("embedding", 'embedding training settings (keys of embeddings/config.py DEFAULTS, e.g. '
                                         '{"dropout": 0.0}); recorded with every model'),
                           ("nmt", 'NMT training settings (fields of nmt/train.py TrainConfig, e.g. {"subword": '
                                   '"bpe"}); recorded with every run')):
        m.add_argument(f"--{name}-config", dest=f"{name}_config_file", metavar="JSON",
                       help=f"a JSON file of {settings} (default: none)")
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
    import dataclasses
    import os

    from rerank.recipes.multi30k import Recipe

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
    cfg = dataclasses.replace(options_from_args(RecipeConfig, args), nbest_dir=nbest_dir,
                              embedding_config=_json_object(args.embedding_config_file),
                              nmt_config=_json_object(args.nmt_config_file))
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
