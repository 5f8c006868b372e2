"""Batched beam search and greedy decoding.

Beam search keeps k slots per sentence (Nematus-style shrinking beam): at each step the best
k - (finished so far) extensions of the live hypotheses are kept; those ending in </s> are
finished. A sentence stops when k hypotheses have finished (or none is live), so it always
yields k distinct finished hypotheses (fewer only if the vocabulary is tinier than the beam).
At the sentence's maximum length only </s> is allowed. Beam size 1 is exactly greedy decoding.
"""

from __future__ import annotations

import dataclasses

import torch

from rerank.nmt.model import AttentionNMT, StepTables
from rerank.nmt.vocab import BOS_ID, EOS_ID

NEG_INF = float("-inf")


@dataclasses.dataclass
class Hypothesis:
    tokens: list[int]  # target ids without </s>
    logprob: float  # sum of token log-probs, </s> included
    norm: float  # logprob / (len(tokens) + 1) ** alpha


def max_lengths(src_len: torch.Tensor, ratio: float, extra: int) -> torch.Tensor:
    """Maximum number of target tokens (</s> included) for each source length."""
    return (src_len.float() * ratio).long() + extra


def _normalise(logprob: float, n_tokens: int, alpha: float) -> float:
    return logprob / (n_tokens ** alpha) if alpha > 0 else logprob


@torch.no_grad()
def greedy(model: AttentionNMT, src, src_len, max_len_ratio=2.0, max_len_extra=5, alpha=1.0,
           tables: StepTables | None = None):
    """Argmax decoding; returns one Hypothesis per sentence. `tables`: model.step_tables(),
    computed here when not given (pass them when decoding many batches)."""
    model.eval()
    tables = model.step_tables() if tables is None else tables
    enc, state = model.encode(src, src_len)
    limit = max_lengths(src_len, max_len_ratio, max_len_extra)
    n = src.size(0)
    prev = torch.full((n,), BOS_ID, dtype=torch.long, device=src.device)
    done = torch.zeros(n, dtype=torch.bool, device=src.device)
    total = torch.zeros(n, device=src.device)
    out = []
    for t in range(int(limit.max())):
        logp, state = model.step(prev, state, enc, tables)
        force = t == limit - 1
        logp[force, :EOS_ID] = NEG_INF
        logp[force, EOS_ID + 1:] = NEG_INF
        best, tok = logp.max(-1)
        total = total + best.masked_fill(done, 0.0)
        out.append(tok.masked_fill(done, EOS_ID))
        done = done | (tok == EOS_ID)
        prev = tok
        if bool(done.all()):
            break
    seqs = torch.stack(out, 1).tolist()
    hyps = []
    for i, seq in enumerate(seqs):
        toks = seq[: seq.index(EOS_ID)] if EOS_ID in seq else seq
        lp = float(total[i])
        hyps.append(Hypothesis(toks, lp, _normalise(lp, len(toks) + 1, alpha)))
    return hyps


def _best_extensions(logp, scores, row_sent, row_slot, b: int, k: int):
    """(scores, parent slots, tokens), each (b, k): the k best one-token extensions of every
    active sentence. A sentence's k best lie among its rows' k best tokens, so the top-k is
    taken per row first, then over a (sentences, k slots, k tokens) grid, not (.., vocab)."""
    dev = logp.device
    k_tok = min(k, logp.size(1))
    row_top, row_tok = logp.topk(k_tok, dim=1)
    grid = torch.full((b, k, k_tok), NEG_INF, device=dev)
    grid[row_sent, row_slot] = row_top + scores[row_sent, row_slot].unsqueeze(1)
    grid_tok = torch.zeros((b, k, k_tok), dtype=torch.long, device=dev)
    grid_tok[row_sent, row_slot] = row_tok
    top, idx = grid.view(b, k * k_tok).topk(k, dim=1)
    return top, idx // k_tok, grid_tok.view(b, k * k_tok).gather(1, idx)


class _Search:
    """A batched beam search in progress: k slots per active sentence; the decoder runs only
    the live slots' rows (row_sent / row_slot say which active sentence and slot a row is)."""

    def __init__(self, model: AttentionNMT, src, src_len, k: int, limit, alpha: float, tables: StepTables):
        dev = src.device
        n_sent = src.size(0)
        self.model, self.k, self.limit, self.alpha, self.tables = model, k, limit, alpha, tables
        self.enc_sent, self.state = model.encode(src, src_len)
        self.active = torch.arange(n_sent, device=dev)  # original index of each active sentence
        self.scores = torch.full((n_sent, k), NEG_INF, device=dev)
        self.scores[:, 0] = 0.0  # one live slot at the start, so no duplicate hypotheses
        self.seqs = torch.full((n_sent, k, 0), BOS_ID, dtype=torch.long, device=dev)
        self.row_sent = torch.arange(n_sent, device=dev)
        self.row_slot = torch.zeros(n_sent, dtype=torch.long, device=dev)
        self.prev = torch.full((n_sent,), BOS_ID, dtype=torch.long, device=dev)
        self.finished: list[list[Hypothesis]] = [[] for _ in range(n_sent)]
        self.n_done = torch.zeros(n_sent, dtype=torch.long, device=dev)
        self.rank = torch.arange(k, device=dev).unsqueeze(0)

    def advance(self, t: int) -> None:
        """Step t: extend every live slot by one token, finish those ending in </s>."""
        k, b, dev = self.k, self.active.numel(), self.scores.device
        logp, self.state = self.model.step(self.prev, self.state, self.enc_sent.index_select(self.row_sent), self.tables)
        force = (t == self.limit[self.active] - 1)[self.row_sent]
        if bool(force.any()):  # at the maximum length only </s>
            eos_only = torch.full((logp.size(1),), NEG_INF, device=dev)
            eos_only[EOS_ID] = 0.0
            logp[force] = logp[force] + eos_only
        top, slot, tok = _best_extensions(logp, self.scores, self.row_sent, self.row_slot, b, k)
        valid = torch.isfinite(top) & (self.rank < (k - self.n_done[self.active]).unsqueeze(1))
        ends = valid & (tok == EOS_ID)
        self.seqs = torch.cat([self.seqs.gather(1, slot.unsqueeze(-1).expand(-1, -1, t)), tok.unsqueeze(-1)], 2)
        if bool(ends.any()):
            rows, cols = ends.nonzero(as_tuple=True)
            got = self.seqs[rows, cols, :t].tolist()
            for r, toks, lp in zip(rows.tolist(), got, top[rows, cols].tolist()):
                self.finished[int(self.active[r])].append(Hypothesis(toks, lp, _normalise(lp, t + 1, self.alpha)))
            self.n_done.index_add_(0, self.active[rows], torch.ones_like(rows))
        live = valid & ~ends
        self.scores = top.masked_fill(~live, NEG_INF)
        self._keep_live(live, slot, tok)

    def _keep_live(self, live, slot, tok) -> None:
        """Drop sentences that are done or have no live slot; make one decoder row per live slot,
        with its parent row's state and its new token."""
        b, dev = self.active.numel(), self.scores.device
        keep = (self.n_done[self.active] < self.k) & live.any(1)
        old_sent_of_kept = torch.arange(b, device=dev)
        if not bool(keep.all()):
            kept = keep.nonzero(as_tuple=True)[0]
            live, slot, tok = live[kept], slot[kept], tok[kept]
            self.active, self.scores, self.seqs = self.active[kept], self.scores[kept], self.seqs[kept]
            self.enc_sent = self.enc_sent.index_select(kept)
            old_sent_of_kept = kept
        row_of = torch.full((b, self.k), -1, dtype=torch.long, device=dev)
        row_of[self.row_sent, self.row_slot] = torch.arange(self.row_sent.numel(), device=dev)
        new_sent, new_slot = live.nonzero(as_tuple=True)
        parent = row_of[old_sent_of_kept[new_sent], slot[new_sent, new_slot]]
        self.state, self.prev = self.state.index_select(0, parent), tok[new_sent, new_slot]
        self.row_sent, self.row_slot = new_sent, new_slot


@torch.no_grad()
def beam_search(model: AttentionNMT, src, src_len, beam: int, nbest: int | None = None,
                max_len_ratio=2.0, max_len_extra=5, alpha=1.0,
                tables: StepTables | None = None) -> list[list[Hypothesis]]:
    """For each sentence, its `nbest` (default: beam) best finished hypotheses, best first.

    Hypotheses are ranked by the length-normalised score (alpha > 0) or the log-prob sum
    (alpha = 0). `nbest` must not exceed `beam`. Only live hypotheses are run through the
    decoder: rows are packed, and their per-row top-k scattered into a (sentences, k, k) grid.
    `tables` as in `greedy`.
    """
    nbest = beam if nbest is None else nbest
    if not 1 <= nbest <= beam:
        raise ValueError(f"n-best size {nbest} must be between 1 and the beam size {beam}")
    model.eval()
    tables = model.step_tables() if tables is None else tables
    search = _Search(model, src, src_len, beam, max_lengths(src_len, max_len_ratio, max_len_extra), alpha, tables)
    t = 0
    while search.active.numel() > 0:
        search.advance(t)
        t += 1
    key = (lambda h: h.norm) if alpha > 0 else (lambda h: h.logprob)
    return [sorted(f, key=key, reverse=True)[:nbest] for f in search.finished]
