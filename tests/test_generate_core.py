"""The parts of `rerank generate` that need no model (they run in the core install, without torch):
the options' rules, shards of whole blocks, seeds, merged draws, and MBR's posteriors over a list
that `rerank generate` sampled."""

from __future__ import annotations

import json

import numpy as np
import pytest
import sacrebleu

import rerank
from rerank.errors import InputError
from rerank.generation import (GENERATED_BY, GenerateOptions, batch_seed, config_path, generated_by, merge,
                               plan_blocks, shard_blocks)
from tests.cli_helpers import run


def test_shards_are_contiguous_ranges_of_whole_blocks_that_cover_the_input():
    for n_sentences in (1, 7, 100, 257):
        for block in (1, 4, 128):
            for k in (1, 2, 3, 5):
                ranges = [shard_blocks(n_sentences, block, f"{i}/{k}") for i in range(1, k + 1)]
                assert ranges[0][0] == 0 and ranges[-1][1] == n_sentences
                assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
                assert all(start % block == 0 for start, end in ranges if end > start)
    assert shard_blocks(10, 4, None) == (0, 10)


def test_batches_stay_in_their_block_within_the_budget_and_cover_each_sentence_once():
    lengths = [3, 9, 1, 4, 4, 12, 2, 7, 5, 6]
    options = GenerateOptions(model="m", n=4, batch_tokens=100, block=4)
    blocks = plan_blocks(lengths, 2, 10, options)
    assert sorted(i for b in blocks for batch in b for i in batch) == list(range(2, 10))
    for k, batches in enumerate(blocks):
        for batch in batches:
            assert all(2 + 4 * k <= i < 2 + 4 * (k + 1) for i in batch)
            assert len(batch) == 1 or len(batch) * 4 * 2 * max(lengths[i] for i in batch) <= 100


def test_seeds_differ_between_batches_and_blocks_and_repeat_for_the_same_place():
    seeds = {batch_seed(1, block, batch) for block in range(20) for batch in [None, *range(20)]}
    assert len(seeds) == 20 * 21
    assert batch_seed(1, 3, 4) == batch_seed(1, 3, 4) != batch_seed(2, 3, 4)


def test_merge_counts_each_distinct_draw_in_first_draw_order():
    assert merge(["b", "a", "b", "c", "a", "b"], False) == (["b", "a", "c"], [3, 2, 1])
    assert merge(["b", "a", "b"], True) == (["b", "a", "b"], [1, 1, 1])


@pytest.mark.parametrize("keywords, words", [
    ({"n": 0}, "n must be a positive integer"),
    ({"epsilon": 0.0}, "epsilon must be between 0 and 1"),
    ({"top_p": 1.5}, "top_p must be a number in (0, 1]"),
    ({"top_k": 0}, "top_k must be a positive integer"),
    ({"temperature": 0}, "temperature must be a positive finite number"),
    ({"shard": "0/2"}, "shard must be i/N"),
    ({"search": "greedy"}, "search must be one of sample, beam"),
])
def test_every_rule_is_refused_by_keyword_before_any_work(tmp_path, keywords, words):
    src = tmp_path / "src.txt"
    src.write_text("a b\n", encoding="utf-8")
    with pytest.raises(InputError, match=words.replace("(", r"\(").replace(")", r"\)")):
        rerank.generate(src, tmp_path / "out.jsonl", model=str(tmp_path), **keywords)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src.txt"]


def test_sampling_options_with_beam_search_are_refused():
    with pytest.raises(InputError, match="top_k is a sampling option"):
        GenerateOptions(model="m", search="beam", top_k=5)


def sampled_list(tmp_path, sampled: bool = True) -> str:
    """A list as `rerank generate` writes it (nmt, nmt_norm, count), with its config."""
    hyps = [["ein Hund", "ein Hund läuft", "Hund"], ["eine Katze", "Katze schläft"]]
    counts = [[5, 2, 1], [3, 1]]
    logp = [[-2.0, -3.5, -1.0], [-1.5, -2.5]]
    path = tmp_path / "s.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        for i, (hs, cs, ls) in enumerate(zip(hyps, counts, logp)):
            for h, c, lp in zip(hs, cs, ls):
                f.write(json.dumps({"id": i, "hyp": h, "features": {"nmt": lp, "nmt_norm": lp / 3, "count": c},
                                    "total": lp}) + "\n")
    with open(config_path(str(path)), "w", encoding="utf-8") as f:
        json.dump({"tool": GENERATED_BY, "search": "sample" if sampled else "beam"}, f)
    return str(path)


def expected_mbr(hyps: list[str], weights: np.ndarray) -> list[float]:
    w = np.asarray(weights, dtype=float) / np.sum(weights)
    return [sum(wj * sacrebleu.sentence_chrf(h, [o]).score for wj, o in zip(w, hyps)) for h in hyps]


@pytest.mark.parametrize("posterior", [None, "counts", "uniform", "softmax"])
def test_mbr_posteriors_of_a_sampled_list(tmp_path, capsys, posterior):
    """None on a sampled list is counts; counts is count / draws; uniform equal weights; softmax of nmt."""
    path = sampled_list(tmp_path)
    assert generated_by(path)["search"] == "sample"
    flags = [] if posterior is None else ["--mbr-posterior", posterior]
    code, _, err = run(["features", path, "--which", "mbr", "--mbr-utility", "chrf", *flags, "-o",
                        tmp_path / "m.jsonl", "--to", "jsonl"], capsys)
    assert code == 0, err
    got = rerank.read_nbest(str(tmp_path / "m.jsonl"))
    for i in range(got.n_sentences):
        lo, hi = got.offsets[i], got.offsets[i + 1]
        hyps = got.hyps[lo:hi]
        kind = posterior or "counts"
        weights = {"counts": got.column("count")[lo:hi], "uniform": np.ones(hi - lo),
                   "softmax": np.exp(got.column("nmt")[lo:hi])}[kind]
        np.testing.assert_allclose(got.column("mbr")[lo:hi], expected_mbr(hyps, weights), atol=1e-9)


def test_a_beam_list_keeps_the_softmax_default_and_a_list_without_counts_refuses_them(tmp_path, capsys):
    path = sampled_list(tmp_path, sampled=False)
    assert run(["features", path, "--which", "mbr", "--mbr-utility", "chrf", "-o", tmp_path / "m.jsonl", "--to",
                "jsonl"], capsys)[0] == 0
    got = rerank.read_nbest(str(tmp_path / "m.jsonl"))
    lo, hi = got.offsets[0], got.offsets[1]
    np.testing.assert_allclose(got.column("mbr")[lo:hi], expected_mbr(got.hyps[lo:hi], np.exp(got.column("nmt")[lo:hi])),
                               atol=1e-9)
    plain = tmp_path / "plain.nbest"
    plain.write_text("0 ||| a b ||| nmt= -1 ||| -1\n0 ||| a ||| nmt= -2 ||| -2\n", encoding="utf-8")
    code, _, err = run(["features", plain, "--which", "mbr", "--mbr-posterior", "counts", "-o", tmp_path / "x"], capsys)
    assert code == 2 and "--mbr-posterior counts needs the column count" in err and not (tmp_path / "x").exists()
    code, _, err = run(["features", path, "--which", "mbr", "--mbr-posterior", "uniform", "--mbr-temperature", "2",
                        "-o", tmp_path / "y"], capsys)
    assert code == 2 and "--mbr-temperature is for --mbr-posterior softmax" in err and not (tmp_path / "y").exists()
