"""The feature interface: what a `rerank.features` plug-in implements, and how columns are named.

A feature plug-in adds one or more named columns to an n-best list (`rerank features NBEST
--which NAME,...`). It declares the column names it can compute and its options as a dataclass
(`Options`), and computes one float per hypothesis for each requested column from the list, a
`FeatureContext` and its options: no command line is involved, so a script calls

    MBRFeature().compute(nbest, ["mbr"], FeatureContext(), MBRFeature.Options(temperature=0.5))

On the command line, the flags of `rerank features` are generated from the Options fields
(rerank.options: `add_arguments`, `options_from_args`). The core reads and writes the n-best
list, cuts shards, loads the source sentences and checks the values.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from dataclasses import dataclass, field

import numpy as np

from rerank.errors import InputError
from rerank.nbest import NBestList
from rerank.progress import Progress
from rerank.options import Configurable
from rerank.options import NoOptions as NoOptions          # re-exported: plug-ins imported them from here
from rerank.options import make_options as make_options


@dataclass
class FeatureContext:
    """What every feature gets besides the n-best list and its own options (the same for all
    plug-ins of one run; every field has a default, so `FeatureContext()` is a valid context)."""

    nbest_path: str = "n-best"        # names the list in error messages
    sources: Sequence[str] | None = None   # one source sentence per n-best sentence, if given
    references: Sequence[Sequence[str]] | None = None   # reference streams (references[j][i]), if given
    src_lang: str = "en"
    tgt_lang: str = "de"
    device: str = "cpu"               # cpu, cuda or cuda:N (a torch plug-in resolves it: rerank.device)
    threads: int | None = None        # torch CPU threads for model features (None: leave torch's setting)
    first_sentence: int = 0           # index of the first sentence of this shard in the whole list
    total_sentences: int | None = None   # sentences in the whole list (the shard is a part of it)
    progress: Progress = False        # rerank.progress: False, True or a callback
    cache: str | None = None          # score cache file of users' models (rerank.score_cache; None: no cache)
    notes: list[str] = field(default_factory=list)   # things the caller should tell the user

    def use_threads(self) -> None:
        """Give torch `threads` CPU threads (unless None). Every plug-in that runs torch calls this
        before its first operation, so `--threads` means the same for all of them: torch's own
        default of one thread per core spin-waits whenever a neighbour holds a core (CPU time
        grows with wall time; docs/features.md, "Under load")."""
        if self.threads:
            import torch

            torch.set_num_threads(self.threads)


class Feature(Configurable):
    """Base class of feature plug-ins (entry-point group `rerank.features`).

    `columns` are the names `--which` accepts for this plug-in; `Options` is the dataclass of its
    options, each field made with `rerank.options.option` (default, help, check); `requires` the
    modules of an extra it needs (checked before any work); `compute` returns a dict with one
    (n_hyps,) float array per requested name (it may rename them, e.g. with a prefix).

    The options interface is `rerank.options.Configurable`, the same as a tuner's:
    `make_options(options)` checks an instance, a mapping or None; on the command line
    `add_arguments` adds the flags generated from `Options` (under `option_prefix`) to `rerank
    features` and `options_from_args(args)` reads them back.
    """

    columns: tuple[str, ...] = ()
    description = ""
    requires: tuple[str, ...] = ()    # modules it imports that the core does not install (e.g. "torch")

    def default_columns(self, options: Any) -> list[str]:
        """Columns to add when no column is asked for (usually none, or those its options ask for)."""
        return []

    def compute(self, nbest: NBestList, which: Sequence[str], context: FeatureContext | None = None,
                options: Any = None) -> dict[str, np.ndarray]:
        """One (n_hyps,) array per requested column; `options` an `Options` (None: the defaults)."""
        raise NotImplementedError


def shard_range(n_sentences: int, shard: str | None) -> tuple[int, int]:
    """Sentence range [start, end) of shard `i/N` (1-based i); whole range for None."""
    if not shard:
        return 0, n_sentences
    try:
        i, n = (int(x) for x in shard.split("/"))
    except ValueError:
        raise InputError(f"shard {shard!r} must look like i/N (e.g. 2/8)", option="shard") from None
    if not 1 <= i <= n:
        raise InputError(f"shard {shard}: i must be between 1 and N", option="shard")
    return (i - 1) * n_sentences // n, i * n_sentences // n


def column_owners(features: dict[str, type[Feature]]) -> dict[str, str]:
    """Column name -> name of the plug-in that computes it; a column claimed twice is an error."""
    owners: dict[str, str] = {}
    for plugin, cls in features.items():
        for column in cls.columns:
            if column in owners:
                raise InputError(f"feature column {column!r} is provided by two plug-ins: {owners[column]} and {plugin}")
            owners[column] = plugin
    return owners


def check_columns(columns: dict[str, np.ndarray], n_hyps: int, plugin: str) -> None:
    """Every column a plug-in returns must hold one finite float per hypothesis."""
    for name, values in columns.items():
        values = np.asarray(values)
        if values.shape != (n_hyps,):
            raise InputError(f"feature plug-in {plugin!r} returned {values.shape} values for column {name!r}; "
                             f"expected ({n_hyps},)")
        bad = np.flatnonzero(~np.isfinite(values.astype(np.float64)))
        if len(bad):
            raise InputError(f"feature plug-in {plugin!r} returned a non-finite value for column {name!r} "
                             f"(hypothesis row {int(bad[0])})")
