"""The quality/time frontier of MBR (issue 47 item 5): for N candidates per sentence (16, 64, 256,
1024), every decoder x utility of ours (rerank.consensus.mbr_scores, rerank.mbr_decoders) and of
mbrs 0.1.8 on the same lists in one process: seconds, peak memory, agreement with our exact MBR's
choice, and corpus BLEU / chrF (sacrebleu) of the chosen outputs against the references.

    OMP_NUM_THREADS=1 RAYON_NUM_THREADS=1 PYTHONPATH=SCRATCH/mbrs_pkgs .venv/bin/python \\
        benchmarks/bench_mbr_frontier.py --candidates samples.jsonl.gz --sentences 50 \\
        --mlmme-model rerank/data/models/mlmme-bpe.pt --out RUN_DIR --report docs/benchmarks/mbr_frontier

(mbrs in a scratch folder, as benchmarks/bench_mbr_decoders.py installs it; without it the script
runs ours alone and says so in every mbrs column.) `--tiny` is the seconds-long check that the
tests run: three sentences of the shipped 50-best list, N = 8 and 16, the lexical utilities, ours.

Candidates (--candidates): an n-best list in any format rerank reads, with at least max(--sizes)
rows per sentence for the first --sentences sentences (ids from 0). A list from `rerank generate`
(a `count` column: the times a string was drawn) has each row repeated `count` times, so that it
holds every draw; the draws are then put in a seeded random order per sentence (--order shuffle,
the default when there is a count column), and the list of size N is the first N of that order:
nested sets, each an i.i.d. sample of the model's (warped) distribution, as N draws would be. A
beam list (no count) keeps its own order (--order file): size N is its N best. References
(--ref): one line per sentence, the first --sentences used.

Posterior (--posterior): `uniform` (the default, for sampled candidates: each draw weighs 1/N,
duplicates counted, the Monte Carlo estimate of the expected utility; mbrs: reference_lprobs None)
or `nmt` (softmax(nmt / T) within each list; mbrs: reference_lprobs = nmt / T).

Utilities, both sides the same: bleu (sacrebleu's sentence BLEU with exp smoothing and effective
order, 13a: mbrs's MetricBLEU defaults; ours --mbr-bleu-smooth exp), chrf (sacrebleu's chrF; mbrs's
MetricChrF on fastchrf, its fastest path, and on sacrebleu for its aggregation, which fastchrf
cannot weigh), ter (sacrebleu's TER; mbrs's MetricTER; the decision minimises it: ours scores
-TER), mlmme (the cosine of the shipped MLMME model's German embeddings, --mlmme-model; mbrs has no
such metric, so mbrs's decoders are run on it through `MbrsVectorMetric`, a MetricAggregatableCache
over our embeddings: the mbrs rows of mlmme time mbrs's decoders, not a metric of mbrs's). mbrs's
multiprocessing (num_workers) is set to 1, as every library here runs one thread
(OMP_NUM_THREADS, RAYON_NUM_THREADS, torch's threads: --threads).

Decoders, both sides the same settings: exact; aggregate; c2f (aggregate keeps --c2f-k, exact
among them; mbrs has no such decoder: its metric's expected_scores_reference_aggregation, the top
K, then its expected_scores of those K, as bench_mbr_decoders.py composes it); pruning (alpha
--pruning-alpha, 500 bootstrap samples, the schedule 8, 16, ... doubling up to N so that the last
step holds every pseudo-reference; mbrs's DecoderPruningMBR given the pseudo-references in the
order ours draws them); probabilistic (--sample-ratio of the pairs, rank --rank; mbrs's
DecoderProbabilisticMBR, reduction factor 1 / ratio); centroid (k-means of --centroids centroids;
mbrs's DecoderCentroidMBR, seed 0). A decoder a utility does not allow is refused by our code in
one line (its message is the row's note); mbrs's where its metric class lacks the interface.
A baseline row per N: the candidate of highest nmt log-probability.

Each cell (side, utility, decoder, N) first runs on the first sentence alone (untimed warm-up, and
the budget's probe): when that time x --sentences exceeds --cell-budget seconds, the cell is left
out and the row says so with the probe's seconds per sentence. Otherwise it runs over every
sentence, timed: seconds include the utility's work (model encodes, texts' statistics), not the
reading of the lists or a model's load. Peak memory: the process's resident peak (VmHWM) during the
timed run, the peak first reset to the current resident size (/proc/self/clear_refs 5, after
malloc_trim); its increase over the size at the start is in brackets. Agreement: the share of
sentences whose choice has our exact MBR's highest expected utility (ties count). BLEU and chrF:
sacrebleu's corpus scores of the chosen candidates.

Resumable: every cell's result is a JSON file in RUN_DIR/cells (written atomically, with the
settings it was made with: a cell made with others is made again); a killed run continues where it
stopped. /proc/loadavg is read at the start and the end. --report PREFIX writes PREFIX.json (every
number), PREFIX.md (the table) and PREFIX.png (BLEU and chrF against seconds per sentence, a panel
per decoder, a line per utility through N = 16 ... 1024, ours solid, mbrs dashed).
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "RAYON_NUM_THREADS"):
    os.environ.setdefault(_name, "1")   # before numpy (BLAS) and fastchrf (rayon) start their pools

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)
DATA = os.path.join(ROOT, "rerank", "data", "multi30k")
MLMME_SHIPPED = os.path.join(ROOT, "rerank", "data", "models", "mlmme-bpe.pt")  # the shipped default model

from bench_mbr_comet import loadavg  # noqa: E402  (stdlib alone at its import)

UTILITIES = ("bleu", "chrf", "ter", "mlmme")
DECODERS = ("exact", "aggregate", "c2f", "pruning", "probabilistic", "centroid")
SIDES = ("ours", "mbrs")
BASELINE = "nmt-best"
TIE = 1e-9


# ---- candidates ------------------------------------------------------------------------------

@dataclass
class Candidates:
    """Per sentence, the candidates in the order whose prefixes are the lists of each size, and
    their nmt log-probabilities (0 where the list has none)."""

    texts: list[list[str]]
    nmt: list[np.ndarray]
    digest: str = ""

    def lists(self, n: int):
        """The NBestList of every sentence's first n candidates (columns nmt, uniform)."""
        from rerank.nbest import NBestList

        feats = [np.stack([s[:n], np.zeros(min(n, len(s)))], axis=1) for s in self.nmt]
        return NBestList.from_lists([t[:n] for t in self.texts], feats, ["nmt", "uniform"])

    def digest_of(self, n: int) -> str:
        h = hashlib.sha256()
        for texts, nmt in zip(self.texts, self.nmt):
            h.update("\n".join(texts[:n]).encode("utf-8"))
            h.update(np.round(nmt[:n], 6).tobytes())
        return h.hexdigest()[:16]


def read_candidates(path: str, sentences: int, largest: int, order: str | None, seed: int) -> tuple[Candidates, str]:
    """The first `sentences` lists of `path`, each expanded by its count column (if any) and put in
    the --order; a list shorter than `largest` is an error naming it. Returns (candidates, order)."""
    from rerank.api import read_nbest

    nb = read_nbest(path)
    if nb.n_sentences < sentences:
        sys.exit(f"{path}: {nb.n_sentences} lists, fewer than --sentences {sentences}")
    names = nb.feature_names
    count = nb.column("count").astype(np.int64) if "count" in names else None
    nmt_col = nb.column("nmt") if "nmt" in names else np.zeros(nb.n_hyps)
    order = order or ("shuffle" if count is not None else "file")
    texts, nmt = [], []
    for i in range(sentences):
        rows = np.arange(nb.sentence(i).start, nb.sentence(i).stop)
        if count is not None:
            rows = np.repeat(rows, np.maximum(count[rows], 1))
        if order == "shuffle":
            rows = rows[np.random.default_rng([seed, i]).permutation(len(rows))]
        if len(rows) < largest:
            sys.exit(f"{path}: list {i} has {len(rows)} candidates, fewer than the largest size {largest}")
        texts.append([nb.hyps[int(r)] for r in rows])
        nmt.append(nmt_col[rows].astype(np.float64))
    return Candidates(texts, nmt), order


def read_references(path: str, sentences: int) -> list[str]:
    from rerank.io import iter_lines

    refs = [line for _, line in iter_lines(path)][:sentences]
    if len(refs) < sentences:
        sys.exit(f"{path}: {len(refs)} lines, fewer than --sentences {sentences}")
    return refs


# ---- measuring -------------------------------------------------------------------------------

def _status_kb(field_name: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(field_name + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def reset_peak() -> int | None:
    """Give freed heap back (malloc_trim), reset the kernel's resident peak to the current size, and
    return that size in kB (None where /proc cannot do it)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
    except OSError:
        return None
    return _status_kb("VmRSS")


def measure(fn: Callable[[], Any]) -> tuple[Any, float, float | None, float | None]:
    """(fn(), seconds, peak resident MB during it, its increase over the start in MB)."""
    start_kb = reset_peak()
    t0 = time.perf_counter()
    out = fn()
    seconds = time.perf_counter() - t0
    peak_kb = _status_kb("VmHWM") if start_kb is not None else None
    if peak_kb is None or start_kb is None:
        return out, seconds, None, None
    return out, seconds, peak_kb / 1024, (peak_kb - start_kb) / 1024


def choices_of(values: np.ndarray, offsets: np.ndarray) -> list[int]:
    return [int(np.argmax(values[a:b])) for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist())]


def agreement(chosen: Sequence[int], exact: np.ndarray, offsets: np.ndarray) -> float:
    """The share of lists whose chosen row has the highest exact value of its list (ties count)."""
    hits = [exact[a + c] >= exact[a:b].max() - TIE for c, a, b in zip(chosen, offsets[:-1].tolist(),
                                                                       offsets[1:].tolist())]
    return float(np.mean(hits))


def quality(chosen: Sequence[int], texts: list[list[str]], refs: list[str]) -> dict[str, float]:
    import sacrebleu

    outputs = [t[c] for c, t in zip(chosen, texts)]
    return {"bleu": round(sacrebleu.corpus_bleu(outputs, [refs]).score, 2),
            "chrf": round(sacrebleu.corpus_chrf(outputs, [refs]).score, 2)}


# ---- the two sides ---------------------------------------------------------------------------

@dataclass
class Settings:
    temperature: float = 1.0
    posterior: str = "uniform"
    c2f_k: int = 8
    sample_ratio: float = 0.125
    rank: int = 8
    centroids: int = 8
    pruning_alpha: float = 0.99
    seed: int = 0

    def schedule(self, n: int) -> list[int]:
        """8, 16, ... doubling, the last step n (every pseudo-reference)."""
        steps, s = [], 8
        while s < n:
            steps.append(s)
            s *= 2
        return steps + [n]

    def decoder_options(self, decoder: str, n: int) -> dict[str, Any]:
        options: dict[str, dict[str, Any]] = {"exact": {}, "aggregate": {}, "c2f": {"c2f_k": self.c2f_k},
                "pruning": {"pruning_schedule": self.schedule(n), "pruning_alpha": self.pruning_alpha,
                            "seed": self.seed},
                "probabilistic": {"sample_ratio": self.sample_ratio, "rank": self.rank, "seed": self.seed},
                "centroid": {"centroids": self.centroids, "seed": self.seed}}
        return options[decoder]


@dataclass
class Models:
    """The model utilities' objects, loaded once (mlmme)."""

    mlmme_path: str | None = None
    threads: int = 1
    _mlmme: Any = None
    _mbrs: dict[str, Any] = field(default_factory=dict)

    def ours(self, utility: str):
        if utility != "mlmme":
            return None
        if self._mlmme is None:
            import torch

            from rerank import consensus as C

            torch.set_num_threads(self.threads)
            self._mlmme = C.make_utility("mlmme", self.mlmme_path, None)
            self._mlmme.vectors(["ein Test ."])   # the model loaded before any timing
        self._mlmme._block = None   # no embeddings kept from the run before: each run encodes its lists
        return self._mlmme


def our_posterior_scores(nb, settings: Settings) -> np.ndarray:
    return nb.column("uniform" if settings.posterior == "uniform" else "nmt")


def run_ours(nb, utility: str, decoder: str, settings: Settings, models: Models,
             keep: dict[str, np.ndarray] | None = None) -> list[int]:
    """Our choices; `keep` gets the values (exact: for the agreements of the others)."""
    from rerank import consensus as C

    n = int(nb.sizes.max())
    extra: dict[str, Any] = {"bleu_smooth": "exp"} if utility == "bleu" else {}
    options = C.MBROptions(utility, temperature=settings.temperature, method=decoder, **extra,
                           **settings.decoder_options(decoder, n))
    values = C.mbr_scores(nb, our_posterior_scores(nb, settings), options, model=models.ours(utility))
    if keep is not None:
        keep["values"] = values
    return choices_of(values, np.asarray(nb.offsets))


def our_exact_values(nb, utility: str, settings: Settings, models: Models) -> np.ndarray:
    from rerank import consensus as C

    extra: dict[str, Any] = {"bleu_smooth": "exp"} if utility == "bleu" else {}
    options = C.MBROptions(utility, temperature=settings.temperature, **extra)
    return C.mbr_scores(nb, our_posterior_scores(nb, settings), options, model=models.ours(utility))


def our_refusal(utility: str, decoder: str, settings: Settings, models: Models) -> str | None:
    """Our code's one-line refusal of the decoder for the utility, or None."""
    from rerank import consensus as C
    from rerank.errors import InputError
    from rerank.mbr_decoders import check_method

    extra: dict[str, Any] = {"bleu_smooth": "exp"} if utility == "bleu" else {}
    try:
        options = C.MBROptions(utility, method=decoder, **extra, **settings.decoder_options(decoder, 16))
        check_method(options, utility, C.MBR_UTILITIES.get(utility, option="utility"))
        if decoder == "aggregate":
            cls = C.MBR_UTILITIES.get(utility, option="utility")
            if getattr(cls, "aggregate", None) is None:
                return getattr(cls, "no_aggregate", "") or f"the {utility} MBR utility has no aggregate method"
    except InputError as e:
        return str(e)
    return None


def mbrs_module(name: str) -> Any:
    """An mbrs module (mbrs lives in a scratch folder, outside the type checker's view)."""
    import importlib

    return importlib.import_module(name)


def mbrs_vector_metric(encode: Callable[[list[str]], np.ndarray]):
    """mbrs's interface (a MetricAggregatableCache) over our mlmme embeddings, so that mbrs's
    decoders run on the same utility: U = the dot product of the unit vectors, as ours, its pairs
    one matrix product (mbrs's generic path would call out_proj once per pseudo-reference). mbrs
    is imported here, not at this module's import."""
    import torch
    MetricAggregatableCache: Any = mbrs_module("mbrs.metrics").MetricAggregatableCache

    class Cache(MetricAggregatableCache.Cache):
        def __init__(self, vectors: torch.Tensor):
            self.vectors = vectors

        def __len__(self) -> int:
            return len(self.vectors)

        def __getitem__(self, key):
            v = self.vectors[key]
            return Cache(v if v.dim() == 2 else v[None])

        def repeat(self, n: int):
            return Cache(self.vectors.repeat(n, 1))

        def aggregate(self, reference_lprobs=None):
            if reference_lprobs is None:
                return Cache(self.vectors.mean(0, keepdim=True))
            w = reference_lprobs.to(self.vectors).softmax(-1)
            return Cache((w[:, None] * self.vectors).sum(0, keepdim=True))

        def cluster(self, kmeans):
            centroids, assigns = kmeans.train(self.vectors)
            return Cache(centroids), assigns

    class Metric(MetricAggregatableCache):
        HIGHER_IS_BETTER = True

        def __init__(self):
            super().__init__(MetricAggregatableCache.Config())

        @property
        def embed_dim(self) -> int:
            return int(encode(["x"]).shape[1])

        def encode(self, sentences):
            return Cache(torch.as_tensor(encode(list(sentences)), dtype=torch.float64))

        def out_proj(self, hypotheses_ir, references_ir, sources_ir=None):
            return (hypotheses_ir.vectors * references_ir.vectors).sum(-1)

        def pairwise_scores_from_ir(self, hypotheses_ir, references_ir, source_ir=None):
            return hypotheses_ir.vectors @ references_ir.vectors.T

    return Metric()


def mbrs_metrics(utility: str, models: Models):
    """(mbrs's metric, the one it aggregates with), made once per utility."""
    if utility in models._mbrs:
        return models._mbrs[utility]
    metrics = mbrs_module("mbrs.metrics")
    MetricBLEU, MetricChrF, MetricTER = metrics.MetricBLEU, metrics.MetricChrF, metrics.MetricTER

    if utility == "bleu":
        metric = MetricBLEU(MetricBLEU.Config(num_workers=1))
        pair = (metric, metric)
    elif utility == "chrf":   # fastchrf does not aggregate with reference_lprobs
        pair = (MetricChrF(MetricChrF.Config(fastchrf=True)), MetricChrF(MetricChrF.Config()))
    elif utility == "ter":
        metric = MetricTER(MetricTER.Config(num_workers=1))
        pair = (metric, metric)
    else:
        ours = models.ours(utility)
        metric = mbrs_vector_metric(ours.vectors)
        pair = (metric, metric)
    models._mbrs[utility] = pair
    return pair


def mbrs_refusal(utility: str, decoder: str, models: Models) -> str | None:
    metrics = mbrs_module("mbrs.metrics")

    metric, aggregating = mbrs_metrics(utility, models)
    if decoder in ("aggregate", "c2f") and not isinstance(aggregating, metrics.MetricAggregatable):
        return f"mbrs's {type(metric).__name__} has no reference aggregation"
    if decoder == "centroid" and not isinstance(metric, metrics.MetricAggregatableCache):
        return f"mbrs's centroid decoder needs a MetricAggregatableCache (embeddings); {type(metric).__name__} is not one"
    return None


def run_mbrs(nb, utility: str, decoder: str, settings: Settings, models: Models) -> list[int]:
    import torch
    decoders = mbrs_module("mbrs.decoders")
    Kmeans = mbrs_module("mbrs.modules.kmeans").Kmeans

    from rerank import consensus as C
    from rerank import mbr_decoders as D

    torch.set_num_threads(models.threads)
    metric, aggregating = mbrs_metrics(utility, models)
    lists = [list(nb.hyps[nb.sentence(i)]) for i in range(nb.n_sentences)]
    offsets = np.asarray(nb.offsets)
    n = int(nb.sizes.max())
    nmt = nb.column("nmt")
    p = C.posterior(our_posterior_scores(nb, settings), nb.offsets, settings.temperature)

    def lprobs(i):
        if settings.posterior == "uniform":
            return None
        return torch.as_tensor(nmt[offsets[i]:offsets[i + 1]] / settings.temperature, dtype=torch.float32)

    if utility == "mlmme":
        models.ours(utility)   # no embeddings kept from the run before (mbrs encodes each list itself)
    if decoder == "c2f":
        out = []
        for i, h in enumerate(lists):
            coarse = aggregating.expected_scores_reference_aggregation(h, h, None, reference_lprobs=lprobs(i))
            if not getattr(aggregating, "HIGHER_IS_BETTER", True):
                coarse = -coarse
            top = torch.topk(coarse, min(settings.c2f_k, len(h))).indices.tolist()
            fine = metric.expected_scores([h[t] for t in top], h, None, reference_lprobs=lprobs(i))
            out.append(top[int(fine.argmax() if getattr(metric, "HIGHER_IS_BETTER", True) else fine.argmin())])
        return out
    if decoder == "exact":
        decoder_ = decoders.DecoderMBR(decoders.DecoderMBR.Config(), metric)
    elif decoder == "aggregate":
        decoder_ = decoders.DecoderAggregateMBR(decoders.DecoderAggregateMBR.Config(), aggregating)
    elif decoder == "centroid":
        decoder_ = decoders.DecoderCentroidMBR(decoders.DecoderCentroidMBR.Config(kmeans=Kmeans.Config(ncentroids=settings.centroids,
                                                                                    seed=settings.seed)), metric)
    elif decoder == "probabilistic":
        decoder_ = decoders.DecoderProbabilisticMBR(decoders.DecoderProbabilisticMBR.Config(
            reduction_factor=1.0 / settings.sample_ratio, rank=settings.rank, seed=settings.seed), metric)
    elif decoder == "pruning":
        decoder_ = decoders.DecoderPruningMBR(decoders.DecoderPruningMBR.Config(alpha=settings.pruning_alpha,
                                                              sampling_scheduler=settings.schedule(n),
                                                              seed=settings.seed), metric)
        out = []
        for i, h in enumerate(lists):
            lists_ = D.Lists(np.zeros(len(h), dtype=np.int64), np.ones(len(h), bool), np.ones(len(h), bool),
                             settings.seed, i)
            a = int(offsets[i])
            order = D.posterior_order(np.arange(len(h)), p[a:a + len(h)], lists_.rng(0)).tolist()
            lp = lprobs(i)
            out.append(int(decoder_.decode(h, [h[j] for j in order], None, nbest=1,
                                           reference_lprobs=None if lp is None else lp[order]).idx[0]))
        return out
    else:
        raise ValueError(decoder)
    return [int(decoder_.decode(h, h, None, nbest=1, reference_lprobs=lprobs(i)).idx[0]) for i, h in enumerate(lists)]


# ---- cells -----------------------------------------------------------------------------------

def write_json(path: str, data: Any) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1)
    os.replace(tmp, path)


class Run:
    def __init__(self, args, candidates: Candidates, refs: list[str], settings: Settings, models: Models,
                 have_mbrs: bool):
        self.args, self.candidates, self.refs, self.settings, self.models = args, candidates, refs, settings, models
        self.have_mbrs = have_mbrs
        self.cells_dir = os.path.join(args.out, "cells")
        os.makedirs(self.cells_dir, exist_ok=True)
        self.cells: dict[tuple[str, str, str, int], dict[str, Any]] = {}
        self.exact: dict[tuple[str, int], np.ndarray] = {}

    def key(self, n: int, decoder: str) -> dict[str, Any]:
        s = self.settings
        return {"lists": self.candidates.digest_of(n), "sentences": len(self.refs), "posterior": s.posterior,
                "temperature": s.temperature, "options": s.decoder_options(decoder, n) if decoder in DECODERS else {},
                "threads": self.models.threads, "mlmme": self.args.mlmme_model}

    def cached(self, path: str, key: dict[str, Any]) -> dict[str, Any] | None:
        try:
            with open(path, encoding="utf-8") as f:
                cell = json.load(f)
        except (OSError, ValueError):
            return None
        if not isinstance(cell, dict) or cell.get("key") != key:
            return None
        if cell.get("status") == "left out" and cell.get("budget", 0) < self.budget(cell["side"], cell["decoder"]):
            return None   # left out under a smaller budget: tried again
        return cell

    def predict(self, side: str, utility: str, decoder: str, n: int, sentences: int) -> dict[str, Any] | None:
        """Why the cell is left out without a probe, from the same cell at the next smaller N
        (left out there, or its time scaled by (N / N')^2 for the quadratic decoders, N / N' for
        aggregate, c2f and centroid, over twice the budget), or None."""
        smaller = [m for (s_, u, d, m) in self.cells if (s_, u, d) == (side, utility, decoder) and m < n]
        if not smaller:
            return None
        m = max(smaller)
        before = self.cells[(side, utility, decoder, m)]
        if before["status"] == "left out":
            return {"reason": f"left out at N = {m} already", "probe_seconds_per_sentence": None}
        if before["status"] != "done":
            return None
        power = 1 if decoder in ("aggregate", "c2f", "centroid") else 2
        per_sentence = before["seconds_per_sentence"] * (n / m) ** power
        if per_sentence * sentences <= 2 * self.budget(side, decoder):
            return None
        return {"predicted_seconds_per_sentence": per_sentence,
                "reason": f"predicted from N = {m} ({before['seconds_per_sentence']:.3f} s/sentence x (N/{m})^{power}): "
                          f"about {per_sentence * sentences:.0f} s for {sentences}, over twice the cell budget of "
                          f"{self.budget(side, decoder):.0f} s"}

    def budget(self, side: str, decoder: str) -> float:
        """The cell budget; our exact MBR's (the agreements' reference) is --exact-budget."""
        return self.args.exact_budget if (side, decoder) == ("ours", "exact") else self.args.cell_budget

    def save_exact(self, utility: str, n: int, values: np.ndarray) -> None:
        path = os.path.join(self.cells_dir, f"ours.{utility}.exact.N{n}.npy")
        np.save(path + ".tmp.npy", values)
        os.replace(path + ".tmp.npy", path)
        self.exact[(utility, n)] = values

    def exact_values(self, utility: str, n: int, nb) -> np.ndarray | None:
        """Our exact MBR's values of (utility, n), kept beside its cell (for the agreements)."""
        if (utility, n) in self.exact:
            return self.exact[(utility, n)]
        path = os.path.join(self.cells_dir, f"ours.{utility}.exact.N{n}.npy")
        cell = self.cells.get(("ours", utility, "exact", n))
        if cell is None or cell["status"] != "done":
            return None
        if os.path.exists(path):
            values = np.load(path)
            if len(values) == nb.n_hyps:
                self.exact[(utility, n)] = values
                return values
        values = our_exact_values(nb, utility, self.settings, self.models)   # its file lost: made again
        self.save_exact(utility, n, values)
        return values

    def cell(self, side: str, utility: str, decoder: str, n: int, nb, compute: bool = True) -> dict[str, Any]:
        """The cell from the cache, else computed and cached (with `compute`), else "not reached"."""
        key = self.key(n, decoder)
        path = os.path.join(self.cells_dir, f"{side}.{utility}.{decoder}.N{n}.json")
        cell = self.cached(path, key)
        if cell is None and not compute and not (side == "mbrs" and not self.have_mbrs):
            cell = {"side": side, "utility": utility, "decoder": decoder, "n": n, "status": "not reached",
                    "reason": f"not reached within the run's --time-limit of {self.args.time_limit:.0f} s"}
        elif cell is None:
            cell = self.compute(side, utility, decoder, n, nb)
            cell["key"], cell["budget"] = key, self.budget(side, decoder)
            write_json(path, cell)
            print(f"{side:4} {utility:5} {decoder:13} N={n:<5} {cell['status']:9} "
                  f"{cell.get('seconds_per_sentence') or cell.get('probe_seconds_per_sentence') or 0:.4f} s/sentence "
                  f"{cell.get('reason', '')}", flush=True)
        self.cells[(side, utility, decoder, n)] = cell
        return cell

    def compute(self, side: str, utility: str, decoder: str, n: int, nb) -> dict[str, Any]:
        base = {"side": side, "utility": utility, "decoder": decoder, "n": n}
        if side == "mbrs" and not self.have_mbrs:
            return {**base, "status": "not run", "reason": "mbrs is not importable"}
        refusal = (our_refusal(utility, decoder, self.settings, self.models) if side == "ours"
                   else mbrs_refusal(utility, decoder, self.models))
        if refusal:
            return {**base, "status": "not defined", "reason": refusal}
        predicted = self.predict(side, utility, decoder, n, nb.n_sentences)
        if predicted is not None:
            return {**base, "status": "left out", **predicted}
        run = run_ours if side == "ours" else run_mbrs
        first = nb.select_sentences(np.arange(1))
        _, probe, _, _ = measure(lambda: run(first, utility, decoder, self.settings, self.models))
        estimate = probe * nb.n_sentences
        if estimate > self.budget(side, decoder):
            return {**base, "status": "left out", "probe_seconds_per_sentence": probe,
                    "reason": f"the first sentence took {probe:.1f} s: about {estimate:.0f} s for "
                              f"{nb.n_sentences}, over the cell budget of {self.budget(side, decoder):.0f} s"}
        kept: dict[str, np.ndarray] = {}
        if side == "ours":
            chosen, seconds, peak, increase = measure(lambda: run_ours(nb, utility, decoder, self.settings,
                                                                       self.models, kept))
        else:
            chosen, seconds, peak, increase = measure(lambda: run_mbrs(nb, utility, decoder, self.settings,
                                                                       self.models))
        if side == "ours" and decoder == "exact":
            self.save_exact(utility, n, kept["values"])
        return {**base, "status": "done", "seconds": seconds, "seconds_per_sentence": seconds / nb.n_sentences,
                "probe_seconds_per_sentence": probe, "peak_mb": peak, "peak_increase_mb": increase,
                "choices": [int(c) for c in chosen], "load": loadavg()}

    def baseline(self, n: int, nb) -> dict[str, Any]:
        chosen = choices_of(nb.column("nmt"), np.asarray(nb.offsets))
        return {"side": "ours", "utility": "-", "decoder": BASELINE, "n": n, "status": "done", "choices": chosen}

    def score(self, cell: dict[str, Any], n: int, nb) -> None:
        """Agreement and quality of a done cell (computed from its choices, so not cached)."""
        if cell["status"] != "done":
            return
        texts = [t[:n] for t in self.candidates.texts]
        cell.update(quality(cell["choices"], texts, self.refs))
        if cell["utility"] in UTILITIES:
            exact = self.exact_values(cell["utility"], n, nb)
            cell["agreement"] = None if exact is None else agreement(cell["choices"], exact, np.asarray(nb.offsets))


# ---- the report ------------------------------------------------------------------------------

def fmt(x: float | None, digits: int = 4) -> str:
    return "" if x is None else f"{x:.{digits}f}"


def memory(cell: dict[str, Any]) -> str:
    if cell.get("peak_mb") is None:
        return ""
    return f"{cell['peak_mb']:.0f} (+{cell['peak_increase_mb']:.0f})"


def side_columns(cell: dict[str, Any] | None) -> list[str]:
    """seconds/sentence, peak MB, agreement, BLEU, chrF; or the reason in the first column."""
    if cell is None:
        return ["", "", "", "", ""]
    if cell["status"] != "done":
        probe = cell.get("probe_seconds_per_sentence") or cell.get("predicted_seconds_per_sentence")
        text = cell["status"]
        return [f"{text}{f' (~{probe:.2f})' if probe is not None else ''}", "", "", "", ""]
    agree = cell.get("agreement")
    return [fmt(cell.get("seconds_per_sentence")), memory(cell), "" if agree is None else f"{agree:.0%}",
            f"{cell['bleu']:.2f}", f"{cell['chrf']:.2f}"]


def table(report: dict[str, Any]) -> list[str]:
    lines = ["| N | utility | decoder | ours s/sent | ours peak MB | ours agrees | ours BLEU | ours chrF | "
             "mbrs s/sent | mbrs peak MB | mbrs agrees | mbrs BLEU | mbrs chrF | mbrs / ours time |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    notes: dict[str, int] = {}
    for n in report["sizes"]:
        if str(n) not in report["cells"]:
            continue   # a report written before this N
        rows = report["cells"][str(n)]
        base = rows.get(BASELINE)
        if base:
            lines.append(f"| {n} | - | {BASELINE} | | | | {base['bleu']:.2f} | {base['chrf']:.2f} | | | | | | |")
        for utility in report["utilities"]:
            for decoder in report["decoders"]:
                ours = rows.get(f"ours.{utility}.{decoder}")
                theirs = rows.get(f"mbrs.{utility}.{decoder}")
                if ours is None and theirs is None:
                    continue
                if ours and ours["status"] == "not defined" and (theirs is None or theirs["status"] != "done"):
                    continue   # a decoder neither side defines for this utility: said once below the table
                ratio = ""
                if ours and theirs and ours["status"] == "done" and theirs["status"] == "done":
                    ratio = f"{theirs['seconds_per_sentence'] / ours['seconds_per_sentence']:.1f}x"
                elif ours and theirs and ours["status"] == "done" and (
                        guess := theirs.get("probe_seconds_per_sentence") or theirs.get("predicted_seconds_per_sentence")):
                    ratio = f"~{guess / ours['seconds_per_sentence']:.0f}x"
                mark = []
                for cell in (ours, theirs):
                    if cell and cell["status"] not in ("done", "not run"):
                        number = notes.setdefault(f"{cell['side']}: {cell['reason']}", len(notes) + 1)
                        mark.append(f"[{number}]")
                lines.append(f"| {n} | {utility} | {decoder}{' ' + ' '.join(mark) if mark else ''} | "
                             + " | ".join(side_columns(ours)) + " | " + " | ".join(side_columns(theirs))
                             + f" | {ratio} |")
    lines.append("")
    for text, number in notes.items():
        lines.append(f"[{number}] {text}  ")
    undefined = sorted({f"{c['decoder']} with {c['utility']}: {c['reason']}" for rows in report["cells"].values()
                        for c in rows.values() if c["side"] == "ours" and c["status"] == "not defined"})
    if undefined:
        lines += ["", "Not in the table (our code refuses them, in one line):"] + [f"- {u}" for u in undefined]
    return lines


def plot(report: dict[str, Any], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    decoders = [d for d in report["decoders"]
                if any(c["decoder"] == d and c["status"] == "done" for rows in report["cells"].values()
                       for c in rows.values())]
    from matplotlib.ticker import NullFormatter

    fig, axes = plt.subplots(2, len(decoders), figsize=(3.2 * len(decoders), 6.4), squeeze=False, sharex=True,
                             sharey="row")
    colours = dict(zip(report["utilities"], plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    for col, decoder in enumerate(decoders):
        for row, measure_ in enumerate(("bleu", "chrf")):
            ax = axes[row][col]
            for utility in report["utilities"]:
                for side, style, marker in (("ours", "-", "o"), ("mbrs", "--", "x")):
                    points = [(c["seconds_per_sentence"], c[measure_], n) for n in report["sizes"]
                              if (c := report["cells"].get(str(n), {}).get(f"{side}.{utility}.{decoder}"))
                              and c["status"] == "done"]
                    if not points:
                        continue
                    xs, ys, ns = zip(*points)
                    ax.plot(xs, ys, style, marker=marker, color=colours[utility],
                            label=f"{utility} ({side})", markersize=4)
                    if side == "ours":
                        for x, y, n in points:
                            ax.annotate(str(n), (x, y), fontsize=6, xytext=(2, 2), textcoords="offset points")
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.grid(True, which="major", alpha=0.3)
            ax.set_title(f"{decoder}: {'BLEU' if measure_ == 'bleu' else 'chrF'}", fontsize=9)
            ax.tick_params(labelsize=7)
            if row == 1:
                ax.set_xlabel("seconds per sentence", fontsize=8)
    handles, labels = [], []
    for ax in axes.flat:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fig.legend(handles, labels, loc="lower center", ncol=min(8, len(labels)), fontsize=7)
    fig.suptitle(f"MBR quality against time, N = {', '.join(map(str, report['sizes']))} "
                 f"({report['sentences']} sentences; labels: N)", fontsize=10)
    fig.tight_layout(rect=(0, 0.06, 1, 0.96))
    tmp = path + ".tmp.png"
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, path)


MADE = ("tool", "backend", "model", "search", "n", "temperature", "top_k", "top_p", "epsilon", "seed")
NOTES = "<!-- notes: what follows is kept when the benchmark rewrites this file -->"


def write_report(report: dict[str, Any], prefix: str, with_plot: bool, quiet: bool = False) -> None:
    """PREFIX.md (the header and the table, then whatever follows NOTES in the file already there),
    PREFIX.json and PREFIX.png."""
    made = report.get("candidates_config") or {}
    lines = [f"# MBR quality/time frontier ({report['sentences']} sentences, N = "
             f"{', '.join(map(str, report['sizes']))})", "",
             f"`{report['command']}`", "",
             f"Load average at the start {report['load_start']}, at the end {report['load_end']}; "
             f"{report['cpus']} CPUs; this run {report['wall_seconds']:.0f} s (cells taken from the cache cost nothing); mbrs "
             f"{'0.1.8 in a scratch folder' if report['mbrs'] else 'not importable'}; "
             f"candidates {report['candidates']} (order: {report['order']}), posterior {report['posterior']}"
             + (f"; made by `{' '.join(['rerank', *made['command'][1:]]) if made.get('command') else made.get('tool', '?')}` "
                f"({', '.join(f'{k} {made[k]}' for k in MADE if made.get(k) is not None)})" if made else "") + ".", ""]
    if with_plot:
        lines += [f"![quality against seconds per sentence]({os.path.basename(prefix)}.png)", ""]
    lines += table(report)
    kept = ""
    try:
        with open(prefix + ".md", encoding="utf-8") as f:
            old = f.read()
        if NOTES in old:
            kept = old[old.index(NOTES):]
    except OSError:
        pass
    text = "\n".join(lines) + "\n\n" + (kept or NOTES + "\n")
    with open(prefix + ".md.tmp", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(prefix + ".md.tmp", prefix + ".md")
    write_json(prefix + ".json", report)
    if with_plot:
        plot(report, prefix + ".png")
    if not quiet:
        print(text)


def candidates_config(path: str) -> dict[str, Any] | None:
    """The settings `rerank generate` wrote beside the list (PATH.config.json), if any."""
    for name in (path + ".config.json", os.path.splitext(path)[0] + ".config.json"):
        try:
            with open(name, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError):
            continue
        return data if isinstance(data, dict) else None
    return None


# ---- main ------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--candidates", help="n-best list, at least max(--sizes) candidates per sentence")
    parser.add_argument("--ref", default=os.path.join(DATA, "test_2016_flickr.de.gz"))
    parser.add_argument("--sentences", type=int, default=50, help="the first K lists (default 50)")
    parser.add_argument("--sizes", default="16,64,256,1024")
    parser.add_argument("--utilities", default="bleu,chrf,ter,mlmme")
    parser.add_argument("--decoders", default=",".join(DECODERS))
    parser.add_argument("--mlmme-model", default=MLMME_SHIPPED)
    parser.add_argument("--order", choices=("shuffle", "file"), default=None,
                        help="candidates' order (default: shuffle with a count column, else file)")
    parser.add_argument("--posterior", choices=("uniform", "nmt"), default="uniform")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--c2f-k", type=int, default=8)
    parser.add_argument("--sample-ratio", type=float, default=0.125)
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument("--centroids", type=int, default=8)
    parser.add_argument("--pruning-alpha", type=float, default=0.99)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cell-budget", type=float, default=600.0,
                        help="seconds a cell may take (estimated from its first sentence); longer cells are left out")
    parser.add_argument("--exact-budget", type=float, default=None,
                        help="our exact MBR's budget, the reference of the agreements (default: 3 x --cell-budget)")
    parser.add_argument("--time-limit", type=float, default=None,
                        help="seconds for this run: cells not started by then are 'not reached' (not cached)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (both sides)")
    parser.add_argument("--no-mbrs", action="store_true", help="ours alone")
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument("--tiny", action="store_true",
                        help="3 sentences of the shipped 50-best, N = 8,16, bleu/chrf/ter, ours alone (the test)")
    parser.add_argument("--out", required=True, help="run directory: cells/ (the cache), frontier.* by default")
    parser.add_argument("--report", default=None, help="PREFIX for PREFIX.md/.json/.png (default OUT/frontier)")
    args = parser.parse_args(argv)
    if args.tiny:
        args.candidates = args.candidates or os.path.join(DATA, "optimised.test_2016.50best.gz")
        args.sentences, args.sizes, args.utilities, args.no_mbrs = 3, "8,16", "bleu,chrf,ter", True
    args.exact_budget = args.exact_budget or 3 * args.cell_budget
    if not args.candidates:
        parser.error("--candidates is needed (or --tiny)")
    sizes = sorted(int(s) for s in args.sizes.split(","))
    utilities = [u for u in args.utilities.split(",") if u]
    decoders = [d for d in args.decoders.split(",") if d]
    for name, given, known in (("utility", utilities, UTILITIES), ("decoder", decoders, DECODERS)):
        unknown = [g for g in given if g not in known]
        if unknown:
            parser.error(f"unknown {name} {', '.join(unknown)} (known: {', '.join(known)})")
    load_start = loadavg()
    have_mbrs = False
    if not args.no_mbrs:
        try:
            mbrs_module("mbrs")
            have_mbrs = True
        except ImportError:
            print("mbrs is not importable: ours alone", file=sys.stderr)
    candidates, order = read_candidates(args.candidates, args.sentences, sizes[-1], args.order, args.seed)
    refs = read_references(args.ref, args.sentences)
    settings = Settings(args.temperature, args.posterior, args.c2f_k, args.sample_ratio, args.rank, args.centroids,
                        args.pruning_alpha, args.seed)
    models = Models(args.mlmme_model, args.threads)
    run = Run(args, candidates, refs, settings, models, have_mbrs)
    cells: dict[str, dict[str, dict[str, Any]]] = {}
    t0 = time.perf_counter()
    env = " ".join(f"{k}={os.environ[k]}" for k in ("OMP_NUM_THREADS", "RAYON_NUM_THREADS", "PYTHONPATH")
                   if k in os.environ)
    command = (f"{env} python {' '.join(sys.argv)}".strip() if argv is None
               else " ".join(["bench_mbr_frontier.py", *argv]))

    def make_report() -> dict[str, Any]:
        report = {"command": command,
                  "load_start": load_start, "load_end": loadavg(), "wall_seconds": round(time.perf_counter() - t0, 1),
                  "python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count(),
                  "threads": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "RAYON_NUM_THREADS")} | {"torch": args.threads},
                  "mbrs": have_mbrs, "candidates": args.candidates, "candidates_config": candidates_config(args.candidates),
                  "order": order, "posterior": args.posterior,
                  "sentences": args.sentences, "sizes": sizes, "utilities": utilities, "decoders": decoders,
                  "settings": vars(settings), "cell_budget": args.cell_budget, "exact_budget": args.exact_budget, "cells": cells}
        return report

    prefix = args.report or os.path.join(args.out, "frontier")
    for n in sizes:
        nb = candidates.lists(n)
        rows = cells[str(n)] = {}
        rows[BASELINE] = run.baseline(n, nb)
        run.score(rows[BASELINE], n, nb)
        for side in SIDES:   # ours first at each N: the agreements' reference before the rest
            for utility in utilities:
                for decoder in decoders:
                    late = args.time_limit is not None and time.perf_counter() - t0 > args.time_limit
                    rows[f"{side}.{utility}.{decoder}"] = (run.cell(side, utility, decoder, n, nb, compute=not late))
        for side in SIDES:
            for utility in utilities:
                for decoder in decoders:
                    run.score(rows[f"{side}.{utility}.{decoder}"], n, nb)
        write_report(make_report(), prefix, not args.no_plot, quiet=n != sizes[-1])


if __name__ == "__main__":
    main()
