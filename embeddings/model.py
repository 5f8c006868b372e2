"""The multilingual multi-modal embedding network of Calixto & Liu (2017).

One word embedding + GRU per language; a sentence vector is the GRU's last hidden state
(linearly projected when the GRU size differs from the joint space). An image vector is
d = W_I q for CNN features q. Dropout is applied to both, then everything is L2-normalised,
so s_i(d, v) = d.v and s_s(v_k, v_l) = v_k.v_l are cosines.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence

from rerank.embeddings.config import PRESETS  # noqa: F401 (re-exported: the size presets)


@dataclass
class ModelConfig:
    """Sizes of the network. `vocab_sizes` maps language -> vocabulary size; image_dim 0 = text only."""

    languages: list[str]
    vocab_sizes: dict[str, int]
    word_dim: int = 620
    hidden_dim: int = 1024
    joint_dim: int = 2048
    image_dim: int = 0
    dropout: float = 0.5
    init_std: float = 0.01
    align_pairs: list = field(default_factory=list)   # [[src, tgt]]: a learned word map W per pair (AME)
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "ModelConfig":
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)


class MLMME(nn.Module):
    """Sentence encoders for K languages and an image projection into one normalised space."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.ModuleDict({lang: nn.Embedding(cfg.vocab_sizes[lang], cfg.word_dim, padding_idx=0) for lang in cfg.languages})
        self.gru = nn.ModuleDict({lang: nn.GRU(cfg.word_dim, cfg.hidden_dim, batch_first=True) for lang in cfg.languages})
        self.text_proj = nn.ModuleDict()
        if cfg.hidden_dim != cfg.joint_dim:
            for lang in cfg.languages:
                self.text_proj[lang] = nn.Linear(cfg.hidden_dim, cfg.joint_dim, bias=False)
        self.image_proj = nn.Linear(cfg.image_dim, cfg.joint_dim) if cfg.image_dim > 0 else None
        self.drop = nn.Dropout(cfg.dropout)
        # W of the RCSLS alignment loss (embeddings.align), mapping src word vectors towards tgt ones
        self.align = nn.ParameterDict({f"{s}_{t}": nn.Parameter(torch.eye(cfg.word_dim)) for s, t in cfg.align_pairs})
        self.reset_parameters()

    @property
    def has_images(self) -> bool:
        return self.image_proj is not None

    def reset_parameters(self) -> None:
        """Paper initialisation: non-recurrent N(0, std), recurrent orthogonal, biases 0."""
        H = self.cfg.hidden_dim
        for name, p in self.named_parameters():
            if name.startswith("align."):
                nn.init.eye_(p)
            elif "bias" in name:
                nn.init.zeros_(p)
            elif "weight_hh" in name:
                with torch.no_grad():
                    for g in range(3):  # one orthogonal block per gate (r, z, n)
                        nn.init.orthogonal_(p[g * H:(g + 1) * H])
            else:
                nn.init.normal_(p, 0.0, self.cfg.init_std)
        for emb in self.embed.values():
            with torch.no_grad():
                emb.weight[0].zero_()

    def align_map(self, src: str, tgt: str) -> torch.Tensor | None:
        """The learned word map W (word_dim x word_dim) of the pair src -> tgt, None if there is none
        (the identity)."""
        key = f"{src}_{tgt}"
        return self.align[key] if key in self.align else None

    def encode_text(self, lang: str, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """(B, L) padded ids and (B,) lengths >= 1 -> (B, joint_dim) unit vectors."""
        x = self.embed[lang](ids)
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        _, h = self.gru[lang](packed)
        v = h[-1]
        if lang in self.text_proj:
            v = self.text_proj[lang](v)
        return F.normalize(self.drop(v), dim=-1)

    def encode_image(self, feats: torch.Tensor) -> torch.Tensor:
        if self.image_proj is None:
            raise ValueError("this model was trained without images: it has no image projection")
        return F.normalize(self.drop(self.image_proj(feats)), dim=-1)

    def forward(self, text: dict, images: torch.Tensor | None = None) -> dict:
        """text: {lang: (ids, lengths)} -> {lang: vectors, "image": vectors (if images given)}."""
        out = {lang: self.encode_text(lang, ids, lengths) for lang, (ids, lengths) in text.items()}
        if images is not None:
            out["image"] = self.encode_image(images)
        return out
