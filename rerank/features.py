"""The feature interface: what a `rerank.features` plug-in implements, and how columns are named.

A feature plug-in adds one or more named columns to an n-best list (`rerank features NBEST
--which NAME,...`). It declares the column names it can compute, adds its own options to the
`features` command, and computes one float per hypothesis for each requested column. The core
reads and writes the n-best list, cuts shards, loads the source sentences and checks the values.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from rerank.errors import InputError
from rerank.nbest import NBestList


@dataclass
class FeatureContext:
    """What the `features` command gives every feature besides the n-best list."""

    args: argparse.Namespace          # the whole parsed command line (a plug-in reads its own options)
    nbest_path: str = "n-best"
    sources: Sequence[str] | None = None   # one source sentence per n-best sentence (--src), if given
    src_lang: str = "en"
    tgt_lang: str = "de"
    device: str = "cpu"               # as given by --device (a torch plug-in resolves it: rerank.device)
    first_sentence: int = 0           # index of the first sentence of this shard in the whole list
    total_sentences: int | None = None   # sentences in the whole list (the shard is a part of it)
    progress: bool = False
    notes: list[str] = field(default_factory=list)


class Feature:
    """Base class of feature plug-ins (entry-point group `rerank.features`).

    `columns` are the names `--which` accepts for this plug-in; `compute` returns a dict with
    one (n_hyps,) float array per requested name (it may rename them, e.g. with a prefix, and
    must say so in `output_names`).
    """

    columns: tuple[str, ...] = ()
    description = ""

    def add_arguments(self, group: argparse._ArgumentGroup) -> None:
        """Add this feature's options to `rerank features` (names must not clash)."""

    def default_columns(self, args: argparse.Namespace) -> list[str]:
        """Columns to add when `--which` is not given (usually none, or those its options ask for)."""
        return []

    def compute(self, nbest: NBestList, which: Sequence[str], context: FeatureContext) -> dict[str, np.ndarray]:
        raise NotImplementedError


def shard_range(n_sentences: int, shard: str | None) -> tuple[int, int]:
    """Sentence range [start, end) of shard `i/N` (1-based i); whole range for None."""
    if not shard:
        return 0, n_sentences
    try:
        i, n = (int(x) for x in shard.split("/"))
    except ValueError:
        raise InputError(f"--shard must look like i/N (e.g. 2/8), got {shard!r}") from None
    if not 1 <= i <= n:
        raise InputError(f"--shard {shard}: i must be between 1 and N")
    return (i - 1) * n_sentences // n, i * n_sentences // n


def column_owners(features: dict[str, type]) -> dict[str, str]:
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
