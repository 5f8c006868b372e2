"""Training loop: Adam/Adadelta, dropout and L2 presets, learning-rate decay on a validation
plateau, early stopping on validation BLEU,
a checkpoint every epoch (resumable), a wall-clock budget, tqdm progress and a log file.

Run directory layout: config.json (model + training settings), vocab.src.json, vocab.tgt.json
(a word list, or a SentencePiece model with --subword),
best.pt (state_dict with the best validation BLEU), last.pt (model + optimiser + counters, for
resuming), history.json (per-epoch loss / BLEU / time), train.log.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import random
import sys
import time

import sacrebleu
import torch
from torch.nn import functional as F
from tqdm import tqdm

from nmt.beam import greedy
from nmt.data import encode_source, length_batches, pad
from nmt.model import SIZE_PRESETS, AttentionNMT, ModelConfig
from nmt.vocab import BOS_ID, EOS_ID, PAD_ID, SubwordVocab, Tokenizer, Vocab, vocab_from_json
from rerank.io import atomic_write

# The paper's three regularisation regimes (Calixto & Liu 2017).
FLAVOURS = {
    "weak": dict(dropout=0.0, weight_decay=0.0),
    "regular": dict(dropout=0.5, weight_decay=1e-8),
    "optimised": dict(dropout=0.2, weight_decay=0.0),
}


@dataclasses.dataclass
class TrainConfig:
    src_lang: str = "en"
    tgt_lang: str = "de"
    size: str = "cpu"
    flavour: str = "optimised"
    dropout: float = 0.2
    weight_decay: float = 0.0
    tie_embeddings: bool = False
    min_freq: int = 2
    max_vocab: int | None = None
    subword: str | None = None  # None (words), "bpe" or "unigram" (SentencePiece)
    subword_size: int = 8000
    optimizer: str = "adam"  # adam | adadelta (the paper)
    lr: float | None = None  # default: 1e-3 for adam, 1.0 for adadelta
    lr_decay: float = 0.5  # the learning rate is multiplied by this after an epoch without val BLEU gain
    batch_size: int = 64
    clip: float = 1.0
    max_epochs: int = 30
    patience: int = 3
    max_minutes: float | None = None
    max_train_len: int = 80
    seed: int = 1
    log_every: int = 100


def make_config(size="cpu", flavour="optimised", **overrides) -> TrainConfig:
    """TrainConfig for a size preset and a regularisation flavour; `overrides` win (None = keep)."""
    if flavour not in FLAVOURS:
        raise ValueError(f"unknown flavour {flavour!r}; choose from {', '.join(FLAVOURS)}")
    if size not in SIZE_PRESETS:
        raise ValueError(f"unknown size {size!r}; choose from {', '.join(SIZE_PRESETS)}")
    if overrides.get("lr_decay") is not None and not 0 < overrides["lr_decay"] <= 1:
        raise ValueError(f"--lr-decay must be in (0, 1], got {overrides['lr_decay']}")
    if overrides.get("subword") not in (None, "bpe", "unigram"):
        raise ValueError(f"unknown subword model {overrides['subword']!r}; choose bpe or unigram")
    values = dict(size=size, flavour=flavour, **FLAVOURS[flavour])
    values.update({k: v for k, v in overrides.items() if v is not None})
    return TrainConfig(**values)


class Logger:
    def __init__(self, path: str):
        self.path = path

    def __call__(self, msg: str):
        line = time.strftime("%Y-%m-%d %H:%M:%S ") + msg
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(line + "\n")
        tqdm.write(line, file=sys.stderr)


def save_json(path: str, obj) -> None:
    with atomic_write(path) as f:
        json.dump(obj, f, indent=1, ensure_ascii=False)
        f.write("\n")


def load_model(run_dir: str, which: str = "best", device: str = "cpu"):
    """(model, src_vocab, tgt_vocab, config dict) from a run directory."""
    with open(os.path.join(run_dir, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    vocabs = []
    for side in ("src", "tgt"):
        with open(os.path.join(run_dir, f"vocab.{side}.json"), encoding="utf-8") as f:
            vocabs.append(vocab_from_json(f.read()))
    model = AttentionNMT(ModelConfig.from_dict(config["model"]))
    state = torch.load(os.path.join(run_dir, f"{which}.pt"), map_location=device, weights_only=True)
    model.load_state_dict(state["model"] if "model" in state else state)
    return model.to(device).eval(), vocabs[0], vocabs[1], config


def corpus_bleu_greedy(model, src_ids, refs, tgt_tok, tgt_vocab, device, batch_size=128) -> float:
    """Detokenised corpus BLEU (sacrebleu) of greedy translations of encoded sources."""
    hyps = [""] * len(src_ids)
    tables = model.step_tables()
    for batch in length_batches([len(s) for s in src_ids], batch_size, shuffle=False):
        src, src_len = pad([src_ids[i] for i in batch])
        for i, h in zip(batch, greedy(model, src.to(device), src_len.to(device), tables=tables)):
            hyps[i] = tgt_tok.detokenize(tgt_vocab.decode(h.tokens))
    return sacrebleu.corpus_bleu(hyps, [refs]).score


def train(cfg: TrainConfig, train_pair: tuple[list[str], list[str]], val_pair: tuple[list[str], list[str]],
          out_dir: str, device: str = "cpu", resume: bool = True) -> dict:
    """Train (or resume) into out_dir; returns the final state summary (best BLEU, epochs, reason)."""
    os.makedirs(out_dir, exist_ok=True)
    log = Logger(os.path.join(out_dir, "train.log"))
    last_path = os.path.join(out_dir, "last.pt")
    resuming = resume and os.path.exists(last_path)
    if resuming:
        with open(os.path.join(out_dir, "config.json"), encoding="utf-8") as f:
            saved = json.load(f)
        cfg = TrainConfig(**{**saved["train"], **({"max_minutes": cfg.max_minutes, "max_epochs": cfg.max_epochs})})
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    src_tok, tgt_tok = Tokenizer(cfg.src_lang), Tokenizer(cfg.tgt_lang)
    train_src = [src_tok.tokenize(s) for s in tqdm(train_pair[0], desc="tokenise src", file=sys.stderr)]
    train_tgt = [tgt_tok.tokenize(s) for s in tqdm(train_pair[1], desc="tokenise tgt", file=sys.stderr)]
    if resuming:
        model, src_vocab, tgt_vocab, _ = load_model(out_dir, "last", device)
        model.train()
    else:
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
        save_json(os.path.join(out_dir, "config.json"),
                  {"model": dataclasses.asdict(mcfg), "train": dataclasses.asdict(cfg)})
    pairs = [(src_vocab.encode(s) + [EOS_ID], tgt_vocab.encode(t) + [EOS_ID])
             for s, t in zip(train_src, train_tgt) if 0 < len(s) <= cfg.max_train_len and 0 < len(t) <= cfg.max_train_len]
    val_ids = encode_source(val_pair[0], src_tok, src_vocab, cfg.max_train_len * 2, warn=False)

    if cfg.optimizer == "adam":
        optim = torch.optim.Adam(model.parameters(), lr=cfg.lr or 1e-3, weight_decay=cfg.weight_decay)
    elif cfg.optimizer == "adadelta":
        optim = torch.optim.Adadelta(model.parameters(), lr=cfg.lr or 1.0, rho=0.95, eps=1e-6, weight_decay=cfg.weight_decay)
    else:
        raise ValueError(f"unknown optimizer {cfg.optimizer!r} (adam or adadelta)")
    state = {"epoch": 0, "step": 0, "best_bleu": -1.0, "bad_epochs": 0, "history": [], "stopped": None}
    if resuming:
        ckpt = torch.load(last_path, map_location=device, weights_only=True)
        optim.load_state_dict(ckpt["optim"])
        with open(os.path.join(out_dir, "history.json"), encoding="utf-8") as f:
            state = json.load(f)
        torch.set_rng_state(ckpt["rng"])
        log(f"resumed after epoch {state['epoch']} (best val BLEU {state['best_bleu']:.2f})")
    else:
        log(f"start: {len(pairs)} training pairs, vocab src {len(src_vocab)} tgt {len(tgt_vocab)}, "
            f"{sum(p.numel() for p in model.parameters())} parameters, config {dataclasses.asdict(cfg)}")
    if state.get("stopped") in ("early-stopping",):
        log("training had already stopped early; nothing to do")
        return state

    start = time.time()
    budget = cfg.max_minutes * 60 if cfg.max_minutes else math.inf
    state["stopped"] = None
    while state["epoch"] < cfg.max_epochs:
        epoch = state["epoch"] + 1
        model.train()
        rng = random.Random(cfg.seed * 1000 + epoch)  # per epoch, so a resumed run sees the same batches
        batches = length_batches([len(t) for _, t in pairs], cfg.batch_size, shuffle=True, rng=rng)
        total_loss, total_tok, t0, out_of_time = 0.0, 0, time.time(), False
        bar = tqdm(batches, desc=f"epoch {epoch}", file=sys.stderr, mininterval=5)
        for bi, batch in enumerate(bar):
            src, src_len = pad([pairs[i][0] for i in batch])
            tgt, _ = pad([pairs[i][1] for i in batch])
            tgt_in = torch.cat([torch.full((len(batch), 1), BOS_ID, dtype=torch.long), tgt[:, :-1]], 1)
            src, src_len, tgt, tgt_in = src.to(device), src_len.to(device), tgt.to(device), tgt_in.to(device)
            logits = model(src, src_len, tgt_in)
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt.reshape(-1), ignore_index=PAD_ID, reduction="sum")
            ntok = int((tgt != PAD_ID).sum())
            optim.zero_grad()
            (loss / ntok).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip)
            optim.step()
            state["step"] += 1
            total_loss += float(loss.detach())
            total_tok += ntok
            bar.set_postfix(loss=f"{total_loss / total_tok:.3f}", refresh=False)
            if (bi + 1) % cfg.log_every == 0:
                log(f"epoch {epoch} batch {bi + 1}/{len(batches)} loss/token {total_loss / total_tok:.4f}")
            if time.time() - start > budget:
                out_of_time = True
                break
        bar.close()
        bleu = corpus_bleu_greedy(model, val_ids, val_pair[1], tgt_tok, tgt_vocab, device)
        model.train()
        state["epoch"] = epoch
        state["history"].append({"epoch": epoch, "loss": total_loss / max(total_tok, 1), "val_bleu_greedy": bleu,
                                 "batches": bi + 1, "of_batches": len(batches), "seconds": time.time() - t0,
                                 "lr": optim.param_groups[0]["lr"]})
        improved = bleu > state["best_bleu"]
        if improved:
            state["best_bleu"], state["bad_epochs"], state["best_epoch"] = bleu, 0, epoch
            torch.save(model.state_dict(), os.path.join(out_dir, "best.pt.tmp"))
            os.replace(os.path.join(out_dir, "best.pt.tmp"), os.path.join(out_dir, "best.pt"))
        else:
            state["bad_epochs"] += 1
            for group in optim.param_groups:  # saved with the optimiser, so a resumed run keeps it
                group["lr"] *= cfg.lr_decay
        torch.save({"model": model.state_dict(), "optim": optim.state_dict(), "rng": torch.get_rng_state()},
                   last_path + ".tmp")
        os.replace(last_path + ".tmp", last_path)
        save_json(os.path.join(out_dir, "history.json"), state)
        log(f"epoch {epoch} done: loss/token {total_loss / max(total_tok, 1):.4f}, val BLEU (greedy) {bleu:.2f}"
            f"{' (best)' if improved else ''}, {time.time() - t0:.0f}s"
            + ("" if improved or cfg.lr_decay == 1 else f"; learning rate now {optim.param_groups[0]['lr']:.3g}"))
        if state["bad_epochs"] >= cfg.patience:
            state["stopped"] = "early-stopping"
        elif out_of_time:
            state["stopped"] = "time-budget"
        if state["stopped"]:
            break
    state["stopped"] = state["stopped"] or "max-epochs"
    save_json(os.path.join(out_dir, "history.json"), state)
    log(f"stopped ({state['stopped']}) after epoch {state['epoch']}; best val BLEU {state['best_bleu']:.2f}")
    return state


def train_files(cfg: TrainConfig, data_dir: str, out_dir: str, device: str = "cpu", resume: bool = True) -> dict:
    """`train` on DATA_DIR/{train,val}.{src,tgt}[.gz] (the layout of Multi30k's task1/raw)."""
    from nmt.data import read_parallel, split_paths
    from rerank.device import resolve_device

    pairs = [read_parallel(*split_paths(data_dir, split, cfg.src_lang, cfg.tgt_lang)) for split in ("train", "val")]
    return train(cfg, pairs[0], pairs[1], out_dir, device=resolve_device(device), resume=resume)
