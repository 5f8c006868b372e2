"""The stronger reranker on the shipped Multi30k lists: the NMT features, + s_s (MLMME), + the
MLMME cosine against the other hypotheses (the mlmme MBR utility, mbr_mlmme) alone and with s_s,
+ mbr (consensus), + channel + lm, and everything together, each tuned by k-best MIRA (R runs) on val
and scored on test_2016 with BLEU, METEOR and TER († vs the NMT 1-best, ‡ vs MIRA on the NMT
features), for every flavour and list size. Resumable: every featured list and experiment
writes a DONE marker (recipes.steps).

    python -m rerank.recipes.stronger --lm-model DIR --channel-model DIR --out runs/stronger

The LM is `rerank lm train` on the target side of the training data (plus the task2 training
captions in the published run: `extra_train` in recipes/configs/lm.json), the channel model
`rerank nmt train` in the target-to-source direction (docs/results/stronger.md says how).

With --reuse-columns the columns a list already carries (the shipped lists carry channel,
channel_norm, lm and lm_norm, precomputed by the published run's models) are taken from it
instead of being computed, so the experiment reruns without those models:

    python -m rerank.recipes.stronger --reuse-columns --models-record docs/results/stronger/results.json --out runs/stronger

(--models-record: the results.json of the run whose models made those columns; its record of
the models is kept in this run's results.json.)
"""

from __future__ import annotations

import logging
import argparse
import json
import os
import sys
import time

from rerank.recipes.demo import BASE_FEATURES, MODEL_FEATURES, data_dir, default_model, shipped_lists
from rerank.api import EvalOptions
from rerank.recipes.experiment import SystemSpec, leading_references, mira, run_experiment
from rerank.recipes.steps import Steps
from rerank.errors import InputError
from rerank.formats import read_nbest, write_nbest
from rerank.io import atomic_write, read_lines
from rerank.cliargs import terminal_bars
from rerank.cliargs import add_device_option, add_threads_option

logger = logging.getLogger(__name__)

SPLIT_FILES = {"val": "val", "test_2016": "test_2016_flickr"}
SYSTEMS = [
    SystemSpec("MIRA: NMT features", BASE_FEATURES),
    SystemSpec("+ s_s", BASE_FEATURES + ["s_s"]),
    # the paper's s_s of the hypothesis against the other hypotheses: the expected cosine under the
    # NMT posterior (the mlmme MBR utility), alone and beside s_s(source, hyp)
    SystemSpec("+ s_s mbr", BASE_FEATURES + ["mbr_mlmme"]),
    SystemSpec("+ s_s + s_s mbr", BASE_FEATURES + ["s_s", "mbr_mlmme"]),
    SystemSpec("+ mbr", BASE_FEATURES + ["mbr"]),
    SystemSpec("+ channel + lm", BASE_FEATURES + MODEL_FEATURES),
    SystemSpec("all", BASE_FEATURES + ["s_s", "mbr"] + MODEL_FEATURES),
]


COMPUTED = {"s_s": ["s_s"], "mbr": ["mbr"], "s_s_mbr": ["mbr_mlmme"], "channel": ["channel", "channel_norm"],
            "lm": ["lm", "lm_norm"]}
COLUMNS = [c for group in COMPUTED.values() for c in group]  # every column add_features makes, in its order


def reusable(nbest, reuse: bool) -> list[str]:
    """The groups of COMPUTED whose every column the list already carries, when `reuse` (else none)."""
    return [g for g, cols in COMPUTED.items() if reuse and all(c in nbest.feature_names for c in cols)]


def add_features(nbest, sources: list[str], models: dict, device: str = "cpu", keep=()):
    """s_s, mbr, mbr_mlmme, channel(_norm), lm(_norm) columns for one n-best list; the groups named in `keep`
    (keys of COMPUTED, e.g. "channel") are the list's own columns, not computed. The columns come
    out in one order whatever was kept: the list's other columns, then COLUMNS."""
    progress = terminal_bars()
    computed = [c for g, cols in COMPUTED.items() if g not in keep for c in cols]
    if any(c in nbest.feature_names for c in computed):  # the list's own values of a computed column go
        nbest = nbest.select_features([c for c in nbest.feature_names if c not in computed])
    if "s_s" not in keep:
        from rerank.embeddings.encoder import Encoder
        from rerank.embeddings.features import embedding_features
        from rerank.features import FeatureContext

        context = FeatureContext(sources=sources, src_lang="en", tgt_lang="de", device=device, progress=progress)
        s_s = embedding_features(nbest, Encoder.load(models["embedding"]), ["s_s"], context)["s_s"]
        nbest = nbest.with_feature("s_s", s_s)
    if "mbr" not in keep:
        from rerank.consensus import mbr_scores

        nbest = nbest.with_feature("mbr", mbr_scores(nbest, nbest.column("nmt")))
    if "s_s_mbr" not in keep:
        from rerank.consensus import MBROptions, make_utility, mbr_scores
        from rerank.features import FeatureContext

        utility = make_utility("mlmme", models["embedding"], None, FeatureContext(tgt_lang="de", device=device))
        nbest = nbest.with_feature("mbr_mlmme", mbr_scores(nbest, nbest.column("nmt"), MBROptions(utility="mlmme"),
                                                           model=utility))
    if "channel" not in keep:
        from rerank.nmt.scoring import channel_scores, distinct_pairs

        pairs, index = distinct_pairs(nbest)
        channel, lengths = channel_scores(models["channel"], [h for _, h in pairs], [sources[i] for i, _ in pairs],
                                          device, progress=progress)
        nbest = nbest.with_feature("channel", channel[index]).with_feature("channel_norm", (channel / lengths)[index])
    if "lm" not in keep:
        from rerank.nmt.lm import LanguageModel

        sums, counts = LanguageModel.load(models["lm"], device).score(list(nbest.hyps), progress=progress)
        nbest = nbest.with_feature("lm", sums).with_feature("lm_norm", [s / c for s, c in zip(sums, counts)])
    order = [c for c in nbest.feature_names if c not in COLUMNS] + COLUMNS
    return nbest if nbest.feature_names == order else nbest.select_features(order)


class Stronger:
    def __init__(self, args):
        self.args, self.start = args, time.time()
        os.makedirs(args.out, exist_ok=True)
        self.steps = Steps(self.log)
        self.models = {"embedding": args.embedding_model, "lm": args.lm_model, "channel": args.channel_model}
        self.m30k = args.text_dir or os.path.join(data_dir(), "multi30k")

    def log(self, msg: str) -> None:
        line = f"[{time.time() - self.start:7.1f}s] {msg}"
        logger.info(line)
        with open(os.path.join(self.args.out, "stronger.log"), "a", encoding="utf-8") as f:
            f.write(line + "\n")

    def model_files(self, keep=()) -> list[str]:
        """The model files behind the columns that are computed (not in `keep`)."""
        files = {"s_s": self.models["embedding"], "s_s_mbr": self.models["embedding"],
                 "channel": self.models["channel"] and os.path.join(self.models["channel"], "best.pt"),
                 "lm": self.models["lm"] and os.path.join(self.models["lm"], "best.pt")}
        missing = [g for g, f in files.items() if g not in keep and not f]
        if missing:
            raise InputError(f"the lists have no {', '.join(COMPUTED[missing[0]])} column(s) to reuse and no "
                             f"--{missing[0]}-model was given")
        return [f for g, f in files.items() if g not in keep]

    def featured(self, flavour: str, split: str, n: int) -> str:
        source = os.path.join(self.m30k, f"{SPLIT_FILES[split]}.en.gz")
        path = shipped_lists(self.args.nbest_dir)[(flavour, n)][split]
        out = os.path.join(self.args.out, "features", f"{flavour}.{split}.{n}best.feat.gz")
        nbest = read_nbest(path)
        keep = reusable(nbest, self.args.reuse_columns)
        inputs, step = [path, source] + self.model_files(keep), f"features {flavour} {split} {n}"
        config = {"features": ["s_s", "mbr", "mbr_mlmme"] + MODEL_FEATURES, "sentences": self.args.sentences}
        if keep:  # (absent otherwise: the markers of runs without --reuse-columns stay valid)
            config["reused"] = [c for g in keep for c in COMPUTED[g]]
        if self.steps.is_done(step, out, inputs, config):
            return out
        started = self.steps.start(step, out, config)
        computed = [g for g in COMPUTED if g not in keep]
        self.log(f"{step}: computing {', '.join(computed) or 'nothing'}"
                 + (f"; taking {', '.join(config['reused'])} from {path} (--reuse-columns)" if keep else ""))
        sources = read_lines(source)
        if self.args.sentences:  # a quick look at the first sentences
            nbest = nbest.select_sentences(range(min(self.args.sentences, nbest.n_sentences)))
            sources = sources[:nbest.n_sentences]
        write_nbest(add_features(nbest, sources, self.models, self.args.device, keep), out)
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
            evaluation = EvalOptions(metrics=("bleu", "meteor", "ter"), lang="de", second_baseline="MIRA: NMT features",
                                     ar=args.ar, bootstrap=args.bootstrap, seed=args.seed, tokenize="13a",
                                     meteor={"modules": ["exact", "stem"]})
            result = run_experiment(dev, refs[0], test, refs[1], SYSTEMS, mira(args.runs, args.seed, args.epochs, "13a"),
                                    evaluation, out_dir=out, log=self.log)
            summary = {**json.loads(result.table.to_json()), "oracle_bleu": result.oracle_bleu,
                       "dev_bleu": result.dev_scores, "weights": result.weights}
            with atomic_write(os.path.join(out, "summary.json")) as f:
                json.dump(summary, f, indent=1)
            self.steps.finish(step, out, featured, config, started, directory=True)
        with open(os.path.join(out, "summary.json"), encoding="utf-8") as f:
            return json.load(f)


def report(results: dict, command: str) -> str:
    """Markdown tables (one per list size) of every flavour's systems, with the gains over the 1-best."""
    from rerank.recipes.tables import significance_legend, table_rows

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
    lines += [significance_legend(first["config"], "MIRA on the NMT features"),
              "Signatures: " + "; ".join(f"{m}: {sig}" for m, sig in first["signatures"].items())]
    return "\n".join(lines) + "\n"


def model_records(args) -> dict:
    """What the LM and the channel model are: their training records (for the results page); with
    --models-record, the `models` record of that results.json (the run whose models made the
    reused columns), with the columns this run took from its lists."""
    def load(path: str) -> dict:
        with open(path, encoding="utf-8") as f:
            return json.load(f)

    if args.models_record:
        record = dict(load(args.models_record)["models"])
        record.pop("reused_from", None)
        return {**record, "reused_from": {"lists": args.nbest_dir or "the shipped lists", "record": args.models_record},
                "embedding": os.path.basename(args.embedding_model)}

    channel = load(os.path.join(args.channel_model, "history.json"))
    lm_done = os.path.join(args.lm_model, "DONE.json")
    lm = load(lm_done) if os.path.exists(lm_done) else {}
    return {"channel": {"epochs": channel["epoch"], "best_epoch": channel.get("best_epoch"),
                        "val_bleu_greedy": round(channel["best_bleu"], 2)},
            "lm": {"epochs": lm.get("epochs"), "stopped": lm.get("stopped"),
                   "val_perplexity": round(lm["best_val_perplexity"], 2) if "best_val_perplexity" in lm else None},
            "embedding": os.path.basename(args.embedding_model)}


def main(argv=None) -> int:
    """The command line of this module, with the pipeline's log lines (INFO records) on stderr."""
    from rerank.cliargs import stderr_log

    with stderr_log(logging.INFO):
        return _main(argv)


def _main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rerank.recipes.stronger", description=__doc__.split("\n\n")[0])
    ap.add_argument("--lm-model", help="`rerank lm train` run directory (German); needed unless --reuse-columns "
                    "finds lm and lm_norm in every list")
    ap.add_argument("--channel-model", help="reverse (de->en) `rerank nmt train` run directory; needed unless "
                    "--reuse-columns finds channel and channel_norm in every list")
    ap.add_argument("--reuse-columns", action="store_true", help="take the columns a list already has (channel, "
                    "channel_norm, lm, lm_norm as the shipped lists carry them; s_s, mbr) from it instead of "
                    "computing them (logged per list)")
    ap.add_argument("--models-record", metavar="RESULTS_JSON", help="with --reuse-columns and no --lm-model/"
                    "--channel-model: the stronger results.json of the run whose models made the reused columns; its "
                    "record of the models is kept in this run's results.json")
    ap.add_argument("--embedding-model", default=default_model(),
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
    add_device_option(ap)
    add_threads_option(ap, default=1, why=": the study's small models run fastest on one thread")
    args = ap.parse_args(argv)
    if not args.reuse_columns and not (args.lm_model and args.channel_model):
        ap.error("--lm-model and --channel-model are required (or --reuse-columns with lists that carry their columns)")
    if args.models_record and not args.reuse_columns:
        ap.error("--models-record goes with --reuse-columns")
    if args.reuse_columns and not (args.lm_model and args.channel_model) and not args.models_record:
        ap.error("--reuse-columns without --lm-model and --channel-model needs --models-record (what made the columns)")
    import torch

    torch.set_num_threads(args.threads)
    run = Stronger(args)
    try:
        results = {f"{f}.{n}best": run.experiment(f, int(n)) for n in args.nbest.split(",")
                   for f in args.flavours.split(",")}
    except InputError as e:
        print(f"python -m rerank.recipes.stronger: error: {e}", file=sys.stderr)
        return 2
    command = "python -m rerank.recipes.stronger " + " ".join(argv if argv is not None else sys.argv[1:])
    with atomic_write(os.path.join(args.out, "results.json")) as f:
        json.dump({"command": command, "models": model_records(args), "experiments": results}, f, indent=1)
    with atomic_write(os.path.join(args.out, "stronger.md")) as f:
        f.write(report(results, command))
    run.log(run.steps.summary())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
