"""Start-up of the `rerank` commands: the four figures of the start-up goals in one run.

Every figure is a whole command in a subprocess (start-up, reading, work, writing, exit), the best
of --repeat runs, with the machine's load average (1, 5, 15 min) printed before and after each:

  1. `rerank eval` against the sacrebleu CLI on the same case: two Multi30k systems, BLEU and TER,
     10,000 approximate-randomisation trials; the two commands alternate, and the ratio is
     rerank's best over sacrebleu's best (goal <= 0.3):
         rerank eval -r REF -b SYS1 SYS2 --metrics bleu,ter --ar 10000
         sacrebleu REF -i SYS1 SYS2 -m bleu ter --paired-ar --paired-ar-n 10000
     The systems are two caption sets of test_2016 (task2 .1 and .2 against task1's reference,
     the data of bench_significance.py) under --data-dir, or, without it, the first hypotheses of
     the shipped optimised and weak test_2016 20-best lists against the shipped reference.
  2. `rerank features -m mlmme-small.pt` on the first 10 sentences of the shipped optimised
     test_2016 20-best list (s_s, with their sources): seconds (goal <= 2 s).
  3. `rerank features --which s_s -m mlmme-small.pt` on the whole shipped optimised test_2016
     20-best list: hypotheses per second (goal >= 4,000).
  4. `torchrun --standalone --nproc_per_node 2 -m rerank features --which s_s ...` against one
     process, both with --threads 1, on the shipped optimised test_2016 50-best list (with
     --torchrun-val, the val and test_2016 lists of bench_torchrun.py): the wall ratio (goal <= 0.6),
     the outputs byte-identical, and torchrun's launcher alone (`--no-python true`: its own torch
     import and rendezvous, which one process does not pay). Ranks need idle cores: the load
     average says whether they had them.
Also printed: `rerank --help` and `rerank eval --help` (start-up alone).

Python runs as an installed package does, with its bytecode cached: a PYTHONDONTWRITEBYTECODE in
the environment is dropped for the commands and their bytecode goes to a temporary
PYTHONPYCACHEPREFIX, filled by one warm-up run of each command first (--no-bytecode keeps the
environment as it is: every start then compiles the package's sources). OMP_NUM_THREADS=1.

    python benchmarks/bench_startup.py [--repeat 3] [--torchrun-repeat 1] [--torchrun-val] [--no-bytecode]
                                       [--data-dir /work/shared/data/multi30k]
                                       [--only eval,features,throughput,torchrun]

About two minutes on two idle cores with the defaults (the torchrun case once, --torchrun-repeat).
"""

from __future__ import annotations

import argparse
import gzip
import os
import shlex
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_torchrun import joined_list, run_once  # noqa: E402

from rerank.formats import read_nbest, write_nbest  # noqa: E402
from rerank.io import read_lines  # noqa: E402

DATA = os.path.join(ROOT, "rerank", "data")
SHIPPED = os.path.join(DATA, "multi30k")
MODEL = os.path.join(DATA, "models", "mlmme-small.pt")
RERANK = [sys.executable, "-m", "rerank"]
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
CASES = ("eval", "features", "throughput", "torchrun")


def load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def environment(bytecode: bool, tmp: str) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    if bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = os.path.join(tmp, "pycache")
    return env


def best(commands: dict[str, list[str]], env: dict, repeat: int, warm_up: bool = True) -> dict[str, float]:
    """Smallest wall-clock seconds of each command, the commands alternating run by run (after one
    untimed warm-up run each, which also fills the bytecode cache, unless not `warm_up`)."""
    times: dict[str, list[float]] = {name: [] for name in commands}
    for command in commands.values() if warm_up else ():
        run_once(command, env)
    for _ in range(repeat):
        for name, command in commands.items():
            times[name].append(run_once(command, env)[0])
    return {name: min(values) for name, values in times.items()}


def show(name: str, command: list[str]) -> None:
    print(f"  {name}: {shlex.join(command).replace(sys.executable, 'python')}")


def eval_inputs(data_dir: str | None, tmp: str) -> tuple[str, str, str, str]:
    """(reference, system 1, system 2, what they are) as plain text files."""
    out = [os.path.join(tmp, name) for name in ("ref.de", "sys1.de", "sys2.de")]
    if data_dir:
        sources = [os.path.join(data_dir, "task1/raw/test_2016_flickr.de.gz"),
                   os.path.join(data_dir, "task2/raw/test_2016.1.de.gz"),
                   os.path.join(data_dir, "task2/raw/test_2016.2.de.gz")]
        for source, target in zip(sources, out):
            with gzip.open(source, "rb") as f, open(target, "wb") as g:
                shutil.copyfileobj(f, g)
        what = f"task2 test_2016 caption sets 1 and 2 against task1's test_2016 reference ({data_dir})"
    else:
        with open(out[0], "w", encoding="utf-8") as f:
            f.writelines(line + "\n" for line in read_lines(os.path.join(SHIPPED, "test_2016_flickr.de.gz")))
        for system, target in zip(("optimised", "weak"), out[1:]):
            nbest = read_nbest(os.path.join(SHIPPED, f"{system}.test_2016.20best.gz"))
            with open(target, "w", encoding="utf-8") as f:
                f.writelines(nbest.hyps[i] + "\n" for i in nbest.offsets[:-1])
        what = "the first hypotheses of the shipped optimised and weak test_2016 20-best lists"
    return out[0], out[1], out[2], what


def goal_eval(args, env: dict, tmp: str) -> None:
    ref, sys1, sys2, what = eval_inputs(args.data_dir, tmp)
    commands = {
        "rerank eval": [*RERANK, "eval", "-r", ref, "-b", sys1, sys2, "--metrics", "bleu,ter", "--ar", "10000",
                        "-o", os.path.join(tmp, "eval.txt")],
        "sacrebleu": [sys.executable, "-m", "sacrebleu", ref, "-i", sys1, sys2, "-m", "bleu", "ter", "--paired-ar",
                      "--paired-ar-n", "10000"],
        "rerank --help": [*RERANK, "--help"],
        "rerank eval --help": [*RERANK, "eval", "--help"],
    }
    print(f"1. eval, {what}; {load()}")
    for name, command in commands.items():
        show(name, command)
    t = best(commands, env, args.repeat)
    print(f"  rerank eval {t['rerank eval']:.2f} s, sacrebleu {t['sacrebleu']:.2f} s: ratio "
          f"{t['rerank eval'] / t['sacrebleu']:.2f} (goal <= 0.3); rerank --help {t['rerank --help']:.2f} s, "
          f"rerank eval --help {t['rerank eval --help']:.2f} s; {load()}", flush=True)


def cut(nbest_path: str, src_path: str, n: int, tmp: str, tag: str) -> tuple[str, str, int]:
    nbest = read_nbest(nbest_path).select_sentences(range(n))
    path, src = os.path.join(tmp, f"{tag}.nbest"), os.path.join(tmp, f"{tag}.en")
    write_nbest(nbest, path)
    with open(src, "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in read_lines(src_path)[:n])
    return path, src, nbest.n_hyps


def features_command(nbest: str, src: str, out: str, which: bool = True) -> list[str]:
    return [*RERANK, "features", nbest, "--src", src, *(["--which", "s_s"] if which else []), "-m", MODEL,
            "--threads", "1", "--quiet", "-o", out]


def goal_features(args, env: dict, tmp: str) -> None:
    nbest, src, n_hyps = cut(os.path.join(SHIPPED, "optimised.test_2016.20best.gz"),
                             os.path.join(SHIPPED, "test_2016_flickr.en.gz"), 10, tmp, "ten")
    command = features_command(nbest, src, os.path.join(tmp, "ten.out"), which=False)
    print(f"2. features -m on 10 sentences ({n_hyps} hypotheses); {load()}")
    show("command", command)
    t = best({"features": command}, env, args.repeat)["features"]
    print(f"  {t:.2f} s (goal <= 2 s); {load()}", flush=True)


def goal_throughput(args, env: dict, tmp: str) -> None:
    path = os.path.join(SHIPPED, "optimised.test_2016.20best.gz")
    n_hyps = read_nbest(path).n_hyps
    command = features_command(path, os.path.join(SHIPPED, "test_2016_flickr.en.gz"), os.path.join(tmp, "s_s.out"))
    print(f"3. features --which s_s on the whole optimised test_2016 20-best ({n_hyps} hypotheses); {load()}")
    show("command", command)
    t = best({"features": command}, env, args.repeat)["features"]
    print(f"  {t:.2f} s: {n_hyps / t:,.0f} hypotheses/s (goal >= 4,000); {load()}", flush=True)


def goal_torchrun(args, env: dict, tmp: str) -> None:
    names = ("val", "test_2016") if args.torchrun_val else ("test_2016",)
    lists = [os.path.join(SHIPPED, f"optimised.{name}.50best.gz") for name in names]
    srcs = [os.path.join(SHIPPED, f"{name}.en.gz" if name == "val" else "test_2016_flickr.en.gz") for name in names]
    path, src, n_hyps = joined_list(lists, srcs, 10**9, tmp, "fifty")
    small, small_src, _ = joined_list(lists, srcs, 1, tmp, "one-sentence")
    one = features_command(path, src, os.path.join(tmp, "one.out"))
    ranks = [*TORCHRUN, *features_command(path, src, os.path.join(tmp, "ranks.out"))[1:]]
    launcher = [*TORCHRUN, "--no-python", "true"]
    print(f"4. torchrun x2 against one process, s_s on the optimised {' and '.join(names)} 50-best "
          f"({n_hyps} hypotheses); {load()}")
    show("one process", one)
    show("torchrun", ranks)
    for command in (features_command(small, small_src, os.path.join(tmp, "small.out")),
                    [*TORCHRUN, *features_command(small, small_src, os.path.join(tmp, "small.out"))[1:]]):
        run_once(command, env)   # warm-up on one sentence: the bytecode of torch.distributed cached
    t = best({"one": one, "ranks": ranks, "launcher": launcher}, env, args.torchrun_repeat, warm_up=False)
    with open(one[-1], "rb") as f, open(ranks[-1], "rb") as g:
        same = f.read() == g.read()
    print(f"  one process {t['one']:.2f} s, torchrun x2 {t['ranks']:.2f} s: ratio {t['ranks'] / t['one']:.2f} "
          f"(goal <= 0.6); outputs byte-identical: {same}; torchrun's launcher alone ({shlex.join(launcher[3:])}): "
          f"{t['launcher']:.2f} s; {load()}", flush=True)
    if not same:
        sys.exit(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default="/work/shared/data/multi30k" if os.path.isdir(
        "/work/shared/data/multi30k") else None, help="Multi30k raw data (task1/raw, task2/raw) for case 1 "
        "(default: /work/shared/data/multi30k when present, else the shipped lists)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per command in cases 1-3 (default: 3)")
    parser.add_argument("--torchrun-repeat", type=int, default=1, help="timed runs per command in case 4 (default: 1)")
    parser.add_argument("--torchrun-val", action="store_true", help="case 4 on the val and test_2016 50-best lists "
                        "one after the other (bench_torchrun.py's list: 100,608 hypotheses; default: test_2016 alone)")
    parser.add_argument("--only", default=",".join(CASES), help="comma-separated cases of: " + ", ".join(CASES))
    parser.add_argument("--no-bytecode", action="store_true", help="keep PYTHONDONTWRITEBYTECODE as it is")
    args = parser.parse_args()
    cases = args.only.split(",")
    if unknown := set(cases) - set(CASES):
        sys.exit(f"unknown cases: {', '.join(sorted(unknown))}")
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        env = environment(not args.no_bytecode, tmp)
        print(f"{os.cpu_count()} CPUs, OMP_NUM_THREADS=1, best of {args.repeat} (torchrun: {args.torchrun_repeat}), "
              f"bytecode {'as the environment says' if args.no_bytecode else 'cached'}; {time.strftime('%Y-%m-%d %H:%M')}")
        for case, run in zip(CASES, (goal_eval, goal_features, goal_throughput, goal_torchrun)):
            if case in cases:
                run(args, env, tmp)


if __name__ == "__main__":
    main()
