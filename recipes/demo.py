"""The embedded demo: rerank the shipped Multi30k En→De n-best lists with the shipped
embedding model's s_s and the consensus feature mbr, tuned by k-best MIRA on val, scored on
test_2016 with significance. When the lists carry the channel and LM columns (precomputed by
the stronger reranker's models, recipes.stronger, and published with the lists by
`rerank recipe reproduce --publish`), two more systems use them.

Text only: no image features exist for the shipped lists, so only s_s(source, hyp) is added
(the image term s_i needs CNN features of the Multi30k images). Every report says so.
"""

from __future__ import annotations

import logging
import glob
import os
import re
import time
from importlib import resources

import numpy as np

from rerank.embeddings.features import embedding_features
from rerank.api import EvalOptions
from rerank.recipes.experiment import SystemSpec, mira, run_experiment
from rerank.consensus import mbr_scores
from rerank.errors import InputError
from rerank.features import FeatureContext
from rerank.formats import read_nbest, read_references, write_nbest
from rerank.io import atomic_write, read_lines
from rerank.nbest import NBestList
from rerank.cliargs import terminal_bars

logger = logging.getLogger(__name__)

NO_IMAGES = ("text-only: no image features are available, so the image-sentence feature s_i "
             "is not used; s_s comes from a text-only (R_ML) embedding model")
BASE_FEATURES = ["nmt", "nmt_norm", "len"]
MODEL_FEATURES = ["channel", "channel_norm", "lm", "lm_norm"]
MODEL_SOURCE = ("channel/lm: precomputed in the shipped lists by the stronger reranker's models "
                "(docs/results/stronger.md)")


def data_dir() -> str:
    return str(resources.files("rerank") / "data")


def shipped_lists(root: str | None = None) -> dict[tuple[str, int], dict[str, str]]:
    """{(flavour, n): {split: path}} for every shipped n-best list."""
    root = root or os.path.join(data_dir(), "multi30k")
    found: dict[tuple[str, int], dict[str, str]] = {}
    for path in glob.glob(os.path.join(root, "*best.gz")):
        match = re.match(r"(\w+)\.(val|test_2016)\.(\d+)best\.gz$", os.path.basename(path))
        if match:
            found.setdefault((match.group(1), int(match.group(3))), {})[match.group(2)] = path
    return {key: splits for key, splits in found.items() if {"val", "test_2016"} <= set(splits)}


SHIPPED_MODEL = "mlmme-bpe"   # the shipped embedding model, rerank/data/models/NAME.{pt,json} (issue 49)


def default_model() -> str:
    """The shipped embedding model: the reproduction's embedding step (recipes/configs/embedding.json).
    (mlmme-small.pt, the model before it, still ships: the results made with it name it.)"""
    return os.path.join(data_dir(), "models", SHIPPED_MODEL + ".pt")


def add_embedding_feature(nbest, sources, model_path: str, name: str = "s_s", device: str = "cpu"):
    from rerank.embeddings.encoder import Encoder

    encoder = Encoder.load(model_path)
    context = FeatureContext(sources=sources, src_lang="en", tgt_lang="de", device=device, progress=terminal_bars())
    values = embedding_features(nbest, encoder, ["s_s"], context)["s_s"]
    return nbest.with_feature(name, values), encoder


def choose_lists(flavour: str | None, n: int, root: str | None = None) -> tuple[str, int, dict[str, str]]:
    """(flavour, n, {split: path}) of the shipped lists asked for (optimised when not given);
    `root`: another folder of lists named like the shipped ones."""
    lists = shipped_lists(root)
    if not lists:
        raise InputError("no shipped n-best lists found in the package data (rerank/data/multi30k)"
                         if root is None else "no <flavour>.<val|test_2016>.<n>best.gz lists", root)
    choices = sorted(k for k in lists if k[1] == n and (flavour is None or k[0] == flavour))
    if not choices:
        raise InputError(f"no shipped {n}-best lists" + (f" for flavour {flavour!r}" if flavour else "")
                         + f"; available: {', '.join(f'{f} {k}-best' for f, k in sorted(lists))}")
    preferred = [k for k in choices if k[0] == "optimised"]
    flavour, n = (preferred or choices)[0]
    return flavour, n, lists[(flavour, n)]


def load_sets(paths: dict[str, str], sentences: int | None = None):
    """(n-best, references, sources) of val and test_2016, cut to the first `sentences` if given."""
    m30k = os.path.join(data_dir(), "multi30k")
    sets = []
    for split, raw in (("val", "val"), ("test_2016", "test_2016_flickr")):
        nbest = read_nbest(paths[split])
        refs = read_references([os.path.join(m30k, f"{raw}.de.gz")], nbest.n_sentences)
        sources = read_lines(os.path.join(m30k, f"{raw}.en.gz"))
        if sentences is not None:  # a quick look at the first sentences
            nbest = nbest.select_sentences(range(min(sentences, nbest.n_sentences)))
            refs, sources = [r[:nbest.n_sentences] for r in refs], sources[:nbest.n_sentences]
        sets.append((nbest, refs, sources))
    return sets


def demo_systems(dev, test, log) -> list[SystemSpec]:
    """The four systems of the NMT features, s_s and mbr; and, when both lists carry every
    MODEL_FEATURES column, "+ channel + lm" and "all" (else the log says why they are not run)."""
    systems = [SystemSpec("MIRA: NMT features", BASE_FEATURES), SystemSpec("MIRA: + s_s", BASE_FEATURES + ["s_s"]),
               SystemSpec("MIRA: + mbr", BASE_FEATURES + ["mbr"]),
               SystemSpec("MIRA: + s_s + mbr", BASE_FEATURES + ["s_s", "mbr"])]
    missing = [name for name in MODEL_FEATURES if name not in dev.feature_names or name not in test.feature_names]
    if missing:
        log(f"'MIRA: + channel + lm' and 'MIRA: all' are not run: the lists have no channel/lm columns "
            f"(missing: {', '.join(missing)})")
        return systems
    return systems + [SystemSpec("MIRA: + channel + lm", BASE_FEATURES + MODEL_FEATURES),
                      SystemSpec("MIRA: all", BASE_FEATURES + ["s_s", "mbr"] + MODEL_FEATURES)]


def report_text(result, test, flavour: str, n: int, runs: int, model: str, encoder, lists_dir: str | None = None) -> str:
    lines = [
        f"# mlmme-rerank demo: Multi30k En→De test_2016 ({test.n_sentences} sentences), {flavour} NMT {n}-best, "
        f"{runs} MIRA runs per system",
        "",
        result.table.to_markdown(),
        "",
        f"Oracle BLEU of the {n}-best lists (sentence-BLEU+1 picks): {result.oracle_bleu:.2f}",
        "Dev (val) BLEU per system: " + "; ".join(
            f"{name}: {', '.join(f'{s:.2f}' for s in scores)}" for name, scores in result.dev_scores.items()),
        f"Note: {NO_IMAGES}.",
        f"Embedding model: {os.path.basename(model)} ({', '.join(encoder.languages)}, {encoder.dim}-d).",
    ]
    if any(set(MODEL_FEATURES) <= set(weights[0]) for weights in result.weights.values()):  # a system tuned them
        lines.append(f"{MODEL_SOURCE}." if lists_dir is None else f"channel/lm: the columns of the lists in {lists_dir}.")
    return "\n".join(lines) + "\n"


def add_mbr_feature(nbest):
    """The consensus feature (rerank.consensus): expected sentence BLEU+1 against the list under
    the NMT posterior (softmax of the `nmt` log-probability), in percent."""
    return nbest.with_feature("mbr", mbr_scores(nbest, nbest.column("nmt")))


def run_demo(out_dir: str | None = None, flavour: str | None = None, n: int = 20, runs: int = 3, epochs: int = 60,
             ar_trials: int = 10000, bootstrap: int = 1000, model: str | None = None, seed: int = 1,
             metrics=("bleu", "meteor", "ter"), device: str = "cpu", sentences: int | None = None,
             lists_dir: str | None = None) -> str:
    """Run the demo; returns the report text (also written to out_dir/report.md if given).
    `lists_dir`: lists named like the shipped ones to use instead of them (same sentences)."""
    start = time.time()
    log = lambda msg: logger.info(f"[{time.time() - start:6.1f}s] {msg}")  # noqa: E731
    flavour, n, paths = choose_lists(flavour, n, lists_dir)
    model = model or default_model()
    log(f"NMT flavour {flavour!r}, {n}-best lists: {paths['val']}, {paths['test_2016']}")
    log(f"embedding model: {model}")
    log(NO_IMAGES)
    (dev, dev_refs, dev_src), (test, test_refs, test_src) = load_sets(paths, sentences)
    log(f"adding s_s and mbr to {dev.n_hyps} val and {test.n_hyps} test hypotheses")
    dev, _ = add_embedding_feature(dev, dev_src, model, device=device)
    test, encoder = add_embedding_feature(test, test_src, model, device=device)
    dev, test = add_mbr_feature(dev), add_mbr_feature(test)
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
        write_nbest(dev, os.path.join(out_dir, f"{flavour}.val.{n}best.feat.gz"))
        write_nbest(test, os.path.join(out_dir, f"{flavour}.test_2016.{n}best.feat.gz"))

    evaluation = EvalOptions(metrics=tuple(metrics), lang="de", second_baseline="MIRA: NMT features", ar=ar_trials,
                             bootstrap=bootstrap, seed=seed, tokenize="13a", meteor={"modules": ["exact", "stem"]})
    result = run_experiment(dev, dev_refs, test, test_refs, demo_systems(dev, test, log), mira(runs, seed, epochs, "13a"),
                            evaluation, out_dir=out_dir, log=log)
    report = report_text(result, test, flavour, n, runs, model, encoder, lists_dir)
    if out_dir:
        with atomic_write(os.path.join(out_dir, "report.md")) as out:
            out.write(report)
        html = write_html_report(result, test, test_refs, out_dir, f"mlmme-rerank demo: Multi30k En→De test_2016, "
                                 f"{flavour} NMT {n}-best, {runs} MIRA runs per system")
        report += f"HTML report: {html}\n"
    log("done")
    return report


def write_html_report(result, test, test_refs, out_dir: str, title: str) -> str:
    """out_dir/report.html (rerank.htmlreport): the table, buckets, changed sentences of each system's
    first run against the NMT 1-best, and the oracle curves of the test lists ranked by the decoder
    and by each system's first-run weights. Returns its path."""
    from rerank.recipes.experiment import first_best
    from rerank.cliargs import command_line
    from rerank.htmlreport import ReportOptions, build_report, write_report
    from rerank.weights import model_scores, weight_vector

    table = result.table
    outputs = {table.baseline: [first_best(test)], **result.outputs}
    nbests: dict[str, tuple[NBestList, np.ndarray | None]] = {table.baseline: (test, None)}
    for name, weights in result.weights.items():
        w = weight_vector(weights[0], test.feature_names, warn=lambda _: None)
        nbests[name] = (test, model_scores(test, w))
    path = os.path.join(out_dir, "report.html")
    write_report(path, build_report(table, test_refs, outputs, ReportOptions(title=title, examples=20,
                                                                           command_line=command_line()),
                                    nbests=nbests, tokenize="13a"))
    return path
