"""The shipped Multi30k n-best lists (rerank/data/multi30k/*best.gz) are complete and consistent,
and their 1-best and oracle BLEU match the recorded results (nmt_results.json)."""

import glob
import json
import os

import numpy as np
import pytest
import sacrebleu

from rerank.recipes.reproduce import NMT_COLUMNS, PUBLISHED_COLUMNS
from rerank.formats import read_nbest, write_nbest
from rerank.io import read_lines

DATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "rerank", "data", "multi30k")
LISTS = sorted(glob.glob(os.path.join(DATA, "*.*.*best.gz")))
SENTENCES = {"val": 1014, "test_2016": 1000}


@pytest.mark.skipif(not LISTS, reason="no n-best lists shipped")
@pytest.mark.parametrize("path", LISTS, ids=os.path.basename)
def test_list_is_complete_sorted_and_consistent(path):
    flavour, split, nb = os.path.basename(path).split(".")[:3]
    n = int(nb[: -len("best")])
    lst = read_nbest(path, fmt="moses")
    assert lst.n_sentences == SENTENCES[split]
    assert lst.feature_names in (NMT_COLUMNS, PUBLISHED_COLUMNS)
    for name in lst.feature_names[3:]:   # log-probabilities of the channel model and the LM, totals and per token
        assert np.all(lst.column(name) <= 0), name
    assert lst.sizes.min() >= 1 and lst.sizes.max() <= n
    # fewer only where duplicates were removed: BPE segmentations of the same words detokenise alike
    # (up to 3% of the 50-best lists of the shipped BPE models)
    assert (lst.sizes == n).mean() > 0.95 and np.median(lst.sizes) == n
    nmt, norm, length = (lst.column(c) for c in ("nmt", "nmt_norm", "len"))
    assert np.all(nmt <= 0) and np.allclose(lst.scores, norm)
    # alpha 1: log-prob / (tokens + </s>); a word is one token or more (BPE), so the divisor is at least len + 1
    nonzero = norm != 0
    divisor = nmt[nonzero] / norm[nonzero]
    tokens = np.round(divisor)   # a whole number of tokens: nmt / tokens is nmt_norm to the 4 decimals written
    assert np.all(tokens >= length[nonzero] + 1) and np.all(tokens <= 10 * (length[nonzero] + 1))
    assert np.all(np.abs(nmt[nonzero] / tokens - norm[nonzero]) <= 5e-5 + 5e-5 / tokens + 1e-9)
    for i in range(0, lst.n_sentences, 97):
        rows = lst.sentence(i)
        hyps = list(lst.hyps[rows])
        assert len(set(hyps)) == len(hyps)
        assert np.all(np.diff(lst.scores[rows]) <= 0)


@pytest.mark.skipif(not os.path.exists(os.path.join(DATA, "nmt_results.json")), reason="no results recorded")
def test_recorded_bleu_matches_shipped_lists():
    results = json.load(open(os.path.join(DATA, "nmt_results.json")))
    refs = read_lines(os.path.join(DATA, "test_2016_flickr.de.gz"))
    checked = 0
    for flavour, row in results.items():
        path = os.path.join(DATA, f"{flavour}.test_2016.20best.gz")
        # recipes.nmt_scores's record ("lists"), or the older one of recipes.nmt_multi30k_results
        recorded = row.get("lists", {}).get("test_2016.20best") or row.get("test_2016.beam20")
        if recorded is None or not os.path.exists(path):
            continue
        lst = read_nbest(path, fmt="moses")
        best = [lst.hyps[lst.offsets[i]] for i in range(lst.n_sentences)]
        assert sacrebleu.corpus_bleu(best, [refs]).score == pytest.approx(recorded["bleu"], abs=0.01)
        checked += 1
    assert checked > 0


@pytest.mark.neural
def test_nmt_oracle_is_the_rerank_oracle(tmp_path, capsys):
    """`nmt translate --ref` and `rerank oracle` pick the same hypotheses (sentence BLEU+1)."""
    from rerank.nmt.translate import oracle_bleu
    from rerank.cli import main

    path = os.path.join(DATA, "weak.test_2016.20best.gz")
    refs_path = os.path.join(DATA, "test_2016_flickr.de.gz")
    lst = read_nbest(path, fmt="moses").select_sentences(range(120))
    refs = read_lines(refs_path)[:120]
    lists = [list(lst.hyps[lst.offsets[i]:lst.offsets[i + 1]]) for i in range(lst.n_sentences)]
    ours = oracle_bleu(lists, refs)
    assert ours > sacrebleu.corpus_bleu([h[0] for h in lists], [refs]).score + 3
    first = [h for hs in lists for h in hs[:1]]
    assert oracle_bleu([[h] for h in first], refs) == pytest.approx(sacrebleu.corpus_bleu(first, [refs]).score, abs=1e-9)
    small, ref_file = tmp_path / "l.nbest", tmp_path / "ref.de"
    write_nbest(lst, str(small))
    ref_file.write_text("\n".join(refs) + "\n", encoding="utf-8")
    assert main(["oracle", str(small), "-r", str(ref_file)]) == 0
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("oracle BLEU")][0]
    assert float(printed.split("=")[1].split()[0]) == pytest.approx(ours, abs=0.005)
