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


def text_hints(nbest: NBestList, post_process: str | None, unescape: str | None) -> list[str]:
    """Notes on text that looks segmented or escaped where no option undid it (searched in the
    strings' buffer, at C speed)."""
    hints = []
    buffer = nbest.hyps.raw()[0]
    may_hold = lambda byte: buffer.find(byte) >= 0  # noqa: E731 - one byte is found at memchr speed, a pattern is not
    if (post_process or "none") == "none":
        if may_hold(b"@") and nbest.hyps.first_containing(_BPE) is not None:
            hints.append("hypotheses contain `@@ ` (BPE): try --post-process subword_nmt (post_process='subword_nmt')")
        if may_hold(b"\x81") and nbest.hyps.first_containing(_SPM) is not None:  # the last byte of `▁` in UTF-8
            hints.append("hypotheses contain `\u2581` (SentencePiece pieces): try --post-process sentencepiece "
                         "(post_process='sentencepiece')")
    if (unescape or "none") == "none" and may_hold(b"&"):
        found = [e for e in HTML_ESCAPES if nbest.hyps.first_containing(e) is not None]
        if found:
            hints.append(f"hypotheses contain Moses escapes ({' '.join(found[:4])}): try --unescape html "
                         "(unescape='html')")
    return hints


def file_may_need_hints(path: str, block: int = 1 << 22) -> bool:
    """Whether the bytes of `path` (gzip'd or not) hold anything `text_hints` looks for, anywhere:
    a two-pass reader that does not keep the hypotheses hands such files to the whole-list reader."""
    import zlib

    from rerank.io import _open_binary

    needles = [_BPE.encode(), _SPM.encode(), *(e.encode() for e in HTML_ESCAPES)]
    keep = max(map(len, needles)) - 1
    raw, stream = _open_binary(path)
    try:
        tail = b""
        while chunk := stream.read(block):
            data = tail + chunk
            if any(data.find(byte) >= 0 for byte in (b"@", b"\x81", b"&")) and any(n in data for n in needles):
                return True
            tail = data[-keep:]
    except (OSError, EOFError, zlib.error):  # broken gzip data: the line reader names the line
        return True
    finally:
        stream.close()
        raw.close()
    return False
