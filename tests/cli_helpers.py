"""Helpers shared by the command-line tests: run `rerank` in-process, write small input files."""

from rerank.cli import main

# How long a test waits for a process it started before it calls it hung: 30 minutes, far beyond
# what any of them takes on a loaded machine (seconds, a minute or two at most), so it never fails
# a slow run; it only ends a process that would otherwise stall the suite for ever (a rank waiting
# for a peer that died, a pipe nobody reads). No test limits or measures how fast anything runs.
HANG_SECONDS = 30 * 60


def run(args, capsys):
    """(exit status, stdout, stderr) of `rerank ARGS` run in-process."""
    code = main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def write(tmp_path, name, text):
    """Write `text` to tmp_path/name (UTF-8); returns the path as a string."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def torchrun(args, nproc: int = 2):
    """`torchrun --standalone --nproc_per_node NPROC -m rerank ARGS` (gloo on the CPU, one thread per
    rank, offline, the repository first on the path): the CompletedProcess."""
    import os
    import subprocess
    import sys

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": repo + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
                           str(nproc), "-m", "rerank", *[str(a) for a in args]], env=env, capture_output=True,
                          text=True, timeout=HANG_SECONDS)
