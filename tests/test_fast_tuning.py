"""Vectorised duplicate merging and string grouping give exactly the row-by-row results."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rerank import dedup, tuning
from rerank.nbest import NBestList, StringColumn


@st.composite
def lists(draw):
    sizes = draw(st.lists(st.integers(1, 6), min_size=1, max_size=8))
    strings = st.sampled_from(["", "a", "b", "a b", "ä", "€ x", "ab", "ba"])
    values = st.sampled_from([0.0, -0.0, 1.0, 2.5, 1e300])
    n, width = sum(sizes), draw(st.integers(0, 3))
    hyps = [draw(strings) for _ in range(n)]
    features = np.array([[draw(values) for _ in range(width)] for _ in range(n)]).reshape(n, width)
    return NBestList(np.concatenate([[0], np.cumsum(sizes)]), hyps, features, [f"f{k}" for k in range(width)])


def unique_strings_loop(nbest: NBestList) -> tuple[np.ndarray, np.ndarray]:
    """unique_strings one row at a time: a dict of (sentence, string)."""
    first: dict = {}
    inverse = np.empty(nbest.n_hyps, dtype=np.int64)
    rows: list[int] = []
    for row, (i, hyp) in enumerate(zip(nbest.sentence_of_hyp.tolist(), nbest.hyps)):
        k = first.setdefault((i, hyp), len(rows))
        if k == len(rows):
            rows.append(row)
        inverse[row] = k
    return np.asarray(rows, dtype=np.int64), inverse


def merge_duplicates_loop(nbest: NBestList) -> np.ndarray:
    """merge_duplicates one row at a time: a set of (sentence, string, feature bytes)."""
    features = np.ascontiguousarray(nbest.features)
    seen: set = set()
    keep = []
    for row, (i, hyp) in enumerate(zip(nbest.sentence_of_hyp.tolist(), nbest.hyps)):
        key = (i, hyp, features[row].tobytes())
        if key not in seen:
            seen.add(key)
            keep.append(row)
    return np.asarray(keep, dtype=np.int64)


@settings(max_examples=200, deadline=None)
@given(nbest=lists())
def test_same_as_the_loops(nbest):
    rows, inverse = tuning.unique_strings(nbest)
    loop_rows, loop_inverse = unique_strings_loop(nbest)
    assert np.array_equal(rows, loop_rows) and np.array_equal(inverse, loop_inverse)
    assert np.array_equal(tuning.merge_duplicates(nbest), merge_duplicates_loop(nbest))


@settings(max_examples=200, deadline=None)
@given(nbest=lists())
def test_the_merged_lists_strings_come_from_the_whole_lists(nbest):
    """prepare reuses the input's distinct strings for the merged list (kept_strings): the same as
    computing them again on the merged list."""
    strings = tuning.unique_strings(nbest)
    kept = tuning.merge_duplicates(nbest, strings)
    merged = tuning._take_rows(nbest, kept)
    rows, inverse = tuning.kept_strings(strings, kept)
    loop_rows, loop_inverse = unique_strings_loop(merged)
    assert np.array_equal(rows, loop_rows) and np.array_equal(inverse, loop_inverse)


@settings(max_examples=50, deadline=None)
@given(nbest=lists())
def test_hash_collisions_change_nothing(nbest):
    real = dedup.hash_items
    dedup.hash_items = lambda tiers, lengths, salt=None: np.zeros(len(lengths), dtype=np.uint64)  # all collide
    try:
        rows, inverse = tuning.unique_strings(nbest)
        kept = tuning.merge_duplicates(nbest)
    finally:
        dedup.hash_items = real
    loop_rows, loop_inverse = unique_strings_loop(nbest)
    assert np.array_equal(rows, loop_rows) and np.array_equal(inverse, loop_inverse)
    assert np.array_equal(kept, merge_duplicates_loop(nbest))


@settings(max_examples=200, deadline=None)
@given(strings=st.lists(st.text(alphabet=st.sampled_from(list("ab\n ä€")), max_size=5), max_size=30),
       start=st.integers(-35, 35), stop=st.integers(-35, 35), step=st.sampled_from([None, 1, 2, -1]))
def test_string_column_slices_and_iteration(strings, start, stop, step):
    column = StringColumn.from_strings(strings)
    assert list(column) == strings
    assert column[start:stop:step] == strings[start:stop:step]
