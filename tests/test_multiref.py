"""Several references in every metric and every command that scores, on the real 4-reference Joshua
bn-en list (100 sentences): BLEU, chrF, chrF++ and TER equal the sacrebleu CLI given the four
references; METEOR keeps the best reference of each segment as Meteor 1.5 does (and equals the jar);
eval, report, tune, oracle and apply --ref score against all four."""

import functools
import json
import logging
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from sacrebleu.metrics import BLEU

from rerank.cli import main
from rerank.formats import read_nbest
from rerank.metrics import make_metric
from rerank.metrics.meteor import MeteorMetric, meteor_score
from rerank.metrics.meteor.jar import MeteorJar, java_available
from rerank.metrics.meteor.resources import default_jar

JOSHUA = os.path.join(os.path.dirname(__file__), "data", "joshua-bn-en", "full")
NBEST = os.path.join(JOSHUA, "output.gold")
REF_FILES = [os.path.join(JOSHUA, f"reference.en.{k}") for k in range(4)]
REF_ARGS = [x for path in REF_FILES for x in ("-r", path)]
WEIGHTS = os.path.join(os.path.dirname(__file__), "data", "report", "joshua.weights.json")
EN = ("exact", "stem", "synonym")  # no paraphrase table: the full English one takes a minute to index


def read(path):
    with open(path, encoding="utf-8") as fh:
        return fh.read().splitlines()


REFS = [read(p) for p in REF_FILES]


@functools.lru_cache(maxsize=None)
def sacrebleu_cli(hyp_path, metrics=("bleu", "chrf"), *extra):
    """{metric: score} of the sacrebleu CLI with the four references (each call made once per test run)."""
    exe = os.path.join(os.path.dirname(sys.executable), "sacrebleu")
    out = subprocess.run([exe, *REF_FILES, "-i", hyp_path, "-m", *metrics, "-w", "6", "-f", "json",
                          *extra], check=True, capture_output=True, text=True).stdout
    found = json.loads(out)
    return {d["name"]: d["score"] for d in (found if isinstance(found, list) else [found])}


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """The first hypotheses of the lists and the 1-best under the test weights, as files."""
    d = tmp_path_factory.mktemp("multiref")
    nbest = read_nbest(NBEST)
    (d / "first.txt").write_text("".join(nbest.hyps[int(i)] + "\n" for i in nbest.offsets[:-1]), encoding="utf-8")
    assert main(["apply", NBEST, "-w", WEIGHTS, "-o", str(d / "best.txt"), "--quiet"]) == 0
    return d


@pytest.mark.parametrize("lowercase", [False, True])
def test_sacrebleu_metrics_equal_the_cli_with_four_references(outputs, lowercase):
    for hyp in ("first.txt", "best.txt"):
        hyps = read(outputs / hyp)
        lc = ("-lc",) if lowercase else ()
        cli = {**sacrebleu_cli(str(outputs / hyp), ("bleu", "chrf"), *lc),
               **sacrebleu_cli(str(outputs / hyp), ("chrf",), "--chrf-word-order", "2", *lc)}
        if not lowercase:  # TER ignores -lc (case-insensitive unless asked)
            cli.update(sacrebleu_cli(str(outputs / hyp), ("ter",)))
        for name, key in (("bleu", "BLEU"), ("chrf", "chrF2"), ("chrf++", "chrF2++"), ("ter", "TER")):
            if key not in cli:
                continue
            metric = make_metric(name, lowercase=lowercase)
            stats = metric.sentence_stats(hyps, REFS)
            assert metric.score_from_stats(stats.sum(0)) == pytest.approx(cli[key], abs=5e-7), (hyp, name)
            assert "nrefs:4" in metric.signature()


def test_meteor_keeps_the_best_reference_of_each_segment(outputs):
    hyps = read(outputs / "best.txt")
    metric = MeteorMetric("en", EN)
    multi = metric.sentence_stats(hyps, REFS)
    single = np.stack([metric.sentence_stats(hyps, [stream]) for stream in REFS])  # (4, n, 23)
    scores = meteor_score(single, metric.params, metric.weights)  # perfect segments: same score either way
    best = scores.argmax(axis=0)  # the first of equal scores, as the jar (strictly greater replaces)
    np.testing.assert_array_equal(multi, single[best, np.arange(len(hyps))])
    assert (best > 0).sum() > 30  # the other references matter on this data
    assert metric.corpus_score(hyps, REFS) > max(metric.corpus_score(hyps, [s]) for s in REFS)


@pytest.mark.skipif(not java_available() or default_jar() is None, reason="no Java or no Meteor jar")
def test_meteor_with_four_references_equals_the_jar(outputs):
    hyps = read(outputs / "best.txt")[:40]
    refs = [stream[:40] for stream in REFS]
    native = MeteorMetric("en", EN).sentence_stats(hyps, refs)
    jar = MeteorJar(default_jar(), "en", EN)
    try:
        from rerank.metrics.meteor import summable

        np.testing.assert_array_equal(native, summable(jar.stats(hyps, refs)))
    finally:
        jar.close()


def test_eval_and_report_score_against_all_references(outputs, capsys, tmp_path):
    args = [*REF_ARGS, "-b", "first=" + str(outputs / "first.txt"), "best=" + str(outputs / "best.txt"),
            "--ar", "200", "--bootstrap", "50", "--quiet"]
    assert main(["eval", *args, "--metrics", "bleu,chrf", "--to", "json"]) == 0  # TER: checked above
    res = json.loads(capsys.readouterr().out)
    cells = {(r["system"], r["metric"]): r["score"] for r in res["results"]}
    for name in ("first", "best"):
        cli = sacrebleu_cli(str(outputs / f"{name}.txt"))
        assert cells[(name, "bleu")] == pytest.approx(cli["BLEU"], abs=5e-7)
        assert cells[(name, "chrf")] == pytest.approx(cli["chrF2"], abs=5e-7)
    assert res["config"]["references"] == REF_FILES and "nrefs:4" in res["signatures"]["chrf"]
    page = tmp_path / "r.html"
    assert main(["report", *args, "--metrics", "bleu,chrf", "-o", str(page)]) == 0
    text = page.read_text(encoding="utf-8")
    assert "4 reference(s)" in text and "reference 4</span>" in text and "nrefs:4" in text


def test_oracle_and_tune_with_four_references(outputs, capsys, tmp_path):
    oracle_out = tmp_path / "oracle.txt"
    assert main(["oracle", NBEST, *REF_ARGS, "-o", str(oracle_out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    oracle_bleu = float(re.search(r"oracle BLEU\s+= ([\d.]+)", printed).group(1))
    assert oracle_bleu == pytest.approx(sacrebleu_cli(str(oracle_out))["BLEU"], abs=0.006)
    assert "nrefs:4" in printed
    # each pick is the sentence-BLEU+1 best against all four references (sacrebleu's add-1 smoothing)
    logging.getLogger("sacrebleu").setLevel(logging.ERROR)
    bleu1 = BLEU(smooth_method="add-k", smooth_value=1, effective_order=False)
    nbest, picks = read_nbest(NBEST), read(oracle_out)
    for i in range(0, nbest.n_sentences, 9):
        refs_i = [s[i] for s in REFS]
        best = max(bleu1.sentence_score(nbest.hyps[j], refs_i).score for j in range(nbest.offsets[i], nbest.offsets[i + 1]))
        assert bleu1.sentence_score(picks[i], refs_i).score == pytest.approx(best)
    weights = tmp_path / "w.json"
    assert main(["tune", NBEST, *REF_ARGS, "-o", str(weights), "--epochs", "3", "--quiet"]) == 0
    tuned = float(re.search(r"tuned ([\d.]+)", capsys.readouterr().out).group(1))
    meta = json.loads(weights.read_text())["meta"]
    assert "nrefs:4" in meta["signature"] and len(meta["references"]) == 4
    assert main(["apply", NBEST, "-w", str(weights), "-o", str(tmp_path / "t.txt"), "--quiet"]) == 0
    assert tuned == pytest.approx(sacrebleu_cli(str(tmp_path / "t.txt"))["BLEU"], abs=0.006)


def test_apply_ref_prints_the_scores_of_the_one_best(outputs, capsys, tmp_path):
    out = tmp_path / "best.txt"
    assert main(["apply", NBEST, "-w", WEIGHTS, "-o", str(out), *REF_ARGS, "--metrics", "bleu,chrf",
                 "--quiet"]) == 0
    printed = capsys.readouterr().out
    got = {m.group(1): (float(m.group(2)), float(m.group(3)))
           for m in re.finditer(r"^(\S+) = ([\d.]+)  \(first hypotheses: ([\d.]+)\)", printed, re.M)}
    assert read(out) == read(outputs / "best.txt")
    best, first = sacrebleu_cli(str(outputs / "best.txt")), sacrebleu_cli(str(outputs / "first.txt"))
    for name, key in (("BLEU", "BLEU"), ("chrF", "chrF2")):
        assert got[name] == (pytest.approx(best[key], abs=0.006), pytest.approx(first[key], abs=0.006))
    assert printed.count("nrefs:4") == 2


def test_apply_ref_bad_input_writes_nothing(capsys, tmp_path):
    out = tmp_path / "o.txt"
    short = tmp_path / "short.ref"
    short.write_text("one line\n")
    assert main(["apply", NBEST, "-w", WEIGHTS, "-o", str(out), "-r", str(short)]) == 2
    assert f"rerank apply: error: {short}: 1 reference lines for 100 n-best sentences in {NBEST}" in capsys.readouterr().err
    assert main(["apply", NBEST, "-w", WEIGHTS, "-o", str(out), "-r", REF_FILES[0], "--metrics", "rouge"]) == 2
    assert "--metrics: unknown metric(s) rouge" in capsys.readouterr().err
    assert not out.exists()
