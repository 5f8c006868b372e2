"""Meteor 1.5 language resources, read from a Meteor distribution (the jar, or a directory).

The jar holds `function/<language>.words`, `nonbreaking/<language>.prefixes` and
`synonym/english.{exceptions,synsets}` (WordNet 3.0); paraphrase tables `paraphrase-XX.gz` live
in `data/` beside the jar. By default the jar shipped with the PyPI package `pycocoevalcap` is used.
"""

from __future__ import annotations

import os
import zipfile
from functools import lru_cache

from rerank.errors import InputError

LANG_NAMES = {"en": "english", "cs": "czech", "fr": "french", "es": "spanish", "de": "german"}
# Meteor's short names in paraphrase file names (Czech is "cz" there).
PARA_NAMES = {"en": "en", "cs": "cz", "fr": "fr", "es": "es", "de": "de"}


class MeteorResourceError(InputError):
    """A resource that the requested METEOR configuration needs is missing: bad input (the
    resources given or installed), which the command line prints in one line with exit status 2."""


def default_jar() -> str | None:
    import importlib.util

    spec = importlib.util.find_spec("pycocoevalcap")
    if spec is None:
        return None
    for folder in list(spec.submodule_search_locations or []):  # a namespace package: no __file__
        path = os.path.join(folder, "meteor", "meteor-1.5.jar")
        if os.path.isfile(path):
            return path
    return None


class MeteorResources:
    """Access to the files of one Meteor distribution (a jar or an unpacked directory)."""

    def __init__(self, location: str | None = None):
        location = location or default_jar()
        if location is None:
            raise MeteorResourceError("no Meteor 1.5 resources: install pycocoevalcap (it ships meteor-1.5.jar) "
                                      "or give the location of meteor-1.5.jar or of its unpacked resources")
        if not os.path.exists(location):
            raise MeteorResourceError(f"Meteor resources not found: {location}")
        self.location = location
        self.is_jar = os.path.isfile(location)
        self.base_dir = os.path.dirname(os.path.abspath(location)) if self.is_jar else location

    def _read(self, name: str) -> str | None:
        if self.is_jar:
            with zipfile.ZipFile(self.location) as jar:
                try:
                    return jar.read(name).decode("utf-8")
                except KeyError:
                    return None
        path = os.path.join(self.base_dir, name)
        if not os.path.isfile(path):
            return None
        with open(path, encoding="utf-8") as fh:
            return fh.read()

    def function_words(self, lang: str) -> frozenset[str]:
        text = self._read(f"function/{LANG_NAMES[lang]}.words")
        if text is None:
            raise MeteorResourceError(f"no function word list for {lang} in {self.location}")
        return frozenset(text.split("\n"))

    def nonbreaking_prefixes(self, lang: str) -> dict[str, int]:
        """Prefix -> 1 (always nonbreaking) or 2 (only before a number), Moses' file format."""
        text = self._read(f"nonbreaking/{LANG_NAMES[lang]}.prefixes") or ""
        table = {}
        for line in text.split("\n"):
            tokens = line.split()
            if not tokens or tokens[0].startswith("#"):
                continue
            table[tokens[0]] = 2 if len(tokens) > 1 and tokens[1] == "#NUMERIC_ONLY#" else 1
        return table

    def synonyms(self, lang: str) -> "Synonyms":
        name = LANG_NAMES[lang]
        exc = self._read(f"synonym/{name}.exceptions")
        syn = self._read(f"synonym/{name}.synsets")
        if exc is None or syn is None:
            raise MeteorResourceError(f"the synonym module needs synonym/{name}.synsets and .exceptions, "
                                      f"which {self.location} does not have; leave the synonym module out")
        return Synonyms(exc, syn)

    def paraphrase_path(self, lang: str) -> str:
        name = f"paraphrase-{PARA_NAMES[lang]}.gz"
        for cand in (os.path.join(self.base_dir, "data", name), os.path.join(self.base_dir, name)):
            if os.path.isfile(cand):
                return cand
        raise MeteorResourceError(f"the paraphrase module needs {name}, which is not in {self.base_dir}/data; "
                                  f"get it from a Meteor 1.5 distribution (the METEOR resources) or leave the "
                                  f"paraphrase module out (METEOR modules e.g. exact,stem)")


class Synonyms:
    """WordNet synsets with Meteor's morphological fallback (WordNet's "morphy" suffix rules)."""

    # (suffix, replacement) in WordNet's order: nouns, verbs, adjectives.
    RULES = (("s", ""), ("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"), ("men", "man"),
             ("ies", "y"), ("s", ""), ("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", ""), ("ing", "e"),
             ("ing", ""), ("er", ""), ("est", ""), ("er", "e"), ("est", "e"))

    def __init__(self, exceptions_text: str, synsets_text: str):
        self.bases: dict[str, list[str]] = {}
        lines = exceptions_text.split("\n")
        for k in range(0, len(lines) - 1, 2):
            base = lines[k]
            for form in lines[k + 1].split():
                self.bases.setdefault(form, []).append(base)
        self.synsets: dict[str, frozenset[int]] = {}
        lines = synsets_text.split("\n")
        for k in range(0, len(lines) - 1, 2):
            self.synsets[lines[k]] = frozenset(int(t) for t in lines[k + 1].split())
        self._cache: dict[str, frozenset[int]] = {}

    def _morph(self, word: str) -> str:
        if word.endswith("ss") or len(word) <= 2:
            return word
        for suffix, repl in self.RULES:
            if word.endswith(suffix):
                cand = word[: len(word) - len(suffix)] + repl
                if cand in self.synsets:
                    return cand
        return ""

    def sets(self, word: str) -> frozenset[int]:
        """Synsets of the word and of its base form(s) (exception list, else morphy)."""
        got = self._cache.get(word)
        if got is not None:
            return got
        result = set(self.synsets.get(word, ()))
        bases = self.bases.get(word)
        if bases is not None:
            for b in bases:
                result |= self.synsets.get(b, frozenset())
        else:
            result |= self.synsets.get(self._morph(word), frozenset())
        got = self._cache[word] = frozenset(result)
        return got


@lru_cache(maxsize=4)
def load_resources(location: str | None) -> MeteorResources:
    return MeteorResources(location)
