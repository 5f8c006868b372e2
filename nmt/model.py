"""Bahdanau-style attention NMT: bidirectional-GRU encoder, GRU decoder with additive attention.

The decoder follows Bahdanau et al. (2015): the context c_i is computed from the previous state
s_{i-1}; the GRU reads [y_{i-1}; c_i]; the output distribution comes from a tanh readout of
(s_i, c_i, y_{i-1}). The network and its size presets live here; training settings in train.py.
"""

from __future__ import annotations

import dataclasses
import json

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from rerank.nmt.vocab import BOS_ID, PAD_ID


@dataclasses.dataclass
class ModelConfig:
    src_vocab: int
    tgt_vocab: int
    emb_dim: int = 256
    enc_hidden: int = 256
    dec_hidden: int = 512
    att_dim: int = 256
    readout_dim: int = 256
    dropout: float = 0.2
    tie_embeddings: bool = False  # share target input embedding and output projection

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=1)

    @classmethod
    def from_dict(cls, d: dict) -> ModelConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


class Encoded:
    """Encoder output reused at every decoder step: annotations, their key projection, mask."""

    def __init__(self, annotations: torch.Tensor, keys: torch.Tensor, mask: torch.Tensor):
        self.annotations = annotations  # (B, S, 2*He)
        self.keys = keys  # (B, S, A)
        self.mask = mask  # (B, S) True on real tokens

    def index_select(self, index: torch.Tensor) -> Encoded:
        return Encoded(self.annotations.index_select(0, index), self.keys.index_select(0, index),
                       self.mask.index_select(0, index))


@dataclasses.dataclass
class StepTables:
    """Decoding-time precomputation from frozen weights: every target word's share of the GRU
    input and readout pre-activations, and the context weights of both stacked, so a decoder
    step gathers rows for the previous word instead of multiplying its embedding again."""

    gru_word: torch.Tensor  # (V, 3*Hd): W_ih[:, :E] e_w + b_ih
    readout_word: torch.Tensor  # (V, R): W_r[:, Hd+C:] e_w + b_r
    ctx_weight: torch.Tensor  # (3*Hd + R, C): context columns of W_ih, then of W_r
    readout_state: torch.Tensor  # (R, Hd): state columns of W_r


class AttentionNMT(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        ctx_dim = 2 * cfg.enc_hidden
        self.src_emb = nn.Embedding(cfg.src_vocab, cfg.emb_dim, padding_idx=PAD_ID)
        self.tgt_emb = nn.Embedding(cfg.tgt_vocab, cfg.emb_dim, padding_idx=PAD_ID)
        self.encoder = nn.GRU(cfg.emb_dim, cfg.enc_hidden, batch_first=True, bidirectional=True)
        self.init_state = nn.Linear(ctx_dim, cfg.dec_hidden)
        self.att_key = nn.Linear(ctx_dim, cfg.att_dim, bias=False)
        self.att_query = nn.Linear(cfg.dec_hidden, cfg.att_dim)
        self.att_v = nn.Linear(cfg.att_dim, 1, bias=False)
        self.cell = nn.GRUCell(cfg.emb_dim + ctx_dim, cfg.dec_hidden)
        self.readout = nn.Linear(cfg.dec_hidden + ctx_dim + cfg.emb_dim, cfg.readout_dim)
        self.out = nn.Linear(cfg.readout_dim, cfg.tgt_vocab)
        if cfg.tie_embeddings:
            if cfg.readout_dim != cfg.emb_dim:
                raise ValueError("tie_embeddings needs readout_dim == emb_dim")
            self.out.weight = self.tgt_emb.weight
        self.drop = nn.Dropout(cfg.dropout)

    # -- encoder -----------------------------------------------------------------------------
    def encode(self, src: torch.Tensor, src_len: torch.Tensor) -> tuple[Encoded, torch.Tensor]:
        """src (B, S) padded ids, src_len (B,) -> (Encoded, initial decoder state (B, Hd))."""
        emb = self.drop(self.src_emb(src))
        packed = pack_padded_sequence(emb, src_len.cpu(), batch_first=True, enforce_sorted=False)
        ann, _ = self.encoder(packed)
        ann, _ = pad_packed_sequence(ann, batch_first=True, total_length=src.size(1))
        mask = src != PAD_ID
        mean = (ann * mask.unsqueeze(-1)).sum(1) / src_len.clamp(min=1).unsqueeze(-1).to(ann.dtype)
        state = torch.tanh(self.init_state(mean))
        ann = self.drop(ann)
        return Encoded(ann, self.att_key(ann), mask), state

    # -- decoder -----------------------------------------------------------------------------
    def _attend(self, state: torch.Tensor, enc: Encoded) -> torch.Tensor:
        energy = self.att_v(torch.tanh(enc.keys + self.att_query(state).unsqueeze(1))).squeeze(-1)
        energy = energy.masked_fill(~enc.mask, float("-inf"))
        alpha = torch.softmax(energy, dim=-1)
        return torch.bmm(alpha.unsqueeze(1), enc.annotations).squeeze(1)

    def _recur(self, prev_emb: torch.Tensor, state: torch.Tensor, enc: Encoded):
        ctx = self._attend(state, enc)
        state = self.cell(torch.cat([prev_emb, ctx], dim=-1), state)
        return state, ctx

    def _logits(self, state: torch.Tensor, ctx: torch.Tensor, prev_emb: torch.Tensor) -> torch.Tensor:
        r = torch.tanh(self.readout(torch.cat([state, ctx, prev_emb], dim=-1)))
        return self.out(self.drop(r))

    @torch.no_grad()
    def step_tables(self) -> StepTables:
        """Tables for `step` in eval mode (about 10% fewer multiplications per decoder step)."""
        e, hd, c = self.cfg.emb_dim, self.cfg.dec_hidden, 2 * self.cfg.enc_hidden
        w_ih, w_r = self.cell.weight_ih, self.readout.weight
        return StepTables(gru_word=F.linear(self.tgt_emb.weight, w_ih[:, :e], self.cell.bias_ih),
                          readout_word=F.linear(self.tgt_emb.weight, w_r[:, hd + c:], self.readout.bias),
                          ctx_weight=torch.cat([w_ih[:, e:], w_r[:, hd:hd + c]], 0).contiguous(),
                          readout_state=w_r[:, :hd].contiguous())

    def step(self, prev_tokens: torch.Tensor, state: torch.Tensor, enc: Encoded, tables: StepTables | None = None):
        """One decoder step: previous tokens (N,) -> (log-probs (N, V), new state).

        With `tables` (eval mode only) the same GRU and readout are computed from precomputed rows.
        """
        if tables is None:
            prev_emb = self.tgt_emb(prev_tokens)
            state, ctx = self._recur(prev_emb, state, enc)
            return F.log_softmax(self._logits(state, ctx, prev_emb), dim=-1), state
        if self.training:
            raise RuntimeError("step tables hold frozen weights: use them in eval mode only")
        g = 3 * self.cfg.dec_hidden
        ctx_part = F.linear(self._attend(state, enc), tables.ctx_weight)
        gi = tables.gru_word.index_select(0, prev_tokens) + ctx_part[:, :g]
        gh = F.linear(state, self.cell.weight_hh, self.cell.bias_hh)
        i_r, i_z, i_n = gi.chunk(3, 1)
        h_r, h_z, h_n = gh.chunk(3, 1)
        r, z = torch.sigmoid(i_r + h_r), torch.sigmoid(i_z + h_z)
        n = torch.tanh(i_n + r * h_n)
        state = n + z * (state - n)  # (1 - z) * n + z * state, as nn.GRUCell
        pre = tables.readout_word.index_select(0, prev_tokens) + ctx_part[:, g:] + F.linear(state, tables.readout_state)
        return F.log_softmax(self.out(torch.tanh(pre)), dim=-1), state

    def forward(self, src, src_len, tgt_in) -> torch.Tensor:
        """Teacher forcing: tgt_in (B, T) starts with <s>; returns logits (B, T, V)."""
        enc, state = self.encode(src, src_len)
        emb = self.drop(self.tgt_emb(tgt_in))
        states, ctxs = [], []
        for t in range(tgt_in.size(1)):
            state, ctx = self._recur(emb[:, t], state, enc)
            states.append(state)
            ctxs.append(ctx)
        return self._logits(torch.stack(states, 1), torch.stack(ctxs, 1), emb)

    @torch.no_grad()
    def score(self, src, src_len, tgt_out) -> torch.Tensor:
        """Sum of token log-probs of tgt_out (B, T; ends with </s>, padded) given src."""
        bos = torch.full((tgt_out.size(0), 1), BOS_ID, dtype=tgt_out.dtype, device=tgt_out.device)
        tgt_in = torch.cat([bos, tgt_out[:, :-1]], dim=1)
        logp = F.log_softmax(self(src, src_len, tgt_in), dim=-1)
        tok = logp.gather(-1, tgt_out.unsqueeze(-1)).squeeze(-1)
        return (tok * (tgt_out != PAD_ID)).sum(1)
