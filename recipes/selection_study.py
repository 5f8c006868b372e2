"""Issue 50's study: does cross-validated selection make tuning hold on test? On the stronger
reranker's featured lists (recipes/stronger.py's `features/` folder: the shipped lists with s_s,
mbr, channel(_norm), lm(_norm)), for each feature set of recipes.stronger.SYSTEMS, three ways of
tuning k-best MIRA on val, each refit with 3 runs (seeds 1-3):

- plain: the current defaults (`rerank tune --runs 3`);
- cv: `--select cv:5` (MIRA's declared grid, C x epochs, chosen by 5-fold CV, refit on all of val);
- features: `--select-features --keep nmt,nmt_norm,len --select-direction forward --select-rule
  fold-sd` (forward selection by the same CV, the fold-sd rule: `--select-features`' defaults until
  this study);
- backward: `--select-features --select-direction backward --select-rule paired --keep
  nmt,nmt_norm,len` (backward elimination from every column of the set, a column staying only when
  the paired test of the pooled held-out outputs says it helps, at 0.05). This arm was fixed from
  the val folds alone, before it was run on test_2016 (docs/results/stronger.md says why).

Every output is scored on test_2016 with BLEU, chrF and METEOR (German, exact+stem), means over the
3 runs, with the paired approximate randomisation test (each system's runs averaged per sentence)
between the arms of each feature set and between "all" and every subset within an arm. Weight
averaging (issue 50 item 3) is measured beside: the mean of the 3 runs' weights (plain, cv) and the
mean of the chosen setting's 5 fold fits (cv).

The CV of each feature arm is shared by the feature sets of one list (rerank.selection.CrossValidation
remembers every (settings, columns) fit), so a subset's evaluations are not repeated; the cv arm
has its own. CPU seconds (time.process_time) of each arm are recorded per feature set: the cost
ratio of selection over plain tuning, free of the other jobs on the machine.

    python -m rerank.recipes.selection_study --features DIR/features --out DIR/selection
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time
from dataclasses import replace

import numpy as np

from rerank.io import atomic_write

logger = logging.getLogger(__name__)
ARMS = ("plain", "cv", "features", "backward")
LABELS = {"plain": "plain", "cv": "cv:5", "features": "sel.", "backward": "back."}


def _load() -> str:
    with open("/proc/loadavg", encoding="utf-8") as f:
        return " ".join(f.read().split()[:3])


def study_list(flavour: str, n: int, args, log) -> dict:
    from rerank.formats import read_nbest, read_references
    from rerank.metrics.registry import make_metric
    from rerank.multirun import TuneSettings, tune_runs
    from rerank.recipes.demo import BASE_FEATURES
    from rerank.recipes.stronger import SYSTEMS
    from rerank.selection import CrossValidation, check_selection, run_selection
    from rerank.significance import approximate_randomization
    from rerank.tunejob import tuner_for
    from rerank.tuning import prepare
    from rerank.weights import best_rows, weight_vector

    dev = read_nbest(os.path.join(args.features, f"{flavour}.val.{n}best.feat.gz"))
    test = read_nbest(os.path.join(args.features, f"{flavour}.test_2016.{n}best.feat.gz"))
    dev_refs = [s[:dev.n_sentences] for s in read_references([os.path.join(args.refs, "val.de.gz")])]
    test_refs = [s[:test.n_sentences] for s in read_references([os.path.join(args.refs, "test_2016_flickr.de.gz")])]
    base = TuneSettings(tuner="mira", runs=args.runs, seed=args.seed, tokenize="13a")
    tuner = tuner_for(base)
    t0 = time.process_time()
    data = prepare(dev, dev_refs, metric="bleu", tokenize="13a")
    prepare_cpu = time.process_time() - t0
    names = data.feature_names
    cv_grid = CrossValidation(data, tuner, args.folds, args.seed)
    cv_feat = CrossValidation(data, tuner, args.folds, args.seed)
    cv_back = CrossValidation(data, tuner, args.folds, args.seed)
    shared = {"cv": cv_grid, "features": cv_feat, "backward": cv_back}
    outputs: dict[str, dict[str, list[np.ndarray]]] = {a: {} for a in ARMS}
    averaged: dict[str, np.ndarray] = {}
    record: dict = {"list": f"{flavour}.{n}best", "prepare_cpu_s": prepare_cpu, "systems": {}}
    for spec in SYSTEMS:
        mask = np.array([c in spec.features for c in names])
        sys_data = replace(data, tuned=mask)
        settings = replace(base, tune_features=tuple(spec.features))
        entry: dict = {}
        for arm in ARMS:
            t0, wall = time.process_time(), time.time()
            chosen_settings, sel, tuned_data = settings, None, sys_data
            if arm != "plain":
                asked = {"cv": replace(settings, select=f"cv:{args.folds}"),
                         "features": replace(settings, select_features=True, keep=tuple(BASE_FEATURES),
                                             select_direction="forward", select_rule="fold-sd"),
                         "backward": replace(settings, select_features=True, keep=tuple(BASE_FEATURES),
                                             select_direction="backward", select_rule="paired")}[arm]
                plan = check_selection(asked, tuner)
                tuned_data, options, sel = run_selection(sys_data, tuner, plan, asked, None, lambda _: None,
                                                         cv=shared[arm])
                chosen_settings = TuneSettings.make(asked, tuner_options=options)
            result = tune_runs(tuned_data, tuner, chosen_settings, verbose=lambda _: None)
            cpu, wall = time.process_time() - t0, time.time() - wall
            weights = [weight_vector(r.weights, test.feature_names, warn=lambda _: None) for r in result.runs]
            outputs[arm][spec.name] = [best_rows(test, w) for w in weights]
            vectors = np.array([[r.weights[c] for c in names] for r in result.runs])
            averaged[f"{arm}|{spec.name}|runs"] = vectors.mean(axis=0)
            if sel is not None and "settings" in sel:
                averaged[f"{arm}|{spec.name}|folds"] = np.array(sel["settings"]["chosen_fold_weights"]).mean(axis=0)
            entry[arm] = {"cpu_s": cpu, "wall_s": wall, "load": _load(), "dev_bleu": [r.score for r in result.runs],
                          "weights": [r.weights for r in result.runs], "selection": sel,
                          "options": result.runs[0].meta["options"]}
            log(f"{flavour} {n}-best {spec.name} {arm}: dev {np.mean(entry[arm]['dev_bleu']):.2f}, cpu {cpu:.1f}s, "
                f"wall {wall:.1f}s, load {_load()}"
                + (f"; {sel['settings']['chosen']}" if sel and "settings" in sel else "")
                + (f"; columns {sel['features']['selected']}" if sel and "features" in sel else ""))
        record["systems"][spec.name] = entry
    # test statistics of every row any output chose, computed once
    extra = {key: best_rows(test, weight_vector(dict(zip(names, w)), test.feature_names, warn=lambda _: None))
             for key, w in averaged.items()}
    chosen = np.unique(np.concatenate([r for arm in outputs.values() for runs in arm.values() for r in runs]
                                      + list(extra.values())))
    sentence = test.sentence_of_hyp[chosen]
    offsets = np.searchsorted(sentence, np.arange(test.n_sentences + 1))
    hyps = [test.hyps[int(r)] for r in chosen]
    metrics = {"bleu": make_metric("bleu", tokenize="13a"), "chrf": make_metric("chrf"),
               "meteor": make_metric("meteor", lang="de", meteor_options={"modules": ["exact", "stem"]})}
    stats = {m: np.asarray(metric.hypothesis_stats(hyps, offsets, test_refs), dtype=np.float64)
             for m, metric in metrics.items()}
    where = {int(r): i for i, r in enumerate(chosen)}

    def run_stats(rows_per_run: list[np.ndarray]) -> dict[str, np.ndarray]:
        idx = np.array([[where[int(r)] for r in rows] for rows in rows_per_run])
        return {m: s[idx] for m, s in stats.items()}

    def scores(st: dict[str, np.ndarray]) -> dict[str, float]:
        return {m: float(np.mean([metrics[m].score_from_stats(run.sum(axis=0)) for run in s])) for m, s in st.items()}

    all_stats = {arm: {name: run_stats(runs) for name, runs in by.items()} for arm, by in outputs.items()}
    record["test"] = {arm: {name: scores(st) for name, st in by.items()} for arm, by in all_stats.items()}
    record["averaged_test"] = {key: scores(run_stats([rows])) for key, rows in extra.items()}
    record["metric_signatures"] = {m: str(getattr(metric, "signature", lambda: "")()) for m, metric in metrics.items()}

    def test_pair(a: dict, b: dict) -> dict[str, dict]:
        ms = list(metrics)
        res = approximate_randomization([metrics[m] for m in ms], [a[m] for m in ms], [b[m] for m in ms],
                                        trials=args.ar, seed=args.seed)
        return {m: {"diff": r.observed_diff, "p": r.p_value} for m, r in zip(ms, res)}

    pairs = {}
    for spec in SYSTEMS:
        for a, b in (("plain", "cv"), ("plain", "features"), ("cv", "features"), ("plain", "backward"),
                     ("features", "backward"), ("cv", "backward")):
            pairs[f"{spec.name}: {b} vs {a}"] = test_pair(all_stats[a][spec.name], all_stats[b][spec.name])
    for arm in ARMS:
        for spec in SYSTEMS[:-1]:
            pairs[f"{arm}: all vs {spec.name}"] = test_pair(all_stats[arm][spec.name], all_stats[arm]["all"])
    for arm in ARMS[1:]:   # the issue's second target: "all" under selection against plain "+ channel + lm"
        pairs[f"{arm}: all vs plain + channel + lm"] = test_pair(all_stats["plain"]["+ channel + lm"],
                                                                all_stats[arm]["all"])
    record["significance"] = {"test": f"paired approximate randomisation, {args.ar} trials, runs averaged per sentence",
                              "pairs": pairs}
    record["fold_fits"] = {arm: cv.fits for arm, cv in shared.items()}
    return record


def main(argv=None) -> int:
    from rerank.cliargs import stderr_log

    ap = argparse.ArgumentParser(prog="python -m rerank.recipes.selection_study", description=__doc__.split("\n\n")[0])
    ap.add_argument("--features", required=True, help="the featured lists (recipes.stronger's OUT/features)")
    ap.add_argument("--refs", default=os.path.join(os.path.dirname(__file__), "..", "rerank", "data", "multi30k"),
                    help="folder of val.de.gz and test_2016_flickr.de.gz (default: the shipped ones)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--lists", default="optimised.20,regular.20,weak.20,optimised.50,regular.50,weak.50")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--ar", type=int, default=10000)
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    start = time.time()

    def log(msg: str) -> None:
        line = f"[{time.time() - start:7.1f}s] {msg}"
        logger.info(line)
        with open(os.path.join(args.out, "study.log"), "a", encoding="utf-8") as f:
            f.write(line + "\n")

    with stderr_log(logging.INFO):
        for item in args.lists.split(","):
            flavour, n = item.split(".")
            path = os.path.join(args.out, f"{flavour}.{n}best.json")
            if os.path.exists(path):
                log(f"{item}: done before ({path})")
                continue
            rec = study_list(flavour, int(n), args, log)
            rec["command"] = "python -m rerank.recipes.selection_study " + " ".join(argv if argv is not None else [])
            with atomic_write(path) as f:
                json.dump(rec, f, indent=1)
            log(f"{item}: written {path}")
    return 0


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))


def studied(records: list[dict]) -> list[str]:
    """The feature sets of recipes.stronger.SYSTEMS that the study's records hold, in its order ("all"
    last): a study made before a system was added to the stronger reranker has no row for it."""
    from rerank.recipes.stronger import SYSTEMS

    return [s.name for s in SYSTEMS if all(s.name in rec["systems"] for rec in records)]


def arms_of(records: list[dict]) -> list[str]:
    """The arms of ARMS that every record holds (a study made before an arm was added has none of it)."""
    return [a for a in ARMS if all(a in rec["test"] for rec in records)]


def report(records: list[dict], command: str) -> str:
    """Markdown: per list, each feature set's test scores under the arms with the pairwise
    significance, the choices, the cost ratios, and the weight-averaging measurements."""
    names, arms = studied(records), arms_of(records)
    # the second mark of an arm: significantly above/below another selection arm
    against = {"features": ("cv", "ᶜ", "ᵥ"), "backward": ("features", "ˢ", "ₛ")}

    def mark(pairs: dict, key: str, metric: str) -> str:
        found = pairs.get(key)
        if not found:
            return ""
        d, p = found[metric]["diff"], found[metric]["p"]
        return ("▲" if d > 0 else "▼") if p < 0.05 else ""

    lines = [f"Made by `{command}`, on the lists of `recipes/stronger.py`'s features step (the shipped lists "
             "with s_s, mbr and their own channel/lm columns).", ""]
    head = [f"{LABELS[a]} {m}" for m in ("BLEU", "chrF", "METEOR") for a in arms]
    for rec in records:
        pairs = rec["significance"]["pairs"]
        lines += [f"### {rec['list']}", "", "| features | " + " | ".join(head) + " |",
                  "|---|" + "---|" * len(head)]
        for name in names:
            cells = []
            for metric in ("bleu", "chrf", "meteor"):
                for arm in arms:
                    score = rec["test"][arm][name][metric]
                    sig = "" if arm == "plain" else mark(pairs, f"{name}: {arm} vs plain", metric)
                    if arm in against and against[arm][0] in arms:
                        other, up, down = against[arm]
                        sig += {"▲": up, "▼": down}.get(mark(pairs, f"{name}: {arm} vs {other}", metric), "")
                    cells.append(f"{score:.2f}{sig}")
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines.append("")
        for name in names:
            sel = rec["systems"][name]
            cv = sel["cv"]["selection"]["settings"]["chosen"]
            ratio = (sel["cv"]["cpu_s"] + rec["prepare_cpu_s"]) / (sel["plain"]["cpu_s"] + rec["prepare_cpu_s"])
            kept = [f"{'backward selection' if arm == 'backward' else 'selection'} kept "
                    f"{', '.join(sel[arm]['selection']['features']['selected'])}" for arm in ("features", "backward")
                    if arm in arms]
            lines.append(f"- {name}: cv:5 chose C={cv['C']:g}, epochs={cv['epochs']} ({ratio:.1f}x plain's CPU); "
                         + "; ".join(kept))
        lines += steps_of(rec, arms)
        worse = [(arm, n) for arm in arms for n in names[:-1]
                 if pairs[f"{arm}: all vs {n}"]["bleu"]["p"] < 0.05 and pairs[f"{arm}: all vs {n}"]["bleu"]["diff"] < 0]
        lines.append("- \"all\" significantly below a subset in BLEU: " +
                     (", ".join(f"{a}: {n}" for a, n in worse) if worse else "never"))
        lines.append("")
    lines += summary(records)
    return "\n".join(lines) + "\n"


def steps_of(rec: dict, arms: list[str]) -> list[str]:
    """The feature arms' steps on "all" (val only: CV means, the rule's numbers), a line per arm."""
    lines = []
    for arm in ("features", "backward"):
        if arm not in arms:
            continue
        found = rec["systems"]["all"][arm]["selection"]["features"]
        parts = []
        for step in found["steps"]:
            moved = step["joined"] if "joined" in step else step["removed"]
            sign = "+" if "joined" in step else "-"
            how = (f"pooled gain with it {step['pooled_gain']:+.2f}, p {step['p']:.3f}" if "p" in step else
                   f"gain with it {step['gain_mean']:+.2f}, fold sd {step['gain_sd']:.2f}")
            verdict = ("joins" if sign == "+" else "goes") if moved else ("left out" if sign == "+" else "stays")
            parts.append(f"{sign} {step['best']} ({how}): {verdict}")
        lines.append(f"- {LABELS[arm]} on \"all\", its steps on val: " + "; ".join(parts or ["none"]))
    return lines


ARM_TEXT = {"plain": "plain MIRA", "cv": "`--select cv:5`",
            "features": "`--select-features --select-direction forward --select-rule fold-sd`",
            "backward": "`--select-features --select-direction backward --select-rule paired` (now the defaults)"}


def summary(records: list[dict]) -> list[str]:
    """The issue's targets, the cost and the weight averaging, over the lists measured."""
    names, arms = studied(records), arms_of(records)
    lines = [f"**Over the {len(records)} lists measured** ({', '.join(r['list'] for r in records)}):", ""]
    for arm in arms:
        never = sum(not any(r["significance"]["pairs"][f"{arm}: all vs {n}"]["bleu"]["p"] < 0.05
                            and r["significance"]["pairs"][f"{arm}: all vs {n}"]["bleu"]["diff"] < 0 for n in names[:-1])
                    for r in records)
        at_least = sum(r["test"][arm]["all"]["bleu"] >= r["test"]["plain"]["+ channel + lm"]["bleu"] - 1e-9
                       for r in records)
        same = sum(r["test"][arm]["all"]["bleu"] >= r["test"][arm]["+ channel + lm"]["bleu"] - 1e-9 for r in records)
        gaps = [r["test"][arm]["all"]["bleu"] - r["test"]["plain"]["+ channel + lm"]["bleu"] for r in records]
        target = [r["significance"]["pairs"].get(f"{arm}: all vs plain + channel + lm") for r in records]
        below = ("" if arm == "plain" or None in target else
                 f", significantly below it on {sum(t['bleu']['p'] < 0.05 and t['bleu']['diff'] < 0 for t in target)}"
                 " (per list: " + ", ".join(f"{t['bleu']['diff']:+.2f} p {t['bleu']['p']:.3f}" for t in target) + ")")
        lines.append(f"- {ARM_TEXT[arm]}: \"all\" never significantly below a subset (BLEU) on {never} of {len(records)} "
                     f"lists; its test BLEU at least plain \"+ channel + lm\"'s on {at_least} of {len(records)} "
                     f"(all minus plain + channel + lm: {min(gaps):+.2f} to {max(gaps):+.2f}){below}, at least its own "
                     f"arm's \"+ channel + lm\" on {same}")

    def ratios(arm: str) -> list[float]:
        return [(r["systems"][n][arm]["cpu_s"] + r["prepare_cpu_s"]) / (r["systems"][n]["plain"]["cpu_s"] + r["prepare_cpu_s"])
                for r in records for n in names]

    loads = [float(r["systems"][n][a]["load"].split()[0]) for r in records for n in names for a in arms]
    cost = [f"`--select cv:5` with `--runs 3` {min(ratios('cv')):.1f}x to {max(ratios('cv')):.1f}x plain `--runs 3` "
            f"(median {np.median(ratios('cv')):.1f}x)"]
    cost += [f"{ARM_TEXT[a]} {min(ratios(a)):.1f}x to {max(ratios(a)):.1f}x (median {np.median(ratios(a)):.1f}x)"
             for a in ("features", "backward") if a in arms]
    lines.append("- cost (CPU seconds, this process, statistics included, list reading not): " + "; ".join(cost)
                 + f" (a selection's CV shared by the feature sets of a list); 1-minute load average {min(loads):.1f} "
                 f"to {max(loads):.1f} on the two cores, so wall times are not comparable, CPU times are")
    for arm, how, label in (("plain", "runs", "plain MIRA, the mean of the 3 runs' weights"),
                            ("cv", "runs", "cv:5, the mean of the 3 refits' weights"),
                            ("cv", "folds", "cv:5, the mean of the chosen point's 5 fold fits")):
        deltas = {m: [r["averaged_test"][f"{arm}|{n}|{how}"][m] - r["test"][arm][n][m]
                      for r in records for n in names] for m in ("bleu", "chrf", "meteor")}
        lines.append(f"- weight averaging ({label}) against the runs' mean score: "
                     + "; ".join(f"{m} {min(d):+.2f} to {max(d):+.2f} (mean {np.mean(d):+.2f})" for m, d in deltas.items()))
    return lines + [""]


def publish(out: str, path: str, command: str) -> dict:
    """The lists' records of run folder `out` as one JSON for the docs (docs/results/stronger/
    selection_study.json), with the command that made them, written atomically."""
    records = []
    for item in ("optimised.20", "regular.20", "weak.20", "optimised.50", "regular.50", "weak.50"):
        flavour, n = item.split(".")
        found = os.path.join(out, f"{flavour}.{n}best.json")
        if os.path.exists(found):
            with open(found, encoding="utf-8") as f:
                records.append(json.load(f))
    study = {"command": command, "lists": records}
    with atomic_write(path) as f:
        json.dump(study, f, indent=1)
    return study
