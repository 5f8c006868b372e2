"""Commands over an n-best list in bounded memory: a regular Moses/Joshua file read in two passes
(rerank.formats.moses.stream) instead of whole, when every output is Moses/Joshua (the formats whose
record says `streamed`).

The output is the one the whole-list path writes, byte for byte, with the same notes; anything
else (standard input, a FIFO, another format in or out, the n-best cache, post-processed text, an input
the bulk reader hands over to the line reader) takes the whole-list path (`scan` returns None).
"""

from __future__ import annotations

import sys

import numpy as np

from rerank.cliargs import bars
from rerank.commands._common import read_options
from rerank.formats import ReadReport, detect_format, formats
from rerank.formats.cache import cache_dir
from rerank.errors import InputError
from rerank.formats import moses
from rerank.formats.text import hint_notes
from rerank.io import reading_progress
from rerank.weights import SCORE_ROWS, window_scores



def scan(args, out_formats: list[str]) -> dict | None:
    """The layout of `args.nbest` (its notes printed as `load_nbest` prints them) if it can be
    streamed to `out_formats`, else None."""
    path = args.nbest
    streamed = [name for name, record in formats().items() if record.streamed]
    if any(fmt not in streamed for fmt in out_formats) or args.in_format not in (None, *streamed):
        return None
    if cache_dir(getattr(args, "cache", None)) is not None or path == "-":
        return None
    if getattr(args, "post_process", "none") != "none" or getattr(args, "unescape", "none") != "none":
        return None  # the text changes: read whole
    report = ReadReport()
    try:
        with reading_progress(bars(args)):  # as load_nbest
            fmt = args.in_format or detect_format(path, report, read_options(args))
    except InputError:  # bad input: the whole-list path reads it and says so
        return None
    if fmt not in streamed or report.notes:
        return None
    layout = moses.scan_moses(path, args.strict)
    if layout is None:
        return None
    report.extra_fields_lines = layout["n_hyps"] if layout["fields"] > 4 else 0
    moses.read_notes(report, layout["missing"], layout["n_hyps"])
    report.notes.extend(hint_notes(layout["text_signs"], None, None))  # as read_nbest adds them, last
    for note in report.notes:
        print(f"note: {path}: {note}", file=sys.stderr)
    return layout


def write_chunks(out, chunks, style: str) -> None:
    """Write (first id, n-best) chunks as Moses/Joshua lines to the open file `out`."""
    for first, nbest in chunks:
        out.writelines(line + "\n" for line in moses.iter_moses_lines(nbest, style=style, first_id=first))


def scored_chunks(path: str, layout: dict, w: np.ndarray):
    """(first id, n-best, w·f of its rows) of the chunks of `path`; w·f is computed as
    `weights.model_scores` computes it over the whole list (windows of SCORE_ROWS rows from the first)."""
    pending, rest, ready = [], np.zeros((0, len(w))), np.zeros(0)
    for first, nbest in moses.iter_moses_chunks(path, layout):
        pending.append((first, nbest))
        rest = np.concatenate([rest, nbest.features])
        full = len(rest) // SCORE_ROWS * SCORE_ROWS
        ready, rest = np.concatenate([ready, window_scores(rest[:full], w)]), rest[full:]
        while pending and len(ready) >= pending[0][1].n_hyps:
            first, nbest = pending.pop(0)
            yield first, nbest, ready[:nbest.n_hyps]
            ready = ready[nbest.n_hyps:]
    ready = np.concatenate([ready, window_scores(rest, w)])
    for first, nbest in pending:
        yield first, nbest, ready[:nbest.n_hyps]
        ready = ready[nbest.n_hyps:]
