"""A Moses/Joshua n-best file in two passes, in bounded memory.

`scan_moses` reads a regular file once with the bulk parser (rerank.formats.moses.fast), taking
each block's rows out of the ParserState as it goes, and keeps only what the whole list decides:
the columns (names, widths, order of first appearance), the number of fields, and per column
how many lines lack it. Then `iter_moses_chunks` reads it again and yields the sentences a block
at a time, every block with all the columns (a feature a line lacks is 0, as the whole-list
readers fill it).

Whatever the bulk parser hands over to the line parser (NeedsLineReader: anything unusual, a
missing feature with `strict`, standard input) makes `scan_moses` return None: read the whole
list then, which gives the exact errors and notes.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np

from rerank.errors import InputError
from rerank.formats.moses.fast import check_heads, check_names, parse_block, read_blocks
from rerank.formats.moses.state import Chunk, NeedsLineReader, ParserState
from rerank.formats.text import text_signs
from rerank.nbest import NBestList, StringColumn


def _scan(path: str, state: ParserState) -> tuple[np.ndarray, int, int, set]:
    """Pass 1 over `path` into `state` (its columns): (per column the lines that have it, lines,
    last sentence id, the text's signs), or NeedsLineReader."""
    counts, n_hyps, last, signs = np.zeros(0, np.int64), 0, -1, set()
    for data in read_blocks(path):
        parse_block(data, state)
        block = state.take_chunk()
        last = check_heads(block.heads, last)
        signs |= text_signs(StringColumn(block.hyps, np.concatenate([[0], np.cumsum(block.lengths)])))
        n, width = len(block.values), len(state.index)
        counts = np.concatenate([counts, np.zeros(width - len(counts), np.int64)])
        counts[:block.values.shape[1]] += n if block.present is None else block.present.sum(axis=0)
        n_hyps += n
    return counts, n_hyps, last, signs


def scan_moses(path: str, strict: bool = False) -> dict | None:
    """The layout of a well-formed regular Moses/Joshua file (pass 1), or None (read it whole).

    Keys: fields, index (column -> position), widths, groups, feature_names, n_hyps, n_sentences,
    missing (column -> lines without it, in column order, as the whole-list readers count it),
    text_signs (what rerank.formats.text's hints would find in the hypotheses), state (the parser
    state with the columns, which pass 2 starts from)."""
    if path == "-" or not os.path.isfile(path):
        return None
    state = ParserState(path)
    try:
        counts, n_hyps, last, signs = _scan(path, state)
        check_names(state)
    except NeedsLineReader:
        return None
    if not n_hyps:
        return None
    names = state.names
    missing = {name: int(n_hyps - count) for name, count in zip(names, counts.tolist()) if count < n_hyps}
    if strict and missing:
        return None
    return {"fields": state.fields, "index": state.index, "widths": state.widths, "groups": state.groups,
            "feature_names": names, "n_hyps": n_hyps, "n_sentences": last + 1, "missing": missing, "text_signs": signs,
            "state": state}


def _join(a: dict | None, b: dict) -> dict:
    """Rows of `a` (the carried sentence) then of `b`: per-row sentence ids, hyps, values, totals."""
    if a is None:
        return b
    totals = None if b["totals"] is None else np.concatenate([a["totals"], b["totals"]])
    return {"sent": np.concatenate([a["sent"], b["sent"]]), "hyps": a["hyps"] + b["hyps"],
            "lengths": np.concatenate([a["lengths"], b["lengths"]]), "values": np.concatenate([a["values"], b["values"]]),
            "totals": totals}


def _split(rows: dict, cut: int) -> tuple[dict, dict]:
    """Rows before `cut` and from `cut` on."""
    at = int(rows["lengths"][:cut].sum())
    head = {"sent": rows["sent"][:cut], "hyps": rows["hyps"][:at], "lengths": rows["lengths"][:cut],
            "values": rows["values"][:cut], "totals": None if rows["totals"] is None else rows["totals"][:cut]}
    tail = {"sent": rows["sent"][cut:], "hyps": rows["hyps"][at:], "lengths": rows["lengths"][cut:],
            "values": rows["values"][cut:], "totals": None if rows["totals"] is None else rows["totals"][cut:]}
    return head, tail


def _chunk(rows: dict, layout: dict) -> tuple[int, NBestList]:
    """(first sentence id, the rows' sentences as an n-best list)."""
    first = int(rows["sent"][0])
    offsets = np.concatenate([[0], np.cumsum(np.bincount(rows["sent"] - first))])
    hyps = StringColumn(rows["hyps"], np.concatenate([[0], np.cumsum(rows["lengths"])]))
    return first, NBestList(offsets, hyps, rows["values"], list(layout["feature_names"]), list(layout["groups"]),
                            rows["totals"])


def _rows(block: Chunk) -> dict:
    """The rows of a block: per-row sentence ids, hyps, lengths, values, totals."""
    return {"sent": np.repeat(block.heads, block.runs), "hyps": block.hyps, "lengths": block.lengths,
            "values": block.values, "totals": block.totals}


def iter_moses_chunks(path: str, layout: dict) -> Iterator[tuple[int, NBestList]]:
    """(first sentence id, n-best list) of the sentences of `path`, a block at a time (pass 2;
    `layout` from `scan_moses`); every sentence comes whole, in file order. A file that no longer
    parses as pass 1 found it is an InputError (it changed while it was read)."""
    state, carry = layout["state"].with_columns(), None
    width = len(state.index)
    try:
        for data in read_blocks(path):
            parse_block(data, state)
            block = state.take_chunk()
            if len(state.index) != width or block.values.shape[1] != width:
                raise NeedsLineReader
            rows = _join(carry, _rows(block))
            cut = int(np.searchsorted(rows["sent"], rows["sent"][-1]))
            if cut:
                done, carry = _split(rows, cut)
                yield _chunk(done, layout)
            else:
                carry = rows
    except NeedsLineReader:
        raise InputError("the file changed while it was read", path) from None
    if carry is not None:
        yield _chunk(carry, layout)
