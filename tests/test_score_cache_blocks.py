"""The score cache is written in blocks as scoring goes (rerank.score_cache.score_in_blocks): a
run stopped part-way -- an exception, Ctrl-C, kill -9 -- keeps every block it finished, the rerun
scores only the rest and says how many it read, and the scores are those of an uninterrupted run.
Held for the model backends (nmt/backends.py), the sentence encoders' sim and COMET's predict."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rerank import score_cache
from rerank.device import resolve_device
from rerank.score_cache import ScoreCache, block_ranges, lookup, score_in_blocks

pytestmark = pytest.mark.faults


@given(st.lists(st.integers(1, 9), max_size=40), st.integers(1, 20))
def test_blocks_are_the_fewest_whole_batches_that_hold_a_block(sizes, block):
    ranges = block_ranges(sizes, block)
    assert [k for a, b in ranges for k in range(a, b)] == list(range(len(sizes)))   # every batch once, in order
    for a, b in ranges[:-1]:
        assert sum(sizes[a:b]) >= block > sum(sizes[a:b - 1])
    assert all(b > a for a, b in ranges)


def _batches(sizes):
    items = np.random.default_rng(len(sizes)).permutation(sum(sizes)).tolist()
    cuts = np.cumsum([0, *sizes])
    return [items[a:b] for a, b in zip(cuts, cuts[1:])]


@given(st.lists(st.integers(1, 6), min_size=1, max_size=30), st.integers(1, 12), st.booleans())
@settings(max_examples=60, deadline=None)
def test_each_block_is_stored_as_it_finishes_and_a_failure_keeps_the_finished_ones(sizes, block, per_batch):
    batches = _batches(sizes)
    truth = np.arange(sum(sizes), dtype=float) * 0.5 - 3.0

    def score(some):
        return truth[[k for batch in some for k in batch]]

    stored: list[tuple[list[int], np.ndarray]] = []
    values = score_in_blocks(batches, score, lambda items, v: stored.append((items, v.copy())), per_batch=per_batch,
                             block=block)
    np.testing.assert_array_equal(values, truth)
    ranges = block_ranges(sizes, block)
    assert [items for items, _ in stored] == [[k for batch in batches[a:b] for k in batch] for a, b in ranges]
    for items, v in stored:
        np.testing.assert_array_equal(v, truth[items])

    # the same run failing in its last block: every block before it was stored, nothing after
    failing = ranges[-1][0]
    calls, kept = [0], []

    def fails(some):
        calls[0] += len(some)
        if calls[0] > failing:
            raise KeyboardInterrupt
        return score(some)

    with pytest.raises(KeyboardInterrupt):
        score_in_blocks(batches, fails, lambda items, v: kept.append(items), per_batch=per_batch, block=block)
    assert kept == [items for items, _ in stored[:-1]]


def test_predict_gets_whole_batches_and_each_block_reaches_the_cache(tmp_path, monkeypatch):
    """COMET's predict is given whole batches of its length order (all full but the last), a block
    at a time, and every block is put in the cache before the next is predicted."""
    from rerank.metrics import comet

    monkeypatch.setattr(comet, "COMET_BLOCK", 4)
    cache = ScoreCache(str(tmp_path / "s.sqlite"))
    seen, sizes_at_call = [], []

    class Model:
        def predict(self, rows, batch_size, **options):
            seen.append([row["mt"] for row in rows])
            sizes_at_call.append(len(cache))
            return SimpleNamespace(scores=[float(len(row["mt"])) for row in rows])

    rows = [{"src": "s" * (i % 5 + 1), "mt": f"m{i}"} for i in range(11)]
    stored = []

    def put(items, scores):
        stored.append(len(items))
        cache.put("ns", [(rows[k]["src"], rows[k]["mt"]) for k in items], scores, np.ones(len(items)))

    values = comet.predict_scores(Model(), rows, 3, SimpleNamespace(type="cpu", index=None), put)
    assert values.tolist() == [float(len(row["mt"])) for row in rows]
    order = np.argsort([len(row["src"]) for row in rows], kind="stable").tolist()
    assert [m for call in seen for m in call] == [rows[i]["mt"] for i in order]   # the length order, once
    assert [len(call) for call in seen] == [6, 5]        # blocks of whole batches of 3: 3+3 >= 4, then 3+2
    assert stored == [6, 5] and sizes_at_call == [0, 6]  # the first block was in the cache before the second


def test_lookup_says_how_many_scores_came_from_the_cache(tmp_path, caplog):
    cache = ScoreCache(str(tmp_path / "s.sqlite"))
    pairs = [("a", "b"), ("c", "d"), ("e", "f")]
    with caplog.at_level(logging.WARNING, logger="rerank"):
        assert lookup(cache, "ns", pairs, "channel") == {}
    assert not caplog.records   # nothing cached: nothing said
    cache.put("ns", pairs[:2], [0.25, -1.5], [3, 4])
    with caplog.at_level(logging.WARNING, logger="rerank"):
        assert lookup(cache, "ns", pairs, "channel") == {0: (0.25, 3.0), 1: (-1.5, 4.0)}
    assert caplog.messages == [f"note: {cache.path}: 2 of 3 scores of channel from the score cache, 1 left to score"]


# the model backends: a tiny Marian with random weights (tests/conftest.py `tiny`)

SOURCES = ["A man in a red shirt is riding a bike.", "Two dogs run on the grass.", "A girl is climbing a tree.",
           "An old woman sells fruit at a market.", "Children play football in the street."]
HYPS = ["Ein Mann in einem roten Hemd fährt Fahrrad.", "Zwei Hunde rennen auf dem Gras.", "Ein Mädchen klettert.",
        "Eine alte Frau verkauft Obst.", "Kinder spielen Fußball auf der Straße.", "Ein Mann fährt.", "Zwei Hunde.",
        "Ein Mädchen klettert auf einen Baum.", "Eine Frau auf dem Markt.", "Kinder spielen."]


def _pairs():
    return [SOURCES[i % len(SOURCES)] for i in range(len(HYPS))], list(HYPS)


@pytest.mark.neural
def test_an_interrupted_model_run_keeps_its_finished_blocks_and_the_rerun_scores_the_rest(tiny, tmp_path, monkeypatch,
                                                                                        caplog):
    from rerank.nmt import backends
    from rerank.nmt.backends import TranslationSettings, translation_scores

    CPU = resolve_device("cpu")
    inputs, outputs = _pairs()
    settings_ = TranslationSettings(batch_tokens=1)   # a batch per pair
    whole, whole_counts = translation_scores(tiny["marian"], inputs, outputs, CPU, 1, settings_, "channel")
    monkeypatch.setattr(score_cache, "BLOCK_ITEMS", 3)
    path = str(tmp_path / "scores.sqlite")
    original = backends.HFTranslationScorer.score_ids
    calls = []

    def interrupted(self, ins, outs):
        if len(calls) == 7:
            raise KeyboardInterrupt   # Ctrl-C during the third block
        calls.append(len(outs))
        return original(self, ins, outs)

    monkeypatch.setattr(backends.HFTranslationScorer, "score_ids", interrupted)
    cache = ScoreCache(path)
    with pytest.raises(KeyboardInterrupt):
        translation_scores(tiny["marian"], inputs, outputs, CPU, 1, settings_, "channel", cache=cache)
    cache.close()
    assert len(ScoreCache(path)) == 6   # two blocks of 3 finished; the third's one scored pair is not kept

    scored = []
    monkeypatch.setattr(backends.HFTranslationScorer, "score_ids",
                        lambda self, ins, outs: scored.extend(outs) or original(self, ins, outs))
    cache = ScoreCache(path)
    with caplog.at_level(logging.WARNING, logger="rerank"):
        again, counts = translation_scores(tiny["marian"], inputs, outputs, CPU, 1, settings_, "channel", cache=cache)
    assert len(scored) == len(HYPS) - 6   # the rerun scores only the rest
    assert f"6 of {len(HYPS)} scores of channel from the score cache, {len(HYPS) - 6} left to score" in caplog.text
    np.testing.assert_array_equal(counts, whole_counts)
    np.testing.assert_allclose(again, whole, rtol=0, atol=1e-5)   # batches of one pair: the same batches
    assert len(cache) == len(HYPS)


@pytest.mark.neural
def test_kill_9_during_scoring_keeps_the_committed_blocks(tiny, tmp_path):
    """A process killed with SIGKILL in the middle of its third block: the cache it leaves opens,
    holds the two finished blocks, and the rerun completes it with the uninterrupted scores."""
    from rerank.nmt.backends import TranslationSettings, translation_scores

    CPU = resolve_device("cpu")
    path = str(tmp_path / "scores.sqlite")
    script = textwrap.dedent(f"""
        import os, signal
        from rerank import score_cache
        from rerank.nmt import backends
        from rerank.device import resolve_device
        from rerank.nmt.backends import TranslationSettings, translation_scores
        CPU = resolve_device("cpu")
        score_cache.BLOCK_ITEMS = 3
        original, calls = backends.HFTranslationScorer.score_ids, []
        def killed(self, ins, outs):
            if len(calls) == 7:
                os.kill(os.getpid(), signal.SIGKILL)
            calls.append(1)
            return original(self, ins, outs)
        backends.HFTranslationScorer.score_ids = killed
        translation_scores({tiny["marian"]!r}, {_pairs()[0]!r}, {_pairs()[1]!r}, CPU, 1,
                           TranslationSettings(batch_tokens=1), "channel", cache=score_cache.ScoreCache({path!r}))
    """)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert done.returncode == -9, done.stderr[-2000:]
    assert len(ScoreCache(path)) == 6
    inputs, outputs = _pairs()
    again, _ = translation_scores(tiny["marian"], inputs, outputs, CPU, 1, TranslationSettings(batch_tokens=1),
                                  "channel", cache=ScoreCache(path))
    whole, _ = translation_scores(tiny["marian"], inputs, outputs, CPU, 1, TranslationSettings(batch_tokens=1),
                                  "channel")
    np.testing.assert_allclose(again, whole, rtol=0, atol=1e-5)
    assert len(ScoreCache(path)) == len(HYPS)


@pytest.mark.neural
def test_sim_writes_its_cache_a_block_of_pairs_at_a_time(tiny, tmp_path, monkeypatch):
    from rerank.embeddings import sentence_encoders
    from rerank.features import FeatureContext
    from rerank.nbest import NBestList

    nbest = NBestList.from_lists([HYPS[:5], HYPS[5:]], [np.zeros(5), np.zeros(5)], ["nmt"])
    sources = SOURCES[:2]
    monkeypatch.setattr(score_cache, "BLOCK_ITEMS", 4)
    path = str(tmp_path / "scores.sqlite")
    original, calls = sentence_encoders.cosine_pairs, []

    def interrupted(encoder, lefts, rights, batch_size, progress=False):
        if len(calls) == 2:
            raise KeyboardInterrupt
        calls.append(len(lefts))
        return original(encoder, lefts, rights, batch_size)

    monkeypatch.setattr(sentence_encoders, "cosine_pairs", interrupted)
    feature, options = sentence_encoders.SimFeature(), sentence_encoders.SimFeature.Options(model=tiny["st"])
    with pytest.raises(KeyboardInterrupt):
        feature.compute(nbest, ["sim"], FeatureContext(sources=sources, cache=path), options)
    assert calls == [4, 4] and len(ScoreCache(path)) == 8
    monkeypatch.setattr(sentence_encoders, "cosine_pairs", original)
    again = feature.compute(nbest, ["sim"], FeatureContext(sources=sources, cache=path), options)["sim"]
    whole = feature.compute(nbest, ["sim"], FeatureContext(sources=sources), options)["sim"]
    np.testing.assert_allclose(again, whole, rtol=0, atol=1e-6)
