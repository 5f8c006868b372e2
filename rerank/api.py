"""The Python API of mlmme-rerank: n-best list to significance table in a few calls.

Every name here is also `rerank.NAME` (imported on first use, so `import rerank` stays fast):

    import rerank
    nbest = rerank.read_nbest("dev.nbest")
    tuned = rerank.tune(nbest, ["dev.ref"], runs=3, epochs=10)
    test = rerank.read_nbest("test.nbest")
    ev = rerank.evaluate(["test.ref"], rerank.first_best(test), {"reranked": rerank.apply(test, tuned.weights)})
    print(ev.to_markdown(), ev.p_value("reranked", "bleu"))

Conventions: `refs` is one reference file path, or a list with one item per reference, each a file
path or a list of strings (one per sentence); an n-best argument is an `NBestList` or a file path;
weights are a mapping {feature name: value} or a weights file path. Bad input raises
`rerank.errors.InputError` (a `ValueError` would name an argument); notes and warnings go to the
`logging` logger `rerank.api`, nothing is printed. See docs/api.md.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from rerank.errors import InputError, require
from rerank.features import FeatureContext
from rerank.formats.decoders import from_ctranslate2, from_generate
from rerank.evaluation import Cell, EvalOptions, ResultTable
from rerank.io import read_lines, read_references
from rerank.metrics import make_metric
from rerank.multirun import TuneResult, TuneRun, TuneSettings
from rerank.metrics.registry import objective_signature
from rerank.nbest import NBestList
from rerank.oracles import Oracle
from rerank.significance import approximate_randomization, paired_bootstrap

if TYPE_CHECKING:
    from rerank.features import Feature
    from rerank.progress import Progress
    from rerank.tuning import Tuner, TuningData

log = logging.getLogger(__name__)

__all__ = ["NBestList", "read_nbest", "write_nbest", "add_features", "read_references", "read_weights", "tune",
           "TuneResult", "TuneRun", "TuneSettings", "apply", "first_best", "oracle", "Oracle", "evaluate", "Evaluation",
           "EvalOptions", "Reranked", "FeatureContext",
           "approximate_randomization", "paired_bootstrap", "make_metric", "from_ctranslate2", "from_generate"]

PathLike = str | os.PathLike


# ---- n-best lists -------------------------------------------------------------------------------

def read_nbest(path: PathLike, format: str | None = None, *, strict: bool = False, cache: bool | str | None = None,
               post_process: str | None = None, unescape: str | None = None, **options: Any) -> NBestList:
    """Read an n-best list in any format of the table (docs/formats.md: moses, joshua, marian,
    fairseq, sockeye, opennmt, jsonl, plain and plug-ins; gzip'd or not); `format=None` detects it.
    `strict`: a feature missing on some line is an error (default: read as 0, logged).
    `post_process` ('sentencepiece', 'subword_nmt') and `unescape` ('html') undo subword
    segmentation and Moses escaping. `options`, the formats' reading options: plain lists' ids,
    sizes, features, feature_names; fairseq_field; OpenNMT's nbest_size or src."""
    from rerank.formats import ReadReport, read_nbest as read

    path, report = os.fspath(path), ReadReport()
    try:
        return read(path, fmt=format, strict=strict, report=report, cache=cache, post_process=post_process,
                    unescape=unescape, **options)
    finally:
        for note in report.notes:
            log.warning("%s: %s", path, note)


def write_nbest(nbest: NBestList, path: PathLike, format: str | None = None, *, first_id: int = 0) -> list[str]:
    """Write an n-best list atomically (format default: moses); returns the paths written (plain
    writes PATH, PATH.ids and PATH.features.tsv). What the format cannot hold is logged."""
    from rerank.formats import write_losses, write_nbest as write

    path, format = os.fspath(path), format or "moses"
    for note in write_losses(nbest, format):
        log.warning("%s: %s", path, note)
    return write(nbest, path, format, first_id=first_id)


def _nbest(nbest: NBestList | PathLike, source: str | None = None) -> tuple[NBestList, str]:
    """(the list, its name for messages: `source`, else its path) of an NBestList or a path; an empty
    list is an error."""
    if isinstance(nbest, NBestList):
        source = source or "n-best list"
    elif isinstance(nbest, (str, os.PathLike)):
        source, nbest = source or os.fspath(nbest), read_nbest(nbest)
    else:
        raise InputError(f"expected an NBestList or an n-best file path, not {type(nbest).__name__}")
    if nbest.n_hyps == 0:
        raise InputError("no hypotheses: the n-best list is empty", source)
    return nbest, source


def first_best(nbest: NBestList | PathLike) -> list[str]:
    """The first hypothesis of every list (the decoder's 1-best)."""
    nbest, _ = _nbest(nbest)
    return [nbest.hyps[int(i)] for i in nbest.offsets[:-1]]


# ---- features ----------------------------------------------------------------------------------------

def _feature_options(installed: Mapping[str, type[Feature]], plugins: Sequence[str], given: Mapping[str, object],
                     keywords: Mapping[str, object]) -> dict:
    """{plug-in: its validated Options}: `given` ({plug-in: Options or mapping}), then the keywords:
    one that is a field of a plug-in's `Options` goes to it (`utility=`), and one prefixed with the
    plug-in's name to it alone (`mbr_utility=`); any other keyword is an InputError naming the fields."""
    from dataclasses import fields

    known = {name: {f.name for f in fields(installed[name].Options)} for name in plugins}
    chosen: dict[str, dict] = {name: {} for name in plugins}
    for key, value in keywords.items():
        targets = [(name, key[len(name) + 1:]) for name in plugins if key.startswith(name + "_")
                   and key[len(name) + 1:] in known[name]] or [(name, key) for name in plugins if key in known[name]]
        if not targets:
            every = sorted({f for names in known.values() for f in names})
            raise InputError(f"unknown feature option {key!r} (options of {', '.join(plugins)}: {', '.join(every) or 'none'})")
        for name, field_name in targets:
            chosen[name][field_name] = value
    result = {}
    for name in plugins:
        base = installed[name].make_options(given.get(name))
        result[name] = installed[name].make_options({**asdict(base), **chosen[name]}) if chosen[name] else base
    return result


def plan_features(names: str | Sequence[str] | None = None, *, options: Mapping[str, object] | None = None,
                  **keywords: Any) -> tuple[dict[str, list[str]], dict[str, Any]]:
    """({plug-in: its requested columns}, {plug-in: its checked Options}) of an `add_features` call,
    after every check that needs no data: unknown or repeated columns, bad or unknown options, the
    extras the plug-ins need. `add_features` starts with it; a caller that reads a big list first
    calls it before."""
    from rerank import plugins
    from rerank.features import column_owners

    installed = plugins.features()
    owners = column_owners(installed)
    given = dict(options or {})
    if names is None:
        defaults = _feature_options(installed, list(installed), given, keywords)
        which = [c for name, cls in installed.items() for c in cls().default_columns(defaults[name])]
        if not which:
            raise InputError(f"no feature requested: name the columns (installed: {', '.join(owners) or 'none'})")
    else:
        which = [n.strip() for n in names.split(",") if n.strip()] if isinstance(names, str) else list(names)
    unknown = [n for n in which if n not in owners]
    if unknown or not which:
        raise InputError(f"unknown feature {(unknown or [''])[0]!r} (installed: {', '.join(owners) or 'none'})")
    twice = [n for n in which if which.count(n) > 1]
    if twice:
        raise InputError(f"the feature {twice[0]!r} is asked for twice")
    requested: dict[str, list[str]] = {}
    for column in which:
        requested.setdefault(owners[column], []).append(column)
    plugin_options = _feature_options(installed, list(requested), given, keywords)
    for plugin, columns in requested.items():  # a missing extra is said before any work
        require(installed[plugin].requires, f"the {', '.join(columns)} feature")
    return requested, plugin_options


def add_features(nbest: NBestList | PathLike, names: str | Sequence[str] | None = None, *,
                 sources: Sequence[str] | PathLike | None = None,
                 references: Sequence[Sequence[str]] | Sequence[PathLike] | PathLike | None = None,
                 src_lang: str = "en", tgt_lang: str = "de", device: str = "cpu", threads: int | None = None,
                 replace: bool = False, progress: Progress = False,
                 cache: str | PathLike | None = None, context: FeatureContext | None = None,
                 options: Mapping[str, object] | None = None, source: str | None = None, **keywords: Any) -> NBestList:
    """The n-best list with the columns `names` (e.g. "mbr" or ["s_s", "mbr"]) of the installed
    feature plug-ins (rerank.plugins) added; `names=None`: the columns the plug-ins' options ask for
    (e.g. s_s when a model is given). `sources`: one source sentence per n-best sentence (a list or
    a file), and `references` (reference files or streams, as `rerank.evaluate` takes them), for
    the features that need them; `device` (cpu, cuda) and `threads` (torch CPU threads)
    for the model features; `cache`: a score-cache file for users' models (rerank.score_cache; None
    caches nothing). `context`: a whole FeatureContext instead of those keywords (a shard of a
    larger list: its first sentence and the total). `options`: {plug-in: its Options or a mapping};
    `keywords`: plug-in options by field name (mbr: utility, temperature, ...; `mbr_utility=` names
    the plug-in too). A column the list has already is an error unless `replace`."""
    from rerank import plugins
    from rerank.features import check_columns

    requested, plugin_options = plan_features(names, options=options, **keywords)
    nbest, source = _nbest(nbest, source)
    installed = plugins.features()
    if context is None:
        if isinstance(sources, (str, os.PathLike)):
            sources = read_lines(os.fspath(sources))
        if references is not None:
            references = read_references(references, nbest.n_sentences)
        context = FeatureContext(nbest_path=source, sources=None if sources is None else list(sources),
                                 references=references,
                                 src_lang=src_lang, tgt_lang=tgt_lang, device=device, threads=threads,
                                 total_sentences=nbest.n_sentences, progress=progress,
                                 cache=None if cache is None else os.fspath(cache))
    if context.sources is not None and len(context.sources) != nbest.n_sentences:
        raise InputError(f"{len(context.sources)} source sentences for {nbest.n_sentences} n-best sentences", source)
    for k, stream in enumerate(context.references or [], start=1):
        if len(stream) != nbest.n_sentences:
            raise InputError(f"reference {k} has {len(stream)} lines for {nbest.n_sentences} n-best sentences", source)
    for plugin, columns in requested.items():
        values = installed[plugin]().compute(nbest, columns, context, plugin_options[plugin])
        check_columns(values, nbest.n_hyps, plugin)
        for column, column_values in values.items():
            problem = nbest.feature_clash(column, replace)
            if problem:
                overwrite = column in nbest.feature_names
                raise InputError(problem + (" (replace overwrites it)" if overwrite else ""), source,
                                 option="replace" if overwrite else None)
            nbest = nbest.with_feature(column, column_values, replace=replace)
    for note in context.notes:
        log.warning("note: %s", note)
    return nbest


# ---- weights, tuning, reranking --------------------------------------------------------------------

def read_weights(weights: Mapping[str, float] | PathLike) -> dict[str, float]:
    """Weights by feature name: a mapping as is, or read from a weights file (JSON, Moses lines, ...)."""
    from rerank.weights import read_weights as read

    if isinstance(weights, (str, os.PathLike)):
        return read(os.fspath(weights))
    if isinstance(weights, Mapping):
        return {str(k): float(v) for k, v in weights.items()}
    raise InputError(f"weights: expected a mapping of feature name to weight or a file path, not {type(weights).__name__}")


def _weight_vector(weights: Mapping[str, float] | PathLike, nbest: NBestList) -> np.ndarray:
    from rerank.weights import tuned_toward, weight_vector

    if isinstance(weights, (str, os.PathLike)):
        source = os.fspath(weights)
        objective = tuned_toward(source)
    else:
        source, objective = "weights", []
    return weight_vector(read_weights(weights), nbest.feature_names, source=source, warn=log.warning,
                         objective=objective)


def apply(nbest: NBestList | PathLike, weights: Mapping[str, float] | PathLike) -> list[str]:
    """The 1-best of every list under w·f (ties: the earlier hypothesis), as `rerank apply` writes it.
    A weight for a feature the list lacks is an error; a feature without weight gets 0 (logged)."""
    from rerank.weights import best_rows

    nbest, _ = _nbest(nbest)
    return [nbest.hyps[int(r)] for r in best_rows(nbest, _weight_vector(weights, nbest))]


def _digest(nbest: NBestList, refs: list[list[str]]) -> str:
    """sha256 of a list and its references as tuned (what a reused run must have been tuned on): the
    same whether they came from files or from memory, and whatever cache or reading path gave them."""
    h = hashlib.sha256()
    for part in (nbest.offsets, nbest.features):
        h.update(np.ascontiguousarray(part).tobytes())
    for text in [*nbest.feature_names, *nbest.hyps, *(r for stream in refs for r in stream)]:
        h.update(text.encode("utf-8", "surrogatepass") + b"\0")
    return h.hexdigest()


def _reference_files(refs: object) -> list[str]:
    """The files among the references given as `read_references` takes them (paths and lists)."""
    items = [refs] if isinstance(refs, (str, os.PathLike)) else refs if isinstance(refs, Sequence) else []
    return [os.fspath(r) for r in items if isinstance(r, (str, os.PathLike))]


def tune_outputs(output: PathLike, runs: int) -> tuple[list[str], list[str]]:
    """(the files `tune(..., output=output)` with `runs` runs writes, the run files of an earlier
    tuning it removes): what a caller checks before the work starts."""
    from rerank.multirun import run_paths, stale_runs

    output = os.fspath(output)
    return [output, *(run_paths(output, runs) if runs > 1 else [])], stale_runs(output, runs)


def tuner_for(settings: TuneSettings) -> Tuner:
    """The installed tuner plug-in of `settings`, after checking what needs no data: that it is
    installed, optimises the metric, takes the options given, and finds the extras it needs."""
    from rerank import plugins

    installed = plugins.tuners()
    if settings.tuner not in installed:
        raise InputError(f"unknown tuner {settings.tuner!r} (installed: {', '.join(installed) or 'none'})")
    plugin = installed[settings.tuner]()
    from rerank.metrics.registry import objective_metrics

    for name in objective_metrics(settings.metric):  # a column is any tuner's (its statistics are [value, 1])
        if name not in plugin.metrics:
            raise InputError(f"tuner {settings.tuner} optimises {', '.join(plugin.metrics)}, not {name}")
    plugin.make_options(settings.tuner_options)
    require(plugin.requires, f"the {settings.tuner} tuner")
    return plugin


def tune(nbest: NBestList | PathLike, refs: PathLike | Sequence[PathLike | Sequence[str]] | None = None,
         settings: TuneSettings | None = None, *,
         init: Mapping[str, float] | PathLike | None = None, output: PathLike | None = None, progress: Progress = False,
         verbose: Callable[[str], None] | None = None, on_start: Callable[[TuningData], None] | None = None,
         on_run: Callable[[TuneRun], None] | None = None, record: Mapping | None = None, source: str | None = None,
         **keywords: Any) -> TuneResult:
    """Tune feature weights: `settings.runs` runs of the tuner plug-in `settings.tuner` (mira, mert,
    pro, ...) with seeds seed..seed+runs-1, keeping the run with the best tuning score in the
    metric's direction (the lowest TER). `settings`: a TuneSettings; `keywords` replace its fields
    (runs=3, metric="ter") and set the tuner's options (mira: epochs, C, decay, model_bg, shuffle).
    `init`: start weights (default: all zero, as kbmira).

    `metric` (a TuneSettings field): bleu, chrf, chrf++, ter, meteor; `column:NAME`, the mean over the
    sentences of the n-best column NAME of the chosen hypotheses (higher is better unless NAME is in
    `lower_better`); or an interpolation `bleu=0.5,column:comet=0.5` (Moses' interpolated scorer:
    sum_k w_k x each component oriented by its direction, each on its own scale). The columns of the
    metric are the objective, not features: they get no weight. `refs` may be None when every
    component is a column.

    `output`: write each run's weights file when it ends and the kept run there (OUTPUT.runK.json for
    several runs), and reuse the run files an earlier call wrote from equal inputs (the list and
    references as tuned, whether read from files or given in memory) and equal settings
    (`TuneSettings.REUSE`), as `rerank tune -o` does (resume after an interruption). `record`: more
    fields for every run file's meta (the command line's); `source`: the list's name in messages and
    in the run files (the file it was read from). `on_start(data)` is called with the
    prepared tuning data before the first run, `on_run(run)` as each run ends or is reused,
    `verbose(line)` with the tuner's per-epoch lines.
    """
    from rerank.multirun import tune_runs
    from rerank.tuning import normalize, prepare

    settings = TuneSettings.make(settings, **keywords)
    plugin = tuner_for(settings)  # before any file is read
    nbest, source = _nbest(nbest, source)
    ref_paths = _reference_files(refs)
    from rerank.metrics.registry import objective_metrics

    if refs is None and objective_metrics(settings.metric):
        raise InputError(f"refs are needed for the metric {settings.metric!r} (only column:NAME needs none)",
                         option="refs")
    refs = [] if refs is None else read_references(refs, nbest.n_sentences, source)
    data = prepare(nbest, refs if objective_metrics(settings.metric) else None, metric=settings.metric,
                   tokenize=settings.tokenize, lowercase=settings.lowercase,
                   tune=settings.tune_features or None, fix=settings.fix or None, lang=settings.lang,
                   lower_better=settings.lower_better, progress=progress, source=source)
    w0 = None if init is None else _weight_vector(init, data.nbest)
    normalize(np.zeros(len(data.feature_names)), settings.normalize, data.tuned)  # refuses to rescale fixed features
    if on_start is not None:
        on_start(data)
    meta = {"nbest": source if source == "n-best list" else os.path.abspath(source),
            "references": [os.path.abspath(p) for p in ref_paths] or None, "metric": settings.metric,
            "tokenize": settings.tokenize, "lowercase": settings.lowercase,
            "signature": objective_signature(settings.metric, settings.lower_better, settings.tokenize,
                                             settings.lowercase, settings.lang, len(refs)),
            "lower_better": list(settings.lower_better), "objective": data.metric.components or None,
            "objective_columns": list(data.metric.columns),
            "init": os.fspath(init) if isinstance(init, (str, os.PathLike)) else None, **(record or {})}
    return tune_runs(data, plugin, settings, w0=w0, output=None if output is None else os.fspath(output),
                     inputs={"n-best and references": _digest(nbest, refs)}, meta=meta, progress=progress,
                     verbose=verbose if verbose is not None else log.info, on_run=on_run)


def oracle(nbest: NBestList | PathLike, refs: PathLike | Sequence[PathLike | Sequence[str]] | None = None, *,
           metric: str = "bleu", tokenize: str = "13a", lowercase: bool = False, lang: str = "en",
           ter_case_sensitive: bool = False, lower_better: bool = False, progress: Progress = False) -> Oracle:
    """Each list's best hypothesis by a sentence-level score in the metric's direction (ties: the
    earlier hypothesis), and the corpus score of the picks and of the first hypotheses, as `rerank oracle`.

    `metric`: bleu (the default), chrf, chrf++, ter, meteor, a plug-in metric, or `column:NAME`
    (`rerank.metrics.registry.parse_objective`).
    - bleu: sentence BLEU+1 picks (Lin & Och 2004), sacrebleu's corpus BLEU;
    - chrf, chrf++, ter, meteor: the metric of each hypothesis alone against its references
      (`score_from_stats` of its statistics row), the highest (TER: the lowest); the corpus score is
      the metric of the summed statistics of the picks, as `rerank eval` computes it. `tokenize` is
      BLEU's, `lowercase` BLEU's and chrF's, `lang` METEOR's, `ter_case_sensitive` TER's;
    - `column:NAME`: the list's own column NAME (a COMET score joined with `rerank add-feature`), the
      highest (`lower_better`: the lowest); the corpus score is the mean over the sentences of the
      picked values. It needs no `refs` (given ones are not read); every other metric does.
    An unknown metric or column is an InputError with `option` "metric". The implementation and the
    scores are rerank.oracles' (`oracle`, `oracle_scores`; the report's oracle curve takes them too)."""
    from rerank import oracles

    oracles.check_oracle_metric(metric, refs, lower_better, tokenize=tokenize, lowercase=lowercase)  # before reading
    nbest, source = _nbest(nbest)
    return oracles.oracle(nbest, refs, metric=metric, tokenize=tokenize, lowercase=lowercase, lang=lang,
                          ter_case_sensitive=ter_case_sensitive, lower_better=lower_better, progress=progress,
                          source=source)


# ---- evaluation ------------------------------------------------------------------------------------

@dataclass
class Reranked:
    """A system given as an n-best list and weights: the 1-best of every list under the weights (one
    run), as `rerank apply` writes it. `evaluate` keeps the list and its model scores for the
    report's oracle curve. `source`: the list's name (the file it was read from)."""

    nbest: NBestList | PathLike
    weights: Mapping[str, float] | PathLike
    source: str | None = None


def _files_of(output: object) -> list[str]:
    """The files an output argument of `evaluate` names (for messages)."""
    if isinstance(output, Reranked):
        if output.source:
            return [output.source]
        return [os.fspath(output.nbest)] if isinstance(output.nbest, (str, os.PathLike)) else []
    if isinstance(output, (str, os.PathLike)):
        return [os.fspath(output)]
    return [os.fspath(x) for x in output if isinstance(x, os.PathLike)] if isinstance(output, Sequence) else []


def _run_file(path: PathLike, n: int, refs_name: str) -> list[str]:
    """The hypotheses of one run file, which must have one line per reference line."""
    path = os.fspath(path)
    lines = read_lines(path)
    if not lines:
        raise InputError("empty file", path)
    if len(lines) != n:
        raise InputError(f"has {len(lines)} lines but the references have {n} ({refs_name})", path)
    return lines


def _runs(value: object, what: str, n: int, refs_name: str) -> tuple[list[list[str]], list[str]]:
    """(one system's runs, the files read): a file path or a list of strings is one run; a list of
    runs (each a list of strings or a file path) is several. A file must have `n` lines."""
    if isinstance(value, (str, os.PathLike)):
        return [_run_file(value, n, refs_name)], [os.fspath(value)]
    if isinstance(value, NBestList):
        raise InputError(f"{what}: an n-best list is not a system output; give rerank.Reranked(nbest, weights), "
                         "rerank.apply(nbest, weights) or rerank.first_best(nbest)")
    items = list(value) if isinstance(value, Sequence) else None
    if not items:
        raise InputError(f"{what}: expected a list of hypotheses (one run), a list of runs or a file path"
                         + ("" if items is None else ", got an empty list"))
    if all(isinstance(x, str) for x in items):
        return [items], []
    runs, files = [], []
    for k, run in enumerate(items, start=1):
        if isinstance(run, (str, os.PathLike)):
            runs.append(_run_file(run, n, refs_name))
            files.append(os.fspath(run))
        elif isinstance(run, Sequence) and all(isinstance(x, str) for x in run):
            runs.append(list(run))
        else:
            raise InputError(f"{what}: run {k} is neither a list of strings nor a file path")
    return runs, files


@dataclass
class Evaluation:
    """The scores and significance tests of `evaluate`: the ResultTable of rerank.evaluation (with
    its statistics), the references and every system's runs (baseline first)."""

    table: ResultTable
    refs: list
    outputs: dict                                       # {system: [run hypotheses, ...]}
    sources: dict = field(default_factory=dict)         # {system: files read}, when read from files
    nbests: dict = field(default_factory=dict)          # {system: (NBestList, model scores)}: the report's oracle curve
    tokenize: str = "13a"                               # BLEU's tokeniser and case (the report's sentence scores)
    lowercase: bool = False

    @property
    def systems(self) -> list[str]:
        return list(self.table.systems)

    @property
    def metrics(self) -> list[str]:
        return list(self.table.metrics)

    @property
    def baseline(self) -> str:
        return self.table.baseline

    def cell(self, system: str, metric: str) -> Cell:
        """The table cell (score, s_sel, s_opt, p, bootstrap interval, marks) of a system and metric."""
        try:
            return self.table.cells[(system, metric)]
        except KeyError:
            raise KeyError(f"no cell ({system!r}, {metric!r}): systems {', '.join(self.systems)}; metrics "
                           f"{', '.join(self.metrics)}") from None

    def score(self, system: str, metric: str) -> float:
        """The system's score (the mean over its runs)."""
        return self.cell(system, metric).score

    def p_value(self, system: str, metric: str) -> float | None:
        """Approximate randomisation p-value against the baseline (Holm-adjusted with holm=True; None for
        the baseline itself)."""
        return self.cell(system, metric).p

    def to_text(self) -> str:
        return self.table.to_text()

    def to_markdown(self) -> str:
        return self.table.to_markdown()

    def to_latex(self) -> str:
        return self.table.to_latex()

    def to_csv(self) -> str:
        return self.table.to_csv()

    def to_json(self) -> str:
        return self.table.to_json()

    def __str__(self) -> str:
        return self.table.to_text()

    def to_html(self, *, title: str = "rerank report", examples: int = 30, sentence_metric: str | None = None,
                oracle_metric: str = "bleu", oracle_lower_better: bool = False, **options: Any) -> str:
        """The self-contained HTML report of `rerank report` (rerank.htmlreport), as a string;
        `oracle_metric`: what the oracle curve of the `Reranked` systems picks and scores by, as
        `oracle`'s `metric` (bleu, chrf, chrf++, ter, meteor, `column:NAME`; `oracle_lower_better`
        for a column); `options`: build_report's (tokenize, lowercase, frequencies, length_edges,
        oracle_options, ...)."""
        from rerank.htmlreport import build_report

        options.setdefault("tokenize", self.tokenize)
        options.setdefault("lowercase", self.lowercase)
        return build_report(self.table, self.refs, self.outputs, nbests=self.nbests, examples=examples,
                            sentence_metric=sentence_metric, title=title, oracle_metric=oracle_metric,
                            oracle_lower_better=oracle_lower_better, **options)

    def plot(self, path: PathLike) -> None:
        """PNG of each system's improvement over the baseline with its bootstrap 95% interval."""
        from rerank.evaluation import plot_deltas

        plot_deltas(self.table, os.fspath(path))


def evaluate(refs: PathLike | Sequence[PathLike | Sequence[str]], baseline: object,
             systems: Mapping[str, object] | Sequence[tuple[str, object]],
             options: EvalOptions | None = None, *,
             baseline_name: str = "baseline", progress: Progress = False, record: Mapping | None = None,
             **keywords: Any) -> Evaluation:
    """Score `systems` and `baseline` against `refs` with MultEval-style significance tests, as `rerank eval`.

    `baseline` and each output of `systems` ({name: output}, or (name, output) pairs, where two
    systems of one name are an error): a list of strings (one run), a list of
    runs (each a list of strings or a file path), a file path, or a `Reranked(nbest, weights)`;
    `baseline` may also be a (name, output) pair. `options`: an EvalOptions (metrics, ar,
    bootstrap, seed, lang, tokenize, second_baseline, holm, ...); `keywords` replace its fields
    (metrics=["bleu"], ar=1000). The table's config records the settings, the files read (per
    system and the references) and `record` (more fields, the command line's).
    """
    from rerank.evaluation import evaluate_systems
    from rerank.weights import best_rows, model_scores

    options = EvalOptions.make(options, **keywords)
    if isinstance(baseline, tuple) and len(baseline) == 2 and isinstance(baseline[0], str):
        baseline_name, baseline = baseline
    ref_files = _reference_files(refs)
    refs = read_references(refs)
    refs_name = ref_files[0] if ref_files else "reference 1"
    outputs: dict[str, list[list[str]]] = {}
    sources: dict[str, list[str]] = {}
    nbests: dict[str, tuple] = {}
    pairs = systems.items() if isinstance(systems, Mapping) else systems
    for k, (name, value) in enumerate([(baseline_name, baseline), *((str(k), v) for k, v in pairs)]):
        what = f"{'baseline' if k == 0 else 'system'} {name!r}"
        if name in outputs:
            raise InputError(f"two systems are named {name!r}", files[0] if (files := _files_of(value)) else None)
        if isinstance(value, Reranked):
            nbest, source = _nbest(value.nbest, value.source)
            if nbest.n_sentences != len(refs[0]):
                raise InputError(f"the n-best list has {nbest.n_sentences} sentences but the references have "
                                 f"{len(refs[0])} ({refs_name})", source)
            w = _weight_vector(value.weights, nbest)
            outputs[name] = [[nbest.hyps[int(r)] for r in best_rows(nbest, w)]]
            nbests[name] = (nbest, model_scores(nbest, w))
            files = [source, *([os.fspath(value.weights)] if isinstance(value.weights, (str, os.PathLike)) else [])]
        else:
            outputs[name], files = _runs(value, what, len(refs[0]), refs_name)
        if files:
            sources[name] = files
    counts = {name: len(runs) for name, runs in outputs.items()}
    if len(set(counts.values()) - {1}) > 1:  # a run file missing? say so; each pair is tested on its own runs
        log.warning("note: the systems have different run counts (" + ", ".join(f"{k} {v}" for k, v in counts.items())
                    + "); each comparison uses its two systems' own runs")
    runs = dict(outputs)
    base_runs = runs.pop(baseline_name)
    table = evaluate_systems(refs, base_runs, runs, options, baseline_name=baseline_name, progress=progress)
    if sources:
        table.config["sources"] = sources
    if ref_files:
        table.config["references"] = ref_files
    table.config.update(record or {})
    return Evaluation(table, refs, outputs, sources=sources, nbests=nbests, tokenize=options.tokenize,
                      lowercase=options.lowercase)
