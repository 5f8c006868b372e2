"""`rerank info`'s statistics over the arrays equal the per-sentence loops they replaced."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rerank import dedup
from rerank.summary import column_stats, count_blank, count_repeats, summarize
from rerank.nbest import NBestList, StringColumn
from tests.cli_helpers import run, write


def reference_summary(nbest: NBestList) -> dict:
    """The summary as `rerank info` computed it before (commit 8b743c9): Python loops."""
    sizes = nbest.sizes
    blank = [(i, k + 1) for i in range(nbest.n_sentences) for k, h in enumerate(nbest.hyps[nbest.sentence(i)])
             if not h.strip()]
    empty = len(blank)
    duplicates = 0
    for i in range(nbest.n_sentences):
        block = nbest.hyps[nbest.sentence(i)]
        duplicates += len(block) - len(set(block))
    features = {}
    for k, name in enumerate(nbest.feature_names):
        column = nbest.features[:, k]
        features[name] = {"min": float(column.min()) if len(column) else None, "mean": float(column.mean()) if len(column) else None,
                          "max": float(column.max()) if len(column) else None, "missing": int(nbest.missing.get(name, 0))}
    problems = [] if nbest.n_hyps else ["no hypotheses: the n-best list is empty"]
    if nbest.n_hyps and all(size == 1 for size in sizes) and not nbest.feature_names and nbest.scores is None:
        problems.append("no n-best structure: one hypothesis per sentence and no features or scores (a plain text "
                        "file, such as references or a 1-best? see docs/formats.md)")
    if empty:
        problems.append(f"{empty} empty hypotheses: " + ", ".join(f"sentence {i} hypothesis {k}" for i, k in blank[:5])
                        + (f" and {empty - 5} more" if empty > 5 else ""))
    if duplicates:
        problems.append(f"{duplicates} hypotheses repeat an earlier string of the same list")
    for name, count in nbest.missing.items():
        problems.append(f"feature {name!r} missing on {count} hypotheses (filled with 0)")
    if len(sizes) and sizes.min() < sizes.max():
        problems.append(f"{int((sizes < sizes.max()).sum())} sentences have fewer than {int(sizes.max())} hypotheses")
    constant = [n for n, f in features.items() if f["min"] == f["max"]]
    if constant and nbest.n_hyps > 1:
        problems.append(f"constant features (cannot affect ranking): {', '.join(constant)}")
    return {"sentences": nbest.n_sentences, "hypotheses": nbest.n_hyps,
            "list_size": {"min": int(sizes.min()), "mean": float(sizes.mean()), "max": int(sizes.max())} if len(sizes) else None,
            "has_total_score": nbest.scores is not None, "features": features, "problems": problems}


# short and long strings, white space of every kind (ASCII, NBSP, ideographic, line separator), near-duplicates
TEXTS = st.one_of(st.sampled_from(["", " ", "  ", "\t", "\xa0", "\u3000", "\u2028 ", " a", "a", "ab", "abcdefg", "abcdefgh",
                                   "abcdefghi", "a man in a red hat and a blue shirt", "a man in a blue hat and a red shirt",
                                   "Ein Mann", "Ein Mann ", "ä", "\u3042", "日本語の文"]),
                  st.text(alphabet=st.sampled_from(list("ab \xa0\u3000é日")), max_size=20))
VALUES = st.one_of(st.sampled_from([0.0, -0.0, 1.0, -1.5, 1e300, -1e-300, 0.1]), st.floats(-1e6, 1e6, allow_nan=False))


@st.composite
def nbest_lists(draw):
    sizes = draw(st.lists(st.integers(0, 6), max_size=8))
    n = sum(sizes)
    width = draw(st.integers(0, 3))
    hyps = [draw(TEXTS) for _ in range(n)]
    features = np.array([[draw(VALUES) for _ in range(width)] for _ in range(n)]).reshape(n, width)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    return NBestList(offsets, StringColumn.from_strings(hyps), features, [f"f{k}" for k in range(width)])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nbest_lists())
def test_summary_equals_the_loops(nbest):
    assert json.dumps(summarize(nbest)) == json.dumps(reference_summary(nbest))


def test_zero_signs_and_means_as_strided_columns():
    rng = np.random.default_rng(5)
    for n, width in [(1, 1), (7, 3), (129, 2), (5000, 21), (70001, 4)]:
        features = rng.normal(size=(n, width)) * 10.0 ** rng.integers(-5, 5, size=width)
        features[rng.random((n, width)) < 0.3] = 0.0
        features[rng.random((n, width)) < 0.3] = -0.0
        features[:, 0] = np.where(features[:, 0] > 0, -features[:, 0], features[:, 0])  # max is a zero
        stats = column_stats(features)
        for k in range(width):
            column = features[:, k]
            assert json.dumps(stats[k]) == json.dumps({"min": float(column.min()), "mean": float(column.mean()),
                                                       "max": float(column.max())})


def test_white_space_lead_bytes_cover_str_isspace():
    """count_blank decodes only strings whose first byte may begin a white-space character."""
    from rerank.summary import _SPACE_LEAD
    leads = {chr(c).encode("utf-8", "surrogatepass")[0] for c in range(0x110000) if chr(c).isspace()}
    assert leads <= set(np.flatnonzero(_SPACE_LEAD).tolist())
    spaces = [chr(c) for c in range(0x110000) if chr(c).isspace()]
    assert count_blank(StringColumn.from_strings(spaces + ["x" + s for s in spaces] + [""])) == len(spaces) + 1


def test_repeats_exact_on_colliding_hashes(monkeypatch):
    # every string hashes alike (rerank.dedup's hash forced to a constant): the count stays exact
    monkeypatch.setattr(dedup, "hash_items", lambda tiers, lengths, salt=None: np.zeros(len(lengths), np.uint64))
    a, b = "01234567 red MIDDLE!! blue 76543210", "01234567 der MIDDLE!! eulb 76543210"
    hyps = StringColumn.from_strings([a, b, a, b, b, a, "", "", " "])
    assert count_repeats(hyps, np.array([0, 2, 6, 9])) == 2 + 1
    assert count_repeats(hyps, np.array([0, 9])) == 5
    assert count_repeats(StringColumn.from_strings(["x"]), np.array([0, 1])) == 0


def test_cli_output_unchanged_on_edge_cases(tmp_path, capsys):
    lines = ["0 |||  ||| f= 1 g= -0.0 ||| 1", "0 ||| a ||| f= 2 g= 0.0 ||| 2", "0 ||| a ||| f= 2 g= 0 ||| 2",
             "1 ||| \u3000 ||| f= 1 g= 0 ||| 1", "2 ||| b ||| f= 1e300 g= -0.0 ||| 1"]
    path = write(tmp_path, "e.nbest", "\n".join(lines) + "\n")
    code, out, _ = run(["info", path], capsys)
    assert code == 0 and out == (
        f"file:        {path}\nformat:      moses (detected)\n"
        "sentences:   3\nhypotheses:  5\nlist size:   min 1  mean 1.67  max 3\ntotal score: yes\n"
        "features:    2\n  f  min 1  mean 2e+299  max 1e+300\n  g  min -0  mean 0  max -0\nproblems:    \n"
        "  - 2 empty hypotheses: sentence 0 hypothesis 1, sentence 1 hypothesis 1\n"
        "  - 1 hypotheses repeat an earlier string of the same list\n"
        "  - 2 sentences have fewer than 3 hypotheses\n  - constant features (cannot affect ranking): g\n")
    from rerank.formats import read_nbest
    code, out, _ = run(["info", path, "--json"], capsys)
    read = {"format": "moses", "detected": True, "text": {"post_process": "none", "unescape": "none"}}
    assert code == 0 and out == json.dumps({**read, **reference_summary(read_nbest(path))}, indent=2) + "\n"


def test_string_column_iterates_in_blocks_as_strings():
    strings = [f"s{k} ä\u2028" if k % 7 else "" for k in range(9000)] + ["a\nb", "\r", "x"]
    assert list(StringColumn.from_strings(strings)) == strings
    assert list(StringColumn.from_strings([])) == []


def test_a_plain_text_file_is_said_to_hold_no_nbest_structure(tmp_path, capsys):
    """References or a 1-best read as an n-best list: one hypothesis per sentence, no features; info
    says so instead of "problems: none". A real list (several hypotheses or features) does not."""
    plain = write(tmp_path, "ref.de", "ein Hund\nzwei Katzen\n")
    code, out, _ = run(["info", plain], capsys)
    assert code == 0 and "no n-best structure" in out
    nbest = write(tmp_path, "l.nbest", "0 ||| ein Hund ||| tm= -1 ||| -1\n0 ||| der Hund ||| tm= -2 ||| -2\n")
    code, out, _ = run(["info", nbest], capsys)
    assert code == 0 and "no n-best structure" not in out
