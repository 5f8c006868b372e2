"""Token and n-gram arrays shared by the BLEU statistics (rerank.metrics.bleu) and MBR (rerank.consensus).

Texts become one int64 array of unit ids with CSR bounds (`integer_sequences`, `token_sequences`
for sacrebleu's tokens); `NgramCounter` counts the distinct n-grams of every text of a block of
lists with one sort per order, and `clipped_counts` turns its counts into matches clipped by a
reference count, so statistics over millions of hypotheses need no Python step per n-gram.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from rerank.dedup import distinct_index
from rerank.errors import InputError


def integer_sequences(texts: Sequence[Sequence[str]]) -> tuple[np.ndarray, np.ndarray]:
    """(ids, bounds): all units of all texts as one int64 array, text t at ids[bounds[t]:bounds[t+1]]."""
    ids, _ = distinct_index(itertools.chain.from_iterable(texts))
    bounds = np.concatenate([[0], np.cumsum([len(t) for t in texts])]).astype(np.int64)
    return ids, bounds


SEPARATOR = "\x01"  # a token of its own under 13a: no rule of the tokeniser touches it


def tokenize_many(texts: Sequence[str], tokenize: str = "13a", chunk: int = 2000) -> list[list[str]]:
    """sacrebleu's tokens of every text (as BLEU preprocesses a segment). For 13a, chunks of texts
    are joined with SEPARATOR and tokenised in one call: 13a's rules act within a few characters
    and the separator (padded with spaces, as 13a pads every line) is left alone, so the result
    equals one call per text -- tests check it -- at a fraction of the per-call cost."""
    from sacrebleu.metrics import BLEU

    tokenizer = BLEU(tokenize=tokenize).tokenizer
    if tokenize != "13a" or any(SEPARATOR in t or "\n" in t for t in texts):
        return [tokenizer(t.rstrip()).split() for t in texts]
    out: list[list[str]] = []
    for start in range(0, len(texts), chunk):
        part = texts[start:start + chunk]
        tokens = tokenizer(f" {SEPARATOR} ".join(t.rstrip() for t in part)).split()
        pieces: list[list[str]] = []
        current: list[str] = []
        for token in tokens:
            if token == SEPARATOR:
                pieces.append(current)
                current = []
            else:
                current.append(token)
        pieces.append(current)
        if len(pieces) != len(part):  # cannot happen by the argument above; never trust it blindly
            pieces = [tokenizer(t.rstrip()).split() for t in part]
        out += pieces
    return out


class NgramCounter:
    """The distinct n-grams of every text of a block of whole lists and their counts, order by
    order (`counts(n)` for n = 1, 2, ... in turn: an order's codes extend the previous order's).

    One sort per order: an n-gram occurrence's key is (list, n-gram code, text within the list)
    as one int64, so equal keys are one text's occurrences of one n-gram (their count is the run
    length) and a change of (list, code) starts a new column. Codes are the base-V numbers of the
    n-grams' unit ids, renumbered densely only where a key could leave int64."""

    def __init__(self, ids: np.ndarray, bounds: np.ndarray, group: np.ndarray):
        n_texts = len(bounds) - 1
        self.ids, self.vocab = ids, int(ids.max(initial=0)) + 1
        text = np.repeat(np.arange(n_texts, dtype=np.int64), np.diff(bounds))
        self.position = np.arange(len(ids), dtype=np.int64)  # start of every n-gram of the current order
        self.room = bounds[1:][text] - self.position           # units from there to the end of its text
        new_list = np.r_[True, group[1:] != group[:-1]] if n_texts else np.zeros(0, dtype=bool)
        self.first = np.flatnonzero(new_list)                   # first text of every list
        self.span = int(np.diff(np.r_[self.first, n_texts]).max(initial=1))  # texts in the largest list
        owner = (np.cumsum(new_list) - 1)[text]
        self.owner, self.local = owner, text - self.first[owner] if len(text) else text
        self.code, self.top, self.n = ids.astype(np.int64), self.vocab, 1

    def _compact(self) -> None:
        uniq, code = np.unique(self.code, return_inverse=True)
        self.code, self.top = code.astype(np.int64).reshape(-1), max(len(uniq), 1)

    def counts(self, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rows, cols, counts) of order n: each distinct n-gram of every text (row) and how often
        it occurs; cols are n-gram ids shared only within a list, dense in 0..G-1."""
        while self.n < n:
            keep = self.room >= self.n + 1
            self.position, self.room = self.position[keep], self.room[keep]
            self.owner, self.local, self.code = self.owner[keep], self.local[keep], self.code[keep]
            if self.top * self.vocab >= 2 ** 62:
                self._compact()
            self.code = self.code * self.vocab + self.ids[self.position + self.n]
            self.top *= self.vocab
            self.n += 1
        if len(self.code) == 0:
            return self.code, self.code, np.zeros(0)
        n_lists = len(self.first)
        if n_lists * self.top * self.span >= 2 ** 62:
            self._compact()
        if n_lists * self.top * self.span >= 2 ** 62:
            raise InputError(f"too many distinct {n}-grams in one block of lists: use smaller blocks")
        keys = np.sort((self.owner * self.top + self.code) * self.span + self.local)
        head = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
        counts = np.diff(np.r_[head, len(keys)]).astype(np.float64)
        keys = keys[head]
        column = keys // self.span
        cols = np.cumsum(np.r_[True, column[1:] != column[:-1]]) - 1
        return keys % self.span + self.first[column // self.top], cols, counts


def clipped_counts(rows: np.ndarray, cols: np.ndarray, counts: np.ndarray, reference: np.ndarray,
                   n_texts: int) -> tuple[np.ndarray, np.ndarray]:
    """(matches, totals) of every text for one order, from `NgramCounter.counts`: the sum over its
    distinct n-grams of min(count, reference[col]) (its matches clipped by a reference count per
    n-gram column: BLEU's largest count in any reference, MBR's expected count) and of count."""
    matches = np.bincount(rows, weights=np.minimum(counts, reference[cols]), minlength=n_texts)
    totals = np.bincount(rows, weights=counts, minlength=n_texts)
    return matches, totals


def token_sequences(texts: Sequence[str], tokenize: str = "13a") -> tuple[np.ndarray, np.ndarray]:
    """(ids, bounds) of sacrebleu's tokens of every text: `integer_sequences(tokenize_many(texts))`
    up to the numbering of the ids. For 13a, each distinct whitespace-separated word is tokenised
    once: 13a's rules look at a character and its neighbours, where any whitespace character acts
    as the padding space does (neither a digit nor one of . , -), so a text's tokens are its
    words' tokens in turn (tests check it against one sacrebleu call per text)."""
    if tokenize != "13a" or any(SEPARATOR in t or "\n" in t for t in texts):
        return integer_sequences(tokenize_many(texts, tokenize))
    n_words = np.fromiter((len(t.split()) for t in texts), dtype=np.int64, count=len(texts))
    words = " ".join(texts).split()
    distinct = list(dict.fromkeys(words))
    index = {w: i for i, w in enumerate(distinct)}
    word = np.fromiter(map(index.__getitem__, words), dtype=np.int64, count=len(words))
    piece_ids, piece_bounds = integer_sequences(tokenize_many(distinct, tokenize))
    k, first = np.diff(piece_bounds)[word], piece_bounds[:-1][word]
    ids = piece_ids[np.repeat(first - (np.cumsum(k) - k), k) + np.arange(int(k.sum()), dtype=np.int64)]
    per_text = np.bincount(np.repeat(np.arange(len(texts)), n_words), weights=k, minlength=len(texts))
    return ids, np.concatenate([[0], np.cumsum(per_text)]).astype(np.int64)


def sentence_blocks(cost: np.ndarray, budget: int) -> list[tuple[int, int]]:
    """Consecutive sentence ranges [a, b) whose summed cost is at most budget; a sentence that
    alone costs more is a block of its own."""
    blocks, start, total = [], 0, 0
    for s, c in enumerate(np.asarray(cost).tolist()):
        if s > start and total + c > budget:
            blocks.append((start, s))
            start, total = s, 0
        total += c
    if start < len(cost):
        blocks.append((start, len(cost)))
    return blocks
