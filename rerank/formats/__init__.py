"""Read and write n-best lists: Moses, Joshua, fairseq-generate/interactive, plain.

One module per format (moses: Moses and Joshua lines, fairseq, plain); this package picks the
reader (`read_nbest`, detecting the format from the first lines when not given) and the writer
(`write_nbest`, from the format table `_WRITERS`). Readers report bad input as InputError with
file and line.

Moses:   ``id ||| hypothesis ||| name= v1 v2 name2= v3 ||| total`` (total optional; extra
         trailing fields are tolerated and ignored)
Joshua:  the same with ``name=value`` pairs; features may be absent on some lines
fairseq: ``S-i``/``T-i``/``H-i``/``D-i``/``P-i`` tab-separated lines, ids in any order
plain:   one hypothesis per line, plus a sentence-id (or list-size) file and a features
         file (TSV with a header of names, or .npy)
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial

import numpy as np

from rerank.errors import InputError
from rerank.formats.cache import cache_dir, read_cached
from rerank.formats.common import ReadReport
from rerank.formats.fairseq import FAIRSEQ_LINE, read_fairseq, write_fairseq
from rerank.formats.moses import iter_moses_lines, parse_feature_field, parse_features_fast, read_moses, write_moses
from rerank.formats.plain import read_plain, write_plain
from rerank.io import head_lines, read_references  # read_references: the one reader, in rerank.io
from rerank.nbest import NBestList

__all__ = ["FORMATS", "ReadReport", "detect_format", "write_losses", "iter_moses_lines", "parse_feature_field", "parse_features_fast",
           "read_fairseq", "read_moses", "read_nbest", "read_plain", "read_references", "write_nbest"]

# format -> writer(nbest, path, first_id=...) returning the paths written
_WRITERS: dict[str, Callable[..., list[str]]] = {
    "moses": partial(write_moses, style="moses"),
    "joshua": partial(write_moses, style="joshua"),
    "fairseq": write_fairseq,
    "plain": write_plain,
}
FORMATS = tuple(_WRITERS)
CACHED_FORMATS = ("moses", "joshua", "fairseq")  # one file each (plain lists have side files)


DETECT_LINES = 1000  # how far detection looks for the first fairseq line, past log lines
_FAIRSEQ_KINDS = "STHDP"


def detect_format(path: str, report: ReadReport | None = None) -> str:
    """The format from the first lines, without consuming them (standard input included).

    A first non-empty line with `|||` (and not a fairseq line) is Moses (`name=` groups) or Joshua (`name=value`);
    fairseq is found by its S-/T-/H-/D-/P- lines within the first DETECT_LINES lines, past
    any log lines (counted in `report`); anything else is plain.
    """
    skipped, seen_text = 0, False
    for _, text in head_lines(path, DETECT_LINES):
        if not text.strip():
            continue
        match = FAIRSEQ_LINE.match(text)
        if not seen_text and "|||" in text and not (match and match.group(1) in _FAIRSEQ_KINDS):  # (H- text may hold |||)
            fields = text.split("|||")
            tokens = fields[2].split() if len(fields) > 2 else []
            return "joshua" if tokens and not any(t.endswith("=") for t in tokens) else "moses"
        seen_text = True
        if match and match.group(1) in _FAIRSEQ_KINDS:
            if skipped and report is not None:
                report.notes.append(f"read as fairseq output: skipped {skipped} log line(s) before the first S-/T-/H-/D-/P- line")
            return "fairseq"
        skipped += 1
    if not seen_text:
        raise InputError("empty file: cannot tell its format", path)
    return "plain"


def _unknown_format(fmt: str, path: str) -> InputError:
    return InputError(f"unknown n-best format {fmt!r} (known: {', '.join(FORMATS)})", path)


def read_nbest(path: str, fmt: str | None = None, strict: bool = False, report: ReadReport | None = None,
               cache: bool | str | None = None, **plain_options) -> NBestList:
    """Read any supported n-best format (gzip'd or not); `fmt=None` detects it.

    Plain lists take their side files `PATH.ids` and `PATH.features.tsv` (as `write_nbest`
    writes them) when none are given and they exist (said in `report`). `cache`: the binary
    cache of parsed lists (rerank.formats.cache): None = on when RERANK_CACHE_DIR is set,
    True = on, False = off, or its folder.
    """
    report = report if report is not None else ReadReport()
    fmt = fmt or detect_format(path, report)
    directory = cache_dir(cache) if fmt in CACHED_FORMATS and path != "-" else None
    if directory is None:
        return _read(path, fmt, strict, report, plain_options)
    options = {"format": fmt, "strict": bool(strict), "fairseq_field": plain_options.get("fairseq_field", "auto")}
    return read_cached(path, directory, options, lambda part: _read(path, fmt, strict, part, plain_options), report)


def _read(path: str, fmt: str, strict: bool, report: ReadReport, plain_options: dict) -> NBestList:
    if fmt in ("moses", "joshua"):
        return read_moses(path, strict=strict, report=report)
    if fmt == "fairseq":
        return read_fairseq(path, field=plain_options.get("fairseq_field", "auto"), report=report)
    if fmt == "plain":
        options = {k: plain_options.get(k) for k in ("ids", "sizes", "features", "feature_names")}
        return read_plain(path, **_plain_side_files(path, options, report))
    raise _unknown_format(fmt, path)


def _plain_side_files(path: str, options: dict, report: ReadReport) -> dict:
    """`options` with the side files found beside a plain list for the ones not given."""
    found = []
    if path != "-" and not options["ids"] and not options["sizes"] and os.path.isfile(path + ".ids"):
        options["ids"] = path + ".ids"
        found.append(f"sentence ids from {options['ids']}")
    if path != "-" and not options["features"] and os.path.isfile(path + ".features.tsv"):
        options["features"] = path + ".features.tsv"
        found.append(f"features from {options['features']}")
    if found:
        report.notes.append(f"plain list: read {' and '.join(found)} (found beside it)")
    return options


def write_losses(nbest: NBestList, fmt: str) -> list[str]:
    """What writing `nbest` as `fmt` leaves out (one note each); empty when the format holds it all."""
    notes = []
    if fmt == "fairseq":
        dropped = [n for n in nbest.feature_names if n != "nmt"]
        if dropped:
            notes.append(f"fairseq lines hold one score (feature nmt, else the total): features {', '.join(dropped)} are not written")
        if "nmt" in nbest.feature_names and nbest.scores is not None and not np.array_equal(nbest.scores, nbest.column("nmt")):
            notes.append("fairseq lines hold one score: the total scores are not written (the H-line score is feature nmt)")
        if "nmt" not in nbest.feature_names and nbest.scores is None:
            notes.append("no feature nmt and no total score: every H-line score is 0")
    if fmt == "plain" and nbest.scores is not None:
        notes.append("plain lists have no total score: the totals are not written")
    return notes


def write_nbest(nbest: NBestList, path: str, fmt: str = "moses", first_id: int = 0) -> list[str]:
    """Write `nbest` atomically; returns the paths written (plain writes three files).

    `first_id` numbers the sentences from there (a shard of a larger list keeps its ids, so
    shards concatenate back into the whole file).
    """
    writer = _WRITERS.get(fmt)
    if writer is None:
        raise _unknown_format(fmt, path)
    empty = np.flatnonzero(nbest.sizes == 0)
    if len(empty):  # its id would be missing from the file, which every reader refuses (or drops at the end)
        raise InputError(f"sentence {int(empty[0]) + first_id} has no hypotheses: no n-best format can hold an empty "
                         "list", path)
    return writer(nbest, path, first_id=first_id)
