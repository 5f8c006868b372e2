"""mlmme-rerank: rerank MT n-best lists with multilingual multi-modal sentence embeddings.

The Python API (docs/api.md) is importable from here: `rerank.read_nbest`, `rerank.tune`,
`rerank.apply`, `rerank.evaluate`, ... Its names are loaded from rerank.api on first use, so
that `import rerank` (and every `rerank` command) stays fast and loads no model library.
"""

import logging

__version__ = "0.1.0"

# The library reports through the `rerank` logger and prints nothing; a script that configures no
# logging sees nothing either (the CLI adds its own stderr handler).
logging.getLogger("rerank").addHandler(logging.NullHandler())

# names of the API that live in a light module of their own (a command imports it to build its parser)
_OWN_MODULE = {"NBestFile": "rerank.nbestfile", "ApplyOptions": "rerank.nbestfile", "apply_file": "rerank.nbestfile",
               "convert_file": "rerank.nbestfile", "summarize_file": "rerank.summary",
               "join_score_files": "rerank.scorefiles", "FeatureRun": "rerank.featuring",
               "add_features_file": "rerank.featuring", "plan_features": "rerank.featuring",
               "TuneSettings": "rerank.multirun", "TuneEvents": "rerank.multirun", "OracleOptions": "rerank.oracles",
               "EvalOptions": "rerank.evaluation", "ReportOptions": "rerank.htmlreport.build",
               "GenerateOptions": "rerank.generation", "generate": "rerank.generation"}
_API = tuple(dict.fromkeys([
    *_OWN_MODULE, "NBestList", "read_nbest", "write_nbest", "add_features", "FeatureContext", "read_references",
    "read_weights", "tune", "TuneResult", "TuneRun", "apply", "first_best", "oracle", "Oracle", "evaluate", "Evaluation",
    "Reranked", "report", "approximate_randomization", "paired_bootstrap", "make_metric", "from_ctranslate2",
    "from_generate"]))

__all__ = ["__version__", *_API]


def __getattr__(name: str):
    if name in _API:
        import importlib

        value = getattr(importlib.import_module(_OWN_MODULE.get(name, "rerank.api")), name)
        globals()[name] = value  # later look-ups skip this function
        return value
    raise AttributeError(f"module 'rerank' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
