"""`qe`: a reference-free quality estimate of each hypothesis given its source, from a users'
COMET checkpoint (`unbabel-comet`, CometKiwi-style: a model whose input segments are mt and src),
as a `rerank features` plug-in.

The checkpoint is loaded from a local path, offline: a COMET model directory (hparams.yaml and
checkpoints/model.ckpt, as `comet-score`/`download_model` leave it) or the .ckpt file. COMET builds
its encoder from the `pretrained_model` named in hparams.yaml (CometKiwi: microsoft/infoxlm-large)
without its weights, but it needs that encoder's config and tokenizer: a local directory named
there, or the Hugging Face cache holding them (they are cached the first time the model is loaded
online). When neither is there, the error says so. A reference-based COMET (its input segments
include ref) is refused: reranking has no references.

`qe` = the model's segment score (`predict(...).scores`), each distinct (source, hypothesis) pair
once, cached by model digest and pair. unbabel-comet 2.2 needs transformers 4 (extra [comet]).
"""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass

import numpy as np

from rerank import distributed
from rerank.device import resolve_device
from rerank.errors import InputError, needs_neural, require
from rerank.features import Feature, FeatureContext
from rerank.options import PATH, POSITIVE_INT, option
from rerank.progress import transformers_bars_off
from rerank.score_cache import model_digest, open_cache


@dataclass(frozen=True)
class QEOptions:
    """Options of the qe feature (flags of `rerank features`: --qe-model, --qe-batch-size)."""

    model: str | None = option(None, "reference-free COMET model (CometKiwi-style): its directory (hparams.yaml, "
                               "checkpoints/model.ckpt) or the .ckpt", check=PATH, metavar="PATH",
                               default_text="none, needed for qe")
    batch_size: int = option(16, "pairs per batch", check=POSITIVE_INT)


def checkpoint_file(path: str) -> str:
    """The .ckpt of a COMET model path (its directory or the file itself)."""
    if os.path.isfile(path) and path.endswith(".ckpt"):
        return path
    candidate = os.path.join(path, "checkpoints", "model.ckpt")
    if os.path.isdir(path) and os.path.isfile(candidate):
        return candidate
    raise InputError("not a COMET model: give its directory (hparams.yaml and checkpoints/model.ckpt) or the .ckpt "
                     "file", path)


def load_comet(path: str):
    """A reference-free COMET model from a local checkpoint, offline."""
    ckpt = checkpoint_file(path)
    if not os.path.isfile(os.path.join(os.path.dirname(os.path.dirname(ckpt)), "hparams.yaml")):
        raise InputError("a COMET checkpoint needs hparams.yaml in the folder above checkpoints/", ckpt)
    with needs_neural("the qe feature"):
        from comet import load_from_checkpoint
    try:
        with transformers_bars_off():
            model = load_from_checkpoint(ckpt, local_files_only=True)
    except Exception as exc:  # noqa: BLE001 - a checkpoint that does not load is bad input, said in one line
        message = " ".join(str(exc).split())[:300]
        raise InputError(f"cannot load the COMET checkpoint offline ({type(exc).__name__}: {message}); its encoder "
                         "(pretrained_model in hparams.yaml) must be a local directory or in the Hugging Face cache",
                         ckpt) from None
    segments = list(getattr(model.hparams, "input_segments", None) or model.hparams.get("input_segments", []))
    if "ref" in segments:
        raise InputError(f"a reference-based COMET model (input segments {segments}); qe needs a reference-free "
                         "(CometKiwi-style) one", ckpt)
    return model


def comet_scores(model, pairs: list[tuple[str, str]], batch_size: int, device) -> np.ndarray:
    """The model's segment scores of (source, hypothesis) pairs, in batches of `batch_size` pairs
    cut as COMET's own length batching cuts them (its argsort of the source lengths), which COMET
    is then given in that order to take as they come: a score depends on its batch alone, so under
    torchrun the ranks score whole batches each (rerank.distributed) and the scores are those of
    one process."""
    order = np.argsort([len(source) for source, _ in pairs]).tolist()
    n_batches = -(-len(order) // batch_size)

    def predict(a: int, b: int) -> np.ndarray:
        chunk = order[a * batch_size:b * batch_size]
        data = [{"src": pairs[i][0], "mt": pairs[i][1]} for i in chunk]
        quiet = [logging.getLogger(name) for name in ("pytorch_lightning", "lightning.pytorch", "lightning")]
        levels = [logger.level for logger in quiet]
        for logger in quiet:
            logger.setLevel(logging.ERROR)
        try:
            cuda = device.type == "cuda"
            # Lightning would take the torchrun variables for a distributed run of its own
            with distributed.without_launcher_environment() if distributed.active() else contextlib.nullcontext():
                out = model.predict(data, batch_size=batch_size, gpus=1 if cuda else 0, progress_bar=False,
                                    accelerator="cuda" if cuda else "cpu", length_batching=False)
        finally:
            for logger, level in zip(quiet, levels):
                logger.setLevel(level)
        return np.asarray(out.scores, dtype=np.float64)

    scores = np.zeros(len(pairs))
    weights = [sum(len(pairs[i][0]) + len(pairs[i][1]) for i in order[k * batch_size:(k + 1) * batch_size])
               for k in range(n_batches)]
    scores[order] = distributed.concat(distributed.map_parts(predict, n_batches, weights))
    return scores


class QEFeature(Feature):
    columns = ("qe",)
    description = "reference-free quality estimate of (source, hypothesis) under a COMET checkpoint (--qe-model)"
    Options = QEOptions
    option_prefix = "qe-"
    requires = ("torch", "comet")

    def compute(self, nbest, which, context: FeatureContext | None = None, options=None):
        context = context or FeatureContext()
        options = self.make_options(options)
        require(self.requires, "the qe feature")
        if not options.model:
            raise InputError("qe needs a reference-free COMET model")
        if context.sources is None:
            raise InputError("qe needs the source sentences")
        ckpt = checkpoint_file(options.model)
        context.use_threads()
        rows = list(zip((context.sources[i] for i in nbest.sentence_of_hyp.tolist()), nbest.hyps))
        pairs = list(dict.fromkeys(rows))
        values = np.zeros(len(pairs))
        cache = open_cache(context.cache)
        try:
            hparams = os.path.join(os.path.dirname(os.path.dirname(ckpt)), "hparams.yaml")
            namespace = (model_digest(ckpt) + model_digest(hparams) + "\0qe") if cache is not None else ""
            # under torchrun rank 0 alone has the cache and reads it for all: every rank leaves the same pairs
            found = distributed.on_main(lambda: cache.get(namespace, pairs) if cache is not None else {})
            for i, (value, _) in found.items():
                values[i] = value
            todo = [i for i in range(len(pairs)) if i not in found]
            if todo:
                model = load_comet(options.model)
                values[todo] = comet_scores(model, [pairs[i] for i in todo], options.batch_size,
                                            resolve_device(context.device))
                if cache is not None:
                    cache.put(namespace, [pairs[i] for i in todo], values[todo], np.ones(len(todo)))
        finally:
            if cache is not None:
                cache.close()
        position = {p: i for i, p in enumerate(pairs)}
        return {"qe": values[[position[r] for r in rows]]} if "qe" in which else {}
