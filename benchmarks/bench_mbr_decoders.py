"""The MBR decoders (issue 47 item 2: rerank.mbr_decoders) beside mbrs 0.1.8's, on the same lists in
one process: seconds per sentence, agreement of the choice with exact MBR's, and, for c2f, parity
of the choice with mbrs's (the one decoder whose algorithm draws nothing: the same sentence, since a
list may hold one more than once).

    PYTHONPATH=/tmp/mbrs_pkgs .venv-compat/bin/python benchmarks/bench_mbr_decoders.py \\
        --sentences 40 --out docs/benchmarks/mbr_decoders

(mbrs in a scratch folder: `pip install --target /tmp/mbrs_pkgs --no-deps mbrs==0.1.8 simple-parsing
docstring-parser fastchrf==0.2.1 bert-score==0.3.13 bleurt-pytorch`; it needs transformers 4,
hence .venv-compat. Without mbrs the script times ours alone and says so.)

Utility (--utility): chrF (sacrebleu's), both sides, or COMET on a tiny random-weight COMET-22-style
checkpoint (`Utility`), with the lists' sources, where the centroid decoder runs too (mbrs's needs
embeddings). chrF: mbrs's MetricChrF with its fastchrf switch on (its
fastest path) for --mbrs-fastchrf, else sacrebleu per pair; its aggregation (aggregate, c2f's
coarse step) is sacrebleu's either way, since fastchrf does not aggregate with weights. Posterior: p = softmax(nmt / T) within
each list (mbrs: reference_lprobs = nmt / T, which it softmaxes). Lists: the first --sentences
sentences of the shipped optimised test_2016 50-best lists (N = 50), and, for N = 150, per
sentence the optimised, regular and weak 50-best lists one after the other (duplicates kept).

Decoders and their settings (both sides the same):
- c2f: ours `--mbr-method c2f --mbr-c2f-k K`; mbrs has no such decoder, so its metric's
  `expected_scores_reference_aggregation`, the top K, then its `expected_scores` of those K
  against every pseudo-reference (the same computation);
- pruning: ours with its defaults (schedule 8,...,256, alpha 0.99, 500 bootstrap samples);
  mbrs's DecoderPruningMBR with the same, given the pseudo-references in the order ours draws
  them (rerank.mbr_decoders.posterior_order, same seed) and their nmt / T;
- probabilistic: ours `--mbr-sample-ratio R --mbr-rank 8`; mbrs's DecoderProbabilisticMBR with
  reduction_factor 1 / R, rank 8 (its ALS defaults);
- exact and aggregate: ours, and mbrs's expected_scores / expected_scores_reference_aggregation.
The seeded decoders draw from numpy (ours) and torch (mbrs): their choices are compared with
exact MBR's, not with each other. Agreement: the share of sentences whose choice has exact MBR's
highest expected utility (ties count). Each measurement runs once untimed (models' first calls,
imports), then --repeat times; the median is reported.
/proc/loadavg is read before and after.

--out PREFIX writes PREFIX.json (settings, versions, load, every number) and PREFIX.md (the table).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)
DATA = os.path.join(ROOT, "rerank", "data", "multi30k")


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_mbr_comet import loadavg  # noqa: E402  (stdlib alone at its import: the load average as it reads it)


def build_lists(size: int, n: int):
    """The NBestList (one column nmt) of the first n sentences' size-best lists (50 or 150)."""
    from rerank.api import read_nbest
    from rerank.nbest import NBestList

    names = {50: ["optimised"], 150: ["optimised", "regular", "weak"]}[size]
    parts = []
    for name in names:
        nb = read_nbest(os.path.join(DATA, f"{name}.test_2016.50best.gz")).select_sentences(np.arange(n))
        parts.append(([list(nb.hyps[nb.sentence(i)]) for i in range(n)], [nb.column("nmt")[nb.sentence(i)]
                                                                            for i in range(n)]))
    hyps = [sum((p[0][i] for p in parts), []) for i in range(n)]
    nmt = [np.concatenate([p[1][i] for p in parts]) for i in range(n)]
    return NBestList.from_lists(hyps, [s[:, None] for s in nmt], ["nmt"])


def timed(fn, repeat: int):
    """(fn's result, the median seconds of `repeat` timed runs after one untimed warm-up run)."""
    times, out = [], fn()
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return out, statistics.median(times)


def choices(values: np.ndarray, offsets: np.ndarray) -> list[int]:
    return [int(np.argmax(values[a:b])) for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist())]


def agreement(chosen: list[int], exact: np.ndarray, offsets: np.ndarray) -> float:
    hits = [exact[a + c] >= exact[a:b].max() - 1e-9 for c, a, b in zip(chosen, offsets[:-1].tolist(),
                                                                         offsets[1:].tolist())]
    return float(np.mean(hits))


def run_ours(nb, temperature, settings, repeat, utility):
    from rerank import consensus as C

    rows = {}
    scores, offsets = nb.column("nmt"), np.asarray(nb.offsets)
    def run(method, options):
        if utility.model is not None:
            utility.model._block = None   # no embeddings kept from the run before: each run encodes its lists
        return C.mbr_scores(nb, scores, C.MBROptions(utility.name, temperature=temperature, method=method, **options),
                            model=utility.model, sources=utility.sources)

    for method, options in settings.items():
        values, seconds = timed(lambda: run(method, options), repeat)
        rows[method] = {"seconds_per_sentence": seconds / nb.n_sentences, "choices": choices(values, offsets)}
    return rows


def run_mbrs(nb, temperature, settings, repeat, utility):
    import torch
    from mbrs.decoders import DecoderCentroidMBR, DecoderPruningMBR, DecoderProbabilisticMBR
    from mbrs.modules.kmeans import Kmeans

    from rerank import consensus as C
    from rerank import mbr_decoders as D

    metric, aggregating = utility.mbrs_metrics()
    sources = utility.sources or [None] * nb.n_sentences
    lists = [list(nb.hyps[nb.sentence(i)]) for i in range(nb.n_sentences)]
    nmt = [nb.column("nmt")[nb.sentence(i)] for i in range(nb.n_sentences)]
    p = C.posterior(nb.column("nmt"), nb.offsets, temperature)
    offsets = np.asarray(nb.offsets)
    rows = {}

    def lprobs(i):
        return torch.as_tensor(nmt[i] / temperature, dtype=torch.float32)

    def exact():
        return [int(metric.expected_scores(h, h, sources[i], reference_lprobs=lprobs(i)).argmax())
                for i, h in enumerate(lists)]

    def aggregate():
        return [int(aggregating.expected_scores_reference_aggregation(h, h, sources[i], reference_lprobs=lprobs(i))
                    .argmax()) for i, h in enumerate(lists)]

    def c2f(k):
        out = []
        for i, h in enumerate(lists):
            coarse = aggregating.expected_scores_reference_aggregation(h, h, sources[i], reference_lprobs=lprobs(i))
            top = torch.topk(coarse, min(k, len(h))).indices.tolist()
            fine = metric.expected_scores([h[t] for t in top], h, sources[i], reference_lprobs=lprobs(i))
            out.append(top[int(fine.argmax())])
        return out

    def centroid(options):
        cfg = DecoderCentroidMBR.Config(kmeans=Kmeans.Config(ncentroids=options["centroids"], seed=0))
        decoder = DecoderCentroidMBR(cfg, metric)
        return [decoder.decode(h, h, sources[i], nbest=1, reference_lprobs=lprobs(i)).idx[0]
                for i, h in enumerate(lists)]

    def pruning(options):
        cfg = DecoderPruningMBR.Config(alpha=options.get("pruning_alpha", 0.99),
                                       sampling_scheduler=list(options.get("pruning_schedule",
                                                                           [8, 16, 32, 64, 128, 256])),
                                       seed=options.get("seed", 0))
        decoder, out = DecoderPruningMBR(cfg, metric), []
        for i, h in enumerate(lists):
            lists_ = D.Lists(np.zeros(len(h), dtype=np.int64), np.ones(len(h), bool), np.ones(len(h), bool),
                             options.get("seed", 0), i)
            a = int(offsets[i])
            order = D.posterior_order(np.arange(len(h)), p[a:a + len(h)], lists_.rng(0)).tolist()
            out.append(decoder.decode(h, [h[j] for j in order], sources[i], nbest=1,
                                      reference_lprobs=lprobs(i)[order]).idx[0])
        return out

    def probabilistic(options):
        cfg = DecoderProbabilisticMBR.Config(reduction_factor=1.0 / options["sample_ratio"],
                                             rank=options.get("rank", 8), seed=options.get("seed", 0))
        decoder = DecoderProbabilisticMBR(cfg, metric)
        return [decoder.decode(h, h, sources[i], nbest=1, reference_lprobs=lprobs(i)).idx[0]
                for i, h in enumerate(lists)]

    runs = {"exact": exact, "aggregate": aggregate, "c2f": lambda: c2f(settings["c2f"]["c2f_k"]),
            "centroid": lambda: centroid(settings["centroid"]),
            "pruning": lambda: pruning(settings["pruning"]),
            "probabilistic": lambda: probabilistic(settings["probabilistic"])}
    for method in settings:
        chosen, seconds = timed(runs[method], repeat)
        rows[method] = {"seconds_per_sentence": seconds / nb.n_sentences, "choices": [int(c) for c in chosen]}
    return rows


class Utility:
    """The utility both sides score with: chrF, or COMET on a tiny random-weight COMET-22-style
    checkpoint (rerank.recipes.tiny_models.build_comet, built into a temporary folder; mbrs loads
    it through its MetricCOMET, whose download_model is pointed at the local file, as
    benchmarks/bench_mbr_comet.py does), with the lists' sources."""

    def __init__(self, name: str, n: int, fastchrf: bool):
        self.name, self.fastchrf, self.model, self.sources, self.path = name, fastchrf, None, None, None
        if name == "comet":
            import gzip
            import tempfile

            from rerank.metrics import comet
            from rerank.recipes import tiny_models

            self.path = os.path.join(tempfile.mkdtemp(prefix="bench_mbr_decoders."), "comet-regression")
            tiny_models.build_comet(self.path, tiny_models.read_text(tiny_models.DEFAULT_TEXT), seed=2,
                                    kind="regression")
            with gzip.open(os.path.join(DATA, "test_2016_flickr.en.gz"), "rt", encoding="utf-8") as f:
                self.sources = [line.rstrip("\n") for _, line in zip(range(n), f)]
            self.model = comet.MBRUtility(self.path, 16, "cpu")
            self.model.model()   # loaded before timing

    def mbrs_metrics(self):
        """(mbrs's metric, the one it aggregates with)."""
        if self.name == "comet":
            import mbrs.metrics.comet as mbrs_comet
            from mbrs.metrics import MetricCOMET

            from rerank.metrics import comet

            mbrs_comet.download_model = lambda name, *a, **k: comet.checkpoint_file(name)
            metric = MetricCOMET(MetricCOMET.Config(model=self.path, batch_size=16, cpu=True))
            return metric, metric
        from mbrs.metrics import MetricChrF

        # fastchrf does not aggregate with reference_lprobs
        return MetricChrF(MetricChrF.Config(fastchrf=self.fastchrf)), MetricChrF(MetricChrF.Config())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=int, default=40)
    parser.add_argument("--sizes", default="50,150")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--c2f-k", type=int, default=8)
    parser.add_argument("--sample-ratio", type=float, default=0.125)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--mbrs-fastchrf", action="store_true", help="mbrs's MetricChrF on fastchrf")
    parser.add_argument("--utility", choices=("chrf", "comet"), default="chrf")
    parser.add_argument("--centroids", type=int, default=8, help="comet: the centroid decoder's K")
    parser.add_argument("--out", default=None, help="PREFIX for PREFIX.json and PREFIX.md")
    args = parser.parse_args()
    settings = {"exact": {}, "aggregate": {}, "c2f": {"c2f_k": args.c2f_k}, "pruning": {},
                "probabilistic": {"sample_ratio": args.sample_ratio}}
    if args.utility == "comet":
        settings["centroid"] = {"centroids": args.centroids}
    utility = Utility(args.utility, args.sentences, args.mbrs_fastchrf)
    try:
        import mbrs  # noqa: F401
        have_mbrs = True
    except ImportError:
        have_mbrs = False
    report = {"argv": sys.argv, "settings": settings, "load_before": loadavg(), "python": platform.python_version(),
              "machine": platform.machine(), "cpus": os.cpu_count(), "mbrs": have_mbrs, "sizes": {}}
    for size in (int(s) for s in args.sizes.split(",")):
        nb = build_lists(size, args.sentences)
        from rerank import consensus as C

        offsets = np.asarray(nb.offsets)
        exact = C.mbr_scores(nb, nb.column("nmt"), C.MBROptions(args.utility, temperature=args.temperature),
                             model=utility.model, sources=utility.sources)
        entry = {"ours": run_ours(nb, args.temperature, settings, args.repeat, utility)}
        if have_mbrs:
            entry["mbrs"] = run_mbrs(nb, args.temperature, settings, args.repeat, utility)
        for side in entry.values():
            for row in side.values():
                row["agreement_with_exact"] = agreement(row["choices"], exact, offsets)
        if have_mbrs:   # the same sentence (a list may hold it more than once)
            same = [nb.hyps[a + x] == nb.hyps[a + y] for a, x, y in zip(offsets[:-1].tolist(), entry["ours"]["c2f"]["choices"],
                                                                        entry["mbrs"]["c2f"]["choices"])]
            entry["c2f_same_choice_as_mbrs"] = float(np.mean(same))
        report["sizes"][size] = entry
        print(json.dumps({size: {side: {m: {k: v for k, v in r.items() if k != "choices"} for m, r in rows.items()}
                                 for side, rows in entry.items() if isinstance(rows, dict)}}, indent=1), flush=True)
    report["load_after"] = loadavg()
    lines = [f"# MBR decoders beside mbrs 0.1.8 ({args.utility}, {args.sentences} sentences, T = {args.temperature})", "",
             f"`{' '.join(sys.argv)}`; load average before {report['load_before']}, after {report['load_after']}; "
             f"{os.cpu_count()} CPUs.", "",
             "| N | method | ours s/sentence | mbrs s/sentence | mbrs / ours | ours agrees with exact | mbrs agrees "
             "with exact |", "|---|---|---|---|---|---|---|"]
    for size, entry in report["sizes"].items():
        for method in settings:
            ours = entry["ours"][method]
            theirs = entry.get("mbrs", {}).get(method)
            lines.append(f"| {size} | {method} | {ours['seconds_per_sentence']:.4f} | "
                         + (f"{theirs['seconds_per_sentence']:.4f} | "
                            f"{theirs['seconds_per_sentence'] / ours['seconds_per_sentence']:.1f}x | "
                            if theirs else "| | ")
                         + f"{ours['agreement_with_exact']:.0%} | "
                         + (f"{theirs['agreement_with_exact']:.0%} |" if theirs else "|"))
        if "c2f_same_choice_as_mbrs" in entry:
            lines.append(f"| {size} | c2f: same choice as mbrs's | | | | {entry['c2f_same_choice_as_mbrs']:.0%} | |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out + ".json", "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)
        with open(args.out + ".md", "w", encoding="utf-8") as f:
            f.write(text)


if __name__ == "__main__":
    main()
