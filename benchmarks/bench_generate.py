"""`rerank generate --backend ct2` against CTranslate2's own batched translate_batch, in one process.

    python benchmarks/bench_generate.py [--sentences 100] [--n 16] [--max-length 40] [--threads 1]
                                        [--repeats 2] [--json FILE] [--keep DIR] [--ranks]

Builds a random-weight Marian of the real size (transformers' MarianMTModel: d_model 512, 6+6
layers, 8 heads, ffn 2048; a BPE vocabulary of about 8,000 trained on the shipped Multi30k val
text), converts it with CTranslate2's own converter, and samples --n candidates for each of the
first --sentences source lines of the shipped test_2016 set:

- reference: what a hand-written script does with CTranslate2 alone: load the tokenizer and the
  translator, tokenise every line, one
  `translate_batch` call (sampling_topk 0, num_hypotheses N, max_batch_size 0) per batch of the
  batches rerank generate makes, then detokenise: the backend's own batched call on the same work;
- CTranslate2's own batching: the same script with one call over every line (batch_type tokens,
  max_batch_size = batch tokens / 2N), shown beside it;
- ours: `rerank.generate(..., backend="ct2")`, the same sampling, written as JSON lines with its
  config: our token batches, a translator made anew per block (its seeded random stream), the
  duplicates merged and every distinct candidate scored by `score_batch` (the nmt column), which
  the reference does not compute; the time inside scoring is reported apart, so that the
  overhead of the generation alone is seen as well.

With --ranks it times instead `rerank generate --backend ct2` as one process and as two torchrun
ranks (one thread each, the launcher's start-up included), wall clock of each command, and checks
that both write the same bytes.

Both run in the same process, alternately, --repeats times each, and the best of each is
compared (a loaded machine slows both). The load average is printed with the figures; the model
build is outside the timings, each side's loading of the tokenizer and translator inside (ours
also reads the source file and writes the list and its config).
A random model draws to the maximum length almost always, so every candidate is --max-length
tokens long: a heavier load per sentence than a trained model's.
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

SHIPPED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "rerank", "data", "multi30k")


def build_marian_size(out: str) -> str:
    """A random-weight Marian of OPUS-MT's size (tiny_models.build_marian at 512-d, 6 layers, 8 heads,
    FFN 2048) with its CTranslate2 conversion; returns the CT2 folder."""
    from rerank.recipes.tiny_models import DEFAULT_TEXT, build_marian, convert_ct2, read_text, train_tokenizer

    tokenizer = train_tokenizer(read_text(DEFAULT_TEXT), vocab_size=8000)
    hf = build_marian(os.path.join(out, "marian-hf"), tokenizer, d_model=512, layers=6, heads=8, ffn=2048)
    return convert_ct2(hf, os.path.join(out, "marian-ct2"))


def reference(model_dir: str, lines: list[str], n: int, max_length: int, threads: int, batch_tokens: int,
              own_batching: bool) -> float:
    """Seconds of the hand-written script: load the tokenizer and the translator, tokenise,
    translate_batch, detokenise. `own_batching`:
    one call over every line with CTranslate2's own batching (batch_type tokens); else one call per
    batch of rerank generate's plan (the same batches, max_batch_size 0): the backend's own batched
    call on exactly our work."""
    import ctranslate2
    from transformers import AutoTokenizer

    from rerank.generation import GenerateOptions, plan_blocks

    start = time.perf_counter()
    tok = AutoTokenizer.from_pretrained(model_dir)
    ctranslate2.set_random_seed(1)
    translator = ctranslate2.Translator(model_dir, intra_threads=threads)
    sampling = {"beam_size": 1, "num_hypotheses": n, "sampling_topk": 0, "max_decoding_length": max_length}
    tokens = [tok.convert_ids_to_tokens(tok(line)["input_ids"]) for line in lines]
    if own_batching:
        results = translator.translate_batch(tokens, max_batch_size=batch_tokens // (2 * n), batch_type="tokens",
                                             **sampling)
    else:
        options = GenerateOptions(model=model_dir, n=n, batch_tokens=batch_tokens)
        results = [None] * len(lines)
        for block in plan_blocks([len(t) for t in tokens], 0, len(lines), options):
            for batch in block:
                for i, r in zip(batch, translator.translate_batch([tokens[i] for i in batch], max_batch_size=0,
                                                                  **sampling)):
                    results[i] = r
    texts = [[tok.decode(tok.convert_tokens_to_ids(h), skip_special_tokens=True) for h in r.hypotheses]
             for r in results]
    seconds = time.perf_counter() - start
    assert len(texts) == len(lines)
    return seconds


def ours(model_dir: str, source: str, out: str, n: int, max_length: int, threads: int,
         batch_tokens: int) -> tuple[float, float]:
    """(seconds of rerank.generate, seconds of them inside the forced scoring)."""
    import rerank
    from rerank.nmt import generate as backends

    spent = [0.0]
    score = backends.CT2Backend.score

    def timed(self, sources, outputs):
        start = time.perf_counter()
        try:
            return score(self, sources, outputs)
        finally:
            spent[0] += time.perf_counter() - start

    backends.CT2Backend.score = timed
    try:
        start = time.perf_counter()
        rerank.generate(source, out, model=model_dir, backend="ct2", n=n, max_length=max_length, threads=threads,
                        batch_tokens=batch_tokens)
        return time.perf_counter() - start, spent[0]
    finally:
        backends.CT2Backend.score = score


def ranks(model_dir: str, source: str, folder: str, n: int, max_length: int, batch_tokens: int) -> dict:
    """Wall seconds of `rerank generate` as one process and as two torchrun ranks, and whether
    their outputs are the same bytes."""
    import subprocess

    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    common = ["generate", source, "-m", model_dir, "--backend", "ct2", "-n", str(n), "--max-length", str(max_length),
              "--batch-tokens", str(batch_tokens), "--block", "8", "--quiet"]
    seconds = {}
    for name, launcher in (("one", [sys.executable, "-m", "rerank"]),
                           ("two", [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
                                    "2", "-m", "rerank"])):
        start = time.perf_counter()
        subprocess.run([*launcher, *common, "-o", os.path.join(folder, f"{name}.jsonl")], env=env, check=True)
        seconds[name] = time.perf_counter() - start
    with open(os.path.join(folder, "one.jsonl"), "rb") as a, open(os.path.join(folder, "two.jsonl"), "rb") as b:
        same = a.read() == b.read()
    return {"one_process_s": round(seconds["one"], 2), "two_ranks_s": round(seconds["two"], 2),
            "ratio": round(seconds["two"] / seconds["one"], 3), "same_bytes": same}


def emit(figures: dict, path: str | None) -> int:
    """Print the figures as JSON, and write them to `path` when given."""
    print(json.dumps(figures, indent=1))
    if path:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(figures, f, indent=1)
            f.write("\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=int, default=100)
    parser.add_argument("--n", type=int, default=16)
    parser.add_argument("--max-length", type=int, default=40)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch-tokens", type=int, default=8192)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--keep", help="build the model in this folder (reused when it is there)")
    parser.add_argument("--ranks", action="store_true", help="time one process against two torchrun ranks instead")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from rerank.io import read_lines

    folder = args.keep or tempfile.mkdtemp(prefix="bench_generate.")
    model_dir = os.path.join(folder, "marian-ct2")
    if not os.path.isfile(os.path.join(model_dir, "model.bin")):
        build_marian_size(folder)
    lines = read_lines(os.path.join(SHIPPED, "test_2016_flickr.en.gz"))[:args.sentences]
    source = os.path.join(folder, "source.en")
    with open(source, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    load_before = os.getloadavg()
    if args.ranks:
        figures = {"sentences": len(lines), "n": args.n, "max_length": args.max_length, "loadavg_before": load_before,
                   **ranks(model_dir, source, folder, args.n, args.max_length, args.batch_tokens),
                   "loadavg_after": os.getloadavg(), "cpus": os.cpu_count()}
        return emit(figures, args.json)
    refs, owns, mine = [], [], []
    for k in range(args.repeats):
        refs.append(reference(model_dir, lines, args.n, args.max_length, args.threads, args.batch_tokens, False))
        mine.append(ours(model_dir, source, os.path.join(folder, f"out{k}.jsonl"), args.n, args.max_length,
                         args.threads, args.batch_tokens))
        owns.append(reference(model_dir, lines, args.n, args.max_length, args.threads, args.batch_tokens, True))
        print(f"repeat {k + 1}: reference (our batches) {refs[-1]:.2f} s, ours {mine[-1][0]:.2f} s (of which "
              f"scoring {mine[-1][1]:.2f} s), CTranslate2's own batching {owns[-1]:.2f} s", file=sys.stderr)
    ref, own, (total, scoring) = min(refs), min(owns), min(mine)
    figures = {"sentences": len(lines), "n": args.n, "max_length": args.max_length, "threads": args.threads,
               "batch_tokens": args.batch_tokens, "reference_s": round(ref, 3), "ct2_own_batching_s": round(own, 3),
               "ours_s": round(total, 3),
               "ours_scoring_s": round(scoring, 3), "ratio": round(total / ref, 3),
               "ratio_without_scoring": round((total - scoring) / ref, 3),
               "loadavg_before": load_before, "loadavg_after": os.getloadavg(), "cpus": os.cpu_count(),
               "machine": platform.platform()}
    import ctranslate2

    figures["ctranslate2"] = ctranslate2.__version__
    return emit(figures, args.json)


if __name__ == "__main__":
    sys.exit(main())
