"""PNG of a tuning run: the tuning-set metric per epoch/iteration and the final weights."""

from __future__ import annotations

import numpy as np

from rerank.io import atomic_write


def plot_tuning(path: str, curves: list[tuple[str, list]], feature_names: list[str], weights: np.ndarray,
                metric: str = "BLEU", tuner: str = "mira", step_name: str = "step", higher_is_better: bool = True,
                shares: dict[str, float] | None = None, run_label: str = "") -> None:
    """curves: (label, [[step, score], ...]) per run, the metric's own values (TER, not -TER); weights:
    the final weight vector (of the kept run, best in the metric's direction). With `shares` (the
    weights file's `weight_shares`: |w| times a feature's spread within a list, as a share), the
    right panel shows those, signed by w: raw weights are not comparable across features of
    different scales. `run_label` names the run the panel shows."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5), gridspec_kw={"width_ratios": [1, 1.3]})
    for label, curve in curves:
        if curve:
            steps, scores = zip(*curve)
            ax1.plot(steps, scores, marker="." if len(steps) < 80 else None, label=label)
    ax1.set_xlabel(step_name)
    ax1.set_ylabel(f"tuning-set {metric}" + ("" if higher_is_better else " (lower is better)"))
    ax1.set_title(f"{tuner}: tuning curve")
    if len(curves) > 1:
        ax1.legend()
    ax1.grid(alpha=0.3)
    y = np.arange(len(feature_names))
    values = np.asarray(weights, dtype=np.float64)
    if shares is not None:
        values = np.sign(values) * np.array([shares.get(n, 0.0) for n in feature_names])
    ax2.barh(y, values, color=np.where(values >= 0, "tab:blue", "tab:red"))
    ax2.set_yticks(y)
    ax2.set_yticklabels(feature_names, fontsize=7 if len(feature_names) > 25 else 9)
    ax2.invert_yaxis()
    ax2.axvline(0, color="black", lw=0.5)
    what = ("weight shares (|w| x spread in a list, signed by w)" if shares is not None else "final weights")
    ax2.set_title(f"{run_label}: {what}" if run_label else what)
    fig.tight_layout()
    with atomic_write(path, "wb") as out:
        fig.savefig(out, format="png", dpi=100)
    plt.close(fig)
