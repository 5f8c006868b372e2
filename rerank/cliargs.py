"""Options shared by the commands, and the files they name."""

from __future__ import annotations

import argparse
import os


def nbest_inputs(args: argparse.Namespace) -> list[str | None]:
    """The files an n-best read (rerank.commands._common.load_nbest) may open: the list, the
    plain format's side files given, and PATH.ids / PATH.features.tsv it reads when none are."""
    side = []
    if args.nbest and args.nbest != "-" and args.in_format in (None, "plain"):
        side = [p for p in (args.nbest + ".ids", args.nbest + ".features.tsv") if os.path.exists(p)]
    return [args.nbest, args.plain_ids, args.plain_sizes, args.plain_features, *side]
