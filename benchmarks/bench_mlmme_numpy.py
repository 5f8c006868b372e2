"""The numpy encoder against the torch encoder, in one run: whole `rerank features` commands and
the encoding alone.

1. Whole commands (start-up, reading, tokenising, encoding, writing, exit), each the best of
   --repeat runs, the two backends alternating run by run, bytecode cached as in an installed
   package (benchmarks/bench_startup.py's environment), the load average printed with each:
   - `rerank features -m mlmme-small.pt` on the first 10 sentences of the shipped optimised
     test_2016 20-best (s_s with their sources): seconds, `--mlmme-backend numpy` and `torch`
     (goal: numpy <= 0.5 s);
   - `rerank features --which s_s -m mlmme-small.pt` on the whole list (19,986 hypotheses) with
     --threads 1 and 2: hypotheses per second and the ratio numpy/torch (goal >= 2);
   - with --core-python PYTHON (the core venv's, without torch), the same numpy commands there.
   The two backends' s_s columns are compared (largest difference; the file holds 16 digits).
2. Encoding alone, in this process: the list's distinct hypotheses (de) pre-tokenised, through
   NumpyEncoder.encode_ids and through the torch Encoder's batches (encode less its
   tokenisation, timed apart), 1 thread, best of --repeat: sentences per second and the ratio.
3. The same on random-weight models of the --presets' sizes (cpu, paper), a German vocabulary of
   the list's words, its first --preset-sentences distinct hypotheses.

    python benchmarks/bench_mlmme_numpy.py [--repeat 3] [--core-python .venv-core/bin/python]
                                           [--only commands,encoding,presets] [--presets cpu,paper]
                                           [--out docs/benchmarks/mlmme_numpy]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_startup import MODEL, SHIPPED, cut, environment, load  # noqa: E402

from rerank.formats import read_nbest  # noqa: E402
from rerank.io import atomic_write  # noqa: E402

LIST = os.path.join(SHIPPED, "optimised.test_2016.20best.gz")
SOURCES = os.path.join(SHIPPED, "test_2016_flickr.en.gz")


def command(python: str, nbest: str, out: str, backend: str, threads: int, which: bool = True,
            model: str = MODEL) -> list[str]:
    return [python, "-m", "rerank", "features", nbest, "--src", SOURCES if nbest == LIST else nbest[:-6] + ".en",
            *(["--which", "s_s"] if which else []), "-m", model, "--mlmme-backend", backend, "--threads", str(threads),
            "--quiet", "-o", out]


def timed(cmd: list[str], env: dict) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def best(commands: dict[str, list[str]], env: dict, repeat: int) -> dict[str, float]:
    """Smallest seconds of each command, alternating, after one untimed warm-up run each."""
    for cmd in commands.values():
        timed(cmd, env)
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(repeat):
        for name, cmd in commands.items():
            times[name].append(timed(cmd, env))
    return {name: min(values) for name, values in times.items()}


def whole_commands(args, tmp: str) -> dict:
    env = environment(True, tmp)
    rows: dict = {"load_before": os.getloadavg()}
    ten, _, ten_hyps = cut(LIST, SOURCES, 10, tmp, "ten")
    out = os.path.join(tmp, "out.nbest")
    pythons = {"": sys.executable, **({"core ": args.core_python} if args.core_python else {})}
    cases = {f"{tag}10 sentences {backend}": command(py, ten, out, backend, 1, which=False, model=args.model)
             for tag, py in pythons.items() for backend in ("numpy", "torch") if not (tag and backend == "torch")}
    print(f"1. features -m on 10 sentences ({ten_hyps} hypotheses); {load()}", flush=True)
    rows["ten"] = best(cases, env, args.repeat)
    for name, t in rows["ten"].items():
        print(f"  {name}: {t:.2f} s; {load()}", flush=True)
    n_hyps = read_nbest(LIST).n_hyps
    rows["n_hyps"], rows["list"] = n_hyps, {}
    for threads in (1, 2):
        cases = {f"{tag}{backend}": command(py, LIST, os.path.join(tmp, f"{tag.strip()}{backend}{threads}.nbest"),
                                            backend, threads, model=args.model)
                 for tag, py in pythons.items() for backend in ("numpy", "torch") if not (tag and backend == "torch")}
        print(f"2. features --which s_s on the optimised test_2016 20-best ({n_hyps} hypotheses), --threads {threads}; "
              f"{load()}", flush=True)
        got = best(cases, env, args.repeat)
        rows["list"][threads] = got
        for name, t in got.items():
            print(f"  {name}: {t:.2f} s, {n_hyps / t:,.0f} hyp/s; {load()}", flush=True)
        print(f"  ratio torch/numpy: {got['torch'] / got['numpy']:.2f}", flush=True)
    a = read_nbest(os.path.join(tmp, "numpy1.nbest")).column("s_s")
    b = read_nbest(os.path.join(tmp, "torch1.nbest")).column("s_s")
    rows["largest_difference"] = float(abs(a - b).max())
    print(f"  largest |numpy - torch| of the s_s column: {rows['largest_difference']:.2e}")
    rows["load_after"] = os.getloadavg()
    return rows


def encoding_alone(args) -> dict:
    import numpy as np
    import torch

    from rerank.dedup import distinct_index
    from rerank.embeddings.encoder import Encoder
    from rerank.embeddings.numpy_encoder import NumpyEncoder

    torch.set_num_threads(1)
    _, distinct = distinct_index(read_nbest(LIST).hyps)
    fast, reference = NumpyEncoder.load(args.model), Encoder.load(args.model)
    ids = fast.tokenize_ids(distinct, "de", empty="zero")
    times: dict[str, list[float]] = {"numpy": [], "torch": [], "tokenise": []}
    for _ in range(args.repeat):
        start = time.perf_counter()
        ours = fast.encode_ids(ids, "de")
        times["numpy"].append(time.perf_counter() - start)
        start = time.perf_counter()
        theirs = reference.encode(distinct, "de", empty="zero")
        times["torch"].append(time.perf_counter() - start)
        start = time.perf_counter()
        reference.tokenize_ids(distinct, "de", empty="zero")
        times["tokenise"].append(time.perf_counter() - start)
    t_np, t_tok = min(times["numpy"]), min(times["tokenise"])
    t_torch = min(times["torch"]) - t_tok
    row = {"sentences": len(distinct), "tokens": int(sum(map(len, ids))), "numpy_s": t_np, "torch_s": t_torch,
           "tokenise_s": t_tok, "ratio": t_torch / t_np, "largest_difference": float(np.abs(ours - theirs).max()),
           "load": os.getloadavg()}
    print(f"3. encoding alone, {len(distinct)} distinct hypotheses ({row['tokens']} tokens), 1 thread: numpy "
          f"{len(distinct) / t_np:,.0f} sent/s, torch {len(distinct) / t_torch:,.0f} sent/s (ratio {row['ratio']:.2f}); "
          f"tokenising {t_tok:.2f} s apart; largest difference {row['largest_difference']:.1e}; {load()}", flush=True)
    return row


def presets(args) -> list[dict]:
    """Encoding alone on random-weight models of the presets' sizes (a German vocabulary of the
    list's words, its first --preset-sentences non-empty distinct hypotheses, 1 thread)."""
    import numpy as np
    import torch

    from rerank.dedup import distinct_index
    from rerank.embeddings.encoder import Encoder, save_model
    from rerank.embeddings.model import MLMME, PRESETS, ModelConfig
    from rerank.embeddings.numpy_encoder import NumpyEncoder
    from rerank.embeddings.tokenize import tokenize
    from rerank.embeddings.vocab import Vocab

    torch.set_num_threads(1)
    _, distinct = distinct_index(read_nbest(LIST).hyps)
    vocab = Vocab.build(tokenize(s, "de") for s in distinct)
    sents = [s for s in distinct if tokenize(s, "de")][: args.preset_sentences]
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-mlmme-presets-") as tmp:
        for preset in args.presets.split(","):
            torch.manual_seed(0)
            cfg = ModelConfig(languages=["de"], vocab_sizes={"de": len(vocab)}, **PRESETS[preset])
            path = save_model(os.path.join(tmp, f"{preset}.pt"), MLMME(cfg), {"de": vocab}, {})[0]
            fast, reference = NumpyEncoder.load(path), Encoder.load(path)
            ids = fast.tokenize_ids(sents, "de")
            t_np, t_torch = [], []
            for _ in range(args.repeat):
                start = time.perf_counter()
                ours = fast.encode_ids(ids, "de")
                t_np.append(time.perf_counter() - start)
                start = time.perf_counter()
                theirs = reference.encode(sents, "de")
                mid = time.perf_counter()
                reference.tokenize_ids(sents, "de")
                t_torch.append((mid - start) - (time.perf_counter() - mid))
            row = {"preset": preset, "vocab": len(vocab), "sentences": len(sents), "numpy_sent_per_s": len(sents) / min(t_np),
                   "torch_sent_per_s": len(sents) / min(t_torch), "ratio": min(t_torch) / min(t_np),
                   "largest_difference": float(np.abs(ours - theirs).max()), "load": os.getloadavg()}
            rows.append(row)
            print(f"4. {preset} preset, random weights, {len(sents)} sentences, 1 thread: numpy "
                  f"{row['numpy_sent_per_s']:,.0f} sent/s, torch {row['torch_sent_per_s']:,.0f} sent/s (ratio "
                  f"{row['ratio']:.2f}); largest difference {row['largest_difference']:.1e}; {load()}", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--model", default=MODEL, help="the embedding model (default: mlmme-small.pt, the one of the "
                    "published figures; the shipped mlmme-bpe.pt has four languages and subword vocabularies)")
    ap.add_argument("--core-python", help="the python of a core install without torch (.venv-core/bin/python)")
    ap.add_argument("--out", help="write OUT.json with every figure")
    ap.add_argument("--only", default="commands,encoding,presets", help="parts to run (comma-separated)")
    ap.add_argument("--presets", default="cpu,paper", help="presets of the random-weight models of part 4")
    ap.add_argument("--preset-sentences", type=int, default=2000)
    args = ap.parse_args()
    parts = set(args.only.split(","))
    result: dict = {"command": " ".join(["python benchmarks/bench_mlmme_numpy.py", *sys.argv[1:]]),
                    "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="bench-mlmme-") as tmp:
        if "commands" in parts:
            result["whole_commands"] = whole_commands(args, tmp)
    if "encoding" in parts:
        result["encoding"] = encoding_alone(args)
    if "presets" in parts:
        result["presets"] = presets(args)
    if args.out:
        with atomic_write(args.out + ".json") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
