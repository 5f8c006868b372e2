"""BERTScore and BLEURT (rerank.metrics.bertscore, rerank.metrics.bleurt, what they share:
rerank.metrics.pair_models) on tiny random-weight models built from configs
(rerank.recipes.tiny_models), loaded offline.

Parity: bertscore equals `bert_score.score` on the same model directory and layer (its F1; with
its baseline rescaling on a baseline file written here); bleurt equals a re-statement here of the
PyTorch port's forward (BleurtForSequenceClassification: the encoder's pooled output of
"[CLS] reference [SEP] candidate [SEP]", then the linear head) on the same weights, one pair at a
time. Properties: each distinct pair scored once, the cache gives the same numbers bit for bit,
batches bounded by tokens change no score, the feature column, the oracle and a tuning column pick
by the metric's own scores, the MBR feature is the posterior-weighted mean of the metric's pair
scores (higher is better), and the refusals are one line."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
import torch

from rerank import api
from rerank.cli import main
from rerank.errors import InputError
from rerank.io import read_lines
from rerank.metrics import bertscore, bleurt, pair_models
from rerank.nbest import NBestList
from rerank.recipes import tiny_models

pytestmark = pytest.mark.neural

os.environ.setdefault("HF_HUB_OFFLINE", "1")
EVAL = os.path.join(os.path.dirname(__file__), "data", "eval")
N = 10
REF = read_lines(os.path.join(EVAL, "ref.en"))[:N]
CAP1 = read_lines(os.path.join(EVAL, "cap1.en"))[:N]
CAP2 = read_lines(os.path.join(EVAL, "cap2.en"))[:N]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("pair_models")
    lines = tiny_models.read_text(tiny_models.DEFAULT_TEXT)[:2000]
    from rerank.progress import transformers_bars_off

    with transformers_bars_off():
        return {"bertscore": tiny_models.build_bertscore(str(root / "bertscore"), lines, seed=1),
                "bleurt": tiny_models.build_bleurt(str(root / "bleurt"), lines, seed=1)}


@pytest.fixture(scope="module")
def nbest():
    hyps = [[CAP1[i], CAP2[i], REF[i]] if i % 2 else [CAP2[i], CAP1[i]] for i in range(N)]
    return NBestList.from_lists(hyps, [np.linspace(0, -1, len(h)) for h in hyps], ["nmt"])


def own_bertscore(path, cands, refs, layer, **keywords):
    """bert_score's F1, a pair at a time (its batched call also matches against padding)."""
    import bert_score

    return bert_score.score(cands, refs, model_type=path, num_layers=layer, batch_size=1, device="cpu",
                            **keywords)[2].double().numpy()


@pytest.mark.parametrize("layer", [1, 2])
def test_bertscore_is_bert_scores_f1(models, layer):
    model = bertscore.BERTScoreModel(models["bertscore"], layer=layer)
    ours = pair_models.cached_pair_scores(model, list(zip(CAP1, REF)), None, "test")
    np.testing.assert_allclose(ours, own_bertscore(models["bertscore"], CAP1, REF, layer), atol=1e-6)
    metric = bertscore.BERTScoreMetric(model)
    assert metric.corpus_score(CAP1, [REF]) == pytest.approx(float(np.mean(ours)), abs=1e-12)
    assert metric.signature().startswith("bertscore|model:bertscore|sha256:") and f"layer:{layer}|F1" in metric.signature()


def test_bert_scores_batched_call_differs_only_by_matching_padding(models):
    """bert_score's default batches pad a pair's tokens, and a padded token's similarity 0 can be
    a token's best: its F1 is never below ours (one pair at a time it is ours: the test above)."""
    import bert_score

    ours = pair_models.cached_pair_scores(bertscore.BERTScoreModel(models["bertscore"], layer=1),
                                          list(zip(CAP1, REF)), None, "test")
    batched = bert_score.score(CAP1, REF, model_type=models["bertscore"], num_layers=1, device="cpu")[2].double().numpy()
    assert np.all(batched >= ours - 1e-6)


def test_the_default_layer_is_bert_scores_for_the_folders_name_else_the_last(models, tmp_path):
    assert bertscore.BERTScoreModel(models["bertscore"]).layer == 2
    lines = tiny_models.read_text(tiny_models.DEFAULT_TEXT)[:500]
    from rerank.progress import transformers_bars_off

    with transformers_bars_off():
        named = tiny_models.build_bertscore(str(tmp_path / "bert-base-uncased"), lines, layers=12)
    from bert_score.utils import model2layers

    model = bertscore.BERTScoreModel(named)
    assert model.layer == model2layers["bert-base-uncased"] == 9 and "layer:9|" in model.signature()


def test_rescaling_is_bert_scores_with_the_baseline_file(models, tmp_path):
    baseline = tmp_path / "baseline.tsv"
    baseline.write_text("LAYER,P,R,F\n0,0.1,0.2,0.3\n1,0.2,0.25,0.41\n2,0.5,0.5,0.62\n")
    for layer in (1, 2):
        model = bertscore.BERTScoreModel(models["bertscore"], layer=layer, rescale=str(baseline))
        ours = pair_models.cached_pair_scores(model, list(zip(CAP2, REF)), None, "test")
        theirs = own_bertscore(models["bertscore"], CAP2, REF, layer, rescale_with_baseline=True, lang="en",
                               baseline_path=str(baseline))
        np.testing.assert_allclose(ours, theirs, atol=1e-5)


def test_several_references_take_the_best_as_bert_score_does(models):
    import bert_score

    metric = bertscore.BERTScoreMetric(bertscore.BERTScoreModel(models["bertscore"], layer=1))
    stats = metric.sentence_stats(CAP1, [REF, CAP2])
    theirs = bert_score.score(CAP1, [[r, c] for r, c in zip(REF, CAP2)], model_type=models["bertscore"], num_layers=1,
                              batch_size=1, device="cpu")[2].double().numpy()
    np.testing.assert_allclose(stats[:, 0], theirs, atol=1e-6)
    bleurt_metric = bleurt.BLEURTMetric(bleurt.BLEURTModel(models["bleurt"]))
    both = bleurt_metric.sentence_stats(CAP1, [REF, CAP2])[:, 0]
    one = [bleurt_metric.sentence_stats(CAP1, [r])[:, 0] for r in (REF, CAP2)]
    np.testing.assert_allclose(both, (one[0] + one[1]) / 2, atol=1e-12)


def port_forward(path: str, pairs) -> np.ndarray:
    """BleurtForSequenceClassification's forward, re-stated on the same weights: the RemBERT
    encoder's pooled output (tanh of a dense layer on the first token's state) of the tokenizer's
    pair (reference, candidate), then the linear head; one pair at a time, no padding."""
    from safetensors.torch import load_file
    from transformers import AutoTokenizer, RemBertConfig, RemBertModel

    with open(os.path.join(path, "bleurt_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    state = load_file(os.path.join(path, "model.safetensors"))
    encoder = RemBertModel(RemBertConfig(**config["encoder"]), add_pooling_layer=True).eval()
    encoder.load_state_dict({k[len("encoder."):]: v for k, v in state.items() if k.startswith("encoder.")})
    tokenizer = AutoTokenizer.from_pretrained(path)
    out = []
    with torch.no_grad():
        for hyp, ref in pairs:
            inputs = tokenizer([ref], [hyp], return_tensors="pt", truncation=True,   # as the port's README calls
                               max_length=config["max_length"])   # it (lists: an empty candidate is kept)
            assert inputs["input_ids"][0, 0] == tokenizer.cls_token_id
            pooled = encoder(**inputs).pooler_output
            out.append(float((pooled @ state["head.weight"].T + state["head.bias"])[0, 0]))
    return np.array(out)


def test_bleurt_is_the_ports_forward(models):
    pairs = list(zip(CAP1, REF)) + list(zip(CAP2, REF)) + [("", REF[0])]
    ours = pair_models.cached_pair_scores(bleurt.BLEURTModel(models["bleurt"]), pairs, None, "test")
    theirs = port_forward(models["bleurt"], pairs)
    np.testing.assert_allclose(ours, theirs, atol=1e-5)
    assert np.std(theirs) > 1e-3   # the tiny model's scores differ between inputs


@pytest.mark.parametrize("name", ["bertscore", "bleurt"])
def test_each_distinct_pair_is_scored_once_and_batches_change_no_score(models, name, monkeypatch):
    cls = {"bertscore": bertscore.BERTScoreModel, "bleurt": bleurt.BLEURTModel}[name]
    scored = []
    original = cls.score
    monkeypatch.setattr(cls, "score", lambda self, pairs, store: scored.append(list(pairs)) or original(self, pairs,
                                                                                                        store))
    table = api.evaluate([REF], CAP1, {"a": [CAP2, CAP1], "b": CAP2}, metrics=["bleu"],
                         **{f"{name}_model": models[name]}, ar=100, bootstrap=0)
    assert len(scored) == 1 and sorted(scored[0]) == sorted(set(zip(CAP1, REF)) | set(zip(CAP2, REF)))
    assert table.table.metrics == ["bleu", name]
    assert table.table.cells[("a", name)].p is not None   # tested like any metric
    assert table.table.config[name]["model"] == models[name] and table.table.config[name]["device"] == "cpu"
    one_row = cls(models[name], batch_size=1)
    many = cls(models[name])
    pairs = list(zip(CAP1 + CAP2, REF + REF))
    np.testing.assert_allclose(pair_models.cached_pair_scores(one_row, pairs, None, "t"),
                               pair_models.cached_pair_scores(many, pairs, None, "t"), atol=1e-5)


def test_bertscore_encodes_each_distinct_sentence_once(models, nbest, monkeypatch):
    from rerank import score_cache

    monkeypatch.setattr(score_cache, "BLOCK_ITEMS", 20)   # several blocks of pairs: the embeddings are kept
    model = bertscore.BERTScoreModel(models["bertscore"], batch_size=3)
    _, encoder = model.load()
    rows = []
    original = encoder.forward
    encoder.forward = lambda ids, **keywords: rows.append(len(ids)) or original(ids, **keywords)
    from rerank.consensus import pair_index

    I, J, _ = pair_index(np.asarray(nbest.offsets))
    pairs = [(nbest.hyps[i], nbest.hyps[j]) for i, j in zip(I.tolist(), J.tolist())]
    pair_models.cached_pair_scores(model, pairs, None, "t")
    assert sum(rows) == len(set(nbest.hyps)) and max(rows) <= 3 and len(pairs) > 2 * 20


def test_token_batches_are_sorted_and_bounded():
    from rerank.score_cache import token_batches

    lengths = [5, 30, 2, 7, 7, 100, 1, 40]
    batches = token_batches(lengths, 60, max_rows=3)
    assert sorted(k for b in batches for k in b) == list(range(len(lengths)))
    flat = [lengths[k] for b in batches for k in b]
    assert flat == sorted(lengths, reverse=True)
    for b in batches:
        assert len(b) <= 3 and (len(b) == 1 or len(b) * max(lengths[k] for k in b) <= 60)
    assert token_batches(lengths, 60) == token_batches(lengths, 60, max_rows=None)


@given(st.lists(st.integers(1, 80), min_size=1, max_size=60), st.sampled_from([0.0, 0.1, 0.5]),
       st.sampled_from([0, 50, 256]))
@settings(max_examples=200, deadline=None)
def test_token_batches_with_slack_bound_the_padding_past_the_floor_and_keep_the_order(lengths, slack, floor):
    from rerank.score_cache import token_batches

    batches = token_batches(lengths, 10**6, 64, slack, floor)
    assert [lengths[k] for b in batches for k in b] == sorted(lengths, reverse=True)
    assert sorted(k for b in batches for k in b) == list(range(len(lengths)))
    for b in batches:   # within the bound, or taken in while the batch was below the floor
        padded, real = len(b) * max(lengths[k] for k in b), sum(lengths[k] for k in b)
        assert len(b) == 1 or padded <= (1 + slack) * real + 1e-9 or (len(b) - 1) * lengths[b[0]] < floor
    for a, b in zip(batches, batches[1:]):   # a batch is cut only where the next item would break the bound
        grown = [*a, b[0]]
        assert len(a) == 64 or (len(grown) * lengths[a[0]] > (1 + slack) * sum(lengths[k] for k in grown) - 1e-9
                                and len(a) * lengths[a[0]] >= floor)
    assert token_batches(lengths, 10**6, 64, 10**6) == token_batches(lengths, 10**6, 64)   # the limit: no bound
    assert token_batches(lengths, 10**6, 64, 0.0, 10**6) == token_batches(lengths, 10**6, 64)   # nor below the floor
    equal = token_batches([7] * 130, 10**6, 64, 0.0, floor)   # a run of equal lengths still fills whole batches
    assert [len(b) for b in equal] == [64, 64, 2]


@pytest.mark.parametrize("name", ["bertscore", "bleurt"])
def test_the_cache_gives_the_same_scores_bit_for_bit(models, name, tmp_path, nbest, monkeypatch):
    cache = str(tmp_path / "scores.sqlite")
    column = api.add_features(nbest, name, references=[REF], cache=cache, **{f"{name}_model": models[name]}).column(name)
    cls = {"bertscore": bertscore.BERTScoreModel, "bleurt": bleurt.BLEURTModel}[name]
    monkeypatch.setattr(cls, "score", lambda *a: pytest.fail("scored again"))
    again = api.add_features(nbest, name, references=[REF], cache=cache, **{f"{name}_model": models[name]}).column(name)
    assert column.tobytes() == again.tobytes()
    metric = cls(models[name])
    rows = [(h, REF[i]) for i, h in zip(nbest.sentence_of_hyp.tolist(), nbest.hyps)]
    assert pair_models.cached_pair_scores(metric, rows, cache, "t").tobytes() == column.tobytes()


@pytest.mark.parametrize("name", ["bertscore", "bleurt"])
def test_the_column_is_what_the_oracle_and_a_tuner_pick_by(models, name, nbest):
    scored = api.add_features(nbest, name, references=[REF], **{f"{name}_model": models[name]})
    column = scored.column(name)
    cls = {"bertscore": bertscore.BERTScoreModel, "bleurt": bleurt.BLEURTModel}[name]
    own = pair_models.cached_pair_scores(cls(models[name]), [(h, REF[i]) for i, h in
                                                            zip(nbest.sentence_of_hyp.tolist(), nbest.hyps)], None, "t")
    np.testing.assert_allclose(column, own, atol=1e-12)
    oracle = api.oracle(scored, metric=f"column:{name}")
    best = [int(np.argmax(column[a:b])) + a for a, b in zip(scored.offsets[:-1], scored.offsets[1:])]
    assert list(oracle.rows) == best   # higher is better
    from rerank.tuning import objective_metric

    tuning = objective_metric(f"column:{name}", scored, None)   # what `rerank tune --metric column:NAME` maximises
    assert tuning.info.higher_is_better and tuning.columns == (name,)
    np.testing.assert_array_equal(tuning.sentence_scores(), column)
    picks = np.array(best)
    assert float(tuning.objective(tuning.stats[picks].sum(axis=0))) == pytest.approx(float(np.mean(column[picks])))


@pytest.mark.parametrize("name", ["bertscore", "bleurt"])
def test_mbr_is_the_posterior_mean_of_the_pair_scores(models, name, nbest):
    from rerank.consensus import MBROptions, make_utility, mbr_scores, posterior

    utility = make_utility(name, models[name], None)
    scores = nbest.column("nmt")
    got = mbr_scores(nbest, scores, MBROptions(utility=name, model=models[name]), model=utility)
    cls = {"bertscore": bertscore.BERTScoreModel, "bleurt": bleurt.BLEURTModel}[name]
    p = posterior(scores, nbest.offsets, 1.0)
    expected = np.zeros(nbest.n_hyps)
    for a, b in zip(nbest.offsets[:-1], nbest.offsets[1:]):
        for i in range(a, b):
            pairs = [(nbest.hyps[i], nbest.hyps[j]) for j in range(a, b)]
            u = pair_models.cached_pair_scores(cls(models[name]), pairs, None, "t")
            expected[i] = 100 * float(np.dot(p[a:b], u))
    np.testing.assert_allclose(got, expected, atol=1e-3)   # in percent: 1e-5 of a score, float32 in other batches
    with pytest.raises(InputError, match="pairwise only|encodes the hypothesis and the reference together"):
        mbr_scores(nbest, scores, MBROptions(utility=name, model=models[name], method="aggregate"), model=utility)


@pytest.mark.parametrize("name", ["bertscore", "bleurt"])
def test_the_pair_decoders_take_them_and_the_others_refuse_in_one_line(models, name, nbest, tmp_path):
    from rerank.consensus import MBROptions, make_utility, mbr_scores

    utility = make_utility(name, models[name], None)
    scores = nbest.column("nmt")
    exact = mbr_scores(nbest, scores, MBROptions(utility=name, model=models[name]), model=utility)
    for method, keywords in (("probabilistic", {"sample_ratio": 1.0}), ("pruning", {"pruning_schedule": [20]})):
        got = mbr_scores(nbest, scores, MBROptions(utility=name, model=models[name], method=method, **keywords),
                         model=utility)
        np.testing.assert_allclose(got, exact, atol=1e-9)   # every pair sampled, every reference at the first step: exact
    for method, words in (("centroid", f"the {name} utility has no embeddings"), ("c2f", "ranks by the aggregate")):
        with pytest.raises(InputError, match=words):
            mbr_scores(nbest, scores, MBROptions(utility=name, model=models[name], method=method), model=utility)
    folder = tmp_path / "matrix"
    first = mbr_scores(nbest, scores, MBROptions(utility=name, model=models[name], matrix=str(folder)), model=utility)
    again = mbr_scores(nbest, scores, MBROptions(utility=name, model=models[name], matrix=str(folder)),
                       model=make_utility(name, models[name], None))
    assert first.tobytes() == again.tobytes() and np.allclose(first, exact, atol=1e-9)
    other = {"bertscore": "bleurt", "bleurt": "bertscore"}[name]
    with pytest.raises(InputError, match="the utility matrix was made by"):
        mbr_scores(nbest, scores, MBROptions(utility=other, model=models[other], matrix=str(folder)),
                   model=make_utility(other, models[other], None))


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def write(tmp_path, **files):
    for name, lines in files.items():
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    return {name: str(tmp_path / name) for name in files}


def test_eval_prints_both_and_refuses_a_bad_model_in_one_line(models, tmp_path, capsys):
    f = write(tmp_path, ref=REF, a=CAP1, b=CAP2)
    base = ["eval", "-r", f["ref"], "-b", f["a"], f["b"], "--metrics", "bleu", "--ar", "100", "--bootstrap", "0",
            "--no-score-cache", "--quiet"]
    assert main([*base, "--bertscore-model", models["bertscore"], "--bleurt-model", models["bleurt"], "--to",
                 "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["metrics"] == ["bleu", "bertscore", "bleurt"]
    cell = {(r["system"], r["metric"]): r["score"] for r in out["results"]}
    own = own_bertscore(models["bertscore"], CAP2, REF, 2)
    assert cell[("b", "bertscore")] == pytest.approx(float(own.mean()), abs=1e-6)
    assert cell[("b", "bleurt")] == pytest.approx(float(port_forward(models["bleurt"], zip(CAP2, REF)).mean()),
                                                  abs=1e-5)
    capsys.readouterr()   # (bert_score's own loading above shows transformers' bar)
    for flag, bad, words in (("--bertscore-model", f["ref"], "bertscore needs a model directory; this is a file"),
                             ("--bertscore-model", str(tmp_path), "config.json is missing"),
                             ("--bleurt-model", models["bertscore"], "bleurt_config.json is missing"),
                             ("--bleurt-model", str(tmp_path / "none"), "bleurt needs a model directory")):
        assert main([*base, flag, bad, "-o", str(tmp_path / "t.txt")]) == 2
        line = one_error_line(capsys)
        assert words in line and line.startswith("rerank eval: error: "), line
        assert not (tmp_path / "t.txt").exists()
    assert main([*base, "--bertscore-model", models["bertscore"], "--bertscore-layer", "3"]) == 2
    assert "BERTScore layer 3: the model has 2 layers (give 0-2)" in one_error_line(capsys)


def test_a_bleurt_model_whose_weights_do_not_fit_or_pickle_code_is_refused(models, tmp_path, capsys):
    import shutil

    bad = shutil.copytree(models["bleurt"], str(tmp_path / "bad"))
    os.remove(os.path.join(bad, "model.safetensors"))
    torch.save({"head.weight": torch.zeros(1, 32), "callback": os.system}, os.path.join(bad, "model.pt"))
    with pytest.raises(InputError, match="refused: the weights file pickles objects"):
        pair_models.cached_pair_scores(bleurt.BLEURTModel(bad), [("a", "b")], None, "t")
    torch.save({"head.weight": torch.zeros(1, 32)}, os.path.join(bad, "model.pt"))
    with pytest.raises(InputError, match="cannot load the model of bleurt offline .*do not fit the config"):
        pair_models.cached_pair_scores(bleurt.BLEURTModel(bad), [("a", "b")], None, "t")
    from safetensors.torch import load_file

    state = load_file(os.path.join(models["bleurt"], "model.safetensors"))
    state["head.weight"] = torch.zeros(1, 16)
    torch.save(state, os.path.join(bad, "model.pt"))
    with pytest.raises(InputError, match=r"1 of another shape \(first: head.weight \(1, 16\), the config's \(1, 32\)\)"):
        pair_models.cached_pair_scores(bleurt.BLEURTModel(bad), [("a", "b")], None, "t")


def test_rules_of_the_options_say_one_message(tmp_path, capsys):
    from tests.test_option_rules_eval import api_message, cli_message, eval_options

    f = write(tmp_path, ref=REF, a=CAP1, b=CAP2)
    rules = {
        "bertscore without its model": (["--metrics", "bleu,bertscore"], eval_options(metrics=("bleu", "bertscore"))),
        "bleurt without its model": (["--metrics", "bleurt"], eval_options(metrics=("bleurt",))),
        "a layer without bertscore": (["--metrics", "bleu", "--bertscore-layer", "1"],
                                      eval_options(metrics=("bleu",), bertscore_layer=1)),
        "rescaling without bertscore": (["--metrics", "bleu", "--bertscore-rescale", f["ref"]],
                                        eval_options(metrics=("bleu",), bertscore_rescale=f["ref"])),
        "a negative layer": (["--metrics", "bleu", "--bertscore-layer", "-1"],
                             eval_options(metrics=("bleu",), bertscore_layer=-1)),
    }
    for extra, call in rules.values():
        argv = ["eval", "-r", f["ref"], "-b", f["a"], f["b"], "--ar", "10", "--bootstrap", "0", *extra]
        assert cli_message(argv, capsys) == api_message(call)


def test_a_bad_baseline_file_is_one_line(models, tmp_path):
    short = tmp_path / "short.tsv"
    short.write_text("LAYER,P,R,F\n0,0.1,0.2,0.3\n")
    with pytest.raises(InputError, match="rows for layers 0-0, not layer 2"):
        bertscore.BERTScoreModel(models["bertscore"], rescale=str(short))
    junk = tmp_path / "junk.tsv"
    junk.write_text("LAYER,P,R,F\n0,a,b,c\n1,a,b,c\n2,x\n")
    with pytest.raises(InputError, match="line 4 of the BERTScore baseline file is not LAYER,P,R,F numbers"):
        bertscore.BERTScoreModel(models["bertscore"], rescale=str(junk))


@pytest.mark.skipif(torch.cuda.is_available(), reason="the fallback of a machine without CUDA")
@pytest.mark.parametrize("name", ["bertscore", "bleurt"])
def test_cuda_without_cuda_falls_back_once_with_the_same_scores(models, name, caplog):
    cls = {"bertscore": bertscore.BERTScoreModel, "bleurt": bleurt.BLEURTModel}[name]
    pairs = list(zip(CAP1 + CAP2, REF + REF))
    with caplog.at_level("WARNING", logger="rerank"):
        on_cuda = pair_models.cached_pair_scores(cls(models[name], device="cuda", batch_size=4), pairs, None, "t")
    assert sum("CUDA is not available" in r.getMessage() for r in caplog.records) == 1
    np.testing.assert_array_equal(on_cuda, pair_models.cached_pair_scores(cls(models[name], batch_size=4), pairs,
                                                                          None, "t"))
