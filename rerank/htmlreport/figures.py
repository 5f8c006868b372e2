"""Figures of the reports, drawn with matplotlib (Agg): as inline SVG text for the HTML page
(`to_svg`: text stays text, ids salted per figure so several figures share one page) or as PNG
(`save_png`, the `rerank eval --plot` file)."""

from __future__ import annotations

import io

import numpy as np

from rerank.metrics.registry import display_name

COLORS = ("#396ab1", "#da7c30", "#3e9651", "#cc2529", "#6b4c9a", "#922428", "#948b3d", "#535154")
BETTER, WORSE = "#3e9651", "#cc2529"


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def to_svg(fig, salt: str) -> str:
    """The figure as an <svg> element (no XML prolog), its ids salted with `salt`; closes it."""
    import matplotlib

    plt = _pyplot()
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": salt, "svg.fonttype": "none"}):
        fig.savefig(buf, format="svg", metadata={"Date": None}, bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]


def save_png(fig, path: str, dpi: int = 120) -> None:
    """Write the figure as PNG atomically; closes it."""
    from rerank.io import atomic_write

    plt = _pyplot()
    with atomic_write(path, "wb") as fh:
        fig.savefig(fh, format="png", dpi=dpi)
    plt.close(fig)


def delta_figure(table):
    """Each system's improvement over the baseline with its bootstrap 95% interval, one panel per metric
    (for a lower-is-better metric the improvement is baseline - system: right is better everywhere)."""
    plt = _pyplot()
    from rerank.metrics.registry import quality_in

    metrics = [m for m in table.metrics if quality_in(table, m)]
    systems = [s for s in table.systems if s != table.baseline]
    fig, axes = plt.subplots(1, len(metrics), figsize=(3.2 * len(metrics) + 1, 0.45 * len(systems) + 1.6),
                             squeeze=False, sharey=True)
    for ax, m in zip(axes[0], metrics):
        ys = np.arange(len(systems))
        d = [table.cells[(s, m)].delta for s in systems]
        lo = [table.cells[(s, m)].delta_low for s in systems]
        hi = [table.cells[(s, m)].delta_high for s in systems]
        if any(v is None for v in d + lo + hi):
            continue
        err = np.array([[max(0.0, a - b) for a, b in zip(d, lo)], [max(0.0, b - a) for a, b in zip(d, hi)]])
        ax.errorbar(d, ys, xerr=err, fmt="o", capsize=3)
        ax.axvline(0.0, color="grey", lw=0.8, ls="--")
        lower = not table.higher_is_better[m]
        ax.set_title(f"{table.display(m)}" + (" (lower is better)" if lower else ""), fontsize=10)
        ax.set_xlabel(f"improvement over {table.baseline}" + (" (baseline \u2212 system)" if lower else ""), fontsize=8)
        ax.set_yticks(ys)
        ax.set_yticklabels(systems)
    fig.tight_layout()
    return fig


def bucket_figure(buckets, baseline: str, display: dict | None = None):
    """Grouped bars: each system's improvement over the baseline in each bucket, one panel per metric
    (the buckets' deltas: improvements in each metric's direction). `display`: names shown instead of
    the registry's display names."""
    plt = _pyplot()
    display = display or {}
    metrics = list(buckets.deltas)
    systems = list(next(iter(buckets.deltas.values()), {}))
    nb = len(buckets.labels)
    fig, axes = plt.subplots(1, len(metrics), figsize=(max(4.0, 0.55 * nb + 1.5) * len(metrics), 3.0), squeeze=False)
    width = 0.8 / max(1, len(systems))
    for ax, m in zip(axes[0], metrics):
        for j, s in enumerate(systems):
            values = [np.nan if v is None else v for v in buckets.deltas[m][s]]
            ax.bar(np.arange(nb) + (j - (len(systems) - 1) / 2) * width, values, width,
                   color=COLORS[j % len(COLORS)], label=s)
        ax.axhline(0.0, color="grey", lw=0.8)
        ax.set_xticks(np.arange(nb))
        ax.set_xticklabels(buckets.labels, fontsize=8, rotation=30)
        ax.set_title(display.get(m) or display_name(m), fontsize=10)
        ax.set_ylabel(f"improvement over {baseline}", fontsize=8)
    if systems:
        axes[0][0].legend(fontsize=7, loc="best")
    fig.suptitle(buckets.title, fontsize=9)
    fig.tight_layout()
    return fig


def gain_histogram(gains, metric_label: str, baseline: str):
    """Histogram of the sentence-level gains of the sentences whose output changed."""
    plt = _pyplot()
    gains = np.asarray(gains, dtype=np.float64)
    fig, ax = plt.subplots(figsize=(5.0, 2.4))
    if len(gains):
        top = max(1e-9, float(np.abs(gains).max()))
        bins = np.linspace(-top, top, 25)
        ax.hist(gains[gains < 0], bins=bins, color=WORSE, label="worse")
        ax.hist(gains[gains > 0], bins=bins, color=BETTER, label="better")
        ax.hist(gains[gains == 0], bins=bins, color="#999999", label="same score")
        ax.legend(fontsize=7)
    ax.axvline(0.0, color="grey", lw=0.8)
    ax.set_xlabel(f"sentence {metric_label} gain over {baseline}", fontsize=8)
    ax.set_ylabel("changed sentences", fontsize=8)
    fig.tight_layout()
    return fig


def oracle_figure(curves: dict, display: str = "BLEU", higher_is_better: bool = True):
    """The oracle score of the top-k hypotheses against k, one line per n-best system; the y axis
    names the metric (`display`: BLEU, TER, column:COMET) and says when lower is better."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.0, 3.0))
    for j, (name, (ks, values)) in enumerate(curves.items()):
        ax.plot(ks, values, marker="o", ms=3, color=COLORS[j % len(COLORS)], label=name)
    ax.set_xlabel("k (top-k hypotheses of each list)", fontsize=8)
    ax.set_ylabel(f"oracle {display}" + ("" if higher_is_better else " (lower is better)"), fontsize=8)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
