"""BLEURT against the PyTorch port itself (bleurt-pytorch 0.0.1, lucadiliello/bleurt-pytorch) on
checkpoints the port writes: scores, token ids and speed (issue 47: "BLEURT the PyTorch port's
scores"). The port is a peer, never a dependency: it installs into a scratch folder, and it needs
transformers 4 (its modeling file imports helpers transformers 5 removed), so this runs in the
compat venv:

    .venv-compat/bin/python -m pip install --no-deps --target SCRATCH bleurt-pytorch==0.0.1
    PYTHONPATH=SCRATCH .venv-compat/bin/python benchmarks/bench_bleurt_port.py --sizes tiny,bleurt20 \
        [--pairs 64] [--threads 2] [--repeats 2] [--also .venv/bin/python] [--json docs/benchmarks/bleurt_port.json]

For each size the port's own classes build the checkpoint: `BleurtConfig`,
`BleurtForSequenceClassification(config)` with random weights (seeded; the pooler's and the
head's spread as tiny_models.build_bleurt spreads them, so the scores differ between inputs) and
`BleurtSPTokenizer` over a sentencepiece model trained on the shipped Multi30k text
(tiny_models.spm_tokenizer_model, 4,000 pieces; BLEURT-20's own spm.model cannot be downloaded), each written
by its `save_pretrained`: the layout of lucadiliello/BLEURT-20. Sizes: `tiny` (2 layers, width 32,
input embeddings 16), `tiny-noproj` (the same without `embedding_size`: the port then has no input
projection) and `bleurt20` (BLEURT-20's RemBERT: 32 layers, width 1152, 18 heads, ffn 4608, input
embeddings 256, vocabulary 250,300).

The pairs: `--pairs` test_2016 sentences drawn with a fixed seed (the optimised system's 1-best
German hypothesis against the German reference), plus an empty hypothesis. The port scores them
as its README does: `tokenizer(references, candidates, padding="longest", return_tensors="pt")`
in batches of `--port-batch`, `model(**inputs).logits`. Ours reads the port's directory as it is
(rerank.metrics.bleurt: no conversion) through `pair_models.cached_pair_scores`. Reported: the
token ids of every pair equal or not, the largest |score difference|, and the seconds of one call
scoring every pair with the model loaded (tokenisation included; `--repeats` alternating runs
after an untimed warm-up, the best counts), the load average around each. `--also PY` scores the
same directory with ours under another interpreter (`.venv`'s transformers 5) in a subprocess and
reports its token ids and largest difference to the port's scores too.

`--probe none,0.1:0,0.1:256` (any interpreter, no port needed) times ours alone on a
BLEURT-20-sized checkpoint in the port's layout (tiny_models.build_bleurt_port: the same sizes,
4,000 pieces, the embedding table's 250,300 rows) for `--pairs` pairs with each padding bound
SLACK:FLOOR of `token_batches(..., slack, floor)` (none: no bound), and prints the batches, padded
tokens and the best seconds of `--repeats` calls after a warm-up.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np

from bench_model_sizes import cpu_name, loadavg, race, segments, shipped_text, write_json  # benchmarks/ is this script's folder

SIZES = {
    "tiny": dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, embedding_size=16,
                 max_position_embeddings=256),
    "tiny-noproj": dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                        embedding_size=None, max_position_embeddings=256),
    "bleurt20": dict(hidden_size=1152, num_hidden_layers=32, num_attention_heads=18, intermediate_size=4608,
                     embedding_size=256, max_position_embeddings=512, vocab_size=250300),
}


def build_with_port(out: str, size: str, seed: int) -> str:
    """A checkpoint written by the port's own classes and save_pretrained (random weights)."""
    import torch
    from bleurt_pytorch import BleurtConfig, BleurtForSequenceClassification
    from bleurt_pytorch.bleurt.tokenization_bleurt_sp import BleurtSPTokenizer

    from rerank.recipes.tiny_models import spm_tokenizer_model

    os.makedirs(out, exist_ok=True)
    spm_file = os.path.join(out, "sent_piece.model")
    with open(spm_file, "wb") as f:
        f.write(spm_tokenizer_model(shipped_text(), vocab_size=4000))
    tokenizer = BleurtSPTokenizer(spm_file)
    fields = {"vocab_size": len(tokenizer), **SIZES[size]}
    torch.manual_seed(seed)
    config = BleurtConfig(**fields, num_labels=1, architectures=["BleurtForSequenceClassification"])
    model = BleurtForSequenceClassification(config).eval()
    with torch.no_grad():
        model.bleurt.pooler.dense.weight.normal_(0.0, 0.5)
        model.classifier.weight.normal_(0.0, 1.0)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    os.remove(spm_file)
    return out


def port_scores(model, tokenizer, pairs, batch: int) -> np.ndarray:
    """The port's README call, `batch` pairs at a time."""
    import torch

    out: list[float] = []
    with torch.no_grad():
        for a in range(0, len(pairs), batch):
            some = pairs[a:a + batch]
            inputs = tokenizer([r for _, r in some], [h for h, _ in some], padding="longest", return_tensors="pt")
            out += model(**inputs).logits.flatten().tolist()
    return np.array(out)


def ours_in(python: str, path: str, pairs) -> dict:
    """Our scores and token ids of `pairs` under another interpreter (this script's --ours-only)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(pairs, f)
    try:
        done = subprocess.run([python, os.path.abspath(__file__), "--ours-only", path, f.name], check=True,
                              capture_output=True, text=True)
    finally:
        os.remove(f.name)
    return json.loads(done.stdout.strip().splitlines()[-1])


def ours_only(path: str, pairs_file: str) -> int:
    import torch
    import transformers

    from rerank.metrics import bleurt, pair_models

    torch.set_num_threads(1)
    with open(pairs_file, encoding="utf-8") as f:
        pairs = [tuple(p) for p in json.load(f)]
    model = bleurt.BLEURTModel(path, "cpu")
    scores = pair_models.cached_pair_scores(model, pairs, None, "bench")
    print(json.dumps({"scores": scores.tolist(), "ids": [row["input_ids"] for row in model.inputs(pairs)],
                      "transformers": transformers.__version__}))
    return 0


def bench(size: str, pairs, args, tmp: str) -> dict:
    from bleurt_pytorch import BleurtForSequenceClassification, BleurtTokenizer

    from rerank.metrics import bleurt, pair_models

    path = build_with_port(os.path.join(tmp, size), size, args.seed)
    port_model = BleurtForSequenceClassification.from_pretrained(path).eval()
    port_tokenizer = BleurtTokenizer.from_pretrained(path)
    ours = bleurt.BLEURTModel(path, "cpu")
    ours.load()
    theirs_ids = [port_tokenizer(r, h)["input_ids"] for h, r in pairs]
    ours_ids = [row["input_ids"] for row in ours.inputs(pairs)]
    sides = {"ours": lambda: pair_models.cached_pair_scores(ours, pairs, None, "bench"),
             "port": lambda: port_scores(port_model, port_tokenizer, pairs, args.port_batch)}
    pair_models.cached_pair_scores(ours, pairs[:2], None, "warm"), port_scores(port_model, port_tokenizer, pairs[:2], 2)
    result = race(sides, args.repeats)
    diff = float(np.max(np.abs(result["ours"]["values"] - result["port"]["values"])))
    entry = {"files": sorted(os.listdir(path)), "tokenizer": type(port_tokenizer).__name__,
             "parameters": sum(p.numel() for p in port_model.parameters()),
             "config": {"vocab_size": port_model.config.vocab_size, **SIZES[size]},
             "token_ids_equal": sum(a == b for a, b in zip(ours_ids, theirs_ids)), "pairs": len(pairs),
             "tokens_per_pair": {"mean": round(float(np.mean([len(x) for x in ours_ids])), 1),
                                 "max": max(len(x) for x in ours_ids)},
             "max_abs_diff": diff, "score_std": float(np.std(result["port"]["values"])),
             "ours_s": result["ours"]["seconds"], "port_s": result["port"]["seconds"],
             "speedup": round(result["port"]["best_s"] / result["ours"]["best_s"], 2),
             "load": {"ours": result["ours"]["load"], "port": result["port"]["load"]}}
    for python in args.also:
        other = ours_in(python, path, [list(p) for p in pairs])
        entry.setdefault("also", {})[python] = {
            "transformers": other["transformers"],
            "token_ids_equal": sum(a == b for a, b in zip(other["ids"], theirs_ids)),
            "max_abs_diff_to_port": float(np.max(np.abs(np.array(other["scores"]) - result["port"]["values"])))}
    print(json.dumps({k: v for k, v in entry.items() if k != "load"}, indent=1), flush=True)
    return entry


def probe(args) -> int:
    import torch

    from rerank import score_cache
    from rerank.metrics import bleurt, pair_models
    from rerank.recipes.tiny_models import build_bleurt_port

    torch.set_num_threads(args.threads)
    pairs = [(h, r) for _, h, r in segments(args.pairs, args.seed)]
    size = SIZES["bleurt20"]
    with tempfile.TemporaryDirectory(prefix="bench-bleurt-slack-") as tmp:
        path = build_bleurt_port(tmp, shipped_text(), args.seed, size["num_hidden_layers"], hidden=size["hidden_size"],
                                 embedding=size["embedding_size"], heads=size["num_attention_heads"],
                                 ffn=size["intermediate_size"], max_length=size["max_position_embeddings"],
                                 pieces=4000, vocab=size["vocab_size"])
        model = bleurt.BLEURTModel(path, "cpu")
        lengths = [len(row["input_ids"]) for row in model.inputs(pairs)]
        cut = score_cache.token_batches
        for item in args.probe.split(","):
            slack, floor = (None, 0) if item == "none" else (float(item.split(":")[0]), int(item.split(":")[1]))

            def bounded(lengths, budget, rows=None, *_, slack=slack, floor=floor):
                return cut(lengths, budget, rows, slack, floor)

            score_cache.token_batches = bounded
            try:
                batches = bounded(lengths, pair_models.MAX_TOKENS, pair_models.MAX_ROWS)
                pair_models.cached_pair_scores(model, pairs[:2], None, "warm")
                seconds, before = [], loadavg()
                for _ in range(args.repeats):
                    start = time.perf_counter()
                    pair_models.cached_pair_scores(model, pairs, None, "probe")
                    seconds.append(round(time.perf_counter() - start, 2))
            finally:
                score_cache.token_batches = cut
            print(json.dumps({"slack": slack, "floor": floor, "batches": [len(b) for b in batches],
                              "real_tokens": sum(lengths),
                              "padded_tokens": sum(len(b) * max(lengths[k] for k in b) for b in batches),
                              "seconds": seconds, "load": [before, loadavg()]}), flush=True)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="tiny,tiny-noproj,bleurt20", help="comma-separated: " + ", ".join(SIZES))
    ap.add_argument("--pairs", type=int, default=64)
    ap.add_argument("--port-batch", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--also", action="append", default=[], metavar="PYTHON",
                    help="score with ours under this interpreter too (e.g. .venv/bin/python, transformers 5)")
    ap.add_argument("--probe", metavar="SLACK:FLOOR,...", help="time ours alone with each padding bound (none: no bound)")
    ap.add_argument("--ours-only", nargs=2, metavar=("DIR", "PAIRS_JSON"), help=argparse.SUPPRESS)
    ap.add_argument("--json", help="write this JSON file")
    args = ap.parse_args(argv)
    if args.ours_only:
        return ours_only(*args.ours_only)
    if args.probe:
        return probe(args)
    import bleurt_pytorch  # noqa: F401 (the peer: fail here, before any work, when it is not on the path)
    import torch
    import transformers

    torch.set_num_threads(args.threads)
    pairs = [(h, r) for _, h, r in segments(args.pairs, args.seed)] + [("", "Ein Hund rennt.")]
    record = {"command": " ".join([os.path.relpath(sys.executable), "benchmarks/bench_bleurt_port.py",
                                   *(argv if argv is not None else sys.argv[1:])]),
              "port": "bleurt-pytorch 0.0.1", "transformers": transformers.__version__, "torch": torch.__version__,
              "python": platform.python_version(), "threads": args.threads,
              "cpu": cpu_name(), "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "load_start": loadavg(), "sizes": {}}
    with tempfile.TemporaryDirectory(prefix="bench-bleurt-port-") as tmp:
        for size in args.sizes.split(","):
            print(f"{size} ...", flush=True)
            record["sizes"][size] = bench(size, pairs, args, tmp)
            import shutil

            shutil.rmtree(os.path.join(tmp, size))
    record["load_end"] = loadavg()
    if args.json:
        write_json(args.json, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
