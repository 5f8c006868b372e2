"""Sentence tokenisation for the embedding models: sacremoses (Moses rules) plus lower-casing.

The same function is used to build vocabularies, to train and to encode, so raw sentences
(e.g. MT hypotheses) can be passed straight to `Encoder.encode`.

`_Moses` is sacremoses' `MosesTokenizer.tokenize` as we call it (no escaping, no aggressive
dash splits, no protected patterns), to the same tokens, with two differences in cost:

- **Start-up.** Importing sacremoses compiles about 150 regular expressions over large Unicode
  classes (its tokenizer, detokenizer, truecaser and normaliser: about 0.15 to 0.2 s in every
  `rerank features` process). `_Moses` reads sacremoses' character classes and prefix lists from
  its data modules alone, without importing the package, and compiles the dozen expressions of
  its language once, on first use, with the same pattern strings (tests check them against
  sacremoses' own).
- **Per sentence.** An expression that needs a character the text lacks (a comma, an apostrophe,
  two periods) cannot match and is skipped; the nonbreaking-prefix step, which ran an expression
  on every token and looked prefixes up in lists (half of the time once), looks at the tokens
  that end with a period only, against sets.

tests/test_embeddings_tokenize.py checks the tokens against sacremoses on generated and real text.
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Callable
from functools import cache, partial
from types import SimpleNamespace

from rerank.embeddings.config import LANGUAGES  # the tokeniser languages

_DIGITS = frozenset("0123456789")
_CJK = ("zh", "ja", "ko", "cjk")   # sacremoses widens its classes for these; not tokeniser languages here


def _data_module(name: str):
    """sacremoses' module `name` (a data module) executed from its file, without importing the
    sacremoses package, whose __init__ imports every tokenizer; None if this sacremoses has no such file."""
    spec = importlib.util.find_spec("sacremoses")
    if spec is None:
        raise ModuleNotFoundError("No module named 'sacremoses'", name="sacremoses")
    path = os.path.join(next(iter(spec.submodule_search_locations or [""])), name + ".py")
    if not os.path.isfile(path):
        return None
    module_spec = importlib.util.spec_from_file_location(f"sacremoses.{name}", path)
    if module_spec is None or module_spec.loader is None:
        return None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


@cache
def _classes() -> SimpleNamespace:
    """The character classes of sacremoses' MosesTokenizer (its class attributes IsN, IsAlnum,
    IsSc, IsSo, IsAlpha, IsLower, the same strings) and a function giving a language's
    nonbreaking-prefix lines. From sacremoses' data modules when it has them, else (an older
    sacremoses, with data files) from the imported tokenizer itself."""
    props, prefixes, indic = (_data_module(n) for n in ("_data_perluniprops", "_data_nonbreaking_prefixes", "indic"))
    if props is None or prefixes is None or indic is None:
        from sacremoses import MosesTokenizer

        return SimpleNamespace(**{k: getattr(MosesTokenizer, k) for k in ("IsN", "IsAlnum", "IsSc", "IsSo", "IsAlpha",
                                                                            "IsLower")},
                               prefixes=lambda lang: MosesTokenizer(lang=lang).NONBREAKING_PREFIXES)
    table, marks = props.PERLUNIPROPS, "".join(indic.VIRAMAS) + "".join(indic.NUKTAS)

    def prefix_lines(lang: str) -> list[str]:  # NonbreakingPrefixes.words(lang) of a language code, stripped
        text = prefixes.NONBREAKING_PREFIXES.get(f"nonbreaking_prefix.{lang}",
                                                 prefixes.NONBREAKING_PREFIXES["nonbreaking_prefix.en"])
        return [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]

    return SimpleNamespace(IsN=table["IsN"], IsAlnum=table["IsAlnum"] + marks, IsSc=table["IsSc"], IsSo=table["IsSo"],
                           IsAlpha=table["IsAlpha"] + marks, IsLower=table["IsLower"], prefixes=prefix_lines)


def patterns(lang: str, classes: dict[str, str] | None = None) -> dict[str, tuple[str, str]]:
    """name -> (pattern, replacement) of every expression `_Moses(lang)` runs, in sacremoses'
    MosesTokenizer's names, with the same strings (the apostrophe rules: `APOSTROPHE_1`.. in its
    order, from its ENGLISH_SPECIFIC_APOSTROPHE, FR_IT_SPECIFIC_APOSTROPHE or NON_SPECIFIC_APOSTROPHE).
    `classes` replaces a class (IsN, IsAlnum, IsAlpha) by another body (compact_patterns)."""
    c, classes = _classes(), classes or {}
    n, alnum, alpha = (classes.get(x, x) for x in (c.IsN, c.IsAlnum, c.IsAlpha))
    table = {
        "DEDUPLICATE_SPACE": (r"\s+", r" "),
        "ASCII_JUNK": (r"[\000-\037]", r""),
        "PAD_NOT_ISALNUM": (r"([^{}\s\.'\`\,\-])".format(alnum), r" \1 "),
        "COMMA_SEPARATE_1": (r"([^{}])[,]".format(n), r"\1 , "),
        "COMMA_SEPARATE_2": (r"[,]([^{}])".format(n), r" , \1"),
        "COMMA_SEPARATE_3": (r"([{}])[,]$".format(n), r"\1 , "),
        "TRAILING_DOT_APOSTROPHE": (r"\.' ?$", " . ' "),
        "MULTIDOT_RUN": (r"\.{2,}", ""),
        "MULTIDOT_MARKER": (r"(?:DOT)+MULTI", ""),
    }
    if lang == "en":
        apostrophes = [(r"([^{alpha}])[']([^{alpha}])".format(alpha=alpha), r"\1 ' \2"),
                       (r"([^{alpha}{isn}])[']([{alpha}])".format(alpha=alpha, isn=n), r"\1 ' \2"),
                       (r"([{alpha}])[']([^{alpha}])".format(alpha=alpha), r"\1 ' \2"),
                       (r"([{alpha}])[']([{alpha}])".format(alpha=alpha), r"\1 '\2"),
                       (r"([{isn}])[']([s])".format(isn=n), r"\1 '\2")]
    elif lang in ("fr", "it"):
        apostrophes = [(r"([^{alpha}])[']([^{alpha}])".format(alpha=alpha), r"\1 ' \2"),
                       (r"([^{alpha}])[']([{alpha}])".format(alpha=alpha), r"\1 ' \2"),
                       (r"([{alpha}])[']([^{alpha}])".format(alpha=alpha), r"\1 ' \2"),
                       (r"([{alpha}])[']([{alpha}])".format(alpha=alpha), r"\1' \2")]
    else:
        apostrophes = [(r"\'", " ' ")]
    table.update({f"APOSTROPHE_{i + 1}": rule for i, rule in enumerate(apostrophes)})
    return table


_SPECIAL_IN_CLASS = frozenset("-]\\^[")


def as_ranges(chars: str) -> str:
    """A character class body that matches the characters of `chars` and no other, as ranges of
    escaped code points (a few hundred items where sacremoses' classes have ten thousand
    characters: half the compile time). Only for `chars` without a character special inside a
    class (- ] \\ ^ [), which are then a set of literals; others come back as they are."""
    if not _SPECIAL_IN_CLASS.isdisjoint(chars):
        return chars
    points, parts, i = sorted(set(map(ord, chars))), [], 0
    while i < len(points):
        j = i
        while j + 1 < len(points) and points[j + 1] == points[j] + 1:
            j += 1
        parts.append(f"\\U{points[i]:08x}" if i == j else f"\\U{points[i]:08x}-\\U{points[j]:08x}")
        i = j + 1
    return "".join(parts)


@cache
def compact_patterns(lang: str) -> dict[str, tuple[str, str]]:
    """patterns(lang) with each of sacremoses' large classes written as_ranges: the same matches
    (tests/test_embeddings_tokenize.py checks each class on every code point)."""
    c = _classes()
    short = {c.IsN: as_ranges(c.IsN), c.IsAlnum: as_ranges(c.IsAlnum), c.IsAlpha: as_ranges(c.IsAlpha)}
    return patterns(lang, short)


# the steps of _Moses.tokenize: names of patterns(lang), in order ("apostrophe": the language's APOSTROPHE_i)
STEPS = {"start": ("DEDUPLICATE_SPACE", "ASCII_JUNK", "PAD_NOT_ISALNUM"),
         "comma": ("COMMA_SEPARATE_1", "COMMA_SEPARATE_2", "COMMA_SEPARATE_3"),
         "trailing": ("TRAILING_DOT_APOSTROPHE",)}


class _Moses:
    """sacremoses' MosesTokenizer(lang).tokenize(text, escape=False, aggressive_dash_splits=False):
    the same tokens, its expressions compiled once, on first use (see the module docstring)."""

    def __init__(self, lang: str):
        if lang in _CJK:
            raise ValueError(f"no CJK tokenisation here: {lang!r}")
        self.lang = lang
        self._patterns: dict[str, tuple[str, str]] | None = None
        self._steps: dict[str, list[Callable[[str], str]]] = {}
        self._prefixes: frozenset[str] | None = None

    def _step(self, step: str) -> list[Callable[[str], str]]:
        """The substitutions of one step (STEPS), each `text -> text`, compiled on the step's first
        use from compact_patterns (the large character classes written as ranges)."""
        subs = self._steps.get(step)
        if subs is None:
            if self._patterns is None:
                self._patterns = compact_patterns(self.lang)
            names = [n for n in self._patterns if n.startswith("APOSTROPHE_")] if step == "apostrophe" else STEPS[step]
            subs = self._steps[step] = [partial(re.compile(self._patterns[n][0]).sub, self._patterns[n][1])
                                        for n in names]
        return subs

    def tokenize(self, text: str, escape: bool = False, aggressive_dash_splits: bool = False) -> list[str]:
        """MosesTokenizer.tokenize's steps, each skipped where its expressions cannot match."""
        if escape or aggressive_dash_splits:
            raise ValueError("only escape=False, aggressive_dash_splits=False are implemented")
        space, junk, pad = self._steps.get("start") or self._step("start")
        text = pad(junk(space(str(text))).strip())
        if ".." in text:
            text = _replace_multidots(self._rule("MULTIDOT_RUN"), text)
        if "," in text:
            for sub in self._steps.get("comma") or self._step("comma"):
                text = sub(text)
        if "'" in text:
            for sub in self._steps.get("apostrophe") or self._step("apostrophe"):
                text = sub(text)
        text = space(self.handles_nonbreaking_prefixes(text)).strip()
        if ".'" in text:
            text = self._step("trailing")[0](text)
        if "MULTI" in text:   # restore_multidots
            text = self._rule("MULTIDOT_MARKER").sub(lambda m: "." * ((m.end() - m.start() - 5) // 3), text)
        return text.split()

    def _rule(self, name: str) -> re.Pattern:
        if self._patterns is None:
            self._patterns = compact_patterns(self.lang)
        return re.compile(self._patterns[name][0])   # re's own cache keeps it

    def handles_nonbreaking_prefixes(self, text: str) -> str:
        """MosesTokenizer.handles_nonbreaking_prefixes: a token of two or more characters ending
        with a period (what its `^(\\S+)\\.$` matches on a whitespace-free token) becomes `prefix .`
        unless the prefix has a period and a letter, is a nonbreaking prefix that is not
        numeric-only, or comes before a token starting with a lower-case letter; or is a
        numeric-only prefix before a token starting with a digit."""
        if self._prefixes is None:
            c = _classes()
            lines = c.prefixes(self.lang)
            self._numeric_only = frozenset(w.rpartition(" ")[0] for w in lines if re.search(r"\s\#NUMERIC_ONLY\#", w))
            self._alpha, self._lower = frozenset(c.IsAlpha), frozenset(c.IsLower)
            self._prefixes = frozenset(lines)
        tokens = text.split()
        last = len(tokens) - 1
        for i, token in enumerate(tokens):
            if len(token) < 2 or token[-1] != ".":
                continue
            prefix = token[:-1]
            after = tokens[i + 1] if i < last else ""
            if ("." in prefix and not self._alpha.isdisjoint(prefix)) \
                    or (prefix in self._prefixes and prefix not in self._numeric_only) \
                    or (after and after[0] in self._lower):
                continue
            if prefix in self._numeric_only and after[:1] in _DIGITS:
                continue
            tokens[i] = prefix + " ."
        return " ".join(tokens)


def _replace_multidots(run: re.Pattern, text: str) -> str:
    """MosesTokenizer.replace_multidots: a run of k >= 2 periods (`run`) becomes ` DOT..DOTMULTI`
    (k times DOT), with a space after it unless it ends the text."""
    def to_marker(match: re.Match) -> str:
        marker = " " + "DOT" * (match.end() - match.start()) + "MULTI"
        return marker + " " if match.end() < len(text) else marker

    return run.sub(to_marker, text)


@cache
def _moses(lang: str) -> _Moses:
    return _Moses(lang)


def check_language(lang: str, known=LANGUAGES) -> str:
    """Return `lang` if it is one of `known`, else raise ValueError naming the choices."""
    if lang not in known:
        raise ValueError(f"unknown language {lang!r}: expected one of {', '.join(known)}")
    return lang


def tokenize(sentence: str, lang: str) -> list[str]:
    """Lower-cased Moses tokens of `sentence` (no HTML escaping of & < > etc.)."""
    check_language(lang)
    return _moses(lang).tokenize(sentence.lower())
