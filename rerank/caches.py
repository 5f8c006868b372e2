"""Where the toolkit keeps its caches: one root, `$RERANK_CACHE_DIR`, else
`$XDG_CACHE_HOME/mlmme-rerank` (`~/.cache/mlmme-rerank`), with one place per cache:

    nbest/          parsed n-best lists (rerank.formats.cache; opt-in, on when RERANK_CACHE_DIR is set)
    scores.sqlite   model feature scores (rerank.score_cache)
    meteor/         METEOR's paraphrase-table indexes (rerank.metrics.meteor.paraphrase)
"""

from __future__ import annotations

import os

CACHE_ENV = "RERANK_CACHE_DIR"


def cache_root() -> str:
    """$RERANK_CACHE_DIR, else $XDG_CACHE_HOME/mlmme-rerank, else ~/.cache/mlmme-rerank."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "mlmme-rerank")


def cache_path(name: str) -> str:
    """The place of one cache under the root (`nbest`, `scores.sqlite`, `meteor`)."""
    return os.path.join(cache_root(), name)
