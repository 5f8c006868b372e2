"""Meteor 1.5's aligner: stage-wise candidate matches, then a beam search for the best alignment.

Candidates (all kept, no stage removes another's): exact (same word), stem (same Snowball stem,
different word), synonym (shared WordNet synset, different word), paraphrase (phrase pairs of the
paraphrase table, in both directions). Matches are indexed by their start in the reference
(line 2); line 1 is the hypothesis. Matches whose words no other candidate touches are fixed
first. The beam search (width 40) walks the reference left to right, at each position trying each
candidate that does not reuse a word plus a skip, and ranks partial alignments by weighted
coverage (stage weights 1, .5, .5, .5 summed into integers, as Meteor does), then fewer chunks,
then smaller summed distance |ref position - hyp position|.

Reproduced implementation details of the jar, which matter for agreement:
- identical sentences use the exact stage only;
- the coverage counters are Java ints: `matches += length * weight` truncates, so a single-word
  stage-2..4 match adds nothing to the beam's ranking score;
- when a candidate is taken, its distance is added to the *parent* partial alignment, so later
  siblings and the skip path inherit it (Meteor's code does exactly this);
- sorting is stable (Java's Collections.sort), ties keep insertion order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

EXACT, STEM, SYNONYM, PARAPHRASE = "exact", "stem", "synonym", "paraphrase"
SEARCH_WEIGHTS = {EXACT: 1.0, STEM: 0.5, SYNONYM: 0.5, PARAPHRASE: 0.5}
BEAM_SIZE = 40


@dataclass(frozen=True)
class Match:
    start: int  # position in line 2 (reference)
    length: int
    match_start: int  # position in line 1 (hypothesis)
    match_length: int
    stage: int  # index into the module list


class _Path:
    __slots__ = ("matches", "used1", "used2", "matches1", "matches2", "chunks", "distance", "idx", "last_end")
    matches: list[Match | None]
    used1: list[bool]
    used2: list[bool]
    matches1: int
    matches2: int
    chunks: int
    distance: int
    idx: int
    last_end: int

    def copy(self) -> "_Path":
        p = _Path.__new__(_Path)
        p.matches = self.matches.copy()
        p.used1 = self.used1.copy()
        p.used2 = self.used2.copy()
        p.matches1, p.matches2 = self.matches1, self.matches2
        p.chunks, p.distance, p.idx, p.last_end = self.chunks, self.distance, self.idx, self.last_end
        return p

    def is_used(self, m: Match) -> bool:
        u2, u1 = self.used2, self.used1
        for k in range(m.start, m.start + m.length):
            if u2[k]:
                return True
        for k in range(m.match_start, m.match_start + m.match_length):
            if u1[k]:
                return True
        return False

    def take(self, m: Match, weights) -> None:
        w = weights[m.stage]
        self.matches1 = int(self.matches1 + m.match_length * w)
        self.matches2 = int(self.matches2 + m.length * w)
        if self.last_end != -1 and m.match_start != self.last_end:
            self.chunks += 1
        self.idx = m.start + m.length
        self.last_end = m.match_start + m.match_length


def _key(p: _Path):
    return (-(p.matches1 + p.matches2), p.chunks, p.distance)


def _positions(words: list[str], max_len: int) -> dict[tuple[str, ...], list[int]]:
    """Start positions (ascending) of every n-gram of `words` up to `max_len` words."""
    at: dict[tuple[str, ...], list[int]] = {}
    for start in range(len(words)):
        for end in range(start + 1, min(len(words), start + max_len) + 1):
            at.setdefault(tuple(words[start:end]), []).append(start)
    return at


class Aligner:
    """Align hypothesis words (line 1) to reference words (line 2) with the given module list."""

    def __init__(self, modules, stemmer=None, synonyms=None, paraphrases=None, beam_size: int = BEAM_SIZE):
        self.modules = list(modules)
        self.stemmer = stemmer
        self.synonyms = synonyms
        self.paraphrases = paraphrases
        self.beam_size = beam_size
        self.search_weights = [SEARCH_WEIGHTS[m] for m in self.modules]
        self._stem_cache: dict[str, str] = {}

    def _stem(self, word: str) -> str:
        s = self._stem_cache.get(word)
        if s is None:
            s = self._stem_cache[word] = self.stemmer.stemWord(word)
        return s

    def candidates(self, w1: list[str], w2: list[str]):
        """All candidate matches by reference start, and per-word coverage counts."""
        n1, n2 = len(w1), len(w2)
        matches: list[list[Match]] = [[] for _ in range(n2)]
        cov1, cov2 = [0] * n1, [0] * n2

        def add(m: Match):
            matches[m.start].append(m)
            for k in range(m.match_start, m.match_start + m.match_length):
                cov1[k] += 1
            for k in range(m.start, m.start + m.length):
                cov2[k] += 1

        stages = 1 if w1 == w2 else len(self.modules)
        for stage in range(stages):
            module = self.modules[stage]
            if module == EXACT:
                for j in range(n2):
                    for i in range(n1):
                        if w1[i] == w2[j]:
                            add(Match(j, 1, i, 1, stage))
            elif module == STEM:
                s1 = [self._stem(w) for w in w1]
                s2 = [self._stem(w) for w in w2]
                for j in range(n2):
                    for i in range(n1):
                        if s1[i] == s2[j] and w1[i] != w2[j]:
                            add(Match(j, 1, i, 1, stage))
            elif module == SYNONYM:
                y1 = [self.synonyms.sets(w) for w in w1]
                y2 = [self.synonyms.sets(w) for w in w2]
                for j in range(n2):
                    for i in range(n1):
                        if w1[i] != w2[j] and not y1[i].isdisjoint(y2[j]):
                            add(Match(j, 1, i, 1, stage))
            elif module == PARAPHRASE:
                table = self.paraphrases
                at1, at2 = _positions(w1, table.max_len), _positions(w2, table.max_len)
                for j in range(n2):  # phrases of line 2 found as paraphrases in line 1
                    for length, par in table.paths(w2, j):
                        for i in at1.get(par, ()):
                            add(Match(j, length, i, len(par), stage))
                for i in range(n1):  # phrases of line 1 found as paraphrases in line 2
                    for length, par in table.paths(w1, i):
                        for j in at2.get(par, ()):
                            add(Match(j, len(par), i, length, stage))
            else:
                raise ValueError(f"unknown METEOR module {module!r}")
        return matches, cov1, cov2

    def align(self, w1: list[str], w2: list[str]) -> list:
        """The chosen matches, as a list over reference positions (Match at a match's start, else None)."""
        n1, n2 = len(w1), len(w2)
        matches, cov1, cov2 = self.candidates(w1, w2)
        start = _Path()
        start.matches = [None] * n2
        start.used1 = [False] * n1
        start.used2 = [False] * n2
        start.matches1 = start.matches2 = start.chunks = start.distance = start.idx = 0
        start.last_end = -1
        for j in range(n2):
            if len(matches[j]) == 1:
                m = matches[j][0]
                if all(cov2[j + k] == 1 for k in range(m.length)) and \
                        all(cov1[m.match_start + k] == 1 for k in range(m.match_length)):
                    start.matches[j] = m
                    for k in range(m.length):
                        start.used2[j + k] = True
                    for k in range(m.match_length):
                        start.used1[m.match_start + k] = True
        return self._resolve(matches, n2, start).matches

    def _resolve(self, matches, n2: int, start: _Path) -> _Path:
        weights = self.search_weights
        beam = self.beam_size
        next_paths = [start]
        for current in range(n2 + 1):
            paths = sorted(next_paths, key=_key)
            next_paths = []
            for path in paths[:beam]:
                if current == n2:
                    if path.last_end != -1:
                        path.chunks += 1
                    next_paths.append(path)
                    continue
                if path.used2[current]:
                    if current < path.idx:
                        next_paths.append(path)
                    elif (fixed := path.matches[path.idx]) is not None:  # a fixed match starts here
                        path.take(fixed, weights)
                        path.distance += abs(fixed.start - fixed.match_start)
                        next_paths.append(path)
                    continue
                for m in matches[current]:
                    if path.is_used(m):
                        continue
                    new = path.copy()
                    for k in range(m.start, m.start + m.length):
                        new.used2[k] = True
                    for k in range(m.match_start, m.match_start + m.match_length):
                        new.used1[k] = True
                    new.matches[current] = m
                    new.take(m, weights)
                    path.distance += abs(m.start - m.match_start)  # sic: the parent, as in Meteor
                    next_paths.append(new)
                if path.last_end != -1:
                    path.chunks += 1
                    path.last_end = -1
                path.idx += 1
                next_paths.append(path)
            if not next_paths:
                next_paths.append(paths[0])
        return sorted(next_paths, key=_key)[0]


def count_chunks(chosen: list) -> int:
    """Chunks of an alignment: maximal runs contiguous and in order on both sides."""
    chunks, idx, last_end = 0, 0, -1
    while idx < len(chosen):
        m = chosen[idx]
        if m is None:
            if last_end != -1:
                chunks += 1
                last_end = -1
            idx += 1
        else:
            if last_end != -1 and m.match_start != last_end:
                chunks += 1
            idx = m.start + m.length
            last_end = m.match_start + m.match_length
    if last_end != -1:
        chunks += 1
    return chunks


def alignment_stats(w1: list[str], w2: list[str], chosen: list, n_stages: int, function_words) -> np.ndarray:
    """Meteor's 23 per-segment statistics of one alignment (see MeteorMetric for the layout)."""
    fw1 = [w.lower() in function_words for w in w1]
    fw2 = [w.lower() in function_words for w in w2]
    stats = np.zeros(23)
    stats[0], stats[1] = len(w1), len(w2)
    stats[2], stats[3] = sum(fw1), sum(fw2)
    for m in chosen:
        if m is None:
            continue
        base = 4 + 4 * m.stage
        for k in range(m.match_start, m.match_start + m.match_length):
            stats[base + (2 if fw1[k] else 0)] += 1
        for k in range(m.start, m.start + m.length):
            stats[base + (3 if fw2[k] else 1)] += 1
    stats[20] = count_chunks(chosen)
    stats[21] = stats[4:20:2].sum()  # hypothesis words matched (content + function, all stages)
    stats[22] = stats[5:20:2].sum()
    return stats
