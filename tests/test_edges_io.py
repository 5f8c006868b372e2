"""Reading edges: standard input (detection does not consume it, gzip by magic bytes), a UTF-8
byte-order mark on any text input, corrupt or truncated gzip data."""

import gzip
import io
import json
import random
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rerank.formats import detect_format, read_nbest, read_plain, read_references
from rerank.io import head_lines, iter_lines, read_lines
from rerank.weights import read_weights
from tests.test_formats import FAIRSEQ, JOSHUA
from tests.cli_helpers import run

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
                                      (FAIRSEQ, "fairseq"), (PLAIN, "plain")])
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


# --- byte-order mark -----------------------------------------------------------------------------

BOM = b"\xef\xbb\xbf"


@pytest.mark.parametrize("text", [MOSES, FAIRSEQ, PLAIN, Path(JOSHUA).read_text(encoding="utf-8")])
def test_bom_on_nbest_is_dropped(tmp_path, text):
    plain, marked = tmp_path / "plain", tmp_path / "marked"
    plain.write_bytes(text.encode())
    marked.write_bytes(BOM + text.encode())
    assert detect_format(str(marked)) == detect_format(str(plain))
    assert read_nbest(str(marked)) == read_nbest(str(plain))
    gz = tmp_path / "marked.gz"
    gz.write_bytes(gzip.compress(BOM + text.encode()))
    assert read_nbest(str(gz)) == read_nbest(str(plain))


def test_bom_on_references_leaves_bleu_unchanged(tmp_path, capsys):
    refs = [Path(JOSHUA).parent / f"ref.{k}" for k in range(4)]
    marked = []
    for k, ref in enumerate(refs):
        marked.append(tmp_path / f"ref.{k}")
        marked[-1].write_bytes(BOM + ref.read_bytes())
    assert read_references([str(p) for p in marked]) == read_references([str(p) for p in refs])
    scores = []
    for paths in (refs, marked):
        code, out, _ = run(["oracle", JOSHUA, "--tokenize", "none", *sum([["-r", p] for p in paths], [])], capsys)
        assert code == 0
        scores.append(out)
    assert scores[0] == scores[1] and "oracle BLEU" in scores[0]


def test_bom_on_scores_weights_and_plain_side_files(tmp_path, capsys):
    nbest = tmp_path / "n.nbest"
    nbest.write_text(MOSES)
    scores = tmp_path / "s.txt"
    scores.write_bytes(BOM + b"0.5\n-1\n2\n")
    out = tmp_path / "out.nbest"
    code, _, err = run(["add-feature", nbest, "--name", "s_s", "--scores", scores, "-o", out], capsys)
    assert code == 0, err
    assert read_nbest(str(out)).column("s_s").tolist() == [0.5, -1.0, 2.0]
    for name, text in (("w.json", json.dumps({"f": 1.0, "g": -0.5})), ("w.moses", "f= 1\ng= -0.5\n"),
                       ("w.joshua", "f 1\ng -0.5\n"), ("moses.ini", "[weight]\nf= 1\ng= -0.5\n")):
        (tmp_path / name).write_bytes(BOM + text.encode())
        assert read_weights(str(tmp_path / name)) == {"f": 1.0, "g": -0.5}
    (tmp_path / "h.txt").write_bytes(BOM + b"a\nb\n")
    (tmp_path / "h.txt.ids").write_bytes(BOM + b"0\n0\n")
    (tmp_path / "h.txt.features.tsv").write_bytes(BOM + b"f\n1\n2\n")
    hyps = str(tmp_path / "h.txt")
    plain = read_plain(hyps, ids=hyps + ".ids", features=hyps + ".features.tsv")
    assert list(plain.hyps) == ["a", "b"] and plain.feature_names == ["f"] and plain.sizes.tolist() == [2]


# --- corrupt or truncated gzip: an error naming file and line, nothing written --------------------

def _big_gzip() -> tuple[str, bytes]:
    rng = random.Random(0)
    words = ["ein", "mann", "frau", "hund", "faehrt", "rot", "blau", "die", "strasse"]
    lines = [f"{i // 5} ||| {' '.join(rng.choice(words) for _ in range(12))} ||| f= {rng.random()!r} ||| {rng.random()!r}"
             for i in range(3000)]
    text = "\n".join(lines) + "\n"
    return text, gzip.compress(text.encode(), mtime=0)


DAMAGE = {  # how the gzip data is broken -> the line the error names (None: somewhere after line 1)
    "truncated at the start": 1,
    "invalid deflate block": 1,
    "truncated in the middle": None,
    "bytes flipped in the middle": None,
    "wrong CRC": 3001,
    "garbage after the data": 3001,
}


def _damaged(data: bytes, damage: str) -> bytes:
    middle = len(data) // 2
    if damage == "truncated at the start":
        return data[:20]
    if damage == "invalid deflate block":  # the first block header says block type 3 (there is none)
        return data[:10] + b"\xff" + data[11:]
    if damage == "truncated in the middle":
        return data[:middle]
    if damage == "bytes flipped in the middle":
        return data[:middle] + bytes(b ^ 0x5A for b in data[middle:middle + 64]) + data[middle + 64:]
    if damage == "wrong CRC":  # every byte decompresses, the check at the end fails
        return data[:-8] + bytes([data[-8] ^ 1]) + data[-7:]
    return data + b"garbage"


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_broken_gzip_names_file_and_line(tmp_path, capsys, damage):
    _, data = _big_gzip()
    path = tmp_path / "broken.gz"
    path.write_bytes(_damaged(data, damage))
    out = tmp_path / "out.nbest"
    code, _, err = run(["convert", path, "--format", "moses", "-o", out], capsys)
    assert code == 2 and not out.exists() and list(tmp_path.glob(".out*")) == []
    match = re.search(r"^rerank convert: error: .*broken\.gz:(\d+): (.*)", err)
    assert match and "Traceback" not in err, err
    line, problem = int(match.group(1)), match.group(2)
    if damage != "bytes flipped in the middle":  # (garbage may decompress into text that fails to parse first)
        assert problem.startswith("cannot read: corrupt or truncated gzip data"), problem
    assert line == DAMAGE[damage] if DAMAGE[damage] else 1 < line <= 3001


def test_gzip_concatenated_members_read_whole(tmp_path):
    text, _ = _big_gzip()
    lines = text.splitlines(keepends=True)
    path = tmp_path / "two.gz"
    path.write_bytes(gzip.compress("".join(lines[:1000]).encode()) + gzip.compress("".join(lines[1000:]).encode()))
    nbest = read_nbest(str(path))
    assert nbest.n_hyps == 3000 and np.array_equal(nbest.offsets, np.arange(0, 3001, 5))
