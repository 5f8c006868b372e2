"""The Moses/Joshua writer, a block of rows at a time, writes the lines the per-row loop wrote."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rerank.formats.common import format_value
from rerank.formats.moses import iter_moses_lines
from rerank.nbest import NBestList


def reference_lines(nbest, style="moses", scores=None, first_id=0):
    """The writer before (commit 8b743c9): one row at a time."""
    scores = nbest.scores if scores is None else scores
    sent = nbest.sentence_of_hyp + first_id
    bounds = np.cumsum([0] + [w for _, w in nbest.groups])
    for row, hyp in enumerate(nbest.hyps):
        parts = []
        for (name, width), start in zip(nbest.groups, bounds[:-1]):
            values = " ".join(format_value(v) for v in nbest.features[row][start:start + width])
            parts.append(f"{name}={values}" if style == "joshua" and width == 1 else f"{name}= {values}")
        line = f"{sent[row]} ||| {hyp} ||| {' '.join(parts)}"
        if scores is not None:
            line += f" ||| {format_value(scores[row])}"
        yield line


@st.composite
def nbest_lists(draw):
    sizes = draw(st.lists(st.integers(1, 4), max_size=5))
    n = sum(sizes)
    names = draw(st.lists(st.sampled_from(["lm", "t{m}", "a}{b", "{0}", "x_1", "é"]), max_size=3, unique=True))
    groups = [(name, draw(st.integers(1, 3))) for name in names]
    columns = [name if w == 1 else f"{name}_{k}" for name, w in groups for k in range(w)]
    value = st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.sampled_from([0.0, -0.0, 1e-300, 1.5]))
    features = np.array([[draw(value) for _ in columns] for _ in range(n)]).reshape(n, len(columns))
    hyps = [draw(st.text(alphabet=st.sampled_from(list("ab {}=|\u00e4\t")), max_size=8)) for _ in range(n)]
    scores = np.array([draw(value) for _ in range(n)]) if draw(st.booleans()) else None
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    return NBestList(offsets, hyps, features, columns, groups, scores)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nbest_lists(), st.sampled_from(["moses", "joshua"]), st.integers(0, 3))
def test_lines_equal_the_row_loop(nbest, style, first_id):
    assert list(iter_moses_lines(nbest, style, first_id=first_id)) == list(reference_lines(nbest, style, first_id=first_id))
    other = np.arange(nbest.n_hyps) * -0.25
    assert list(iter_moses_lines(nbest, style, scores=other)) == list(reference_lines(nbest, style, scores=other))


def test_blocks_of_rows():
    n = 9000
    nbest = NBestList(np.array([0, 4500, n]), [f"h{k}" for k in range(n)], np.arange(2.0 * n).reshape(n, 2), ["a", "b"])
    assert list(iter_moses_lines(nbest)) == list(reference_lines(nbest))
