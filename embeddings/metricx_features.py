"""MetricX features of every hypothesis, from a user's local MetricX checkpoint
(rerank.metrics.metricx), as `rerank features` plug-ins:

- `metricx`: reference-based MetricX (MetricX-24 hybrid, or a MetricX-23 reference checkpoint) of
  each hypothesis given its source and its sentence's references (`rerank features -r REF`; the
  mean over several), the column a reranker is tuned toward with `rerank tune --metric
  column:metricx --lower-better metricx` and the one `rerank oracle --metric column:metricx
  --lower-better metricx` picks by;
- `metricx_qe`: MetricX without a reference (MetricX-24 hybrid, or a MetricX-23 QE checkpoint).

Both are error scores in [0, 25], lower is better: a column has no direction of its own, so a
tuning objective or an oracle on it says `lower_better`. Loading, input formats, batching, torchrun
and the cache are rerank.metrics.metricx's, which the `metricx` metric of `rerank eval` shares: a
column equals that metric's segment score of the same (source, hypothesis, reference), and one
cache serves both.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rerank.errors import InputError, require
from rerank.features import Feature, FeatureContext
from rerank.metrics.metricx import BATCH_TOKENS, cached_scores, read_checkpoint
from rerank.options import PATH, POSITIVE_INT, option

MODEL_HELP = ("directory (config.json, model.safetensors or pytorch_model.bin, the mT5 tokenizer's files, "
              "metricx.json)")


@dataclass(frozen=True)
class MetricXOptions:
    """Options of the metricx feature (flags of `rerank features`: --metricx-model, --metricx-batch-tokens)."""

    model: str | None = option(None, "reference-based MetricX checkpoint (MetricX-24 hybrid, MetricX-23 reference): "
                               "its " + MODEL_HELP, check=PATH, metavar="DIR", default_text="none, needed for metricx")
    batch_tokens: int = option(BATCH_TOKENS, "padded input tokens per batch", check=POSITIVE_INT, metavar="N")


@dataclass(frozen=True)
class MetricXQEOptions:
    """Options of the metricx_qe feature (flags of `rerank features`: --metricx-qe-model, --metricx-qe-batch-tokens)."""

    model: str | None = option(None, "MetricX checkpoint that scores without a reference (MetricX-24 hybrid, MetricX-23 "
                               "QE): its " + MODEL_HELP, check=PATH, metavar="DIR",
                               default_text="none, needed for metricx_qe")
    batch_tokens: int = option(BATCH_TOKENS, "padded input tokens per batch", check=POSITIVE_INT, metavar="N")


class MetricXFeature(Feature):
    columns = ("metricx",)
    description = ("reference-based MetricX of (source, hypothesis, reference) under a checkpoint (--metricx-model, "
                   "-r): an error score, lower is better, to tune toward or pick oracles by with lower_better")
    Options = MetricXOptions
    option_prefix = "metricx-"
    requires = ("torch", "transformers")

    def compute(self, nbest, which, context: FeatureContext | None = None, options=None):
        context = context or FeatureContext()
        options = self.make_options(options)
        require(self.requires, "the metricx feature")
        if not options.model:
            raise InputError("metricx needs a MetricX checkpoint directory")
        read_checkpoint(options.model).check_use(True, "the metricx feature")
        if context.sources is None:
            raise InputError("metricx needs the source sentences")
        if not context.references:
            raise InputError("metricx needs the references")
        sentence = nbest.sentence_of_hyp.tolist()
        counts = [sum(stream[i] is not None for stream in context.references) for i in sentence]
        if 0 in counts:
            raise InputError(f"metricx: sentence {sentence[counts.index(0)] + context.first_sentence} has no "
                             "reference", context.nbest_path)
        context.use_threads()
        rows = [(context.sources[i], hyp, stream[i]) for i, hyp in zip(sentence, nbest.hyps)
                for stream in context.references if stream[i] is not None]
        scores = iter(cached_scores(options.model, rows, reference=True, what="the metricx feature",
                                    batch_tokens=options.batch_tokens, device=context.device, cache=context.cache,
                                    progress=context.progress).tolist())
        values = np.array([np.mean([next(scores) for _ in range(k)]) for k in counts])   # the mean over references
        return {"metricx": values} if "metricx" in which else {}


class MetricXQEFeature(Feature):
    columns = ("metricx_qe",)
    description = ("MetricX of (source, hypothesis) without a reference under a checkpoint (--metricx-qe-model): an "
                   "error score, lower is better")
    Options = MetricXQEOptions
    option_prefix = "metricx-qe-"
    requires = ("torch", "transformers")

    def compute(self, nbest, which, context: FeatureContext | None = None, options=None):
        context = context or FeatureContext()
        options = self.make_options(options)
        require(self.requires, "the metricx_qe feature")
        if not options.model:
            raise InputError("metricx_qe needs a MetricX checkpoint directory")
        read_checkpoint(options.model).check_use(False, "the metricx_qe feature")
        if context.sources is None:
            raise InputError("metricx_qe needs the source sentences")
        context.use_threads()
        rows = [(context.sources[i], hyp) for i, hyp in zip(nbest.sentence_of_hyp.tolist(), nbest.hyps)]
        values = cached_scores(options.model, rows, reference=False, what="the metricx_qe feature",
                               batch_tokens=options.batch_tokens, device=context.device, cache=context.cache,
                               progress=context.progress)
        return {"metricx_qe": values} if "metricx_qe" in which else {}
