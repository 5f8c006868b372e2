"""One reranking experiment: tune each system's feature set on a dev n-best list with k-best
MIRA (R runs), rerank the test list, and score every system against the baseline, through the
Python API (`rerank.tune` with a TuneSettings, `rerank.evaluate` with an EvalOptions).

Used by `rerank demo` and the Multi30k recipe. A system is a named set of features to tune;
the baseline is the decoder's own 1-best (the first hypothesis of every list).
"""

from __future__ import annotations

import logging
import json
import os
import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from rerank.api import EvalOptions, TuneEvents, TuneSettings
from rerank.io import atomic_write
from rerank.nbest import NBestList
from rerank.oracles import oracle
from rerank.progress import Progress
from rerank.weights import best_rows, weight_vector, write_weights

if TYPE_CHECKING:
    from rerank.evaluation import ResultTable

logger = logging.getLogger(__name__)


@dataclass
class SystemSpec:
    name: str
    features: list[str]


@dataclass
class ExperimentResult:
    table: ResultTable
    weights: dict[str, list[dict[str, float]]]
    dev_scores: dict[str, list[float]]
    oracle_bleu: float
    outputs: dict[str, list[list[str]]] = field(default_factory=dict)


def mira(runs: int = 3, seed: int = 1, epochs: int = 60, tokenize: str = "13a") -> TuneSettings:
    """How an experiment tunes each system: `runs` k-best MIRA runs (seeds seed..seed+runs-1) of
    `epochs` epochs toward BLEU with sacrebleu's tokeniser `tokenize`."""
    return TuneSettings(tuner="mira", runs=runs, seed=seed, tokenize=tokenize, tuner_options={"epochs": epochs})


def tune_system(dev: NBestList, dev_refs, features: list[str], settings: TuneSettings,
                progress: Progress = False) -> tuple[list[dict[str, float]], list[float]]:
    """The runs of `settings` (rerank.tune) over `features`, other columns at weight 0: each run's
    weights of `features` and its tuning score."""
    from rerank.api import tune

    result = tune(dev, dev_refs, replace(settings, tune_features=tuple(features)), source="dev n-best",
                  events=TuneEvents(progress=progress, verbose=lambda _: None))
    weights = [{n: float(v) for n, v in run.weights.items() if n in features} for run in result.runs]
    return weights, [float(run.score) for run in result.runs]


def leading_references(path: str, n: int) -> list[list[str]]:
    """The first n lines of a reference file (a run on the first n lists of a split, e.g. with
    --sentences), an InputError naming the file when it has fewer."""
    from rerank.errors import InputError
    from rerank.formats import read_references

    refs = read_references([path])
    if len(refs[0]) < n:
        raise InputError(f"{len(refs[0])} reference lines for {n} n-best sentences", path)
    return [stream[:n] for stream in refs]


def first_best(nbest: NBestList) -> list[str]:
    return [nbest.hyps[int(i)] for i in nbest.offsets[:-1]]


def rerank(nbest: NBestList, weights: dict[str, float]) -> list[str]:
    w = weight_vector(weights, nbest.feature_names, warn=lambda _: None)
    return [nbest.hyps[int(r)] for r in best_rows(nbest, w)]


def oracle_bleu(nbest: NBestList, refs, tokenize: str) -> tuple[float, list[str]]:
    """The oracle BLEU of the lists and its picks (rerank.oracles.oracle: sentence-BLEU+1 picks)."""
    found = oracle(nbest, refs, tokenize=tokenize)
    return found.score, found.hypotheses


def run_experiment(dev: NBestList, dev_refs, test: NBestList, test_refs, systems: list[SystemSpec],
                   tuning: TuneSettings | None = None, evaluation: EvalOptions | None = None, *,
                   out_dir: str | None = None, log=None) -> ExperimentResult:
    """Tune each system as `tuning` says (default: `mira()`), rerank the test lists, evaluate the
    systems against the test lists' first hypotheses ("NMT 1-best") as `evaluation` says (default:
    EvalOptions()). Writes weights, outputs and tables under `out_dir` when given. `log`: called
    with each line of progress (default: INFO records of this module's logger)."""
    from rerank.api import evaluate

    log = log or logger.info
    tuning = tuning or mira()
    evaluation = evaluation or EvalOptions()
    how = "k-best MIRA" if tuning.tuner == "mira" else tuning.tuner
    all_weights, dev_scores, outputs = {}, {}, {}
    for spec in systems:
        missing = [f for f in spec.features if f not in dev.feature_names or f not in test.feature_names]
        if missing:
            raise ValueError(f"system {spec.name!r}: features {missing} are not in both n-best lists")
        log(f"tuning {spec.name} ({', '.join(spec.features)}): {tuning.runs} {how} runs")
        weights, scores = tune_system(dev, dev_refs, spec.features, tuning)
        all_weights[spec.name], dev_scores[spec.name] = weights, scores
        outputs[spec.name] = [rerank(test, w) for w in weights]
        log(f"  dev BLEU per run: {', '.join(f'{s:.2f}' for s in scores)}")
    baseline = first_best(test)
    oracle, oracle_hyps = oracle_bleu(test, test_refs, tuning.tokenize)
    names = [m if isinstance(m, str) else m.name for m in evaluation.metrics]
    log(f"evaluating {len(systems) + 1} systems x {tuning.runs} runs: {', '.join(names)}")
    table = evaluate(test_refs, ("NMT 1-best", baseline), outputs, evaluation).table
    result = ExperimentResult(table, all_weights, dev_scores, oracle, outputs)
    if out_dir:
        save_experiment(result, out_dir, baseline, oracle_hyps)
    return result


def save_experiment(result: ExperimentResult, out_dir: str, baseline: list[str], oracle_hyps: list[str]) -> None:
    os.makedirs(out_dir, exist_ok=True)
    for name, weights in result.weights.items():
        slug = re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_")
        for r, (w, score) in enumerate(zip(weights, result.dev_scores[name]), start=1):
            write_weights(os.path.join(out_dir, f"{slug}.weights.run{r}.json"), w, {"system": name, "run": r, "dev_bleu": score})
            with atomic_write(os.path.join(out_dir, f"{slug}.test.run{r}.txt")) as out:
                out.writelines(h + "\n" for h in result.outputs[name][r - 1])
    for name, lines in (("baseline.test.txt", baseline), ("oracle.test.txt", oracle_hyps)):
        with atomic_write(os.path.join(out_dir, name)) as out:
            out.writelines(h + "\n" for h in lines)
    table = result.table
    for ext, fmt in (("md", "markdown"), ("tex", "latex"), ("csv", "csv"), ("json", "json")):
        with atomic_write(os.path.join(out_dir, f"results.{ext}")) as out:
            out.write(table.render(fmt))
    from rerank.evaluation import plot_deltas

    plot_deltas(table, os.path.join(out_dir, "deltas.png"))
    with atomic_write(os.path.join(out_dir, "tuning.json")) as out:
        json.dump({"dev_bleu": result.dev_scores, "oracle_test_bleu": result.oracle_bleu}, out, indent=2)

