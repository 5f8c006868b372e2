"""HTML pieces of the report: the page shell with its inline style sheet, tables, the significance
table of a `ResultTable`, and word-level differences between two outputs. Everything is escaped;
nothing refers to another file or to the network."""

from __future__ import annotations

import difflib
import html
import itertools
from collections import Counter
from collections.abc import Sequence

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0 auto; max-width: 1200px;
       padding: 0 1.5em 3em; color: #222; line-height: 1.4; }
h1 { font-size: 1.6em; margin-top: 1em; } h2 { border-bottom: 2px solid #396ab1; padding-bottom: .2em; margin-top: 2em; }
nav a { margin-right: 1em; } .muted { color: #666; font-size: .9em; } .small { font-size: .82em; color: #444; }
table { border-collapse: collapse; margin: .8em 0; font-size: .92em; }
th, td { border: 1px solid #bbb; padding: .25em .6em; text-align: right; white-space: nowrap; }
.wide { overflow-x: auto; } .row { display: flex; flex-wrap: wrap; gap: 0 2em; align-items: flex-start; }
th { background: #396ab1; color: #fff; } td:first-child, th:first-child { text-align: left; }
tr:nth-child(even) td { background: #f3f5f9; } .sig { color: #1a7f37; font-weight: bold; }
.baseline td { font-style: italic; } .pos { color: #1a7f37; } .neg { color: #b3261e; }
figure { margin: 1em 0; } figure svg { max-width: 100%; height: auto; }
details { margin: .6em 0; } summary { cursor: pointer; font-weight: bold; }
.example { border-left: 4px solid #bbb; margin: .7em 0; padding: .3em .8em; background: #fafafa; }
.example.better { border-color: #3e9651; } .example.worse { border-color: #cc2529; }
.example .line { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: .88em; margin: .15em 0; }
.example .label { display: inline-block; min-width: 7em; color: #555; }
del { background: #fbd3d0; text-decoration: line-through; } ins { background: #c8f0cf; text-decoration: none; }
.lost { background: #fde7b0; } .moved { border-bottom: 1px dashed #888; }
pre { background: #f3f3f3; padding: .6em; overflow-x: auto; white-space: pre-wrap; word-break: break-all; }
"""


def esc(text) -> str:
    return html.escape(str(text), quote=True)


def page(title: str, sections: Sequence[tuple[str, str, str]], intro: str = "") -> str:
    """A whole page: `sections` are (id, heading, inner HTML), listed in a navigation bar."""
    nav = " ".join(f'<a href="#{esc(sid)}">{esc(head)}</a>' for sid, head, _ in sections)
    body = "\n".join(f'<section id="{esc(sid)}">\n<h2>{esc(head)}</h2>\n{inner}\n</section>'
                     for sid, head, inner in sections)
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n<title>{esc(title)}</title>\n'
            f'<style>{STYLE}</style>\n</head>\n<body>\n<h1>{esc(title)}</h1>\n{intro}\n<nav>{nav}</nav>\n{body}\n'
            '</body>\n</html>\n')


def table(header: Sequence[str], rows: Sequence[Sequence[str]], row_classes: Sequence[str] | None = None,
          caption: str | None = None, table_id: str | None = None) -> str:
    """An HTML table; cells are HTML already (escape text with `esc`)."""
    head = "".join(f"<th>{h}</th>" for h in header)
    body = []
    for i, row in enumerate(rows):
        cls = f' class="{row_classes[i]}"' if row_classes and row_classes[i] else ""
        body.append(f"<tr{cls}>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>")
    attrs = f' id="{esc(table_id)}"' if table_id else ""
    cap = f"<caption>{esc(caption)}</caption>" if caption else ""
    return f"<table{attrs}>{cap}<thead><tr>{head}</tr></thead><tbody>\n" + "\n".join(body) + "\n</tbody></table>"


def figure(svg: str, caption: str) -> str:
    return f'<figure>{svg}<figcaption class="muted">{esc(caption)}</figcaption></figure>'


def signed_text(value: float, decimals: int = 2) -> str:
    """+1.23, -0.50, and 0.00 for whatever rounds to zero (never -0.00 or +0.00)."""
    text = f"{value:+.{decimals}f}"
    return f"{0:.{decimals}f}" if float(text) == 0 else text


def signed(value: float | None, decimals: int = 2) -> str:
    """+1.23 in green, -0.50 in red, 0.00 uncoloured (`signed_text`), '-' for None."""
    if value is None:
        return "-"
    text = signed_text(value, decimals)
    cls = "" if text[0] not in "+-" else "pos" if value > 0 else "neg"
    return f'<span class="{cls}">{text}</span>'


def _p(p: float | None) -> str:
    from rerank.evaluation import _fmt_p

    return "-" if p is None else _fmt_p(p)


def significance_table(result) -> str:
    """The ResultTable with marks, the bootstrap 95% interval of each improvement and p-values."""

    header = ["System"]
    for m in result.metrics:
        arrow = "" if not result.quality(m) else " \u2191" if result.higher_is_better[m] else " \u2193"
        header += [esc(f"{result.display(m)}{arrow}"), "\u0394 [95% CI]",
                   "s<sub>sel</sub>/s<sub>opt</sub><br>p" + ("/p\u2021" if result.second_baseline else "")]
    rows, classes = [], []
    for name in result.systems:
        row = [esc(name)]
        for m in result.metrics:
            c, d = result.cells[(name, m)], result.decimals.get(m, 2)
            marks = f' <span class="sig">{esc(c.marks)}</span>' if c.marks else ""
            row.append(esc(result.fmt(m, c.score)) + marks)
            if c.delta is None:
                row.append("-")
            else:
                ci = "" if c.delta_low is None else f"[{signed_text(c.delta_low, d)}, {signed_text(c.delta_high, d)}]"
                row.append(signed(c.delta, d) + f'<br><span class="small">{esc(ci)}</span>')
            p = _p(c.p) + (f"/{_p(c.p2)}" if result.second_baseline else "")
            row.append(f'<span class="small">{esc(result.fmt(m, c.s_sel))}/{esc(result.fmt(m, c.s_opt))}<br>{esc(p)}</span>')
        rows.append(row)
        classes.append("baseline" if name == result.baseline else "")
    return '<div class="wide">' + table(header, rows, classes, table_id="significance-table") + "</div>"


def word_diff(base: str, system: str, references: Sequence[str] = ()) -> tuple[str, str]:
    """(baseline, system) as HTML with the words the system changed marked (whitespace-split words,
    aligned by difflib): <ins> in the system for the words it brings in; in the baseline, each word
    the system drops is marked by whether the `references` hold it, so that a struck word is always
    a wrong word dropped, never a correct one:

    - <del> (struck): no reference holds it;
    - <span class="moved">: a reference word the system still has, elsewhere (it brings it in);
    - <span class="lost">: a reference word the system no longer has.

    "Hold" is clipped as BLEU counts matches: a word occurring r times in the reference where it is
    most frequent can protect r of the baseline's occurrences. The occurrences the system keeps
    count first, since they still match the reference; of the dropped ones, the first r - kept
    (in order) are reference words, the rest are struck. Of the reference words, as many as the
    system brings in that word again are moved (the first ones), the rest lost. Consecutive words
    with the same mark are one element; with no references every dropped word is struck. Words are
    compared as shown (whitespace-split, case kept), not as a metric tokenises them."""
    a, b = base.split(), system.split()
    opcodes = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    kept = Counter(w for op, i1, i2, _, _ in opcodes if op == "equal" for w in a[i1:i2])
    room = _reference_counts(references) - kept
    movable = room & Counter(w for op, _, _, j1, j2 in opcodes if op != "equal" for w in b[j1:j2])
    left: list[tuple[str, str]] = []
    right: list[tuple[str, str]] = []
    for op, i1, i2, j1, j2 in opcodes:
        if op == "equal":
            left += [("", w) for w in a[i1:i2]]
            right += [("", w) for w in b[j1:j2]]
            continue
        for w in a[i1:i2]:
            left.append((_dropped_mark(w, room, movable), w))
        right += [("ins", w) for w in b[j1:j2]]
    return _marked(left), _marked(right)


def _reference_counts(references: Sequence[str]) -> Counter[str]:
    """Each word's largest count in one reference (BLEU's clipping)."""
    counts: Counter[str] = Counter()
    for ref in references:
        counts |= Counter(ref.split())
    return counts


def _dropped_mark(word: str, room: Counter[str], movable: Counter[str]) -> str:
    """The mark of a baseline word the system drops (`word_diff`); takes one from `room` (the reference
    occurrences left) and from `movable` (those the system brings in again) when it uses them."""
    if room[word] <= 0:
        return "del"
    room[word] -= 1
    if movable[word] > 0:
        movable[word] -= 1
        return "moved"
    return "lost"


_MARKS = {"": "{}", "del": "<del>{}</del>", "ins": "<ins>{}</ins>",
          "moved": '<span class="moved" title="a reference word the system has elsewhere">{}</span>',
          "lost": '<span class="lost" title="a reference word the system lost">{}</span>'}


def _marked(words: Sequence[tuple[str, str]]) -> str:
    """(mark, word) pairs as HTML, escaped, the consecutive words of one mark in one element."""
    return " ".join(_MARKS[mark].format(esc(" ".join(w for _, w in run)))
                    for mark, run in itertools.groupby(words, key=lambda pair: pair[0]))
