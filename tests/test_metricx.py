"""MetricX computed here (rerank.metrics.metricx) on tiny random-weight mT5 checkpoints built from
configs (rerank.recipes.tiny_models.build_metricx): MetricX-24 hybrid, MetricX-23 reference and QE.

Parity: the scores equal an independent re-statement of the public MT5ForRegression forward
(google-research/metricx, metricx2{3,4}/models.py: the encoder, one decoder step from token 0, the
logit of the score token, clamped to [0, 25]) on the inputs of its predict.py (the version's text
format, truncation, the EOS removed), one input at a time. Clamp: the unclamped logits fall on both
sides of [0, 25]. Direction: eval marks MetricX lower-better, tuning on its column with
lower_better minimises it, the oracle picks each list's minimum, MBR with the metricx utility picks
the argmin of the expected score. Each distinct input is scored once; the cache gives the scores
back bit for bit without the model; a bad checkpoint is one line, exit 2."""

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
from rerank.features import FeatureContext
from rerank.io import read_lines
from rerank.metrics import metricx
from rerank.nbest import NBestList, segment_argmax
from rerank.recipes import tiny_models

pytestmark = pytest.mark.neural

os.environ.setdefault("HF_HUB_OFFLINE", "1")
EVAL = os.path.join(os.path.dirname(__file__), "data", "eval")
N = 12
REF = read_lines(os.path.join(EVAL, "ref.en"))[:N]
SRC = read_lines(os.path.join(EVAL, "ref.de"))[:N]
CAP1 = read_lines(os.path.join(EVAL, "cap1.en"))[:N]
CAP2 = read_lines(os.path.join(EVAL, "cap2.en"))[:N]
KINDS = {"24": (24, None), "23": (23, "reference"), "23qe": (23, "qe")}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("metricx")
    lines = tiny_models.read_text(tiny_models.DEFAULT_TEXT)
    return {name: tiny_models.build_metricx(str(root / name), lines, seed=1, version=version, mode=mode)
            for name, (version, mode) in KINDS.items()}


# ---- the public definition, re-stated ------------------------------------------------------------

def public_input(version: int, source: str, hypothesis: str, reference: str | None) -> str:
    """predict.py's _make_input of metricx23 and metricx24."""
    if version == 24:
        text = "source: " + source + " candidate: " + hypothesis
        return text if reference is None else text + " reference: " + reference
    if reference is None:
        return "candidate: " + hypothesis + " source: " + source
    return "candidate: " + hypothesis + " reference: " + reference


def public_scores(path: str, rows: list[tuple], clamp: bool = True) -> np.ndarray:
    """MT5ForRegression's predictions, one input per batch as predict.py's batch size 1: tokenised
    with truncation to max_input_length, the last token (EOS) removed; encoder; the decoder on one
    step of token 0; the output rescaled by d_model**-0.5 when config.json ties the embeddings; the
    lm_head logits at the score token; clamped to [0, 25] (`clamp`). Built from transformers'
    MT5ForConditionalGeneration's encoder and decoder stacks and the checkpoint's own lm_head (the
    tiny checkpoint's token is its metricx.json's score_token_id, not 250089)."""
    from safetensors.torch import load_file
    from transformers import AutoTokenizer, MT5Config, MT5ForConditionalGeneration

    with open(os.path.join(path, "metricx.json"), encoding="utf-8") as f:
        settings = json.load(f)
    with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
        tied = json.load(f).get("tie_word_embeddings", True)
    config = MT5Config.from_pretrained(path)
    state = load_file(os.path.join(path, "model.safetensors"))
    model = MT5ForConditionalGeneration(config).eval()
    model.load_state_dict({k: v for k, v in state.items() if k != "lm_head.weight"}, strict=False)
    lm_head = torch.nn.Linear(config.d_model, config.vocab_size, bias=False)
    lm_head.weight = torch.nn.Parameter(state["lm_head.weight"])
    tokenizer = AutoTokenizer.from_pretrained(path)
    out = []
    with torch.no_grad():
        for row in rows:
            text = public_input(settings["version"], row[0], row[1], row[2] if len(row) > 2 else None)
            example = tokenizer(text, max_length=settings["max_input_length"], truncation=True, padding=False)
            input_ids = torch.tensor([example["input_ids"][:-1]])
            attention_mask = torch.tensor([example["attention_mask"][:-1]])
            hidden_states = model.encoder(input_ids=input_ids, attention_mask=attention_mask)[0]
            decoder_input_ids = torch.LongTensor([0]).repeat(input_ids.size(0)).reshape(-1, 1)
            sequence_output = model.decoder(input_ids=decoder_input_ids, encoder_hidden_states=hidden_states,
                                            encoder_attention_mask=attention_mask)[0]
            if tied:
                sequence_output = sequence_output * (config.d_model ** -0.5)
            predictions = lm_head(sequence_output)[:, 0, settings["score_token_id"]]
            out.append(float(torch.clamp(predictions, 0, 25) if clamp else predictions))
    return np.array(out)


def triples(hyps=CAP1):
    return list(zip(SRC, hyps, REF))


# ---- parity and clamp ------------------------------------------------------------------------------

@pytest.mark.parametrize("kind, reference", [("24", True), ("24", False), ("23", True), ("23qe", False)])
def test_the_scores_are_the_public_definitions(models, kind, reference):
    rows = triples() + triples(CAP2) if reference else [(s, h) for s, h, _ in triples() + triples(CAP2)]
    ours = metricx.cached_scores(models[kind], rows, reference=reference, what="test", batch_tokens=300)
    np.testing.assert_allclose(ours, public_scores(models[kind], rows), atol=1e-4, rtol=0)


def test_a_state_dict_file_scores_as_the_safetensors(models, tmp_path):
    from safetensors.torch import load_file

    path = str(tmp_path / "bin")
    shutil.copytree(models["24"], path)
    torch.save(load_file(os.path.join(path, "model.safetensors")), os.path.join(path, "pytorch_model.bin"))
    os.remove(os.path.join(path, "model.safetensors"))
    rows = triples()
    np.testing.assert_array_equal(metricx.cached_scores(path, rows, reference=True, what="test"),
                                  metricx.cached_scores(models["24"], rows, reference=True, what="test"))


def test_sharded_weights_score_as_one_file(models, tmp_path):
    from safetensors.torch import load_file, save_file

    path = str(tmp_path / "shards")
    shutil.copytree(models["24"], path)
    state = load_file(os.path.join(path, "model.safetensors"))
    os.remove(os.path.join(path, "model.safetensors"))
    names = sorted(state)
    parts = {"model-00001-of-00002.safetensors": names[::2], "model-00002-of-00002.safetensors": names[1::2]}
    for file, keys in parts.items():
        save_file({k: state[k] for k in keys}, os.path.join(path, file))
    with open(os.path.join(path, "model.safetensors.index.json"), "w", encoding="utf-8") as f:
        json.dump({"weight_map": {k: file for file, keys in parts.items() for k in keys}}, f)
    rows = triples()
    np.testing.assert_array_equal(metricx.cached_scores(path, rows, reference=True, what="test"),
                                  metricx.cached_scores(models["24"], rows, reference=True, what="test"))
    os.remove(os.path.join(path, "model-00002-of-00002.safetensors"))
    with pytest.raises(InputError, match="a shard of the index is missing"):
        metricx.cached_scores(path, rows, reference=True, what="test")


def test_scores_are_clamped_to_0_25(models):
    rows = triples() + triples(CAP2)
    raw = public_scores(models["24"], rows, clamp=False)
    assert (raw < 0).any() and (raw > 25).any() and ((raw > 0) & (raw < 25)).any()   # both sides and between
    ours = metricx.cached_scores(models["24"], rows, reference=True, what="test")
    assert ours.min() >= 0 and ours.max() <= 25
    np.testing.assert_allclose(ours, np.clip(raw, 0, 25), atol=1e-4, rtol=0)


# ---- each distinct input once, the cache -----------------------------------------------------------

@pytest.fixture
def count_rows(monkeypatch):
    scored: list[tuple] = []
    original = metricx.Scorer.score_ids

    def counting(self, rows):
        scored.extend(tuple(r) for r in rows)
        return original(self, rows)

    monkeypatch.setattr(metricx.Scorer, "score_ids", counting)
    return scored


def test_each_distinct_triple_is_scored_once(models, count_rows):
    rows = triples() + triples(CAP2) + triples() + triples(CAP2)[:5]
    values = metricx.cached_scores(models["24"], rows, reference=True, what="test", batch_tokens=200)
    assert len(count_rows) == len(set(rows)) == len(set(count_rows))
    position = {row: values[k] for k, row in enumerate(rows)}
    assert all(values[k] == position[row] for k, row in enumerate(rows))   # a duplicate gets its first's score
    count_rows.clear()
    metric = metricx.MetricXMetric(models["24"], SRC, batch_tokens=200)
    metric.prepare_systems([CAP1, CAP2, CAP1], [REF])
    metric.sentence_stats(CAP2, [REF])
    assert len(count_rows) == len(set(triples() + triples(CAP2)))


def test_the_cache_gives_the_scores_back_bit_for_bit_without_the_model(models, tmp_path, monkeypatch):
    cache = str(tmp_path / "scores.sqlite")
    rows = triples() + triples(CAP2)
    first = metricx.cached_scores(models["24"], rows, reference=True, what="test", cache=cache)
    qe = metricx.cached_scores(models["24"], [r[:2] for r in rows], reference=False, what="test", cache=cache)

    def no_model(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(metricx, "Scorer", no_model)
    again = metricx.cached_scores(models["24"], rows, reference=True, what="test", cache=cache)
    assert again.tobytes() == first.tobytes()
    assert metricx.cached_scores(models["24"], [r[:2] for r in rows], reference=False, what="test",
                                 cache=cache).tobytes() == qe.tobytes()
    assert not np.array_equal(first, qe)   # the QE inputs are other inputs, other keys


# ---- the metric of eval, the features, direction ---------------------------------------------------

def test_eval_marks_metricx_lower_better_and_scores_the_mean(models):
    table = evaluate_systems([REF], [CAP1], {"sys": [CAP2]}, metrics=("bleu",), metricx_model=models["24"],
                             sources=SRC, ar=200, bootstrap=0)
    assert table.metrics == ["bleu", "metricx"] and table.higher_is_better["metricx"] is False
    assert "MetricX \u2193" in table.to_text()
    for system, hyps in (("baseline", CAP1), ("sys", CAP2)):
        assert table.cells[(system, "metricx")].score == pytest.approx(public_scores(models["24"],
                                                                                     triples(hyps)).mean(), abs=1e-4)
    assert table.signatures["metricx"].startswith("metricx|model:24|") and "version:24" in table.signatures["metricx"]
    assert table.config["metricx"] == {"model": models["24"], "batch_tokens": metricx.BATCH_TOKENS, "device": "cpu"}


def test_the_eval_command_reads_metricx_model(models, tmp_path, capsys):
    files = {}
    for name, lines in (("ref", REF), ("src", SRC), ("base", CAP1), ("sys", CAP2)):
        files[name] = tmp_path / name
        files[name].write_text("\n".join(lines) + "\n", encoding="utf-8")
    code = main(["eval", "-r", str(files["ref"]), "-b", str(files["base"]), f"sys={files['sys']}", "--metrics", "bleu",
                 "--metricx-model", models["24"], "--src", str(files["src"]), "--ar", "100", "--bootstrap", "0",
                 "--score-cache", str(tmp_path / "c.sqlite")])
    out = capsys.readouterr().out
    assert code == 0 and "MetricX \u2193" in out


@pytest.fixture(scope="module")
def nbest():
    hyps = [[CAP1[i], CAP2[i], REF[i]] if i % 2 else [CAP2[i], CAP1[i], REF[i], CAP1[(i + 1) % N]] for i in range(N)]
    return NBestList.from_lists(hyps, [np.linspace(0, -1, len(h)) for h in hyps], ["nmt"])


def feature_columns(models, nbest):
    from rerank.embeddings.metricx_features import MetricXFeature, MetricXQEFeature

    context = FeatureContext(sources=SRC, references=[REF])
    ref = MetricXFeature().compute(nbest, ["metricx"], context, {"model": models["24"], "batch_tokens": 256})
    qe = MetricXQEFeature().compute(nbest, ["metricx_qe"], context, {"model": models["24"]})
    return ref["metricx"], qe["metricx_qe"]


def test_the_columns_are_the_metrics_segment_scores(models, nbest):
    ref, qe = feature_columns(models, nbest)
    sentence = nbest.sentence_of_hyp.tolist()
    np.testing.assert_allclose(ref, public_scores(models["24"], [(SRC[i], h, REF[i]) for i, h in
                                                                 zip(sentence, nbest.hyps)]), atol=1e-4, rtol=0)
    np.testing.assert_allclose(qe, public_scores(models["24"], [(SRC[i], h) for i, h in zip(sentence, nbest.hyps)]),
                               atol=1e-4, rtol=0)


def test_tuning_on_the_column_minimises_it_and_the_oracle_picks_the_minimum(models, nbest):
    ref, _ = feature_columns(models, nbest)
    rng = np.random.default_rng(0)
    X = np.column_stack([nbest.features[:, 0], -ref + rng.normal(0, 0.01, len(ref)), ref])
    listed = NBestList(nbest.offsets, list(nbest.hyps), X, ["nmt", "quality", "metricx"])
    lowest = segment_argmax(-ref, nbest.offsets)
    assert not np.array_equal(lowest, segment_argmax(ref, nbest.offsets))
    found = api.oracle(listed, metric="column:metricx", lower_better=True)
    np.testing.assert_array_equal(found.rows, lowest)
    assert found.score == pytest.approx(float(ref[lowest].mean())) and not found.higher_is_better
    result = api.tune(listed, metric="column:metricx", lower_better=("metricx",), tuner="mert", restarts=2)
    weights = np.array([result.weights["nmt"], result.weights["quality"]])
    picks = segment_argmax(X[:, :2] @ weights, nbest.offsets)
    np.testing.assert_array_equal(ref[picks], ref[lowest])   # a minimum of each list (clamped ties at 0: any)
    assert result.weights["quality"] > 0 and result.score == pytest.approx(found.score)
    assert result.score < result.best_run.initial_score
    assert not result.metric_info.higher_is_better


def test_mbr_with_the_metricx_utility_picks_the_lowest_expected_score(models, nbest):
    from rerank.consensus import MBRFeature, posterior

    context = FeatureContext(sources=SRC)
    column = MBRFeature().compute(nbest, ["mbr"], context, {"utility": "metricx", "model": models["24"],
                                                            "batch_size": 256})["mbr"]
    p = posterior(nbest.column("nmt"), np.asarray(nbest.offsets), 1.0)
    expected = np.zeros(nbest.n_hyps)
    offsets = np.asarray(nbest.offsets)
    for i in range(nbest.n_sentences):
        lo, hi = offsets[i], offsets[i + 1]
        rows = [(SRC[i], nbest.hyps[a], nbest.hyps[b]) for a in range(lo, hi) for b in range(lo, hi)]
        U = public_scores(models["24"], rows).reshape(hi - lo, hi - lo)
        expected[lo:hi] = U @ p[lo:hi]
    np.testing.assert_allclose(column, -100 * expected, atol=1e-2, rtol=0)
    np.testing.assert_array_equal(segment_argmax(column, offsets), segment_argmax(-expected, offsets))


# ---- refusals ----------------------------------------------------------------------------------------

def broken(models, tmp_path, how: str) -> str:
    path = str(tmp_path / how)
    shutil.copytree(models["24"], path)
    settings = os.path.join(path, "metricx.json")
    if how == "no-settings":
        os.remove(settings)
    elif how == "bad-version":
        with open(settings, "w", encoding="utf-8") as f:
            json.dump({"version": 25}, f)
    elif how == "no-weights":
        os.remove(os.path.join(path, "model.safetensors"))
    elif how == "bad-weights":
        with open(os.path.join(path, "model.safetensors"), "wb") as f:
            f.write(b"garbage")
    elif how == "token-outside":
        with open(settings, "w", encoding="utf-8") as f:
            json.dump({"version": 24, "score_token_id": 10 ** 6}, f)
    elif how == "pickled-callable":   # a PyTorch file holding a function: weights_only loading refuses it
        os.remove(os.path.join(path, "model.safetensors"))
        torch.save({"shared.weight": torch.zeros(2), "hook": os.system}, os.path.join(path, "pytorch_model.bin"))
    elif how == "not-mt5":
        with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
            config = json.load(f)
        with open(os.path.join(path, "config.json"), "w", encoding="utf-8") as f:
            json.dump({**config, "model_type": "bert"}, f)
    return path


@pytest.mark.parametrize("how, message", [
    ("no-settings", "needs metricx.json"), ("bad-version", "version must be 23 or 24"), ("no-weights", "no weights"),
    ("bad-weights", "cannot read the weights"), ("token-outside", "is not a token of the vocabulary"),
    ("not-mt5", "model_type must be mt5"), ("pickled-callable", "which weights_only loading refuses"),
    ("qe-for-reference", "a QE MetricX-23 checkpoint"),
    ("missing", "not a MetricX checkpoint")])
def test_a_bad_checkpoint_is_one_line_exit_2(models, tmp_path, capsys, how, message):
    path = (models["23qe"] if how == "qe-for-reference" else str(tmp_path / "none") if how == "missing"
            else broken(models, tmp_path, how))
    files = {}
    for name, lines in (("ref", REF), ("src", SRC), ("base", CAP1)):
        files[name] = tmp_path / name
        files[name].write_text("\n".join(lines) + "\n", encoding="utf-8")
    code = main(["eval", "-r", str(files["ref"]), "-b", str(files["base"]), f"sys={files['base']}", "--metrics", "bleu",
                 "--metricx-model", path, "--src", str(files["src"]), "--no-score-cache", "--ar", "10",
                 "--bootstrap", "0"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and message in err, err


def test_the_metric_needs_its_model_and_sources():
    with pytest.raises(InputError, match="needs the source sentences"):
        evaluate_systems([REF], [CAP1], {}, metrics=("metricx",), metricx_model="x", ar=10, bootstrap=0)
    with pytest.raises(InputError, match="needs metricx_model"):
        evaluate_systems([REF], [CAP1], {}, metrics=("metricx",), sources=SRC, ar=10, bootstrap=0)
    with pytest.raises(InputError, match="metrics has no metricx"):
        evaluate_systems([REF], [CAP1], {}, metrics=("bleu",), metricx_batch_tokens=100, ar=10, bootstrap=0)


def test_the_utility_takes_the_exact_decoders_and_refuses_the_others(models, nbest):
    from rerank.consensus import MBRFeature

    def mbr(**options):
        return MBRFeature().compute(nbest, ["mbr"], FeatureContext(sources=SRC),
                                    {"utility": "metricx", "model": models["24"], **options})["mbr"]

    exact = mbr()
    np.testing.assert_allclose(mbr(method="probabilistic", sample_ratio=1.0), exact, atol=1e-9, rtol=0)
    for method, message in (("aggregate", "use the exact method for metricx"), ("c2f", "use the exact method"),
                            ("centroid", "the metricx utility has no embeddings")):
        with pytest.raises(InputError, match=message):
            mbr(method=method)
