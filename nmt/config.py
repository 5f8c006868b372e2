"""The NMT's settings without torch (so the command line can offer their defaults cheaply):
the size presets (the same words as `rerank embed train --preset`), the paper's three
regularisation flavours, and the training configuration."""

from __future__ import annotations

import dataclasses

# Network sizes. `cpu` keeps an epoch over Multi30k to a few minutes on 2 cores.
SIZE_PRESETS = {
    "paper": dict(emb_dim=620, enc_hidden=1024, dec_hidden=1024, att_dim=1024, readout_dim=620),
    "cpu": dict(emb_dim=256, enc_hidden=256, dec_hidden=512, att_dim=256, readout_dim=256),
    # for a heavily shared machine: about 3x fewer FLOPs per token than `cpu`
    "small": dict(emb_dim=128, enc_hidden=128, dec_hidden=256, att_dim=128, readout_dim=128),
    "tiny": dict(emb_dim=32, enc_hidden=32, dec_hidden=64, att_dim=32, readout_dim=32),
}


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
    max_minutes: float | None = None  # per invocation, whole epochs only (rerank.budget)
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
        raise ValueError(f"the learning-rate decay (lr_decay) must be in (0, 1], got {overrides['lr_decay']}")
    if overrides.get("max_minutes") is not None and not overrides["max_minutes"] > 0:
        raise ValueError(f"the time budget (max_minutes) must be > 0, got {overrides['max_minutes']}")
    if overrides.get("subword") not in (None, "bpe", "unigram"):
        raise ValueError(f"unknown subword model {overrides['subword']!r}; choose bpe or unigram")
    values = dict(size=size, flavour=flavour, **FLAVOURS[flavour])
    values.update({k: v for k, v in overrides.items() if v is not None})
    return TrainConfig(**values)
