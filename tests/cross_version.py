"""Models saved by one transformers major version score the same under the other (CI runs it
between .venv, transformers 5, and .venv-compat, transformers 4 with unbabel-comet):

    python tests/cross_version.py build DIR   # tiny models + the scores this version gives them
    python tests/cross_version.py check DIR   # load DIR's models here; the scores must agree (1e-4)

Not a pytest module: it needs two environments. `make test-compat` runs it both ways.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np

HYPS = [["Ein Mann in einem roten Hemd fährt Fahrrad.", "Ein Mann fährt ein Fahrrad."],
        ["Zwei Hunde rennen auf dem Gras.", "Zwei Hunde laufen."]]
SOURCES = ["A man in a red shirt is riding a bike.", "Two dogs run on the grass."]
COLUMNS = {"channel": "marian", "lm": "gpt2", "sim": "st", "direct": "marian_ct2"}


def scores(models: dict) -> dict[str, list[float]]:
    import torch

    from rerank import api
    from rerank.nbest import NBestList

    torch.set_num_threads(1)
    nbest = NBestList.from_lists(HYPS, [np.zeros(len(h)) for h in HYPS], ["nmt"])
    options = {f"{column}_model": models[name] for column, name in COLUMNS.items()}
    featured = api.add_features(nbest, list(COLUMNS), sources=SOURCES, **options)
    found = {column: featured.column(column).tolist() for column in COLUMNS}
    if "metricx" in models:   # MetricX-24 of (source, hypothesis, reference) and without the reference
        from rerank.metrics.metricx import cached_scores

        rows = [(src, hyp, hyps[0]) for src, hyps in zip(SOURCES, HYPS) for hyp in hyps]
        found["metricx"] = cached_scores(models["metricx"], rows, reference=True, what="metricx").tolist()
        found["metricx_qe"] = cached_scores(models["metricx"], [r[:2] for r in rows], reference=False,
                                            what="metricx").tolist()
    return found


def main(argv: list[str]) -> int:
    import transformers

    from rerank.recipes import tiny_models

    command, folder = argv
    record_path = os.path.join(folder, "scores.json")
    if command == "build":
        models = tiny_models.build_all(folder)
        models["metricx"] = tiny_models.build_metricx(os.path.join(folder, "metricx-24"),
                                                      tiny_models.read_text(tiny_models.DEFAULT_TEXT))
        record = {"transformers": transformers.__version__, "models": models, "scores": scores(models)}
        with open(record_path, "w", encoding="utf-8") as f:
            json.dump(record, f, indent=1)
        print(f"built with transformers {transformers.__version__}: {folder}")
        return 0
    with open(record_path, encoding="utf-8") as f:
        record = json.load(f)
    here = scores(record["models"])
    worst = max(float(np.abs(np.subtract(here[c], record["scores"][c])).max()) for c in record["scores"])
    print(f"models saved by transformers {record['transformers']}, loaded by {transformers.__version__}: "
          f"largest score difference {worst:.2e}")
    return 0 if worst <= 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
