"""Adding feature columns: `plan_features` (every check that needs no data), `add_features` (a list
in memory), and the job over an n-best file (`rerank features`): `add_features_file` reads the list, adds
the columns of the installed feature plug-ins (`rerank.add_features`) to the whole list or to one
shard of its sentences, and writes it; under torchrun its ranks split the model features' work
(rerank.distributed) and rank 0 alone writes and tells, the bytes one process writes.

`FeatureRun` holds what the job does besides the plug-ins' own options: the columns, the side
inputs (sources, references), the languages, the shard and its first output id, the torch device
and threads, the score cache, whether a column the list has may be replaced, and the output format.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any

from rerank.errors import InputError, require
from rerank.features import FeatureContext, shard_range
from rerank.formats.table import format_names
from rerank.io import output_lock, read_lines, read_references
from rerank.nbest import NBestList
from rerank.nbestfile import NBestFile, nbest_list, write_nbest_noted
from rerank.options import NAMES, NONNEGATIVE_INT, POSITIVE_INT, check_options, option, wait_option, with_fields
from rerank.outputs import check_outputs, nbest_outputs
from rerank.progress import Progress

if TYPE_CHECKING:
    from rerank.features import Feature

log = logging.getLogger(__name__)

PathLike = str | os.PathLike


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
        with installed[name].naming_flags():
            base = installed[name].make_options(given.get(name))
            result[name] = installed[name].make_options({**asdict(base), **chosen[name]}) if chosen[name] else base
    return result


def plan_features(names: str | Sequence[str] | None = None, *, options: Mapping[str, object] | None = None,
                  **keywords: Any) -> tuple[dict[str, list[str]], dict[str, Any]]:
    """({plug-in: its requested columns}, {plug-in: its checked Options}) of an `add_features` call,
    after every check that needs no data: unknown or repeated columns, bad or unknown options, the
    extras the plug-ins need. `add_features` starts with it; a caller that reads a big list first
    calls it before."""
    requested, plugin_options = _requested(names, options, keywords)
    require_extras(requested)
    return requested, plugin_options


def require_extras(requested: Mapping[str, Sequence[str]]) -> None:
    """A missing extra of a requested plug-in is said before any work (rerank.errors.require)."""
    from rerank import plugins

    installed = plugins.features()
    for plugin, columns in requested.items():
        require(installed[plugin].requires, f"the {', '.join(columns)} feature")


def _requested(names: str | Sequence[str] | None, options: Mapping[str, object] | None,
               keywords: Mapping[str, Any]) -> tuple[dict[str, list[str]], dict[str, Any]]:
    """`plan_features` but the extras: the columns by plug-in and the plug-ins' checked Options."""
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
    return requested, _feature_options(installed, list(requested), given, keywords)


def add_features(nbest: NBestList | NBestFile | PathLike, names: str | Sequence[str] | None = None, *,
                 context: FeatureContext | None = None, options: Mapping[str, object] | None = None,
                 replace: bool = False, source: str | None = None, **keywords: Any) -> NBestList:
    """The n-best list with the columns `names` (e.g. "mbr" or ["s_s", "mbr"]) of the installed
    feature plug-ins (rerank.plugins) added; `names=None`: the columns the plug-ins' options ask for
    (e.g. s_s when a model is given). `context`: the FeatureContext every plug-in gets (a shard of a
    larger list: its first sentence and the total), or its fields as keywords: `sources` (one source
    sentence per n-best sentence, a list or a file), `references` (reference files or streams, as
    `rerank.evaluate` takes them), `src_lang`, `tgt_lang`, `device` (cpu, cuda) and `threads` (torch
    CPU threads) for the model features, `progress`, `cache` (a score-cache file for users' models,
    rerank.score_cache; None caches nothing). `options`: {plug-in: its Options or a mapping}; any
    other keyword is a plug-in option by field name (mbr: utility, temperature, ...; `mbr_utility=`
    names the plug-in too). A column the list has already is an error unless `replace`."""
    from rerank import plugins
    from rerank.features import check_columns

    given = {k: keywords.pop(k) for k in list(keywords) if k in CONTEXT_FIELDS}
    if context is not None and given:
        raise InputError(f"give the context or its fields, not both (got context and {', '.join(given)})")
    requested, plugin_options = plan_features(names, options=options, **keywords)
    nbest, source = nbest_list(nbest, source, given.get("progress", False))
    installed = plugins.features()
    context = context if context is not None else _context(given, nbest.n_sentences, source)
    if context.sources is not None and len(context.sources) != nbest.n_sentences:
        raise InputError(f"{len(context.sources)} source sentences for {nbest.n_sentences} n-best sentences", source)
    for k, stream in enumerate(context.references or [], start=1):
        if len(stream) != nbest.n_sentences:
            raise InputError(f"reference {k} has {len(stream)} lines for {nbest.n_sentences} n-best sentences", source)
    for plugin, columns in requested.items():
        with installed[plugin].naming_flags():
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




CONTEXT_FIELDS = frozenset(f.name for f in fields(FeatureContext)) - {"nbest_path", "notes", "first_sentence",
                                                                     "total_sentences"}


def _context(given: dict, n_sentences: int, source: str) -> FeatureContext:
    """The FeatureContext of `add_features`' context keywords: a sources file read, the references
    read (`read_references`), the cache's path as a string."""
    sources, references, cache = given.pop("sources", None), given.pop("references", None), given.pop("cache", None)
    if isinstance(sources, (str, os.PathLike)):
        sources = read_lines(os.fspath(sources))
    if references is not None:
        references = read_references(references, n_sentences)
    return FeatureContext(nbest_path=source, sources=None if sources is None else list(sources), references=references,
                          total_sentences=n_sentences, cache=None if cache is None else os.fspath(cache), **given)


def _writable_formats() -> tuple[str, ...]:
    return format_names(writable=True)


@dataclass(frozen=True)
class FeatureRun:
    """What `add_features_file` does besides the plug-ins' options (see the module doc). `which`:
    the columns (None: those the plug-ins' options ask for); `src`: a file of one source sentence
    per n-best sentence; `refs`: reference files; `shard` "i/N": the i-th of N sentence ranges,
    written with ids from `id_offset`; `device` and `threads`: torch's, for the model features
    (under torchrun, cuda is each rank's own GPU); `score_cache`: the score cache of users' models
    (None: the default file, rerank.score_cache; `no_score_cache`: none); `replace`: overwrite a
    column the list has already; `wait`: if another process is writing the output, wait until it
    ends (default: refuse, naming it). A value that is wrong whatever the data is refused here."""

    which: tuple[str, ...] | None = option(None, "comma-separated columns to add", check=NAMES, metavar="WHICH",
                                           default_text="those the given options ask for, e.g. s_s for -m MODEL, "
                                           "plus s_i with --images")
    src: str | None = option(None, "source sentences, one per n-best sentence (raw text)",
                             default_text="none, which features needing them refuse")
    refs: tuple[str, ...] = option((), "reference file, one line per n-best sentence, for the features that need "
                                   "references (comet_ref; repeat for several)", flag=("-r", "--ref"), dest="refs",
                                   many=True, metavar="REF")
    src_lang: str = option("en", "source language")
    tgt_lang: str = option("de", "hypothesis language")
    shard: str | None = option(None, "process shard i of N (e.g. 1/4) of the sentences", default_text="all of them")
    id_offset: int = option(0, "id of the first output sentence", check=NONNEGATIVE_INT)
    device: str = option("cpu", "torch device of the model features", cli=False)
    threads: int = option(1, "torch CPU threads of the model features", check=POSITIVE_INT, cli=False)
    score_cache: str | None = option(None, "score cache of users' models (Hugging Face, CTranslate2, "
                                     "sentence-transformers), keyed by model digest and pair, so a re-run costs nothing",
                                     metavar="FILE", default_text="$RERANK_CACHE_DIR/scores.sqlite or "
                                     "~/.cache/mlmme-rerank/scores.sqlite")
    no_score_cache: bool = option(False, "neither read nor write the score cache")
    replace: bool = option(False, "overwrite columns the n-best has already, in place",
                           default_text="such a column is an error, nothing is written")
    to: str = option("moses", "output n-best format; plain writes OUT, OUT.ids and OUT.features.tsv", cli=False,
                     choices=_writable_formats)
    wait: bool = wait_option()

    def __post_init__(self) -> None:
        for name in ("which", "refs"):
            value = getattr(self, name)
            if isinstance(value, str):
                object.__setattr__(self, name, NAMES.convert(value) if name == "which" else (value,))
            elif isinstance(value, list):
                object.__setattr__(self, name, tuple(value))
        check_options(self, as_keywords=True)
        shard_range(1, self.shard)  # its syntax, before any file is read

    def cache_path(self) -> str | None:
        from rerank.score_cache import default_cache_path

        return None if self.no_score_cache else (self.score_cache or default_cache_path())


def _option_files(options: Mapping[str, Any]) -> list[str]:
    """The existing files the plug-ins' checked Options name (models, images, ...): no output may be one."""
    values: list = []
    for given in options.values():
        for value in asdict(given).values():
            values += value if isinstance(value, (list, tuple)) else [value]
    return [v for v in values if isinstance(v, str) and os.path.isfile(v)]


@dataclass
class FeaturesWritten:
    """What `add_features_file` did: the paths written (none on a torchrun rank but 0) and the
    sentences [first, end) of the list it covered (a shard's: `id_offset` = first keeps their ids)."""

    paths: list[str]
    first: int
    end: int


def add_features_file(nbest: NBestFile | PathLike, output: PathLike, run: FeatureRun | None = None, *,
                      options: Mapping[str, object] | None = None, progress: Progress = False,
                      **keywords: Any) -> FeaturesWritten:
    """Add the columns of `run.which` (FeatureRun; `keywords` replace its fields) from the installed
    feature plug-ins to the list of an n-best file, or to its shard `run.shard`, and write it to
    `output` (`FeaturesWritten`: the paths written, none on a torchrun rank but 0, and the
    sentences covered). `options`: {plug-in: its Options
    or a mapping}. Every check that needs no data (columns, options, extras, outputs) comes before
    the list is read, and so does the lock of the output (one writer per output, rerank.io.output_lock,
    held by the rank that writes; `run.wait`); a failure on any torchrun rank stops them all at
    their next exchange."""
    from rerank import distributed

    run = with_fields(FeatureRun, run, "feature run option", **keywords)
    source = NBestFile.of(nbest)
    with distributed.ranks(), _notes_on_main():
        return distributed.checked(lambda: _add_features_file(source, os.fspath(output), run, dict(options or {}),
                                                              progress))


@contextlib.contextmanager
def _notes_on_main() -> Iterator[None]:
    """The library's notes and warnings (logger `rerank`) on rank 0 only: the other ranks' are the same."""
    from rerank import distributed

    logger = logging.getLogger("rerank")
    level = logger.level
    if not distributed.is_main():
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _add_features_file(source: NBestFile, output: str, run: FeatureRun, options: dict,
                       progress: Progress) -> FeaturesWritten:
    from rerank import distributed

    main = distributed.is_main()
    requested, checked = _requested(run.which, options, {})  # names and options, before a big list is read
    outputs = nbest_outputs(output, run.to)
    check_outputs(outputs, [*source.inputs(), run.src, *run.refs, *_option_files(checked)])
    require_extras(requested)
    with output_lock(outputs if main else [], run.wait):
        return _features_written(source, output, run, options, progress)


def _features_written(source: NBestFile, output: str, run: FeatureRun, options: dict,
                      progress: Progress) -> FeaturesWritten:
    """`_add_features_file` from the reading of the list on, its checks done: the columns added and written."""
    from rerank import distributed

    main = distributed.is_main()
    nbest = source.read(progress if main else False)
    start, end = shard_range(nbest.n_sentences, run.shard)
    sources = None
    if run.src:
        sources = read_lines(run.src)
        if len(sources) != nbest.n_sentences:
            raise InputError(f"{len(sources)} source lines for {nbest.n_sentences} n-best sentences in {source.path}",
                             run.src)
        sources = sources[start:end]
    references = None
    if run.refs:
        references = [stream[start:end] for stream in read_references(list(run.refs), nbest.n_sentences, source.path)]
    part = nbest.select_sentences(range(start, end)) if (start, end) != (0, nbest.n_sentences) else nbest
    context = FeatureContext(nbest_path=source.path, sources=sources, references=references, src_lang=run.src_lang,
                             tgt_lang=run.tgt_lang, device=distributed.local_device(run.device), threads=run.threads,
                             first_sentence=start, total_sentences=nbest.n_sentences,
                             progress=progress if main else False, cache=run.cache_path())
    part = add_features(part, list(run.which) if run.which is not None else None, context=context, replace=run.replace,
                        source=source.path, options=options)
    paths = write_nbest_noted(part, output, run.to, first_id=run.id_offset) if main else []
    return FeaturesWritten(paths, start, end)
