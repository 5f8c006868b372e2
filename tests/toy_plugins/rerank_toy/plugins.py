"""Three toy plug-ins, each a few lines of the interface it implements:

- `UnigramF1Utility`, the MBR utility `unigram-f1` (`rerank features --which mbr --mbr-utility
  unigram-f1`): a text utility, no model, exact and aggregate;
- `TOY_BLOCKS`, the n-best format `toy-blocks`: a `== ID` line opens each list, then one
  `TOTAL | name=value ... | hypothesis` line per hypothesis; readable, writable, detected;
- `UnigramF1Metric`, the metric `unigram-f1`: per-sentence statistics [matches, hypothesis
  length, reference length], the corpus score 100 * 2 M / (H + R).

Tokens are whitespace-separated words; the matches of two texts are their clipped unigram
matches, sum_w min(c_a(w), c_b(w)).
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np

from rerank.consensus import TextUtility
from rerank.errors import InputError
from rerank.formats import NBestFormat
from rerank.formats.common import format_value, parse_number
from rerank.metrics.base import Metric
from rerank.nbest import NBestList


def matches(a: Counter, b: Counter) -> int:
    """The clipped unigram matches of two bags of words."""
    return sum((a & b).values())


def unigram_f1(m: float, length_a: float, length_b: float) -> float:
    """2 m / (|a| + |b|); two empty texts are equal (1)."""
    return 2.0 * m / (length_a + length_b) if length_a + length_b > 0 else 1.0


# ---- the MBR utility ---------------------------------------------------------------------------

class UnigramF1Utility(TextUtility):
    """U(h_i, h_j) = unigram F1 of the two hypotheses (a text utility: `needs_model` is False, it
    takes no MBR option). Its aggregate reference is its list's posterior-expected bag of words
    and length: 2 sum_w min(c_i(w), E[c](w)) / (|h_i| + E|h|)."""

    def exact(self, sources, texts, group, I, J):
        bags = [Counter(text.split()) for text in texts]
        return np.array([unigram_f1(matches(bags[i], bags[j]), len(texts[i].split()), len(texts[j].split()))
                         for i, j in zip(I.tolist(), J.tolist())], dtype=np.float64)

    def aggregate(self, sources, texts, group, p):
        bags = [Counter(text.split()) for text in texts]
        expected: dict[int, Counter] = {}
        length: dict[int, float] = {}
        for bag, g, weight in zip(bags, group.tolist(), p.tolist()):
            counts = expected.setdefault(g, Counter())
            for word, count in bag.items():
                counts[word] += weight * count
            length[g] = length.get(g, 0.0) + weight * sum(bag.values())
        return np.array([unigram_f1(sum(min(count, expected[g][word]) for word, count in bag.items()),
                                    sum(bag.values()), length[g]) for bag, g in zip(bags, group.tolist())],
                        dtype=np.float64)


# ---- the n-best format -------------------------------------------------------------------------

HEADER = re.compile(r"== (\d+)$")


def read_toy_blocks(path, *, strict=False, report=None):
    """An n-best list from `== ID` lines, each followed by its list's `TOTAL | name=value ... |
    hypothesis` lines; the ids run up by one, every line names the same scores."""
    from rerank.io import iter_lines

    offsets, hyps, rows, totals, names, last_id = [0], [], [], [], None, None
    for number, text in iter_lines(path):
        header = HEADER.match(text)
        if header:
            if last_id is not None and int(header.group(1)) != last_id + 1:
                raise InputError(f"list {header.group(1)} after list {last_id}: the ids run up by one", path, number)
            last_id = int(header.group(1))
            offsets.append(offsets[-1])
            continue
        parts = text.split(" | ", 2)
        if last_id is None or len(parts) != 3:
            raise InputError("expected `== ID` or `TOTAL | name=value ... | hypothesis`", path, number)
        pairs = [item.split("=", 1) for item in parts[1].split()]
        if any(len(pair) != 2 for pair in pairs):
            raise InputError(f"scores {parts[1]!r}: expected name=value ...", path, number)
        if names is None:
            names = [name for name, _ in pairs]
        elif [name for name, _ in pairs] != names:
            raise InputError(f"the scores are not {' '.join(names)} as on the first hypothesis", path, number)
        totals.append(parse_number(parts[0], "the total score", path, number))
        rows.append([parse_number(value, f"score {name}", path, number) for name, value in pairs])
        hyps.append(parts[2])
        offsets[-1] += 1
    names = names or []
    return NBestList(np.array(offsets, dtype=np.int64), hyps, np.array(rows, dtype=np.float64).reshape(len(hyps), len(names)),
                     names, scores=np.array(totals, dtype=np.float64))


def write_toy_blocks(nbest, path, first_id=0):
    from rerank.io import atomic_write

    if nbest.scores is None:
        raise InputError("the toy-blocks format needs each hypothesis's total score", path)
    with atomic_write(path) as out:
        for sentence in range(nbest.n_sentences):
            out.write(f"== {sentence + first_id}\n")
            for row in range(nbest.offsets[sentence], nbest.offsets[sentence + 1]):
                scores = " ".join(f"{name}={format_value(value)}"
                                  for name, value in zip(nbest.feature_names, nbest.features[row].tolist()))
                out.write(f"{format_value(nbest.scores[row])} | {scores} | {nbest.hyps[row]}\n")
    return [path]


def looks_like_toy_blocks(sample):
    return bool(HEADER.match(sample.first))


TOY_BLOCKS = NBestFormat(
    name="toy-blocks", layout="`== ID`, then TOTAL | name=value ... | hypothesis", producers="the toy plug-in",
    read=read_toy_blocks, write=write_toy_blocks, detect=looks_like_toy_blocks, detect_order=46)


# ---- the metric --------------------------------------------------------------------------------

class UnigramF1Metric(Metric):
    """Corpus unigram F1 in percent: per sentence [matches, hypothesis length, reference length]
    against the reference of the highest sentence F1 (the first of equal ones)."""

    name = "unigram-f1"
    display = "UniF1"
    statistics_doc = "clipped unigram matches, hypothesis and reference length (the best reference)"
    score_doc = "100 * 2 M / (H + R)"

    def sentence_stats(self, hyps, refs):
        out = np.zeros((len(hyps), 3))
        for k, hyp in enumerate(hyps):
            bag = Counter(hyp.split())
            rows = [(matches(bag, Counter(stream[k].split())), len(hyp.split()), len(stream[k].split()))
                    for stream in refs]
            out[k] = max(rows, key=lambda row: unigram_f1(*row))
        return out

    def score_from_stats(self, stats):
        stats = np.asarray(stats, dtype=np.float64)
        total = stats[..., 1] + stats[..., 2]
        score = np.where(total > 0, 200.0 * stats[..., 0] / np.where(total > 0, total, 1.0), 0.0)
        return score if score.ndim else float(score)

    def signature(self):
        return "unigram-f1|tok:whitespace|version:0.0"
