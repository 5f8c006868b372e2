"""Assemble the HTML report of an evaluation (see rerank/htmlreport/__init__.py)."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rerank.errors import InputError
from rerank.htmlreport import analysis, figures
from rerank.htmlreport.page import esc, figure, page, significance_table, signed, table, word_diff
from rerank.options import MAPPING, PATH, POSITIVE_INT, Check, check_options, option, split_names, with_fields

LOWER_BETTER = Check("true, false or the column's NAME", str, lambda v: isinstance(v, (bool, str)), "a name")


def _oracle_help() -> str:
    from rerank.metrics.registry import metric_names

    return ("what the oracle curve of the --nbest lists picks and scores by, as `rerank oracle --metric`: "
            f"{', '.join(metric_names(quality=True, builtin=True))}, or column:NAME for the lists' column NAME")


@dataclass(frozen=True)
class ReportOptions:
    """What the HTML report of an evaluation shows (`build_report`, `rerank.Evaluation.to_html`,
    `rerank.report`, `rerank report`). Each field is declared once (rerank.options): the command's
    flags, defaults, help and checks come from it.

    title; examples: changed sentences shown per better/worse section; sentence_metric: the metric
    of the sentence-level gains (default: the table's first but length); oracle_metric: what the
    oracle curve of the n-best systems picks and scores by, as `rerank.oracle`'s `metric` (bleu,
    chrf, chrf++, ter, meteor, `column:NAME` of the lists; None: bleu), oracle_lower_better: lower
    values of that column are better (True, or the column's NAME); the word-frequency buckets count
    the words of `freq_corpus` (a text file), or `frequencies` (word counts, named `freq_source`),
    else of the references; length_edges, freq_edges: the buckets' edges (increasing integers,
    comma-separated from a flag); command_line: shown with the signatures.

    Every rule that needs no evaluation is checked here (InputError naming the field as `option`);
    `check_evaluation` checks what the options ask of one."""

    title: str = option("rerank report", "page title")
    examples: int = option(30, "changed sentences shown in each better/worse section of a system", check=POSITIVE_INT,
                           metavar="N")
    sentence_metric: str | None = option(None, "metric of the sentence-level gains (BLEU: BLEU+1)", metavar="NAME",
                                         default_text="the first metric of --metrics")
    oracle_metric: str | None = option(None, _oracle_help(), metavar="METRIC",
                                       default_text="bleu, sentence BLEU+1 picks and corpus BLEU")
    oracle_lower_better: bool = option(None, "with --oracle-metric column:NAME: lower values of the column NAME are "
                                       "better (--lower-better is for --segment-scores)", check=LOWER_BETTER,
                                       metavar="NAME", default_text="higher is better")
    freq_corpus: str | None = option(None, "text whose word counts make the frequency buckets, e.g. the training target "
                                     "side", check=PATH, metavar="FILE", default_text="the references")
    length_edges: tuple[int, ...] = option(analysis.LENGTH_EDGES, "bucket edges of the mean reference length in tokens",
                                           flag="--length-buckets", dest="length_edges", metavar="E1,E2,...")
    freq_edges: tuple[int, ...] = option(analysis.FREQ_EDGES, "bucket edges of word frequencies", flag="--freq-buckets",
                                         dest="freq_edges", metavar="E1,E2,...")
    frequencies: Mapping[str, int] | None = option(None, "word counts for the frequency buckets", check=MAPPING,
                                                    cli=False)
    freq_source: str = option("the references", "what the word counts are of (shown on the page)", cli=False)
    command_line: str | None = option(None, "the command that made the page", cli=False)

    def __post_init__(self) -> None:
        from rerank.metrics.registry import parse_objective

        for name in ("length_edges", "freq_edges"):
            object.__setattr__(self, name, _edges(getattr(self, name), name))
        check_options(self, as_keywords=True)
        lower = self.oracle_lower_better
        if isinstance(lower, str):
            names = set(split_names(lower))
            kind, column = parse_objective(self.oracle_metric or "bleu", "oracle_metric")
            if names and (kind != "column" or names != {column}):
                raise InputError(f"oracle_lower_better {','.join(sorted(names))}: not the column of oracle_metric "
                                 "(give oracle_metric column:NAME oracle_lower_better NAME)", option="oracle_lower_better",
                                 mentions=("oracle_metric", "oracle_lower_better"))
            lower = bool(names)
        object.__setattr__(self, "oracle_lower_better", bool(lower))
        parse_objective(self.oracle_metric or "bleu", "oracle_metric")
        if self.freq_corpus is not None:
            object.__setattr__(self, "freq_source", os.path.basename(os.fspath(self.freq_corpus)))

    @classmethod
    def make(cls, options: ReportOptions | None = None, **keywords: Any) -> ReportOptions:
        """`options` (default: the defaults) with `keywords` replacing its fields; an unknown keyword
        is an InputError naming the fields."""
        return with_fields(cls, options, "report option", **keywords)

    def check_evaluation(self, metrics: Sequence[str], nbests: bool) -> None:
        """What these options ask of an evaluation with `metrics` (their names) and, if `nbests`, n-best
        systems: the sentence metric is one of the metrics, an oracle metric needs n-best systems."""
        from rerank.metrics.registry import is_quality

        names = [m for m in metrics if is_quality(m)]
        if self.sentence_metric is not None and self.sentence_metric not in names:
            raise InputError(f"sentence_metric {self.sentence_metric}: not one of the scored metrics "
                             f"({', '.join(names) or 'none'})", option="sentence_metric")
        if (self.oracle_metric is not None or self.oracle_lower_better) and not nbests:
            raise InputError("oracle_metric: the oracle curve is of n-best lists, and no system is an n-best list "
                             "with weights", option="oracle_metric")

    def inputs(self) -> list[str]:
        """The files the page reads (the frequency corpus)."""
        return [os.fspath(self.freq_corpus)] if self.freq_corpus is not None else []


def _edges(value: object, name: str) -> tuple[int, ...]:
    """Bucket edges: increasing integers >= 1, given as a sequence or as 'E1,E2,...' (a flag's text)."""
    if isinstance(value, str):
        text = value
        try:
            values: tuple = tuple(int(x) for x in text.split(",") if x.strip())
        except ValueError:
            raise InputError(f"{name} {text!r}: expected increasing integers, e.g. 10,20,30", option=name) from None
    else:
        values = tuple(value) if isinstance(value, Sequence) else ()
        text = ",".join(map(str, values)) if values else repr(value)
    if (not values or not all(isinstance(v, int) and not isinstance(v, bool) for v in values) or values[0] < 1
            or any(b <= a for a, b in zip(values, values[1:]))):
        raise InputError(f"{name} {text!r}: expected increasing integers >= 1, e.g. 10,20,30", option=name)
    return values


def build_report(result, refs: Sequence[Sequence[str]], outputs: dict, options: ReportOptions | None = None, *,
                 nbests: dict | None = None, tokenize: str = "13a", lowercase: bool = False,
                 oracle_options: Mapping[str, Any] | None = None, **keywords: Any) -> str:
    """The whole page as a string.

    `result`: the ResultTable of `rerank.evaluation.evaluate_systems` (it keeps the statistics);
    `refs`: the reference streams; `outputs`: {system: [hypotheses of each run]} for every system of
    the table, baseline included; `options`: a ReportOptions (`keywords` replace its fields:
    examples=20, oracle_metric="ter"); `nbests`: {system: (NBestList, model score of each
    hypothesis or None for the list's order)} for the oracle curve; `tokenize`, `lowercase`: BLEU's
    (the buckets' and the sentence scores' tokens). The oracle curve scores a metric the table
    scored with the table's metric object (its options and signature), another with
    `oracle_options` (make_metric's lang, ter_case_sensitive, meteor_options; lang defaults to the
    table's). InputErrors about the oracle name the options `oracle_metric` and `oracle_lower_better`.
    """
    from rerank import __version__
    from rerank.metrics.bleu import make_bleu

    o = ReportOptions.make(options, **keywords)
    o.check_evaluation(result.metrics, bool(nbests))
    tokenizer = make_bleu(tokenize, lowercase).tokenizer
    frequencies = Counter(o.frequencies) if o.frequencies is not None else None
    if o.freq_corpus is not None:
        from rerank.io import read_lines

        frequencies = analysis.word_counts(read_lines(os.fspath(o.freq_corpus)), tokenizer, lowercase)
    if frequencies is None:
        frequencies = analysis.word_counts([r for stream in refs for r in stream], tokenizer, lowercase)
    metric = o.sentence_metric or next((m for m in result.metrics if result.quality(m)), result.metrics[0])
    sections = [("significance", "Significance", _significance(result))]
    lengths = analysis.drop_empty(analysis.length_buckets(result, refs, tokenizer, o.length_edges))
    if lengths.scores:
        sections.append(("length", "By sentence length", _buckets(lengths, result, "length")))
    words = analysis.drop_empty(analysis.word_buckets({s: outputs[s] for s in result.systems}, result.baseline, refs,
                                                      tokenizer, frequencies, lowercase, o.freq_edges, o.freq_source))
    sections.append(("words", "By word frequency", _buckets(words, result, "words")))
    for k, name in enumerate(s for s in result.systems if s != result.baseline):
        sections.append((f"changes-{k + 1}", f"{name}: changed sentences",
                         _changes(result, refs, outputs, name, metric, o.examples, k)))
    if nbests:
        sections.append(("oracle", "Oracle", _oracle(nbests, refs, tokenize, lowercase, result, o.oracle_metric or "bleu",
                                                      o.oracle_lower_better, oracle_options)))
    sections.append(("signatures", "Signatures and command", _signatures(result, o.command_line, __version__)))
    cfg = result.config
    intro = (f'<p class="muted">{cfg.get("sentences")} sentences, {len(refs)} reference(s), '
             f'{_runs_text(cfg.get("runs"))}; baseline (\u2020) {esc(result.baseline)}'
             + (f", second baseline (\u2021) {esc(result.second_baseline)}" if result.second_baseline else "")
             + f"; mlmme-rerank {esc(__version__)}.</p>")
    return page(o.title or "rerank report", sections, intro)

def _runs_text(runs) -> str:
    """Each system's run count ("3 runs per system", or "runs: baseline 1, mira 3")."""
    if not isinstance(runs, dict):
        return f"{runs} run(s) per system"
    counts = set(runs.values())
    if len(counts) == 1:
        return f"{counts.pop()} run(s) per system"
    return "runs: " + ", ".join(f"{esc(name)} {r}" for name, r in runs.items())


def write_report(path: str, text: str) -> None:
    from rerank.io import atomic_write

    with atomic_write(path) as fh:
        fh.write(text)


def _significance(result) -> str:
    legend = result._legend()[: -len(result.metrics) or None]
    parts = [significance_table(result), "<ul class=\"muted\">" + "".join(f"<li>{esc(x)}</li>" for x in legend)
             + "<li>\u0394: the improvement over the baseline, system minus baseline (TER and other "
             "lower-is-better metrics: baseline minus system), with the 2.5\u201397.5% interval of the paired "
             "bootstrap</li></ul>"]
    systems = [s for s in result.systems if s != result.baseline]
    if systems and any(result.cells[(s, m)].delta_low is not None for s in systems for m in result.metrics):
        parts.append(figure(figures.to_svg(figures.delta_figure(result), "deltas"),
                            "Improvement of each system over the baseline with its bootstrap 95% interval."))
    return "\n".join(parts)


def _buckets(buckets, result, salt: str) -> str:

    parts = []
    others = [s for s in result.systems if s != result.baseline]
    for m, scores in buckets.scores.items():
        d = result.decimals.get(m, 2)
        header = ["bucket", esc(buckets.count_name), esc(result.baseline)] + [esc(s) for s in others]
        rows = []
        for b, label in enumerate(buckets.labels):
            base = scores[result.baseline][b]
            row = [esc(label), str(buckets.counts[b]), "-" if base is None else f"{base:.{d}f}"]
            for s in others:
                v = scores[s][b]
                row.append("-" if v is None else f"{v:.{d}f} ({signed(buckets.deltas[m][s][b], d)})")
            rows.append(row)
        parts.append(table(header, rows, caption=result.display(m)))
    parts = [f'<p class="muted">Buckets by {esc(buckets.title)} (empty buckets left out).</p>',
             '<div class="row">' + "\n".join(parts) + "</div>"]
    if others:
        fig = figures.bucket_figure(buckets, result.baseline, {m: result.display(m) for m in buckets.deltas})
        parts.append(figure(figures.to_svg(fig, f"buckets-{salt}"), "Improvement over the baseline per bucket "
                            "(positive: better; lower-is-better metrics are turned around)."))
    return "\n".join(parts)


def _changes(result, refs, outputs: dict, name: str, metric: str, examples: int, k: int) -> str:

    mo = result.metric_objects[metric]
    base_scores = analysis.sentence_scores(mo, result.stats[(result.baseline, metric)][0])
    sys_scores = analysis.sentence_scores(mo, result.stats[(name, metric)][0])
    base, hyps = outputs[result.baseline][0], outputs[name][0]
    ch = analysis.changed_sentences(base, hyps, base_scores, sys_scores, mo.higher_is_better)
    label = getattr(mo, "sentence_label", None) or result.display(metric)
    changed = len(ch.better) + len(ch.worse) + ch.tied
    runs = " (first run of each)" if max(len(outputs[name]), len(outputs[result.baseline])) > 1 else ""
    parts = [f"<p>{changed} of {len(base)} outputs differ from {esc(result.baseline)}{runs}: "
             f'<span class="pos">{len(ch.better)} better</span>, <span class="neg">{len(ch.worse)} worse</span>, '
             f"{ch.tied} with the same score, by sentence-level {esc(label)}.</p>"]
    changed_gains = ch.gains[[i for i in range(len(base)) if base[i] != hyps[i]]]
    parts.append(figure(figures.to_svg(figures.gain_histogram(changed_gains, label, result.baseline), f"gain-{k}"),
                        f"Sentence-level {label} gain of the changed sentences."))
    d = result.decimals.get(metric, 2)
    for kind, rows in (("better", ch.better), ("worse", ch.worse)):
        shown = rows[:examples]
        items = [_example(i, kind, refs, (base, hyps), (base_scores[i], sys_scores[i], ch.gains[i]), d,
                          (result.baseline, name)) for i in shown]
        more = f", the {len(shown)} largest shown" if len(rows) > len(shown) else ""
        parts.append(f'<details open class="{kind}"><summary>{kind.capitalize()} ({len(rows)}{more})</summary>\n'
                     + "\n".join(items) + "\n</details>")
    return "\n".join(parts)


def _example(i: int, kind: str, refs, outputs: tuple, scores: tuple[float, float, float], d: int,
             names: tuple[str, str]) -> str:
    """Sentence `i` of a better/worse section: its gain and scores (baseline, system, gain), the
    references and the two `outputs` (baseline's, system's lines) with the differing words marked
    (`page.word_diff`: a dropped baseline word the references hold is never struck)."""
    (base, hyps), (base_score, sys_score, gain), (base_name, sys_name) = outputs, scores, names
    left, right = word_diff(base[i], hyps[i], [stream[i] for stream in refs])
    lines = [f'<div class="muted">sentence {i + 1}: gain {signed(float(gain), d)} '
             f"({base_score:.{d}f} \u2192 {sys_score:.{d}f})</div>"]
    for j, stream in enumerate(refs):
        label = "reference" if len(refs) == 1 else f"reference {j + 1}"
        lines.append(f'<div class="line"><span class="label">{label}</span> {esc(stream[i])}</div>')
    lines.append(f'<div class="line"><span class="label">{esc(base_name)}</span> {left}</div>')
    lines.append(f'<div class="line"><span class="label">{esc(sys_name)}</span> {right}</div>')
    return f'<div class="example {kind}">' + "".join(lines) + "</div>"


def _oracle_scores(nbest, refs, tokenize: str, lowercase: bool, result, metric: str, lower_better: bool,
                   options: Mapping[str, Any] | None):
    """`rerank.oracles.oracle_scores` of one list, with the table's metric object when the table scored
    the metric; its InputErrors about `metric` and `lower_better` are said as the report's options."""
    from rerank.oracles import oracle_scores
    from rerank.errors import InputError
    from rerank.metrics.registry import parse_objective

    try:
        kind, name = parse_objective(metric, "oracle_metric")
        keywords = {"lang": result.config.get("lang", "en"), **(options or {})}
        scorer = result.metric_objects.get(name) if kind == "metric" else None
        if scorer is not None and getattr(scorer, "name", None) == name and hasattr(scorer, "sentence_stats"):
            keywords = {"scorer": scorer}
        return oracle_scores(nbest, refs, metric, tokenize=tokenize, lowercase=lowercase, lower_better=lower_better,
                             **keywords)
    except InputError as exc:
        if exc.option not in ("metric", "lower_better"):
            raise
        raise InputError("oracle_" + exc.problem, exc.path, exc.line, option="oracle_" + exc.option) from None


def _oracle(nbests: dict, refs, tokenize: str, lowercase: bool, result, metric: str = "bleu", lower_better: bool = False,
            options: Mapping[str, Any] | None = None) -> str:
    curves, scores = {}, None
    for name, (nb, model_scores) in nbests.items():
        scores = _oracle_scores(nb, refs, tokenize, lowercase, result, metric, lower_better, options)
        curves[name] = analysis.top_k_curve(scores, nb.offsets, model_scores)
    assert scores is not None  # one list at least
    display, d = scores.display, scores.decimals
    k_max = max(len(ks) for ks, _ in curves.values())
    shown = sorted({k for k in (1, 2, 3, 5, 10, 20, 50, 100, 200, 500, 1000) if k <= k_max} | {k_max})
    header = ["n-best system"] + [f"k = {k}" for k in shown]
    rows = [[esc(name)] + [f"{values[k - 1]:.{d}f}" if k <= len(values) else "-" for k in shown]
            for name, (_, values) in curves.items()]
    ranked = "among the top k of its list (ranked by the model score under the given weights)"
    side = "highest" if scores.higher_is_better else "lowest"
    if scores.sentence_label:
        text = (f"Oracle {esc(display)}: each sentence's best hypothesis by sentence {esc(scores.sentence_label)} "
                f"{ranked}, corpus {esc(display)} of those picks")
    elif scores.metric.startswith("column:"):
        text = (f"Oracle {esc(display)}: each sentence's hypothesis with the {side} value of the n-best column "
                f"{esc(scores.metric[len('column:'):])} {ranked}, the mean of the picked values over the sentences")
    else:
        text = (f"Oracle {esc(display)}: each sentence's best hypothesis by its sentence-level {esc(display)} (the "
                f"{side}) {ranked}, the corpus {esc(display)} of those picks")
    lower = "" if scores.higher_is_better else " Lower is better: the curve goes down as k grows."
    return "\n".join([
        f'<p class="muted">{text}; k = 1 is the system\'s own 1-best.{lower}</p>',
        table(header, rows, caption=f"Oracle {display} of the top k hypotheses"),
        figure(figures.to_svg(figures.oracle_figure(curves, display, scores.higher_is_better), "oracle"),
               f"Oracle {display} against k.")])


def _signatures(result, command: str | None, version: str) -> str:

    rows = [[esc(result.display(m)), f"<code>{esc(result.signatures[m])}</code>"] for m in result.metrics]
    cfg = result.config
    settings = (f"{cfg.get('ar_trials')} randomisation trials, {cfg.get('bootstrap')} bootstrap resamples, "
                f"seed {cfg.get('seed')}, alpha {cfg.get('alpha')}" + (", Holm-Bonferroni" if cfg.get("holm") else "")
                + (", MultEval-compatible" if cfg.get("multeval_compat") else "")
                + (", sacrebleu's bootstrap p-value" if cfg.get("sacrebleu_compat") else ""))
    parts = [table(["metric", "signature"], rows), f'<p class="muted">{esc(settings)}; mlmme-rerank {esc(version)}.</p>']
    if command:
        parts.append(f'<p>Made with:</p><pre id="command">{esc(command)}</pre>')
    return "\n".join(parts)
