"""Options and loaders shared by the commands that read n-best lists."""

from __future__ import annotations

import argparse
import sys

from rerank.errors import InputError
from rerank.formats import FORMATS, ReadReport, read_nbest, write_losses, write_nbest
from rerank.io import reading_progress
from rerank.nbest import NBestList

FORMAT_HELP = (
    "n-best formats: moses (`id ||| hyp ||| name= v1 v2 ||| total`), joshua (`name=value`), "
    "fairseq (fairseq-generate/interactive S-/T-/H-/D- lines), plain (one hypothesis per line "
    "with --plain-ids or --plain-sizes and --plain-features). Input may be gzip'd; - is stdin."
)


def add_nbest_input(parser: argparse.ArgumentParser, positional: bool = True) -> None:
    if positional:
        parser.add_argument("nbest", help="input n-best file")
    group = parser.add_argument_group("n-best input")
    group.add_argument("--format", dest="in_format", choices=FORMATS, help="input format (default: detected)")
    group.add_argument("--strict", action="store_true", help="a feature missing on some line is an error (default: fill with 0 and report)")
    group.add_argument("--fairseq-field", choices=["auto", "H", "D"], default="auto",
                       help="fairseq lines to read hypotheses from: H (tokenised), D (detokenised), auto = D if present "
                       "(default: %(default)s)")
    group.add_argument("--plain-ids", help="plain format: file with the sentence id of each hypothesis (default: NBEST.ids if present)")
    group.add_argument("--plain-sizes", help="plain format: file with the list size of each sentence (default: none)")
    group.add_argument("--plain-features", help="plain format: features as TSV with a header of names, or .npy (default: "
                       "NBEST.features.tsv if present)")
    group.add_argument("--feature-names", help="plain format with .npy features: comma-separated column names (default: f0, f1, ...)")
    group.add_argument("--cache", action=argparse.BooleanOptionalAction, default=None,
                       help="keep the parsed list in a binary cache keyed by the file's SHA-256 and reuse it (Moses, "
                       "Joshua, fairseq; folder: $RERANK_CACHE_DIR, else ~/.cache/mlmme-rerank/nbest) (default: on "
                       "when RERANK_CACHE_DIR is set, else off)")


def load_nbest(args: argparse.Namespace, path: str | None = None, allow_empty: bool = False) -> tuple[NBestList, ReadReport]:
    """The n-best list of `path` (default `args.nbest`) read with the input options.

    What the reader noticed (features missing on some lines and read as 0, ignored lines, ...)
    is printed on stderr; a list without hypotheses is an error unless `allow_empty`.
    """
    path = path or args.nbest
    report = ReadReport()
    progress = not getattr(args, "quiet", False) and sys.stderr.isatty()
    try:
        with reading_progress(progress):
            nbest = read_nbest(
                path, fmt=args.in_format, strict=args.strict, report=report, cache=getattr(args, "cache", None),
                fairseq_field=args.fairseq_field, ids=args.plain_ids, sizes=args.plain_sizes,
                features=args.plain_features, feature_names=args.feature_names.split(",") if args.feature_names else None,
            )
    finally:
        for note in report.notes:
            print(f"note: {path}: {note}", file=sys.stderr)
    if nbest.n_hyps == 0 and not allow_empty:
        raise InputError("no hypotheses: the n-best list is empty", path)
    return nbest, report


def write_output(nbest: NBestList, path: str, fmt: str, first_id: int = 0) -> list[str]:
    """`write_nbest`, saying on stderr what the format leaves out (features, totals)."""
    for note in write_losses(nbest, fmt):
        print(f"note: {path}: {note}", file=sys.stderr)
    return write_nbest(nbest, path, fmt, first_id=first_id)


def add_output_format(parser: argparse.ArgumentParser, default: str = "moses") -> None:
    parser.add_argument("--to", dest="out_format", choices=FORMATS, default=default,
                        help=f"output n-best format (default: {default}); plain writes OUT, OUT.ids and OUT.features.tsv")
