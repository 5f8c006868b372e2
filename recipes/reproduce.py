"""`rerank recipe reproduce`: every model, n-best list, table and figure behind docs/results, from
the data alone, in order, with the committed configurations (recipes/configs/*.json):

1. the text-only embedding model (configs/embedding.json: trained with the InfoNCE loss over
   SentencePiece BPE vocabularies, then fine-tuned with max-violation as its "finetune" key says), exported in fp16 with its
   evaluation (the shipped rerank/data/models/mlmme-bpe.{pt,json} is this step's model: it was
   made by the embedding study's `default` variant, whose stages a test keeps equal to this config);
2. `recipe multi30k` with configs/nmt.json: the three NMT flavours, their 20-/50-best lists for
   val and test_2016, s_s, MIRA runs, significance tables, oracle curve;
3. the German LM (configs/lm.json: on task1's training German and the task2 training captions its
   "extra_train" names) and the reverse de→en channel model (configs/channel.json);
4. the stronger reranker (recipes.stronger) on the lists of step 2;
5. the NMT scores of every list (nmt_results.json);
6. with --publish: the files copied into docs/results/ and the model into the package, the
   package's n-best lists written from step 4's feature lists (the NMT columns and the
   precomputed channel and LM scores; `rerank demo` computes s_s and mbr itself), and
   docs/results/README.md and stronger.md rendered from the JSON (recipes.results_docs).

Every step writes a DONE marker and resumes from its checkpoint, so a stopped run goes on where it
stopped. On two CPU cores the whole run takes about seven and a half hours (docs/recipe.md has the
measured time of every step).
"""

from __future__ import annotations

import logging
import json
import os
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from rerank.recipes.demo import SHIPPED_MODEL
from rerank.recipes.steps import Steps
from rerank.errors import InputError
from rerank.formats import read_nbest, write_nbest
from rerank.io import atomic_copy, atomic_write, read_json_object, read_lines
from rerank.cliargs import terminal_bars

logger = logging.getLogger(__name__)

CONFIGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "configs")
ROOT = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
FLAVOURS = ("weak", "regular", "optimised")
SPLITS = {"val": "val", "test_2016": "test_2016_flickr"}


def load_config(name: str, configs: str = CONFIGS) -> dict:
    """configs/NAME.json, an InputError naming the file if it is not a JSON object."""
    return read_json_object(os.path.join(configs, f"{name}.json"))


class Reproduction:
    def __init__(self, data_dir: str, out: str, device: str = "cpu", threads: int = 1, configs: str = CONFIGS):
        self.data, self.out, self.device, self.threads = data_dir, out, str(device), threads
        self.config = {name: load_config(name, configs)
                       for name in ("embedding", "nmt", "recipe", "lm", "channel", "stronger")}
        self.m30k = os.path.join(data_dir, "multi30k")
        self.raw = os.path.join(self.m30k, "task1", "raw")
        self.start = time.time()
        os.makedirs(out, exist_ok=True)
        self.steps = Steps(self.log)

    def log(self, msg: str) -> None:
        line = f"[{time.time() - self.start:7.1f}s] {msg}"
        logger.info(line)
        with open(os.path.join(self.out, "reproduce.log"), "a", encoding="utf-8") as f:
            f.write(line + "\n")

    def path(self, *parts: str) -> str:
        return os.path.join(self.out, *parts)

    def embedding(self) -> str:
        """Train the embedding model (and fine-tune it when the config has "finetune"), then export
        it in fp16 with its evaluation; the exported path."""
        config = dict(self.config["embedding"])
        finetune = config.pop("finetune", None)
        model = self.train_embedding("embedding model", config, self.path("embedding", "run"))
        if finetune:
            model = self.train_embedding("embedding fine-tuning", {**config, **finetune, "init": model},
                                         self.path("embedding", "finetune"), inputs=[model])
        exported = self.path("embedding", SHIPPED_MODEL + ".pt")
        inputs = [model]
        if not self.steps.is_done("embedding export", exported, inputs, {"dtype": "float16"}):
            started = self.steps.start("embedding export", exported, {"dtype": "float16"})
            export_embedding(inputs[0], exported, self.m30k, os.path.join(self.data, "sts"), self.device)
            self.steps.finish("embedding export", exported, inputs, {"dtype": "float16"}, started)
        return exported

    def train_embedding(self, label: str, config: dict, run: str, inputs: Sequence[str] = ()) -> str:
        """One `embed train` step with a DONE marker (inputs: files it starts from); its model.pt."""
        from rerank.embeddings.train import resolve_config, train

        resolved = {"data_dir": os.path.abspath(self.m30k), **resolve_config(config)}
        if not self.steps.is_done(label, run, list(inputs), resolved, directory=True):
            started, resume = self.steps.begin(label, run, resolved, directory=True, inputs=list(inputs))
            train(config, self.m30k, run, self.device, resume=resume, progress=terminal_bars())
            self.steps.finish(label, run, list(inputs), resolved, started, directory=True)
        return os.path.join(run, "model.pt")

    def recipe(self, embedding_model: str) -> str:
        from rerank.recipes.multi30k import Recipe, RecipeConfig

        cfg = RecipeConfig(data_dir=self.m30k, out=self.path("recipe"), nmt_config=self.config["nmt"],
                           embedding_model=embedding_model, device=self.device, **self.config["recipe"])
        Recipe(cfg).run()
        return cfg.out

    def lm(self) -> str:
        from rerank.nmt.lm import read_training_text, train_lm
        from rerank.nmt.lm_config import LMConfig

        settings = dict(self.config["lm"])
        extra = settings.pop("extra_train", [])  # more German text, relative to the Multi30k folder
        cfg, out = LMConfig(lang="de", **settings), self.path("lm", "de")
        files = [os.path.join(self.raw, "train.de.gz")] + [os.path.join(self.m30k, name) for name in extra]
        resolved = {"data_dir": os.path.abspath(self.raw), "train_files": [os.path.abspath(f) for f in files],
                    **vars(cfg)}
        if not self.steps.is_done("German LM", out, [], resolved):  # marker beside: train_lm writes OUT/DONE.json
            started, resume = self.steps.begin("German LM", out, resolved)
            val = read_lines(os.path.join(self.raw, "val.de.gz"))
            state = train_lm(cfg, read_training_text(files), val, out, self.device, resume=resume, log=self.log)
            stats: dict[str, Any] = {k: state.get(k) for k in ("epoch", "best_ppl", "stopped")}
            self.steps.finish("German LM", out, [], resolved, started, **stats)
        return out

    def channel(self) -> str:
        from dataclasses import asdict

        from rerank.nmt.train import make_config, train_files

        settings = dict(self.config["channel"])
        size, flavour = settings.pop("size", "cpu"), settings.pop("flavour", "optimised")
        cfg, out = make_config(size, flavour, **settings), self.path("nmt-reverse")
        resolved = {"data_dir": os.path.abspath(self.raw), **asdict(cfg)}
        if not self.steps.is_done("channel model", out, [], resolved, directory=True):
            started, resume = self.steps.begin("channel model", out, resolved, directory=True)
            state = train_files(cfg, self.raw, out, device=self.device, resume=resume, progress=terminal_bars())
            self.steps.finish("channel model", out, [], resolved, started, directory=True,
                              **{k: state.get(k) for k in ("stopped", "epoch", "best_epoch", "best_bleu")})
        return out

    def stronger(self, embedding_model: str, lm: str, channel: str) -> str:
        from rerank.recipes import stronger

        out, options = self.path("stronger"), []
        for key, value in self.config["stronger"].items():
            options += [f"--{key}", ",".join(map(str, value)) if isinstance(value, list) else str(value)]
        stronger.main(["--lm-model", lm, "--channel-model", channel, "--embedding-model", embedding_model,
                       "--nbest-dir", self.path("recipe", "nbest"), "--text-dir", self.raw, "--out", out,
                       "--threads", str(self.threads), "--device", self.device, *options])
        return out

    def run(self) -> None:
        model = self.embedding()
        self.recipe(model)
        lm, channel = self.lm(), self.channel()
        self.stronger(model, lm, channel)
        from rerank.recipes.nmt_scores import list_scores

        scores = list_scores(self.path("recipe"), self.raw, self.config["recipe"].get("flavours", FLAVOURS), log=self.log)
        with atomic_write(self.path("nmt_results.json")) as f:
            json.dump(scores, f, indent=1)
        self.log(self.steps.summary())
        self.log("reproduction complete")


def export_embedding(model_path: str, exported: str, m30k: str, sts_dir: str, device: str = "cpu") -> None:
    """The trained model in fp16, with its training record and its test_2016/STS evaluation in the JSON."""
    from rerank.embeddings.encoder import Encoder, save_model
    from rerank.embeddings.evaluate import evaluate

    encoder = Encoder.load(model_path)
    report = evaluate(encoder, m30k, sts_dir, device=device)
    info = {"training": encoder.meta.get("training", {}), "exported_from": os.path.abspath(model_path),
            "note": "text-only (R_ML) en+de model; fp16 weights, loaded as float32",
            "evaluation": {"translation_retrieval_test_2016": report["translation_retrieval"],
                           "translation_retrieval_val": report["translation_retrieval_val"], "sts": report["sts"],
                           "uses_images": False}}
    save_model(exported, encoder.model, encoder.vocabs, info, half=True)


NMT_COLUMNS = ["nmt", "nmt_norm", "len"]
PUBLISHED_COLUMNS = NMT_COLUMNS + ["channel", "channel_norm", "lm", "lm_norm"]  # of the shipped lists
PUBLISHED_DECIMALS = 4  # channel and lm values in the shipped lists, as the NMT decoder writes its scores
RESULTS = {  # run file -> docs/results file (besides the tables and plots): what tuning and evaluation make
    "recipe/tables/results.json": "results.json", "recipe/tables/oracle_curve.json": "oracle_curve.json",
    "recipe/tables/oracle_curve.png": "oracle_curve.png", "recipe/recipe.config.json": "recipe.config.json",
    "stronger/results.json": "stronger/results.json",
}


def publish(out: str, docs: str = os.path.join(ROOT, "docs", "results"),
            package: str = os.path.join(ROOT, "rerank", "data"), configs: str = CONFIGS) -> list[str]:
    """Copy a finished reproduction into docs/results and the package; returns the files written.
    The shipped n-best lists are the stronger reranker's feature lists cut to PUBLISHED_COLUMNS
    (checked against the recipe's lists first); nothing is written unless every input is there
    and every list checks."""
    recipe = load_config("recipe", configs)
    flavours, sizes = recipe.get("flavours", FLAVOURS), recipe.get("nbest_sizes", [20, 50])
    pairs = result_pairs(out, docs, flavours, sizes)
    pairs.append((os.path.join(out, "nmt_results.json"), os.path.join(docs, "nmt_results.json")))
    pairs.append((os.path.join(out, "nmt_results.json"), os.path.join(package, "multi30k", "nmt_results.json")))
    pairs += [(os.path.join(out, "embedding", SHIPPED_MODEL + ext), os.path.join(package, "models", SHIPPED_MODEL + ext))
              for ext in (".pt", ".json")]
    lists = [(os.path.join(out, "stronger", "features", f"{flavour}.{split}.{n}best.feat.gz"),
              os.path.join(out, "recipe", "nbest", f"{flavour}.{split}.{n}best.gz"),
              os.path.join(package, "multi30k", f"{flavour}.{split}.{n}best.gz"))
             for flavour in flavours for n in sizes for split in SPLITS]
    missing = [src for src, _ in pairs if not os.path.exists(src)]
    missing += [src for featured, listed, _ in lists for src in (featured, listed) if not os.path.exists(src)]
    if missing:
        raise FileNotFoundError(f"{missing[0]}: missing; is the reproduction complete?")
    checked = [(published_list(featured, listed), dst) for featured, listed, dst in lists]
    written = [atomic_copy(src, dst) for src, dst in pairs]
    for nbest, dst in checked:
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        written += write_nbest(nbest, dst)
    with open(os.path.join(out, "embedding", SHIPPED_MODEL + ".json"), encoding="utf-8") as f:
        model = {k: v for k, v in json.load(f).items() if k != "vocab"}
    with atomic_write(os.path.join(docs, "embedding-model.json")) as f:
        json.dump(model, f, indent=1)
    written.append(os.path.join(docs, "embedding-model.json"))
    from rerank.recipes.results_docs import write_docs

    return written + write_tables(docs, sizes) + write_docs(docs)


def result_pairs(out: str, docs: str, flavours, sizes) -> list[tuple[str, str]]:
    """(run file, docs/results file) of the tuned and evaluated results: the recipe's results.json,
    delta plots, oracle curve and configuration, and the stronger reranker's results.json (the
    paper-style tables are rendered from results.json: `write_tables`)."""
    pairs = [(os.path.join(out, src), os.path.join(docs, dst)) for src, dst in RESULTS.items()]
    pairs += [(os.path.join(out, "recipe", "experiments", f"{flavour}.{n}best", "deltas.png"),
               os.path.join(docs, f"deltas.{flavour}.{n}best.png")) for flavour in flavours for n in sizes]
    return pairs


def publish_results(out: str, docs: str = os.path.join(ROOT, "docs", "results"), configs: str = CONFIGS) -> list[str]:
    """The part of `publish` for a rerun of the tuning and evaluation on the shipped lists (OUT/recipe
    from `recipe multi30k --nbest-dir rerank/data/multi30k`, OUT/stronger from `recipes.stronger
    --reuse-columns`): `result_pairs` copied into docs/results and its pages re-rendered. The shipped
    lists, the model, nmt_results.json and embedding-model.json are left alone: a rerun on the shipped
    lists computes none of them. Nothing is written unless every input is there."""
    recipe = load_config("recipe", configs)
    pairs = result_pairs(out, docs, recipe.get("flavours", FLAVOURS), recipe.get("nbest_sizes", [20, 50]))
    missing = [src for src, _ in pairs if not os.path.exists(src)]
    if missing:
        raise FileNotFoundError(f"{missing[0]}: missing; is the rerun complete?")
    written = [atomic_copy(src, dst) for src, dst in pairs]
    from rerank.recipes.results_docs import write_docs

    return written + write_tables(docs, recipe.get("nbest_sizes", [20, 50])) + write_docs(docs)


def write_tables(docs: str, sizes) -> list[str]:
    """docs/results/table.<n>best.{md,tex} rendered from docs/results/results.json (recipes.tables),
    as tests/test_results_docs.py checks them."""
    from rerank.recipes.tables import table_latex, table_markdown

    with open(os.path.join(docs, "results.json"), encoding="utf-8") as f:
        results = json.load(f)
    written = []
    for n in sizes:
        for ext, text in (("md", table_markdown(results["experiments"], n, results.get("text_only", False))),
                          ("tex", table_latex(results["experiments"], n))):
            path = os.path.join(docs, f"table.{n}best.{ext}")
            with atomic_write(path) as f:
                f.write(text)
            written.append(path)
    return written


def published_list(featured: str, listed: str):
    """The stronger reranker's feature list `featured` cut to PUBLISHED_COLUMNS, after checking that
    it holds the hypotheses and NMT values of the recipe's list `listed` (InputError naming both)."""
    features, nbest = read_nbest(featured), read_nbest(listed)
    problem = list_difference(features, nbest)
    if problem:
        raise InputError(f"not the n-best list of {listed}: {problem}", featured)
    try:
        published = features.select_features(PUBLISHED_COLUMNS)
    except InputError as e:
        raise InputError(e.problem, featured) from None
    for name in PUBLISHED_COLUMNS[len(NMT_COLUMNS):]:  # the decoder's precision: half the package size of full floats
        published = published.with_feature(name, np.round(published.column(name), PUBLISHED_DECIMALS), replace=True)
    return published


def list_difference(features, nbest) -> str | None:
    """The first difference between two lists' sentences, hypotheses and NMT_COLUMNS, or None."""
    if features.n_sentences != nbest.n_sentences:
        return f"{features.n_sentences} sentences here, {nbest.n_sentences} there"
    if not np.array_equal(features.sizes, nbest.sizes):
        i = int(np.flatnonzero(features.sizes != nbest.sizes)[0])
        return f"sentence {i}: {features.sizes[i]} hypotheses here, {nbest.sizes[i]} there"
    if features.hyps != nbest.hyps:
        row = next(i for i, (a, b) in enumerate(zip(features.hyps, nbest.hyps)) if a != b)
        return (f"hypothesis {row} (sentence {int(features.sentence_of_hyp[row])}): {features.hyps[row]!r} here, "
                f"{nbest.hyps[row]!r} there")
    for name in NMT_COLUMNS:
        if name not in features.feature_names or name not in nbest.feature_names:
            return f"column {name!r} is not in both lists"
        differ = np.flatnonzero(features.column(name) != nbest.column(name))
        if len(differ):
            row = int(differ[0])
            return (f"{name} of hypothesis {row} (sentence {int(features.sentence_of_hyp[row])}): "
                    f"{float(features.column(name)[row])!r} here, {float(nbest.column(name)[row])!r} there")
    return None
