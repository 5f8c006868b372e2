"""rerank.dedup numbers items exactly as a Python dict keyed by their content does, also when every
hash collides (a collision may cost time, never merge two different items)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rerank import dedup


def reference(keys: list) -> tuple[np.ndarray, np.ndarray]:
    """(ids, leads) by a dict: ids in order of first appearance, leads the first item of each."""
    first: dict = {}
    ids = [first.setdefault(k, len(first)) for k in keys]
    leads = sorted({v: i for i, v in reversed(list(enumerate(ids)))}.values())
    return np.asarray(ids, dtype=np.int64).reshape(-1), np.asarray(leads, dtype=np.int64).reshape(-1)


@pytest.fixture(params=[False, True], ids=["hashed", "all-colliding"])
def colliding(request, monkeypatch):
    if request.param:
        monkeypatch.setattr(dedup, "hash_items", lambda tiers, lengths, salt=None: np.zeros(len(lengths), np.uint64))
    return request.param


# items drawn from few distinct ones (many repeats), of lengths around every read width and LONG
PIECES = [b"", b"a", b"ab", b"b" * 7, b"b" * 8, b"b" * 9, b"x" * 23 + b"y", b"x" * 24, b"x" * 47 + b"z",
          b"x" * 48, b"q" * 239, b"q" * 240, b"q" * 241, b"q" * 300 + b"r", b"q" * 300 + b"s", b"\x00\xff"]


@st.composite
def byte_items(draw):
    items = draw(st.lists(st.sampled_from(PIECES) | st.binary(max_size=60), max_size=40))
    salt = draw(st.lists(st.integers(0, 2), min_size=len(items), max_size=len(items)))
    gaps = draw(st.lists(st.integers(0, 3), min_size=len(items), max_size=len(items)))
    buf, starts = bytearray(), []
    for item, gap in zip(items, gaps):  # items apart, with junk bytes between them that must not matter
        buf += b"\xaa" * gap
        starts.append(len(buf))
        buf += item
    return bytes(buf), np.asarray(starts, dtype=np.int64), np.asarray([len(i) for i in items], dtype=np.int64), \
        items, np.asarray(salt, dtype=np.int64)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])  # a fixed patch
@given(case=byte_items(), width=st.sampled_from([8, 16, 24]), salted=st.booleans())
def test_distinct_bytes_equals_a_dict(colliding, case, width, salted):
    buf, starts, lengths, items, salt = case
    ids, leads = dedup.distinct_bytes(buf, starts, lengths, salt=salt if salted else None, width=width)
    want = reference(list(zip(salt.tolist(), items)) if salted else items)
    assert np.array_equal(ids, want[0]) and np.array_equal(leads, want[1])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])  # a fixed patch
@given(rows=st.lists(st.lists(st.sampled_from([0.0, -0.0, 1.0, 2.5, float("nan")]), min_size=3, max_size=3),
                     max_size=40),
       width=st.integers(0, 3), dtype=st.sampled_from([np.float64, np.float32, np.int8]), salted=st.booleans(),
       data=st.data())
def test_distinct_rows_equals_a_dict(colliding, rows, width, dtype, salted, data):
    with np.errstate(invalid="ignore"):
        matrix = np.array(rows, dtype=np.float64).reshape(len(rows), 3)[:, :width].astype(dtype)
    salt = np.asarray(data.draw(st.lists(st.integers(0, 2), min_size=len(rows), max_size=len(rows))), dtype=np.int64)
    ids, leads = dedup.distinct_rows(matrix, salt=salt if salted else None)
    keys = [row.tobytes() for row in matrix]
    want = reference(list(zip(salt.tolist(), keys)) if salted else keys)
    assert np.array_equal(ids, want[0]) and np.array_equal(leads, want[1])


@settings(max_examples=200, deadline=None)
@given(case=byte_items())
def test_equal_to_previous(case):
    buf, starts, lengths, items, _ = case
    same = dedup.equal_to_previous(dedup.padded(buf), starts, lengths)
    assert same.tolist() == [a == b for a, b in zip(items[1:], items[:-1])]


def test_large_random_arrays_with_forced_collisions(colliding):
    """Many items, a few thousand distinct: one hash for all of them still never merges two."""
    rng = np.random.default_rng(7)
    pool = [rng.bytes(int(n)) for n in rng.integers(0, 90, 3000)]
    items = [pool[i] for i in rng.integers(0, len(pool), 20000)]
    buf = b"".join(items)
    lengths = np.asarray([len(i) for i in items], dtype=np.int64)
    salt = rng.integers(0, 4, len(items))
    ids, leads = dedup.distinct_bytes(buf, np.cumsum(lengths) - lengths, lengths, salt=salt)
    want = reference(list(zip(salt.tolist(), items)))
    assert np.array_equal(ids, want[0]) and np.array_equal(leads, want[1])


@settings(max_examples=200, deadline=None)
@given(case=byte_items())
def test_distinct_index_numbers_python_objects_as_the_bytes_are_numbered(case):
    """distinct_index (a dict, for Python objects): each item's position in the distinct items,
    which appear once each, in order of first appearance; the same numbers distinct_bytes gives
    the items' bytes, and for strings and tuples alike."""
    buf, starts, lengths, items, salt = case
    index, distinct = dedup.distinct_index(items)
    assert index.dtype == np.int64 and index.shape == (len(items),)
    assert [distinct[i] for i in index.tolist()] == items and len(set(distinct)) == len(distinct)
    assert [items.index(d) for d in distinct] == sorted(items.index(d) for d in distinct)
    assert np.array_equal(index, dedup.distinct_bytes(buf, starts, lengths)[0])
    pairs = list(zip(salt.tolist(), (item.decode("latin-1") for item in items)))
    assert np.array_equal(dedup.distinct_index(iter(pairs))[0], dedup.distinct_bytes(buf, starts, lengths, salt)[0])
