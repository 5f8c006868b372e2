"""`rerank tune`: outputs, runs, config, plot, apply round trip, and bad input."""

import json

import pytest
import sacrebleu
from PIL import Image

from rerank.formats import read_nbest
from tests.mira_helpers import NBEST, REFS, one_best
from tests.cli_helpers import run, write

REF_ARGS = [x for r in REFS for x in ("-r", r)]


def test_tune_mira_runs_config_plot_and_apply(tmp_path, capsys):
    out = tmp_path / "w.json"
    code, stdout, err = run(["tune", "--nbest", NBEST, *REF_ARGS, "--sentences", "0-49", "--runs", "2", "--epochs", "10",
                             "--tokenize", "none", "-o", out, "-v", "--plot", tmp_path / "curve.png", "--quiet"], capsys)
    assert code == 0, err
    assert "run 1: BLEU initial 25.42 -> tuned" in stdout and "run 2:" in stdout
    assert "epoch 10: BLEU" in err
    runs = [json.loads((tmp_path / f"w.run{r}.json").read_text()) for r in (1, 2)]
    best = json.loads(out.read_text())
    assert [r["meta"]["seed"] for r in runs] == [1, 2]
    assert best["meta"]["tuned_scores"] == [r["meta"]["tuned_score"] for r in runs]
    meta = runs[0]["meta"]
    assert meta["tuner"] == "mira" and meta["options"]["C"] == 0.01 and len(meta["curve"]) == 10
    assert meta["tuned_score"] == max(score for _, score in meta["curve"])
    assert Image.open(tmp_path / "curve.png").size == (1200, 450)   # 12 x 4.5 inches at 100 dpi
    # the tuned score is sacrebleu's BLEU of the 1-best `rerank apply` writes with these weights
    head = tmp_path / "head.nbest"
    head.write_text("".join(line for line in open(NBEST, encoding="utf-8") if int(line.split(" ", 1)[0]) < 50))
    assert run(["apply", head, "-w", tmp_path / "w.run1.json", "-o", tmp_path / "1best"], capsys)[0] == 0
    hyps = (tmp_path / "1best").read_text().splitlines()
    refs = [open(r, encoding="utf-8").read().splitlines()[:50] for r in REFS]
    assert sacrebleu.corpus_bleu(hyps, refs, tokenize="none").score == pytest.approx(meta["tuned_score"], abs=1e-9)


def _first_lines(n):
    """The first n sentences of the Joshua list (as read by rerank.formats) and references."""
    nbest = read_nbest(NBEST).select_sentences(list(range(n)))
    return nbest, [open(r, encoding="utf-8").read().splitlines()[:n] for r in REFS]


@pytest.mark.parametrize("tuner,extra", [("mert", ["--restarts", "2", "--random-directions", "2"]),
                                         pytest.param("pro", [], marks=pytest.mark.neural)])
def test_other_tuners_from_the_cli(tmp_path, capsys, tuner, extra):
    out = tmp_path / "w.json"
    code, stdout, err = run(["tune", "--nbest", NBEST, *REF_ARGS, "--sentences", "0-49", "--tuner", tuner, *extra,
                             "--tokenize", "none", "-o", out, "--quiet", "--normalize", "l1"], capsys)
    assert code == 0, err
    data = json.loads(out.read_text())
    nbest, refs = _first_lines(50)
    first = [nbest.hyps[int(a)] for a in nbest.offsets[:-1]]
    assert data["meta"]["initial_score"] == pytest.approx(sacrebleu.corpus_bleu(first, refs, tokenize="none").score)
    tuned = one_best(nbest, [data["weights"][n] for n in nbest.feature_names])
    assert data["meta"]["tuned_score"] == pytest.approx(sacrebleu.corpus_bleu(tuned, refs, tokenize="none").score)
    assert data["meta"]["tuned_score"] > data["meta"]["initial_score"]
    assert sum(abs(v) for v in data["weights"].values()) == pytest.approx(1.0)


def test_init_and_fixed_features(tmp_path, capsys):
    init = write(tmp_path, "init.json", json.dumps({"lm_0": 0.5, "WordPenalty": -1.0}))
    out = tmp_path / "w.json"
    code, _, err = run(["tune", "--nbest", NBEST, *REF_ARGS, "--init", init, "--fix", "lm_0,WordPenalty",
                        "--epochs", "3", "-o", out, "--quiet"], capsys)
    assert code == 0, err
    data = json.loads(out.read_text())
    assert data["weights"]["lm_0"] == 0.5 and data["weights"]["WordPenalty"] == -1.0
    assert data["meta"]["fixed_features"] == ["lm_0", "WordPenalty"]
    code, _, err = run(["tune", "--nbest", NBEST, *REF_ARGS, "--tune", "lm_0", "--epochs", "3", "-o", out, "--quiet"], capsys)
    assert code == 0, err
    weights = json.loads(out.read_text())["weights"]
    assert weights["lm_0"] != 0 and all(v == 0 for k, v in weights.items() if k != "lm_0")


def test_mert_with_ter(tmp_path, capsys):
    out = tmp_path / "w.json"
    code, stdout, err = run(["tune", "--nbest", NBEST, *REF_ARGS, "--sentences", "0-9", "--tuner", "mert", "--metric", "ter",
                             "--restarts", "2", "--random-directions", "2", "-o", out, "--quiet"], capsys)
    assert code == 0, err
    meta = json.loads(out.read_text())["meta"]
    nbest, refs = _first_lines(10)
    ter = sacrebleu.metrics.TER()    # case-insensitive, as the sacrebleu CLI and rerank's TER
    assert meta["initial_score"] == pytest.approx(ter.corpus_score([nbest.hyps[int(a)] for a in nbest.offsets[:-1]],
                                                                   refs).score)
    weights = json.loads(out.read_text())["weights"]
    tuned = one_best(nbest, [weights[n] for n in nbest.feature_names])
    assert meta["tuned_score"] == pytest.approx(ter.corpus_score(tuned, refs).score)
    assert meta["tuned_score"] < meta["initial_score"]        # TER: lower is better
    assert f"TER initial {meta['initial_score']:.2f}" in stdout


# --- bad input: a clear message and exit status 2 -------------------------------------------------

TWO = "0 ||| a b ||| f=1 g=2 ||| 0\n0 ||| a c ||| f=2 g=0 ||| 0\n1 ||| d ||| f=0 g=1 ||| 0\n1 ||| e ||| f=1 g=1 ||| 0\n"


@pytest.mark.parametrize("nbest,refs,extra,message", [
    (TWO, ["a b\nd\n"], ["--init", "UNKNOWN"], "weights for features the n-best lacks: h"),
    (TWO, ["a b\nd\nx\n"], [], "3 reference lines for 2 n-best sentences"),
    (TWO, ["a b\nd\n", "a b\n"], [], "1 lines but"),
    ("0 ||| a b ||| f=1 g=2 ||| 0\n1 ||| d ||| f=0 g=1 ||| 0\n", ["a b\nd\n"], [], "single (distinct) hypothesis"),
    ("0 ||| a b ||| f=1 g=2 ||| 0\n0 ||| a b ||| f=1 g=2 ||| 0\n", ["a b\n"], [], "single (distinct) hypothesis"),
    ("0 ||| a b ||| f=1 g=2 ||| 0\n0 ||| a c ||| f=1 g=2 ||| 0\n1 ||| d ||| f=3 g=1 ||| 0\n1 ||| e ||| f=3 g=1 ||| 0\n",
     ["a b\nd\n"], [], "all tuned features are equal"),
    (TWO, ["a b\nd\n"], ["--fix", "f,g"], "every feature is fixed"),
    (TWO, ["a b\nd\n"], ["--tune", "zz"], "features to tune: unknown features zz"),
    (TWO, ["a b\nd\n"], ["--tokenize", "xx"], "unknown BLEU tokenizer 'xx'"),
    (TWO, ["a b\nd\n"], ["--sentences", "1-5"], "out of range"),
    (TWO, ["a b\nd\n"], ["--fix", "f", "--normalize", "l1"], "would rescale fixed features"),
])
def test_bad_input(tmp_path, capsys, nbest, refs, extra, message):
    path = write(tmp_path, "in.nbest", nbest)
    ref_args = []
    for k, text in enumerate(refs):
        ref_args += ["-r", write(tmp_path, f"ref{k}", text)]
    extra = [write(tmp_path, "init.json", json.dumps({"h": 1.0})) if x == "UNKNOWN" else x for x in extra]
    code, _, err = run(["tune", "--nbest", path, *ref_args, *extra, "-o", tmp_path / "w.json", "--quiet"], capsys)
    assert code == 2
    assert err.startswith("rerank tune: error:") and message in err
    assert not (tmp_path / "w.json").exists()


def test_tuning_works_when_some_lists_have_one_hypothesis(tmp_path, capsys):
    text = ("0 ||| the cat sat on the mat ||| f=1 g=2 ||| 0\n0 ||| the dog sat on a rug ||| f=2 g=0 ||| 0\n"
            "1 ||| a quick brown fox jumps ||| f=0 g=1 ||| 0\n1 ||| the quick brown fox jumps ||| f=1 g=1 ||| 0\n"
            "2 ||| one two three four ||| f=0 g=0 ||| 0\n")
    path = write(tmp_path, "in.nbest", text)
    ref = write(tmp_path, "ref", "the cat sat on the mat\nthe quick brown fox jumps\none two three four\n")
    code, stdout, err = run(["tune", "--nbest", path, "-r", ref, "-o", tmp_path / "w.json", "--quiet"], capsys)
    assert code == 0, err
    w = json.loads((tmp_path / "w.json").read_text())["weights"]
    # both two-hypothesis lists are right only with f > 0 and g > f / 2
    assert w["f"] > 0 and w["g"] > w["f"] / 2
    assert "-> tuned 100.00" in stdout
