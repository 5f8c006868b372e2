"""METEOR 1.5 (Denkowski & Lavie 2014): a native scorer and a backend driving the Meteor jar.

Per-segment statistics are Meteor's own 23 numbers (as `-ssOut`/`-stdio` print them):
  0 hyp length, 1 ref length, 2 hyp function words, 3 ref function words,
  4+4s..7+4s for stage s = 0..3: hyp content matches, ref content matches, hyp function matches,
  ref function matches; 20 chunks; 21 hyp words matched; 22 ref words matched.
Function words: the jar's command line uses the English list for every language (its configuration
keeps the default language's list); the native scorer does the same by default so that both agree,
`function_words="language"` uses the language's own list instead.
One change makes the statistics summable: a segment matched perfectly (all words, one chunk) stores 0
chunks, which is what Meteor's aggregation does when it adds segment statistics.

Score (Meteor's computeMetrics): with delta weighting content vs function words and positional
module weights w_s, P = sum_s w_s (delta*hc_s + (1-delta)*hf_s) / (delta*content_len + (1-delta)*fn_len)
(R likewise on the reference side), Fmean = 1 / ((1-alpha)/P + alpha/R),
Pen = gamma * (chunks / mean(matched hyp words, matched ref words))^beta, score = Fmean * (1 - Pen).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from rerank.metrics.base import Metric
from rerank.errors import InputError
from rerank.metrics.meteor.resources import LANG_NAMES, MeteorResourceError, load_resources
from rerank.progress import Progress

if TYPE_CHECKING:  # imported when first used: a metric that is only named loads none of them
    from rerank.metrics.meteor.aligner import Aligner
    from rerank.metrics.meteor.jar import MeteorJar
    from rerank.metrics.meteor.paraphrase import Paraphrases

# Meteor 1.5 "rank" task parameters (alpha, beta, gamma, delta) and module weights (positional).
PARAMETERS = {
    "en": (0.85, 0.20, 0.60, 0.75),
    "cs": (0.95, 0.20, 0.60, 0.80),
    "fr": (0.90, 1.40, 0.60, 0.65),
    "es": (0.65, 1.30, 0.50, 0.80),
    "de": (0.95, 1.00, 0.55, 0.55),
}
WEIGHTS = {
    "en": (1.0, 0.6, 0.8, 0.6),
    "cs": (1.0, 0.4, 0.0, 0.0),
    "fr": (1.0, 0.2, 0.4, 0.0),
    "es": (1.0, 0.8, 0.6, 0.0),
    "de": (1.0, 0.8, 0.2, 0.0),
}
DEFAULT_MODULES = {
    "en": ("exact", "stem", "synonym", "paraphrase"),
    "cs": ("exact", "paraphrase"),
    "fr": ("exact", "stem", "paraphrase"),
    "es": ("exact", "stem", "paraphrase"),
    "de": ("exact", "stem", "paraphrase"),
}
STEM_LANGS = {"en", "de", "fr", "es"}
KNOWN_MODULES = ("exact", "stem", "synonym", "paraphrase")


def meteor_score(stats: np.ndarray, params, weights) -> np.ndarray | float:
    """Meteor score of summed statistics (..., 23), vectorised over leading axes."""
    s = np.asarray(stats, dtype=np.float64)
    alpha, beta, gamma, delta = params
    w = np.zeros(4)
    w[: len(weights)] = weights
    hc, rc, hf, rf = s[..., 4:20:4], s[..., 5:20:4], s[..., 6:20:4], s[..., 7:20:4]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        h_len = delta * (s[..., 0] - s[..., 2]) + (1 - delta) * s[..., 2]
        r_len = delta * (s[..., 1] - s[..., 3]) + (1 - delta) * s[..., 3]
        h_match = (hc * w).sum(-1) * delta + (hf * w).sum(-1) * (1 - delta)
        r_match = (rc * w).sum(-1) * delta + (rf * w).sum(-1) * (1 - delta)
        p = h_match / h_len
        r = r_match / r_len
        fmean = 1.0 / ((1 - alpha) / p + alpha / r)
        h_total = (hc + hf).sum(-1)
        r_total = (rc + rf).sum(-1)
        chunks = s[..., 20]
        perfect = (h_total == s[..., 0]) & (r_total == s[..., 1]) & (chunks == 1)
        frag = np.where(perfect, 0.0, chunks / ((s[..., 21] + s[..., 22]) / 2))
        score = fmean * (1 - gamma * np.power(frag, beta))
        score = np.where(np.isnan(score), 0.0, np.maximum(score, 0.0))
    return score if score.ndim else float(score)


def summable(stats: np.ndarray) -> np.ndarray:
    """Zero the chunk count of perfectly matched segments (Meteor's aggregation rule)."""
    stats = np.array(stats, dtype=np.float64, copy=True)
    h_total = stats[..., 4:20:4].sum(-1) + stats[..., 6:20:4].sum(-1)
    r_total = stats[..., 5:20:4].sum(-1) + stats[..., 7:20:4].sum(-1)
    perfect = (h_total == stats[..., 0]) & (r_total == stats[..., 1]) & (stats[..., 20] == 1)
    stats[..., 20] = np.where(perfect, 0.0, stats[..., 20])
    return stats


class MeteorMetric(Metric):
    """METEOR 1.5 statistics from the native aligner or from the jar (`backend="jar"`)."""

    name, display = "meteor", "METEOR"
    options = ("lang", "meteor_options")
    statistics_doc = "Meteor 1.5's 23 statistics (below)"
    score_doc = "Meteor's `computeMetrics`, × 100"

    @classmethod
    def from_options(cls, **options):
        """make_metric's target language `lang` and `meteor_options` (a dict of the constructor's
        other keywords: modules, backend, resources, ...)."""
        return cls(lang=options.get("lang", "en"), **(options.get("meteor_options") or {}))

    def __init__(self, lang: str = "en", modules: Sequence[str] | None = None, backend: str = "native",
                 resources: str | None = None, jar: str | None = None, normalize: bool = True,
                 lowercase: bool = True, function_words: str = "jar", progress: Progress = False):
        lang = lang.lower()
        if lang not in LANG_NAMES:
            raise InputError(f"METEOR: unknown language {lang!r} (known: {', '.join(sorted(LANG_NAMES))})")
        modules = tuple(m.lower() for m in (modules or DEFAULT_MODULES[lang]))
        bad = [m for m in modules if m not in KNOWN_MODULES]
        if bad or not modules or modules[0] != "exact" or len(set(modules)) != len(modules):
            raise InputError(f"METEOR modules must start with exact and be distinct, from {', '.join(KNOWN_MODULES)} "
                             f"(got {', '.join(modules)})")
        if "stem" in modules and lang not in STEM_LANGS:
            raise MeteorResourceError(f"METEOR: no stemmer for {lang}; drop the stem module")
        if backend not in ("native", "jar"):
            raise InputError(f"METEOR backend must be native or jar, not {backend!r}")
        self.lang, self.modules, self.backend = lang, modules, backend
        self.params = PARAMETERS[lang]
        self.weights = WEIGHTS[lang][: len(modules)]
        self.normalize, self.lowercase = normalize, lowercase
        self.progress = progress
        self.res = load_resources(resources)
        # Meteor 1.5's command line keeps the function-word list of its default language (English)
        # whatever -l says; "jar" reproduces that, "language" uses the language's own list.
        if function_words not in ("jar", "language"):
            raise InputError("function_words must be 'jar' or 'language'")
        self.fw_source = "en" if function_words == "jar" else lang
        self.function_words = self.res.function_words(self.fw_source)
        self.nonbreaking = self.res.nonbreaking_prefixes(lang)
        self.synonyms = self.res.synonyms(lang) if "synonym" in modules else None
        self.paraphrase_path = self.res.paraphrase_path(lang) if "paraphrase" in modules else None
        self._paraphrases: Paraphrases | None = None
        self._sentences: set[tuple[str, ...]] = set()  # the word sequences the paraphrases were selected for
        self._jar: MeteorJar | None = None
        if backend == "jar":
            from rerank.metrics.meteor.jar import MeteorJar

            self._jar = MeteorJar(jar or (self.res.location if self.res.is_jar else None), lang, modules,
                                  normalize=normalize, lowercase=lowercase)
        self._aligner: Aligner | None = None
        self._words: dict[str, list[str]] = {}

    # ---- text preparation ----------------------------------------------------------------
    def words(self, line: str) -> list[str]:
        """Meteor's words of a line (normalised, lowercased as configured); cached."""
        got = self._words.get(line)
        if got is None:
            got = self._words[line] = self._words_uncached(line)
        return got

    def _words_uncached(self, line: str) -> list[str]:
        from rerank.metrics.meteor.normalize import normalize_line, tokenize

        if self.normalize:
            line = normalize_line(line, self.lang, self.nonbreaking)
        if self.normalize or self.lowercase:
            line = line.lower()
        return tokenize(line)

    def prepare(self, texts: Sequence[str]) -> None:
        """Select the paraphrase entries that can match in `texts` (all hypotheses and references):
        both phrases must occur in them. The table's index is built once and cached on disk."""
        if self.paraphrase_path is None or self.backend != "native":
            return
        new = {tuple(self.words(t)) for t in texts} - self._sentences
        if not new and self._paraphrases is not None:
            return
        from rerank.metrics.meteor.paraphrase import open_index

        self._sentences |= new
        self._paraphrases = open_index(self.paraphrase_path).select(self._sentences)
        self._aligner = None

    def aligner(self):
        if self._aligner is None:
            from rerank.metrics.meteor.aligner import Aligner

            stemmer = None
            if "stem" in self.modules:
                stemmer = MeteorStemmer(self.lang)
            self._aligner = Aligner(self.modules, stemmer=stemmer, synonyms=self.synonyms, paraphrases=self._paraphrases)
        return self._aligner

    # ---- Metric interface ----------------------------------------------------------------
    def sentence_stats(self, hyps, refs):
        refs = [list(r) for r in refs]
        if self._jar is not None:  # the jar backend
            return summable(self._jar.stats(list(hyps), refs))
        from rerank.metrics.meteor.aligner import alignment_stats

        if self.paraphrase_path is not None:
            self.prepare(list(hyps) + [r for stream in refs for r in stream])
        aligner = self.aligner()
        out = np.zeros((len(hyps), 23))
        from rerank.progress import track

        for i in track(range(len(hyps)), self.progress, "METEOR", unit="sent"):
            w1 = self.words(hyps[i])
            best, best_score = None, -1.0
            for stream in refs:
                w2 = self.words(stream[i])
                st = alignment_stats(w1, w2, aligner.align(w1, w2), len(self.modules), self.function_words)
                sc = float(meteor_score(st, self.params, self.weights))
                if sc > best_score:
                    best, best_score = st, sc
            out[i] = best
        return summable(out)

    def score_from_stats(self, stats):
        score = meteor_score(stats, self.params, self.weights)
        return score * 100.0 if np.ndim(score) else float(score) * 100.0

    def signature(self):
        norm = "norm" if self.normalize else ("lower" if self.lowercase else "none")
        w = " ".join(f"{x:g}" for x in self.weights)
        p = " ".join(f"{x:g}" for x in self.params)
        return (f"METEOR-1.5|lang:{self.lang}|modules:{'+'.join(self.modules)}|weights:{w}|params:{p}|{norm}|"
                f"function-words:{self.fw_source}|"
                f"backend:{self.backend}")


class MeteorStemmer:
    """Snowball stemmer as in Meteor's jar (Snowball's 2001-era Java stemmers).

    PyPI snowballstemmer 2.x reproduces them except one later German rule ("-nisse" -> "-nis"
    instead of "-niss"), which is undone here; 3.x changed German and French much more.
    """

    def __init__(self, lang: str):
        import snowballstemmer

        self.lang = lang
        self._stemmer = snowballstemmer.stemmer(LANG_NAMES[lang])

    def stemWord(self, word: str) -> str:  # snowballstemmer's spelling
        stem = self._stemmer.stemWord(word)
        if self.lang == "de" and stem.endswith("nis") and word.startswith(stem + "s"):
            stem += "s"
        return stem
