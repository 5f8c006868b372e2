"""Hypotheses per second of the users'-model features against a plain loop over the same model.

    python benchmarks/bench_models.py [--sentences 100] [--threads 1] [--json FILE] [--budgets 256,1024,4096]

Builds a small random-weight Marian model (d_model 256, 3+3 layers, 4 heads, ffn 1024, a BPE
vocabulary of about 8,000 trained on tests/data/models) and scores the channel feature,
log p(source | hypothesis), on the first --sentences sentences of the shipped optimised val
20-best list:
- anchor: a plain per-hypothesis loop, as a user would write it: tokenise the pair, call the
  model with labels, take -loss x tokens (every row, one at a time);
- a stronger hand-written loop: one padded call per n-best list (its 20 hypotheses at once);
- `rerank features --which channel` through the Hugging Face backend (distinct pairs once,
  length-sorted token-budget batches), cache off;
- the same through CTranslate2 (the model converted by its own converter);
- a re-run with a warm score cache.
The anchor and the features run in the same process, one after the other, so the ratios hold
on a loaded machine too; the load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np

SHIPPED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "rerank", "data", "multi30k")


def build_small_marian(out: str) -> str:
    from rerank.recipes.tiny_models import DEFAULT_TEXT, build_marian, read_text, train_tokenizer

    tokenizer = train_tokenizer(read_text(DEFAULT_TEXT), vocab_size=8000)
    return build_marian(out, tokenizer, d_model=256, layers=3, heads=4, ffn=1024)


def plain_loop(model_dir: str, inputs: list[str], outputs: list[str]) -> np.ndarray:
    """The anchor: one pair at a time, transformers' own loss."""
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    model = AutoModelForSeq2SeqLM.from_pretrained(model_dir, local_files_only=True).eval()
    scores = np.zeros(len(inputs))
    with torch.no_grad():
        for k, (i, o) in enumerate(zip(inputs, outputs)):
            batch = tok(i, text_target=o, return_tensors="pt")
            scores[k] = -model(**batch).loss.item() * batch["labels"].shape[1]
    return scores


def per_list_loop(model_dir: str, inputs: list[str], outputs: list[str], sizes: list[int]) -> np.ndarray:
    """A second, stronger anchor: one padded call per n-best list (its hypotheses in one batch),
    scores summed over each row's own target tokens."""
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    model = AutoModelForSeq2SeqLM.from_pretrained(model_dir, local_files_only=True).eval()
    scores, start = np.zeros(len(inputs)), 0
    with torch.no_grad():
        for size in sizes:
            rows = slice(start, start + size)
            batch = tok(inputs[rows], text_target=outputs[rows], return_tensors="pt", padding=True)
            labels = batch["labels"]
            mask = labels != tok.pad_token_id
            logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                           labels=labels.masked_fill(~mask, -100)).logits
            logp = torch.log_softmax(logits.float(), dim=-1).gather(-1, labels.unsqueeze(-1)).squeeze(-1)
            scores[rows] = (logp * mask).sum(-1).numpy()
            start += size
    return scores


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sentences", type=int, default=100)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json")
    ap.add_argument("--budgets", help="only time the transformers feature at these padded-token budgets, e.g. "
                    "256,1024,4096 (--channel-batch-tokens), each after an untimed warm-up")
    args = ap.parse_args()
    import logging

    import torch

    logging.getLogger("transformers").setLevel(logging.ERROR)
    os.environ["HF_HUB_OFFLINE"] = "1"
    torch.set_num_threads(args.threads)
    from rerank import api
    from rerank.io import atomic_write, read_lines
    from rerank.recipes.tiny_models import convert_ct2

    nbest = api.read_nbest(os.path.join(SHIPPED, "optimised.val.20best.gz")).select_sentences(range(args.sentences))
    nbest = nbest.select_features(["nmt"])
    sources = read_lines(os.path.join(SHIPPED, "val.en.gz"))[:args.sentences]
    rows_in = list(nbest.hyps)
    rows_out = [sources[i] for i in nbest.sentence_of_hyp]
    record = {"benchmark": "bench_models", "machine": platform.platform(), "cpus": os.cpu_count(),
              "threads": args.threads, "sentences": args.sentences, "hypotheses": nbest.n_hyps,
              "distinct_pairs": len(set(zip(rows_in, rows_out))), "load_before": os.getloadavg()}
    with tempfile.TemporaryDirectory() as tmp:
        model = build_small_marian(os.path.join(tmp, "marian"))
        ct2 = convert_ct2(model, os.path.join(tmp, "marian-ct2"))
        api.add_features(nbest.select_sentences(range(1)), "channel", sources=sources[:1], channel_model=model,
                         threads=args.threads)  # untimed: the plug-ins' imports, once per process
        if args.budgets:
            for budget in (int(b) for b in args.budgets.split(",")):
                t = time.perf_counter()
                api.add_features(nbest, "channel", sources=sources, channel_model=model, threads=args.threads,
                                 channel_batch_tokens=budget)
                seconds = time.perf_counter() - t
                print(f"batch tokens {budget:6d}: {seconds:6.2f} s, {nbest.n_hyps / seconds:6.0f} hyp/s, "
                      f"load {os.getloadavg()[0]:.2f}", flush=True)
            return
        timings = {}
        t = time.perf_counter()
        anchor = plain_loop(model, rows_in, rows_out)
        timings["plain loop (anchor)"] = time.perf_counter() - t
        results = {}
        t = time.perf_counter()
        results["per-list batches"] = per_list_loop(model, rows_in, rows_out, np.diff(nbest.offsets).tolist())
        timings["per-list batches"] = time.perf_counter() - t
        for name, path, cache in (("features, transformers", model, None), ("features, CTranslate2", ct2, None),
                                  ("features, transformers, cold cache", model, os.path.join(tmp, "c.sqlite")),
                                  ("features, transformers, warm cache", model, os.path.join(tmp, "c.sqlite"))):
            t = time.perf_counter()
            out = api.add_features(nbest, "channel", sources=sources, channel_model=path, threads=args.threads,
                                   cache=cache)
            timings[name] = time.perf_counter() - t
            results[name] = out.column("channel")
    record["load_after"] = os.getloadavg()
    record["max_abs_diff_vs_anchor"] = {k: float(np.abs(v - anchor).max()) for k, v in results.items()}
    record["seconds"] = timings
    record["hyps_per_second"] = {k: nbest.n_hyps / v for k, v in timings.items()}
    record["speedup_vs_anchor"] = {k: timings["plain loop (anchor)"] / v for k, v in timings.items()}
    print(f"{nbest.n_hyps} hypotheses ({record['distinct_pairs']} distinct pairs), {args.threads} thread(s), "
          f"load {record['load_before'][0]:.2f} -> {record['load_after'][0]:.2f}")
    print(f"{'':38s} {'seconds':>8s} {'hyp/s':>8s} {'x anchor':>9s} {'max |diff|':>11s}")
    for k in timings:
        diff = record["max_abs_diff_vs_anchor"].get(k, 0.0)
        print(f"{k:38s} {timings[k]:8.2f} {record['hyps_per_second'][k]:8.0f} {record['speedup_vs_anchor'][k]:9.2f} "
              f"{diff:11.2e}")
    if args.json:
        with atomic_write(args.json) as f:
            f.write(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
