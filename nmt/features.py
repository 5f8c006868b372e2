"""Model features of the `nmt` component as `rerank features` plug-ins:

- `channel`, `channel_norm`: log p(source | hypothesis) under a reverse NMT model (trained with
  `rerank nmt train` from the target to the source language), and per source token;
- `lm`, `lm_norm`: log p(hypothesis) under a GRU language model (`rerank lm train`), and per token.

Scores are computed once per distinct (sentence, hypothesis) pair (n-best lists repeat strings),
in length-sorted batches, on the CPU or CUDA, with a progress bar on a terminal.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rerank.cliargs import positive_int
from rerank.device import resolve_device
from rerank.errors import InputError, needs_neural, require
from rerank.features import Feature, FeatureContext, make_options

# torch and the models are imported in compute() (nmt/scoring.py), so that listing the plug-ins,
# which every `rerank` command does, stays cheap.


@dataclass(frozen=True)
class ChannelOptions:
    """Options of the channel feature (flags of `rerank features`: --channel-model, --channel-batch-size)."""

    model: str | None = None          # reverse NMT run directory (`rerank nmt train`, target -> source)
    batch_size: int = 64              # pairs per batch


@dataclass(frozen=True)
class LMOptions:
    """Options of the lm feature (flags of `rerank features`: --lm-model, --lm-batch-size)."""

    model: str | None = None          # language model run directory (`rerank lm train`)
    batch_size: int = 128             # hypotheses per batch


class ChannelFeature(Feature):
    columns = ("channel", "channel_norm")
    description = "log p(source | hypothesis) under a reverse NMT model (--channel-model), and per source token"
    Options = ChannelOptions
    requires = ("torch", "sacremoses")

    def add_arguments(self, group):
        group.add_argument("--channel-model", metavar="DIR", help="reverse NMT run directory (`rerank nmt train` "
                           "from the target to the source language; default: none, needed for channel)")
        group.add_argument("--channel-batch-size", type=positive_int, default=64,
                           help="pairs per batch (default: %(default)s)")

    def options(self, args):
        return ChannelOptions(model=args.channel_model, batch_size=args.channel_batch_size)

    def compute(self, nbest, which, context=None, options=None):
        context = context or FeatureContext()
        options = make_options(ChannelOptions, options)
        require(self.requires, "the channel feature")
        with needs_neural("the channel feature"):
            from rerank.nmt.scoring import channel_scores, distinct_pairs, set_threads
        if not options.model:
            raise InputError("channel needs a reverse NMT model (a `rerank nmt train` run directory)")
        if context.sources is None:
            raise InputError("channel needs the source sentences")
        set_threads(context)
        pairs, index = distinct_pairs(nbest)
        scores, lengths = channel_scores(options.model, [h for _, h in pairs], [context.sources[i] for i, _ in pairs],
                                         resolve_device(context.device), options.batch_size, context.progress)
        out = {"channel": scores[index], "channel_norm": (scores / lengths)[index]}
        return {name: out[name] for name in which}


class LMFeature(Feature):
    columns = ("lm", "lm_norm")
    description = "log p(hypothesis) under a GRU language model (--lm-model), and per token"
    Options = LMOptions
    requires = ("torch", "sacremoses")

    def add_arguments(self, group):
        group.add_argument("--lm-model", metavar="DIR", help="language model run directory (`rerank lm train`; default: none, needed for lm)")
        group.add_argument("--lm-batch-size", type=positive_int, default=128,
                           help="hypotheses per batch (default: %(default)s)")

    def options(self, args):
        return LMOptions(model=args.lm_model, batch_size=args.lm_batch_size)

    def compute(self, nbest, which, context=None, options=None):
        context = context or FeatureContext()
        options = make_options(LMOptions, options)
        require(self.requires, "the lm feature")
        with needs_neural("the lm feature"):
            from rerank.nmt.lm import LanguageModel
            from rerank.nmt.scoring import set_threads
        if not options.model:
            raise InputError("lm needs a language model (a `rerank lm train` run directory)")
        set_threads(context)
        lm = LanguageModel.load(options.model, resolve_device(context.device))
        if lm.config.lang != context.tgt_lang:
            raise InputError(f"the language model is for {lm.config.lang!r}, the hypotheses are {context.tgt_lang!r} "
                             "(the target language)", options.model)
        distinct: dict[str, int] = {}
        index = np.array([distinct.setdefault(h, len(distinct)) for h in nbest.hyps], dtype=np.int64)
        sums, counts = lm.score(list(distinct), options.batch_size, context.progress)
        sums, counts = np.asarray(sums), np.asarray(counts, dtype=np.float64)
        out = {"lm": sums[index], "lm_norm": (sums / counts)[index]}
        return {name: out[name] for name in which}
