"""Reference-based COMET computed here (rerank.metrics.comet): the `comet_ref` feature and the
`comet` metric of `rerank eval`/`report` on tiny random-weight checkpoints of every
reference-based class unbabel-comet loads (COMET-22-style regression, unified with ref, XCOMET,
COMET-rank), built from configs (rerank.recipes.tiny_models), loaded offline.

Parity: the column and the metric's segment scores equal COMET's own `predict` on the same inputs.
Invariance: the tests of the metric equal those of the same scores read as segment scores; each
distinct (source, hypothesis, reference) is scored once across systems and runs; the feature and
the metric share one cache. Refusals: a reference-free checkpoint, a checkpoint that pickles a
callable, a missing encoder, each one line. unbabel-comet needs transformers 4: `make
test-compat` runs this file in .venv-compat (tests/conftest.py names it elsewhere)."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
import torch

from rerank import api
from rerank.cli import main
from rerank.errors import InputError
from rerank.evaluation import evaluate_systems
from rerank.io import read_lines
from rerank.metrics import comet
from rerank.metrics.external import SegmentScoresMetric
from rerank.nbest import NBestList
from rerank.recipes import tiny_models

pytestmark = pytest.mark.neural

os.environ.setdefault("HF_HUB_OFFLINE", "1")
EVAL = os.path.join(os.path.dirname(__file__), "data", "eval")
N = 12
REF = read_lines(os.path.join(EVAL, "ref.en"))[:N]
SRC = read_lines(os.path.join(EVAL, "ref.de"))[:N]
CAP1 = read_lines(os.path.join(EVAL, "cap1.en"))[:N]
CAP2 = read_lines(os.path.join(EVAL, "cap2.en"))[:N]
REFERENCE_BASED = ("regression", "unified", "xcomet", "ranking")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("comet")
    lines = tiny_models.read_text(tiny_models.DEFAULT_TEXT)
    return {kind: tiny_models.build_comet(str(root / kind), lines, seed=1, kind=kind)
            for kind in (*REFERENCE_BASED, "kiwi")}


def own_scores(path: str, rows: list[dict]) -> np.ndarray:
    """COMET's own predict, as `comet-score` runs it (its length batching)."""
    from comet import load_from_checkpoint

    model = load_from_checkpoint(comet.checkpoint_file(path), local_files_only=True)
    segments = comet.model_kind(path)[1]
    data = [{k: row[k] for k in segments} for row in rows]
    return np.asarray(model.predict(data, batch_size=4, gpus=0, progress_bar=False, accelerator="cpu").scores)


@pytest.fixture(scope="module")
def nbest():
    hyps = [[CAP1[i], CAP2[i], CAP1[i]] if i % 2 else [CAP2[i], CAP1[i]] for i in range(N)]
    return NBestList.from_lists(hyps, [np.zeros(len(h)) for h in hyps], ["nmt"])


@pytest.mark.parametrize("kind", REFERENCE_BASED)
def test_the_column_and_the_metric_are_comets_own_scores(models, nbest, kind):
    path = models[kind]
    column = api.add_features(nbest, "comet_ref", sources=SRC, references=[REF], comet_ref_model=path,
                              comet_ref_batch_size=3).column("comet_ref")
    rows = [{"src": SRC[i], "mt": h, "ref": REF[i]} for i, h in zip(nbest.sentence_of_hyp, nbest.hyps)]
    np.testing.assert_allclose(column, own_scores(path, rows), atol=1e-5)
    metric = comet.COMETMetric(path, SRC, batch_size=5)
    stats = metric.sentence_stats(CAP1, [REF])
    expected = own_scores(path, [{"src": s, "mt": h, "ref": r} for s, h, r in zip(SRC, CAP1, REF)])
    np.testing.assert_allclose(stats[:, 0], expected, atol=1e-5)
    assert np.all(stats[:, 1] == 1)
    assert metric.corpus_score(CAP1, [REF]) == pytest.approx(expected.mean(), abs=1e-6)
    assert metric.signature().startswith(f"comet|model:{kind}|sha256:")


def test_several_references_average_per_sentence(models, nbest):
    path, other = models["regression"], CAP2
    metric = comet.COMETMetric(path, SRC)
    both = metric.sentence_stats(CAP1, [REF, other])[:, 0]
    one = [metric.sentence_stats(CAP1, [r])[:, 0] for r in (REF, other)]
    np.testing.assert_allclose(both, (one[0] + one[1]) / 2, atol=1e-6)   # other batches: float noise
    column = api.add_features(nbest, "comet_ref", sources=SRC, references=[REF, other],
                              comet_ref_model=path).column("comet_ref")
    singles = [api.add_features(nbest, "comet_ref", sources=SRC, references=[r], comet_ref_model=path).column("comet_ref")
               for r in (REF, other)]
    np.testing.assert_allclose(column, (singles[0] + singles[1]) / 2, atol=1e-6)


def test_the_tests_equal_those_of_the_same_scores_as_segment_scores(models):
    path = models["regression"]
    systems = {"a": [CAP2], "b": [CAP1, CAP2, CAP1]}
    model = comet.COMETMetric(path, SRC)
    table = evaluate_systems([REF], [CAP1], systems, metrics=[model], ar=500, bootstrap=200)
    score = {h: s for h, s in zip(CAP1 + CAP2, np.concatenate([model.sentence_stats(c, [REF])[:, 0]
                                                                  for c in (CAP1, CAP2)]))}
    columns = {"baseline": [score[h] for h in CAP1], "a": [score[h] for h in CAP2],
               **{f"b.run{r + 1}": [score[h] for h in hyps] for r, hyps in enumerate(systems["b"])}}
    same = evaluate_systems([REF], [CAP1], systems, metrics=[SegmentScoresMetric("comet", columns)], ar=500,
                            bootstrap=200)
    for key, cell in table.cells.items():
        other = same.cells[key]
        assert (cell.score, cell.p, cell.s_sel, cell.s_opt) == pytest.approx((other.score, other.p, other.s_sel,
                                                                              other.s_opt), abs=1e-12)


def test_each_distinct_triple_is_scored_once_across_systems_and_runs(models, monkeypatch):
    calls = []
    original = comet.predict_scores
    monkeypatch.setattr(comet, "predict_scores", lambda model, rows, *a: calls.append(len(rows)) or original(model, rows, *a))
    table = api.evaluate([REF], CAP1, {"a": [CAP2, CAP1], "b": CAP2}, metrics=["bleu", "comet"],
                         comet_model=models["regression"], sources=SRC, ar=100, bootstrap=0)
    assert calls == [len(set(zip(SRC, CAP1)) | set(zip(SRC, CAP2)))]
    assert table.table.config["comet"]["model"] == models["regression"]


def test_feature_and_metric_share_the_cache(models, nbest, tmp_path, monkeypatch, capsys):
    cache = str(tmp_path / "scores.sqlite")
    path = models["xcomet"]
    column = api.add_features(nbest, "comet_ref", sources=SRC, references=[REF], comet_ref_model=path,
                              cache=cache).column("comet_ref")
    monkeypatch.setattr(comet, "load_comet", lambda *a: pytest.fail("the model was loaded"))
    again = api.add_features(nbest, "comet_ref", sources=SRC, references=[REF], comet_ref_model=path,
                             cache=cache).column("comet_ref")
    assert np.array_equal(column, again)
    # every hypothesis of the eval systems is in the list: eval reads the cache alone
    (tmp_path / "ref").write_text("\n".join(REF) + "\n")
    (tmp_path / "src").write_text("\n".join(SRC) + "\n")
    (tmp_path / "a").write_text("\n".join(CAP1) + "\n")
    (tmp_path / "b").write_text("\n".join(CAP2) + "\n")
    code = main(["eval", "-r", str(tmp_path / "ref"), "-b", str(tmp_path / "a"), str(tmp_path / "b"), "--metrics",
                 "bleu,comet", "--comet-model", path, "--src", str(tmp_path / "src"), "--score-cache", cache,
                 "--ar", "100", "--bootstrap", "0", "--to", "json", "--quiet"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["metrics"] == ["bleu", "comet"]
    cell = {(r["system"], r["metric"]): r["score"] for r in out["results"]}
    first = {h: v for h, v in zip(nbest.hyps, column)}
    assert cell[("a", "comet")] == pytest.approx(np.mean([first[h] for h in CAP1]), abs=1e-12)
    assert cell[("b", "comet")] == pytest.approx(np.mean([first[h] for h in CAP2]), abs=1e-12)
    assert out["signatures"]["comet"].startswith("comet|model:xcomet|")
    own = own_scores(path, [{"src": s, "mt": h, "ref": r} for s, h, r in zip(SRC, CAP2, REF)])
    assert cell[("b", "comet")] == pytest.approx(own.mean(), abs=1e-6)   # eval's number is COMET's own


def test_report_shows_comet(models, tmp_path):
    for name, lines in (("ref", REF), ("src", SRC), ("a", CAP1), ("b", CAP2)):
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    out = tmp_path / "r.html"
    assert main(["report", "-r", str(tmp_path / "ref"), "-b", str(tmp_path / "a"), str(tmp_path / "b"), "--metrics",
                 "bleu", "--comet-model", models["regression"], "--src", str(tmp_path / "src"), "--no-score-cache",
                 "--ar", "100", "--bootstrap", "20", "-o", str(out), "--quiet"]) == 0
    text = out.read_text(encoding="utf-8")
    assert "COMET \u2191" in text and "comet|model:regression|" in text
    for hyps in (CAP1, CAP2):   # each system's score is the mean of COMET's own segment scores
        own = own_scores(models["regression"], [{"src": s, "mt": h, "ref": r} for s, h, r in zip(SRC, hyps, REF)])
        assert f"{own.mean():.4f}" in text


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_a_reference_free_checkpoint_is_refused_for_references_and_the_reverse(models, nbest, tmp_path, capsys):
    with pytest.raises(InputError, match="a reference-free COMET model .*score reference-free models with the qe"):
        api.add_features(nbest, "comet_ref", sources=SRC, references=[REF], comet_ref_model=models["kiwi"])
    with pytest.raises(InputError, match="a reference-based COMET model .*comet_ref feature"):
        api.add_features(nbest, "qe", sources=SRC, qe_model=models["regression"])
    for name, lines in (("ref", REF), ("src", SRC), ("a", CAP1)):
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    assert main(["eval", "-r", str(tmp_path / "ref"), "-b", str(tmp_path / "a"), "--metrics", "bleu",
                 "--comet-model", models["kiwi"],
                 "--src", str(tmp_path / "src"), "--no-score-cache", "-o", str(tmp_path / "t.txt"), "--quiet"]) == 2
    assert "a reference-free COMET model" in one_error_line(capsys)
    assert not (tmp_path / "t.txt").exists()


def test_a_checkpoint_that_pickles_a_callable_is_refused(models, nbest, tmp_path, capsys):
    bad = shutil.copytree(models["regression"], str(tmp_path / "bad"))
    ckpt = os.path.join(bad, "checkpoints", "model.ckpt")
    state = torch.load(ckpt, weights_only=True)
    state["callbacks"] = {"on_load": os.system}   # what an attacker would plant: a callable, pickled
    torch.save(state, ckpt)
    with pytest.raises(InputError, match="refused: the checkpoint pickles posix.system"):
        comet.load_comet(bad, True, "test")
    for name, lines in (("ref", REF), ("src", SRC)):
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    api.write_nbest(nbest, str(tmp_path / "in.nbest"))
    assert main(["features", str(tmp_path / "in.nbest"), "--which", "comet_ref", "-r", str(tmp_path / "ref"),
                 "--src", str(tmp_path / "src"), "--comet-model", bad, "--no-score-cache",
                 "-o", str(tmp_path / "out.nbest")]) == 2
    line = one_error_line(capsys)
    assert "refused: the checkpoint pickles posix.system" in line and "would run code" in line
    assert not (tmp_path / "out.nbest").exists()


def test_missing_inputs_and_encoder_are_one_clear_error(models, nbest, tmp_path, capsys):
    with pytest.raises(InputError, match="comet_ref needs the references"):
        api.add_features(nbest, "comet_ref", sources=SRC, comet_ref_model=models["regression"])
    with pytest.raises(InputError, match="comet_ref needs the source sentences"):
        api.add_features(nbest, "comet_ref", references=[REF], comet_ref_model=models["regression"])
    with pytest.raises(InputError, match="the metric comet needs the source sentences"):
        api.evaluate([REF], CAP1, {"b": CAP2}, metrics=["comet"], comet_model=models["regression"])
    with pytest.raises(InputError, match="2 source sentences for 12 reference lines"):
        api.evaluate([REF], CAP1, {"b": CAP2}, metrics=["comet"], comet_model=models["regression"], sources=SRC[:2])
    moved = shutil.copytree(models["regression"], str(tmp_path / "moved"))
    ckpt = os.path.join(moved, "checkpoints", "model.ckpt")
    state = torch.load(ckpt, weights_only=True)
    state["hyper_parameters"]["pretrained_model"] = "no-such-org/no-such-encoder"
    torch.save(state, ckpt)
    with pytest.raises(InputError, match="cannot load the COMET checkpoint offline.*Hugging Face cache"):
        comet.cached_scores(moved, [("a", "b", "c")], reference=True, what="test")
    (tmp_path / "hparams.yaml").write_text("class_identifier: no_such_metric\n")
    os.makedirs(tmp_path / "checkpoints", exist_ok=True)
    shutil.copy(ckpt, tmp_path / "checkpoints" / "model.ckpt")
    with pytest.raises(InputError, match="class_identifier 'no_such_metric' is not a COMET model class"):
        comet.model_kind(str(tmp_path))


def test_torchrun_splits_the_scoring_and_writes_what_one_process_writes(models, nbest, tmp_path):
    """Two ranks (gloo, one thread each) score comet_ref in whole batches each; rank 0 writes the
    bytes one process writes, and fills the cache the one process then reads nothing from."""
    from tests.cli_helpers import torchrun

    for name, lines in (("ref", REF), ("src", SRC)):
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    api.write_nbest(nbest, str(tmp_path / "in.nbest"))
    args = ["features", str(tmp_path / "in.nbest"), "--which", "comet_ref", "-r", str(tmp_path / "ref"), "--src",
            str(tmp_path / "src"), "--comet-model", models["regression"], "--comet-batch-size", "4", "--quiet"]
    ranks = torchrun([*args, "--score-cache", tmp_path / "c.sqlite", "-o", tmp_path / "two.nbest"])
    assert ranks.returncode == 0, ranks.stderr[-2000:]
    assert main([*args, "--no-score-cache", "-o", str(tmp_path / "one.nbest")]) == 0
    assert (tmp_path / "two.nbest").read_bytes() == (tmp_path / "one.nbest").read_bytes()
    from rerank.score_cache import ScoreCache

    assert len(ScoreCache(str(tmp_path / "c.sqlite"))) == len(set(zip(nbest.sentence_of_hyp.tolist(), nbest.hyps)))


def test_the_gpu_index_reaches_comet(monkeypatch):
    """cuda:N (and a torchrun rank's cuda:LOCAL_RANK) is the device COMET predicts on, not GPU 0."""
    seen = []

    class Model:
        def predict(self, rows, **options):
            seen.append(options)
            return type("Prediction", (), {"scores": [0.5] * len(rows)})()

    rows = [{"src": "a", "mt": "b", "ref": "c"}] * 3
    comet.predict_scores(Model(), rows, 2, torch.device("cuda:1"))
    comet.predict_scores(Model(), rows, 2, torch.device("cpu"))
    assert (seen[0]["gpus"], seen[0]["devices"], seen[0]["accelerator"]) == (1, [1], "cuda")
    assert (seen[1]["gpus"], seen[1]["devices"], seen[1]["accelerator"]) == (0, None, "cpu")


def test_the_weights_only_check_holds_whatever_the_environment_says(models, tmp_path, monkeypatch):
    bad = shutil.copytree(models["regression"], str(tmp_path / "bad"))
    ckpt = os.path.join(bad, "checkpoints", "model.ckpt")
    state = torch.load(ckpt, weights_only=True)
    state["callbacks"] = {"on_load": os.system}
    torch.save(state, ckpt)
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    with pytest.raises(InputError, match="refused: the checkpoint pickles posix.system"):
        comet.load_comet(bad, True, "test")


def test_qe_runs_xcomet_and_unified_models_without_references(models, nbest):
    for kind in ("xcomet", "unified"):
        column = api.add_features(nbest, "qe", sources=SRC, qe_model=models[kind]).column("qe")
        rows = [{"src": SRC[i], "mt": h} for i, h in zip(nbest.sentence_of_hyp, nbest.hyps)]
        from comet import load_from_checkpoint

        model = load_from_checkpoint(comet.checkpoint_file(models[kind]), local_files_only=True)
        own = model.predict(rows, batch_size=4, gpus=0, progress_bar=False, accelerator="cpu").scores
        np.testing.assert_allclose(column, own, atol=1e-5)


def test_comet_options_without_the_model_and_bad_context_are_refused(models, nbest, tmp_path, capsys):
    from rerank.features import FeatureContext

    for name, lines in (("ref", REF), ("a", CAP1)):
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    for extra in (["--comet-batch-size", "4"], ["--device", "cuda"], ["--no-score-cache"]):
        assert main(["eval", "-r", str(tmp_path / "ref"), "-b", str(tmp_path / "a"), "--metrics", "bleu", *extra,
                     "-o", str(tmp_path / "t.txt")]) == 2
        said = "the comet metric only" if extra[0] == "--comet-batch-size" else "comet, bertscore, bleurt and metricx only"
        assert f"{extra[0]} is read by {said}" in one_error_line(capsys)
    with pytest.raises(InputError, match="comet_batch_size is given but metrics has no comet"):
        api.evaluate([REF], CAP1, {"b": CAP2}, metrics=["bleu"], comet_batch_size=4)
    with pytest.raises(InputError, match="device 'gpu': unknown device"):
        api.evaluate([REF], CAP1, {"b": CAP2}, metrics=["comet"], comet_model=models["regression"], sources=SRC,
                     device="gpu")
    with pytest.raises(InputError, match="reference 1 has 2 lines for 12 n-best sentences"):
        api.add_features(nbest, "comet_ref", comet_ref_model=models["regression"],
                         context=FeatureContext(sources=SRC, references=[REF[:2]]))
    ckpt = comet.checkpoint_file(models["regression"])
    assert comet.COMETMetric(ckpt, SRC).signature().startswith("comet|model:regression|")



@pytest.mark.faults
def test_an_interrupted_comet_run_keeps_its_finished_blocks_and_the_rerun_scores_the_rest(models, tmp_path,
                                                                                        monkeypatch):
    """The cache is written a block of batches at a time as COMET predicts (rerank.score_cache):
    a run stopped in its second block keeps the first; the rerun predicts only the rest, and every
    score equals an uninterrupted run's (a block is whole batches of COMET's length order)."""
    from rerank.score_cache import ScoreCache

    inputs = list(zip(SRC, CAP1, REF))
    whole = comet.cached_scores(models["regression"], inputs, reference=True, what="comet", batch_size=2)
    monkeypatch.setattr(comet, "COMET_BLOCK", 4)   # blocks of two batches of 2
    path = str(tmp_path / "scores.sqlite")
    real_load, predicted, stop_at = comet.load_comet, [], [2]

    def load(*args):
        model = real_load(*args)
        predict = model.predict

        def counted(rows, **options):
            if len(predicted) + 1 == stop_at[0]:
                raise KeyboardInterrupt   # Ctrl-C as the second block starts
            predicted.append(len(rows))
            return predict(rows, **options)

        model.predict = counted
        return model

    monkeypatch.setattr(comet, "load_comet", load)
    with pytest.raises(KeyboardInterrupt):
        comet.cached_scores(models["regression"], inputs, reference=True, what="comet", batch_size=2, cache=path)
    assert predicted == [4] and len(ScoreCache(path)) == 4
    predicted.clear()
    stop_at[0] = 0
    again = comet.cached_scores(models["regression"], inputs, reference=True, what="comet", batch_size=2, cache=path)
    assert sum(predicted) == len(set(inputs)) - 4
    np.testing.assert_allclose(again, whole, rtol=0, atol=1e-6)
