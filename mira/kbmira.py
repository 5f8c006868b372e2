"""k-best batch MIRA (Cherry & Foster 2012) with the choices Moses `kbmira` makes.

Per epoch the sentences are visited in a seeded random order. For each, with the current w and
the background pseudo-document `bg` (9 BLEU statistics, initially all ones):

    bleu_j = exp(mean_n log((m_n + bg_m_n) / (c_n + bg_c_n)) + min(0, 1 - R / H)) * R
             with R = ref_len + bg_ref, H = c_1 + bg_c_1         (Chiang et al. 2008 scaling)
    hope = argmax(w.f + bleu), fear = argmax(w.f - bleu), model = argmax(w.f)  (first wins ties)

If hope != fear and bleu_hope > bleu_fear: loss = (bleu_hope - bleu_fear) - w.(f_hope - f_fear);
if loss > 0, w += min(C, loss / |d|^2) d with d = f_hope - f_fear on the tuned columns, and the
step counts for the average; in either case bg <- 0.999 bg + stats(hope) (model 1-best with
model_bg). The averaged weights (mean of w after each update) are scored on the whole tuning
set after every epoch with the corpus metric; the best epoch's averaged weights are returned,
best in the metric's direction (the lowest TER; rerank.metrics.registry), and as in kbmira an
epoch is returned even if the initial weights scored better.

BLEU is the metric whose statistics are BLEU's (`Metric.bleu_statistics`, rerank.metrics.bleu's
layout). Other metrics (chrF, TER, METEOR) have no BLEU background: the gain of hypothesis j is its
sentence-level score as a fraction (oriented: -TER) times the mean hypothesis length of its list,
fixed for the run -- the same order of magnitude as kbmira's length-scaled background BLEU, so
C keeps its meaning. The epochs are scored with the corpus metric as for BLEU. A column objective
(`column:NAME`) or an interpolation (`bleu=0.5,column:comet=0.5`) has no background either: the
gain is the sentence-level objective itself (a column's value; sum_k w_k x each component's, BLEU's
as sentence BLEU+1 in points), unscaled.

All statistics and features are precomputed per sentence as contiguous arrays. An epoch
(`KBMira.epoch`) visits the sentences with about twenty numpy calls each, into work arrays made
once per list length: the background BLEU is exp(v . log(K + bg) - max(R / H - 1, 0)) with
v = (1/4, 1/4, 1/4, 1/4, -1/4, -1/4, -1/4, -1/4, 1), the length scaling R folded into the
log-domain dot product (the same number as the formula above, to rounding). Where the package was
built with a C compiler, the epoch runs in the kernel `rerank.mira._kbmira` (mira/_kbmira.c): the
same loop without the per-call cost, the weights equal to rounding (tests/test_kbmira_kernel.py);
RERANK_MIRA_BACKEND=python selects the numpy loop. `hope_fear` and `visit` are the same rules one
sentence at a time (what the hand-worked tests read).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from rerank.dedup import distinct_rows
from rerank.metrics.bleu import CORRECT, REF_LEN, TOTAL
from rerank.tuning import TuningData
from rerank.progress import Progress, track

try:
    from rerank.mira import _kbmira as _kernel
except ImportError:  # built without a C compiler: the numpy loop
    _kernel = None  # type: ignore[assignment]


def backend() -> str:
    """'c' when the epochs run in the compiled kernel, else 'python' (also when RERANK_MIRA_BACKEND=python)."""
    return "c" if _kernel is not None and os.environ.get("RERANK_MIRA_BACKEND", "") != "python" else "python"

# mean over the 4 orders of log(matches) - log(counts): a dot product with this vector
_LOG_PREC = np.array([0.25] * 4 + [-0.25] * 4)
# ... plus log(reference length): the log of the length-scaled BLEU before its brevity term
_LOG_SCALED = np.array([0.25] * 4 + [-0.25] * 4 + [1.0])


def kbmira_stats(stats10: np.ndarray) -> np.ndarray:
    """sacrebleu-layout statistics (n, 10) -> kbmira's 9 (matches 1-4, counts 1-4, ref length)."""
    return np.ascontiguousarray(np.hstack([stats10[:, CORRECT], stats10[:, TOTAL], stats10[:, REF_LEN:REF_LEN + 1]]))


@dataclass
class MiraResult:
    weights: np.ndarray            # best epoch's averaged weights
    best_epoch: int                # 1-based (0 only when epochs = 0)
    initial_score: float           # the metric's own value (TER, not -TER)
    best_score: float              # the best epoch's value, best in the metric's direction
    history: list[dict] = field(default_factory=list)   # per epoch: score, updates, loss


def _bleu_bg_t(Kt: np.ndarray, bg: np.ndarray) -> np.ndarray:
    """The same on transposed statistics Kt (9, k): contiguous rows make the few numpy calls cheap."""
    S = Kt + bg[:, None]
    R = S[8]
    t = np.log(S[:8]).T @ _LOG_PREC
    t += np.minimum(1.0 - R / S[4], 0.0)
    np.exp(t, out=t)
    t *= R
    return t


def fixed_gains(data: TuningData) -> list[np.ndarray]:
    """Per sentence: the sentence-level score (fraction, higher is better) of each hypothesis
    times the mean hypothesis length in words of its list (see the module doc). A column or an
    interpolated objective (`TuningMetric.sentence`): the sentence-level objective as it is, on the
    objective's own scale (a column's value; an interpolation's sum_k w_k x component, BLEU+1 in points)."""
    scores = data.sentence_objectives()
    if data.metric.sentence is not None:
        bounds = data.offsets.tolist()
        return [np.ascontiguousarray(scores[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
    lengths = np.array([len(h.split()) for h in data.nbest.hyps], dtype=np.float64)
    bounds = data.offsets.tolist()
    return [scores[a:b] * max(lengths[a:b].mean(), 1.0) for a, b in zip(bounds[:-1], bounds[1:])]


class KBMira:
    """The state of one k-best MIRA run: weights, their running sum, the BLEU background."""

    def __init__(self, data: TuningData, w0: np.ndarray | None = None, *, C: float = 0.01, decay: float = 0.999,
                 model_bg: bool = False):
        n_feats = len(data.feature_names)
        self.w = np.zeros(n_feats) if w0 is None else np.array(w0, dtype=np.float64)
        self.total = np.zeros(n_feats)   # sum of w after every update step
        self.n_updates = 0
        self.bg = np.ones(9)
        self.C, self.decay, self.model_bg = C, decay, model_bg
        self.tuned = None if data.tuned.all() else data.tuned
        # the rows whole, as the C kernel reads them; the numpy loop's per-list copies (F, Kt) and the
        # kernel's distinct statistics rows (_kernel_inputs) are made from them when first used
        self._features = np.ascontiguousarray(data.features, dtype=np.float64)
        self._offsets = np.ascontiguousarray(data.offsets, dtype=np.int64)
        self._sentence_of_hyp = data.nbest.sentence_of_hyp
        self.n_lists = len(self._offsets) - 1
        bleu = bool(getattr(data.metric.scorer, "bleu_statistics", False))  # BLEU: the background BLEU of its stats
        self._K = kbmira_stats(data.stats) if bleu else None
        self.gains = None if bleu else fixed_gains(data)

    def _lists(self, rows: np.ndarray) -> list[np.ndarray]:
        bounds = self._offsets.tolist()
        return [np.ascontiguousarray(rows[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]

    @cached_property
    def F(self) -> list[np.ndarray]:
        """Each list's feature rows (the numpy loop's, `hope_fear`'s and `visit`'s)."""
        return self._lists(self._features)

    @cached_property
    def Kt(self) -> list[np.ndarray] | None:
        """Each list's kbmira statistics, transposed (9, k); None without BLEU."""
        return None if self._K is None else [np.ascontiguousarray(k.T) for k in self._lists(self._K)]

    @cached_property
    def _kernel_inputs(self) -> dict:
        """The C kernel's U, stat_of, uoff (each list's distinct statistics rows, numbered list by list:
        its BLEU runs once per row) or gains (concatenated)."""
        if self._K is None:
            gains = np.concatenate(self.gains) if self.gains else np.zeros(0)
            return {"U": None, "stat_of": None, "uoff": None, "gains": np.ascontiguousarray(gains, dtype=np.float64)}
        stat_of, leads = distinct_rows(self._K, salt=self._sentence_of_hyp)
        uoff = np.searchsorted(self._sentence_of_hyp[leads], np.arange(self.n_lists + 1), side="left")
        return {"U": np.ascontiguousarray(self._K[leads], dtype=np.float64), "stat_of": np.ascontiguousarray(stat_of,
                dtype=np.int64), "uoff": uoff.astype(np.int64), "gains": None}

    def epoch(self, order) -> float:
        """Visit the sentences in `order` (lists of one hypothesis are skipped) by the rules of
        `visit`, with its numpy calls writing into work arrays made once per list length; returns
        the summed loss of the updates."""
        w, total, bg = self.w, self.total, self.bg
        if w.base is not None or not w.flags.writeable or not w.flags.c_contiguous:  # updated in place below
            w = self.w = np.array(w, dtype=np.float64)
        if backend() == "c":
            return self._epoch_c(order)
        bg_col = bg[:, None]
        C, decay, model_bg, gains, Fs = self.C, self.decay, self.model_bg, self.gains, self.F
        Kts = self.Kt
        mask = None if self.tuned is None else self.tuned.astype(np.float64)
        d = np.empty_like(w)
        work: dict[int, tuple] = {}
        loss_sum, n_updates = 0.0, self.n_updates
        for i in order:
            F = Fs[i]
            k = len(F)
            if k < 2:
                continue
            if k not in work:
                S = np.empty((9, k))
                work[k] = (np.empty(k), np.empty(k), np.empty(k), np.empty(k), S, S[8], S[4])
            model, both, t, v, S, R, H = work[k]
            np.dot(F, w, out=model)
            if gains is None:
                np.add(Kts[i], bg_col, out=S)          # type: ignore[index]
                np.subtract(R, H, out=t)
                np.divide(t, H, out=t)                  # R / H - 1
                np.log(S, out=S)
                np.dot(_LOG_SCALED, S, out=v)
                np.maximum(t, 0.0, out=t)
                np.subtract(v, t, out=v)
                np.exp(v, out=v)
                bleu = v
            else:
                bleu = gains[i]
            np.add(model, bleu, out=both)
            hope = int(both.argmax())
            np.subtract(model, bleu, out=both)
            fear = int(both.argmax())
            if hope == fear:
                continue
            b_hope, b_fear = bleu.item(hope), bleu.item(fear)
            if not b_hope > b_fear:
                continue
            loss = (b_hope - b_fear) - (model.item(hope) - model.item(fear))
            if loss > 0:
                np.subtract(F[hope], F[fear], out=d)
                if mask is not None:
                    d *= mask
                sq = float(d @ d)
                d *= C if sq == 0.0 else min(C, loss / sq)
                w += d
                total += w
                n_updates += 1
                loss_sum += loss
            if gains is None:
                bg *= decay
                bg += Kts[i][:, int(model.argmax()) if model_bg else hope]   # type: ignore[index]
        self.n_updates = n_updates
        return loss_sum

    def _epoch_c(self, order) -> float:
        """`epoch` in the C kernel: w, total and bg updated in place."""
        for name in ("total", "bg"):
            a = getattr(self, name)
            if a.dtype != np.float64 or not a.flags.writeable or not a.flags.c_contiguous:
                setattr(self, name, np.array(a, dtype=np.float64))
        mask = None if self.tuned is None else np.ascontiguousarray(self.tuned, dtype=np.float64)
        a = self._kernel_inputs
        loss, updates = _kernel.epoch(self._features, self._offsets, np.asarray(order, dtype=np.int64).reshape(-1),
                                      self.w, self.total, self.bg, a["U"], a["stat_of"], a["uoff"], a["gains"], mask,
                                      float(self.C), float(self.decay), bool(self.model_bg))
        self.n_updates += updates
        return loss

    def gain(self, i: int) -> np.ndarray:
        return _bleu_bg_t(self.Kt[i], self.bg) if self.gains is None else self.gains[i]   # type: ignore[index]

    def hope_fear(self, i: int) -> tuple[int, int, int, np.ndarray, np.ndarray]:
        """(hope, fear, model) positions in sentence i's list, its background BLEU and model scores."""
        model = self.F[i] @ self.w
        bleu = self.gain(i)
        return int((model + bleu).argmax()), int((model - bleu).argmax()), int(model.argmax()), bleu, model

    def visit(self, i: int) -> float:
        """Process sentence i; returns the loss of the update made (0.0 if none)."""
        hope, fear, best, bleu, model = self.hope_fear(i)
        if hope == fear or not bleu.item(hope) > bleu.item(fear):
            return 0.0
        F = self.F[i]
        loss = (bleu.item(hope) - bleu.item(fear)) - (model.item(hope) - model.item(fear))
        if loss > 0:
            d = F[hope] - F[fear]
            if self.tuned is not None:
                d = np.where(self.tuned, d, 0.0)
            sq = float(d @ d)
            eta = self.C if sq == 0.0 else min(self.C, loss / sq)
            self.w = self.w + eta * d
            self.total += self.w
            self.n_updates += 1
        if self.gains is None:
            self.bg *= self.decay
            self.bg += self.Kt[i][:, best if self.model_bg else hope]   # type: ignore[index]
        return max(loss, 0.0)

    def average(self) -> np.ndarray:
        """Mean of w over the update steps so far (w itself before the first update)."""
        return self.total / self.n_updates if self.n_updates else self.w.copy()


def kbmira(data: TuningData, w0: np.ndarray | None = None, *, C: float = 0.01, epochs: int = 60,
           decay: float = 0.999, model_bg: bool = False, seed: int = 1, shuffle: bool = True,
           progress: Progress = False, on_epoch: Callable[[dict], None] | None = None) -> MiraResult:
    """Tune the weights of `data` (BLEU statistics) with k-best batch MIRA; see the module doc."""
    state = KBMira(data, w0, C=C, decay=decay, model_bg=model_bg)
    n_sent = state.n_lists
    rng = np.random.default_rng(seed)
    initial = data.evaluate(state.w)
    best_score, best_w, best_epoch = None, state.w.copy(), 0
    history = []
    for epoch in track(range(1, epochs + 1), progress, "kbmira", unit="epoch"):
        order = rng.permutation(n_sent).tolist() if shuffle else range(n_sent)
        before = state.n_updates
        epoch_loss = state.epoch(order)
        avg = state.average()
        score = data.evaluate(avg)
        record = {"epoch": epoch, "score": score, "updates": state.n_updates - before, "avg_loss": epoch_loss / n_sent}
        history.append(record)
        if on_epoch is not None:
            on_epoch(record)
        if best_score is None or data.metric.better(score, best_score):
            best_score, best_w, best_epoch = score, avg, epoch
    if best_epoch == 0 or best_score is None:  # (None only without epochs, when best_epoch is 0 too)
        best_score = initial
    return MiraResult(best_w, best_epoch, initial, best_score, history)
