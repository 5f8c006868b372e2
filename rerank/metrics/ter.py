"""TER statistics with sacrebleu's exact numbers, computed on token ids (a C kernel, a Python fallback).

sacrebleu 2.6's TER (sacrebleu/metrics/lib_ter.py) runs its shift search and beam edit distance on
lists of strings in Python: about 250 times slower than BLEU's statistics. This module computes
the same numbers: sacrebleu's own TercomTokenizer (applied as TER applies it: rstrip, tokenise,
split; a reference tokenised twice, as TER does), tokens mapped to int32 ids (`WordIds`), and
`translation_edit_rate`'s edit count of every (hypothesis, reference) pair in one call of the
compiled kernel `rerank.metrics._ter` (built from _ter.c when the package is installed with a C
compiler), or of `_edits`, the same algorithm in Python, where the kernel is missing or
`RERANK_TER_BACKEND=python` asks for it.

What has to match, step by step (both backends; tests/test_ter.py checks them against sacrebleu):
the beam of the edit distance (row i keeps the cells [floor(i*m/n) -+ 25), the width widened to
ceil(m/n/2 + 25) for extreme length ratios, the last row in full, every other cell infinite and
never chosen), its tie order (substitution or match, then deletion, then insertion, on strict
improvement), the traceback read with insertions and deletions swapped (the alignment and the
error flags), the shift candidates in sacrebleu's order and filters (blocks of at most 10 words
moved at most 50 positions), their ranking (gain, length, -start, -target), and the cap of 1000
candidates per pair over all its rounds (the round that reaches it is dropped). sacrebleu's
row cache is only a speed-up: here a candidate's edit distance starts from the rows of the prefix
it shares with the hypothesis it shifts.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

import numpy as np
from sacrebleu.tokenizers.tokenizer_ter import TercomTokenizer

try:
    from rerank.metrics import _ter as _kernel
except ImportError:  # built without a C compiler: the Python fallback
    _kernel = None  # type: ignore[assignment]

BACKEND: str = "c" if _kernel is not None and os.environ.get("RERANK_TER_BACKEND", "") != "python" else "python"

_MAX_SHIFT_SIZE = 10
_MAX_SHIFT_DIST = 50
_BEAM_WIDTH = 25
_MAX_SHIFT_CANDIDATES = 1000
_INF = 10 ** 16  # sacrebleu's _INT_INFINITY: cells outside the beam
_NOP, _SUB, _DEL, _INS, _UNDEF = 1, 2, 3, 4, 0  # the DP's labels (deletion: a hypothesis word)


# -- tokens ------------------------------------------------------------------------------------------

def tokenize(texts: Sequence[str], *, case_sensitive: bool = False, normalized: bool = False,
             no_punct: bool = False, asian_support: bool = False, reference: bool = False) -> list[list[str]]:
    """The words TER compares: sacrebleu's TercomTokenizer of each text's rstrip(), split on whitespace.

    `reference`: tokenised twice, as sacrebleu's TER tokenises references (`_cache_references`
    preprocesses each line and `_extract_reference_info` preprocesses it again). That changes words
    only with `normalized` ("dog's," is "dog's ," after one pass, "dog 's ," after two); without it the tokeniser (lowercasing,
    punctuation removal, whitespace joining) is idempotent and one pass is enough.

    The tokeniser's own function is called without its lru_cache (process-wide, 65,536 lines), so
    a large corpus does not fill it; callers tokenise each distinct text once anyway."""
    tokenizer = TercomTokenizer(normalized=normalized, no_punct=no_punct, asian_support=asian_support,
                                case_sensitive=case_sensitive)
    call = getattr(TercomTokenizer.__call__, "__wrapped__", TercomTokenizer.__call__)  # without the lru_cache
    if reference and normalized:
        return [call(tokenizer, call(tokenizer, text.rstrip()).rstrip()).split() for text in texts]
    return [call(tokenizer, text.rstrip()).split() for text in texts]


class WordIds:
    """Token lists -> (ids int32, offsets int64 of len + 1 entries); the same token gets the same id in
    every call of one instance."""

    def __init__(self) -> None:
        self.table: dict[str, int] = {}

    def __call__(self, sequences: Sequence[Sequence[str]]) -> tuple[np.ndarray, np.ndarray]:
        table = self.table
        flat = [token for seq in sequences for token in seq]
        for token in flat:
            if token not in table:
                table[token] = len(table)
        ids = np.fromiter(map(table.__getitem__, flat), dtype=np.int32, count=len(flat))
        offsets = np.zeros(len(sequences) + 1, dtype=np.int64)
        np.cumsum([len(seq) for seq in sequences], out=offsets[1:])
        return ids, offsets


# -- edit counts -------------------------------------------------------------------------------------

def edit_counts(ids: np.ndarray, offsets: np.ndarray, hyp_index: np.ndarray | Sequence[int],
                ref_index: np.ndarray | Sequence[int], *, backend: str | None = None) -> np.ndarray:
    """int64 edits of sacrebleu's translation_edit_rate of sequence hyp_index[p] (the hypothesis)
    against sequence ref_index[p] (the reference) for every p; sequence s is
    ids[offsets[s]:offsets[s+1]]. An empty reference gives the hypothesis' length. Equal index
    pairs are computed once; `backend` "c" or "python" (default: BACKEND)."""
    backend = backend or BACKEND
    if backend not in ("c", "python"):
        raise ValueError(f"edit_counts: unknown backend {backend!r} (c or python)")
    if backend == "c" and _kernel is None:
        raise RuntimeError("edit_counts: the C kernel rerank.metrics._ter is not built")
    ids = np.ascontiguousarray(ids, dtype=np.int32)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    hyp = np.asarray(hyp_index, dtype=np.int64).reshape(-1)
    ref = np.asarray(ref_index, dtype=np.int64).reshape(-1)
    if hyp.shape != ref.shape:
        raise ValueError("edit_counts: hyp_index and ref_index differ in length")
    if not len(hyp):
        return np.zeros(0, dtype=np.int64)
    pairs, inverse = np.unique(np.stack([hyp, ref], axis=1), axis=0, return_inverse=True)
    out = np.empty(len(pairs), dtype=np.int64)
    if backend == "c":
        _kernel.edit_counts(ids, offsets, np.ascontiguousarray(pairs[:, 0]), np.ascontiguousarray(pairs[:, 1]), out)
    else:
        n_seq = len(offsets) - 1
        if pairs.min() < 0 or pairs.max() >= n_seq:
            raise IndexError("edit_counts: a sequence index is out of range")
        bounds = offsets.tolist()
        words = ids.tolist()
        for p, (h, r) in enumerate(pairs.tolist()):
            out[p] = _edits(words[bounds[h]:bounds[h + 1]], words[bounds[r]:bounds[r + 1]])
    return out[inverse.reshape(-1)]


def _bands(n: int, m: int) -> list[tuple[int, int]]:
    """The beam [lo, hi) of DP rows 0..n for a hypothesis of n words and a reference of m."""
    ratio = m / n if n else 1
    width = math.ceil(ratio / 2 + _BEAM_WIDTH) if _BEAM_WIDTH < ratio / 2 else _BEAM_WIDTH
    bands = [(0, m + 1)]
    for i in range(1, n + 1):
        diag = math.floor(i * ratio)
        bands.append((max(0, diag - width), m + 1 if i == n else min(m + 1, diag + width)))
    return bands


def _row(prev: list[int], h: int, ref: list[int], lo: int, hi: int, m: int,
         ops: bytearray | None = None) -> list[int]:
    """One DP row (full width, infinite outside [lo, hi)) from the previous one, for hypothesis word h."""
    cur = [_INF] * (m + 1)
    for j in range(lo, hi):
        if j == 0:  # set unconditionally, as sacrebleu does
            cur[0], op = prev[0] + 1, _DEL
        else:
            best, op = _INF, _UNDEF
            match = h == ref[j - 1]
            c = prev[j - 1] + (0 if match else 1)
            if best > c:
                best, op = c, (_NOP if match else _SUB)
            c = prev[j] + 1
            if best > c:
                best, op = c, _DEL
            c = cur[j - 1] + 1
            if best > c:
                best, op = c, _INS
            cur[j] = best
        if ops is not None:
            ops[j] = op
    return cur


def _alignment(ops: list[bytearray], n: int, m: int) -> tuple[list[int], list[int], list[int]]:
    """align[r] (the hypothesis position of reference word r) and the prefix sums of the hypothesis'
    and the reference's error flags, from the traceback (the DP's deletion is a hypothesis word)."""
    trace: list[int] = []
    i, j = n, m
    while i > 0 or j > 0:
        op = ops[i][j]
        trace.append(op)
        if op in (_NOP, _SUB):
            i, j = i - 1, j - 1
        elif op == _INS:
            j -= 1
        elif op == _DEL:
            i -= 1
        else:
            raise RuntimeError("TER: the traceback met a cell outside the beam")
    align, herr, rerr = [0] * m, [0] * (n + 1), [0] * (m + 1)
    ph = pr = -1
    for op in reversed(trace):
        if op == _DEL:
            ph += 1
            herr[ph + 1] = herr[ph] + 1
            continue
        if op == _INS:  # a reference word
            pr += 1
            align[pr] = ph
            rerr[pr + 1] = rerr[pr] + 1
        else:  # a match or a substitution
            ph, pr = ph + 1, pr + 1
            align[pr] = ph
            err = int(op == _SUB)
            herr[ph + 1], rerr[pr + 1] = herr[ph] + err, rerr[pr] + err
    return align, herr, rerr


def _shifted(words: list[int], s: int, length: int, t: int) -> list[int]:
    """sacrebleu's _perform_shift: the block words[s:s+length] moved before position t."""
    if t < s:
        return words[:t] + words[s:s + length] + words[t:s] + words[s + length:]
    if t > s + length:
        return words[:s] + words[s + length:t] + words[s:s + length] + words[t:]
    return words[:s] + words[s + length:length + t] + words[s:s + length] + words[length + t:]


def _edits(hyp: list[int], ref: list[int]) -> int:
    """sacrebleu's translation_edit_rate(hyp, ref)[0] on token ids (the Python backend)."""
    n, m = len(hyp), len(ref)
    if m == 0:
        return n
    bands = _bands(n, m)
    rows: list[list[int]] = [list(range(m + 1))]  # row 0: j insertions
    ops: list[bytearray] = [bytearray([_INS]) * (m + 1)]
    words, valid, shifts, checked = list(hyp), 0, 0, 0
    while True:
        del rows[valid + 1:], ops[valid + 1:]
        for i in range(valid + 1, n + 1):
            ops.append(bytearray(m + 1))
            rows.append(_row(rows[i - 1], words[i - 1], ref, *bands[i], m, ops[i]))
        pre = rows[n][m]
        align, herr, rerr = _alignment(ops, n, m)
        best: tuple[int, int, int, int] | None = None
        for sh in range(n):
            for sr in range(max(0, sh - _MAX_SHIFT_DIST), min(m, sh + _MAX_SHIFT_DIST + 1)):
                length = 0
                while words[sh + length] == ref[sr + length] and length < _MAX_SHIFT_SIZE:
                    length += 1
                    if herr[sh + length] != herr[sh] and rerr[sr + length] != rerr[sr] \
                            and not sh <= align[sr] < sh + length:
                        prev_idx = -1
                        for r in range(sr - 1, sr + length):
                            idx = 0 if r == -1 else align[r] + 1
                            if idx == prev_idx:
                                continue
                            prev_idx = idx
                            cand = _shifted(words, sh, length, idx)
                            p = min(sh, idx)
                            while p < n and cand[p] == words[p]:
                                p += 1
                            row = rows[p]
                            for i in range(p + 1, n + 1):
                                row = _row(row, cand[i - 1], ref, *bands[i], m)
                            checked += 1
                            key = (pre - row[m], length, -sh, -idx)
                            if best is None or key > best:
                                best = key
                        if checked >= _MAX_SHIFT_CANDIDATES:
                            break
                    if n == sh + length or m == sr + length:
                        break
                if checked >= _MAX_SHIFT_CANDIDATES:
                    break
            if checked >= _MAX_SHIFT_CANDIDATES:
                break
        if checked >= _MAX_SHIFT_CANDIDATES or best is None or best[0] <= 0:
            return shifts + pre
        cand = _shifted(words, -best[2], best[1], -best[3])
        valid = min(-best[2], -best[3])
        while valid < n and cand[valid] == words[valid]:
            valid += 1
        words = cand
        shifts += 1


# -- sentence statistics -----------------------------------------------------------------------------

def _sequences(hyps: Sequence[str], refs: Sequence[str], options: dict[str, bool]
               ) -> tuple[np.ndarray, np.ndarray, dict[str, int], dict[str, int]]:
    """ids and offsets of each distinct hypothesis text and each distinct reference text (tokenised
    as sacrebleu tokenises references: twice), each tokenised once, and their sequence numbers."""
    if not options["normalized"]:  # references tokenise as hypotheses do: one sequence per distinct text
        distinct = list(dict.fromkeys([*hyps, *refs]))
        ids, offsets = WordIds()(tokenize(distinct, **options))
        seqs = {text: k for k, text in enumerate(distinct)}
        return ids, offsets, seqs, seqs
    hyp_distinct, ref_distinct = list(dict.fromkeys(hyps)), list(dict.fromkeys(refs))
    ids, offsets = WordIds()(tokenize(hyp_distinct, **options) + tokenize(ref_distinct, reference=True, **options))
    return (ids, offsets, {text: k for k, text in enumerate(hyp_distinct)},
            {text: len(hyp_distinct) + k for k, text in enumerate(ref_distinct)})


def segment_stats(hyps: Sequence[str], refs: Sequence[Sequence[str | None]], *, case_sensitive: bool = False,
                  normalized: bool = False, no_punct: bool = False, asian_support: bool = False,
                  backend: str | None = None) -> np.ndarray:
    """(n, 2) float64 `[edits, ref_len]` of hyps[i] against the references refs[k][i], as sacrebleu's
    `TER(...)._extract_corpus_statistics(hyps, refs)`: the fewest edits over the sentence's
    references and their average length; None references are left out (a sentence with none is a
    ValueError, where sacrebleu divides by zero)."""
    n = len(hyps)
    if not refs or any(len(stream) != n for stream in refs):
        raise ValueError(f"segment_stats: every reference stream must have {n} sentences (one per hypothesis)")
    options = dict(case_sensitive=case_sensitive, normalized=normalized, no_punct=no_punct, asian_support=asian_support)
    sent, ref_texts = [], []
    for stream in refs:
        for i, ref in enumerate(stream):
            if ref is not None:
                sent.append(i)
                ref_texts.append(ref)
    sentence = np.asarray(sent, dtype=np.int64)
    order = np.argsort(sentence, kind="stable")
    sentence = sentence[order]
    ref_texts = [ref_texts[k] for k in order.tolist()]
    counts = np.bincount(sentence, minlength=n)
    if n and counts.min() == 0:
        raise ValueError(f"segment_stats: sentence {int(np.argmin(counts))} has no reference (all None)")
    ids, offsets, hyp_seqs, ref_seqs = _sequences(hyps, ref_texts, options)
    hyp_seq = np.fromiter((hyp_seqs[text] for text in hyps), dtype=np.int64, count=n)
    ref_seq = np.fromiter((ref_seqs[text] for text in ref_texts), dtype=np.int64, count=len(ref_texts))
    out = np.zeros((n, 2))
    if not n:
        return out
    edits = edit_counts(ids, offsets, hyp_seq[sentence], ref_seq, backend=backend)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    out[:, 0] = np.minimum.reduceat(edits, starts)
    lengths = np.diff(offsets)[ref_seq]
    out[:, 1] = np.add.reduceat(lengths, starts) / counts
    return out


def pair_ter(texts: Sequence[str], I: np.ndarray | Sequence[int], J: np.ndarray | Sequence[int], *,
             case_sensitive: bool = False, normalized: bool = False, no_punct: bool = False,
             asian_support: bool = False, backend: str | None = None) -> np.ndarray:
    """Sentence TER as a fraction of texts[I[p]] against the one reference texts[J[p]], for every p:
    `TER(...).sentence_score(texts[i], [texts[j]]).score / 100` (an empty reference: 1.0 with
    edits, else 0.0). Each distinct text is tokenised once, each distinct pair scored once."""
    options = dict(case_sensitive=case_sensitive, normalized=normalized, no_punct=no_punct, asian_support=asian_support)
    I, J = np.asarray(I, dtype=np.int64).reshape(-1), np.asarray(J, dtype=np.int64).reshape(-1)
    ids, offsets, hyp_seqs, ref_seqs = _sequences(texts, texts, options)
    hyp, ref = (np.fromiter((seqs[text] for text in texts), dtype=np.int64, count=len(texts))
                for seqs in (hyp_seqs, ref_seqs))
    hyp, ref = hyp[I], ref[J]
    edits = edit_counts(ids, offsets, hyp, ref, backend=backend).astype(np.float64)
    ref_len = np.diff(offsets)[ref].astype(np.float64)
    return (100.0 * ter_fraction(edits, ref_len)) / 100.0  # sacrebleu's score / 100, bit for bit


def ter_fraction(edits: np.ndarray, ref_len: np.ndarray) -> np.ndarray:
    """edits / ref_len with sacrebleu's rule for empty references (1.0 with edits, else 0.0): TER as
    a fraction, for TERMetric's corpus scores and pair_ter's sentence scores alike."""
    edits, ref_len = np.asarray(edits, dtype=np.float64), np.asarray(ref_len, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(ref_len > 0, edits / np.where(ref_len > 0, ref_len, 1.0), np.where(edits > 0, 1.0, 0.0))
