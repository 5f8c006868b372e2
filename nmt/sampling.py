"""Ancestral sampling from the attention NMT, batched, with the warpers of transformers.

`warp` turns a row of next-token log-probabilities into the logits of the distribution drawn from,
in transformers' order and with its definitions (its TemperatureLogitsWarper, TopKLogitsWarper,
TopPLogitsWarper and EpsilonLogitsWarper, min_tokens_to_keep 1):
- temperature T: the logits divided by T;
- top-k: tokens below the k-th largest logit removed (ties with it kept);
- top-p: the tokens sorted by probability, ascending; those whose cumulative probability is at most
  1 - p removed, so the most probable set whose mass reaches p is kept (the most probable token always);
- epsilon: tokens of probability below epsilon (under the distribution so far) removed, the most
  probable kept.

`sample` draws `n` candidates per sentence of a batch: each sentence's encoding is repeated n
times, every row draws its next token from `torch.multinomial` with the batch's own
torch.Generator (so a seeded batch draws the same on every run), rows that have drawn </s> leave the
decoder, and at a sentence's maximum length only </s> is allowed, as in beam search
(rerank.nmt.beam.max_lengths). Nothing of the vocabulary is banned: the model's own distribution,
whose forced scoring (AttentionNMT.score) is the candidate's log-probability.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rerank.nmt.beam import max_lengths
from rerank.nmt.model import AttentionNMT, StepTables
from rerank.nmt.vocab import BOS_ID, EOS_ID

NEG_INF = float("-inf")


@dataclass(frozen=True)
class Warp:
    """The sampling settings (None: that warper off)."""

    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    epsilon: float | None = None


def warp(logp: torch.Tensor, settings: Warp) -> torch.Tensor:
    """The logits (N, V) of the distribution to draw from, -inf outside its support."""
    x = logp / settings.temperature if settings.temperature != 1.0 else logp.clone()
    if settings.top_k is not None and settings.top_k < x.size(-1):
        kth = x.topk(settings.top_k, dim=-1).values[..., -1:]
        x = x.masked_fill(x < kth, NEG_INF)
    if settings.top_p is not None and settings.top_p < 1.0:
        ordered, index = torch.sort(x, dim=-1)
        mass = ordered.softmax(-1).cumsum(-1)
        remove = mass <= 1 - settings.top_p
        remove[..., -1] = False
        x = x.masked_fill(remove.scatter(-1, index, remove), NEG_INF)
    if settings.epsilon is not None:
        remove = x.softmax(-1) < settings.epsilon
        remove &= x < x.max(dim=-1, keepdim=True).values
        x = x.masked_fill(remove, NEG_INF)
    return x


@torch.no_grad()
def sample(model: AttentionNMT, src: torch.Tensor, src_len: torch.Tensor, n: int, settings: Warp,
           generator: torch.Generator, *, max_len_ratio: float = 2.0, max_len_extra: int = 5,
           max_length: int | None = None, tables: StepTables | None = None) -> list[list[list[int]]]:
    """For each sentence of the batch, `n` drawn token sequences (target ids without </s>), in draw
    order. `max_length` caps every sentence's longest output (tokens, </s> included)."""
    model.eval()
    tables = model.step_tables() if tables is None else tables
    enc, state = model.encode(src, src_len)
    limit = max_lengths(src_len, max_len_ratio, max_len_extra)
    if max_length is not None:
        limit = limit.clamp(max=max_length)
    rows = torch.arange(src.size(0), device=src.device).repeat_interleave(n)
    live = torch.arange(rows.numel(), device=src.device)   # the original row of each live row
    enc, state, row_limit = enc.index_select(rows), state.index_select(0, rows), limit[rows]
    prev = torch.full((rows.numel(),), BOS_ID, dtype=torch.long, device=src.device)
    drawn: list[list[int]] = [[] for _ in range(rows.numel())]
    t = 0
    while live.numel() > 0:
        logp, state = model.step(prev, state, enc, tables)
        force = row_limit == t + 1
        if bool(force.any()):   # at the maximum length only </s>
            logp[force] = torch.where(torch.arange(logp.size(1), device=logp.device) == EOS_ID, 0.0, NEG_INF)
        tok = torch.multinomial(warp(logp, settings).softmax(-1), 1, generator=generator).squeeze(1)
        ended = tok == EOS_ID
        for r, token in zip(live[~ended].tolist(), tok[~ended].tolist()):
            drawn[r].append(token)
        keep = (~ended).nonzero(as_tuple=True)[0]
        if keep.numel() < live.numel():
            live, state, row_limit, enc = live[keep], state[keep], row_limit[keep], enc.index_select(keep)
        prev = tok[keep]
        t += 1
    return [drawn[i * n:(i + 1) * n] for i in range(src.size(0))]
