"""Run the real Meteor 1.5 jar (`-stdio`) to get per-segment sufficient statistics.

One Java process per metric object, started on first use and kept (Java start-up and, for
English, loading the paraphrase table take seconds): requests `SCORE ||| ref1 ||| ref2 ||| hyp`
go in chunks, one line of 23 statistics per segment comes back (Meteor picks the best reference).
A daemon thread drains the jar's stderr while it runs (a full stderr pipe would block the jar and
with it our read of stdout); its last lines go into the error message if the jar fails.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
from collections import deque

import numpy as np

from rerank.metrics.meteor.resources import MeteorResourceError, default_jar

CHUNK = 200  # requests written before reading their answers (keeps stdin/stdout far below their buffers)
ERR_TAIL = 2000  # characters of the jar's stderr kept for error messages


def java_available() -> bool:
    return shutil.which("java") is not None


class _Drain:
    """Reads a text pipe to its end on a daemon thread, keeping only its last `keep` characters."""

    def __init__(self, pipe, keep: int = ERR_TAIL):
        self._lines: deque[str] = deque()
        self._size, self._keep = 0, keep
        self._thread = threading.Thread(target=self._run, args=(pipe,), daemon=True)
        self._thread.start()

    def _run(self, pipe) -> None:
        for line in iter(pipe.readline, ""):
            self._lines.append(line[-self._keep:])
            self._size += len(self._lines[-1])
            while self._size - len(self._lines[0]) >= self._keep:
                self._size -= len(self._lines.popleft())

    def tail(self, timeout: float = 5.0) -> str:
        """The kept text, once the pipe is closed (or after `timeout` seconds)."""
        self._thread.join(timeout)
        return "".join(self._lines)[-self._keep:]


class MeteorJar:
    def __init__(self, jar: str | None, lang: str, modules, normalize: bool = True, lowercase: bool = True,
                 memory: str = "2G"):
        self.jar = jar or default_jar()
        if self.jar is None:
            raise MeteorResourceError("the jar backend needs meteor-1.5.jar (install pycocoevalcap, or give the jar's path)")
        if not java_available():
            raise MeteorResourceError("the jar backend needs Java (no `java` on PATH); use the native backend")
        self.cmd = ["java", f"-Xmx{memory}", "-jar", self.jar, "-", "-", "-stdio", "-l", lang, "-m", " ".join(modules)]
        if normalize:
            self.cmd.append("-norm")
        elif lowercase:
            self.cmd.append("-lower")
        self._proc: subprocess.Popen[str] | None = None
        self._stderr: _Drain | None = None

    def _process(self):
        if self._proc is None or self._proc.poll() is not None:
            self._proc = subprocess.Popen(self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True, encoding="utf-8", errors="replace",
                                          bufsize=1)  # a decoding error would stop the stderr drain
            self._stderr = _Drain(self._proc.stderr)
        return self._proc

    def stats(self, hyps: list[str], refs: list[list[str]]) -> np.ndarray:
        proc = self._process()
        out = []
        for start in range(0, len(hyps), CHUNK):
            lines = []
            for i in range(start, min(start + CHUNK, len(hyps))):
                parts = ["SCORE"] + [_clean(stream[i]) for stream in refs] + [_clean(hyps[i])]
                lines.append(" ||| ".join(parts) + "\n")
            try:
                proc.stdin.write("".join(lines))
                proc.stdin.flush()
                for _ in lines:
                    answer = proc.stdout.readline()
                    if not answer:
                        raise BrokenPipeError
                    out.append([float(x) for x in answer.split()])
            except (BrokenPipeError, ValueError):
                drain = self._stderr
                self.close()
                err = drain.tail() if drain is not None else ""
                raise MeteorResourceError(f"Meteor jar failed after {len(out)} of {len(hyps)} segments: "
                                          f"{err.strip()[-500:]}") from None
        return np.array(out, dtype=np.float64).reshape(len(hyps), 23)

    def close(self) -> None:
        if self._proc is not None:
            try:
                if self._proc.stdin is not None:  # always: the process is started with stdin=PIPE
                    self._proc.stdin.close()
            except OSError:
                pass
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
            self._proc = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - a finaliser never raises
            pass


def _clean(text: str) -> str:
    # the -stdio protocol separates fields with |||; newlines would end the request
    return text.replace("|||", "| | |").replace("\n", " ").replace("\r", " ")
