"""Peak memory per sentence of `rerank eval --metrics bleu,ter` (default trials and resamples).

The test 2016 Multi30k captions are tiled to --sentences lines (reference: task1 English; baseline
and system: task2 English captions 1 and 2); copy c > 0 of a line ends in " c" on all three sides,
so that lines are distinct as in a real corpus (tokeniser caches fill as they would). Each command runs in its own subprocess and its peak
resident set size is read from os.wait4's rusage; the same command on --base-sentences lines
(the interpreter, imports and fixed arrays) is subtracted, so the figure is the memory that grows
with the corpus: (peak(N) - peak(base)) / (N - base) bytes per sentence. --compare REV measures
the package as committed at REV too (git archive into a temporary folder), in the same run.

    python benchmarks/bench_eval_memory.py --data-dir /work/shared/data/multi30k --sentences 20000
"""

from __future__ import annotations

import argparse
import gzip
import os
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def read(path: str) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return fh.read().splitlines()


def write_tiled(folder: str, data_dir: str, n: int) -> list[str]:
    """Reference, baseline and system files of n lines (Multi30k test 2016 repeated)."""
    sources = {"ref.en": "task1/raw/test_2016_flickr.en.gz", "base.en": "task2/raw/test_2016.1.en.gz",
               "sys.en": "task2/raw/test_2016.2.en.gz"}
    paths = []
    for name, rel in sources.items():
        lines = read(os.path.join(data_dir, rel))
        tiled = [line + (f" {i // len(lines)}" if i >= len(lines) else "")
                 for i, line in ((i, lines[i % len(lines)]) for i in range(n))]
        path = os.path.join(folder, f"{n}.{name}")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write("\n".join(tiled) + "\n")
        paths.append(path)
    return paths


def peak_rss(argv: list[str], code: str) -> int:
    """Peak resident set size (bytes) of one command run in a subprocess, importing rerank from `code`."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([code, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen(argv, cwd=code, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode()
    proc.stderr.close()
    if proc.returncode != 0:
        sys.exit(f"bench_eval_memory: {' '.join(argv)} failed:\n{err}")
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
    return usage.ru_maxrss * scale


def eval_command(folder: str, data_dir: str, n: int, extra: list[str]) -> list[str]:
    ref, base, system = write_tiled(folder, data_dir, n)
    return [sys.executable, "-m", "rerank", "eval", "-r", ref, "-b", base, system, "--metrics", "bleu,ter",
            "--lang", "en", "--to", "json", "--quiet", *extra]


def export(rev: str, folder: str) -> str:
    """The packages as committed at `rev`, unpacked into folder/rev."""
    target = os.path.join(folder, rev.replace("/", "_"))
    os.makedirs(target)
    packages = ["rerank", "mira", "embeddings", "nmt", "recipes"]  # plug-ins load from the other packages
    archive = subprocess.run(["git", "-C", ROOT, "archive", rev, *packages], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", target], input=archive, check=True)
    return target


def per_sentence(code: str, big: list[str], small: list[str], args) -> tuple[float, dict]:
    """Bytes per sentence and the two peaks of the package in `code`."""
    peaks = {label: min(peak_rss(argv, code) for _ in range(args.repeat)) for label, argv in
             (("base", small), ("full", big))}
    return (peaks["full"] - peaks["base"]) / (args.sentences - args.base_sentences), peaks


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", default="/work/shared/data/multi30k")
    ap.add_argument("--sentences", type=int, default=20000)
    ap.add_argument("--base-sentences", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=2, help="runs of each size; the smallest peak counts")
    ap.add_argument("--compare", metavar="REV", help="also measure the package at this git revision")
    ap.add_argument("extra", nargs="*", help="more eval options (after --), e.g. -- --ar 1000")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        big = eval_command(folder, args.data_dir, args.sentences, args.extra)
        small = eval_command(folder, args.data_dir, args.base_sentences, args.extra)
        codes = {"now": ROOT}
        if args.compare:
            codes[args.compare] = export(args.compare, folder)
        results = {label: per_sentence(code, big, small, args) for label, code in codes.items()}
    for label, (per, peaks) in results.items():
        print(f"{label}: rerank eval --metrics bleu,ter {' '.join(args.extra)}: peak RSS {peaks['full'] / 2**20:.1f} MiB "
              f"at {args.sentences} sentences, {peaks['base'] / 2**20:.1f} MiB at {args.base_sentences}; "
              f"{per / 1000:.2f} KB per sentence")
    if args.compare:
        print(f"ratio now / {args.compare}: {results['now'][0] / results[args.compare][0]:.3f}")


if __name__ == "__main__":
    main()
