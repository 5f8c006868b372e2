"""The language model's settings (nmt.lm), without torch: the command line reads its defaults."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class LMConfig:
    lang: str = "de"
    emb_dim: int = 256
    hidden: int = 512
    dropout: float = 0.2
    min_freq: int = 2
    subword: str | None = None       # None (words), "bpe" or "unigram"
    subword_size: int = 8000
    lr: float = 1e-3
    batch_size: int = 64
    clip: float = 1.0
    max_epochs: int = 20
    patience: int = 2
    max_minutes: float | None = None  # per invocation, whole epochs only (rerank.budget)
    max_len: int = 80
    seed: int = 1
