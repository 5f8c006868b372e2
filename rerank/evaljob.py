"""The evaluation job (`rerank.evaluate`, `rerank.report`; the commands eval and report call them):
systems given as run files, lists of strings or n-best lists with weights (`Reranked`), read and
checked against the references, scored and tested (rerank.evaluation.evaluate_systems), and the
`Evaluation` they return: its table, cells, formats, plot and HTML report, and `save`. One writer
per output (rerank.io.output_lock): `evaluate(outputs=)` takes the locks of the files the caller
will write before anything is read, and the Evaluation holds them until `save` (or `report`) has
written them."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rerank.errors import InputError
from rerank.evaluation import Cell, EvalOptions, ResultTable
from rerank.htmlreport.build import ReportOptions
from rerank.io import output_lock, read_lines, read_references
from rerank.nbest import NBestList
from rerank.nbestfile import NBestFile, input_paths, nbest_list, reference_files, weight_vector_of

if TYPE_CHECKING:
    from rerank.progress import Progress

log = logging.getLogger("rerank.api")   # the API's logger, as before this module held the job

PathLike = str | os.PathLike


@dataclass
class Reranked:
    """A system given as an n-best list and weights: the 1-best of every list under the weights (one
    run), as `rerank apply` writes it. `evaluate` keeps the list and its model scores for the
    report's oracle curve. `nbest`: an NBestList, a path or an NBestFile (a path with how to read
    it); a list read from a file that does not say its size (OpenNMT's) has one source per line of
    the first reference file. `source`: the list's name (default: the file it was read from)."""

    nbest: NBestList | NBestFile | PathLike
    weights: Mapping[str, float] | PathLike
    source: str | None = None

    def read(self, ref_files: Sequence[str], progress: Progress = False) -> tuple[NBestList, str]:
        """(the list, its name for messages): read if it is a file, the references' first file as
        its sources unless its reading options give its size or sources."""
        nbest = self.nbest
        if isinstance(nbest, (str, os.PathLike)):
            nbest = NBestFile(os.fspath(nbest))
        if isinstance(nbest, NBestFile) and ref_files and not {"nbest_size", "src"} & set(nbest.options):
            nbest = dataclasses.replace(nbest, options={**nbest.options, "src": ref_files[0]})
        return nbest_list(nbest, self.source, progress)

    def inputs(self) -> list[str]:
        """The files reading the system may open: the list's (an NBestFile's side files too) and the weights'."""
        return input_paths(self.nbest, self.weights)


def _files_of(output: object) -> list[str]:
    """The files an output argument of `evaluate` names (for messages)."""
    if isinstance(output, Reranked):
        if output.source:
            return [output.source]
        nbest = output.nbest.path if isinstance(output.nbest, NBestFile) else output.nbest
        return [os.fspath(nbest)] if isinstance(nbest, (str, os.PathLike)) else []
    if isinstance(output, (str, os.PathLike)):
        return [os.fspath(output)]
    return [os.fspath(x) for x in output if isinstance(x, os.PathLike)] if isinstance(output, Sequence) else []


def _evaluation_inputs(refs: object, named: Sequence[tuple[str, object]], options: EvalOptions) -> list[str]:
    """Every file an evaluation reads: the references, the systems' files and the options' (for the
    check that no output is one of them)."""
    files = [*reference_files(refs), *options.inputs()]
    for _, value in named:
        files += value.inputs() if isinstance(value, Reranked) else _files_of(value)
    return files


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
    its statistics), the references, every system's runs (baseline first) and the EvalOptions
    that made them."""

    table: ResultTable
    refs: list
    outputs: dict                                       # {system: [run hypotheses, ...]}
    sources: dict = field(default_factory=dict)         # {system: files read}, when read from files
    nbests: dict = field(default_factory=dict)          # {system: (NBestList, model scores)}: the report's oracle curve
    tokenize: str = "13a"                               # BLEU's tokeniser and case (the report's sentence scores)
    lowercase: bool = False
    options: EvalOptions | None = None                  # the evaluation's settings (the report's oracle metric reads them)
    _held: contextlib.ExitStack | None = field(default=None, init=False, repr=False, compare=False)  # evaluate's locks

    TABLE_FORMATS = ("table", "markdown", "latex", "csv", "json")
    EXTENSIONS = {".md": "markdown", ".markdown": "markdown", ".tex": "latex", ".csv": "csv", ".json": "json"}

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

    def to_html(self, options: ReportOptions | None = None, **keywords: Any) -> str:
        """The self-contained HTML report of `rerank report` (rerank.htmlreport), as a string.
        `options`: a ReportOptions (title, examples, sentence_metric, oracle_metric: what the oracle
        curve of the `Reranked` systems picks and scores by, as `oracle`'s `metric`, ...); `keywords`
        replace its fields (to_html(oracle_metric="ter")), and `oracle_options` (make_metric's lang,
        ter_case_sensitive, meteor_options for an oracle metric the table did not score; default:
        the evaluation's)."""
        from rerank.htmlreport import build_report

        oracle_options = keywords.pop("oracle_options", None)
        options = ReportOptions.make(options, **keywords)
        if oracle_options is None and self.options is not None:
            oracle_options = {"lang": self.options.lang, "ter_case_sensitive": self.options.ter_case_sensitive,
                              "meteor_options": self.options.meteor}
        return build_report(self.table, self.refs, self.outputs, options, nbests=self.nbests, tokenize=self.tokenize,
                            lowercase=self.lowercase, oracle_options=oracle_options)

    def plot(self, path: PathLike) -> None:
        """PNG of each system's improvement over the baseline with its bootstrap 95% interval."""
        from rerank.evaluation import plot_deltas

        plot_deltas(self.table, os.fspath(path))

    @staticmethod
    def check_plot(options: EvalOptions) -> None:
        """Whether an evaluation with `options` can draw the delta plot (`save(plot=)`): its bootstrap
        intervals need `bootstrap` >= 2 (an InputError otherwise)."""
        from rerank.evaluation import check_plot

        check_plot(options.bootstrap)

    @classmethod
    def saved_files(cls, path: PathLike, plot: PathLike | None = None) -> list[str | None]:
        """The files `save(path, plot=plot)` writes: the table (- for standard output), its
        .config.json beside a file, the plot (what a caller checks before the work: `evaluate(outputs=...)`)."""
        path = os.fspath(path)
        config = os.path.splitext(path)[0] + ".config.json" if path != "-" else None
        return [path, config, None if plot is None else os.fspath(plot)]

    @classmethod
    def table_format(cls, path: PathLike) -> str:
        """The table format of a file name, as `rerank eval -o` picks it: .md markdown, .tex latex,
        .csv csv, .json json (a .gz after it ignored), else the text table."""
        name = os.fspath(path)
        name = name[:-3] if name.endswith(".gz") else name
        return cls.EXTENSIONS.get(os.path.splitext(name)[1].lower(), "table")

    def save(self, path: PathLike, format: str | None = None, *, plot: PathLike | None = None,
             meta: Mapping | None = None) -> list[str]:
        """Write the table to `path` (- for standard output) in `format` (table, markdown, latex, csv,
        json; default: from the file name, `table_format`), beside a file its config as JSON
        (PATH.config.json: `meta`, such as the command line, then the table's config and the metric
        signatures), and with `plot` the delta plot (PNG): all of them or, on an error, none, each
        written by this process alone (their locks, rerank.io.output_lock, and those `evaluate(outputs=)`
        took, held until they are written: `options.wait`). Returns the files written."""
        from rerank.evaluation import check_plot
        from rerank.io import atomic_write, output_group

        table_path = os.fspath(path)
        _, config, plot_path = self.saved_files(table_path, plot)
        with self._writing([table_path, config, plot_path]):
            if plot is not None:
                check_plot(int(self.table.config.get("bootstrap", 0)))
            format = format or self.table_format(table_path)
            if format not in self.TABLE_FORMATS:
                raise InputError(f"format must be one of {', '.join(self.TABLE_FORMATS)}, got {format!r}",
                                 option="format")
            with output_group():
                with atomic_write(table_path) as fh:
                    fh.write(self.table.render(format))
                if config is not None:
                    with atomic_write(config) as fh:
                        json.dump({**(meta or {}), **self.table.config, "signatures": self.table.signatures}, fh,
                                  indent=2)
                if plot_path is not None:
                    self.plot(plot_path)
        return [p for p in (table_path, config, plot_path) if p is not None and p != "-"]

    @contextlib.contextmanager
    def _writing(self, paths: Sequence[str | None]) -> Any:
        """The block that writes `paths`: their locks held through it, and the locks `evaluate(outputs=)`
        took released at its end (one writer per output)."""
        held, self._held = self._held, None
        with held or contextlib.nullcontext(), output_lock(paths, self.options.wait if self.options else False):
            yield


def evaluate(refs: PathLike | Sequence[PathLike | Sequence[str]], baseline: object,
             systems: Mapping[str, object] | Sequence[tuple[str, object]],
             options: EvalOptions | None = None, *,
             baseline_name: str = "baseline", progress: Progress = False, record: Mapping | None = None,
             outputs: Sequence[PathLike | None] = (), **keywords: Any) -> Evaluation:
    """Score `systems` and `baseline` against `refs` with MultEval-style significance tests, as `rerank eval`.

    `baseline` and each output of `systems` ({name: output}, or (name, output) pairs, where two
    systems of one name are an error): a list of strings (one run), a list of
    runs (each a list of strings or a file path), a file path, or a `Reranked(nbest, weights)`;
    `baseline` may also be a (name, output) pair. `options`: an EvalOptions (metrics, ar,
    bootstrap, seed, lang, tokenize, segment_scores, second_baseline, holm, ...); `keywords`
    replace its fields (metrics=["bleu"], ar=1000). `outputs`: files the caller will write (as
    `Evaluation.save`): one that is an input is refused, and their locks are taken (one writer per
    output, rerank.io.output_lock: another process writing one is refused unless `wait`, which
    waits until it ends), before anything is read; the Evaluation holds them until `save` has
    written (to the process's end if it never saves). The references are read once; the table's
    config records the settings, the files read (per system, the references, the segment scores,
    how the n-best lists' text was read) and `record` (more fields, the command line's).
    """
    from rerank.outputs import check_outputs

    options = EvalOptions.make(options, **keywords)
    if isinstance(baseline, tuple) and len(baseline) == 2 and isinstance(baseline[0], str):
        baseline_name, baseline = baseline
    pairs = [(baseline_name, baseline), *((str(k), v) for k, v in
                                          (systems.items() if isinstance(systems, Mapping) else systems))]
    files = [None if out is None else os.fspath(out) for out in outputs]
    if any(out is not None for out in files):
        check_outputs(files, _evaluation_inputs(refs, pairs, options))
    with contextlib.ExitStack() as held:
        held.enter_context(output_lock(files, options.wait))
        ev = _evaluated(refs, pairs, options, baseline_name, progress, record)
        ev._held = held.pop_all()   # released once the caller has written them (`Evaluation._writing`)
    return ev


def _evaluated(refs: PathLike | Sequence[PathLike | Sequence[str]], pairs: list[tuple[str, object]],
               options: EvalOptions, baseline_name: str, progress: Progress, record: Mapping | None) -> Evaluation:
    """`evaluate` from the reading of the references on, its outputs checked and locked."""
    from rerank.evaluation import evaluate_systems
    from rerank.weights import best_rows, model_scores

    ref_files = reference_files(refs)
    refs = read_references(refs)
    refs_name = ref_files[0] if ref_files else "reference 1"
    runs: dict[str, list[list[str]]] = {}
    sources: dict[str, list[str]] = {}
    nbests: dict[str, tuple] = {}
    texts = []   # how each n-best file's text was read
    for k, (name, value) in enumerate(pairs):
        what = f"{'baseline' if k == 0 else 'system'} {name!r}"
        if name in runs:
            raise InputError(f"two systems are named {name!r}", files[0] if (files := _files_of(value)) else None)
        if isinstance(value, Reranked):
            nbest, source = value.read(ref_files, progress)
            if nbest.n_sentences != len(refs[0]):
                raise InputError(f"the n-best list has {nbest.n_sentences} sentences but the references have "
                                 f"{len(refs[0])} ({refs_name})", source)
            w = weight_vector_of(value.weights, nbest.feature_names)
            runs[name] = [[nbest.hyps[int(r)] for r in best_rows(nbest, w)]]
            nbests[name] = (nbest, model_scores(nbest, w))
            files = [source, *([os.fspath(value.weights)] if isinstance(value.weights, (str, os.PathLike)) else [])]
            if isinstance(value.nbest, NBestFile):
                texts.append({"post_process": value.nbest.post_process, "unescape": value.nbest.unescape})
        else:
            runs[name], files = _runs(value, what, len(refs[0]), refs_name)
        if files:
            sources[name] = files
    counts = {name: len(r) for name, r in runs.items()}
    if len(set(counts.values()) - {1}) > 1:  # a run file missing? say so; each pair is tested on its own runs
        log.warning("note: the systems have different run counts (" + ", ".join(f"{k} {v}" for k, v in counts.items())
                    + "); each comparison uses its two systems' own runs")
    others = dict(runs)
    base_runs = others.pop(baseline_name)
    table = evaluate_systems(refs, base_runs, others, options, baseline_name=baseline_name, progress=progress)
    if sources:
        table.config["sources"] = sources
    if ref_files:
        table.config["references"] = ref_files
    if options.segment_scores:
        table.config["segment_scores"] = options.segment_files()
    if texts:
        table.config["nbest_text"] = texts[0] if all(t == texts[0] for t in texts) else texts
    table.config.update(record or {})
    return Evaluation(table, refs, runs, sources=sources, nbests=nbests, tokenize=options.tokenize,
                      lowercase=options.lowercase, options=options)


def report(refs: PathLike | Sequence[PathLike | Sequence[str]], baseline: object,
           systems: Mapping[str, object] | Sequence[tuple[str, object]], output: PathLike,
           options: EvalOptions | None = None, page: ReportOptions | None = None, *, baseline_name: str = "baseline",
           progress: Progress = False, record: Mapping | None = None) -> Evaluation:
    """`evaluate` the systems as `options` say and write the HTML report of `rerank report` to
    `output` (`Evaluation.to_html` with the ReportOptions `page`). What `page` asks of the
    evaluation (its sentence metric among the metrics, an oracle curve of `Reranked` systems) and
    that `output` is none of the inputs (the frequency corpus too) are checked before anything is
    read. Returns the Evaluation."""
    from rerank.htmlreport import write_report
    from rerank.outputs import check_outputs

    options, page = EvalOptions.make(options), ReportOptions.make(page)
    named = systems.items() if isinstance(systems, Mapping) else systems
    values = [baseline[1] if isinstance(baseline, tuple) and len(baseline) == 2 else baseline, *(v for _, v in named)]
    page.check_evaluation([m if isinstance(m, str) else m.name for m in options.metrics],
                          any(isinstance(v, Reranked) for v in values))
    check_outputs([os.fspath(output)], page.inputs())
    ev = evaluate(refs, baseline, systems, options, baseline_name=baseline_name, progress=progress, record=record,
                  outputs=[output])   # the lock of `output` held from before anything is read
    with ev._writing([]):
        write_report(os.fspath(output), ev.to_html(page))
    return ev
