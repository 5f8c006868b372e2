"""A GRU language model of the target language: the `lm` reranking feature (log p(hypothesis)).

Trained on the target side of the NMT training data with the NMT's tokenisation (Moses tokens,
words with a frequency cut-off or SentencePiece subwords). A run directory holds config.json,
vocab.json, best.pt (state_dict of the best validation perplexity), last.pt (model, optimiser
and training state, for resuming) and train.log; DONE.json is written when training ended.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import random
import time
from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F

from rerank.nmt.checkpoint import read_json, read_vocab, save_tensors
from rerank.nmt.data import length_batches, pad
from rerank.nmt.lm_config import LMConfig
from rerank.nmt.vocab import BOS_ID, EOS_ID, PAD_ID, SubwordVocab, Tokenizer, Vocab
from rerank import distributed
from rerank.budget import EpochBudget
from rerank.device import load_tensors, load_weights
from rerank.errors import InputError
from rerank.io import atomic_write, run_dir_lock
from rerank.progress import Progress, progress_bar, track


class GRULM(nn.Module):
    def __init__(self, vocab_size: int, emb_dim: int, hidden: int, dropout: float):
        super().__init__()
        self.emb = nn.Embedding(vocab_size, emb_dim, padding_idx=PAD_ID)
        self.gru = nn.GRU(emb_dim, hidden, batch_first=True)
        self.out = nn.Linear(hidden, vocab_size)
        self.drop = nn.Dropout(dropout)

    def forward(self, ids_in: torch.Tensor) -> torch.Tensor:
        """Logits (B, T, V) of the next token after every prefix of ids_in (B, T)."""
        states, _ = self.gru(self.drop(self.emb(ids_in)))
        return self.out(self.drop(states))

    def token_logprobs(self, ids_out: torch.Tensor) -> torch.Tensor:
        """log p of every token of ids_out (B, T; ends with </s>, padded with 0 log-probs)."""
        bos = torch.full((ids_out.size(0), 1), BOS_ID, dtype=ids_out.dtype, device=ids_out.device)
        logp = F.log_softmax(self(torch.cat([bos, ids_out[:, :-1]], dim=1)), dim=-1)
        return logp.gather(-1, ids_out.unsqueeze(-1)).squeeze(-1) * (ids_out != PAD_ID)


def read_training_text(paths: list[str]) -> list[str]:
    """The lines of every training file, in the order given; InputError naming a file that has no
    sentences (an empty corpus among several is a mistake, not a no-op)."""
    from rerank.io import read_lines

    lines = []
    for path in paths:
        text = read_lines(path)
        if not any(line.strip() for line in text):
            raise InputError("no training sentences", path)
        lines += text
    return lines


def encode_lines(lines: list[str], tok: Tokenizer, vocab, max_len: int | None = None) -> list[list[int]]:
    """Token ids + </s> per line (cut to max_len tokens when given)."""
    out = []
    for line in lines:
        toks = tok.tokenize(line)
        out.append(vocab.encode(toks[:max_len] if max_len else toks) + [EOS_ID])
    return out


def build_vocab(cfg: LMConfig, tokenized: list[list[str]]):
    if cfg.subword:
        return SubwordVocab.build(tokenized, cfg.subword_size, cfg.subword, seed=cfg.seed)
    return Vocab.build(tokenized, min_freq=cfg.min_freq)


class LanguageModel:
    """A trained LM loaded from its run directory: scores sentences (sum of token log-probs)."""

    def __init__(self, model: GRULM, vocab, config: LMConfig, device="cpu"):
        self.model, self.vocab, self.config, self.device = model.to(device).eval(), vocab, config, device
        self.tok = Tokenizer(config.lang)

    @classmethod
    def load(cls, run_dir: str, device="cpu", which: str = "best") -> LanguageModel:
        """The model of a `rerank lm train` run directory; InputError naming any broken file."""
        config_path = os.path.join(run_dir, "config.json")
        if not os.path.isfile(config_path):
            raise InputError("not a language model run directory (no config.json)", run_dir)
        saved = read_json(config_path)
        if not isinstance(saved, dict) or not isinstance(saved.get("lm"), dict):
            raise InputError("not a language model config: no \"lm\" object", config_path)
        try:
            cfg = LMConfig(**saved["lm"])
            size = int(saved["vocab_size"])
            model = GRULM(size, cfg.emb_dim, cfg.hidden, 0.0)
        except (KeyError, TypeError, ValueError, RuntimeError) as exc:
            raise InputError(f"not a language model config ({type(exc).__name__}: {exc})", config_path) from exc
        vocab = read_vocab(os.path.join(run_dir, "vocab.json"), size)
        path = os.path.join(run_dir, f"{which}.pt")
        state = load_tensors(path, "checkpoint")
        if which == "last" and isinstance(state, dict) and "model" in state:
            state = state["model"]
        load_weights(model, state, path, "the language model of config.json")
        return cls(model, vocab, cfg, device)

    @torch.no_grad()
    def score(self, lines: list[str], batch_size: int = 128, progress: Progress = False) -> tuple[list[float], list[int]]:
        """(sum of log-probs incl. </s>, number of scored tokens incl. </s>) of every line. Under
        torchrun the ranks tokenise a part of the lines each and score whole batches of the
        one-process batching (rerank.distributed), so the sums are those of one process."""
        ids = [s for part in distributed.map_parts(lambda a, b: encode_lines(lines[a:b], self.tok, self.vocab),
                                                   len(lines)) for s in part]
        sums, counts = [0.0] * len(ids), [len(s) for s in ids]
        batches = length_batches([len(s) for s in ids], batch_size, shuffle=False)

        def score(a: int, b: int) -> list[float]:
            totals = []
            for batch in track(batches[a:b], progress, "lm", unit="batch"):
                out, _ = pad([ids[i] for i in batch])
                totals += self.model.token_logprobs(out.to(self.device)).sum(1).tolist()
            return totals

        weights = [len(batch) * max(counts[i] for i in batch) for batch in batches]
        totals = [value for part in distributed.map_parts(score, len(batches), weights) for value in part]
        for i, value in zip((i for batch in batches for i in batch), totals):
            sums[i] = value
        return sums, counts


def _epoch(model, batches, data, optimizer, cfg, device, progress) -> float:
    """One training epoch; returns the mean loss per token."""
    model.train()
    total, tokens = 0.0, 0
    with progress_bar(progress, "lm epoch", total=len(batches), unit="batch") as bar:  # closed on Ctrl-C too
        for batch in batches:
            out, _ = pad([data[i] for i in batch])
            out = out.to(device)
            loss = -model.token_logprobs(out).sum()
            n = int((out != PAD_ID).sum())
            optimizer.zero_grad()
            (loss / n).backward()
            nn.utils.clip_grad_norm_(model.parameters(), cfg.clip)
            optimizer.step()
            total, tokens = total + float(loss.detach()), tokens + n
            bar.update(1)
    return total / max(tokens, 1)


@torch.no_grad()
def perplexity(model, data, device, batch_size: int = 128) -> float:
    model.eval()
    total, tokens = 0.0, 0
    for batch in length_batches([len(s) for s in data], batch_size, shuffle=False):
        out, _ = pad([data[i] for i in batch])
        out = out.to(device)
        total -= float(model.token_logprobs(out).sum())
        tokens += int((out != PAD_ID).sum())
    return math.exp(total / max(tokens, 1))


def _prepare(cfg: LMConfig, train_lines: list[str], val_lines: list[str], out_dir: str, resuming: bool):
    """Vocabulary (built once, reloaded on resume) and the encoded training and validation data."""
    tok = Tokenizer(cfg.lang)
    vocab_path = os.path.join(out_dir, "vocab.json")
    train_tok = [tok.tokenize(line)[:cfg.max_len] for line in train_lines]
    if resuming:
        vocab = read_vocab(vocab_path)
    else:
        vocab = build_vocab(cfg, train_tok)
        with atomic_write(vocab_path) as f:
            f.write(vocab.to_json())
        with atomic_write(os.path.join(out_dir, "config.json")) as f:
            json.dump({"lm": dataclasses.asdict(cfg), "vocab_size": len(vocab)}, f, indent=1)
    train = [vocab.encode(t) + [EOS_ID] for t in train_tok if t]
    return vocab, train, encode_lines(val_lines, tok, vocab, cfg.max_len)


@dataclasses.dataclass
class _Run:
    """What one invocation of `train_lm` works on (as rerank.nmt.train._Run for the NMT)."""

    cfg: LMConfig
    out_dir: str
    device: str | torch.device
    model: GRULM
    optimizer: torch.optim.Optimizer
    train: list[list[int]]
    val: list[list[int]]
    state: dict
    progress: Progress = False
    log: Callable[[str], None] = print
    clock: Callable[[], float] = time.monotonic


def train_lm(cfg: LMConfig, train_lines: list[str], val_lines: list[str], out_dir: str, device="cpu",
             resume: bool = True, progress: Progress = False, log=print, clock=time.monotonic, wait: bool = False) -> dict:
    """Train (or resume from OUT/last.pt); early-stops on validation perplexity. Returns the state.
    One trainer per run directory: the call holds its lock (rerank.io.run_dir_lock; `wait`)."""
    with run_dir_lock(out_dir, wait):
        return _train_lm(cfg, train_lines, val_lines, out_dir, device, resume, progress, log, clock)


def _train_lm(cfg, train_lines, val_lines, out_dir, device, resume, progress, log, clock) -> dict:
    os.makedirs(out_dir, exist_ok=True)
    last = os.path.join(out_dir, "last.pt")
    resuming = resume and os.path.exists(last)
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    vocab, train, val = _prepare(cfg, train_lines, val_lines, out_dir, resuming)
    model = GRULM(len(vocab), cfg.emb_dim, cfg.hidden, cfg.dropout).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    state = {"epoch": 0, "best_ppl": float("inf"), "bad_epochs": 0, "epoch_seconds": [], "stopped": None}
    if resuming:
        state = _restore(last, model, optimizer)
        log(f"resuming after epoch {state['epoch']} (best val perplexity {state['best_ppl']:.2f})")
    return _train_epochs(_Run(cfg, out_dir, device, model, optimizer, train, val, state, progress, log, clock))


def _restore(path: str, model: GRULM, optimizer) -> dict:
    """Load last.pt into the model and optimiser; its training state (InputError if broken)."""
    saved = load_tensors(path, "checkpoint")
    if not isinstance(saved, dict) or not {"model", "optimizer", "state"} <= set(saved):
        raise InputError("not a checkpoint of `rerank lm train`; start afresh (without resuming)", path)
    load_weights(model, saved["model"], path, "the language model (options as when it was started)")
    try:
        optimizer.load_state_dict(saved["optimizer"])
        state = json.loads(saved["state"])
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"not a checkpoint of this run ({type(exc).__name__}: {exc}); start afresh "
                         "(without resuming)", path) from exc
    if not isinstance(state, dict) or not {"epoch", "best_ppl", "bad_epochs", "epoch_seconds", "stopped"} <= set(state):
        raise InputError("its training state is incomplete; start afresh (without resuming)", path)
    return state


def _train_epochs(run: _Run) -> dict:
    """Epochs until max_epochs, early stopping or the time budget; best.pt, last.pt after each, DONE.json at the end."""
    cfg, model, optimizer, state, train, val = run.cfg, run.model, run.optimizer, run.state, run.train, run.val
    out_dir, device, log = run.out_dir, run.device, run.log
    budget = EpochBudget(cfg.max_minutes, run.clock)
    budget.epoch_seconds = list(state["epoch_seconds"])
    rng = random.Random()
    while state["epoch"] < cfg.max_epochs and state["bad_epochs"] < cfg.patience:
        if not budget.allows_epoch():
            state["stopped"] = "time budget"
            log(budget.reason())
            break
        rng.seed(cfg.seed * 1000 + state["epoch"])
        loss = _epoch(model, length_batches([len(s) for s in train], cfg.batch_size, True, rng), train, optimizer,
                      cfg, device, run.progress)
        ppl = perplexity(model, val, device)
        state["epoch"] += 1
        state["epoch_seconds"].append(budget.epoch_done())
        better = ppl < state["best_ppl"]
        state["best_ppl"], state["bad_epochs"] = (ppl, 0) if better else (state["best_ppl"], state["bad_epochs"] + 1)
        if better:
            save_tensors(model.state_dict(), os.path.join(out_dir, "best.pt"))
        log(f"epoch {state['epoch']}: train loss/token {loss:.4f}, val perplexity {ppl:.2f}"
            + (" (best)" if better else ""))
        save_tensors({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "state": json.dumps(state)},
                     os.path.join(out_dir, "last.pt"))
    state["stopped"] = state["stopped"] or ("early-stopping" if state["bad_epochs"] >= cfg.patience else "max-epochs")
    with atomic_write(os.path.join(out_dir, "DONE.json")) as f:
        json.dump({"stopped": state["stopped"], "epochs": state["epoch"], "best_val_perplexity": state["best_ppl"]}, f)
    return state
