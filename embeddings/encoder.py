"""Load a trained embedding model and encode sentences / image features into the joint space.

A model is two files: `NAME.pt` (state_dict, loaded with weights_only=True; may be stored in
fp16) and `NAME.json` (sizes, vocabularies, training summary). Encoding tokenises raw sentences
(sacremoses + lower-casing), sorts them by length, and runs a GRU loop whose input-gate
pre-activations come from a per-word lookup table (embedding x W_ih folded once), which is
faster than nn.GRU on CPU and gives the same vectors (to float rounding).

Batch independence: a sentence's vector is bitwise the same whichever sentences are encoded
with it (sharded feature runs depend on this). BLAS kernels sum in a shape-dependent order (a
GEMM of 1 or a few rows rounds differently from one of 64), so every GEMM runs on a block of
exactly `batch_size` rows (unused rows empty); and torch.sigmoid rounds differently in the
scalar tail of its vectorised loop, so the gates use sigmoid(a) = (1 + tanh(a / 2)) / 2, whose
operations round alike on every path (tanh is checked in tests/test_embeddings_encoder.py).
"""

from __future__ import annotations

import itertools
import json
import os

import numpy as np
import torch

from rerank.embeddings.model import MLMME, ModelConfig
from rerank.embeddings.modelfile import FORMAT, locate, model_paths, token_ids
from rerank.embeddings.modelfile import read_meta as _read_meta
from rerank.embeddings.modelfile import read_vocabs as _read_vocabs
from rerank.embeddings.vocab import AnyVocab
from rerank.device import load_tensors, load_weights, resolve_device
from rerank.errors import InputError
from rerank.io import atomic_write
from rerank.progress import Progress, track

TABLE_LIMIT_BYTES = 512 * 2**20


def save_model(path: str, model: MLMME, vocabs: dict[str, AnyVocab], info: dict, half: bool = False) -> tuple[str, str]:
    """Write NAME.pt (state_dict, optionally fp16) and NAME.json (config + vocab + info)."""
    pt, js = model_paths(path)
    state = {k: (v.detach().to("cpu").half() if half and v.is_floating_point() else v.detach().to("cpu").clone())
             for k, v in model.state_dict().items()}
    with atomic_write(pt, "wb") as f:
        torch.save(state, f)
    meta = {"format": FORMAT, "version": 1, "dtype": "float16" if half else "float32",
            "model": model.cfg.to_dict(), "vocab": {lang: vocabs[lang].to_data() for lang in model.cfg.languages}, **info}
    with atomic_write(js) as f:
        json.dump(meta, f, ensure_ascii=False, indent=1)
    return pt, js


class Encoder:
    """Encode sentences of any trained language, and image features, into normalised vectors
    (torch; embeddings.numpy_encoder.NumpyEncoder gives the same vectors without it)."""

    backend = "torch"

    def __init__(self, model: MLMME, vocabs: dict[str, AnyVocab], meta: dict | None = None):
        self.model = model.eval()
        self.vocabs = vocabs
        self.meta = meta or {}
        self._weights: dict = {}

    @classmethod
    def load(cls, path: str) -> "Encoder":
        """The model NAME.pt + NAME.json (`path`: either, NAME or their directory); InputError naming
        the file for anything broken in them, and the path as given when it is not a model's."""
        pt, js = locate(path)
        meta = _read_meta(js)
        try:
            cfg = ModelConfig.from_dict(meta["model"])
            model = MLMME(cfg)
        except (KeyError, TypeError, ValueError, RuntimeError) as exc:
            raise InputError(f"not a valid model config ({type(exc).__name__}: {exc})", js) from None
        vocabs = _read_vocabs(meta, cfg, js)
        load_weights(model, load_tensors(pt, "model weights"), pt, f"the model of {os.path.basename(js)}")
        return cls(model, vocabs, meta)

    @property
    def languages(self) -> list[str]:
        return list(self.model.cfg.languages)

    @property
    def has_images(self) -> bool:
        return self.model.has_images

    @property
    def dim(self) -> int:
        return self.model.cfg.joint_dim

    @property
    def image_dim(self) -> int:
        return self.model.cfg.image_dim

    def tokenize_ids(self, sentences: list[str], lang: str, empty: str = "error") -> list[list[int]]:
        return token_ids(self.vocabs, sentences, lang, empty)

    def _step_weights(self, lang: str, device: torch.device) -> dict:
        """GRU weights of `_encode_block`, the r and z gate columns halved (exact: a power of two)
        for sigmoid(a) = (1 + tanh(a / 2)) / 2, and the per-word input table E W_ih^T + b_ih
        (halved alike; None if larger than TABLE_LIMIT_BYTES). Cached per language and device."""
        key = (lang, str(device))
        if key not in self._weights:
            gru, emb = self.model.gru[lang], self.model.embed[lang].weight
            H = gru.hidden_size
            with torch.inference_mode():
                half = torch.ones(3 * H, device=emb.device)
                half[: 2 * H] = 0.5
                w = {"w_ih_t": gru.weight_ih_l0.t() * half, "b_ih": gru.bias_ih_l0 * half,
                     "w_hh_t": gru.weight_hh_l0.t() * half, "b_hh": gru.bias_hh_l0 * half, "table": None}
                if emb.shape[0] * 3 * H * 4 <= TABLE_LIMIT_BYTES:
                    w["table"] = torch.addmm(w["b_ih"], emb, w["w_ih_t"])
                self._weights[key] = {k: None if v is None else v.contiguous().to(device) for k, v in w.items()}
        return self._weights[key]

    @torch.inference_mode()
    def _encode_block(self, lang: str, batch: list[list[int]], rows: int, device: torch.device) -> torch.Tensor:
        """Last GRU states (rows, H) of a block of exactly `rows` rows: the id lists of `batch`
        (lengths >= 1, at most `rows` of them), then empty rows. A finished row keeps its state
        (masked update), so the kernels see the same shapes whatever the block holds."""
        w = self._step_weights(lang, device)
        sizes = np.zeros(rows, dtype=np.int64)
        sizes[: len(batch)] = [len(x) for x in batch]
        flat = np.fromiter(itertools.chain.from_iterable(batch), dtype=np.int64, count=int(sizes.sum()))
        grid = np.zeros((rows, int(sizes.max())), dtype=np.int64)
        grid[np.repeat(np.arange(rows), sizes), np.arange(len(flat)) - np.repeat(np.cumsum(sizes) - sizes, sizes)] = flat
        ids, lengths = torch.from_numpy(grid).to(device), torch.from_numpy(sizes).to(device)
        embed = self.model.embed[lang].to(device)
        H = w["w_hh_t"].shape[0]
        h = torch.zeros(rows, H, device=device)
        alive = (lengths > torch.arange(ids.shape[1], device=device).unsqueeze(1)).unsqueeze(2)  # (L, rows, 1)
        for t in range(ids.shape[1]):
            if w["table"] is not None:
                x = w["table"][ids[:, t]]
            else:
                x = torch.addmm(w["b_ih"], embed(ids[:, t]), w["w_ih_t"])
            g = torch.addmm(w["b_hh"], h, w["w_hh_t"])
            r, z = torch.tanh(x[:, : 2 * H] + g[:, : 2 * H]).add_(1.0).mul_(0.5).chunk(2, 1)
            n = torch.tanh(x[:, 2 * H:] + r * g[:, 2 * H:])
            h = torch.where(alive[t], n + z * (h - n), h)
        return h

    def encode(self, sentences: list[str], lang: str, batch_size: int = 256, device: str | None = "cpu",
               empty: str = "error", progress: Progress = False) -> np.ndarray:
        """(N, dim) float32 unit vectors for raw sentences in `lang` (same order as given).

        Sentences are sorted by length and encoded in blocks of batch_size rows; a vector depends
        only on its sentence, the model and batch_size (see the module docstring).
        Empty sentences (no tokens) raise InputError, or get a zero vector with empty='zero'."""
        if empty not in ("error", "zero"):
            raise ValueError("empty must be 'error' or 'zero'")
        dev = resolve_device(device)
        ids = self.tokenize_ids(list(sentences), lang, empty)
        out = np.zeros((len(ids), self.dim), dtype=np.float32)
        order = [i for i in sorted(range(len(ids)), key=lambda i: -len(ids[i])) if ids[i]]
        proj = self.model.text_proj[lang].to(dev) if lang in self.model.text_proj else None
        starts = track(range(0, len(order), batch_size), progress, f"encode {lang}", unit="batch")
        with torch.inference_mode():
            for s in starts:
                idx = order[s:s + batch_size]
                h = self._encode_block(lang, [ids[i] for i in idx], batch_size, dev)
                if proj is not None:
                    h = proj(h)
                out[idx] = torch.nn.functional.normalize(h, dim=-1)[: len(idx)].float().cpu().numpy()
        return out

    def encode_images(self, features: np.ndarray, batch_size: int = 256, device: str | None = "cpu") -> np.ndarray:
        """(N, dim) float32 unit vectors for (N, image_dim) CNN features; every projection runs
        on batch_size rows (the last batch padded with zeros), so a vector does not depend on N."""
        if not self.has_images:
            raise InputError("this model was trained without images (text-only): it cannot encode image features")
        feats = np.asarray(features, dtype=np.float32)
        want = self.model.cfg.image_dim
        if feats.ndim != 2 or feats.shape[1] != want:
            raise InputError(f"image features of shape {feats.shape}, but the model expects (N, {want})")
        dev = resolve_device(device)
        proj = self.model.image_proj.to(dev)
        out = np.zeros((len(feats), self.dim), dtype=np.float32)
        with torch.inference_mode():
            for s in range(0, len(feats), batch_size):
                q = torch.zeros(batch_size, want, device=dev)
                part = torch.from_numpy(np.array(feats[s:s + batch_size]))
                q[: len(part)] = part.to(dev)
                out[s:s + batch_size] = torch.nn.functional.normalize(proj(q), dim=-1)[: len(part)].cpu().numpy()
        return out
