"""Undoing what decoders leave in their text: subword segmentation and Moses escaping.

`post_process` has fairseq's meanings (fairseq.data.data_utils.post_process): 'sentencepiece'
removes the spaces between pieces and turns `▁` into a space, 'subword_nmt' joins `@@ `. `unescape`
'html' undoes the escapes of Moses' tokenizer (escape-special-chars.perl, sacremoses' `escape=True`,
which Marian and Moses models trained on such text reproduce), in one pass so that `&amp;lt;`
becomes `&lt;` as sacremoses' `unescape_xml` makes it. `text_hints` names what the text of a list
looks like when it was read without the matching option.
"""

from __future__ import annotations

import re
from dataclasses import replace

from rerank.errors import InputError
from rerank.nbest import NBestList, StringColumn

POST_PROCESS = ("sentencepiece", "subword_nmt", "none")
UNESCAPE = ("html", "none")

HTML_ESCAPES = {"&amp;": "&", "&lt;": "<", "&gt;": ">", "&quot;": '"', "&apos;": "'", "&#124;": "|", "&#91;": "[",
                "&#93;": "]", "&bar;": "|", "&bra;": "[", "&ket;": "]"}
_ESCAPE = re.compile("|".join(map(re.escape, HTML_ESCAPES)))
_BPE = "@@ "
_SPM = "\u2581"


def undo_sentencepiece(text: str) -> str:
    return text.replace(" ", "").replace(_SPM, " ").strip()


def undo_subword_nmt(text: str) -> str:
    return (text + " ").replace(_BPE, "").rstrip()


def unescape_html(text: str) -> str:
    return _ESCAPE.sub(lambda m: HTML_ESCAPES[m.group(0)], text) if "&" in text else text


def _check(value: str | None, known: tuple[str, ...], what: str) -> str:
    value = value or "none"
    if value not in known:
        raise InputError(f"unknown {what} {value!r} (known: {', '.join(known)})")
    return value


def postprocess(nbest: NBestList, post_process: str | None, unescape: str | None, report=None) -> NBestList:
    """`nbest` with its hypotheses post-processed and unescaped (the same list when both are
    'none'); what was applied goes into `report.text`."""
    post_process = _check(post_process, POST_PROCESS, "post-processing")
    unescape = _check(unescape, UNESCAPE, "unescaping")
    steps = []
    if post_process == "sentencepiece":
        if nbest.n_hyps and nbest.hyps.first_containing(_SPM) is None and report is not None:
            report.notes.append("post-processing sentencepiece: no hypothesis holds a `\u2581`, so every space was "
                                "removed (is the text already decoded?)")
        steps.append(undo_sentencepiece)
    elif post_process == "subword_nmt":
        steps.append(undo_subword_nmt)
    if unescape == "html":
        steps.append(unescape_html)
    if report is not None:
        report.text = {"post_process": post_process, "unescape": unescape}
    if not steps:
        return nbest

    def apply(text: str) -> str:
        for step in steps:
            text = step(text)
        return text
    return replace(nbest, hyps=StringColumn.from_strings(map(apply, nbest.hyps)))


# what the hints look for, each with a byte it holds: a byte is found at memchr speed, a pattern is not,
# so a pattern is searched only in a buffer that holds its byte (the last byte of `▁` in UTF-8 is 0x81)
_SIGNS = {_BPE: b"@", _SPM: b"\x81", **{escape: b"&" for escape in HTML_ESCAPES}}


def text_signs(hyps: StringColumn) -> set[str]:
    """The patterns of segmented or escaped text (`@@ `, `▁`, Moses escapes) that some string holds."""
    buffer = hyps.raw()[0]
    present = {byte for byte in set(_SIGNS.values()) if buffer.find(byte) >= 0}
    return {pattern for pattern, byte in _SIGNS.items() if byte in present and hyps.first_containing(pattern) is not None}


def hint_notes(signs: set[str], post_process: str | None, unescape: str | None) -> list[str]:
    """The notes for `signs` (from `text_signs`) that no option undid."""
    hints = []
    if (post_process or "none") == "none":
        if _BPE in signs:
            hints.append("hypotheses contain `@@ ` (BPE): try post_process='subword_nmt'")
        if _SPM in signs:
            hints.append("hypotheses contain `\u2581` (SentencePiece pieces): try post_process='sentencepiece'")
    found = [e for e in HTML_ESCAPES if e in signs]
    if (unescape or "none") == "none" and found:
        hints.append(f"hypotheses contain Moses escapes ({' '.join(found[:4])}): try unescape='html'")
    return hints


def text_hints(nbest: NBestList, post_process: str | None, unescape: str | None) -> list[str]:
    """Notes on text that looks segmented or escaped where no option undid it."""
    return hint_notes(text_signs(nbest.hyps), post_process, unescape)
