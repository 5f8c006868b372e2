"""An n-best file and how to read it (`NBestFile`), and the jobs over n-best files that stream:
converting (`convert_file`) and reranking with weights (`apply_file`).

`NBestFile` is what every public function that reads an n-best list accepts besides a path and an
`NBestList`: the path with the format, strict reading, the n-best cache, the text's
post-processing and the formats' reading options (rerank.formats.reading_options). Reading it says
what the reader noticed through the `rerank` logger (`note: PATH: ...`, which the command line shows
on stderr as it is).

A regular Moses/Joshua file whose every output is Moses/Joshua (the formats whose record says
`streamed`) is read in two passes, a block of sentences at a time (rerank.formats.moses.stream),
instead of whole: the outputs are the bytes the whole-list path writes, with the same notes, in
memory bounded by the largest block. Anything else (standard input, another format in or out, the
n-best cache, post-processed text, an input the bulk reader hands over to the line reader) is read
whole.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

import numpy as np

from rerank.errors import InputError
from rerank.io import atomic_write, output_group, output_lock, read_references, reading_progress
from rerank.nbest import NBestList, segment_argmax
from rerank.options import check_options, option, wait_option, with_fields
from rerank.outputs import check_outputs, nbest_outputs
from rerank.progress import Progress

log = logging.getLogger(__name__)

PathLike = str | os.PathLike


@dataclass(frozen=True)
class NBestFile:
    """An n-best file (`path`, "-" for standard input) and how to read it: `format` (None: detected),
    `strict` (a feature missing on some line is an error, else read as 0 and noted), `cache` (the
    binary cache of parsed lists: None = on when RERANK_CACHE_DIR is set, True, False, or its
    folder), `post_process` ('sentencepiece', 'subword_nmt') and `unescape` ('html') of the
    hypotheses, and `options`, the formats' reading options by keyword (plain's ids, sizes,
    features, feature_names; fairseq_field; OpenNMT's nbest_size and src). An option left None is
    not given."""

    path: str
    format: str | None = None
    strict: bool = False
    cache: bool | str | None = None
    post_process: str | None = None
    unescape: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", os.fspath(self.path))
        object.__setattr__(self, "options", {k: v for k, v in dict(self.options).items() if v is not None})

    @classmethod
    def of(cls, value: NBestFile | PathLike) -> NBestFile:
        """`value` as an NBestFile (a path is read with the defaults)."""
        return value if isinstance(value, NBestFile) else cls(os.fspath(value))

    def inputs(self) -> list[str]:
        """The files a read may open: the list, the reading options that name files, and the side
        files its format (or, when it is not given, any format) finds beside it."""
        from rerank.formats import formats, get_format, reading_options

        paths = [self.path]
        paths += [self.options[o.key] for o in reading_options() if o.file and self.options.get(o.key)]
        records = [get_format(self.format)] if self.format is not None else list(formats().values())
        paths += [p for r in records if r.side_inputs is not None for p in r.side_inputs(self.path, dict(self.options))]
        return list(dict.fromkeys(paths))

    def read_with_report(self, progress: Progress = False, allow_empty: bool = False) -> tuple[NBestList, Any]:
        """(the list, the rerank.formats.ReadReport of the read); what the reader noticed is logged
        (`note: PATH: ...`); a list without hypotheses is an InputError unless `allow_empty`."""
        from rerank.formats import ReadReport, read_nbest

        report = ReadReport()
        try:
            with reading_progress(progress):
                nbest = read_nbest(self.path, fmt=self.format, strict=self.strict, report=report, cache=self.cache,
                                   post_process=self.post_process, unescape=self.unescape, **self.options)
        finally:
            for note in report.notes:
                log.warning("note: %s: %s", self.path, note)
        if nbest.n_hyps == 0 and not allow_empty:
            raise InputError("no hypotheses: the n-best list is empty", self.path)
        return nbest, report

    def read(self, progress: Progress = False) -> NBestList:
        """The list (see `read_with_report`); an empty one is an InputError."""
        return self.read_with_report(progress)[0]

    def layout(self, out_formats: Sequence[str], progress: Progress = False) -> dict | None:
        """The layout of a regular Moses/Joshua file (rerank.formats.moses.scan_moses, its notes
        logged as a read logs them) if it can be streamed to `out_formats`, else None."""
        from rerank.formats import ReadReport, detect_format, formats, moses
        from rerank.formats.cache import cache_dir
        from rerank.formats.text import hint_notes

        streamed = [name for name, record in formats().items() if record.streamed]
        if any(fmt not in streamed for fmt in out_formats) or self.format not in (None, *streamed):
            return None
        if cache_dir(self.cache) is not None or self.path == "-":
            return None
        if (self.post_process or "none") != "none" or (self.unescape or "none") != "none":
            return None  # the text changes: read whole
        report = ReadReport()
        try:
            with reading_progress(progress):
                fmt = self.format or detect_format(self.path, report, dict(self.options))
        except InputError:  # bad input: the whole-list path reads it and says so
            return None
        if fmt not in streamed or report.notes:
            return None
        layout = moses.scan_moses(self.path, self.strict)
        if layout is None:
            return None
        report.extra_fields_lines = layout["n_hyps"] if layout["fields"] > 4 else 0
        moses.read_notes(report, layout["missing"], layout["n_hyps"])
        report.notes.extend(hint_notes(layout["text_signs"], None, None))  # as read_nbest adds them, last
        for note in report.notes:
            log.warning("note: %s: %s", self.path, note)
        return layout


def nbest_list(nbest: NBestList | NBestFile | PathLike, source: str | None = None,
               progress: Progress = False) -> tuple[NBestList, str]:
    """(the list, its name for messages: `source`, else its path) of an NBestList, an NBestFile or a
    path; an empty list is an error."""
    if isinstance(nbest, NBestList):
        source = source or "n-best list"
    elif isinstance(nbest, NBestFile):
        source, nbest = source or nbest.path, nbest.read(progress)
    elif isinstance(nbest, (str, os.PathLike)):
        source, nbest = source or os.fspath(nbest), NBestFile(os.fspath(nbest)).read(progress)
    else:
        raise InputError(f"expected an NBestList or an n-best file path, not {type(nbest).__name__}")
    if nbest.n_hyps == 0:
        raise InputError("no hypotheses: the n-best list is empty", source)
    return nbest, source



def write_nbest_noted(nbest: NBestList, path: str, fmt: str, first_id: int = 0) -> list[str]:
    """`rerank.formats.write_nbest`, logging what the format leaves out (features, totals)."""
    from rerank.formats import write_losses, write_nbest

    for note in write_losses(nbest, fmt):
        log.warning("note: %s: %s", path, note)
    return write_nbest(nbest, path, fmt, first_id=first_id)


def write_chunks(out: IO[str], chunks: Iterable[tuple[int, NBestList]], style: str) -> None:
    """Write (first id, n-best) chunks as Moses/Joshua lines to the open file `out`."""
    from rerank.formats import moses

    for first, nbest in chunks:
        out.writelines(line + "\n" for line in moses.iter_moses_lines(nbest, style=style, first_id=first))


def scored_chunks(path: str, layout: dict, w: np.ndarray) -> Iterator[tuple[int, NBestList, np.ndarray]]:
    """(first id, n-best, w·f of its rows) of the chunks of `path`; w·f is computed as
    `weights.model_scores` computes it over the whole list (windows of SCORE_ROWS rows from the first)."""
    from rerank.formats import moses
    from rerank.weights import SCORE_ROWS, window_scores

    pending, rest, ready = [], np.zeros((0, len(w))), np.zeros(0)
    for first, nbest in moses.iter_moses_chunks(path, layout):
        pending.append((first, nbest))
        rest = np.concatenate([rest, nbest.features])
        full = len(rest) // SCORE_ROWS * SCORE_ROWS
        ready, rest = np.concatenate([ready, window_scores(rest[:full], w)]), rest[full:]
        while pending and len(ready) >= pending[0][1].n_hyps:
            first, nbest = pending.pop(0)
            yield first, nbest, ready[:nbest.n_hyps]
            ready = ready[nbest.n_hyps:]
    ready = np.concatenate([ready, window_scores(rest, w)])
    for first, nbest in pending:
        yield first, nbest, ready[:nbest.n_hyps]
        ready = ready[nbest.n_hyps:]


# ---- convert ------------------------------------------------------------------------------------

def _write_side(lines: list | None, kind: str, path: str, source: str) -> None:
    if lines is None:
        raise InputError(f"save_{kind} asks for fairseq {kind}, but the input has none", source, option=f"save_{kind}")
    missing = [i for i, line in enumerate(lines) if line is None]
    if missing:
        raise InputError(f"sentence {missing[0]} has no line for save_{kind}", source, option=f"save_{kind}")
    with atomic_write(path) as out:
        out.writelines(line + "\n" for line in lines)


def convert_file(source: NBestFile | PathLike, output: PathLike, to: str = "moses", *,
                 save_refs: PathLike | None = None, save_sources: PathLike | None = None,
                 progress: Progress = False, wait: bool = False) -> None:
    """Read an n-best file in one format and write it in another (`to`), keeping every hypothesis,
    its order and its features; what the output format cannot hold is logged. `save_refs` and
    `save_sources`: a fairseq input's T- and S- lines, written there. Every output is written, or
    none; no output may be an input. One writer per output: their locks are held from before the
    input is read (rerank.io.output_lock; another process writing one is refused unless `wait`,
    which waits until it ends). A Moses/Joshua file to Moses/Joshua streams."""
    source = NBestFile.of(source)
    output = os.fspath(output)
    refs_out = None if save_refs is None else os.fspath(save_refs)
    sources_out = None if save_sources is None else os.fspath(save_sources)
    outputs = [*nbest_outputs(output, to), refs_out, sources_out]
    check_outputs(outputs, source.inputs())
    with output_lock(outputs, wait):
        layout = None if refs_out or sources_out else source.layout([to], progress)
        if layout is not None:  # two passes, a block at a time
            from rerank.formats import moses

            with output_group(), atomic_write(output) as out:
                write_chunks(out, moses.iter_moses_chunks(source.path, layout), to)
            return
        nbest, report = source.read_with_report(progress)
        with output_group():  # every output or none
            if refs_out:
                _write_side(report.fairseq_refs, "refs", refs_out, source.path)
            if sources_out:
                _write_side(report.fairseq_sources, "sources", sources_out, source.path)
            write_nbest_noted(nbest, output, to)


# ---- apply --------------------------------------------------------------------------------------

def _writable_formats() -> tuple[str, ...]:
    from rerank.formats import format_names

    return format_names(writable=True)


@dataclass(frozen=True)
class ApplyOptions:
    """What `apply_file` writes besides the 1-best, and how it scores it: `nbest_out`, the whole list
    re-sorted by the new score, in the format `to`; with `refs` (reference files, one per reference),
    the 1-best and the first hypotheses scored by `metrics` (comma-separated), as `rerank eval`
    scores them (`tokenize` BLEU's, `lowercase` BLEU's and chrF's, `lang` and `meteor_modules`
    METEOR's); `wait`: if another process is writing an output, wait until it ends (default: refuse,
    naming it). A value that is wrong whatever the data is refused here (InputError)."""

    nbest_out: str | None = option(None, "also write the re-sorted n-best here", metavar="NBEST_OUT",
                                   default_text="no n-best output")
    to: str = option("moses", "output n-best format; plain writes OUT, OUT.ids and OUT.features.tsv",
                     choices=_writable_formats)
    refs: tuple[str, ...] = option((), "score the 1-best against this reference file (repeat for several)",
                                   flag=("-r", "--ref"), dest="refs", many=True, metavar="REF", default_text="no scoring",
                                   group="scoring")
    metrics: str = option("bleu", "with --ref, comma-separated metric names (those of `rerank eval --metrics` "
                          "but comet: bleu, chrf, chrf++, ter, meteor, an installed plug-in's)", group="scoring")
    tokenize: str = option("13a", "BLEU tokeniser as sacrebleu -tok", group="scoring")
    lowercase: bool = option(False, "case-insensitive BLEU and chrF", default_text="case-sensitive",
                             group="scoring")
    lang: str = option("en", "target language for METEOR", group="scoring")
    meteor_modules: str | None = option(None, "METEOR modules, e.g. exact,stem", default_text="the language's modules",
                                        group="scoring")
    wait: bool = wait_option()

    def __post_init__(self) -> None:
        refs = [self.refs] if isinstance(self.refs, (str, os.PathLike)) else self.refs   # one reference file, or several
        object.__setattr__(self, "refs", tuple(os.fspath(r) for r in refs) if isinstance(refs, (list, tuple)) else refs)
        check_options(self, as_keywords=True)
        if self.refs:
            self._scoring()  # unknown metrics and tokenizers, before any file is read

    def metric_names(self) -> list[str]:
        return [m.strip().lower() for m in self.metrics.split(",") if m.strip()]

    def _scoring(self) -> tuple[list[str], dict]:
        """(the metric names, make_metric's options), after the checks that need no data: unknown
        metrics, then each metric's own refusals (BLEU's tokenizer), without making any metric."""
        from rerank.metrics.registry import QUALITY_METRICS, check_metric_options

        known = QUALITY_METRICS
        names = self.metric_names()
        unknown = [m for m in names if m not in known]
        if unknown or not names:
            raise InputError(f"metrics: unknown metric(s) {', '.join(unknown) or '(none)'} (known: {', '.join(known)})",
                             option="metrics")
        modules = [m.strip() for m in self.meteor_modules.split(",") if m.strip()] if self.meteor_modules else None
        options = {"lang": self.lang, "tokenize": self.tokenize, "lowercase": self.lowercase,
                   "meteor_options": {"modules": modules} if modules else {}}
        for name in names:
            check_metric_options(name, **options)
        return names, options

    def scorers(self) -> list:
        """The metric objects of `metrics` (InputError for an unknown one or tokenizer)."""
        from rerank.metrics import make_metric

        names, options = self._scoring()
        return [make_metric(name, **options) for name in names]


@dataclass
class CorpusScore:
    """One metric's corpus score of the reranked 1-best and of the first hypotheses."""

    display: str
    score: float
    first_score: float
    signature: str


@dataclass
class Applied:
    """What `apply_file` did: the scores of the 1-best (with `refs`), each metric's `CorpusScore`."""

    scores: list[CorpusScore] = field(default_factory=list)


def apply_file(source: NBestFile | PathLike, weights: Mapping[str, float] | PathLike, output: PathLike,
               options: ApplyOptions | None = None, *, progress: Progress = False, **keywords: Any) -> Applied:
    """Rerank every list of an n-best file under w·f and write the 1-best of each sentence to
    `output` (one line per sentence; ties go to the earlier hypothesis; "-" for standard output), as
    `rerank apply`; `options` (an ApplyOptions; `keywords` replace its fields): the re-sorted list
    (`nbest_out`, its total column w·f) and the scores against `refs`. Both outputs or none, and
    neither may be an input; the references are read and checked before anything is written. One
    writer per output: their locks are held from before any input is read (rerank.io.output_lock,
    `options.wait`). A weight for a feature the list lacks is an error, a feature without weight
    gets 0 (logged). A regular Moses/Joshua file streams."""
    options = with_fields(ApplyOptions, options, "apply option", **keywords)
    source = NBestFile.of(source)
    output = os.fspath(output)
    scorers = options.scorers() if options.refs else []
    weight_files = [os.fspath(weights)] if isinstance(weights, (str, os.PathLike)) else []
    outputs = [output, *nbest_outputs(options.nbest_out, options.to)]
    check_outputs(outputs, [*source.inputs(), *weight_files, *options.refs])
    with output_lock(outputs, options.wait):
        best, first, refs = _apply(source, weights, output, options, progress)
    return Applied([] if refs is None else corpus_scores(scorers, best, first, refs))


def _apply(source: NBestFile, weights: Mapping[str, float] | PathLike, output: str, options: ApplyOptions,
           progress: Progress) -> tuple[list[str], list[str], list[list[str]] | None]:
    """`apply_file`'s reading and writing: (the 1-best, the first hypotheses, the references read or None)."""
    from rerank.weights import best_rows, resorted

    both_stdout = output == "-" and options.nbest_out == "-"  # the whole-list path writes all the 1-best first
    layout = None if both_stdout else source.layout([options.to] if options.nbest_out else [], progress)
    if layout is not None:
        refs = read_references(list(options.refs), layout["n_sentences"], source.path) if options.refs else None
        best, first = _apply_streamed(source.path, layout, weights, output, options, keep=refs is not None)
    else:
        nbest = source.read(progress)
        refs = read_references(list(options.refs), nbest.n_sentences, source.path) if options.refs else None
        w = weight_vector_of(weights, nbest.feature_names)
        rows = best_rows(nbest, w)
        with output_group():  # both outputs or none
            with atomic_write(output) as out:
                for row in rows:
                    out.write(nbest.hyps[int(row)] + "\n")
            if options.nbest_out:
                write_nbest_noted(resorted(nbest, w), options.nbest_out, options.to)
        best = [nbest.hyps[int(r)] for r in rows]
        first = [nbest.hyps[int(i)] for i in nbest.offsets[:-1]]
    return best, first, refs


def corpus_scores(scorers: Sequence, best: list[str], first: list[str], refs: list[list[str]]) -> list[CorpusScore]:
    """Each metric's corpus score of `best` and of `first` against the reference streams."""
    scores = []
    for metric in scorers:
        metric.prepare(best + first + [r for stream in refs for r in stream])
        values = [metric.corpus_score(h, refs) for h in (best, first)]
        scores.append(CorpusScore(metric.info.display, values[0], values[1], metric.signature()))
    return scores


def weight_vector_of(weights: Mapping[str, float] | PathLike, names: list[str]) -> np.ndarray:
    """The weight vector of the columns `names` from a mapping {feature: weight} or a weights file
    (rerank.weights.weight_vector: a nonzero weight for a column the list lacks is an error, a column
    without weight gets 0, logged, unless the weights were tuned toward it)."""
    from rerank.weights import tuned_toward, weight_vector

    if isinstance(weights, (str, os.PathLike)):
        path = os.fspath(weights)
        return weight_vector(as_weights(path), names, source=path, objective=tuned_toward(path))
    return weight_vector(as_weights(weights), names, source="weights")


def as_weights(weights: Mapping[str, float] | PathLike) -> dict[str, float]:
    """Weights by feature name: a mapping as is, or read from a weights file (JSON, Moses lines, ...)."""
    from rerank.weights import read_weights

    if isinstance(weights, (str, os.PathLike)):
        return read_weights(os.fspath(weights))
    if isinstance(weights, Mapping):
        return {str(k): float(v) for k, v in weights.items()}
    raise InputError(f"weights: expected a mapping of feature name to weight or a file path, not {type(weights).__name__}")


def reference_files(refs: object) -> list[str]:
    """The files among references given as `read_references` takes them (paths and lists)."""
    items = [refs] if isinstance(refs, (str, os.PathLike)) else refs if isinstance(refs, Sequence) else []
    return [os.fspath(r) for r in items if isinstance(r, (str, os.PathLike))]


def input_paths(nbest: object, *others: object) -> list[str]:
    """The files a job reads: an n-best file's (an NBestFile's side files too) and the paths among `others`."""
    paths = nbest.inputs() if isinstance(nbest, NBestFile) else []
    return [*paths, *(os.fspath(p) for p in (nbest, *others) if isinstance(p, (str, os.PathLike)))]


def _apply_streamed(path: str, layout: dict, weights: Mapping[str, float] | PathLike, output: str,
                    options: ApplyOptions, keep: bool) -> tuple[list[str], list[str]]:
    """`apply_file` over the sentences of a regular Moses/Joshua file a block at a time (the same
    outputs); (the 1-best, the first hypotheses) when `keep`, else two empty lists."""
    from rerank.weights import resorted

    w = weight_vector_of(weights, layout["feature_names"])
    best: list[str] = []
    first: list[str] = []
    with output_group(), atomic_write(output) as out, \
            (atomic_write(options.nbest_out) if options.nbest_out else contextlib.nullcontext()) as nbest_file:
        for first_id, nbest, scores in scored_chunks(path, layout, w):
            rows = segment_argmax(scores, nbest.offsets)
            out.writelines(nbest.hyps[int(row)] + "\n" for row in rows)
            if keep:
                best += [nbest.hyps[int(row)] for row in rows]
                first += [nbest.hyps[int(i)] for i in nbest.offsets[:-1]]
            if nbest_file is not None:
                write_chunks(nbest_file, [(first_id, resorted(nbest, w, scores))], options.to)
    return best, first
