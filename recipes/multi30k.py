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

import functools
import hashlib
import json
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from recipes.experiment import SystemSpec, run_experiment
from rerank.errors import InputError
from rerank.formats import read_nbest, read_references, write_nbest
from rerank.io import atomic_write, read_lines

FLAVOURS = ("weak", "regular", "optimised")
SPLITS = {"val": "val", "test_2016": "test_2016_flickr"}
BASE_FEATURES = ["nmt", "nmt_norm", "len"]
# recipe preset -> (NMT size preset, embedding preset); `tiny` is for smoke tests only
PRESETS = {"cpu": ("cpu", "cpu"), "paper": ("paper", "paper"), "tiny": ("tiny", "small")}


@functools.lru_cache(maxsize=None)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    """SHA-256 of a file; cached on (path, size, mtime), so the embedding model and the sources,
    inputs of many steps, are read once per run."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def file_digests(paths: list[str]) -> list[list[str]]:
    """[file name, SHA-256] of each input, to tell a reusable output from a stale one."""
    out = []
    for path in paths:
        st = os.stat(path)
        out.append([os.path.basename(path), _sha256(os.path.abspath(path), st.st_size, st.st_mtime_ns)])
    return out


@dataclass
class RecipeConfig:
    data_dir: str
    out: str
    image_features: str | None = None
    preset: str = "cpu"
    nbest_sizes: list[int] = field(default_factory=lambda: [20, 50])
    flavours: list[str] = field(default_factory=lambda: list(FLAVOURS))
    betas: list[float] = field(default_factory=lambda: [1.0, 0.75, 0.5, 0.25])
    nmt_dir: str | None = None
    nbest_dir: str | None = None
    nmt_max_minutes: float | None = None
    embed_max_minutes: float | None = None
    nmt_max_epochs: int | None = None
    embed_max_epochs: int | None = None
    runs: int = 3
    epochs: int = 60
    ar_trials: int = 10000
    bootstrap: int = 1000
    seed: int = 1
    device: str = "cpu"


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
        self.nmt_preset, self.embed_preset = PRESETS[cfg.preset]
        self.start = time.time()
        os.makedirs(cfg.out, exist_ok=True)
        self.images = self._find_image_features() if cfg.image_features else None

    # --- helpers -----------------------------------------------------------------------
    def log(self, msg: str) -> None:
        line = f"[{time.time() - self.start:7.1f}s] {msg}"
        print(line, file=sys.stderr)
        with open(os.path.join(self.cfg.out, "recipe.log"), "a", encoding="utf-8") as f:
            f.write(line + "\n")

    def path(self, *parts: str) -> str:
        return os.path.join(self.cfg.out, *parts)

    def _find_image_features(self) -> dict[str, str]:
        found = {}
        for split in ("train", "val", "test_2016_flickr"):
            names = sorted(f for f in os.listdir(self.cfg.image_features) if f.startswith(split) and f.endswith((".npy", ".npz")))
            if not names:
                raise InputError(f"no image features for split {split!r} (expected {split}*.npy)", self.cfg.image_features)
            found[split] = os.path.join(self.cfg.image_features, names[0])
        return found

    # --- 1. embedding models -------------------------------------------------------------
    def embedding_models(self) -> dict[str, dict]:
        """name -> {"path": model.pt, "prefix": column prefix, "images": bool}."""
        if self.images is None:
            self.log("NO IMAGE FEATURES: training one text-only MLMME model (R_ML only, beta = 0); VSE and the "
                     "beta sweep need image features (--image-features DIR) and are skipped")
            specs = {"MLMME-text": {"languages": "en,de", "beta": None}}
        else:
            specs = {"VSE": {"languages": "de", "beta": 1.0}}
            for beta in self.cfg.betas:
                specs[f"MLMME b={beta:g}"] = {"languages": "en,de", "beta": beta}
        models = {}
        for name, spec in specs.items():
            slug = name.lower().replace(" ", "").replace("=", "").replace(".", "")
            out = self.path("embeddings", slug)
            model = os.path.join(out, "model.pt")
            if not os.path.exists(model):
                self.train_embedding(name, spec, out)
            else:
                self.log(f"reusing embedding model {model}")
            models[name] = {"path": model, "prefix": slug.replace("-", "_") + "_", "images": self.images is not None}
        return models

    def train_embedding(self, name: str, spec: dict, out: str) -> None:
        from embeddings.train import train

        config = {"preset": self.embed_preset, "languages": spec["languages"].split(","), "seed": self.cfg.seed}
        if self.cfg.embed_max_minutes:
            config["max_minutes"] = self.cfg.embed_max_minutes
        if self.cfg.embed_max_epochs:
            config["max_epochs"] = self.cfg.embed_max_epochs
        if spec["beta"] is not None:
            config["beta"] = spec["beta"]
            config["image_features"] = {"train": self.images["train"], "val": self.images["val"]}
        self.log(f"training embedding model {name}: {json.dumps(config)}")
        train(config, self.cfg.data_dir, out, self.cfg.device)

    # --- 2./3. NMT and n-best lists --------------------------------------------------------
    def nbest_path(self, flavour: str, split: str, n: int) -> str:
        if self.cfg.nbest_dir:
            existing = os.path.join(self.cfg.nbest_dir, f"{flavour}.{split}.{n}best.gz")
            if os.path.exists(existing):
                return existing
        return self.path("nbest", f"{flavour}.{split}.{n}best.gz")

    def nmt_run(self, flavour: str) -> str:
        if self.cfg.nmt_dir and os.path.exists(os.path.join(self.cfg.nmt_dir, flavour, "best.pt")):
            return os.path.join(self.cfg.nmt_dir, flavour)
        run = self.path("nmt", flavour)
        if not os.path.exists(os.path.join(run, "DONE")):
            from nmt.train import make_config, train_files

            cfg = make_config(self.nmt_preset, flavour, seed=self.cfg.seed, max_minutes=self.cfg.nmt_max_minutes,
                              max_epochs=self.cfg.nmt_max_epochs)
            self.log(f"training NMT {flavour}: {json.dumps(asdict(cfg))}")
            train_files(cfg, os.path.join(self.cfg.data_dir, "task1", "raw"), run, device=self.cfg.device)
            with atomic_write(os.path.join(run, "DONE")) as f:
                f.write("trained\n")
        return run

    def nbest_lists(self, flavour: str) -> None:
        missing = [(s, n) for s in SPLITS for n in self.cfg.nbest_sizes if not os.path.exists(self.nbest_path(flavour, s, n))]
        if not missing:
            self.log(f"reusing {flavour} n-best lists")
            return
        run = self.nmt_run(flavour)
        for split, n in missing:
            source = os.path.join(self.cfg.data_dir, "task1", "raw", f"{SPLITS[split]}.en.gz")
            from nmt.translate import translate_file

            self.log(f"translating {source} with {run}: beam {n}, {n}-best")
            translate_file(run, source, self.nbest_path(flavour, split, n), beam=n, nbest=n, device=self.cfg.device)

    def is_fresh(self, out: str, inputs: list[str]) -> bool:
        """True if `out` exists and was made from inputs with the digests recorded beside it."""
        if not os.path.exists(out):
            return False
        stamp = out + ".inputs.json"
        if os.path.exists(stamp):
            with open(stamp, encoding="utf-8") as f:
                if json.load(f) == file_digests(inputs):
                    return True
        self.log(f"inputs of {out} changed or were not recorded: redoing it")
        return False

    @staticmethod
    def stamp(out: str, inputs: list[str]) -> None:
        with atomic_write(out + ".inputs.json") as f:
            json.dump(file_digests(inputs), f, indent=1)

    # --- 4. features -------------------------------------------------------------------------
    def featured(self, flavour: str, split: str, n: int, models: dict[str, dict]) -> str:
        """Path of the n-best list with every model's embedding features, made if missing or stale."""
        out = self.path("features", f"{flavour}.{split}.{n}best.feat.gz")
        source_path = os.path.join(self.cfg.data_dir, "task1", "raw", f"{SPLITS[split]}.en.gz")
        inputs = [self.nbest_path(flavour, split, n), source_path] + [m["path"] for m in models.values()]
        if self.images:
            inputs.append(self.images[SPLITS[split]])
        if self.is_fresh(out, inputs):
            return out
        from embeddings.data import load_features
        from embeddings.encoder import Encoder
        from embeddings.features import embedding_features

        nbest = read_nbest(self.nbest_path(flavour, split, n))
        sources = read_lines(source_path)
        images = np.array(load_features(self.images[SPLITS[split]], nbest.n_sentences)) if self.images else None
        for name, model in models.items():
            encoder = Encoder.load(model["path"])
            which = ["s_s", "s_i"] if model["images"] else ["s_s"]
            if "en" not in encoder.languages:  # VSE is monolingual (German): only s_i
                which = ["s_i"]
            self.log(f"features {', '.join(model['prefix'] + w for w in which)} for {flavour} {split} {n}-best")
            columns = embedding_features(nbest, encoder, which, "de", sources=sources, src_lang="en", images=images,
                                         device=self.cfg.device, progress=sys.stderr.isatty())
            for w in which:
                nbest = nbest.with_feature(model["prefix"] + w, columns[w])
        write_nbest(nbest, out)
        self.stamp(out, inputs)
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
        cfg = self.cfg
        self._save_config()
        models = self.embedding_models()
        results = {}
        for flavour in cfg.flavours:
            self.nbest_lists(flavour)
            for n in cfg.nbest_sizes:
                exp_dir = self.path("experiments", f"{flavour}.{n}best")
                done = os.path.join(exp_dir, "results.json")
                featured = [self.featured(flavour, split, n, models) for split in ("val", "test_2016")]
                if self.is_fresh(done, featured):
                    self.log(f"reusing {done}")
                    with open(done, encoding="utf-8") as f:
                        results[(flavour, n)] = json.load(f)
                    continue
                dev, test = read_nbest(featured[0]), read_nbest(featured[1])
                dev_refs = read_references([os.path.join(cfg.data_dir, "task1", "raw", "val.de.gz")], dev.n_sentences)
                test_refs = read_references([os.path.join(cfg.data_dir, "task1", "raw", "test_2016_flickr.de.gz")], test.n_sentences)
                systems, second = self.systems(models, dev)
                self.log(f"experiment {flavour} {n}-best: {len(systems)} systems x {cfg.runs} runs")
                result = run_experiment(dev, dev_refs, test, test_refs, systems, runs=cfg.runs, seed=cfg.seed,
                                        epochs=cfg.epochs, tokenize="13a", lang="de", second_baseline=second,
                                        ar_trials=cfg.ar_trials, bootstrap=cfg.bootstrap,
                                        meteor_options={"modules": ["exact", "stem"]}, out_dir=exp_dir, log=self.log)
                summary = json.loads(result.table.to_json())
                summary["oracle_bleu"] = result.oracle_bleu
                summary["dev_bleu"] = result.dev_scores
                with atomic_write(os.path.join(exp_dir, "summary.json")) as f:
                    json.dump(summary, f, indent=1)
                results[(flavour, n)] = json.loads(result.table.to_json())
                self.stamp(done, featured)
        self.write_tables()
        self.log("recipe complete")
        return results

    def _save_config(self) -> None:
        import torch

        info = {"config": asdict(self.cfg), "image_features": self.images,
                "text_only": self.images is None, "python": platform.python_version(), "torch": torch.__version__,
                "numpy": np.__version__, "argv": sys.argv}
        with atomic_write(self.path("recipe.config.json")) as f:
            json.dump(info, f, indent=1)

    def write_tables(self) -> None:
        from recipes.tables import write_recipe_tables

        write_recipe_tables(self.cfg.out, self.cfg.flavours, self.cfg.nbest_sizes, text_only=self.images is None,
                            nbest_path=self.nbest_path, refs_path=os.path.join(self.cfg.data_dir, "task1", "raw", "test_2016_flickr.de.gz"))
