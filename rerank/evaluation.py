"""The evaluation tables of `rerank eval`: score several systems against a baseline (and optionally
a second reference system) and render the result as a MultEval-style table (text, Markdown, LaTeX,
CSV, JSON) or a delta plot. (The HTML page of `rerank report` is rerank.htmlreport, built on this
module's ResultTable; the public API's `rerank.evaluate` wraps `evaluate_systems`.)

Python entry point: `evaluate_systems(...)` -> `ResultTable`. Each system is a list of runs (one
list of hypothesis strings per optimizer run). Statistics are computed once per run; every test
and estimate then works on the statistics only (rerank.significance).
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from rerank.metrics import Metric, make_metric
from rerank.metrics.registry import display_name
from rerank.errors import InputError
from rerank.options import (NAMES, NONNEGATIVE_INT, PATH, POSITIVE_INT, PROBABILITY, Check, at_most, check_options,
                            option, split_names, wait_option, with_fields)
from rerank.progress import Progress, track
from rerank.significance import (MAX_RESAMPLES, MAX_TRIALS, Resamples, approximate_randomization, as_runs,
                                 holm_bonferroni, paired_bootstrap, run_statistics)

MARK_BASE, MARK_SECOND = "\u2020", "\u2021"  # dagger, double dagger


@dataclass
class Cell:
    """One system x one metric."""

    score: float  # mean over runs
    s_sel: float | None  # None with --bootstrap 0
    s_opt: float | None  # None for a single run
    runs: list
    p: float | None = None  # AR p-value against the baseline (Holm-adjusted when requested)
    p_raw: float | None = None
    p2: float | None = None  # against the second reference system
    p2_raw: float | None = None
    delta: float | None = None  # improvement over the baseline (sign flipped for lower-is-better)
    delta_low: float | None = None  # bootstrap 95% interval of the improvement
    delta_high: float | None = None
    bs_p: float | None = None  # paired bootstrap p-value (percentile rule; sacrebleu's with sacrebleu_compat)
    bs_p2: float | None = None  # the same against the second reference system
    bs_mean: float | None = None
    bs_ci: float | None = None
    marks: str = ""


@dataclass
class ResultTable:
    systems: list  # names, baseline first
    metrics: list  # metric names
    cells: dict  # (system, metric) -> Cell
    baseline: str
    second_baseline: str | None
    signatures: dict
    higher_is_better: dict
    config: dict = field(default_factory=dict)
    decimals: dict = field(default_factory=dict)  # metric -> decimals shown (default 2)
    # not rendered: {(system, metric): statistics (R, n, k)} and {metric: Metric}, for reports
    stats: dict = field(default_factory=dict, repr=False, compare=False)
    metric_objects: dict = field(default_factory=dict, repr=False, compare=False)

    def quality(self, metric: str) -> bool:
        """Whether the table's `metric` is a quality score (marks, a direction), from its object."""
        from rerank.metrics.registry import quality_in

        return quality_in(self, metric)

    def display(self, metric: str) -> str:
        """How `metric` is printed: its object's display name (COMET for the model metric comet,
        the name itself for segment scores read from a file), else the registry's."""
        found = self.metric_objects.get(metric)
        return found.info.display if found is not None else display_name(metric)

    def fmt(self, metric: str, value: float | None, none: str = "-") -> str:
        """A score (or s_sel, s_opt, delta) of `metric` with its number of decimals."""
        return none if value is None else f"{value:.{self.decimals.get(metric, 2)}f}"

    # ---- rendering -------------------------------------------------------------------------
    def _rows(self, marks_unicode: bool = True) -> tuple[list[str], list[list[str]]]:
        header = ["System"]
        for m in self.metrics:
            arrow = "" if not self.quality(m) else " \u2191" if self.higher_is_better[m] else " \u2193"
            header += [f"{self.display(m)}{arrow}", "s_sel/s_opt/p" + ("/p\u2021" if self.second_baseline else "")]
        rows = []
        for name in self.systems:
            row = [name]
            for m in self.metrics:
                c = self.cells[(name, m)]
                row.append(self.fmt(m, c.score) + (f" {c.marks}" if c.marks else ""))
                p = "-" if c.p is None else _fmt_p(c.p)
                if self.second_baseline:
                    p += "/" + ("-" if c.p2 is None else _fmt_p(c.p2))
                row.append(f"{self.fmt(m, c.s_sel)}/{self.fmt(m, c.s_opt)}/{p}")
            rows.append(row)
        return header, rows

    def _legend(self) -> list[str]:
        """What each mark and number means, and which tests made it (a mark needs the randomisation
        test and, when it ran, the bootstrap: two tests that can disagree near alpha)."""
        cfg = self.config
        alpha = cfg.get("alpha", 0.05)
        both = cfg.get("bootstrap", 0) >= 2
        level = f"{100 * (1 - alpha):g}%"
        tests = ("approximate randomisation p{} < {a} and paired bootstrap bs_p{} < {a} (its " + level + " percentile "
                 "interval of the improvement clear of 0)" if both else "approximate randomisation p{} < {a}")
        lines = [f"{MARK_BASE}: better than {self.baseline} by " + tests.format("", "", a=alpha)]
        if self.second_baseline:
            lines.append(f"{MARK_SECOND}: better than {self.second_baseline} by " + tests.format("\u2021", "2", a=alpha))
        if cfg.get("multeval_compat"):
            how = "MultEval's rules (strictly greater differences, MultEval's run shuffle, a one-run system as R copies)"
        elif cfg.get("stratified"):
            how = "Clark et al.'s stratified split of the two systems' pooled runs"
        else:
            how = "paired, each system's runs averaged per sentence"
        lines.append(f"p: approximate randomisation against {self.baseline}, {cfg.get('ar_trials')} trials, {how}"
                     + (", Holm-Bonferroni adjusted" if cfg.get("holm") else ""))
        if cfg.get("bootstrap", 0) >= 2:
            lines.append(f"\u0394 intervals (CSV, JSON, plot, HTML report): paired bootstrap, {cfg.get('bootstrap')} "
                         "resamples, 2.5-97.5% percentile interval of the improvement; bs_p inverts it"
                         + (" (bs_p: sacrebleu's rule)" if cfg.get("sacrebleu_compat") else ""))
        runs = cfg.get("runs")
        if isinstance(runs, dict):
            lines.append("runs: " + ", ".join(f"{name} {r}" for name, r in runs.items()))
        for m in self.metrics:
            lines.append(f"{self.display(m)}: {self.signatures[m]}")
        return lines

    def to_text(self) -> str:
        header, rows = self._rows()
        widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]

        def fmt(r: Sequence[str]) -> str:
            return "  ".join(s.ljust(w) for s, w in zip(r, widths)).rstrip()

        out = [fmt(header), "  ".join("-" * w for w in widths)] + [fmt(r) for r in rows]
        return "\n".join(out + [""] + self._legend()) + "\n"

    def to_markdown(self) -> str:
        header, rows = self._rows()
        out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
        out += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(out + [""] + [f"- {line}" for line in self._legend()]) + "\n"

    def to_latex(self) -> str:
        cols = "l" + "rr" * len(self.metrics)
        head = ["System"] + [f"{self.display(m)} $\\{'uparrow' if self.higher_is_better[m] else 'downarrow'}$ & "
                             "$s_{sel}$/$s_{opt}$/$p$" + ("/$p^\\ddagger$" if self.second_baseline else "") for m in self.metrics]
        out = [f"\\begin{{tabular}}{{{cols}}}", "\\toprule", " & ".join(head) + " \\\\", "\\midrule"]
        for name in self.systems:
            parts = [_tex(name)]
            for m in self.metrics:
                c = self.cells[(name, m)]
                marks = c.marks.replace(MARK_BASE, "$^\\dagger$").replace(MARK_SECOND, "$^\\ddagger$")
                p = "--" if c.p is None else _fmt_p(c.p)
                if self.second_baseline:
                    p += "/" + ("--" if c.p2 is None else _fmt_p(c.p2))
                parts.append(f"{self.fmt(m, c.score)}{marks} & {self.fmt(m, c.s_sel, '--')}/{self.fmt(m, c.s_opt, '--')}/{p}")
            out.append(" & ".join(parts) + " \\\\")
        out += ["\\bottomrule", "\\end{tabular}"]
        out += ["% " + line for line in self._legend()]
        return "\n".join(out) + "\n"

    def records(self) -> list[dict]:
        recs = []
        for name in self.systems:
            for m in self.metrics:
                d = asdict(self.cells[(name, m)])
                d.update(system=name, metric=m)
                recs.append(d)
        return recs

    def to_csv(self) -> str:
        buf = io.StringIO()
        keys = ["system", "metric", "score", "s_sel", "s_opt", "p", "p_raw", "p2", "p2_raw", "marks", "delta",
                "delta_low", "delta_high", "bs_p", "bs_p2", "bs_mean", "bs_ci", "runs"]
        writer = csv.DictWriter(buf, fieldnames=keys, lineterminator="\n")
        writer.writeheader()
        for r in self.records():
            r = dict(r)
            r["runs"] = " ".join(f"{x:.4f}" for x in r["runs"])
            writer.writerow({k: r[k] for k in keys})
        return buf.getvalue()

    def to_json(self) -> str:
        return json.dumps({"baseline": self.baseline, "second_baseline": self.second_baseline,
                           "systems": self.systems, "metrics": self.metrics, "signatures": self.signatures,
                           "config": self.config, "results": self.records()}, indent=2, ensure_ascii=False) + "\n"

    def render(self, fmt: str) -> str:
        return {"table": self.to_text, "markdown": self.to_markdown, "latex": self.to_latex,
                "csv": self.to_csv, "json": self.to_json}[fmt]()


def _fmt_p(p: float) -> str:
    """Two decimals from 0.1 up, else enough digits that a p below alpha = 0.05 or 0.01 never
    prints as 0.05 or 0.01 (0.0496 stays 0.0496)."""
    return f"{p:.2f}" if p >= 0.1 else f"{p:.4f}" if p >= 0.0001 else f"{p:.1e}"


def _tex(s: str) -> str:
    return s.replace("\\", "\\textbackslash{}").replace("_", "\\_").replace("&", "\\&").replace("%", "\\%")


METEOR_LANGUAGES = ("en", "de", "fr", "es", "cs")
SIGNIFICANCE = "significance"
COMET_GROUP = "COMET (reference-based, from a local checkpoint; needs the [comet] extra)"
PAIR_GROUP = "BERTScore and BLEURT (reference-based, from a local model directory; need the [neural] and [hf] extras)"
METRICX_GROUP = "MetricX (an error score: lower is better; from a local checkpoint; needs the [neural] and [hf] extras)"
PAIR_METRICS = {"bertscore": ("bertscore_model", "bertscore_layer", "bertscore_rescale"), "bleurt": ("bleurt_model",)}


def _metrics_help() -> str:
    from rerank.metrics.registry import metric_names

    return (f"comma-separated: {', '.join(metric_names(models=True, builtin=True))} (comet: with --comet-model) or a "
            "--segment-scores NAME (metricx, lower is better: with --metricx-model)")


METRICS = Check("metric names or Metric objects", split_names,   # a flag gives the names comma-separated
                lambda v: isinstance(v, (list, tuple)) and all(isinstance(m, (str, Metric)) for m in v), "names")
SOURCES = Check("a file or a list of sentences", str,
                lambda v: isinstance(v, (str, os.PathLike)) or (isinstance(v, Sequence) and not isinstance(v, bytes)))
CACHE = Check("a file or True (the default file)", str, lambda v: v is True or isinstance(v, (str, os.PathLike)))


@dataclass(frozen=True)
class MeteorOptions:
    """The METEOR scorer's options that the command line sets (`--meteor-*`); EvalOptions.meteor
    takes them, and the other keywords of rerank.metrics.meteor.MeteorMetric, as a dict."""

    backend: str = option("native", "native scorer or the Meteor 1.5 jar (Java)", choices=("native", "jar"))
    modules: tuple[str, ...] | None = option(None, "METEOR modules, e.g. exact,stem", check=NAMES, metavar="M1,M2",
                                             default_text="the language's modules")
    resources: str | None = option(None, "Meteor 1.5 jar or directory with function/, synonym/, paraphrase-XX.gz",
                                   metavar="PATH", default_text="the jar shipped with pycocoevalcap")
    jar: str | None = option(None, "meteor-1.5.jar for --meteor-backend jar", metavar="JAR", default_text="pycocoevalcap's")
    normalize: bool = option(True, "Meteor's -norm tokenisation and lowercasing", flag="--meteor-no-norm")


@dataclass(frozen=True)
class EvalOptions:
    """How `evaluate_systems` (and `rerank.evaluate`, `rerank eval`, `rerank report`) scores and
    tests. Each field is declared once (rerank.options): the commands' flags, defaults, help and
    checks come from it.

    metrics: names (bleu, chrf, ter, meteor, length, ...) or Metric objects, in table order (a
    comet_model adds comet, segment scores not named come last); segment_scores: segment-level
    scores computed elsewhere, {NAME: file} or "NAME=FILE.tsv" items (rerank.metrics.external: a
    TSV with a header of system names, one row per segment), NAME then a metric, higher is better
    unless it is in lower_better; lang: the target language, one of METEOR's (en, de, fr, es, cs);
    tokenize, lowercase: sacrebleu's BLEU tokeniser and case (chrF's case too); ter_case_sensitive:
    sacrebleu's TER is case-insensitive by default; meteor: the METEOR scorer's options (backend,
    modules, resources, jar, normalize: MeteorOptions, and MeteorMetric's other keywords); ar:
    approximate randomisation trials (at most MAX_TRIALS); bootstrap: resamples for s_sel and the
    intervals (0: none; at most MAX_RESAMPLES);
    seed: of both; alpha: the level of the marks; second_baseline: a system also tested against
    every other (double dagger); holm: Holm-Bonferroni over each comparison's cells; stratified:
    Clark et al.'s stratified randomisation; multeval_compat, sacrebleu_compat: those tools' rules
    (not calibrated: docs/evaluation.md). comet_model: a reference-based COMET checkpoint (its
    directory or .ckpt) for the metric `comet`, which also needs `sources` (the source sentences:
    a file or a list, one per reference line); comet_batch_size, device (cpu, cuda) and
    score_cache (a score-cache file, rerank.score_cache; True: the default one; None: none) are
    the model's (and bertscore's, bleurt's and metricx's). metricx_model: a reference-based
    MetricX checkpoint directory (rerank.metrics.metricx) for the metric `metricx`, an error score
    (lower is better), which needs `sources` too; metricx_batch_tokens its padded tokens per batch.
    bertscore_model (a transformers model directory), with bertscore_layer (bert_score's
    num_layers; default bert_score's for the folder's name, else the last) and
    bertscore_rescale (a bert_score baseline file), adds the metric `bertscore` (BERTScore F1);
    bleurt_model (a BLEURT model directory, rerank.metrics.bleurt) the metric `bleurt`: both
    score (hypothesis, reference) pairs and need no sources. wait: if another process is writing an
    output of `rerank.evaluate(outputs=)`, `Evaluation.save` or `rerank.report`, wait until it ends
    (default: refuse, naming it).

    Every rule that needs no data is checked here, once, with one message (InputError naming the
    field as `option`, which the command line says as its flag)."""

    metrics: tuple = option(("bleu", "ter"), _metrics_help(), check=METRICS, cli_default=("bleu", "meteor", "ter"))
    segment_scores: tuple = option((), "segment-level scores computed elsewhere (COMET, BLEURT, human): a TSV with a "
                                   "header of system names (runs: NAME.run1 ...) and one row per segment; NAME is then "
                                   "a metric, the mean of its scores (repeatable)", many=True, metavar="NAME=FILE.tsv")
    lower_better: tuple = option((), "segment-score metrics for which lower is better, e.g. error counts", check=NAMES,
                                 metavar="NAME[,NAME]", default_text="none: higher is better")
    lang: str = option("en", "target language (METEOR: en, de, fr, es, cs)")
    tokenize: str = option("13a", "BLEU tokeniser as sacrebleu -tok, as `rerank tune` and `rerank oracle` ('none' for "
                           "pre-tokenised text)")
    lowercase: bool = option(False, "case-insensitive BLEU and chrF (as sacrebleu -lc)")
    ter_case_sensitive: bool = option(False, "case-sensitive TER (sacrebleu's default is insensitive)")
    meteor: dict | None = option(None, "the METEOR scorer's options", nested=MeteorOptions, prefix="meteor-",
                                 group="METEOR")
    ar: int = option(10000, f"approximate randomisation trials (at most {MAX_TRIALS:,})",
                     check=at_most(POSITIVE_INT, MAX_TRIALS), metavar="N", group=SIGNIFICANCE)
    bootstrap: int = option(1000, f"bootstrap resamples for s_sel and CIs; 0: none (at most {MAX_RESAMPLES:,})",
                            check=at_most(NONNEGATIVE_INT, MAX_RESAMPLES), metavar="N", group=SIGNIFICANCE)
    seed: int = option(12345, "random seed", check=NONNEGATIVE_INT, group=SIGNIFICANCE)
    alpha: float = option(0.05, "significance level for the marks", check=PROBABILITY, group=SIGNIFICANCE)
    second_baseline: str | None = option(None, "a system name: also test every other system against it (\u2021)",
                                         metavar="NAME", group=SIGNIFICANCE)
    holm: bool = option(False, "Holm-Bonferroni correction across systems x metrics", group=SIGNIFICANCE)
    stratified: bool = option(False, "Clark et al.'s stratified randomisation: split each sentence's pooled run outputs "
                              "(exact for independent runs, too many rejections when a system's runs agree on most "
                              "sentences)", default_text="the paired test of each system's runs averaged per sentence",
                              group=SIGNIFICANCE)
    multeval_compat: bool = option(False, "MultEval's randomisation rules: count only strictly greater differences, "
                                   "MultEval's run shuffle for R > 1, a one-run system as R copies (not calibrated: "
                                   "docs/evaluation.md)", group=SIGNIFICANCE)
    sacrebleu_compat: bool = option(False, "the bootstrap p-value by sacrebleu --paired-bs's rule (not calibrated: "
                                    "docs/evaluation.md)", default_text="the p-value that inverts the bootstrap interval",
                                    group=SIGNIFICANCE)
    comet_model: str | None = option(None, "a reference-based COMET checkpoint (COMET-22, XCOMET): its directory "
                                     "(hparams.yaml, checkpoints/model.ckpt) or the .ckpt; adds the metric comet, the "
                                     "mean of its segment scores, each distinct (source, hypothesis, reference) scored "
                                     "once", check=PATH, metavar="PATH", group=COMET_GROUP)
    sources: Any = option(None, "source sentences, one per reference line, for --comet-model and --metricx-model", flag="--src",
                          dest="sources", check=SOURCES, metavar="FILE", group=COMET_GROUP)
    comet_batch_size: int = option(16, "COMET inputs per batch", check=POSITIVE_INT, metavar="N", group=COMET_GROUP)
    bertscore_model: str | None = option(None, "a transformers model directory (config.json, weights, tokenizer): adds "
                                         "the metric bertscore, BERTScore F1 as bert-score computes it, each distinct "
                                         "(hypothesis, reference) scored once", check=PATH, metavar="DIR",
                                         group=PAIR_GROUP)
    bertscore_layer: int | None = option(None, "the layer whose embeddings BERTScore matches (bert_score's num_layers)",
                                         check=NONNEGATIVE_INT, metavar="L", default_text="bert_score's for the "
                                         "directory's name (roberta-large: 17), else the model's last",
                                         group=PAIR_GROUP)
    bertscore_rescale: str | None = option(None, "rescale BERTScore F1 with this bert_score baseline file "
                                           "(rescale_baseline/LANG/MODEL.tsv in the package)", check=PATH,
                                           metavar="FILE", default_text="no rescaling", group=PAIR_GROUP)
    metricx_model: str | None = option(None, "a reference-based MetricX checkpoint directory (MetricX-24 hybrid or "
                                       "MetricX-23 reference: config.json, weights, the mT5 tokenizer, metricx.json; "
                                       "docs/models.md): adds the metric metricx, lower is better, the mean of its "
                                       "segment scores; needs --src", check=PATH, metavar="DIR", group=METRICX_GROUP)
    metricx_batch_tokens: int | None = option(None, "MetricX padded input tokens per batch", check=POSITIVE_INT,
                                              metavar="N", default_text="4096", group=METRICX_GROUP)
    bleurt_model: str | None = option(None, "a BLEURT model directory (this toolkit's format or the PyTorch "
                                      "port's: docs/models.md): adds the metric bleurt", check=PATH, metavar="DIR",
                                      group=PAIR_GROUP)
    device: str | None = option(None, "cpu, cuda or cuda:N, for COMET", cli=False)   # rerank.device.add_device_option
    score_cache: str | bool | None = option(None, "score cache of users' models, shared with `rerank features`",
                                            check=CACHE, metavar="FILE", group=COMET_GROUP,
                                            default_text="$RERANK_CACHE_DIR/scores.sqlite or "
                                            "~/.cache/mlmme-rerank/scores.sqlite")
    wait: bool = wait_option()

    def __post_init__(self) -> None:
        from rerank.metrics.bleu import make_bleu
        from rerank.metrics.registry import EVAL_METRIC_NAMES

        given = self.segment_scores
        if isinstance(given, Mapping):
            given = tuple(f"{name}={os.fspath(path)}" for name, path in given.items())
        for name, value in (("segment_scores", given), ("lower_better", self.lower_better), ("metrics", self.metrics)):
            object.__setattr__(self, name, (value,) if isinstance(value, str) else tuple(value or ()) if isinstance(
                value, (list, tuple)) or value is None else value)
        check_options(self, as_keywords=True)   # each field's kind and range: `ar must be a positive integer, got 0`
        if self.bootstrap == 1:
            raise InputError(f"bootstrap must be 0 (no s_sel or intervals) or at least 2, got {self.bootstrap!r}",
                             option="bootstrap")
        self._check_meteor()
        external = list(self.segment_files())
        metrics = tuple((m.strip() if m.strip() in external else m.strip().lower()) if isinstance(m, str) else m
                        for m in self.metrics)
        unknown = [m for m in metrics if isinstance(m, str) and m not in external and m not in EVAL_METRIC_NAMES]
        if unknown or not (metrics or external):
            raise InputError(f"metrics: unknown metric(s) {', '.join(unknown) or '(none)'} (known: "
                             f"{', '.join(EVAL_METRIC_NAMES)}" + (f"; segment scores: {', '.join(external)}" if external
                                                                  else "") + ")", option="metrics")
        if self.comet_model is not None and "comet" not in metrics:
            metrics += ("comet",)   # comet_model asks for the metric, as segment_scores do for their NAMEs
        if self.metricx_model is not None and "metricx" not in metrics:
            metrics += ("metricx",)   # as comet_model asks for comet
        metrics += tuple(name for name, fields in PAIR_METRICS.items()
                         if getattr(self, fields[0]) is not None and name not in metrics and name not in external)
        metrics += tuple(name for name in external if name not in metrics)
        object.__setattr__(self, "metrics", metrics)
        object.__setattr__(self, "lang", self.lang.lower())
        self._check_comet([m for m in metrics if isinstance(m, str) and m not in external])
        self._check_pair_metrics([m for m in metrics if isinstance(m, str) and m not in external])
        self._check_metricx([m for m in metrics if isinstance(m, str) and m not in external])
        names = [m if isinstance(m, str) else m.name for m in metrics]
        twice = [m for m in names if names.count(m) > 1]
        if twice:
            raise InputError(f"metrics names {twice[0]} twice", option="metrics")
        lower = set(self.lower_better) - set(external)
        if lower:
            raise InputError(f"lower_better {','.join(sorted(lower))}: not a segment_scores NAME", option="lower_better",
                             mentions=("segment_scores",))
        if self.lang not in METEOR_LANGUAGES:
            raise InputError(f"lang: unknown language {self.lang!r} (known: {', '.join(METEOR_LANGUAGES)})", option="lang")
        make_bleu(self.tokenize)
        if self.stratified and self.multeval_compat:
            raise InputError("stratified and multeval_compat are two different tests: choose one", option="stratified",
                             mentions=("multeval_compat",))

    def _check_meteor(self) -> None:
        """The METEOR options name keywords of the scorer."""
        if not self.meteor:
            return
        import inspect

        from rerank.metrics.meteor import MeteorMetric

        known = [p for p in inspect.signature(MeteorMetric.__init__).parameters if p not in ("self", "lang", "progress")]
        unknown = sorted(set(self.meteor) - set(known))
        if unknown:
            raise InputError(f"meteor: unknown METEOR option {unknown[0]!r} (known: {', '.join(known)})", option="meteor")

    def segment_files(self) -> dict[str, str]:
        """{NAME: file} of `segment_scores`, each NAME once and none a built-in metric's (nor comet's
        when comet_model runs the model metric)."""
        from rerank.metrics.external import parse_spec
        from rerank.metrics.registry import METRIC_NAMES

        specs = [parse_spec(spec) for spec in self.segment_scores]
        names = [name for name, _ in specs]
        taken = (*METRIC_NAMES, *(("comet",) if self.comet_model is not None else ()),
                 *(("metricx",) if self.metricx_model is not None else ()),
                 *(name for name, fields in PAIR_METRICS.items() if getattr(self, fields[0]) is not None))
        clash = [n for n in names if n.lower() in taken] or [n for n in names if names.count(n) > 1]
        if clash:
            raise InputError(f"segment_scores {clash[0]}: the name is taken (built-in metrics: {', '.join(taken)}; each "
                             "NAME once)", option="segment_scores")
        return dict(specs)

    def _check_comet(self, names: list[str]) -> None:
        """The comet metric's options (`names`: the metrics named by string, not segment scores): a
        model and sources with it, neither without it."""
        from rerank.device import check_device

        if "comet" not in names:
            given = [f for f in ("comet_model", *(() if "metricx" in names else ("sources",)))
                     if getattr(self, f) is not None]
            given += ["comet_batch_size"] if self.comet_batch_size != 16 else []
            if given:
                raise InputError(f"{given[0]} is given but metrics has no comet ({given[0]} is read by the comet metric "
                                 "only: give comet_model too)", option=given[0], mentions=("metrics", "comet_model"))
            models = ("comet_model", *(fields[0] for fields in PAIR_METRICS.values()), "metricx_model")
            shared = [f for f in ("device", "score_cache") if getattr(self, f) is not None]
            if shared and not any(name in names for name in (*PAIR_METRICS, "metricx")):
                raise InputError(f"{shared[0]} is given but metrics has no model metric ({shared[0]} is read by "
                                 f"{', '.join(('comet', *PAIR_METRICS))} and metricx only: give "
                                 f"{', '.join(models[:-1])} or {models[-1]} too)", option=shared[0],
                                 mentions=("metrics", *models))
            return
        check_device(self.device)
        if self.comet_model is None:
            raise InputError("the metric comet needs comet_model PATH, a reference-based COMET checkpoint (its "
                             "directory or .ckpt)", option="comet_model", mentions=("comet_model",))
        if self.sources is None:
            raise InputError("the metric comet needs the source sentences (sources: a file or a list)", option="sources")

    def _check_pair_metrics(self, names: list[str]) -> None:
        """The options of bertscore and bleurt (`names`: the metrics named by string): each one's
        model with it, none of its options without it."""
        from rerank.device import check_device

        for name, fields in PAIR_METRICS.items():
            if name not in names:
                given = [f for f in fields if getattr(self, f) is not None]
                if given:
                    raise InputError(f"{given[0]} is given but metrics has no {name} ({given[0]} is read by the "
                                     f"{name} metric only: give {fields[0]} too)", option=given[0],
                                     mentions=("metrics", fields[0]))
            elif getattr(self, fields[0]) is None:
                raise InputError(f"the metric {name} needs {fields[0]} DIR, its model directory", option=fields[0],
                                 mentions=(fields[0],))
            else:
                check_device(self.device)

    def _check_metricx(self, names: list[str]) -> None:
        """The metricx metric's options (`names`: the metrics named by string): a model and the
        sources with it, its batch size not without it (sources, device and score_cache are
        checked with comet's)."""
        from rerank.device import check_device

        if "metricx" not in names:
            if self.metricx_batch_tokens is not None:
                raise InputError("metricx_batch_tokens is given but metrics has no metricx (it is read by the metricx "
                                 "metric only: give metricx_model too)", option="metricx_batch_tokens",
                                 mentions=("metrics", "metricx_model"))
            return
        check_device(self.device)
        if self.metricx_model is None:
            raise InputError("the metric metricx needs metricx_model DIR, a reference-based MetricX checkpoint "
                             "directory", option="metricx_model", mentions=("metricx_model",))
        if self.sources is None:
            raise InputError("the metric metricx needs the source sentences (sources: a file or a list)",
                             option="sources")

    def _pair_metric(self, name: str) -> Metric:
        """The metric bertscore or bleurt of these options (its model checked, not loaded)."""
        from rerank.metrics.registry import MODEL_METRICS
        from rerank.score_cache import default_cache_path

        cache = default_cache_path() if self.score_cache is True else self.score_cache
        metric: Any = MODEL_METRICS[name]   # a PairModelMetric class: made from these options
        return metric.from_eval(self, os.fspath(cache) if isinstance(cache, (str, os.PathLike)) else None)

    def file_metrics(self, n: int) -> dict[str, Metric]:
        """{name: metric} of the metrics read from files for `n` sentences: the segment scores (higher
        is better unless lower_better names them) and the model metrics (comet, with the sources read
        and checked against the references' length)."""
        from rerank.metrics.external import read_segment_scores

        found: dict[str, Metric] = {name: read_segment_scores(name, path, n, higher_is_better=name not in self.lower_better)
                                    for name, path in self.segment_files().items()}
        if "comet" in self.metrics and "comet" not in found and self.comet_model is not None:
            found["comet"] = self._comet_metric(n)
        if "metricx" in self.metrics and "metricx" not in found and self.metricx_model is not None:
            found["metricx"] = self._metricx_metric(n)
        for name, fields in PAIR_METRICS.items():
            if name in self.metrics and name not in found and getattr(self, fields[0]) is not None:
                found[name] = self._pair_metric(name)
        return found

    def _sources(self, n: int) -> list[str]:
        """The source sentences of the model metrics that read them (comet, metricx), checked
        against the references' length."""
        from rerank.io import read_lines

        path = os.fspath(self.sources) if isinstance(self.sources, (str, os.PathLike)) else None
        sources = read_lines(path) if path is not None else list(self.sources)
        if len(sources) != n or not all(isinstance(line, str) for line in sources):
            raise InputError(f"{len(sources)} source sentences for {n} reference lines" if len(sources) != n
                             else "sources must be strings, one per sentence", path, option="sources")
        return sources

    def _metricx_metric(self, n: int) -> Metric:
        from rerank.metrics.metricx import MetricXMetric
        from rerank.score_cache import default_cache_path

        cache = default_cache_path() if self.score_cache is True else self.score_cache
        assert self.metricx_model is not None  # _check_metricx: the metric needs it
        return MetricXMetric(os.fspath(self.metricx_model), self._sources(n), batch_tokens=self.metricx_batch_tokens,
                             device=self.device, cache=os.fspath(cache) if isinstance(cache, (str, os.PathLike)) else None)

    def _comet_metric(self, n: int) -> Metric:
        from rerank.metrics.comet import COMETMetric
        from rerank.score_cache import default_cache_path

        sources = self._sources(n)
        cache = default_cache_path() if self.score_cache is True else self.score_cache
        model = self.comet_model
        assert model is not None  # _check_comet: the metric comet needs it
        return COMETMetric(os.fspath(model), sources, batch_size=self.comet_batch_size, device=self.device,
                           cache=os.fspath(cache) if isinstance(cache, (str, os.PathLike)) else None)

    def inputs(self) -> list[str]:
        """The files an evaluation with these options reads besides the references and the systems:
        segment scores, sources, the COMET model, METEOR's jar and resources (for the check that no
        output is an input)."""
        values = [*self.segment_files().values(), self.sources, self.comet_model, self.metricx_model, self.bertscore_model,
                  self.bertscore_rescale, self.bleurt_model,
                  *((self.meteor or {}).get(k) for k in ("jar", "resources"))]
        return [os.fspath(v) for v in values if isinstance(v, (str, os.PathLike))]

    @classmethod
    def make(cls, options: EvalOptions | None = None, **keywords: Any) -> EvalOptions:
        """`options` (default: the defaults) with `keywords` replacing its fields; an unknown keyword
        is an InputError naming the fields."""
        return with_fields(cls, options, "evaluation option", **keywords)


def check_plot(bootstrap: int) -> None:
    """The delta plot draws each system's bootstrap interval: it needs `bootstrap` >= 2 (InputError
    about the option plot)."""
    if bootstrap < 2:
        raise InputError(f"plot shows 95% confidence intervals: it needs bootstrap >= 2, got {bootstrap}", option="plot",
                         mentions=("bootstrap",))


def evaluate_systems(refs: Sequence[Sequence[str]], baseline_runs: Sequence[Sequence[str]], systems: dict,
                     options: EvalOptions | None = None, *, baseline_name: str = "baseline",
                     progress: Progress = False, **keywords: Any) -> ResultTable:
    """Score `systems` ({name: [run hypotheses, ...]}) and the baseline against `refs` as `options`
    (an EvalOptions; `keywords` replace its fields) say.

    `refs` is a list of reference streams (refs[j][i]: reference j of sentence i). Each system
    has its own number of runs (one: a deterministic system such as a decoder 1-best), and every
    comparison is tested on the two systems' own runs (`rerank.significance`), so a pair's
    p-value, interval and marks do not depend on the other systems of the table. Only `holm`
    adjusts over a family: every tested (system, metric) cell of one comparison.
    `second_baseline` names one of `systems`; it is tested against every other system for the
    double-dagger mark.
    """
    o = EvalOptions.make(options, **keywords)
    refs = _check_references(refs)
    n = len(refs[0])
    all_systems = _collect_systems(baseline_name, baseline_runs, systems, n)
    second_baseline, bootstrap, seed = o.second_baseline, o.bootstrap, o.seed
    if second_baseline is not None and second_baseline not in systems:
        raise InputError(f"second_baseline {second_baseline!r} is not a system name "
                         f"(systems: {', '.join(systems) or 'none'})", option="second_baseline")
    read = o.file_metrics(n)   # segment scores and model metrics
    metric_objs = [m if isinstance(m, Metric) else read.get(m) or make_metric(
        m, lang=o.lang, tokenize=o.tokenize, lowercase=o.lowercase, ter_case_sensitive=o.ter_case_sensitive,
        meteor_options=o.meteor) for m in o.metrics]
    for metric in metric_objs:  # segment scores read elsewhere: every system's columns, before any work
        if hasattr(metric, "system_stats"):
            for sname, runs in all_systems.items():
                metric.system_stats(sname, len(runs), n)
    stats = _statistics(metric_objs, refs, all_systems, progress)
    weights = Resamples(seed, bootstrap if bootstrap >= 2 else 0, n, progress)  # = bootstrap_weights(default_rng(seed), ...)
    weights.prefetch([run for st in stats.values() for run in as_runs(st)])  # one pass over the resamples
    cells = {(sname, metric.name): _run_cell(metric, stats[(sname, metric.name)], weights)
             for sname in all_systems for metric in metric_objs}
    tested = [mo for mo in metric_objs if mo.info.quality]
    ar_options = {"trials": o.ar, "seed": seed, "stratified": o.stratified, "multeval_compat": o.multeval_compat,
                  "progress": progress}
    pooled_diffs = {}
    for comp, attr in ((baseline_name, "p"), (second_baseline, "p2")):
        if comp is not None:
            others = [s for s in all_systems if s != comp and not (attr == "p2" and s == baseline_name)]
            pooled_diffs.update(_ar_p_values(cells, stats, tested, comp, others, attr, ar_options))
            if o.holm:
                _holm_adjust(cells, attr, [(s, m.name) for s in all_systems for m in tested])
    boot_diffs = {}
    if bootstrap >= 2:
        for sname in all_systems:
            if sname != baseline_name:
                boot_diffs.update(_bootstrap_deltas(cells, stats, metric_objs, baseline_name, sname, weights,
                                                    o.sacrebleu_compat))
            if second_baseline is not None and sname not in (baseline_name, second_baseline):
                for metric in tested:
                    bs = paired_bootstrap(metric, stats[(second_baseline, metric.name)], stats[(sname, metric.name)],
                                          weights, o.sacrebleu_compat)
                    cells[(sname, metric.name)].bs_p2 = bs.p_value
                    boot_diffs[(second_baseline, sname, metric.name)] = bs.delta_mean
    for sname in all_systems:
        for metric in tested:
            comparisons = ((baseline_name, MARK_BASE, "p", "bs_p"), (second_baseline, MARK_SECOND, "p2", "bs_p2"))
            cell = cells[(sname, metric.name)]
            cell.marks = _marks(cell, pooled_diffs, boot_diffs, sname, metric, comparisons, o.alpha)
    names = [m.name for m in metric_objs]
    config = {"ar_trials": o.ar, "bootstrap": bootstrap, "seed": seed, "stratified": o.stratified,
              "multeval_compat": o.multeval_compat,
              "sacrebleu_compat": o.sacrebleu_compat, "holm": o.holm, "alpha": o.alpha, "lang": o.lang,
              "marks": "randomisation and bootstrap" if bootstrap >= 2 else "randomisation",
              "runs": {name: len(runs) for name, runs in all_systems.items()}, "sentences": n,
              "references": len(refs)}
    if "metricx" in read and o.metricx_model is not None:
        from rerank.metrics.metricx import BATCH_TOKENS

        config["metricx"] = {"model": os.fspath(o.metricx_model), "batch_tokens": o.metricx_batch_tokens or BATCH_TOKENS,
                             "device": o.device or "cpu"}
    from rerank.metrics.pair_models import PairModelMetric

    config.update({name: metric.record() for name, metric in read.items() if isinstance(metric, PairModelMetric)})
    if "comet" in read and o.comet_model is not None:
        config["comet"] = {"model": os.fspath(o.comet_model), "batch_size": o.comet_batch_size, "device": o.device or "cpu",
                           **({"sources": os.fspath(o.sources)} if isinstance(o.sources, (str, os.PathLike)) else {})}
    return ResultTable(systems=list(all_systems), metrics=names, cells=cells, baseline=baseline_name,
                       second_baseline=second_baseline, signatures={m.name: m.signature() for m in metric_objs},
                       higher_is_better={m.name: m.higher_is_better for m in metric_objs}, config=config,
                       decimals={m.name: getattr(m, "decimals", 2) for m in metric_objs}, stats=stats,
                       metric_objects={m.name: m for m in metric_objs})


def _check_references(refs: Sequence[Sequence[str]]) -> list[Sequence[str]]:
    """The reference streams as lists; all non-empty and of one length."""
    refs = [list(r) for r in refs]
    n = len(refs[0])
    if n == 0:
        raise InputError("the references are empty")
    for j, r in enumerate(refs):
        if len(r) != n:
            raise InputError(f"reference {j + 1} has {len(r)} lines, reference 1 has {n}")
    return refs


def _collect_systems(baseline_name: str, baseline_runs: Sequence[Sequence[str]], systems: dict, n: int) -> dict:
    """{name: runs} with the baseline first; each run has one line per reference line."""
    all_systems = {baseline_name: [list(h) for h in baseline_runs]}
    for name, runs in systems.items():
        if name in all_systems:
            raise InputError(f"two systems are named {name!r}")
        all_systems[name] = [list(h) for h in runs]
    for name, runs in all_systems.items():
        if not runs:
            raise InputError(f"system {name!r} has no runs")
        for i, hyps in enumerate(runs):
            if len(hyps) != n:
                raise InputError(f"system {name!r} run {i + 1} has {len(hyps)} lines, the references have {n}")
    return all_systems


def _statistics(metric_objs: list[Metric], refs: Sequence[Sequence[str]], all_systems: dict, progress: Progress) -> dict:
    """{(system, metric name): statistics (R, n, k)}, every run scored once per metric."""
    all_texts = [line for stream in refs for line in stream] + \
        [line for runs in all_systems.values() for hyps in runs for line in hyps]
    for metric in metric_objs:
        metric.prepare(all_texts)
        if hasattr(metric, "prepare_systems"):  # a model metric scores every system's distinct inputs at once
            metric.prepare_systems([hyps for runs in all_systems.values() for hyps in runs], refs)
    iterator = track([(s, metric) for s in all_systems for metric in metric_objs], progress, "statistics",
                     unit="system-metric")
    n = len(refs[0])
    return {(sname, metric.name): metric.system_stats(sname, len(all_systems[sname]), n)
            if hasattr(metric, "system_stats") else np.stack([metric.sentence_stats(h, refs) for h in all_systems[sname]])
            for sname, metric in iterator}


def _run_cell(metric: Metric, stats: np.ndarray, weights: Resamples) -> Cell:
    """Mean, s_sel and s_opt of one system and metric, from its own runs (s_opt: None for one run)."""
    rs = run_statistics(metric, stats, weights)
    return Cell(score=rs.mean, s_sel=rs.s_sel, s_opt=rs.s_opt, runs=rs.run_scores)


def _ar_p_values(cells: dict, stats: dict, tested: list[Metric], comp: str, others: list[str], attr: str,
                 ar_options: dict) -> dict:
    """AR p-values of each system in `others` against `comp`, into `attr` ("p" or "p2") and its _raw.

    Returns {(comp, system, metric name): score difference system - comp from pooled statistics},
    the difference the test judged.
    """
    diffs = {}
    for sname in others:
        results = approximate_randomization(tested, [stats[(comp, m.name)] for m in tested],
                                            [stats[(sname, m.name)] for m in tested], **ar_options)
        for m, r in zip(tested, results):
            setattr(cells[(sname, m.name)], attr, r.p_value)
            setattr(cells[(sname, m.name)], attr + "_raw", r.p_value)
            diffs[(comp, sname, m.name)] = r.observed_diff
    return diffs


def _holm_adjust(cells: dict, attr: str, keys: list) -> None:
    """Holm-Bonferroni over every tested (system, metric) cell of one comparison."""
    keys = [k for k in keys if getattr(cells[k], attr) is not None]
    adjusted = holm_bonferroni([getattr(cells[k], attr) for k in keys])
    for k, p in zip(keys, adjusted):
        setattr(cells[k], attr, p)


def _bootstrap_deltas(cells: dict, stats: dict, metric_objs: list[Metric], baseline: str, sname: str,
                      weights: Resamples, sacrebleu_compat: bool = False) -> dict:
    """Improvement over the baseline (sign flipped for lower-is-better) with its bootstrap interval.
    Returns {(baseline, system, metric name): bootstrap mean of system - baseline}."""
    diffs = {}
    for metric in metric_objs:
        m = metric.name
        c = cells[(sname, m)]
        bs = paired_bootstrap(metric, stats[(baseline, m)], stats[(sname, m)], weights, sacrebleu_compat)
        sign = 1.0 if metric.higher_is_better else -1.0
        lo, hi = sorted((sign * bs.delta_low, sign * bs.delta_high))
        c.delta = sign * (c.score - cells[(baseline, m)].score)
        c.delta_low, c.delta_high = lo, hi
        c.bs_p, c.bs_mean, c.bs_ci = bs.p_value, bs.mean, bs.ci
        diffs[(baseline, sname, m)] = bs.delta_mean
    return diffs


def _marks(cell: Cell, pooled_diffs: dict, boot_diffs: dict, sname: str, metric: Metric,
           comparisons: Sequence[tuple[str | None, str, str, str]],
           alpha: float) -> str:
    """Dagger marks of one cell: one per (comparison system, mark, AR p attribute, bootstrap p
    attribute) that the cell is better than by both tests at `alpha`.

    A mark needs the randomisation test (p < alpha, the direction of the difference it judged: the
    two systems' average runs) and, when the bootstrap ran, the paired bootstrap too (its p < alpha,
    i.e. the interval of the improvement clear of zero, on the same side). Two tests of one
    hypothesis that disagree near alpha leave a pair unmarked, so no mark stands beside an interval
    that crosses zero.
    """
    better = (lambda d: d > 0) if metric.higher_is_better else (lambda d: d < 0)
    marks = ""
    for comp, mark, attr, bs_attr in comparisons:
        p, key = getattr(cell, attr), (comp, sname, metric.name)
        if comp is None or p is None or p >= alpha or not better(pooled_diffs[key]):
            continue
        bs_p = getattr(cell, bs_attr)
        if key in boot_diffs and (bs_p is None or bs_p >= alpha or not better(boot_diffs[key])):
            continue
        marks += mark
    return marks


def plot_deltas(table: ResultTable, path: str) -> None:
    """PNG: each system's improvement over the baseline with its bootstrap 95% interval, one panel per metric."""
    from rerank.htmlreport.figures import delta_figure, save_png

    save_png(delta_figure(table), path)
