"""The embedding study of issue 14 (docs/results/embeddings.md): every variant of
recipes/configs/embeddings/ trained, evaluated and tabulated, resumably.

    python -m rerank.recipes.embedding_study --data-dir DATA --out runs/emb-study [--variants a,b] [--threads 1] [--publish]

DATA holds multi30k/ (task1/, task2/), sts/ and muse/en-de.full.txt.gz (as ../shared/data). Each
stage of a variant (recipes.embedding_variants) runs in OUT/stages/NAME-KEY/ with a DONE marker
(recipes.steps), so a second run reuses every finished stage, a stopped training resumes from
its checkpoint, and variants sharing a stage train it once. Each final model is evaluated
(translation retrieval R@1/5/10 both ways on test_2016, STS 2014/2015 images, the alignment ratio
over the MUSE dictionary) into OUT/VARIANT/eval.{json,md}; OUT/VARIANT/result.json adds its
stages and training minutes; OUT/results.json and OUT/results.md gather every finished variant.
--publish merges results.json into docs/results/embeddings.json (a variant this run did not make
keeps its published row) and renders the numbers block of
docs/results/embeddings.md from it (recipes.results_docs).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time

from rerank.recipes.embedding_variants import CONFIGS, GROUPS, ORDER, available, load_variant, select
from rerank.recipes.steps import Steps, marker_path, read_marker
from rerank.errors import InputError
from rerank.io import atomic_write
from rerank.cliargs import terminal_bars

logger = logging.getLogger(__name__)

ROOT = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
DOCS = os.path.join(ROOT, "docs", "results")
DICTIONARY = os.path.join("muse", "en-de.full.txt.gz")


class Study:
    def __init__(self, data_dir: str, out: str, configs: str = CONFIGS, device: str = "cpu", threads: int = 1,
                 dictionary: str | None = None, quiet: bool = False):
        self.data, self.out, self.configs, self.device, self.threads = data_dir, out, configs, str(device), threads
        self.m30k, self.sts = os.path.join(data_dir, "multi30k"), os.path.join(data_dir, "sts")
        self.dictionary = dictionary or os.path.join(data_dir, DICTIONARY)
        self.quiet, self.start = quiet, time.time()
        for needed in (os.path.join(self.m30k, "task1", "raw"), self.sts):
            if not os.path.isdir(needed):
                raise InputError(f"not the data root: {os.path.relpath(needed, data_dir)}/ is missing", data_dir)
        if not os.path.isfile(self.dictionary):
            raise InputError("the bilingual dictionary (alignment ratio, AME) is missing", self.dictionary)
        if os.path.exists(out) and not os.path.isdir(out):
            raise InputError("--out must be a directory, this is a file", out)
        self.steps = Steps(self.log)

    def log(self, msg: str) -> None:
        line = f"[{time.time() - self.start:7.1f}s] {msg}"
        if not self.quiet:
            logger.info(line)
        with open(os.path.join(self.out, "study.log"), "a", encoding="utf-8") as f:
            f.write(line + "\n")

    def stage_path(self, stage: dict) -> str:
        return os.path.join(self.out, "stages", f"{stage['name']}-{stage['key']}" + (".tsv" if stage["kind"] == "pseudopairs" else ""))

    def run(self, names: list[str]) -> dict:
        variants = [load_variant(n, self.configs) for n in names]   # every file checked before any work
        os.makedirs(self.out, exist_ok=True)
        for variant, name in zip(variants, names):
            minutes = variant.get("estimated_minutes")
            self.log(f"variant {name}: {len(variant['stages'])} stage(s)" + (f", about {minutes} min" if minutes else ""))
            self.variant(name, variant)
        results = self.gather()
        self.log(self.steps.summary())
        return results

    def variant(self, name: str, variant: dict) -> dict:
        by_name, records = {}, []
        for stage in variant["stages"]:
            by_name[stage["name"]] = stage
            path = self.stage_path(stage)
            if stage["kind"] == "train":
                records.append(self.train_stage(name, stage, by_name, path))
            else:
                records.append(self.pairs_stage(name, stage, by_name, path))
        model = os.path.join(self.stage_path(variant["stages"][-1]), "model.pt")
        report = self.evaluate(name, model)
        result = {"variant": name, "description": variant.get("description", ""), "config": _shown(variant["file"]),
                  "estimated_minutes": variant.get("estimated_minutes"), "stages": records,
                  "minutes": round(sum(r["minutes"] for r in records), 1), "model": os.path.relpath(model, self.out),
                  "fp16_mb": _fp16_mb(model), "translation_retrieval": report["translation_retrieval"],
                  "translation_retrieval_val": report.get("translation_retrieval_val") or {}, "sts": report["sts"],
                  "alignment": report.get("alignment"), "threads": self.threads}
        with atomic_write(os.path.join(self.out, name, "result.json")) as f:
            json.dump(result, f, indent=1)
        return result

    def train_stage(self, variant: str, stage: dict, by_name: dict, run: str) -> dict:
        from rerank.embeddings.config import resolve_config
        from rerank.embeddings.train import train

        config, inputs = dict(stage["config"]), []
        if config.get("dictionary") and not os.path.isabs(config["dictionary"]):
            config["dictionary"] = os.path.join(self.data, config["dictionary"])
        if stage.get("init"):
            config["init"] = os.path.join(self.stage_path(by_name[stage["init"]]), "model.pt")
            inputs.append(config["init"])
        config["pseudo_pairs"] = [{"file": self.stage_path(by_name[ref]), "src_lang": by_name[ref]["src_lang"],
                                   "tgt_lang": by_name[ref]["tgt_lang"]} for ref in stage.get("pseudo_pairs", [])]
        inputs += [spec["file"] for spec in config["pseudo_pairs"]]
        resolved = {"data_dir": os.path.abspath(self.m30k), **resolve_config(config)}
        label = f"{variant}: train {stage['name']}"
        if not self.steps.is_done(label, run, inputs, resolved, directory=True):
            started = self.steps.start(label, run, resolved, directory=True)
            train(config, self.m30k, run, self.device, quiet=self.quiet, progress=terminal_bars())
            self.steps.finish(label, run, inputs, resolved, started, directory=True)
        with open(os.path.join(run, "model.json"), encoding="utf-8") as f:
            tr = json.load(f)["training"]
        marker = read_marker(marker_path(run, directory=True)) or {}
        return {"name": stage["name"], "kind": "train", "dir": os.path.relpath(run, self.out),
                "minutes": tr.get("total_minutes", tr.get("minutes", 0.0)), "steps": tr.get("final_step", tr.get("step")),
                "best_epoch": tr.get("epoch"), "status": tr.get("final_status", tr.get("status")),
                "wall_minutes_last_invocation": round(marker.get("seconds", 0.0) / 60, 2)}

    def pairs_stage(self, variant: str, stage: dict, by_name: dict, out: str) -> dict:
        from rerank.embeddings.config import resolve_config
        from rerank.embeddings.data import disjoint_captions
        from rerank.embeddings.encoder import Encoder
        from rerank.embeddings.pseudopairs import format_pairs, pseudo_pairs

        model_stage = by_name[stage["model"]]
        model = os.path.join(self.stage_path(model_stage), "model.pt")
        settings = {k: stage[k] for k in ("src_lang", "tgt_lang")} | {"filter": stage.get("filter")}
        label = f"{variant}: pseudo-pairs {stage['name']}"
        if not self.steps.is_done(label, out, [model], settings):
            started = self.steps.start(label, out, settings)
            mc = resolve_config(model_stage["config"])
            corpora = disjoint_captions(self.m30k, "train", mc["languages"], mc["sources"], mc["train_limit"],
                                        mc["aligned_images"])
            src, tgt = (self.untabbed(corpora[stage[key]], stage[key]) for key in ("src_lang", "tgt_lang"))
            rows = pseudo_pairs(Encoder.load(model), src, stage["src_lang"], tgt, stage["tgt_lang"],
                                stage.get("filter"), self.device)
            with atomic_write(out) as f:
                f.write(format_pairs(rows))
            cosines = [c for _, _, c in rows]
            self.steps.finish(label, out, [model], settings, started, pairs=len(rows), targets=len(tgt),
                              sources=len(src), distinct_sources=len({s for _, s, _ in rows}),
                              mean_cosine=round(sum(cosines) / len(cosines), 4))
        marker = read_marker(marker_path(out)) or {}
        return {"name": stage["name"], "kind": "pseudopairs", "dir": os.path.relpath(out, self.out),
                "minutes": round(marker.get("seconds", 0.0) / 60, 2),
                **{k: marker.get(k) for k in ("pairs", "targets", "distinct_sources", "mean_cosine")}}

    def untabbed(self, captions: list[str], lang: str) -> list[str]:
        """The captions with tabs (the pair file's separator) as spaces: the embedding tokeniser
        splits both alike, so training on the pairs sees the same tokens. The log says how many."""
        tabbed = sum("\t" in c for c in captions)
        if tabbed:
            self.log(f"pseudo-pairs: {tabbed} {lang} caption(s) hold a tab, written with a space instead")
        return [c.replace("\t", " ") for c in captions] if tabbed else captions

    def evaluate(self, variant: str, model: str) -> dict:
        from rerank.embeddings.encoder import Encoder
        from rerank.embeddings.evaluate import evaluate, write_report

        stem = os.path.join(self.out, variant, "eval")
        settings = {"data_dir": os.path.abspath(self.m30k), "sts_dir": os.path.abspath(self.sts),
                    "dictionary": os.path.abspath(self.dictionary), "retrieval": ["val", "test_2016"]}
        label = f"{variant}: evaluation"
        if not self.steps.is_done(label, stem + ".json", [model], settings):
            started = self.steps.start(label, stem + ".json", settings)
            report = evaluate(Encoder.load(model), self.m30k, self.sts, device=self.device, dictionary=self.dictionary)
            write_report(report, stem)
            self.steps.finish(label, stem + ".json", [model], settings, started)
        with open(stem + ".json", encoding="utf-8") as f:
            return json.load(f)

    def stale(self, name: str, result: dict) -> bool:
        """True when NAME's committed configuration no longer leads to the stages its result was made by."""
        if name not in available(self.configs):
            return False
        wanted = [os.path.relpath(self.stage_path(s), self.out) for s in load_variant(name, self.configs)["stages"]]
        return wanted != [s["dir"] for s in result["stages"]]

    def gather(self) -> dict:
        """OUT/results.json and results.md from every variant with a result.json (any invocation's)."""
        variants = {}
        for name in dict.fromkeys(available(self.configs) + sorted(os.listdir(self.out))):
            path = os.path.join(self.out, name, "result.json")
            if os.path.isfile(path):
                with open(path, encoding="utf-8") as f:
                    result = json.load(f)
                if self.stale(name, result):
                    self.log(f"{name}: result.json left out, its configuration has changed since (rerun it)")
                    continue
                variants[name] = result
        results = {"command": "python -m rerank.recipes.embedding_study --data-dir DATA --out OUT --variants "
                   + ",".join(variants), "variants": variants}
        with atomic_write(os.path.join(self.out, "results.json")) as f:
            json.dump(results, f, indent=1)
        with atomic_write(os.path.join(self.out, "results.md")) as f:
            f.write("# Embedding study\n\n" + table(results))
        return results


def _shown(path: str) -> str:
    """A config path as the docs show it: relative to the repository when inside it."""
    full = os.path.abspath(path)
    return os.path.relpath(full, ROOT) if full.startswith(ROOT + os.sep) else full


def _fp16_mb(model: str) -> float:
    """Size of the model's weights stored in fp16, in MB (10^6 bytes; the .json's vocabularies not included)."""
    from rerank.device import load_tensors

    state = load_tensors(model, "model")
    return round(2 * sum(v.numel() for v in state.values()) / 1e6, 1)


def _recalls(r: dict | None) -> str:
    return " / ".join(f"{r[k]:.1f}" for k in ("r1", "r5", "r10")) if r else "–"


def val_r1(variant: dict) -> float | None:
    """The study's choice criterion: mean R@1 of translation retrieval both ways (en-de) on all of
    task1 val; None for a row made before val was evaluated."""
    val = variant.get("translation_retrieval_val") or {}
    if not all(d in val for d in ("en->de", "de->en")):
        return None
    return (val["en->de"]["r1"] + val["de->en"]["r1"]) / 2


def best_on_val(results: dict) -> str | None:
    """The variant with the highest val_r1 (ties: the earlier in the table), None if none has one."""
    scored = [(val_r1(v), -i, name) for i, (name, v) in enumerate(results["variants"].items()) if val_r1(v) is not None]
    return max(scored)[2] if scored else None


def table(results: dict) -> str:
    """The Markdown table of a results.json: one row per variant."""
    lines = ["| variant | stages | steps | minutes | val en→de R@1/5/10 | val de→en R@1/5/10 | test_2016 en→de R@1/5/10 "
             "| test_2016 de→en R@1/5/10 | STS 2014 | STS 2015 | alignment ratio % | fp16 MB |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, v in results["variants"].items():
        tr, sts, al = v["translation_retrieval"], v["sts"], v.get("alignment") or {}
        val = v.get("translation_retrieval_val") or {}
        steps = sum(s.get("steps") or 0 for s in v["stages"] if s["kind"] == "train")
        cells = [name, " → ".join(s["name"] for s in v["stages"]), str(steps), f"{v['minutes']:.1f}",
                 _recalls(val.get("en->de")), _recalls(val.get("de->en")), _recalls(tr.get("en->de")), _recalls(tr.get("de->en")),
                 *(f"{sts[k]['pearson']:.3f}" if k in sts else "–" for k in ("sts2014-images", "sts2015-images")),
                 f"{al['mean']:.2f}" if "mean" in al else "–", f"{v['fp16_mb']:.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    best = best_on_val(results)
    if best:
        lines += ["", f"Best on val (mean R@1 of en→de and de→en on all of task1 val, {val_r1(results['variants'][best]):.2f}): "
                  f"`{best}`. Rows with – in the val columns were made before the study evaluated val."]
    return "\n".join(lines) + "\n"


def merged(published: dict | None, new: dict) -> dict:
    """The published results with the new run's variants added or replaced: the study is run a few
    variants at a time (and on other machines), so a variant this run did not make keeps its
    published row, and the commands that made the kept rows are listed (`earlier_commands`)."""
    if not published:
        return new
    variants = {**published["variants"], **new["variants"]}
    kept = [n for n in published["variants"] if n not in new["variants"]]
    earlier = [c for c in [*published.get("earlier_commands", []), published["command"]] if c != new["command"]]
    return {"command": new["command"], "earlier_commands": earlier if kept else [],
            "variants": {n: variants[n] for n in sorted(variants, key=lambda n: (ORDER.index(n) if n in ORDER
                                                                              else len(ORDER), n))}}


def publish(out: str, docs: str = DOCS) -> list[str]:
    """OUT/results.json merged into DOCS/embeddings.json (`merged`), and the numbers block of
    DOCS/embeddings.md rendered from it."""
    from rerank.recipes.results_docs import RENDER, render

    src = os.path.join(out, "results.json")
    if not os.path.isfile(src):
        raise InputError("no results.json: run the study first", out)
    dst, page = os.path.join(docs, "embeddings.json"), os.path.join(docs, "embeddings.md")
    with open(src, encoding="utf-8") as f:
        new = json.load(f)
    published = None
    if os.path.isfile(dst):
        with open(dst, encoding="utf-8") as f:
            published = json.load(f)
    with atomic_write(dst) as f:
        json.dump(merged(published, new), f, indent=1)
    if not os.path.isfile(page):
        return [dst]
    text = render(page, RENDER["embeddings.md"], docs)
    with atomic_write(page) as f:
        f.write(text)
    return [dst, page]


def main(argv=None) -> int:
    """The command line of this module, with the pipeline's log lines (INFO records) on stderr."""
    from rerank.cliargs import stderr_log

    with stderr_log(logging.INFO):
        return _main(argv)


def _main(argv: list[str] | None = None) -> int:
    from rerank.device import add_torch_options, setup_torch

    ap = argparse.ArgumentParser(prog="python -m rerank.recipes.embedding_study", description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", required=True, help="data root with multi30k/, sts/ and muse/, e.g. ../shared/data")
    ap.add_argument("--out", required=True, help="run directory (everything is written here)")
    ap.add_argument("--variants", help=f"comma-separated variant names, or {', '.join(f'{k} ({v})' for k, v in GROUPS.items())} "
                    "(default: all)")
    ap.add_argument("--configs", default=CONFIGS, metavar="DIR", help="variant configurations (default: the committed "
                    "recipes/configs/embeddings)")
    ap.add_argument("--dictionary", help="bilingual dictionary for the alignment ratio (default: DATA/muse/en-de.full.txt.gz)")
    ap.add_argument("--publish", action="store_true", help="copy the results into docs/results/embeddings.json and "
                    "render docs/results/embeddings.md (default: off)")
    ap.add_argument("--quiet", action="store_true", help="log to OUT/study.log only")
    add_torch_options(ap)
    args = ap.parse_args(argv)
    try:
        device = setup_torch(args)
        names = select(args.variants, args.configs)
        Study(args.data_dir, args.out, args.configs, device, args.threads, args.dictionary, args.quiet).run(names)
        for path in publish(args.out) if args.publish else []:
            print(f"wrote {path}")
    except InputError as exc:
        print(f"{ap.prog}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{ap.prog}: interrupted", file=sys.stderr)
        return 130
    print(f"results: {os.path.join(args.out, 'results.md')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
