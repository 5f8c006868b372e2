"""The settings of `rerank recipe multi30k` (RecipeConfig), apart from the recipe's code: the
command line builds its flags from them on every `rerank` run, so this module imports nothing
heavy (rerank.recipes.multi30k, the recipe itself, imports the metrics and the tuners)."""

from __future__ import annotations

from dataclasses import dataclass

from rerank.options import (MAX_EPOCHS, MAX_RESAMPLES, MAX_RUNS, MAX_TRIALS, PATH, NONNEGATIVE_INT, POSITIVE, POSITIVE_INT, UNIT_INTERVAL,
                            at_most, int_check, list_of, one_of, option)

FLAVOURS = ("weak", "regular", "optimised")
# recipe preset -> (NMT size preset, embedding preset); `tiny` is for smoke tests only
PRESETS = {"cpu": ("cpu", "cpu"), "paper": ("paper", "paper"), "tiny": ("tiny", "small")}
BOOTSTRAP = at_most(int_check("0 (no s_sel or intervals) or at least 2", lambda v: v == 0 or v >= 2), MAX_RESAMPLES)


@dataclass
class RecipeConfig:
    """The recipe's settings, declared once: `rerank recipe multi30k` generates its flags from
    these fields (rerank.options), the reproduction passes them from recipes/configs/recipe.json."""

    data_dir: str = option(help="Multi30k directory (task1/, task2/), e.g. ../shared/data/multi30k", check=PATH)
    out: str = option(help="run directory (everything is written here)", check=PATH)
    image_features: str | None = option(None, "directory with {train,val,test_2016_flickr}*.npy image features",
                                        check=PATH, default_text="none, text-only")
    preset: str = option("cpu", "model sizes for NMT and embeddings, as `nmt train --preset` and `embed train "
                         "--preset` (tiny: smoke tests only)", choices=tuple(PRESETS))
    nbest_sizes: list[int] = option([20, 50], "n-best sizes", flag="--nbest",
                                    check=list_of(POSITIVE_INT, "positive integers"))
    flavours: list[str] = option(list(FLAVOURS), "NMT flavours",
                                 check=list_of(one_of(FLAVOURS), f"NMT flavours ({', '.join(FLAVOURS)})"))
    betas: list[float] = option([1.0, 0.75, 0.5, 0.25], "MLMME beta values (with image features)",
                                check=list_of(UNIT_INTERVAL, "numbers in [0, 1]"))
    nmt_dir: str | None = option(None, "reuse NMT run directories DIR/<flavour> (from `rerank nmt train`)",
                                 check=PATH, default_text="train them")
    nbest_dir: str | None = option(None, "reuse n-best lists DIR/<flavour>.<val|test_2016>.<n>best.gz (the command "
                                   "line's `shipped`: the lists inside the package)",
                                   check=PATH, default_text="translate with the NMT models")
    embedding_config: dict = option({}, "embedding training settings: keys of embeddings/config.py DEFAULTS, e.g. "
                                    "{\"dropout\": 0.0}; recorded with every model", cli=False)
    embedding_model: str | None = option(None, "use this trained text-only embedding model for s_s instead of "
                                         "training one (e.g. the shipped rerank/data/models/mlmme-bpe.pt)",
                                         check=PATH, metavar="MODEL", default_text="train")
    nmt_config: dict = option({}, "NMT training settings: fields of nmt/train.py TrainConfig, e.g. "
                              "{\"subword\": \"bpe\"}; recorded with every run", cli=False)
    nmt_max_minutes: float | None = option(None, "training budget per NMT flavour", check=POSITIVE)
    embed_max_minutes: float | None = option(None, "training budget per embedding model", check=POSITIVE)
    nmt_max_epochs: int | None = option(None, "epoch limit per NMT flavour", check=POSITIVE_INT,
                                        default_text="nmt train's")
    embed_max_epochs: int | None = option(None, "epoch limit per embedding model", check=POSITIVE_INT,
                                          default_text="embed train's")
    runs: int = option(3, f"MIRA runs per system (at most {MAX_RUNS:,})", check=at_most(POSITIVE_INT, MAX_RUNS))
    epochs: int = option(60, f"MIRA epochs (at most {MAX_EPOCHS:,})", check=at_most(POSITIVE_INT, MAX_EPOCHS))
    ar_trials: int = option(10000, f"approximate randomisation trials (at most {MAX_TRIALS:,})", flag="--ar",
                            check=at_most(POSITIVE_INT, MAX_TRIALS))
    bootstrap: int = option(1000, f"bootstrap samples for s_sel and CIs; 0: none (at most {MAX_RESAMPLES:,})",
                            check=BOOTSTRAP)
    seed: int = option(1, "random seed of the model training, the MIRA runs and the significance tests",
                       check=NONNEGATIVE_INT)
    # no generated flag: --device is rerank.device.add_torch_options' (every torch command's), and
    # the two settings' flags name JSON files that the command reads (recipes/recipe_command.py)
    device: str = option("cpu", "torch device", cli=False)
