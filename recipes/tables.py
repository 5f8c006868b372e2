"""Paper-style tables (Calixto & Liu 2017, Tables 3/4) from the recipe's experiment results,
and the oracle-BLEU-vs-n curve."""

from __future__ import annotations

import json
import os

from rerank.io import atomic_write
from rerank.metrics.registry import QUALITY_METRICS, display_name, metric_info

COLUMNS = ("bleu", "meteor", "ter")  # the paper's columns
NO_IMAGES = ("**Text only**: no image features were available, so no model uses images: VSE and the β sweep "
             "are absent, s_i is not a feature, and ‡ marks significance against MIRA on the NMT features alone.")


def _load(out: str, flavour: str, n: int) -> dict | None:
    path = os.path.join(out, "experiments", f"{flavour}.{n}best", "summary.json")
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def table_rows(summary: dict) -> list[tuple[str, dict[str, str]]]:
    """[(system, {metric: "score marks"})] with the oracle BLEU as the last row."""
    by_system: dict[str, dict[str, str]] = {s: {} for s in summary["systems"]}
    for rec in summary["results"]:
        if rec["metric"] in QUALITY_METRICS:
            by_system[rec["system"]][rec["metric"]] = f"{rec['score']:.2f}" + (f" {rec['marks']}" if rec["marks"] else "")
    rows = list(by_system.items())
    rows.append(("Oracle (sentence BLEU+1)", {"bleu": f"{summary['oracle_bleu']:.2f}"}))
    return rows


def mira_runs(config: dict) -> int | None:
    """The MIRA runs of an experiment: `runs` of its evaluation config, one count per system (the
    NMT 1-best has one) or, in results made before each pair was tested on its own runs, one number."""
    runs = config.get("runs")
    return max(runs.values()) if isinstance(runs, dict) else runs


def significance_legend(config: dict, second_baseline: str) -> str:
    """What the marks of a table mean and which test made them (rerank.evaluation: each pair is tested on
    the two systems' own runs)."""
    runs = mira_runs(config)
    if config.get("stratified"):
        how = (f"stratified over the two systems' own outputs: the NMT 1-best's one against a system's {runs} runs, "
               f"or {runs} runs against {runs}")
    else:
        how = f"paired, each system's runs averaged per sentence: the NMT 1-best's one output, a system's {runs} runs"
    both = (f" and the paired bootstrap ({config.get('bootstrap')} resamples) both"
            if config.get("marks") == "randomisation and bootstrap" else "")
    return (f"Scores are means over {runs} MIRA runs; † p < 0.05 against the NMT 1-best, ‡ against {second_baseline}, "
            f"by approximate randomisation ({config.get('ar_trials')} trials, {how}){both}.")


def table_markdown(summaries: dict, n: int, text_only: bool) -> str:
    """The paper-style Markdown table of every flavour's n-best experiment ({"<flavour>.<n>best": summary})."""
    md = [f"## Multi30k En→De test_2016, reranking {n}-best lists", "",
          "| NMT | System | " + " | ".join(f"{display_name(m)} {metric_info(m).arrow}" for m in COLUMNS) + " |",
          "|---|---|---|---|---|"]
    chosen = {k: v for k, v in summaries.items() if k.endswith(f".{n}best")}
    for key, summary in chosen.items():
        for system, cells in table_rows(summary):
            md.append(f"| {key.split('.')[0]} | {system} | " + " | ".join(cells.get(m, "–") for m in COLUMNS) + " |")
    first = next(iter(chosen.values()), None)
    if first:
        md += ["", significance_legend(first["config"], first["second_baseline"]),
               "Signatures: " + "; ".join(f"{display_name(m)}: {s}" for m, s in first["signatures"].items())]
    if text_only:
        md += ["", NO_IMAGES]
    return "\n".join(md) + "\n"


def table_latex(summaries: dict, n: int) -> str:
    tex = ["\\begin{tabular}{llrrr}", "\\toprule",
           "NMT & System & " + " & ".join(f"{display_name(m)}$\\{'up' if metric_info(m).higher_is_better else 'down'}arrow$"
                                            for m in COLUMNS) + " \\\\", "\\midrule"]
    for key, summary in summaries.items():
        if not key.endswith(f".{n}best"):
            continue
        for system, cells in table_rows(summary):
            values = [cells.get(m, "–") for m in COLUMNS]
            tex_vals = [v.replace("†", "$^\\dagger$").replace("‡", "$^\\ddagger$").replace("–", "--") for v in values]
            tex.append(f"{key.split('.')[0]} & {system.replace('_', ' ')} & " + " & ".join(tex_vals) + " \\\\")
        tex.append("\\midrule")
    tex[-1] = "\\bottomrule"
    return "\n".join(tex + ["\\end{tabular}"]) + "\n"


def write_recipe_tables(out: str, flavours, sizes, text_only: bool, nbest_path=None, refs_path: str | None = None) -> None:
    tables_dir = os.path.join(out, "tables")
    os.makedirs(tables_dir, exist_ok=True)
    combined = {f"{flavour}.{n}best": summary for n in sizes for flavour in flavours
                if (summary := _load(out, flavour, n)) is not None}
    for n in sizes:
        with atomic_write(os.path.join(tables_dir, f"table.{n}best.md")) as f:
            f.write(table_markdown(combined, n, text_only))
        with atomic_write(os.path.join(tables_dir, f"table.{n}best.tex")) as f:
            f.write(table_latex(combined, n))
    with atomic_write(os.path.join(tables_dir, "results.json")) as f:
        json.dump({"text_only": text_only, "experiments": combined}, f, indent=1, ensure_ascii=False)
    if nbest_path and refs_path:
        oracle_curve(tables_dir, flavours, max(sizes), nbest_path, refs_path)


def oracle_curve(tables_dir: str, flavours, n_max: int, nbest_path, refs_path: str) -> dict:
    """Oracle BLEU of the first k hypotheses of each list, k = 1 .. n_max; JSON + PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rerank.recipes.experiment import oracle_bleu
    from rerank.formats import read_nbest, read_references

    ks = [k for k in (1, 2, 3, 5, 10, 20, 30, 50, 100) if k <= n_max]
    curves = {}
    for flavour in flavours:
        path = nbest_path(flavour, "test_2016", n_max)
        if not os.path.exists(path):
            continue
        nbest = read_nbest(path)
        refs = read_references([refs_path], nbest.n_sentences)
        curves[flavour] = [oracle_bleu(nbest.head(k), refs, "13a")[0] for k in ks]
    with atomic_write(os.path.join(tables_dir, "oracle_curve.json")) as f:
        json.dump({"k": ks, "oracle_bleu": curves}, f, indent=1)
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for flavour, values in curves.items():
        ax.plot(ks, values, marker="o", label=flavour)
    ax.set_xscale("log")
    ax.set_xticks(ks)
    ax.set_xticklabels([str(k) for k in ks])
    ax.set_xlabel("n (first n hypotheses of each list)")
    ax.set_ylabel("oracle BLEU (test_2016)")
    ax.legend()
    fig.tight_layout()
    with atomic_write(os.path.join(tables_dir, "oracle_curve.png"), "wb") as f:
        fig.savefig(f, format="png", dpi=120)
    plt.close(fig)
    return curves

