"""Read and write n-best lists in every format of the format table (rerank.formats.table).

One module per format, each with one `NBestFormat` record (the package moses holds Moses and Joshua):
Moses, Joshua, Marian, fairseq-generate/interactive, sockeye JSON, OpenNMT/eole, our own JSON
lines, plain. Plug-ins add records through the entry-point group `rerank.formats`. This package
detects the format from the first lines when it is not given (`detect_format`), reads
(`read_nbest`: the record's reader, the n-best cache, the text's post-processing) and writes
(`write_nbest`). Readers report bad input as InputError with file and line.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rerank.errors import InputError, NeedsOption
from rerank.formats.cache import cache_dir, read_cached
from rerank.formats.common import ReadReport
from rerank.formats.decoders import from_ctranslate2, from_generate
from rerank.formats.fairseq import read_fairseq
from rerank.formats.moses import iter_moses_lines, parse_feature_field, parse_features_fast, read_moses
from rerank.formats.plain import read_plain
from rerank.formats.record import DETECT_LINES, NBestFormat, ReadOption, Sample
from rerank.formats.table import detection_order, format_names, formats, get_format
from rerank.formats.text import POST_PROCESS, UNESCAPE, postprocess, text_hints
from rerank.io import head_lines, read_references  # read_references: the one reader, in rerank.io
from rerank.nbest import NBestList

__all__ = ["NBestFormat", "ReadOption", "ReadReport", "Sample", "detect_format", "format_names", "formats",
           "from_ctranslate2", "from_generate",
           "get_format", "iter_moses_lines", "parse_feature_field", "parse_features_fast", "read_fairseq", "read_moses",
           "read_nbest", "read_plain", "read_references", "reading_options", "write_losses", "write_nbest",
           "POST_PROCESS", "UNESCAPE"]



def reading_options() -> list[ReadOption]:
    """Every format's reading options, each key once (two formats may share one, such as nbest_size)."""
    seen: dict[str, ReadOption] = {}
    for record in formats().values():
        for option in record.options:
            seen.setdefault(option.key, option)
    return list(seen.values())


def detect_format(path: str, report: ReadReport | None = None, options: dict | None = None) -> str:
    """The format from the first lines, without consuming them (standard input included).

    The formats are asked in their detection order (rerank.formats.table); the first that claims
    the lines is the format. None claiming them is an error naming the formats tried, so a file
    with some structure is never read as plain text unless its side files say it is plain (a format
    whose side files are given or found is asked first).
    """
    lines = [(number, text) for number, text in head_lines(path, DETECT_LINES) if text.strip()]
    if not lines:
        raise InputError("empty file: cannot tell its format", path)
    sample = Sample(lines, {k: v for k, v in (options or {}).items() if v is not None}, path)
    ordered = detection_order()
    sided = [r for r in ordered if r.side_inputs is not None and r.side_inputs(path, sample.options)]
    tried = []
    for record in {r.name: r for r in [*sided, *ordered]}.values():  # a format whose side files are there first
        claim = record.detect(sample) if record.detect is not None else False
        if claim:
            if report is not None:
                if isinstance(claim, str):
                    report.notes.append(claim)
                report.detected = record.name
                report.detected_lines = len(lines)
            return record.name
        tried.append(record.name)
    first = lines[0][1]
    raise NeedsOption(f"cannot tell the n-best format from the first lines (line {lines[0][0]}: {first[:60]!r}); "
                      f"tried {', '.join(tried)}: give the format, one of {', '.join(formats())}", path,
                      options=("format",))


def read_nbest(path: str, fmt: str | None = None, strict: bool = False, report: ReadReport | None = None,
               cache: bool | str | None = None, post_process: str | None = None, unescape: str | None = None,
               **options: Any) -> NBestList:
    """Read any n-best format of the table (gzip'd or not); `fmt=None` detects it.

    `options` are the formats' reading options (rerank.formats.reading_options: plain's ids,
    sizes, features, feature_names; fairseq_field; nbest_size and src for OpenNMT); a format reads
    the ones it declares. `cache`: the binary cache of parsed lists (rerank.formats.cache): None =
    on when RERANK_CACHE_DIR is set, True = on, False = off, or its folder. `post_process`
    ('sentencepiece', 'subword_nmt', 'none') and `unescape` ('html', 'none') undo subword
    segmentation and Moses escaping of the hypotheses (rerank.formats.text); what was applied is
    in `report.text`, and hints for text that looks segmented or escaped in `report.hints` and `report.notes`.
    """
    unknown = set(options) - {option.key for option in reading_options()}
    if unknown:
        raise TypeError(f"unknown reading option(s) {', '.join(sorted(unknown))}")
    report = report if report is not None else ReadReport()
    fmt = fmt or detect_format(path, report, options)
    record = get_format(fmt, path)
    mine = {option.key: options.get(option.key) for option in record.options}
    read = lambda part: record.read(path, strict=strict, report=part, **mine)  # noqa: E731
    directory = cache_dir(cache) if record.cached and path != "-" else None
    if directory is None:
        nbest = read(report)
    else:
        nbest = read_cached(path, directory, {"format": fmt, "strict": bool(strict), **mine}, read, report)
    report.format = fmt
    nbest = postprocess(nbest, post_process, unescape, report)
    report.hints = text_hints(nbest, post_process, unescape)
    report.notes.extend(report.hints)
    return nbest


def write_losses(nbest: NBestList, fmt: str) -> list[str]:
    """What writing `nbest` as `fmt` leaves out (one note each); empty when the format holds it all."""
    record = get_format(fmt)
    return record.losses(nbest) if record.losses is not None else []


def write_nbest(nbest: NBestList, path: str, fmt: str = "moses", first_id: int = 0) -> list[str]:
    """Write `nbest` atomically; returns the paths written (plain writes three files).

    `first_id` numbers the sentences from there (a shard of a larger list keeps its ids, so
    shards concatenate back into the whole file).
    """
    record = get_format(fmt, path)
    if record.write is None:
        raise InputError(f"the {fmt} format is read only: write one of {', '.join(format_names(writable=True))}", path)
    empty = np.flatnonzero(nbest.sizes == 0)
    if len(empty):  # its id would be missing from the file, which every reader refuses (or drops at the end)
        raise InputError(f"sentence {int(empty[0]) + first_id} has no hypotheses: no n-best format can hold an empty "
                         "list", path)
    return record.write(nbest, path, first_id=first_id)
