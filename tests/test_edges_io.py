"""Reading edges: standard input (detection does not consume it, gzip by magic bytes)."""

import gzip
import io
import subprocess
import sys
from pathlib import Path

import pytest

from rerank.formats import detect_format, read_nbest
from rerank.io import head_lines, iter_lines, read_lines
from tests.test_formats import FAIRSEQ, JOSHUA

MOSES = "0 ||| a b ||| f= 1 g= 2 ||| 3\n0 ||| a c ||| f= 2 g= 0 ||| 2\n1 ||| d ||| f= 0 g= 1 ||| 1\n"
PLAIN = "first hypothesis\nsecond\nthird\n"


class Trickle(io.RawIOBase):
    """A pipe that hands out one byte per read (so a peek sees less than the gzip magic)."""

    def __init__(self, data: bytes):
        self._data = data

    def readable(self):
        return True

    def readinto(self, buffer):
        if not self._data:
            return 0
        buffer[0], self._data = self._data[0], self._data[1:]
        return 1


def set_stdin(monkeypatch, data: bytes, trickle: bool = False):
    raw = io.BufferedReader(Trickle(data), buffer_size=1) if trickle else io.BytesIO(data)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(raw, encoding="utf-8"))


# --- standard input ----------------------------------------------------------------------------

@pytest.mark.parametrize("compress", [False, True])
@pytest.mark.parametrize("trickle", [False, True])
@pytest.mark.parametrize("text,fmt", [(MOSES, "moses"), (Path(JOSHUA).read_text(encoding="utf-8"), "joshua"),
                                      (FAIRSEQ.split("\n", 1)[1], "fairseq"), (PLAIN, "plain")])
def test_stdin_detection_keeps_every_line(tmp_path, monkeypatch, text, fmt, compress, trickle):
    path = tmp_path / "file"
    path.write_text(text, encoding="utf-8")
    data = gzip.compress(text.encode()) if compress else text.encode()
    set_stdin(monkeypatch, data, trickle)
    assert detect_format("-") == fmt
    from_stdin = read_nbest("-")  # detection looked again: the lines it saw are still there
    assert from_stdin == read_nbest(str(path))
    assert from_stdin.hyps[0] == read_nbest(str(path)).hyps[0]


def test_head_lines_of_stdin_are_read_again(monkeypatch):
    set_stdin(monkeypatch, gzip.compress(b"one\ntwo\nthree\n"))
    assert head_lines("-", 2) == [(1, "one"), (2, "two")]
    assert head_lines("-", 1) == [(1, "one")]
    assert list(iter_lines("-")) == [(1, "one"), (2, "two"), (3, "three")]
    assert read_lines("-") == []  # consumed now


def test_gzip_on_stdin_through_the_console_script(tmp_path):
    exe = Path(sys.executable).parent / "rerank"
    out = tmp_path / "out.nbest"
    result = subprocess.run([str(exe), "convert", "-", "-o", str(out)], input=gzip.compress(MOSES.encode()),
                            capture_output=True)
    assert result.returncode == 0, result.stderr
    assert out.read_text().splitlines() == ["0 ||| a b ||| f= 1.0 g= 2.0 ||| 3.0", "0 ||| a c ||| f= 2.0 g= 0.0 ||| 2.0",
                                            "1 ||| d ||| f= 0.0 g= 1.0 ||| 1.0"]
