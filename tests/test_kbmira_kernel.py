"""The C epoch of k-best MIRA (mira/_kbmira.c) makes the updates of the numpy loop it replaces.

Parity: every objective kind (BLEU's background, a metric's fixed gains, a column), fixed features,
kbmira's model background, lists of one hypothesis, duplicated strings (the kernel's BLEU runs once
per distinct statistics row); the same weights, averages, background and history to rounding.
"""

import shlex
import shutil
import sysconfig

import numpy as np
import pytest

from rerank.mira import kbmira as K
from rerank.nbest import NBestList
from rerank.tuning import prepare
from tests.mira_helpers import joshua

needs_kernel = pytest.mark.skipif(K._kernel is None, reason="C kernel not built")


def run(data, backend, monkeypatch, epochs=8, **options):
    monkeypatch.setenv("RERANK_MIRA_BACKEND", backend)
    assert K.backend() == backend
    return K.kbmira(data, seed=3, epochs=epochs, **options)


def with_repeats(seed=0):
    """The first 40 Joshua lists with every hypothesis repeated once under noisy features (so each
    string has two rows), three lists cut to one hypothesis, and an extra 'quality' column."""
    nbest, refs = joshua(0, 40)
    rng = np.random.default_rng(seed)
    hyps, feats = [], []
    for i in range(nbest.n_sentences):
        s = nbest.sentence(i)
        rows = np.repeat(np.arange(s.start, s.stop), 2)[: 1 if i in (3, 17, 29) else None]
        hyps.append([nbest.hyps[int(r)] for r in rows])
        feats.append(nbest.features[rows] + rng.normal(size=(len(rows), nbest.features.shape[1])) * 0.05)
    out = NBestList.from_lists(hyps, feats, nbest.feature_names)
    return out.with_feature("quality", rng.normal(size=out.n_hyps)), refs


@needs_kernel
@pytest.mark.parametrize("case", ["bleu", "bleu-model-bg", "bleu-fixed", "chrf", "ter", "column", "interpolated"])
def test_the_kernel_makes_the_numpy_loops_updates(case, monkeypatch):
    nbest, refs = with_repeats()
    names = [n for n in nbest.feature_names if n != "quality"]
    metric = {"chrf": "chrf", "ter": "ter", "column": "column:quality",
              "interpolated": "bleu=0.5,column:quality=0.5"}.get(case, "bleu")
    data = prepare(nbest, refs, metric=metric, fix=names[:2] if case == "bleu-fixed" else None)
    options = {"model_bg": True} if case == "bleu-model-bg" else {}
    a, b = run(data, "python", monkeypatch, **options), run(data, "c", monkeypatch, **options)
    assert b.best_epoch == a.best_epoch
    np.testing.assert_allclose(b.weights, a.weights, rtol=1e-10, atol=1e-13)
    assert [h["updates"] for h in b.history] == [h["updates"] for h in a.history]
    assert sum(h["updates"] for h in a.history) > 0
    np.testing.assert_allclose([h["avg_loss"] for h in b.history], [h["avg_loss"] for h in a.history], rtol=1e-9)
    np.testing.assert_allclose([h["score"] for h in b.history], [h["score"] for h in a.history], rtol=1e-12)


@needs_kernel
def test_one_epoch_leaves_the_same_state(monkeypatch):
    """w, the running sum, the update count and the background after one epoch, from a start that
    is not zero, visited in a given order with repeats."""
    nbest, refs = with_repeats(seed=1)
    data = prepare(nbest.select_features([n for n in nbest.feature_names if n != "quality"]), refs)
    order = np.random.default_rng(2).integers(0, nbest.n_sentences, size=3 * nbest.n_sentences).tolist()
    states = {}
    for backend in ("python", "c"):
        monkeypatch.setenv("RERANK_MIRA_BACKEND", backend)
        state = K.KBMira(data, np.linspace(-1.0, 1.0, len(data.feature_names)), C=0.05, decay=0.99)
        loss = state.epoch(order)
        states[backend] = (state, loss)
    (p, lp), (c, lc) = states["python"], states["c"]
    assert c.n_updates == p.n_updates > 0
    assert lc == pytest.approx(lp, rel=1e-10)
    for name in ("w", "total", "bg"):
        np.testing.assert_allclose(getattr(c, name), getattr(p, name), rtol=1e-10, atol=1e-12)


@needs_kernel
def test_the_kernel_refuses_what_it_cannot_read_safely():
    F = np.zeros((4, 2))
    off = np.array([0, 2, 4], dtype=np.int64)
    U = np.ones((2, 9))
    stat_of = np.array([0, 0, 1, 1], dtype=np.int64)
    uoff = np.array([0, 1, 2], dtype=np.int64)

    def call(**change):
        args = dict(F=F, off=off, order=np.array([0, 1], dtype=np.int64), w=np.zeros(2), total=np.zeros(2),
                    bg=np.ones(9), U=U, stat_of=stat_of, uoff=uoff, gains=None, mask=None)
        args.update(change)
        return K._kernel.epoch(*args.values(), 0.01, 0.999, False)

    assert call() == (0.0, 0)
    with pytest.raises(TypeError):
        call(F=F.astype(np.float32))
    with pytest.raises(ValueError, match="contiguous"):  # numpy's own refusal of the buffer
        call(F=np.zeros((4, 3))[:, :2])
    with pytest.raises(TypeError):
        call(off=off.astype(np.int32))
    with pytest.raises(ValueError, match="shapes"):
        call(w=np.zeros(3))
    with pytest.raises(ValueError, match="from 0 to the rows"):
        call(off=np.array([0, 2, 5], dtype=np.int64))
    with pytest.raises(ValueError, match="fall"):
        call(off=np.array([0, 3, 2, 4], dtype=np.int64), uoff=np.array([0, 1, 1, 2], dtype=np.int64))
    with pytest.raises(IndexError):
        call(order=np.array([2], dtype=np.int64))
    with pytest.raises(ValueError, match="list by list"):
        call(stat_of=np.array([0, 1, 1, 1], dtype=np.int64))
    with pytest.raises(ValueError, match="either"):
        call(gains=np.zeros(4))
    with pytest.raises(ValueError, match="either"):
        call(U=None, stat_of=None, uoff=None)
    w = np.zeros(2)
    w.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):  # w is written: numpy refuses it a writable buffer
        call(w=w)


def test_the_c_kernel_is_built_wherever_a_c_compiler_is():
    """An install with a C compiler builds rerank.mira._kbmira (optional=True would hide a broken build)."""
    cc = shlex.split(sysconfig.get_config_var("CC") or "cc")[:1] or ["cc"]
    if shutil.which(cc[0]) is None:
        pytest.skip(f"no C compiler ({cc[0]}): the numpy loop serves")
    assert K._kernel is not None, "a C compiler is here but rerank.mira._kbmira is not built: pip install -e ."
