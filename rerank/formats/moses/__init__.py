"""Moses and Joshua n-best lists: ``id ||| hypothesis ||| features [||| total [||| ...]]``.

One package, one door: this module holds the format records (MOSES, JOSHUA), the reader that
chooses the path, and the writer; its parts are
- state: ParserState, the one state of a read that both parsers fill, and NeedsLineReader;
- parse: the line parser, which accepts every valid file and names the first bad line;
- fast: the bulk parser of well-formed files, identical in result and several times quicker;
- stream: the two-pass reader (a regular file in bounded memory) of the streaming commands.

`read_moses` takes the bulk parser and falls back to the line parser only on NeedsLineReader,
which the bulk parser raises for the input it does not handle (its module lists the cases); any
other exception is a bug and propagates.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from rerank.errors import InputError
from rerank.formats.common import ReadReport
from rerank.formats.moses.fast import read_moses_fast
from rerank.formats.moses.parse import (FeatureTable, check_next_id, parse_feature_field, parse_features_fast,
                                        read_moses_lines, read_notes)
from rerank.formats.moses.state import NeedsLineReader, ParserState
from rerank.formats.moses.stream import iter_moses_chunks, scan_moses
from rerank.formats.record import NBestFormat, Sample
from rerank.io import atomic_write
from rerank.nbest import NBestList

__all__ = ["JOSHUA", "MOSES", "FeatureTable", "NeedsLineReader", "ParserState", "check_next_id", "is_joshua",
           "iter_moses_chunks", "iter_moses_lines", "moses_fields", "parse_feature_field", "parse_features_fast",
           "read_moses", "read_moses_fast", "read_moses_lines", "read_notes", "scan_moses", "write_moses"]


def read_moses(path: str, strict: bool = False, report: ReadReport | None = None) -> NBestList:
    """Moses or Joshua n-best: in bulk when the bulk parser handles the file, else line by line."""
    report = report if report is not None else ReadReport()
    fast = read_moses_fast(path, strict)
    if fast is None:
        return read_moses_lines(path, strict, report)
    nbest, extra = fast
    report.extra_fields_lines += extra
    read_notes(report, nbest.missing, nbest.n_hyps)
    return nbest


def iter_moses_lines(nbest: NBestList, style: str = "moses", scores: np.ndarray | None = None, first_id: int = 0):
    """Text lines of the n-best in Moses (`name= v`) or Joshua (`name=v`) style.

    A block of rows at a time: every value's text is made column by column (`repr` of the
    float, as `format_value`) and the lines by one format template."""
    scores = nbest.scores if scores is None else scores
    parts = []
    for name, width in nbest.groups:
        name = name.replace("{", "{{").replace("}", "}}")
        parts.append(f"{name}={{}}" if style == "joshua" and width == 1 else f"{name}= " + " ".join(["{}"] * width))
    template = "{} ||| {} ||| " + " ".join(parts) + (" ||| {}" if scores is not None else "")
    sentence = nbest.sentence_of_hyp + first_id
    for start in range(0, nbest.n_hyps, 4096):
        stop = min(start + 4096, nbest.n_hyps)
        columns = [map(str, sentence[start:stop].tolist()), nbest.hyps[start:stop]]
        columns += [map(repr, nbest.features[start:stop, k].tolist()) for k in range(nbest.features.shape[1])]
        if scores is not None:
            columns.append(map(repr, np.asarray(scores[start:stop], dtype=np.float64).tolist()))
        yield from map(template.format, *columns)


def write_moses(nbest: NBestList, path: str, style: str = "moses", first_id: int = 0) -> list[str]:
    """Write `nbest` atomically in Moses or Joshua `style`; returns [path]."""
    row = nbest.hyps.first_containing("|||")
    if row is not None:
        raise InputError(f"hypothesis {row} ({nbest.hyps[row]!r}) contains '|||', which {style} lines cannot hold "
                         "(the plain and fairseq formats can)", path)
    with atomic_write(path) as out:
        for line in iter_moses_lines(nbest, style=style, first_id=first_id):
            out.write(line + "\n")
    return [path]


def moses_fields(sample: Sample) -> list[str] | None:
    """The `|||` fields of the first line, when it is a line of the Moses layout."""
    return sample.first.split("|||") if "|||" in sample.first else None


def is_joshua(fields: list[str]) -> bool:
    """Whether a line's fields are Joshua's (`name=value` pairs, no `name=` group)."""
    tokens = fields[2].split() if len(fields) > 2 else []
    return bool(tokens) and not any(t.endswith("=") for t in tokens)


def _read(path: str, *, strict: bool = False, report: ReadReport | None = None) -> NBestList:
    """The records' reader (keyword options, as read_nbest passes them)."""
    return read_moses(path, strict=strict, report=report)


MOSES = NBestFormat(
    name="moses", layout="id ||| hypothesis ||| name= v1 v2 name2= v3 ||| total (total optional; trailing fields ignored)",
    producers="Moses (-n-best-list), kbmira/MERT tools, rerank convert",
    read=_read, write=partial(write_moses, style="moses"),
    detect=lambda sample: (fields := moses_fields(sample)) is not None and not is_joshua(fields),
    detect_order=42, streamed=True, cached=True)

JOSHUA = NBestFormat(
    name="joshua", layout="id ||| hypothesis ||| name=v name2=v ||| total (a feature may be absent on some lines)",
    producers="Joshua, cdec", read=_read, write=partial(write_moses, style="joshua"),
    detect=lambda sample: (fields := moses_fields(sample)) is not None and is_joshua(fields),
    detect_order=41, streamed=True, cached=True)
