"""Meteor 1.5's `-norm` tokenisation for western languages (a Moses-tokeniser variant).

Steps as Meteor applies them: split off symbols, protect runs of dots, split commas outside
numbers, unify quotes and dashes, split word-internal dashes, split apostrophes by language,
split sentence-final dots unless the word is a known nonbreaking prefix, then collapse spaces.
Java regex classes are ASCII-only (\\p{Digit}, \\p{Lower}, \\s), so the patterns here spell them out.
"""

from __future__ import annotations

import re

ALPHA = ("A-Za-z\u0160\u017d\u0161\u017e\u0178\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u017e\u0400-\u04ff\u0500-\u0527"
         "\ua640-\ua66e\ua67e-\ua697\u1d00-\u1d7f")
ALNUM = "0-9" + ALPHA
JAVA_SPACE = " \t\n\x0b\f\r"

R_SEP_OTHER = re.compile(f"([^{ALNUM}{JAVA_SPACE}.'`,\\-\u2018\u2019])")
R_MULTI_DOT = re.compile(r"\.([.]+)")
R_MULTI_DOT2 = re.compile(r"DOTMULTI\.([^.])")
R_COMMA = (re.compile(r"([^0-9]),([^0-9])"), re.compile(r"([0-9]),([^0-9])"), re.compile(r"([^0-9]),([0-9])"))
R_QUOTE = re.compile("[`\u2018\u2019]")
R_QUOTE2 = re.compile("([\u201c\u201d]|'')")
R_RM_DASH = re.compile(f"([{ALNUM}.])-([{ALNUM}])")
R_CONT_EN = (
    (re.compile(f"([^{ALPHA}])'([^{ALPHA}])"), r"\1 ' \2"),
    (re.compile(f"([^{ALPHA}0-9])'([{ALPHA}])"), r"\1 ' \2"),
    (re.compile(f"([{ALPHA}])'([^{ALPHA}])"), r"\1 ' \2"),
    (re.compile(f"([{ALPHA}])'([{ALPHA}])"), r"\1 '\2"),
    (re.compile("([0-9])'(s)"), r"\1 '\2"),
)
R_CONT_FR = (
    (re.compile(f"([^{ALPHA}])'([^{ALPHA}])"), r"\1 ' \2"),
    (re.compile(f"([^{ALPHA}])'([{ALPHA}])"), r"\1 ' \2"),
    (re.compile(f"([{ALPHA}])'([^{ALPHA}])"), r"\1 ' \2"),
    (re.compile(f"([{ALPHA}])'([{ALPHA}])"), r"\1' \2"),
)
R_TOKENS = re.compile(r"[ \t\n\r\f]+")
R_HAS_ALPHA = re.compile(f"[{ALPHA}]")
R_LOWER_START = re.compile("^[a-z]")
R_NUM_START = re.compile("^[0-9]+")
R_WHITE = re.compile("[ \u2000-\u200a\u202f\u205f\u3000\u00a0]+")
R_PUNCT_STRIP = re.compile(f"[^{ALNUM}]")


def _java_trim(s: str) -> str:
    start, end = 0, len(s)
    while start < end and s[start] <= " ":
        start += 1
    while end > start and s[end - 1] <= " ":
        end -= 1
    return s[start:end]


def normalize_line(line: str, lang: str, nonbreaking: dict[str, int], keep_punctuation: bool = True) -> str:
    """Meteor's Normalizer.normalizeLine for en, de, fr, es, cs (western languages)."""
    s = " " + line + " "
    s = R_SEP_OTHER.sub(r" \1 ", s)
    s = R_MULTI_DOT.sub(r" DOTMULTI\1", s)
    while "DOTMULTI." in s:
        s = R_MULTI_DOT2.sub(r"DOTDOTMULTI \1", s)
        s = s.replace("DOTMULTI.", "DOTDOTMULTI")
    for pattern in R_COMMA:
        s = pattern.sub(r"\1 , \2", s)
    s = R_QUOTE.sub("'", s)
    s = R_QUOTE2.sub(' " ', s)
    s = s.replace("\u2013", "-").replace("--", "-")
    s = R_RM_DASH.sub(r"\1 \2", s)
    if lang == "en":
        for pattern, repl in R_CONT_EN:
            s = pattern.sub(repl, s)
    elif lang == "fr":
        for pattern, repl in R_CONT_FR:
            s = pattern.sub(repl, s)
    else:
        s = s.replace("'", " ' ")
    words = [w for w in R_TOKENS.split(s) if w]
    out = []
    for i, word in enumerate(words):
        if len(word) > 1 and word.endswith("."):
            pre = word[:-1]
            kind = nonbreaking.get(pre)
            following = words[i + 1] if i < len(words) - 1 else None
            if "." in pre and R_HAS_ALPHA.search(pre):
                out.append(word.replace(".", ""))
            elif kind == 1 or (following is not None and R_LOWER_START.search(following)):
                out.append(word)
            elif kind == 2 and following is not None and R_NUM_START.search(following):
                out.append(word)
            else:
                out.append(pre + " .")
        else:
            out.append(word)
        out.append(" ")
    s = "".join(out)
    while "DOTDOTMULTI" in s:
        s = s.replace("DOTDOTMULTI", "DOTMULTI.")
    s = s.replace("DOTMULTI", ".")
    if not keep_punctuation:
        s = R_PUNCT_STRIP.sub(" ", s)
    return _java_trim(R_WHITE.sub(" ", s))


def tokenize(line: str) -> list[str]:
    """Meteor's word split (java.util.StringTokenizer: space, tab, newline, CR, form feed)."""
    return [w for w in R_TOKENS.split(line) if w]
