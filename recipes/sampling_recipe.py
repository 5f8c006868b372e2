"""Sampling → MBR → eval, end to end (issue 48 item 6): candidates sampled from a project NMT,
MBR with chrF and with the MLMME cosine, QE → MBR two-stage, each tested against beam search's
1-best.

Steps (each resumable: a DONE marker with its resolved config and its inputs' SHA-256 beside its
output, recipes/steps.py; every output written atomically):

1. `source`: the first `--sentences` lines of the source and the reference (all of them: 0);
2. `samples`: `rerank.generate`, `--n` epsilon-sampled candidates a sentence (`--epsilon`,
   `--seed`), duplicates merged into `count`;
3. `beam`: `rerank.generate --search beam -n --beam`, its first row the baseline;
4. `systems`: the picks of every system on the sampled list (rerank.consensus.mbr_scores):
   - `MBR chrF`: chrF utility, posterior `counts` (the Monte Carlo estimate over the draws);
   - `MBR MLMME`: the MLMME cosine of two hypotheses as the utility, posterior `counts`;
   - `QE→MBR chrF`: the `--qe-k` candidates of highest `s_s` (the MLMME source–hypothesis
     cosine, a reference-free QE score the NMT did not make) are the only candidates, every draw
     stays a pseudo-reference;
   - `max-prob sample`: the sample of highest `nmt` (log p under the model), the MAP-like pick;
5. `eval`: `rerank.evaluate` against the beam 1-best (BLEU, chrF; METEOR needs the German paraphrase
   table of Meteor 1.5, not shipped: `--metrics bleu,chrf,meteor` where it is installed; paired bootstrap and
   approximate randomisation), saved as JSON and markdown.

    python -m rerank.recipes.sampling_recipe --model runs/frontier-nmt \
        --src rerank/data/multi30k/test_2016_flickr.en.gz --ref rerank/data/multi30k/test_2016_flickr.de.gz \
        --mlmme rerank/data/models/mlmme-small.pt --sentences 100 --out runs/sampling [--publish docs/results]

`--publish DIR` copies the evaluation (sampling.json, sampling.table.md) and the recipe's resolved
config (sampling.config.json) into DIR. `--tiny` sets small sizes (for tests: seconds on a
random-weight model).
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import os
import platform
import sys
import time

import numpy as np

from rerank.io import atomic_copy, atomic_write
from rerank.recipes.steps import Steps

logger = logging.getLogger(__name__)

SYSTEMS = ("max-prob sample", "MBR chrF", "MBR MLMME", "QE→MBR chrF")


def read_lines(path: str, k: int) -> list[str]:
    """The first `k` lines of a text file (gzip allowed); k = 0: all."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f]
    return lines[:k] if k else lines


def picks(nbest, scores: np.ndarray) -> list[str]:
    """Each sentence's hypothesis of highest score (ties: the earlier row)."""
    hyps = nbest.hyps
    out = []
    for i in range(nbest.n_sentences):
        rows = nbest.sentence(i)
        out.append(hyps[rows.start + int(np.argmax(scores[rows]))])
    return out


class Recipe:
    def __init__(self, args: argparse.Namespace):
        self.a = args
        os.makedirs(args.out, exist_ok=True)
        self.steps = Steps(self.log)
        self.config = {
            "model": os.path.abspath(args.model), "src": os.path.abspath(args.src), "ref": os.path.abspath(args.ref),
            "mlmme": os.path.abspath(args.mlmme), "sentences": args.sentences,
            "sampling": {"n": args.n, "epsilon": args.epsilon, "seed": args.seed, "search": "sample"},
            "beam": {"n": args.beam, "search": "beam"}, "threads": args.threads,
            "mbr": {"posterior": "counts", "utilities": ["chrf", "mlmme"], "qe": f"s_s:{args.qe_k}"},
            "eval": {"metrics": args.metrics, "ar": args.ar, "bootstrap": args.bootstrap, "seed": 12345, "lang": "de"},
        }
        with atomic_write(os.path.join(args.out, "recipe.config.json")) as f:
            json.dump(self.config, f, indent=1)

    def log(self, text: str) -> None:
        logger.info(text)

    def path(self, name: str) -> str:
        return os.path.join(self.a.out, name)

    def source(self) -> tuple[str, str]:
        src, ref = self.path("src.en"), self.path("ref.de")
        config = {"sentences": self.a.sentences}
        if not self.steps.is_done("source", src, [self.a.src, self.a.ref], config):
            started = self.steps.start("source", src, config, inputs=[self.a.src, self.a.ref])
            for path, lines in ((src, read_lines(self.a.src, self.a.sentences)),
                                (ref, read_lines(self.a.ref, self.a.sentences))):
                with atomic_write(path) as f:
                    f.write("".join(line + "\n" for line in lines))
            self.steps.finish("source", src, [self.a.src, self.a.ref], config, started)
        return src, ref

    def generate(self, name: str, src: str, **options) -> str:
        import rerank

        out = self.path(f"{name}.jsonl.gz")
        model = os.path.join(self.a.model, "best.pt")
        config = {**options, "threads": self.a.threads}
        if not self.steps.is_done(name, out, [src, model], config):
            started = self.steps.start(name, out, config, inputs=[src, model])
            done = rerank.generate(src, out, model=self.a.model, backend="nmt", threads=self.a.threads, **options)
            seconds = time.time() - started
            self.log(f"{name}: {done.rows} rows for {done.end - done.first} sentences in {seconds:.1f} s "
                     f"(load {os.getloadavg()[0]:.1f})")
            self.steps.finish(name, out, [src, model], config, started, rows=done.rows,
                              load=round(os.getloadavg()[0], 2))
        return out

    def systems(self, samples: str, beam: str, src: str) -> dict[str, list[str]]:
        import rerank
        from rerank.consensus import MBROptions

        out = self.path("systems.json")
        config = {"mbr": self.config["mbr"], "mlmme": self.config["mlmme"]}
        inputs = [samples, beam, self.a.mlmme]
        if self.steps.is_done("systems", out, inputs, config):
            with open(out, encoding="utf-8") as f:
                return json.load(f)["systems"]
        started = self.steps.start("systems", out, config, inputs=inputs)
        nbest = rerank.read_nbest(samples)
        sources = read_lines(src, 0)
        seconds = {}

        def timed(name, fn):
            t = time.time()
            value = fn()
            seconds[name] = round(time.time() - t, 2)
            return value

        nbest = timed("s_s", lambda: rerank.add_features(nbest, "s_s", sources=sources, models=(self.a.mlmme,),
                                                         backend="numpy", threads=self.a.threads))
        scores = nbest.column("nmt")

        def mbr(name: str, **fields) -> np.ndarray:   # the mbr column, as `rerank features --which mbr` adds it
            options = {"mbr": MBROptions(posterior="counts", **fields)}
            return timed(name, lambda: rerank.add_features(nbest, "mbr", options=options, sources=sources,
                                                           replace=True).column("mbr"))

        chrf = mbr("MBR chrF", utility="chrf")
        cos = mbr("MBR MLMME", utility="mlmme", model=self.a.mlmme)
        qe = mbr("QE→MBR chrF", utility="chrf", candidates=f"s_s:{self.a.qe_k}")
        systems = {"beam 1-best": rerank.first_best(beam), "max-prob sample": picks(nbest, scores),
                   "MBR chrF": picks(nbest, chrf), "MBR MLMME": picks(nbest, cos), "QE→MBR chrF": picks(nbest, qe)}
        distinct = [int(n) for n in nbest.sizes]
        record = {"systems": systems, "seconds": seconds,
                  "distinct_candidates": {"mean": float(np.mean(distinct)), "min": min(distinct),
                                          "max": max(distinct)}}
        with atomic_write(out) as f:
            json.dump(record, f, indent=1, ensure_ascii=False)
        self.steps.finish("systems", out, inputs, config, started, seconds=seconds)
        return systems

    def evaluate(self, systems: dict[str, list[str]], ref: str) -> dict:
        import rerank

        out = self.path("sampling.json")
        config = self.config["eval"]
        inputs = [self.path("systems.json"), ref]
        if not self.steps.is_done("eval", out, inputs, config):
            started = self.steps.start("eval", out, config, inputs=inputs)
            ev = rerank.evaluate([ref], ("beam 1-best", systems["beam 1-best"]),
                                 {name: systems[name] for name in SYSTEMS}, metrics=self.a.metrics,
                                 ar=self.a.ar, bootstrap=self.a.bootstrap, seed=12345, lang="de",
                                 record={"recipe": self.config})
            ev.save(out)
            with atomic_write(self.path("sampling.table.md")) as f:
                f.write(ev.to_markdown())
            self.log("\n" + ev.to_text())
            self.steps.finish("eval", out, inputs, config, started)
        with open(out, encoding="utf-8") as f:
            return json.load(f)

    def run(self) -> dict:
        src, ref = self.source()
        samples = self.generate("samples", src, n=self.a.n, search="sample", epsilon=self.a.epsilon,
                                seed=self.a.seed)
        beam = self.generate("beam", src, n=self.a.beam, search="beam")
        systems = self.systems(samples, beam, src)
        result = self.evaluate(systems, ref)
        if self.a.publish:
            os.makedirs(self.a.publish, exist_ok=True)
            for name in ("sampling.json", "sampling.table.md"):
                atomic_copy(self.path(name), os.path.join(self.a.publish, name))
            with atomic_write(os.path.join(self.a.publish, "sampling.config.json")) as f:
                json.dump({**self.config, "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
                           "steps": {name: self._marker(name) for name in ("samples", "beam", "systems")}},
                          f, indent=1, ensure_ascii=False)
        self.log(self.steps.summary())
        return result

    def _marker(self, name: str) -> dict | None:
        from rerank.recipes.steps import marker_path, read_marker

        out = self.path("systems.json" if name == "systems" else f"{name}.jsonl.gz")
        marker = read_marker(marker_path(out))
        return None if marker is None else {k: marker.get(k) for k in ("seconds", "rows", "load", "finished")}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m rerank.recipes.sampling_recipe", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="a `rerank nmt train` run directory (best.pt, config.json, vocab.*)")
    p.add_argument("--src", required=True, help="source lines (e.g. test_2016_flickr.en.gz)")
    p.add_argument("--ref", required=True, help="reference lines")
    p.add_argument("--mlmme", default="rerank/data/models/mlmme-small.pt", help="MLMME model (s_s and the MBR cosine)")
    p.add_argument("--out", required=True, help="the run's folder")
    p.add_argument("--sentences", type=int, default=0, help="the first K sentences only (0: all)")
    p.add_argument("-n", "--n", type=int, default=64, help="samples a sentence")
    p.add_argument("--epsilon", type=float, default=0.02)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--beam", type=int, default=5, help="the baseline's beam size")
    p.add_argument("--qe-k", type=int, default=16, help="QE→MBR: candidates kept by s_s")
    p.add_argument("--metrics", default="bleu,chrf", type=lambda s: s.split(","))
    p.add_argument("--ar", type=int, default=10000, help="approximate randomisation trials")
    p.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--publish", default=None, metavar="DIR", help="copy the results into DIR")
    p.add_argument("--tiny", action="store_true", help="small sizes for a test: n 8, beam 2, qe-k 4, ar 200, "
                                                        "bootstrap 50, BLEU and chrF")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.tiny:
        args.n, args.beam, args.qe_k, args.ar, args.bootstrap, args.metrics = 8, 2, 4, 200, 50, ["bleu", "chrf"]
    from rerank.cliargs import stderr_log

    with stderr_log(logging.INFO):
        Recipe(args).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
