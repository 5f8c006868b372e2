"""The numbers of docs/results/*.md, rendered from the JSON beside them, so that every number in
those pages is the one in results.json, nmt_results.json or stronger/results.json.

A page holds blocks `<!-- BEGIN name -->` … `<!-- END name -->`; `write_docs` re-renders each
block from the JSON and leaves the prose between blocks alone. The prose carries no measured
numbers (tests/test_results_docs.py checks both: blocks equal to their rendering, and no decimal
number outside a block or a code block).

    python -m rerank.recipes.results_docs [DOCS_DIR]     # re-render the blocks in place
"""

from __future__ import annotations

import json
import os
import re
import sys

from rerank.io import atomic_write

DOCS = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "docs", "results")
PAPER = {"weak": (25.7, 33.1), "regular": (32.4, 41.9), "optimised": (35.3, 43.2)}  # 1-best BLEU, oracle 20-best
BLOCK = re.compile(r"(<!-- BEGIN (\w[\w-]*) -->\n)(.*?)(<!-- END \2 -->)", re.S)


def _load(docs: str, name: str):
    with open(os.path.join(docs, name), encoding="utf-8") as f:
        return json.load(f)


def _score(summary: dict, system: str, metric: str) -> float:
    return next(r["score"] for r in summary["results"] if r["system"] == system and r["metric"] == metric)


def _marks(summary: dict, system: str, metric: str) -> str:
    return next(r["marks"] for r in summary["results"] if r["system"] == system and r["metric"] == metric)


def _fmt(value) -> str:
    return f"{value:.2f}" if isinstance(value, (int, float)) else "–"


def baselines(docs: str) -> str:
    """The NMT models against the paper: training, 1-best BLEU/TER (of the smallest test list, beam =
    n) and the oracle of every test list."""
    nmt = _load(docs, "nmt_results.json")
    sizes = sorted({int(k.split(".")[1][:-4]) for row in nmt.values() for k in row["lists"] if k.startswith("test_2016.")})
    head = ["NMT", "epochs (best)", "minutes", "val BLEU (greedy)", "1-best BLEU, paper", f"1-best BLEU (beam {sizes[0]})",
            "1-best TER", "oracle 20-best, paper"] + [f"oracle {n}-best" for n in sizes]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for flavour, row in nmt.items():
        first = row["lists"].get(f"test_2016.{sizes[0]}best", {})
        cells = [flavour, f"{row.get('epochs', '–')} ({row.get('best_epoch', '–')})", str(row.get("train_minutes", "–")),
                 _fmt(row.get("val_bleu_greedy")), str(PAPER[flavour][0]), _fmt(first.get("bleu")), _fmt(first.get("ter")),
                 str(PAPER[flavour][1])] + [_fmt(row["lists"].get(f"test_2016.{n}best", {}).get("oracle")) for n in sizes]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def gains(summaries: dict, systems: list[str] | None = None) -> str:
    """BLEU, METEOR and TER of every system minus the NMT 1-best's, with the significance marks."""
    lines = ["| NMT | list | system | Δ BLEU | Δ METEOR | Δ TER |", "|---|---|---|---|---|---|"]
    for key, summary in summaries.items():
        flavour, n = key.split(".")
        for system in systems or summary["systems"]:
            if system == summary["baseline"]:
                continue
            cells = []
            for metric in ("bleu", "meteor", "ter"):
                delta = _score(summary, system, metric) - _score(summary, summary["baseline"], metric)
                marks = _marks(summary, system, metric)
                cells.append(f"{delta:+.2f}" + (f" {marks}" if marks else ""))
            lines.append(f"| {flavour} | {n[:-4]}-best | {system} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def stronger_tables(docs: str) -> str:
    from rerank.recipes.stronger import report

    results = _load(docs, os.path.join("stronger", "results.json"))
    text = report(results["experiments"], results["command"])
    return text.split("\n", 2)[2]  # without the page title


def embedding_study(docs: str) -> str:
    """The table of the embedding study (recipes.embedding_study) from embeddings.json; a line
    saying the runs are pending while there is none."""
    if not os.path.exists(os.path.join(docs, "embeddings.json")):
        return ("Pending: the runs have not been made yet. "
                "`python -m rerank.recipes.embedding_study ... --publish` renders this block.\n")
    from rerank.recipes.embedding_study import table

    return table(_load(docs, "embeddings.json"))


def embedding_model(docs: str) -> str:
    """The embedding model behind s_s: translation retrieval on test_2016 and STS."""
    model = _load(docs, "embedding-model.json")
    ev = model["evaluation"]
    lines: list[str] = []
    for split, key in (("test_2016", "translation_retrieval_test_2016"), ("val", "translation_retrieval_val")):
        if key in ev:   # (models exported before val was evaluated have no val rows)
            lines += [""] * bool(lines) + [f"| {split} translation retrieval | R@1 | R@5 | R@10 |", "|---|---|---|---|"]
            lines += [f"| {direction} | {r['r1']:.1f} | {r['r5']:.1f} | {r['r10']:.1f} |" for direction, r in ev[key].items()
                      if direction in ("en->de", "de->en")]   # s_s's pair (a model of more languages has more)
    lines += ["", "| STS (Pearson r of 5·cos) | pairs | r |", "|---|---|---|"]
    lines += [f"| {name} | {r['n']} | {r['pearson']:.3f} |" for name, r in ev["sts"].items()]
    training = model["training"]
    cfg = training.get("config", {})
    start = (f", fine-tuned from `{os.path.join(*cfg['init'].split(os.sep)[-2:])}`" if cfg.get("init") else "")
    status = training.get("stopped") or training.get("final_status") or training.get("status")
    vocab = f"SentencePiece {cfg['subword']} ({cfg.get('subword_size')} pieces)" if cfg.get("subword") else "words"
    lines += ["", f"Training: preset {cfg.get('preset')}, languages {', '.join(cfg.get('languages', []))}, "
              f"vocabularies {vocab}, contrastive {cfg.get('contrastive')}{start}, dropout "
              f"{cfg.get('dropout')}, sources {', '.join(cfg.get('sources', []))}; best epoch "
              f"{training.get('epoch')} ({status})."]
    return "\n".join(lines) + "\n"


def stronger_models(docs: str) -> str:
    """The LM and the channel model behind the stronger reranker, from its results.json."""
    models = _load(docs, os.path.join("stronger", "results.json"))["models"]
    lm, channel = models["lm"], models["channel"]
    return (f"- LM: {lm['epochs']} epochs (stopped: {lm.get('stopped')}), validation perplexity "
            f"{lm['val_perplexity']:.2f}.\n- Channel model (de→en): {channel['epochs']} epochs (best: "
            f"{channel['best_epoch']}), greedy validation BLEU {channel['val_bleu_greedy']:.2f}.\n"
            f"- s_s: the embedding model `{models['embedding']}`.\n")


def _delta_range(experiments: dict, system: str, against: str) -> str:
    deltas = [_score(e, system, "bleu") - _score(e, against, "bleu") for e in experiments.values()]
    return f"{min(deltas):+.2f} to {max(deltas):+.2f}"


def stronger_summary(docs: str) -> str:
    """The BLEU gains the prose of stronger.md talks about, as ranges over flavours and list sizes."""
    exps = _load(docs, os.path.join("stronger", "results.json"))["experiments"]
    mira = "MIRA: NMT features"
    lines = [f"- channel + lm over the NMT 1-best: {_delta_range(exps, '+ channel + lm', 'NMT 1-best')} BLEU; over "
             f"{mira}: {_delta_range(exps, '+ channel + lm', mira)};",
             f"- all over the NMT 1-best: {_delta_range(exps, 'all', 'NMT 1-best')}; all minus channel + lm: "
             f"{_delta_range(exps, 'all', '+ channel + lm')};",
             f"- mbr alone over {mira}, per list:"]
    for key, e in exps.items():
        delta = _score(e, "+ mbr", "bleu") - _score(e, mira, "bleu")
        significant = " ‡" if "‡" in _marks(e, "+ mbr", "bleu") else ""
        lines.append(f"  - {key.replace('best', '-best').replace('.', ' ')}: {delta:+.2f}{significant}")
    return "\n".join(lines) + "\n"


def mbr_study(docs: str) -> str:
    """The mbr sweep (recipes.mbr_study) from stronger/mbr_study.json."""
    from rerank.recipes.mbr_study import report

    study = _load(docs, os.path.join("stronger", "mbr_study.json"))
    return f"Made by `{study['command']}` (mbr_study.json beside results.json).\n\n{report(study)}\n"


def marian_channel(docs: str) -> str:
    """The Transformer channel model against the GRU one (recipes.marian_channel compare)."""
    from rerank.recipes.marian_channel import report

    study = _load(docs, os.path.join("stronger", "marian_channel.json"))
    return f"Made by `{study['command']}` (marian_channel.json beside results.json).\n\n{report(study)}\n"


def selection_study(docs: str) -> str:
    """Issue 50's selection study (recipes.selection_study) from stronger/selection_study.json."""
    from rerank.recipes.selection_study import report

    study = _load(docs, os.path.join("stronger", "selection_study.json"))
    return report(study["lists"], study["command"])


def sampling_results(docs: str) -> str:
    """Issue 48's recipe (recipes.sampling_recipe) from sampling/sampling.json and its config."""
    table = _load(docs, os.path.join("sampling", "sampling.json"))
    config = _load(docs, os.path.join("sampling", "sampling.config.json"))
    cells = {(r["system"], r["metric"]): r for r in table["results"]}
    metrics = table["metrics"]
    lines = ["| system | " + " | ".join(f"{m} | p (AR) | bootstrap p" for m in metrics) + " |",
             "|---|" + "---|---|---|" * len(metrics)]
    for system in table["systems"]:
        row = []
        for m in metrics:
            c = cells[(system, m)]
            row += [f"{c['score']:.2f}{' ' + c['marks'] if c['marks'] else ''}",
                    "-" if c["p"] is None else f"{c['p']:.1e}", "-" if c["bs_p"] is None else f"{c['bs_p']:.1e}"]
        lines.append(f"| {system} | " + " | ".join(row) + " |")
    steps = config["steps"]
    timing = "; ".join(f"{name} {step['seconds']:.1f} s" + (f" at load {step['load']:.2f}" if step.get("load") else "")
                       for name, step in steps.items())
    s = config["sampling"]
    return ("\n".join(lines) + "\n\n"
            f"- candidates: {s['n']} epsilon samples a sentence (epsilon {s['epsilon']}, seed {s['seed']}), "
            f"{steps['samples']['rows']} distinct rows over the test set; baseline: beam {config['beam']['n']}'s 1-best\n"
            f"- significance: approximate randomisation ({config['eval']['ar']} trials) and paired bootstrap "
            f"({config['eval']['bootstrap']} resamples) against the beam 1-best; † both below the level\n"
            f"- seconds (wall, {config['machine']['cpus']} cores, {config['threads']} threads): {timing}\n")


RENDER = {
    "README.md": {"baselines": baselines, "embedding": embedding_model,
                  "gains": lambda docs: gains(_load(docs, "results.json")["experiments"])},
    "stronger.md": {"tables": stronger_tables, "models": stronger_models, "summary": stronger_summary,
                    "mbr-study": mbr_study, "marian-channel": marian_channel, "selection-study": selection_study},
    "embeddings.md": {"embeddings": embedding_study},
    "sampling.md": {"sampling": sampling_results},
}


def render(path: str, renderers: dict, docs: str) -> str:
    with open(path, encoding="utf-8") as f:
        text = f.read()

    def block(match: re.Match) -> str:
        name = match.group(2)
        if name not in renderers:
            raise ValueError(f"{path}: unknown block {name!r}")
        return match.group(1) + renderers[name](docs) + match.group(4)

    return BLOCK.sub(block, text)


def write_docs(docs: str = DOCS) -> list[str]:
    written = []
    for page, renderers in RENDER.items():
        path = os.path.join(docs, page)
        if not os.path.exists(path):
            continue
        text = render(path, renderers, docs)
        with atomic_write(path) as f:
            f.write(text)
        written.append(path)
    return written


if __name__ == "__main__":
    for p in write_docs(sys.argv[1] if len(sys.argv) > 1 else DOCS):
        print(f"wrote {p}")
