"""The tuning job (`rerank.tune`, which `rerank tune` calls): an n-best list or file and its references
read, cut to the settings' sentences and prepared (rerank.tuning.prepare), the tuner plug-in checked
before any file is read (`tuner_for`), its outputs checked (`tune_outputs`), then the runs
(rerank.multirun.tune_runs) with the record a reused run file must match (the settings and the
digest of the inputs as tuned, `_digest`)."""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from rerank.errors import InputError, require
from rerank.io import output_lock, read_references
from rerank.metrics.registry import objective_signature
from rerank.multirun import TuneEvents, TuneResult, TuneSettings
from rerank.nbest import NBestList
from rerank.nbestfile import NBestFile, input_paths, nbest_list, reference_files, weight_vector_of

if TYPE_CHECKING:
    from rerank.tuning import Tuner

log = logging.getLogger("rerank.api")   # the API's logger, as before this module held the job

PathLike = str | os.PathLike


def _digest(nbest: NBestList, refs: list[list[str]]) -> str:
    """sha256 of a list and its references as tuned (what a reused run must have been tuned on): the
    same whether they came from files or from memory, and whatever cache or reading path gave them."""
    h = hashlib.sha256()
    for part in (nbest.offsets, nbest.features):
        h.update(np.ascontiguousarray(part).tobytes())
    for text in [*nbest.feature_names, *nbest.hyps, *(r for stream in refs for r in stream)]:
        h.update(text.encode("utf-8", "surrogatepass") + b"\0")
    return h.hexdigest()


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
    from rerank.metrics.registry import objective_metrics

    plugin = plugins.TUNERS.get(settings.tuner, option="tuner")()
    for name in objective_metrics(settings.metric):  # a column is any tuner's (its statistics are [value, 1])
        if name not in plugin.metrics:
            raise InputError(f"tuner {settings.tuner} optimises {', '.join(plugin.metrics)}, not {name}")
    plugin.make_options(settings.tuner_options)
    require(plugin.requires, f"the {settings.tuner} tuner")
    return plugin


def tune(nbest: NBestList | NBestFile | PathLike, refs: PathLike | Sequence[PathLike | Sequence[str]] | None = None,
         settings: TuneSettings | None = None, *, init: Mapping[str, float] | PathLike | None = None,
         output: PathLike | None = None, plot: PathLike | None = None, events: TuneEvents | None = None,
         record: Mapping | None = None, source: str | None = None, **keywords: Any) -> TuneResult:
    """Tune feature weights: `settings.runs` runs of the tuner plug-in `settings.tuner` (mira, mert,
    pro, ...) with seeds seed..seed+runs-1, keeping the run with the best tuning score in the
    metric's direction (the lowest TER), as `rerank tune`. `settings`: a TuneSettings; `keywords`
    replace its fields (runs=3, metric="ter", sentences="0-99") and set the tuner's options (mira:
    epochs, C, decay, model_bg, shuffle). `init`: start weights (default: all zero, as kbmira).

    `metric` (a TuneSettings field): bleu, chrf, chrf++, ter, meteor; `column:NAME`, the mean over the
    sentences of the n-best column NAME of the chosen hypotheses (higher is better unless NAME is in
    `lower_better`); or an interpolation `bleu=0.5,column:comet=0.5` (Moses' interpolated scorer:
    sum_k w_k x each component oriented by its direction, each on its own scale). The columns of the
    metric are the objective, not features: they get no weight. `refs` may be None when every
    component is a column (given ones are then not read).

    `output`: write each run's weights file when it ends and the kept run there (OUTPUT.runK.json for
    several runs), and reuse the run files an earlier call wrote from equal inputs (the list and
    references as tuned, whether read from files or given in memory) and equal settings
    (`TuneSettings.REUSE`), as `rerank tune -o` does (resume after an interruption); `plot`: a PNG of
    the tuning curves and weights. No output may be an input. One writer per output: the call holds
    the lock of `output` (its run files with it) and `plot` from before the inputs are read to its
    end (rerank.io.output_lock); another process holding one is an InputError naming it, unless the
    keyword `wait=True` (no TuneSettings field: it is not a setting of the tuning and no run file
    records it), which waits until it is free. `record`: more fields for every run
    file's meta (the command line's); `source`: the list's name in messages and in the run files
    (default: the file it was read from). `events`: a TuneEvents (progress, on_start, on_run, verbose).
    """
    from rerank.metrics.registry import objective_metrics
    from rerank.multirun import tune_runs
    from rerank.outputs import check_outputs
    from rerank.selection import check_selection, run_selection, selection_summary
    from rerank.tuning import normalize, prepare

    wait = keywords.pop("wait", False)   # checked by output_lock
    settings = TuneSettings.make(settings, **keywords)
    events = events or TuneEvents()
    plugin = tuner_for(settings)  # before any file is read
    plan = check_selection(settings, plugin)
    needs_refs = bool(objective_metrics(settings.metric))
    if refs is None and needs_refs:
        raise InputError(f"metric {settings.metric} needs references (refs); only column:NAME components need none",
                         option="metric", mentions=("refs",))
    ref_paths = reference_files(refs)   # given ones are read, checked and recorded, a column objective's too
    if output is not None or plot is not None:
        writes, stale = tune_outputs(output, settings.runs) if output is not None else ([], [])
        check_outputs([*writes, None if plot is None else os.fspath(plot), *stale], input_paths(nbest, *ref_paths, init))
    with output_lock([output, plot], wait):   # each a file of its own: held before any input is read
        text = {"post_process": nbest.post_process, "unescape": nbest.unescape} if isinstance(nbest, NBestFile) else None
        whole, source = nbest_list(nbest, source, events.progress)
        streams = read_references(refs, whole.n_sentences, source) if refs is not None else None
        tuned, streams = settings.cut(whole, streams)
        data = prepare(tuned, streams if needs_refs else None, metric=settings.metric, tokenize=settings.tokenize,
                       lowercase=settings.lowercase, tune=settings.tune_features or None, fix=settings.fix or None, lang=settings.lang,
                       lower_better=settings.lower_better, progress=events.progress, source=source)
        w0 = None if init is None else weight_vector_of(init, data.nbest.feature_names)
        normalize(np.zeros(len(data.feature_names)), settings.normalize, data.tuned)  # refuses to rescale fixed features
        if events.on_start is not None:
            events.on_start(data)
        selection = None
        if plan.active:
            say = events.verbose if events.verbose is not None else log.info
            data, chosen, selection = run_selection(data, plugin, plan, settings, w0, say, progress=events.progress)
            settings = TuneSettings.make(settings, tuner_options=chosen)
            log.info(selection_summary(selection))
        meta = {"nbest": source if source == "n-best list" else os.path.abspath(source),
                "references": [os.path.abspath(p) for p in ref_paths] or None, "metric": settings.metric,
                "tokenize": settings.tokenize, "lowercase": settings.lowercase,
                "signature": objective_signature(settings.metric, settings.lower_better, settings.tokenize,
                                                 settings.lowercase, settings.lang, len(streams or [])),
                "lower_better": list(settings.lower_better), "objective": data.metric.components or None,
                "objective_columns": list(data.metric.columns),
                "init": os.fspath(init) if isinstance(init, (str, os.PathLike)) else None,
                "sentences": settings.sentences,
                **({"nbest_text": text} if text is not None else {}),
                **({"selection": selection} if selection is not None else {}), **(record or {})}
        result = tune_runs(data, plugin, settings, w0=w0, output=None if output is None else os.fspath(output),
                           inputs={"n-best and references": _digest(tuned, streams or [])}, meta=meta,
                           progress=events.progress, verbose=events.verbose if events.verbose is not None else log.info,
                           on_run=events.on_run)
        if plot is not None:
            result.plot(os.fspath(plot))
        return result
