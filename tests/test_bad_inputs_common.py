"""The bad-input suite's fixtures and checks (no tests of its own): a small valid set of every file
kind, corruptions that turn a file bad (with the line a message must name), and `refused`, which
runs a command in-process and checks exit 2, a `rerank CMD: error:` message naming the file (and
line), no traceback, no output or temporary file left and every input byte-identical."""

from __future__ import annotations

import gzip
import hashlib
import io
import re
import shlex
from pathlib import Path

import numpy as np
import pytest

from rerank.cli import main

NBEST_LINES = [("a man rides a bike", -1.5, 5), ("a man is riding", -2.0, 4), ("two dogs play", -0.5, 3),
               ("two dogs", -1.0, 2), ("a red car", -0.7, 3), ("red car", -0.9, 2)]
SENT = [0, 0, 1, 1, 2, 2]
MOSES = "".join(f"{s} ||| {h} ||| nmt= {v} len= {n} ||| {v}\n" for s, (h, v, n) in zip(SENT, NBEST_LINES))
JOSHUA = "".join(f"{s} ||| {h} ||| nmt={v} len={n} ||| {v}\n" for s, (h, v, n) in zip(SENT, NBEST_LINES))
FAIRSEQ = "".join(f"S-{s}\tsource {s}\nT-{s}\t{NBEST_LINES[2 * s][0]}\n"
                  + "".join(f"H-{s}\t{v}\t{h}\n" for h, v, _ in NBEST_LINES[2 * s:2 * s + 2]) for s in range(3))
PLAIN = "".join(h + "\n" for h, _, _ in NBEST_LINES)
PLAIN_IDS = "".join(f"{s}\n" for s in SENT)
PLAIN_TSV = "nmt\tlen\n" + "".join(f"{v}\t{n}\n" for _, v, n in NBEST_LINES)
REF = "a man rides a bike\ntwo dogs play\na red car\n"

FILES = {  # file name -> valid content
    "in.nbest": MOSES, "in.joshua": JOSHUA, "in.fairseq": FAIRSEQ, "in.nbest.gz": MOSES,
    "hyps.txt": PLAIN, "hyps.txt.ids": PLAIN_IDS, "hyps.txt.features.tsv": PLAIN_TSV, "hyps.sizes": "2\n2\n2\n",
    "ref.txt": REF, "ref2.txt": "a man rides a bike\ntwo dogs\nred car\n", "ref.txt.gz": REF,
    "src.txt": "ein mann\nzwei hunde\nein auto\n", "scores.txt": "".join(f"{k / 4}\n" for k in range(6)),
    "sent-scores.txt": "0.5\n1.5\n2.5\n", "w-nmt.json": '{\n  "nmt": 1.0\n}\n',
    "weights.json": '{\n  "nmt": 1.0,\n  "len": 0.1\n}\n', "weights.moses": "nmt= 1.0\nlen= 0.1\n",
    "weights.joshua": "nmt 1.0\nlen 0.1\n", "base.txt": "a man is riding\ntwo dogs\nred car\n",
    "sys.txt": "a man rides a bike\ntwo dogs play\na red car\n",
}


def npy(array) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.asarray(array), allow_pickle=True)
    return buffer.getvalue()


BINARY = {"scores.npy": npy(np.arange(6) / 4), "feats.npy": npy(np.array([[v, n] for _, v, n in NBEST_LINES]))}
ANY_LINE = "any"  # the message names a line, whichever


def key(name: str) -> str:
    """The command-line field of a file: in.nbest -> {in_nbest}."""
    return re.sub(r"[.-]", "_", name)


def write_files(folder: Path) -> Path:
    for name, text in FILES.items():
        data = text.encode("utf-8")
        (folder / name).write_bytes(gzip.compress(data, mtime=0) if name.endswith(".gz") else data)
    for name, data in BINARY.items():
        (folder / name).write_bytes(data)
    return folder


# --- corruptions: content -> bad content, and the line a message must name --------------------

def binary(corrupt):
    """Mark a corruption as acting on the file's bytes."""
    corrupt.binary = True
    return corrupt


def set_line(number: int, text: str):
    """Replace line `number` (1-based) with `text`."""
    def corrupt(data: str) -> str:
        lines = data.splitlines(keepends=True)
        lines[number - 1] = text + "\n"
        return "".join(lines)
    return corrupt


def insert_line(number: int, text: str):
    """Insert `text` as line `number`."""
    def corrupt(data: str) -> str:
        lines = data.splitlines(keepends=True)
        lines.insert(number - 1, text + "\n")
        return "".join(lines)
    return corrupt


def drop_lines(*numbers: int):
    def corrupt(data: str) -> str:
        return "".join(x for k, x in enumerate(data.splitlines(keepends=True), start=1) if k not in numbers)
    return corrupt


def replace(old: str, new: str, line: int):
    """Replace the first `old` on line `line` by `new`."""
    def corrupt(data: str) -> str:
        lines = data.splitlines(keepends=True)
        assert old in lines[line - 1], (old, lines[line - 1])
        lines[line - 1] = lines[line - 1].replace(old, new, 1)
        return "".join(lines)
    return corrupt


def bytes_on_line(number: int, raw: bytes = b"\xff\xfe bad \xc3"):
    """Bytes that are not UTF-8 at the start of line `number`."""
    @binary
    def corrupt(data: bytes) -> bytes:
        lines = data.splitlines(keepends=True)
        lines[number - 1] = raw + lines[number - 1]
        return b"".join(lines)
    return corrupt


@binary
def utf16(data: bytes) -> bytes:
    """The file saved as UTF-16 (with its byte-order mark), as some editors do."""
    return data.decode("utf-8").encode("utf-16")


def crlf(inner):
    """CRLF line ends and a leading byte-order mark around another corruption: lines count the same."""
    def corrupt(data: str) -> str:
        return "\ufeff" + inner(data).replace("\n", "\r\n")
    return corrupt


def truncated_gzip(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)[:-12]


def corrupt_gzip(data: bytes) -> bytes:
    packed = bytearray(gzip.compress(data, mtime=0))
    for k in range(14, min(len(packed) - 8, 40)):
        packed[k] ^= 0x5A
    return bytes(packed)


for _f in (truncated_gzip, corrupt_gzip):
    _f.binary = _f.raw = True


def empty(data: str) -> str:
    return ""


def blank(data: str) -> str:
    return "\n \n\n"


def text_corruptions(lines: int) -> dict:
    """Corruptions of any text file of `lines` lines: name -> (corruption, line named)."""
    return {
        "bad-bytes": (bytes_on_line(min(2, lines)), min(2, lines)), "utf-16": (utf16, 1),
        "truncated-gzip": (truncated_gzip, ANY_LINE), "corrupt-gzip": (corrupt_gzip, ANY_LINE),
    }


# --- where the bad file is: a path corruption changes the path given on the command line -------

PATH_CORRUPTIONS = ("missing", "directory", "missing-folder")


def corrupt_file(folder: Path, name: str, corruption) -> str:
    """Corrupt folder/name in place (or make it missing, a directory...); the path to give instead."""
    path = folder / name
    if corruption == "missing":
        path.unlink()
    elif corruption == "directory":
        path.unlink()
        path.mkdir()
    elif corruption == "missing-folder":
        return str(folder / "no-such-folder" / name)
    elif getattr(corruption, "raw", False):  # acts on the uncompressed bytes, writes gzip bytes
        data = path.read_bytes()
        path.write_bytes(corruption(gzip.decompress(data) if name.endswith(".gz") else data))
    else:
        data = path.read_bytes()
        plain = gzip.decompress(data) if name.endswith(".gz") else data
        bad = corruption(plain) if getattr(corruption, "binary", False) else corruption(plain.decode()).encode()
        path.write_bytes(gzip.compress(bad, mtime=0) if name.endswith(".gz") else bad)
    return str(path)


# --- the check ------------------------------------------------------------------------------------

def snapshot(root: Path) -> dict[str, str]:
    """Every file and folder under root: sha256 of files, 'dir' for folders."""
    return {str(p.relative_to(root)): "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*"))}


def command_line(folder: Path, line: str, paths: dict[str, str]) -> list[str]:
    """`line` split into arguments, its fields filled: {d} the folder, {in_nbest} folder/in.nbest..., `paths`."""
    fields = {key(k): str(folder / k) for k in [*FILES, *BINARY]} | {"d": str(folder)} | paths
    return shlex.split(line.format(**fields))


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's errors
        code = exc.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def refused(folder: Path, line: str, capsys, names: str | None = None, at: int | str | None = None,
            error_line_only: bool = False, **paths: str) -> str:
    """Run `line` ({name} fields filled from `paths` and folder/<file> names): exit 2, one error
    naming `names` (and `:at:`), nothing under `folder` created or changed. Returns stderr."""
    argv = command_line(folder, line, paths)
    before = snapshot(folder)
    code, _, err = run(argv, capsys)
    command = argv[0]
    assert code == 2, f"exit {code} for {argv}\n{err}"
    assert "Traceback" not in err, err
    lines = err.splitlines()  # the error, last and once (argparse names a verb: rerank nmt translate: error:)
    assert lines and re.match(rf"rerank {command}( [a-z-]+)?: error: ", lines[-1]), err
    assert error_line_only or all(x.startswith(("note:", "warning:")) for x in lines[:-1]), err
    message = lines[-1]
    if names is not None:
        assert names in message, f"{names!r} not named in: {message}"
        if at == ANY_LINE:
            assert re.search(re.escape(names) + r":\d+:", message), message
        elif at is not None:
            assert f"{names}:{at}:" in message, message
    assert snapshot(folder) == before, "files created or changed"
    return err


def succeeds(folder: Path, line: str, capsys, **paths: str) -> int:
    """The same command line with valid files exits 0 (so that refusals are for the corruption);
    returns the exit status."""
    argv = command_line(folder, line, paths)
    code, _, err = run(argv, capsys)
    assert code == 0, f"exit {code} for {argv}\n{err}"
    return code


@pytest.fixture
def work(tmp_path):
    return write_files(tmp_path)
