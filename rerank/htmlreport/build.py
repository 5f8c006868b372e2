"""Assemble the HTML report of an evaluation (see rerank/htmlreport/__init__.py)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from rerank.htmlreport import analysis, figures
from rerank.htmlreport.page import esc, figure, page, significance_table, signed, table, word_diff


def build_report(result, refs: Sequence[Sequence[str]], outputs: dict, *, nbests: dict | None = None,
                 tokenize: str = "13a", lowercase: bool = False, frequencies: Counter | None = None,
                 freq_source: str = "the references", examples: int = 30, sentence_metric: str | None = None,
                 command: str | None = None, title: str | None = None,
                 length_edges: Sequence[int] = analysis.LENGTH_EDGES,
                 freq_edges: Sequence[int] = analysis.FREQ_EDGES, oracle_metric: str = "bleu",
                 oracle_lower_better: bool = False, oracle_options: Mapping[str, Any] | None = None) -> str:
    """The whole page as a string.

    `result`: the ResultTable of `rerank.evaluation.evaluate_systems` (it keeps the statistics);
    `outputs`: {system: [hypotheses of each run]} for every system of the table, baseline included;
    `nbests`: {system: (NBestList, model score of each hypothesis or None for the list's order)}
    for the oracle curve; `frequencies`: word counts for the frequency buckets (default: the
    references, tokenised as BLEU); `examples`: sentences shown per better/worse section.
    `oracle_metric`: what the oracle curve picks and scores by, as `rerank.oracle`'s `metric` (bleu,
    chrf, chrf++, ter, meteor, `column:NAME` of the n-best lists; `oracle_lower_better`: lower values
    of that column are better). A metric the table scored is scored with the table's metric object
    (its options and signature); another is made with `oracle_options` (make_metric's lang,
    ter_case_sensitive, meteor_options; lang defaults to the table's). InputErrors about the oracle
    name the options `oracle_metric` and `oracle_lower_better`.
    """
    from rerank import __version__
    from rerank.metrics.bleu import make_bleu

    tokenizer = make_bleu(tokenize, lowercase).tokenizer
    if frequencies is None:
        frequencies = analysis.word_counts([r for stream in refs for r in stream], tokenizer, lowercase)
    metric = sentence_metric or next((m for m in result.metrics if m != "length"), result.metrics[0])
    sections = [("significance", "Significance", _significance(result))]
    lengths = analysis.drop_empty(analysis.length_buckets(result, refs, tokenizer, length_edges))
    if lengths.scores:
        sections.append(("length", "By sentence length", _buckets(lengths, result, "length")))
    words = analysis.drop_empty(analysis.word_buckets({s: outputs[s] for s in result.systems}, result.baseline, refs,
                                                      tokenizer, frequencies, lowercase, freq_edges, freq_source))
    sections.append(("words", "By word frequency", _buckets(words, result, "words")))
    for k, name in enumerate(s for s in result.systems if s != result.baseline):
        sections.append((f"changes-{k + 1}", f"{name}: changed sentences",
                         _changes(result, refs, outputs, name, metric, examples, k)))
    if nbests:
        sections.append(("oracle", "Oracle", _oracle(nbests, refs, tokenize, lowercase, result, oracle_metric,
                                                      oracle_lower_better, oracle_options)))
    sections.append(("signatures", "Signatures and command", _signatures(result, command, __version__)))
    cfg = result.config
    intro = (f'<p class="muted">{cfg.get("sentences")} sentences, {len(refs)} reference(s), '
             f'{_runs_text(cfg.get("runs"))}; baseline (\u2020) {esc(result.baseline)}'
             + (f", second baseline (\u2021) {esc(result.second_baseline)}" if result.second_baseline else "")
             + f"; mlmme-rerank {esc(__version__)}.</p>")
    return page(title or "rerank report", sections, intro)


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
        items = [_example(i, kind, refs, base, hyps, base_scores[i], sys_scores[i], ch.gains[i], d, result.baseline,
                          name) for i in shown]
        more = f", the {len(shown)} largest shown" if len(rows) > len(shown) else ""
        parts.append(f'<details open class="{kind}"><summary>{kind.capitalize()} ({len(rows)}{more})</summary>\n'
                     + "\n".join(items) + "\n</details>")
    return "\n".join(parts)


def _example(i: int, kind: str, refs, base, hyps, base_score: float, sys_score: float, gain: float, d: int,
             base_name: str, sys_name: str) -> str:
    left, right = word_diff(base[i], hyps[i])
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
