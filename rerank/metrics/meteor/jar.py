"""Run the real Meteor 1.5 jar (`-stdio`) to get per-segment sufficient statistics.

One Java process per call: all `SCORE ||| ref1 ||| ref2 ||| hyp` lines go in at once, one line of
23 statistics per segment comes back (Meteor picks the best reference itself).
"""

from __future__ import annotations

import shutil
import subprocess

import numpy as np

from rerank.metrics.meteor.resources import MeteorResourceError, default_jar


def java_available() -> bool:
    return shutil.which("java") is not None


class MeteorJar:
    def __init__(self, jar: str | None, lang: str, modules, normalize: bool = True, lowercase: bool = True,
                 memory: str = "2G"):
        self.jar = jar or default_jar()
        if self.jar is None:
            raise MeteorResourceError("the jar backend needs meteor-1.5.jar (pycocoevalcap or --meteor-jar)")
        if not java_available():
            raise MeteorResourceError("the jar backend needs Java (no `java` on PATH); use --meteor-backend native")
        self.cmd = ["java", f"-Xmx{memory}", "-jar", self.jar, "-", "-", "-stdio", "-l", lang, "-m", " ".join(modules)]
        if normalize:
            self.cmd.append("-norm")
        elif lowercase:
            self.cmd.append("-lower")

    def stats(self, hyps: list[str], refs: list[list[str]]) -> np.ndarray:
        lines = []
        for i, hyp in enumerate(hyps):
            parts = ["SCORE"] + [_clean(stream[i]) for stream in refs] + [_clean(hyp)]
            lines.append(" ||| ".join(parts))
        proc = subprocess.run(self.cmd, input="\n".join(lines) + "\n", capture_output=True, text=True,
                              encoding="utf-8")
        out = [line for line in proc.stdout.split("\n") if line.strip()]
        if proc.returncode != 0 or len(out) != len(hyps):
            raise MeteorResourceError(f"Meteor jar failed (exit {proc.returncode}, {len(out)} of {len(hyps)} lines): "
                                      f"{proc.stderr.strip()[-500:]}")
        return np.array([[float(x) for x in line.split()] for line in out], dtype=np.float64)


def _clean(text: str) -> str:
    # the -stdio protocol separates fields with |||; newlines would end the request
    return text.replace("|||", "| | |").replace("\n", " ").replace("\r", " ")
