"""rerank.recipes.experiment: tune systems on dev, rerank test, evaluate against the 1-best baseline."""

import json
from pathlib import Path

import numpy as np
import sacrebleu

from rerank.api import EvalOptions
from rerank.recipes.experiment import SystemSpec, first_best, mira, rerank, run_experiment
from rerank.formats import read_nbest, read_references

DATA = Path(__file__).parent / "data" / "joshua10"


def test_experiment_on_real_nbest(tmp_path):
    nbest = read_nbest(str(DATA / "nbest.joshua"))
    refs = read_references([str(DATA / f"ref.{k}") for k in range(4)])
    dev, test = nbest.select_sentences(range(0, 6)), nbest.select_sentences(range(6, 10))
    dev_refs = [r[:6] for r in refs]
    test_refs = [r[6:] for r in refs]
    systems = [SystemSpec("LM only", ["lm_0"]), SystemSpec("all", list(nbest.feature_names))]
    evaluation = EvalOptions(metrics=("bleu", "ter"), lang="en", second_baseline="LM only", ar=200, bootstrap=50,
                             seed=1, tokenize="none")
    result = run_experiment(dev, dev_refs, test, test_refs, systems, mira(runs=2, seed=1, epochs=5, tokenize="none"),
                            evaluation, out_dir=str(tmp_path), log=lambda _: None)
    # weights name only the tuned features
    assert set(result.weights["LM only"][0]) == {"lm_0"}
    assert set(result.weights["all"][1]) == set(nbest.feature_names)
    # the outputs are what the weights select, and BLEU in the table is sacrebleu's
    for name in ("LM only", "all"):
        for run, weights in enumerate(result.weights[name]):
            assert result.outputs[name][run] == rerank(test, weights)
    table = result.table
    runs = result.outputs["all"]
    expected = np.mean([sacrebleu.corpus_bleu(h, test_refs, tokenize="none").score for h in runs])
    assert abs(table.cells[("all", "bleu")].score - expected) < 1e-9
    baseline = sacrebleu.corpus_bleu(first_best(test), test_refs, tokenize="none").score
    assert abs(table.cells[("NMT 1-best", "bleu")].score - baseline) < 1e-9
    assert result.oracle_bleu >= max(baseline, expected)
    # everything is written
    for name in ("results.md", "results.tex", "results.csv", "results.json", "deltas.png",
                 "all.weights.run1.json", "LM_only.test.run2.txt", "oracle.test.txt", "tuning.json"):
        assert (tmp_path / name).exists(), name
    saved = json.loads((tmp_path / "all.weights.run1.json").read_text())
    assert saved["weights"] == result.weights["all"][0]
