"""The stronger reranker on the shipped Multi30k lists: the NMT features, + s_s (MLMME), + mbr
(consensus), + channel + lm, and everything together, each tuned by k-best MIRA (R runs) on val
and scored on test_2016 with BLEU, METEOR and TER († vs the NMT 1-best, ‡ vs MIRA on the NMT
features), for every flavour and list size. Resumable: every featured list and experiment
writes a DONE marker (recipes.steps).

    python -m recipes.stronger --lm-model DIR --channel-model DIR --out runs/stronger

The LM is `rerank lm train` on the target side of the training data (plus the task2 training
captions in the published run: `extra_train` in recipes/configs/lm.json), the channel model
`rerank nmt train` in the target-to-source direction (docs/results/stronger.md says how).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from recipes.demo import BASE_FEATURES, MODEL_FEATURES, data_dir, shipped_lists
from recipes.experiment import SystemSpec, leading_references, run_experiment
from recipes.steps import Steps
from rerank.formats import read_nbest, write_nbest
from rerank.io import atomic_write, read_lines

SPLIT_FILES = {"val": "val", "test_2016": "test_2016_flickr"}
SYSTEMS = [
    SystemSpec("MIRA: NMT features", BASE_FEATURES),
    SystemSpec("+ s_s", BASE_FEATURES + ["s_s"]),
    SystemSpec("+ mbr", BASE_FEATURES + ["mbr"]),
    SystemSpec("+ channel + lm", BASE_FEATURES + MODEL_FEATURES),
    SystemSpec("all", BASE_FEATURES + ["s_s", "mbr"] + MODEL_FEATURES),
]


def add_features(nbest, sources: list[str], models: dict, device: str = "cpu"):
    """s_s, mbr, channel(_norm), lm(_norm) columns for one n-best list."""
    from embeddings.encoder import Encoder
    from embeddings.features import embedding_features
    from nmt.scoring import channel_scores, distinct_pairs
    from nmt.lm import LanguageModel
    from rerank.consensus import mbr_scores

    progress = sys.stderr.isatty()
    s_s = embedding_features(nbest, Encoder.load(models["embedding"]), ["s_s"], "de", sources=sources, src_lang="en",
                             device=device, progress=progress)["s_s"]
    nbest = nbest.with_feature("s_s", s_s, replace=True).with_feature("mbr", mbr_scores(nbest, nbest.column("nmt")), replace=True)
    pairs, index = distinct_pairs(nbest)
    channel, lengths = channel_scores(models["channel"], [h for _, h in pairs], [sources[i] for i, _ in pairs], device,
                                      progress=progress)
    # the shipped lists carry channel and lm columns: recomputed from the models, they replace them
    nbest = nbest.with_feature("channel", channel[index], replace=True).with_feature(
        "channel_norm", (channel / lengths)[index], replace=True)
    sums, counts = LanguageModel.load(models["lm"], device).score(list(nbest.hyps), progress=progress)
    lm = [s / c for s, c in zip(sums, counts)]
    return nbest.with_feature("lm", sums, replace=True).with_feature("lm_norm", lm, replace=True)


class Stronger:
    def __init__(self, args):
        self.args, self.start = args, time.time()
        os.makedirs(args.out, exist_ok=True)
        self.steps = Steps(self.log)
        self.models = {"embedding": args.embedding_model, "lm": args.lm_model, "channel": args.channel_model}
        self.m30k = args.text_dir or os.path.join(data_dir(), "multi30k")

    def log(self, msg: str) -> None:
        line = f"[{time.time() - self.start:7.1f}s] {msg}"
        print(line, file=sys.stderr)
        with open(os.path.join(self.args.out, "stronger.log"), "a", encoding="utf-8") as f:
            f.write(line + "\n")

    def model_files(self) -> list[str]:
        return [self.models["embedding"], os.path.join(self.models["lm"], "best.pt"),
                os.path.join(self.models["channel"], "best.pt")]

    def featured(self, flavour: str, split: str, n: int) -> str:
        source = os.path.join(self.m30k, f"{SPLIT_FILES[split]}.en.gz")
        path = shipped_lists(self.args.nbest_dir)[(flavour, n)][split]
        out = os.path.join(self.args.out, "features", f"{flavour}.{split}.{n}best.feat.gz")
        inputs, step = [path, source] + self.model_files(), f"features {flavour} {split} {n}"
        config = {"features": ["s_s", "mbr"] + MODEL_FEATURES, "sentences": self.args.sentences}
        if self.steps.is_done(step, out, inputs, config):
            return out
        started = self.steps.start(step, out, config)
        self.log(f"{step}: computing s_s, mbr, channel, lm")
        nbest, sources = read_nbest(path), read_lines(source)
        if self.args.sentences:  # a quick look at the first sentences
            nbest = nbest.select_sentences(range(min(self.args.sentences, nbest.n_sentences)))
            sources = sources[:nbest.n_sentences]
        write_nbest(add_features(nbest, sources, self.models, self.args.device), out)
        self.steps.finish(step, out, inputs, config, started)
        return out

    def experiment(self, flavour: str, n: int) -> dict:
        args = self.args
        out = os.path.join(args.out, "experiments", f"{flavour}.{n}best")
        featured = [self.featured(flavour, split, n) for split in SPLIT_FILES]
        config = {"runs": args.runs, "epochs": args.epochs, "seed": args.seed, "ar_trials": args.ar,
                  "bootstrap": args.bootstrap, "systems": [[s.name, s.features] for s in SYSTEMS]}
        step = f"experiment {flavour} {n}-best"
        if not self.steps.is_done(step, out, featured, config, directory=True):
            started = self.steps.start(step, out, config, directory=True)
            dev, test = read_nbest(featured[0]), read_nbest(featured[1])
            refs = [leading_references(os.path.join(self.m30k, f"{SPLIT_FILES[s]}.de.gz"), nb.n_sentences)
                    for s, nb in (("val", dev), ("test_2016", test))]
            result = run_experiment(dev, refs[0], test, refs[1], SYSTEMS, runs=args.runs, seed=args.seed,
                                    epochs=args.epochs, tokenize="13a", lang="de", second_baseline="MIRA: NMT features",
                                    ar_trials=args.ar, bootstrap=args.bootstrap,
                                    meteor_options={"modules": ["exact", "stem"]}, out_dir=out, log=self.log)
            summary = {**json.loads(result.table.to_json()), "oracle_bleu": result.oracle_bleu,
                       "dev_bleu": result.dev_scores, "weights": result.weights}
            with atomic_write(os.path.join(out, "summary.json")) as f:
                json.dump(summary, f, indent=1)
            self.steps.finish(step, out, featured, config, started, directory=True)
        with open(os.path.join(out, "summary.json"), encoding="utf-8") as f:
            return json.load(f)


def report(results: dict, command: str) -> str:
    """Markdown tables (one per list size) of every flavour's systems, with the gains over the 1-best."""
    from recipes.tables import table_rows

    lines = ["# The stronger reranker on the shipped Multi30k lists (test_2016)", "",
             f"Made by `{command}` (results.json beside this file).", ""]
    for size in sorted({int(k.split(".")[1][:-4]) for k in results}):
        lines += [f"## {size}-best lists", "", "| NMT | System | BLEU ↑ | Δ BLEU | METEOR ↑ | TER ↓ |", "|---|---|---|---|---|---|"]
        for key, summary in results.items():
            flavour, n = key.split(".")[0], int(key.split(".")[1][:-4])
            if n != size:
                continue
            base = next(r["score"] for r in summary["results"] if r["system"] == "NMT 1-best" and r["metric"] == "bleu")
            bleu = {r["system"]: r["score"] for r in summary["results"] if r["metric"] == "bleu"}
            for system, cells in table_rows(summary):
                delta = f"{bleu[system] - base:+.2f}" if system in bleu and system != "NMT 1-best" else ""
                lines.append(f"| {flavour} | {system} | {cells.get('bleu', '–')} | {delta} | {cells.get('meteor', '–')} "
                             f"| {cells.get('ter', '–')} |")
        lines.append("")
    first = next(iter(results.values()))
    lines += [f"Scores are means over {first['config'].get('runs')} MIRA runs; † p < 0.05 against the NMT 1-best, ‡ "
              "against MIRA on the NMT features (stratified approximate randomisation, "
              f"{first['config'].get('ar_trials')} trials).",
              "Signatures: " + "; ".join(f"{m}: {sig}" for m, sig in first["signatures"].items())]
    return "\n".join(lines) + "\n"


def model_records(args) -> dict:
    """What the LM and the channel model are: their training records (for the results page)."""
    def load(path: str) -> dict:
        with open(path, encoding="utf-8") as f:
            return json.load(f)

    channel = load(os.path.join(args.channel_model, "history.json"))
    lm_done = os.path.join(args.lm_model, "DONE.json")
    lm = load(lm_done) if os.path.exists(lm_done) else {}
    return {"channel": {"epochs": channel["epoch"], "best_epoch": channel.get("best_epoch"),
                        "val_bleu_greedy": round(channel["best_bleu"], 2)},
            "lm": {"epochs": lm.get("epochs"), "stopped": lm.get("stopped"),
                   "val_perplexity": round(lm["best_val_perplexity"], 2) if "best_val_perplexity" in lm else None},
            "embedding": os.path.basename(args.embedding_model)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m recipes.stronger", description=__doc__.split("\n\n")[0])
    ap.add_argument("--lm-model", required=True, help="`rerank lm train` run directory (German)")
    ap.add_argument("--channel-model", required=True, help="reverse (de->en) `rerank nmt train` run directory")
    ap.add_argument("--embedding-model", default=os.path.join(data_dir(), "models", "mlmme-small.pt"),
                    help="MLMME model for s_s (default: the shipped one)")
    ap.add_argument("--out", required=True, help="run directory")
    ap.add_argument("--text-dir", help="sources and references {val,test_2016_flickr}.{en,de}.gz, e.g. "
                    "DATA/multi30k/task1/raw (default: the shipped copies)")
    ap.add_argument("--nbest-dir", help="n-best lists DIR/<flavour>.<val|test_2016>.<n>best.gz (default: the shipped ones)")
    ap.add_argument("--flavours", default="weak,regular,optimised", help="(default: %(default)s)")
    ap.add_argument("--nbest", default="20,50", help="list sizes (default: %(default)s)")
    ap.add_argument("--runs", type=int, default=3, help="MIRA runs per system (default: %(default)s)")
    ap.add_argument("--epochs", type=int, default=60, help="MIRA epochs (default: %(default)s)")
    ap.add_argument("--ar", type=int, default=10000, help="approximate randomisation trials (default: %(default)s)")
    ap.add_argument("--bootstrap", type=int, default=1000, help="bootstrap samples (default: %(default)s)")
    ap.add_argument("--seed", type=int, default=1, help="(default: %(default)s)")
    ap.add_argument("--sentences", type=int, help="only the first N sentences of every list (a quick look)")
    ap.add_argument("--device", default="cpu", help="(default: %(default)s)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default: %(default)s)")
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    run = Stronger(args)
    results = {f"{f}.{n}best": run.experiment(f, int(n)) for n in args.nbest.split(",") for f in args.flavours.split(",")}
    command = "python -m recipes.stronger " + " ".join(argv if argv is not None else sys.argv[1:])
    with atomic_write(os.path.join(args.out, "results.json")) as f:
        json.dump({"command": command, "models": model_records(args), "experiments": results}, f, indent=1)
    with atomic_write(os.path.join(args.out, "stronger.md")) as f:
        f.write(report(results, command))
    run.log(run.steps.summary())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
