"""Training of the MLMME / VSE embedding models (single process or DDP under torchrun), with the
settings of embeddings.config. Without image features the text-only model is trained (beta = 0:
R_ML only) and this is recorded in the log, config.json and the model's JSON.
"""

from __future__ import annotations

import json
import math
import logging
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch.nn.parallel import DistributedDataParallel

from rerank.embeddings import distributed as D
from rerank.embeddings.align import Aligner
from rerank.embeddings.config import DEFAULTS, resolve_config
from rerank.embeddings.data import (PoolOptions, build_pools, epoch_tuples, image_list, load_features, pad_batch,
                                     sample_negatives)
from rerank.embeddings.encoder import Encoder, save_model
from rerank.embeddings.evaluate import selection_score
from rerank.embeddings.losses import mlmme_loss
from rerank.embeddings.finetune import check_image_dim, init_settings, load_init_weights
from rerank.embeddings.model import MLMME, ModelConfig
from rerank.embeddings.pseudopairs import load_pseudo_sources
from rerank.embeddings.vocab import AnyVocab, vocab_from_data
from rerank.budget import EpochBudget
from rerank.progress import Progress, progress_bar
from rerank.device import load_tensors, load_weights, resolve_device
from rerank.errors import InputError
from rerank.io import atomic_write, run_dir_lock

logger = logging.getLogger(__name__)

__all__ = ["DEFAULTS", "TEXT_ONLY_NOTE", "Trainer", "resolve_config", "train"]
TEXT_ONLY_NOTE = "no image features: text-only model (beta = 0, R_ML only)"
_NO_CAPTION = np.ones(1, dtype=np.int64)   # stands in for a tuple's missing language (masked in the loss)


def _read_vocabs(path: str, languages: list[str]) -> dict[str, AnyVocab]:
    """The run's vocab.json (resuming): a word list or a SentencePiece model per language."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read the run's vocabularies: {exc}", path) from None
    if not isinstance(data, dict) or not all(lang in data for lang in languages):
        raise InputError(f"not the vocabularies of this run (one for each of {languages})", path)
    try:
        return {lang: vocab_from_data(data[lang]) for lang in languages}
    except ValueError as exc:
        raise InputError(f"not the vocabularies of this run: {exc}", path) from None


class Trainer:
    """One invocation of training: set up (or resume) in the constructor, run with train().
    `clock` times the max_minutes budget (rerank.budget); its time starts here."""

    def __init__(self, cfg: dict, data_dir: str, out_dir: str, device: str = "cpu", resume: bool = True,
                 quiet: bool = False, clock=time.monotonic, echo: Callable[[str], None] | None = None,
                 progress: Progress = True):
        self.echo, self.progress = echo, progress
        self.budget = EpochBudget(cfg["max_minutes"], clock)
        self.cfg, self.data_dir, self.out_dir = cfg, data_dir, out_dir
        self.device = resolve_device(device)
        D.init(self.device)
        self.world, self.rank, local = D.world()
        if self.device.type == "cuda" and self.world > 1:
            self.device = torch.device("cuda", local)
            torch.cuda.set_device(self.device)
        self.main = self.rank == 0
        self.quiet = quiet
        os.makedirs(out_dir, exist_ok=True)
        self.ckpt_path = os.path.join(out_dir, "checkpoint.pt")
        self._setup_data()
        self._setup_model(resume)
        self.budget.epoch_seconds = list(self.state["epoch_seconds"])

    def log(self, msg: str) -> None:
        if not self.main:
            return
        line = f"[{time.strftime('%Y-%m-%d %H:%M:%S')}] {msg}"
        with open(os.path.join(self.out_dir, "train.log"), "a", encoding="utf-8") as f:
            f.write(line + "\n")
        if not self.quiet:
            (self.echo or logger.info)(line)

    def _setup_data(self) -> None:
        c = self.cfg
        vocab_path = os.path.join(self.out_dir, "vocab.json")
        vocabs, self.init_state, self.init_image_dim = None, None, None
        if c["init"]:
            vocabs, self.init_state, self.init_image_dim = init_settings(c["init"], c)
        if os.path.exists(vocab_path) and os.path.exists(self.ckpt_path):
            vocabs = _read_vocabs(vocab_path, c["languages"])
        self.pools, self.vocabs = build_pools(self.data_dir, "train", c["languages"], c["sources"], vocabs,
                                              PoolOptions.from_config(c), load_pseudo_sources(c["pseudo_pairs"]))
        if self.main and not os.path.exists(self.ckpt_path):
            with atomic_write(vocab_path) as f:
                json.dump({k: v.to_data() for k, v in self.vocabs.items()}, f, ensure_ascii=False)
        feats = c["image_features"]
        self.features = None
        if feats.get("train"):
            n = len(image_list(self.data_dir, "train"))
            self.features = load_features(feats["train"], n)
            if feats.get("val"):
                load_features(feats["val"], len(image_list(self.data_dir, "val")), self.features.shape[1])
        self.text_only = self.features is None
        if self.text_only:
            c["beta"] = 0.0
            if len(c["languages"]) < 2:
                raise InputError("text-only training needs at least two languages (R_ML); give image features for K = 1")
            self.one_language_units = self.pools.only_complete()  # no R_ML signal (disjoint halves)
        elif c["pseudo_pairs"] and c["contrastive"] == "random":
            raise InputError("pseudo-pairs have no image: with image features train them with contrastive sum or max")
        elif c["disjoint_halves"] and c["contrastive"] == "random":
            raise InputError("disjoint halves leave tuples without a language: train them with contrastive sum or max")
        c["text_only"] = self.text_only
        c["images_note"] = TEXT_ONLY_NOTE if self.text_only else f"image features: {feats}"

    def _setup_model(self, resume: bool) -> None:
        c = self.cfg
        torch.manual_seed(c["seed"])
        mcfg = ModelConfig(languages=list(c["languages"]), vocab_sizes={k: len(v) for k, v in self.vocabs.items()},
                           word_dim=c["word_dim"], hidden_dim=c["hidden_dim"], joint_dim=c["joint_dim"],
                           image_dim=0 if self.features is None else int(self.features.shape[1]),
                           dropout=c["dropout"], init_std=c["init_std"], align_pairs=self._align_pairs())
        if c["init"]:
            mcfg.image_dim = check_image_dim(c["init"], self.init_image_dim, mcfg.image_dim or None)
        self.model = MLMME(mcfg).to(self.device)
        if c["init"]:
            load_init_weights(self.model, self.init_state, c["init"])
            self.init_state = None
        self.aligner = None
        if c["align_loss"]:
            src, tgt = self._align_languages()
            self.aligner = Aligner.build(c["dictionary"], src, tgt, self.vocabs, self.device, knn=c["align_knn"],
                                         batch=c["align_batch"], neighbours=c["align_neighbours"])
        self.ddp = DistributedDataParallel(self.model) if D.active() else None
        self.opt = torch.optim.Adam(self.model.parameters(), lr=c["lr"])
        torch.manual_seed(c["seed"] + 7919 * (self.rank + 1))   # dropout stream, per rank
        self.state: dict[str, Any] = {"epoch": 0, "batch": 0, "step": 0, "best": -math.inf, "bad_epochs": 0,
                                      "elapsed": 0.0, "epoch_seconds": [], "history": [], "status": "running"}
        if resume and os.path.exists(self.ckpt_path):
            self._restore()
            self.log(f"resumed from {self.ckpt_path}: epoch {self.state['epoch']}, batch {self.state['batch']}, step {self.state['step']}")

    def _align_languages(self) -> tuple[str, str]:
        return tuple(self.cfg["align_languages"] or self.cfg["languages"][:2])

    def _align_pairs(self) -> list:
        """The pair with a learned W (model.align): the aligned pair, unless the map is the identity."""
        return [list(self._align_languages())] if self.cfg["align_loss"] and self.cfg["align_map"] == "linear" else []

    def _restore(self) -> None:
        """Model, optimiser, state and this rank's RNG from the checkpoint (InputError if broken)."""
        ck = load_tensors(self.ckpt_path, "checkpoint")
        if not isinstance(ck, dict) or not {"model", "optimizer", "state"} <= set(ck):
            raise InputError("not a checkpoint of `rerank embed train`; start afresh (without resuming)", self.ckpt_path)
        load_weights(self.model, ck["model"], self.ckpt_path, "the model of this config")
        try:
            self.opt.load_state_dict(ck["optimizer"])
            self.state.update(json.loads(ck["state"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"not a checkpoint of this run ({type(exc).__name__}: {exc}); start afresh "
                             "(without resuming)", self.ckpt_path) from None
        rng = os.path.join(self.out_dir, f"rng-rank{self.rank}.pt")
        if os.path.exists(rng):
            try:
                torch.set_rng_state(load_tensors(rng, "RNG state"))
            except (TypeError, RuntimeError) as exc:
                raise InputError(f"not an RNG state ({exc}); delete it to resume without it", rng) from None

    def save_checkpoint(self) -> None:
        """The RNG state of this rank and (on rank 0) the checkpoint, each written atomically."""
        with atomic_write(os.path.join(self.out_dir, f"rng-rank{self.rank}.pt"), "wb") as f:
            torch.save(torch.get_rng_state(), f)
        if self.main:
            ck = {"model": self.model.state_dict(), "optimizer": self.opt.state_dict(), "state": json.dumps(self.state)}
            with atomic_write(self.ckpt_path, "wb") as f:
                torch.save(ck, f)
        D.barrier()

    def _encode_items(self, imgs, sents, items: np.ndarray) -> dict:
        """Encode global items (epoch positions) sharded over ranks; gathered, padding trimmed."""
        n = len(items)
        start, stop, per = D.shard(n)
        mine = items[start:stop]
        if len(mine) < per:  # pad so that every rank gathers the same number of rows
            mine = np.concatenate([mine, np.repeat(items[-1:], per - len(mine))])
        text = {}
        for lang in self.cfg["languages"]:
            ids, lengths = pad_batch([self.pools.sentences[lang][j] if j >= 0 else _NO_CAPTION for j in sents[lang][mine]])
            text[lang] = (ids.to(self.device), lengths)
        images = None
        if not self.text_only and self.cfg["beta"] > 0:  # pseudo-pair units (no image) get row 0, masked in the loss
            rows = imgs[mine]
            images = torch.from_numpy(self.features[np.where(rows < len(self.features), rows, 0)]).to(self.device)
        out = (self.ddp or self.model)(text, images)
        return {k: D.gather_rows(v)[:n] for k, v in out.items()}

    def step(self, imgs: np.ndarray, sents: dict, pos: np.ndarray, negs: np.ndarray | None) -> torch.Tensor:
        """One optimisation step on the tuples at epoch positions `pos` (negatives for mode random)."""
        c = self.cfg
        m = 0 if negs is None else negs.shape[1]
        items = pos if negs is None else np.concatenate([pos, negs[pos].reshape(-1)])
        vec = self._encode_items(imgs, sents, items)
        groups = torch.from_numpy(imgs[pos]).to(self.device)
        k = len(pos)
        pos_vec = {key: v[:k] for key, v in vec.items()}
        neg_vec = {key: v[k:].reshape(k, m, -1) for key, v in vec.items()} if m else None
        with_image = None if self.features is None else groups < len(self.features)
        present = {lang: torch.from_numpy(sents[lang][pos] >= 0).to(self.device) for lang in c["languages"]}
        loss, _ = mlmme_loss(pos_vec, c["languages"], c["beta"], c["margin"], c["contrastive"], neg_vec, groups, with_image,
                             present, c["temperature"])
        if self.aligner is not None:
            loss = loss + c["align_weight"] * self.aligner.loss(self.model, c["seed"], self.state["step"])
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        if c["grad_clip"]:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), c["grad_clip"])
        self.opt.step()
        if self.aligner is not None:
            self.aligner.project(self.model)
        return loss.detach()

    def validate(self) -> tuple[float, dict]:
        enc = Encoder(self.model, self.vocabs)
        score, parts = selection_score(enc, self.data_dir, self.cfg["languages"],
                                       None if self.text_only else self.cfg["image_features"].get("val"), str(self.device),
                                       self.cfg["select_images"])
        self.model.train()
        return score, parts

    def save_best(self) -> None:
        if self.main:
            save_model(os.path.join(self.out_dir, "model.pt"), self.model, self.vocabs, self.info())

    def info(self) -> dict:
        s = self.state
        return {"training": {"text_only": self.text_only, "images": self.cfg["images_note"], "status": s["status"],
                             "epoch": s["epoch"], "step": s["step"], "minutes": round(s["elapsed"] / 60, 2),
                             "best_val": s["best"], "history": s["history"], "world_size": self.world,
                             "config": self.cfg}}

    def _run_validation(self, where: str, epoch_end: bool) -> None:
        if not self.cfg["validate"]:
            self.state["best"] = 0.0
            self.save_best()
            return
        score, parts = self.validate()
        summary = {k: round(v["r1"], 2) for k, v in parts.items() if "r1" in v}
        self.state["history"].append({"where": where, "step": self.state["step"], "score": round(score, 3), "r1": summary})
        if self.aligner is not None:
            ratio = self.aligner.ratio(self.model)
            self.state["history"][-1]["alignment_ratio"] = {k: round(ratio[k], 2) for k in ("src->tgt", "tgt->src", "mean")}
            self.log(f"alignment ratio {ratio['languages']} (004, P@1 over {ratio['src_words']} dictionary words): "
                     f"{ratio['src->tgt']:.2f} / {ratio['tgt->src']:.2f} %, mean {ratio['mean']:.2f}")
        if score > self.state["best"]:
            self.state["best"] = score
            if epoch_end:
                self.state["bad_epochs"] = 0
            self.save_best()
            self.log(f"validation {where}: {score:.2f} (R@1 {summary}) -- new best, saved model.pt")
        else:
            if epoch_end:
                self.state["bad_epochs"] += 1
            self.log(f"validation {where}: {score:.2f} (R@1 {summary}) -- best {self.state['best']:.2f}, "
                     f"{self.state['bad_epochs']} epoch(s) without improvement")

    def train(self) -> str:
        """Train until max_epochs, early stopping, the budget or max_steps; returns OUT/model.pt."""
        self._announce()
        self._started = time.time() - self.state["elapsed"]
        self._last_ckpt = time.time()
        self.state["status"] = "running"
        self.model.train()
        while self.state["epoch"] < self.cfg["max_epochs"]:
            if D.any_flag(not self.budget.allows_epoch()):
                self.state["status"] = "stopped: time budget"
                self.log(self.budget.reason())
                self.save_checkpoint()  # records the status
                break
            if self._epoch():
                break
        else:
            self.state["status"] = "completed max_epochs"
        return self._finish()

    def _announce(self) -> None:
        c = self.cfg
        self.log(f"training on {self.device} (world size {self.world}): preset {c['preset']}, languages {c['languages']}, "
                 f"sources {c['sources']}, {len(self.pools.unit_image)} units, vocab "
                 f"{ {k: len(v) for k, v in self.vocabs.items()} }, contrastive {c['contrastive']}, beta {c['beta']}")
        if self.text_only:
            self.log(TEXT_ONLY_NOTE)
            if self.one_language_units:
                self.log(f"{self.one_language_units} tuples with one language (disjoint halves) are left out: no R_ML "
                         "signal without images" + ("; no tuple pairs two languages, so the model keeps its "
                                                    "initialisation" if not self.pools.unit_image else ""))
        if self.aligner is not None:
            ratio = self.aligner.ratio(self.model)
            self.log(self.aligner.describe() + f", RCSLS k={c['align_knn']}, weight {c['align_weight']}, map "
                     f"{c['align_map']}; alignment ratio at step {self.state['step']}: {ratio['src->tgt']:.2f} / "
                     f"{ratio['tgt->src']:.2f} %, mean {ratio['mean']:.2f}")
        for spec in c["pseudo_pairs"]:
            self.log(f"pseudo-pairs {spec['tgt_lang']}-{spec['src_lang']}: {spec['file']}")
        if c["init"]:
            self.log(f"fine-tuning {c['init']}")
        if self.main:
            with atomic_write(os.path.join(self.out_dir, "config.json")) as f:
                json.dump(c, f, indent=1)

    def _epoch(self) -> bool:
        """Train the rest of the current epoch, validate and checkpoint; True if training stops."""
        s = self.state
        epoch, whole = s["epoch"], s["batch"] == 0  # an epoch resumed mid-way is not timed
        n_batches, stopped = self._batches(epoch)
        if stopped:
            self.log(f"{s['status']} at epoch {epoch + 1}, batch {s['batch']}/{n_batches}, step {s['step']}")
            self._run_validation(f"epoch {epoch + 1} batch {s['batch']}", epoch_end=False)
            self.save_checkpoint()
            return True
        s["epoch"] += 1
        s["batch"] = 0
        self._run_validation(f"epoch {epoch + 1}", epoch_end=True)
        self.budget.epoch_done(timed=whole)
        s["epoch_seconds"] = list(self.budget.epoch_seconds)
        self.save_checkpoint()
        self._last_ckpt = time.time()
        if s["bad_epochs"] >= self.cfg["patience"]:
            s["status"] = f"early stopping after {s['bad_epochs']} epochs without improvement"
            self.log(s["status"])
            self.save_checkpoint()
            return True
        return False

    def _batches(self, epoch: int) -> tuple[int, bool]:
        """Run the remaining batches of `epoch` (data order and negatives fixed by seed and epoch,
        so a resumed run continues exactly); returns (batches in the epoch, stopped early)."""
        c, s = self.cfg, self.state
        B, m = c["batch_size"], (c["negatives"] if c["contrastive"] == "random" else 0)
        imgs, sents = epoch_tuples(self.pools, c["seed"], epoch)
        negs = sample_negatives(imgs, m, c["seed"], epoch) if m else None
        n_batches = len(imgs) // B + (1 if len(imgs) % B >= 2 else 0)
        show = self.progress if self.main and not self.quiet else False
        bar = progress_bar(show, f"epoch {epoch + 1}", total=n_batches, initial=s["batch"], unit="batch")
        stopped = False
        with bar:  # closed before an exception (Ctrl-C) goes on, so its line comes before the message
            while s["batch"] < n_batches:
                loss = self.step(imgs, sents, np.arange(s["batch"] * B, min((s["batch"] + 1) * B, len(imgs))), negs)
                s["batch"] += 1
                s["step"] += 1
                s["elapsed"] = time.time() - self._started
                bar.update(1)
                if show:
                    bar.set_postfix_str(f"loss={loss.item():.3f}")
                if D.any_flag(c["max_steps"] is not None and s["step"] >= c["max_steps"]):
                    stopped = True
                    s["status"] = "stopped: max_steps"
                    break
                if D.any_flag(time.time() - self._last_ckpt >= 60 * c["checkpoint_minutes"]):
                    self.save_checkpoint()
                    self._last_ckpt = time.time()
        return n_batches, stopped

    def _finish(self) -> str:
        """Refresh the training summary in the best model's JSON (weights unchanged); log the end."""
        s = self.state
        model_path = os.path.join(self.out_dir, "model.pt")
        if self.main and os.path.exists(model_path):
            js = model_path[:-3] + ".json"
            with open(js, encoding="utf-8") as f:
                meta = json.load(f)
            meta["training"].update({"final_status": s["status"], "final_step": s["step"], "total_minutes": round(s["elapsed"] / 60, 2),
                                     "history": s["history"]})
            with atomic_write(js) as f:
                json.dump(meta, f, ensure_ascii=False, indent=1)
        self.log(f"done: {s['status']}; best validation {s['best']:.2f}; model {model_path}")
        return model_path


def train(config: dict, data_dir: str, out_dir: str, device: str = "cpu", resume: bool = True, quiet: bool = False,
          clock=time.monotonic, echo: Callable[[str], None] | None = None, progress: Progress = True,
          wait: bool = False) -> str:
    """Train with `config` (see DEFAULTS); returns the path of the best model (OUT/model.pt).
    `clock` times the max_minutes budget (tests pass a fake one). Every line of OUT/train.log goes
    to `echo` too (default: INFO records of this module's logger); `quiet`: neither those nor a
    progress bar; `progress`: the epochs' bars (rerank.progress). One training per run directory:
    its main process holds the directory's lock (rerank.io.run_dir_lock; `wait`), the other
    ranks of a distributed run write through it."""
    with run_dir_lock(out_dir if D.world()[1] == 0 else None, wait):
        return Trainer(resolve_config(config), data_dir, out_dir, device, resume, quiet, clock, echo, progress).train()
