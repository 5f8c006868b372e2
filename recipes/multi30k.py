"""The Multi30k reproduction of Calixto & Liu (2017), Tables 3/4, as one resumable command.

Steps (each skipped when its output exists and is complete; features and experiments also
record the SHA-256 of their inputs and are redone when an input file has changed):
1. embedding models: with image features, VSE (de only, beta = 1) and MLMME (en+de) for each
   beta; without them, one text-only MLMME (R_ML only) -- said in the log and every table;
2. NMT: train the weak / regular / optimised flavours, or reuse run directories (--nmt-dir);
3. n-best lists for val and test_2016 (beam = n), or reuse existing lists (--nbest-dir);
4. features: s_s (and s_i with images) from every embedding model, as prefixed columns;
5. per flavour and n: k-best MIRA on val (R runs per system), rerank test, evaluate BLEU,
   METEOR, TER with stratified approximate randomisation (dagger: vs the NMT 1-best;
   double dagger: vs VSE with images, else vs MIRA on the NMT features alone);
6. tables (Markdown, LaTeX, JSON), delta plots, and the oracle-BLEU-vs-n curve.
"""

from __future__ import annotations

import logging
import json
import os
import platform
import sys
import time
from dataclasses import asdict
from typing import Any

import numpy as np

from rerank.api import EvalOptions
from rerank.recipes.experiment import SystemSpec, mira, run_experiment
from rerank.recipes.steps import Steps
from rerank.errors import InputError
from rerank.formats import read_nbest, read_references, write_nbest
from rerank.io import atomic_write, read_lines
from rerank.recipes.multi30k_config import FLAVOURS, PRESETS, RecipeConfig
from rerank.cliargs import terminal_bars

logger = logging.getLogger(__name__)

SPLITS = {"val": "val", "test_2016": "test_2016_flickr"}
BASE_FEATURES = ["nmt", "nmt_norm", "len"]


class Recipe:
    def __init__(self, cfg: RecipeConfig):
        self.cfg = cfg
        if cfg.preset not in PRESETS:
            raise InputError(f"unknown preset {cfg.preset!r} (known: {', '.join(PRESETS)})")
        unknown = [f for f in cfg.flavours if f not in FLAVOURS]
        if unknown:
            raise InputError(f"unknown NMT flavour {unknown[0]!r} (known: {', '.join(FLAVOURS)})")
        if not os.path.isdir(os.path.join(cfg.data_dir, "task1", "raw")):
            raise InputError("not a Multi30k directory (task1/raw/ is missing)", cfg.data_dir)
        if cfg.embedding_model and cfg.image_features:
            raise InputError("--embedding-model is a text-only model; with --image-features the recipe trains its own")
        self.nmt_preset, self.embed_preset = PRESETS[cfg.preset]
        self.start = time.time()
        os.makedirs(cfg.out, exist_ok=True)
        self.images = self._find_image_features(cfg.image_features) if cfg.image_features else None
        self.steps = Steps(self.log)
        self._nmt_runs: dict[str, str] = {}

    # --- helpers -----------------------------------------------------------------------
    def log(self, msg: str) -> None:
        line = f"[{time.time() - self.start:7.1f}s] {msg}"
        logger.info(line)
        with open(os.path.join(self.cfg.out, "recipe.log"), "a", encoding="utf-8") as f:
            f.write(line + "\n")

    def path(self, *parts: str) -> str:
        return os.path.join(self.cfg.out, *parts)

    def _find_image_features(self, directory: str) -> dict[str, str]:
        found = {}
        for split in ("train", "val", "test_2016_flickr"):
            names = sorted(f for f in os.listdir(directory) if f.startswith(split) and f.endswith((".npy", ".npz")))
            if not names:
                raise InputError(f"no image features for split {split!r} (expected {split}*.npy)", directory)
            found[split] = os.path.join(directory, names[0])
        return found

    # --- 1. embedding models -------------------------------------------------------------
    def embedding_models(self) -> dict[str, dict]:
        """name -> {"path": model.pt, "prefix": column prefix, "images": bool}."""
        if self.cfg.embedding_model:
            self.log(f"using the given embedding model {self.cfg.embedding_model} (no embedding training)")
            return {"MLMME-text": {"path": self.cfg.embedding_model, "prefix": "mlmme_text_", "images": False}}
        if self.images is None:
            self.log("NO IMAGE FEATURES: training one text-only MLMME model (R_ML only, beta = 0); VSE and the "
                     "beta sweep need image features (--image-features DIR) and are skipped")
            specs: dict[str, dict[str, Any]] = {"MLMME-text": {"languages": "en,de", "beta": None}}
        else:
            specs = {"VSE": {"languages": "de", "beta": 1.0}}
            for beta in self.cfg.betas:
                specs[f"MLMME b={beta:g}"] = {"languages": "en,de", "beta": beta}
        models = {}
        for name, spec in specs.items():
            slug = name.lower().replace(" ", "").replace("=", "").replace(".", "")
            out = self.path("embeddings", slug)
            self.train_embedding(name, spec, out)
            models[name] = {"path": os.path.join(out, "model.pt"), "prefix": slug.replace("-", "_") + "_",
                            "images": self.images is not None}
        return models

    def train_embedding(self, name: str, spec: dict, out: str) -> None:
        """Train (or resume from OUT/checkpoint.pt) unless OUT/DONE.json records this config."""
        from rerank.embeddings.train import resolve_config, train

        config = {"preset": self.embed_preset, "languages": spec["languages"].split(","), "seed": self.cfg.seed,
                  **self.cfg.embedding_config}
        if self.cfg.embed_max_minutes:
            config["max_minutes"] = self.cfg.embed_max_minutes
        if self.cfg.embed_max_epochs:
            config["max_epochs"] = self.cfg.embed_max_epochs
        if spec["beta"] is not None:
            assert self.images is not None  # models with images (a beta) are trained only with image features
            config["beta"] = spec["beta"]
            config["image_features"] = {"train": self.images["train"], "val": self.images["val"]}
        resolved = {"data_dir": os.path.abspath(self.cfg.data_dir), **resolve_config(config)}
        step = f"embedding {name}"
        if self.steps.is_done(step, out, [], resolved, directory=True):
            return
        started, resume = self.steps.begin(step, out, resolved, directory=True)
        self.log(f"training embedding model {name}: {json.dumps(config)}")
        model = train(config, self.cfg.data_dir, out, self.cfg.device, resume=resume, progress=terminal_bars())
        self.steps.finish(step, out, [], resolved, started, directory=True, model=os.path.basename(model))

    # --- 2./3. NMT and n-best lists --------------------------------------------------------
    def nbest_path(self, flavour: str, split: str, n: int) -> str:
        if self.cfg.nbest_dir:
            existing = os.path.join(self.cfg.nbest_dir, f"{flavour}.{split}.{n}best.gz")
            if os.path.exists(existing):
                return existing
        return self.path("nbest", f"{flavour}.{split}.{n}best.gz")

    def nmt_run(self, flavour: str) -> str:
        """Train (or resume from RUN/last.pt) unless RUN/DONE.json records this config."""
        if self.cfg.nmt_dir and os.path.exists(os.path.join(self.cfg.nmt_dir, flavour, "best.pt")):
            return os.path.join(self.cfg.nmt_dir, flavour)
        if flavour not in self._nmt_runs:
            self._nmt_runs[flavour] = self.train_nmt(flavour)
        return self._nmt_runs[flavour]

    def train_nmt(self, flavour: str) -> str:
        from rerank.nmt.train import make_config, train_files

        run = self.path("nmt", flavour)
        limits = {"max_minutes": self.cfg.nmt_max_minutes, "max_epochs": self.cfg.nmt_max_epochs}
        overrides = {"seed": self.cfg.seed, **self.cfg.nmt_config, **{k: v for k, v in limits.items() if v is not None}}
        try:
            cfg = make_config(self.nmt_preset, flavour, **overrides)
        except (TypeError, ValueError) as exc:
            raise InputError(f"NMT config: {exc}") from None
        resolved = {"data_dir": os.path.abspath(self.cfg.data_dir), **asdict(cfg)}
        step = f"NMT {flavour}"
        if self.steps.is_done(step, run, [], resolved, directory=True):
            return run
        started, resume = self.steps.begin(step, run, resolved, directory=True)
        self.log(f"training NMT {flavour}: {json.dumps(asdict(cfg))}")
        state = train_files(cfg, os.path.join(self.cfg.data_dir, "task1", "raw"), run, device=self.cfg.device, resume=resume,
                            progress=terminal_bars())
        if state.get("stopped") == "time budget":
            self.log(f"NMT {flavour} was stopped by its time budget ({cfg.max_minutes} min) after epoch {state['epoch']}")
        self.steps.finish(step, run, [], resolved, started, directory=True,
                          **{k: state.get(k) for k in ("stopped", "epoch", "best_epoch", "best_bleu")})
        return run

    def nbest_lists(self, flavour: str) -> None:
        for split in SPLITS:
            for n in self.cfg.nbest_sizes:
                self.nbest_list(flavour, split, n)

    def nbest_list(self, flavour: str, split: str, n: int) -> None:
        """Translate with beam n unless the list was given (--nbest-dir) or its DONE marker matches."""
        out = self.nbest_path(flavour, split, n)
        if self.cfg.nbest_dir and os.path.dirname(out) == os.path.normpath(self.cfg.nbest_dir):
            self.log(f"n-best {flavour} {split} {n}: using the given list {out}")
            return
        from rerank.nmt.translate import translate_file

        run = self.nmt_run(flavour)
        source = os.path.join(self.cfg.data_dir, "task1", "raw", f"{SPLITS[split]}.en.gz")
        step, config, inputs = f"n-best {flavour} {split} {n}", {"beam": n, "nbest": n}, [os.path.join(run, "best.pt"), source]
        if self.steps.is_done(step, out, inputs, config):
            return
        started = self.steps.start(step, out, config)
        self.log(f"translating {source} with {run}: beam {n}, {n}-best")
        translate_file(run, source, out, beam=n, nbest=n, device=self.cfg.device, progress=terminal_bars())
        self.steps.finish(step, out, inputs, config, started)

    # --- 4. features -------------------------------------------------------------------------
    def featured(self, flavour: str, split: str, n: int, models: dict[str, dict]) -> str:
        """Path of the n-best list with every model's embedding features, made if missing or stale."""
        out = self.path("features", f"{flavour}.{split}.{n}best.feat.gz")
        source_path = os.path.join(self.cfg.data_dir, "task1", "raw", f"{SPLITS[split]}.en.gz")
        inputs = [self.nbest_path(flavour, split, n), source_path] + [m["path"] for m in models.values()]
        if self.images:
            inputs.append(self.images[SPLITS[split]])
        step, config = f"features {flavour} {split} {n}", {"models": {k: v["prefix"] for k, v in models.items()}}
        if self.steps.is_done(step, out, inputs, config):
            return out
        started = self.steps.start(step, out, config)
        from rerank.embeddings.data import load_features
        from rerank.embeddings.encoder import Encoder
        from rerank.embeddings.features import embedding_features
        from rerank.features import FeatureContext

        nbest = read_nbest(self.nbest_path(flavour, split, n))
        sources = read_lines(source_path)
        images = np.array(load_features(self.images[SPLITS[split]], nbest.n_sentences)) if self.images else None
        for model in models.values():
            encoder = Encoder.load(model["path"])
            which = ["s_s", "s_i"] if model["images"] else ["s_s"]
            if "en" not in encoder.languages:  # VSE is monolingual (German): only s_i
                which = ["s_i"]
            self.log(f"features {', '.join(model['prefix'] + w for w in which)} for {flavour} {split} {n}-best")
            context = FeatureContext(sources=sources, src_lang="en", tgt_lang="de", device=self.cfg.device,
                                     progress=terminal_bars())
            columns = embedding_features(nbest, encoder, which, context, images)
            for w in which:
                nbest = nbest.with_feature(model["prefix"] + w, columns[w])
        write_nbest(nbest, out)
        self.steps.finish(step, out, inputs, config, started)
        return out

    # --- 5./6. experiments and tables ------------------------------------------------------
    def systems(self, models: dict[str, dict], nbest) -> tuple[list[SystemSpec], str]:
        specs = [SystemSpec("MIRA: NMT features", BASE_FEATURES)]
        for name, model in models.items():
            cols = [c for c in nbest.feature_names if c.startswith(model["prefix"])]
            specs.append(SystemSpec(f"+ {name}", BASE_FEATURES + cols))
        second = "+ VSE" if "VSE" in models else "MIRA: NMT features"
        return specs, second

    def run(self) -> dict:
        self._save_config()
        models = self.embedding_models()
        results = {}
        for flavour in self.cfg.flavours:
            self.nbest_lists(flavour)
            for n in self.cfg.nbest_sizes:
                results[(flavour, n)] = self.experiment(flavour, n, models)
        self.write_tables()
        self.log(self.steps.summary())
        self.log("recipe complete")
        return results

    def experiment(self, flavour: str, n: int, models: dict[str, dict]) -> dict:
        """Tune, rerank and evaluate one flavour and list size, unless its DONE marker matches."""
        cfg = self.cfg
        exp_dir = self.path("experiments", f"{flavour}.{n}best")
        featured = [self.featured(flavour, split, n, models) for split in ("val", "test_2016")]
        step = f"experiment {flavour} {n}-best"
        config = {"runs": cfg.runs, "epochs": cfg.epochs, "seed": cfg.seed, "ar_trials": cfg.ar_trials,
                  "bootstrap": cfg.bootstrap, "tokenize": "13a", "meteor_modules": ["exact", "stem"]}
        if self.steps.is_done(step, exp_dir, featured, config, directory=True):
            with open(os.path.join(exp_dir, "results.json"), encoding="utf-8") as f:
                return json.load(f)
        started = self.steps.start(step, exp_dir, config, directory=True)
        dev, test = read_nbest(featured[0]), read_nbest(featured[1])
        raw = os.path.join(cfg.data_dir, "task1", "raw")
        dev_refs = read_references([os.path.join(raw, "val.de.gz")], dev.n_sentences)
        test_refs = read_references([os.path.join(raw, "test_2016_flickr.de.gz")], test.n_sentences)
        systems, second = self.systems(models, dev)
        self.log(f"experiment {flavour} {n}-best: {len(systems)} systems x {cfg.runs} runs")
        evaluation = EvalOptions(metrics=("bleu", "meteor", "ter"), lang="de", second_baseline=second, ar=cfg.ar_trials,
                                 bootstrap=cfg.bootstrap, seed=cfg.seed, tokenize="13a",
                                 meteor={"modules": config["meteor_modules"]})
        result = run_experiment(dev, dev_refs, test, test_refs, systems, mira(cfg.runs, cfg.seed, cfg.epochs, "13a"),
                                evaluation, out_dir=exp_dir, log=self.log)
        summary = json.loads(result.table.to_json())
        summary["oracle_bleu"] = result.oracle_bleu
        summary["dev_bleu"] = result.dev_scores
        with atomic_write(os.path.join(exp_dir, "summary.json")) as f:
            json.dump(summary, f, indent=1)
        self.steps.finish(step, exp_dir, featured, config, started, directory=True)
        return json.loads(result.table.to_json())

    def _save_config(self) -> None:
        import torch

        info = {"config": asdict(self.cfg), "image_features": self.images,
                "text_only": self.images is None, "python": platform.python_version(), "torch": torch.__version__,
                "numpy": np.__version__, "argv": sys.argv}
        with atomic_write(self.path("recipe.config.json")) as f:
            json.dump(info, f, indent=1)

    def write_tables(self) -> None:
        from rerank.recipes.tables import write_recipe_tables

        write_recipe_tables(self.cfg.out, self.cfg.flavours, self.cfg.nbest_sizes, text_only=self.images is None,
                            nbest_path=self.nbest_path, refs_path=os.path.join(self.cfg.data_dir, "task1", "raw", "test_2016_flickr.de.gz"))
