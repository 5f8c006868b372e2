"""Training loop: Adam/Adadelta, dropout and L2 presets, learning-rate decay on a validation
plateau, early stopping on validation BLEU, a checkpoint every epoch (resumable), a wall-clock
budget spent in whole epochs (rerank.budget), progress (rerank.progress) and a log file whose lines
also go to `echo` (default: INFO records of this module's logger).

Run directory layout: config.json (model + training settings), vocab.src.json, vocab.tgt.json
(a word list, or a SentencePiece model with --subword),
best.pt (state_dict with the best validation BLEU), last.pt (model + optimiser + counters, for
resuming), history.json (per-epoch loss / BLEU / time), train.log.
"""

from __future__ import annotations

import dataclasses
import json
import os
import logging
import random
import time
from collections.abc import Callable

import sacrebleu
import torch
from torch.nn import functional as F

from rerank.nmt.beam import greedy
from rerank.nmt.checkpoint import load_model, read_json, save_tensors
from rerank.nmt.data import encode_source, length_batches, pad
from rerank.nmt.config import SIZE_PRESETS, TrainConfig, make_config  # noqa: F401 (make_config: callers import it from here)
from rerank.nmt.model import AttentionNMT, ModelConfig
from rerank.nmt.vocab import BOS_ID, EOS_ID, PAD_ID, SubwordVocab, Tokenizer, Vocab
from rerank.budget import EpochBudget
from rerank.device import load_tensors
from rerank.errors import InputError
from rerank.io import atomic_write, run_dir_lock
from rerank.progress import Progress, progress_bar, track

logger = logging.getLogger(__name__)

class Logger:
    def __init__(self, path: str, echo: Callable[[str], None] | None = None):
        self.path, self.echo = path, echo

    def __call__(self, msg: str):
        line = time.strftime("%Y-%m-%d %H:%M:%S ") + msg
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(line + "\n")
        (self.echo or logger.info)(line)


def save_json(path: str, obj) -> None:
    with atomic_write(path) as f:
        json.dump(obj, f, indent=1, ensure_ascii=False)
        f.write("\n")


def corpus_bleu_greedy(model, src_ids, refs, tgt_tok, tgt_vocab, device, batch_size=128) -> float:
    """Detokenised corpus BLEU (sacrebleu) of greedy translations of encoded sources."""
    hyps = [""] * len(src_ids)
    tables = model.step_tables()
    for batch in length_batches([len(s) for s in src_ids], batch_size, shuffle=False):
        src, src_len = pad([src_ids[i] for i in batch])
        for i, h in zip(batch, greedy(model, src.to(device), src_len.to(device), tables=tables)):
            hyps[i] = tgt_tok.detokenize(tgt_vocab.decode(h.tokens))
    return sacrebleu.corpus_bleu(hyps, [refs]).score


@dataclasses.dataclass
class _Run:
    """What one training invocation works on (built by `_prepare`)."""

    cfg: TrainConfig
    out_dir: str
    device: str
    log: Logger
    model: AttentionNMT
    optim: torch.optim.Optimizer
    tgt_tok: Tokenizer
    tgt_vocab: Vocab | SubwordVocab
    pairs: list[tuple[list[int], list[int]]]
    val_ids: list[list[int]]
    val_refs: list[str]
    state: dict
    progress: Progress = True

    @property
    def last_path(self) -> str:
        return os.path.join(self.out_dir, "last.pt")


def _saved_config(cfg: TrainConfig, out_dir: str) -> TrainConfig:
    """The run's saved TrainConfig, with this invocation's max_minutes and max_epochs."""
    path = os.path.join(out_dir, "config.json")
    saved = read_json(path)
    try:
        return TrainConfig(**{**saved["train"], "max_minutes": cfg.max_minutes, "max_epochs": cfg.max_epochs})
    except (KeyError, TypeError) as exc:
        raise InputError(f"not an NMT run config ({type(exc).__name__}: {exc})", path) from exc


def _new_model(cfg: TrainConfig, train_src, train_tgt, out_dir: str, device: str):
    """Build the vocabularies and a fresh model; write vocab.{src,tgt}.json and config.json."""
    src_vocab: Vocab | SubwordVocab
    tgt_vocab: Vocab | SubwordVocab
    if cfg.subword:
        src_vocab = SubwordVocab.build(train_src, cfg.subword_size, cfg.subword, cfg.seed)
        tgt_vocab = SubwordVocab.build(train_tgt, cfg.subword_size, cfg.subword, cfg.seed)
    else:
        src_vocab = Vocab.build(train_src, cfg.min_freq, cfg.max_vocab)
        tgt_vocab = Vocab.build(train_tgt, cfg.min_freq, cfg.max_vocab)
    mcfg = ModelConfig(len(src_vocab), len(tgt_vocab), dropout=cfg.dropout,
                       tie_embeddings=cfg.tie_embeddings, **SIZE_PRESETS[cfg.size])
    model = AttentionNMT(mcfg).to(device)
    for side, v in (("src", src_vocab), ("tgt", tgt_vocab)):
        with atomic_write(os.path.join(out_dir, f"vocab.{side}.json")) as f:
            f.write(v.to_json())
    save_json(os.path.join(out_dir, "config.json"), {"model": dataclasses.asdict(mcfg), "train": dataclasses.asdict(cfg)})
    return model, src_vocab, tgt_vocab


def _optimizer(cfg: TrainConfig, model: AttentionNMT) -> torch.optim.Optimizer:
    if cfg.optimizer == "adam":
        return torch.optim.Adam(model.parameters(), lr=cfg.lr or 1e-3, weight_decay=cfg.weight_decay)
    if cfg.optimizer == "adadelta":
        return torch.optim.Adadelta(model.parameters(), lr=cfg.lr or 1.0, rho=0.95, eps=1e-6, weight_decay=cfg.weight_decay)
    raise ValueError(f"unknown optimizer {cfg.optimizer!r} (adam or adadelta)")


def _prepare(cfg: TrainConfig, train_pair, val_pair, out_dir: str, device: str, resume: bool, progress: Progress = True,
             echo: Callable[[str], None] | None = None) -> _Run:
    """Tokenise, build or reload the model, optimiser and state (RNG restored when resuming)."""
    os.makedirs(out_dir, exist_ok=True)
    log = Logger(os.path.join(out_dir, "train.log"), echo)
    resuming = resume and os.path.exists(os.path.join(out_dir, "last.pt"))
    if resuming:
        cfg = _saved_config(cfg, out_dir)
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    src_tok, tgt_tok = Tokenizer(cfg.src_lang), Tokenizer(cfg.tgt_lang)
    train_src = [src_tok.tokenize(s) for s in track(train_pair[0], progress, "tokenise src", unit="sent")]
    train_tgt = [tgt_tok.tokenize(s) for s in track(train_pair[1], progress, "tokenise tgt", unit="sent")]
    if resuming:
        model, src_vocab, tgt_vocab, _ = load_model(out_dir, "last", device)
        model.train()
    else:
        model, src_vocab, tgt_vocab = _new_model(cfg, train_src, train_tgt, out_dir, device)
    pairs = [(src_vocab.encode(s) + [EOS_ID], tgt_vocab.encode(t) + [EOS_ID])
             for s, t in zip(train_src, train_tgt) if 0 < len(s) <= cfg.max_train_len and 0 < len(t) <= cfg.max_train_len]
    val_ids = encode_source(val_pair[0], src_tok, src_vocab, cfg.max_train_len * 2, warn=False)
    run = _Run(cfg, out_dir, device, log, model, _optimizer(cfg, model), tgt_tok, tgt_vocab, pairs, val_ids,
               val_pair[1], {"epoch": 0, "step": 0, "best_bleu": -1.0, "bad_epochs": 0, "history": [], "stopped": None},
               progress)
    if resuming:
        _restore(run)
        log(f"resumed after epoch {run.state['epoch']} (best val BLEU {run.state['best_bleu']:.2f})")
    else:
        log(f"start: {len(pairs)} training pairs, vocab src {len(src_vocab)} tgt {len(tgt_vocab)}, "
            f"{sum(p.numel() for p in model.parameters())} parameters, config {dataclasses.asdict(cfg)}")
    return run


def _restore(run: _Run) -> None:
    """The optimiser, RNG and counters of last.pt and history.json (InputError if they are broken)."""
    ckpt = load_tensors(run.last_path, "checkpoint")
    history = os.path.join(run.out_dir, "history.json")
    run.state = read_json(history, "training history")
    if not isinstance(run.state, dict) or not set(run.state) >= {"epoch", "step", "best_bleu", "bad_epochs", "history"}:
        raise InputError("not the training history of `rerank nmt train`; start afresh (without resuming)", history)
    try:
        run.optim.load_state_dict(ckpt["optim"])
        torch.set_rng_state(ckpt["rng"])
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:
        raise InputError(f"not a checkpoint of this run ({type(exc).__name__}: {exc}); start afresh "
                         "(without resuming)", run.last_path) from exc


def _batch_loss(run: _Run, batch: list[int]) -> tuple[float, int]:
    """One optimiser step on the pairs `batch`; returns (summed token loss, target tokens)."""
    src, src_len = pad([run.pairs[i][0] for i in batch])
    tgt, _ = pad([run.pairs[i][1] for i in batch])
    tgt_in = torch.cat([torch.full((len(batch), 1), BOS_ID, dtype=torch.long), tgt[:, :-1]], 1)
    dev = run.device
    src, src_len, tgt, tgt_in = src.to(dev), src_len.to(dev), tgt.to(dev), tgt_in.to(dev)
    logits = run.model(src, src_len, tgt_in)
    loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt.reshape(-1), ignore_index=PAD_ID, reduction="sum")
    ntok = int((tgt != PAD_ID).sum())
    run.optim.zero_grad()
    (loss / ntok).backward()
    torch.nn.utils.clip_grad_norm_(run.model.parameters(), run.cfg.clip)
    run.optim.step()
    run.state["step"] += 1
    return float(loss.detach()), ntok


def _train_epoch(run: _Run, epoch: int) -> dict:
    """Train one epoch (its batch order fixed by seed and epoch, so a resumed run sees the same);
    returns the loss per token and the batches done."""
    cfg = run.cfg
    run.model.train()
    rng = random.Random(cfg.seed * 1000 + epoch)
    batches = length_batches([len(t) for _, t in run.pairs], cfg.batch_size, shuffle=True, rng=rng)
    total_loss, total_tok, done = 0.0, 0, 0
    with progress_bar(run.progress, f"epoch {epoch}", total=len(batches), unit="batch") as bar:  # closed on Ctrl-C too
        for batch in batches:
            loss, ntok = _batch_loss(run, batch)
            total_loss, total_tok, done = total_loss + loss, total_tok + ntok, done + 1
            bar.set_postfix_str(f"loss={total_loss / total_tok:.3f}", refresh=False)
            bar.update(1)
            if done % cfg.log_every == 0:
                run.log(f"epoch {epoch} batch {done}/{len(batches)} loss/token {total_loss / total_tok:.4f}")
    return {"loss": total_loss / max(total_tok, 1), "batches": done, "of_batches": len(batches)}


def _finish_epoch(run: _Run, epoch: int, result: dict, budget: EpochBudget) -> None:
    """Validate, record the epoch (its seconds, validation included, timed by the budget), keep
    best.pt, decay the learning rate after a bad epoch, and write last.pt and history.json."""
    cfg, state, optim = run.cfg, run.state, run.optim
    bleu = corpus_bleu_greedy(run.model, run.val_ids, run.val_refs, run.tgt_tok, run.tgt_vocab, run.device)
    run.model.train()
    seconds = budget.epoch_done()
    state["epoch"] = epoch
    state["history"].append({"epoch": epoch, "loss": result["loss"], "val_bleu_greedy": bleu,
                             "batches": result["batches"], "of_batches": result["of_batches"],
                             "seconds": seconds, "lr": optim.param_groups[0]["lr"]})
    improved = bleu > state["best_bleu"]
    if improved:
        state["best_bleu"], state["bad_epochs"], state["best_epoch"] = bleu, 0, epoch
        save_tensors(run.model.state_dict(), os.path.join(run.out_dir, "best.pt"))
    else:
        state["bad_epochs"] += 1
        for group in optim.param_groups:  # saved with the optimiser, so a resumed run keeps it
            group["lr"] *= cfg.lr_decay
    save_tensors({"model": run.model.state_dict(), "optim": optim.state_dict(), "rng": torch.get_rng_state()},
                 run.last_path)
    save_json(os.path.join(run.out_dir, "history.json"), state)
    run.log(f"epoch {epoch} done: loss/token {result['loss']:.4f}, val BLEU (greedy) {bleu:.2f}"
            f"{' (best)' if improved else ''}, {seconds:.0f}s"
            + ("" if improved or cfg.lr_decay == 1 else f"; learning rate now {optim.param_groups[0]['lr']:.3g}"))


def train(cfg: TrainConfig, train_pair: tuple[list[str], list[str]], val_pair: tuple[list[str], list[str]],
          out_dir: str, device: str = "cpu", resume: bool = True, clock=time.monotonic, progress: Progress = True,
          echo: Callable[[str], None] | None = None, wait: bool = False) -> dict:
    """Train (or resume) into out_dir; returns the final state summary (best BLEU, epochs, reason).

    `cfg.max_minutes` is spent in whole epochs (see rerank.budget), timed with `clock`. `progress`:
    see rerank.progress; `echo`: called with every line of train.log (default: INFO records). One
    trainer per run directory: the call holds its lock (rerank.io.run_dir_lock; `wait`)."""
    with run_dir_lock(out_dir, wait):
        return _train(cfg, train_pair, val_pair, out_dir, device, resume, clock, progress, echo)


def _train(cfg, train_pair, val_pair, out_dir, device, resume, clock, progress, echo) -> dict:
    budget = EpochBudget(cfg.max_minutes, clock)
    run = _prepare(cfg, train_pair, val_pair, out_dir, device, resume, progress, echo)
    cfg, state = run.cfg, run.state
    if state.get("stopped") in ("early-stopping",):
        run.log("training had already stopped early; nothing to do")
        return state
    budget.epoch_seconds = [h["seconds"] for h in state["history"] if h["batches"] == h["of_batches"]]
    state["stopped"] = None
    while state["epoch"] < cfg.max_epochs:
        if not budget.allows_epoch():
            state["stopped"] = "time budget"
            run.log(budget.reason())
            break
        epoch = state["epoch"] + 1
        _finish_epoch(run, epoch, _train_epoch(run, epoch), budget)
        if state["bad_epochs"] >= cfg.patience:
            state["stopped"] = "early-stopping"
            break
    state["stopped"] = state["stopped"] or "max-epochs"
    save_json(os.path.join(out_dir, "history.json"), state)
    run.log(f"stopped ({state['stopped']}) after epoch {state['epoch']}; best val BLEU {state['best_bleu']:.2f}")
    return state


def train_files(cfg: TrainConfig, data_dir: str, out_dir: str, device: str = "cpu", resume: bool = True,
                progress: Progress = True, echo: Callable[[str], None] | None = None) -> dict:
    """`train` on DATA_DIR/{train,val}.{src,tgt}[.gz] (the layout of Multi30k's task1/raw)."""
    from rerank.nmt.data import read_parallel, split_paths
    from rerank.device import resolve_device

    pairs = [read_parallel(*split_paths(data_dir, split, cfg.src_lang, cfg.tgt_lang)) for split in ("train", "val")]
    return train(cfg, pairs[0], pairs[1], out_dir, device=resolve_device(device), resume=resume, progress=progress,
                 echo=echo)
