"""COMET features of every hypothesis, from a user's local COMET checkpoint (unbabel-comet), as
`rerank features` plug-ins:

- `qe`: a reference-free quality estimate of each hypothesis given its source (CometKiwi-style: a
  model whose input segments are mt and src; XCOMET and unified models in their source-only mode);
- `comet_ref`: reference-based COMET (COMET-22, XCOMET) of each hypothesis given its source and
  its sentence's reference (`rerank features -r REF`), the column a reranker is tuned toward with
  `rerank tune --metric column:comet_ref` and the one `rerank oracle --metric column:comet_ref`
  picks by.

Loading, kinds, batching, torchrun and the cache are rerank.metrics.comet's, which the `comet`
metric of `rerank eval` shares: a column here equals that metric's segment score of the same
(source, hypothesis, reference), and one cache serves both. unbabel-comet 2.2 needs
transformers 4 (extra [comet]).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rerank.errors import InputError, require
from rerank.features import Feature, FeatureContext
from rerank.metrics.comet import cached_scores, checkpoint_file
from rerank.options import PATH, POSITIVE_INT, option


@dataclass(frozen=True)
class QEOptions:
    """Options of the qe feature (flags of `rerank features`: --qe-model, --qe-batch-size)."""

    model: str | None = option(None, "reference-free COMET model (CometKiwi-style): its directory (hparams.yaml, "
                               "checkpoints/model.ckpt) or the .ckpt", check=PATH, metavar="PATH",
                               default_text="none, needed for qe")
    batch_size: int = option(16, "pairs per batch", check=POSITIVE_INT)


@dataclass(frozen=True)
class COMETRefOptions:
    """Options of the comet_ref feature (flags of `rerank features`: --comet-model, --comet-batch-size)."""

    model: str | None = option(None, "reference-based COMET model (COMET-22, XCOMET): its directory (hparams.yaml, "
                               "checkpoints/model.ckpt) or the .ckpt", check=PATH, metavar="PATH",
                               default_text="none, needed for comet_ref")
    batch_size: int = option(16, "triples per batch", check=POSITIVE_INT)


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
        checkpoint_file(options.model)
        context.use_threads()
        rows = [(context.sources[i], hyp) for i, hyp in zip(nbest.sentence_of_hyp.tolist(), nbest.hyps)]
        values = cached_scores(options.model, rows, reference=False, what="the qe feature",
                               batch_size=options.batch_size, device=context.device, cache=context.cache)
        return {"qe": values} if "qe" in which else {}


class COMETRefFeature(Feature):
    columns = ("comet_ref",)
    description = ("reference-based COMET of (source, hypothesis, reference) under a checkpoint (--comet-model, -r): "
                   "a column to tune toward or pick oracles by")
    Options = COMETRefOptions
    option_prefix = "comet-"
    requires = ("torch", "comet")

    def compute(self, nbest, which, context: FeatureContext | None = None, options=None):
        context = context or FeatureContext()
        options = self.make_options(options)
        require(self.requires, "the comet_ref feature")
        if not options.model:
            raise InputError("comet_ref needs a reference-based COMET model")
        if context.sources is None:
            raise InputError("comet_ref needs the source sentences")
        if not context.references:
            raise InputError("comet_ref needs the references")
        checkpoint_file(options.model)
        sentence = nbest.sentence_of_hyp.tolist()
        counts = [sum(stream[i] is not None for stream in context.references) for i in sentence]
        if 0 in counts:
            raise InputError(f"comet_ref: sentence {sentence[counts.index(0)] + context.first_sentence} has no "
                             "reference", context.nbest_path)
        context.use_threads()
        # one score per (hypothesis, reference); several references: their mean, as the comet metric
        rows = [(context.sources[i], hyp, stream[i]) for i, hyp in zip(sentence, nbest.hyps)
                for stream in context.references if stream[i] is not None]
        scores = iter(cached_scores(options.model, rows, reference=True, what="the comet_ref feature",
                                    batch_size=options.batch_size, device=context.device, cache=context.cache).tolist())
        values = np.array([np.mean([next(scores) for _ in range(k)]) for k in counts])
        return {"comet_ref": values} if "comet_ref" in which else {}
