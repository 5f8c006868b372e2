"""A Moses/Joshua n-best file in two passes, in bounded memory.

`scan_moses` reads a regular file once with the bulk reader's block parser (rerank.formats.
moses_fast) and keeps only what the whole list decides: the columns (names, widths, order of
first appearance), the number of fields, and per column how many lines lack it. Then
`iter_moses_chunks` reads it again and yields the sentences a block at a time, every block
with all the columns (a feature a line lacks is 0, as the whole-list readers fill it).

Whatever the bulk reader would hand over to the line reader (anything unusual, a missing
feature with `strict`, standard input) makes `scan_moses` return None: read the whole list
then, which gives the exact errors and notes.
"""

from __future__ import annotations

import io
import os
from typing import Any

import numpy as np

from rerank.errors import InputError
from rerank.formats.moses_fast import _block, _blocks, _Unusual
from rerank.formats.text import text_signs
from rerank.nbest import NBestList, StringColumn, feature_name_problem


def _state(layout: dict | None = None) -> dict:
    """A block parser state, seeded with the columns of `layout` (pass 2) or empty (pass 1)."""
    state: dict[str, Any] = {"fields": None, "index": {}, "widths": {}, "groups": [], "ids": [], "hyps": io.BytesIO(),
                             "lengths": [], "values": [], "present": [], "totals": []}
    if layout is not None:
        state.update(fields=layout["fields"], index=dict(layout["index"]), widths=dict(layout["widths"]),
                     groups=list(layout["groups"]))
    return state


def _drain(state: dict) -> dict:
    """The arrays of the last block parsed into `state`, which keeps only the columns."""
    (heads, runs), = state["ids"]
    block = {"heads": heads, "runs": runs, "hyps": state["hyps"].getvalue(), "lengths": state["lengths"][0],
             "values": state["values"][0], "present": state["present"][0],
             "totals": state["totals"][0] if state["totals"] else None}
    state.update(ids=[], hyps=io.BytesIO(), lengths=[], values=[], present=[], totals=[])
    return block


def _check_heads(heads: np.ndarray, last: int) -> int:
    """The last sentence id of a block, or _Unusual if its ids do not continue 0, 1, 2, ... after `last`."""
    step = np.diff(np.concatenate([[last], heads]))
    if ((step != 0) & (step != 1)).any() or (last < 0 and heads[0] != 0):
        raise _Unusual
    return int(heads[-1])


def scan_moses(path: str, strict: bool = False) -> dict | None:
    """The layout of a well-formed regular Moses/Joshua file (pass 1), or None (read it whole).

    Keys: fields, index (column -> position), widths, groups, n_hyps, n_sentences, missing
    (column -> lines without it, in column order, as the whole-list readers count it), text_signs
    (what rerank.formats.text's hints would find in the hypotheses)."""
    if path == "-" or not os.path.isfile(path):
        return None
    state, counts, n_hyps, last, signs = _state(), np.zeros(0, np.int64), 0, -1, set()
    try:
        for data in _blocks(path):
            _block(data, state)
            block = _drain(state)
            last = _check_heads(block["heads"], last)
            signs |= text_signs(StringColumn(block["hyps"], np.concatenate([[0], np.cumsum(block["lengths"])])))
            n, width = len(block["values"]), len(state["index"])
            counts = np.concatenate([counts, np.zeros(width - len(counts), np.int64)])
            seen = block["present"]
            counts[:block["values"].shape[1]] += n if seen is None else seen.sum(axis=0)
            n_hyps += n
    except _Unusual:
        return None
    names = list(state["index"])
    if not n_hyps or any(feature_name_problem(name) for name in dict.fromkeys(names + [g for g, _ in state["groups"]])):
        return None
    missing = {name: int(n_hyps - count) for name, count in zip(names, counts.tolist()) if count < n_hyps}
    if strict and missing:
        return None
    return {"fields": state["fields"], "index": state["index"], "widths": state["widths"], "groups": state["groups"],
            "feature_names": names, "n_hyps": n_hyps, "n_sentences": last + 1, "missing": missing, "text_signs": signs}


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


def iter_moses_chunks(path: str, layout: dict):
    """(first sentence id, n-best list) of the sentences of `path`, a block at a time (pass 2;
    `layout` from `scan_moses`); every sentence comes whole, in file order."""
    state, carry, width = _state(layout), None, len(layout["index"])
    try:
        for data in _blocks(path):
            _block(data, state)
            block = _drain(state)
            if len(state["index"]) != width or block["values"].shape[1] != width:
                raise _Unusual
            block["sent"] = np.repeat(block.pop("heads"), block.pop("runs"))
            rows = _join(carry, block)
            cut = int(np.searchsorted(rows["sent"], rows["sent"][-1]))
            if cut:
                done, carry = _split(rows, cut)
                yield _chunk(done, layout)
            else:
                carry = rows
    except _Unusual:
        raise InputError("the file changed while it was read", path) from None
    if carry is not None:
        yield _chunk(carry, layout)
