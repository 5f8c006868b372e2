"""Progress that moves: the bulk Moses reader reports the lines of each block as it reads them
(gzip'd files too) to the reading progress, so a long read's bar grows instead of sitting at 0;
`eval -o` says the files it wrote, as `report` does."""

from __future__ import annotations

import gzip

import pytest

import rerank
from rerank.cli import main
from rerank.formats.moses import fast
from rerank.io import reading_progress

LINES = 3000


def write_list(path, compress: bool) -> None:
    text = "".join(f"{k // 10} ||| hypothesis {k} of sentence {k // 10} ||| f= {k % 7} g= -{k % 3}.5 ||| {k % 5}\n"
                   for k in range(LINES))
    data = text.encode("utf-8")
    path.write_bytes(gzip.compress(data, mtime=0) if compress else data)


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_the_bulk_reader_reports_each_block_as_it_reads(tmp_path, monkeypatch, compress):
    monkeypatch.setattr(fast, "BLOCK", 4096)   # many blocks of a small file
    path = tmp_path / ("list.nbest.gz" if compress else "list.nbest")
    write_list(path, compress)
    seen = []
    with reading_progress(lambda desc, done, total: seen.append((desc, done))):
        read = fast.read_moses_fast(str(path))
    assert read is not None and read[0].n_hyps == LINES   # the bulk reader read it
    counts = [done for _, done in seen]
    assert len(counts) > 10 and counts == sorted(set(counts)) and counts[-1] == LINES   # it grew, to every line
    assert {desc for desc, _ in seen} == {f"reading {path.name}"}


def test_the_public_reader_reports_too_and_reads_the_same(tmp_path, monkeypatch):
    monkeypatch.setattr(fast, "BLOCK", 4096)
    path = tmp_path / "list.nbest"
    write_list(path, False)
    seen = []
    with reading_progress(lambda desc, done, total: seen.append(done)):
        nbest = rerank.read_nbest(str(path))
    start = max([k for k in range(1, len(seen)) if seen[k] <= seen[k - 1]], default=0)   # the read (after a look at its head)
    assert len(seen) - start > 10 and seen[start:] == sorted(seen[start:]) and seen[-1] == LINES
    assert nbest.hyps == rerank.read_nbest(str(path)).hyps


def test_no_progress_outside_reading_progress(tmp_path, monkeypatch):
    path = tmp_path / "list.nbest"
    write_list(path, False)
    seen = []
    with reading_progress(seen.append):
        pass
    assert fast.read_moses_fast(str(path)) is not None and seen == []


def test_eval_says_the_files_it_wrote(tmp_path, capsys):
    for name, text in {"ref": "a b c d\ne f g\n", "base": "a b\ne f\n", "sys": "a b c d\ne f g\n"}.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    common = ["eval", "-r", str(tmp_path / "ref"), "-b", str(tmp_path / "base"), str(tmp_path / "sys"),
              "--metrics", "bleu", "--ar", "10", "--bootstrap", "10"]
    out = tmp_path / "res.md"
    assert main([*common, "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"wrote {out}, {tmp_path / 'res.config.json'}\n" in err
    assert out.exists() and (tmp_path / "res.config.json").exists()
    assert main([*common, "-o", str(tmp_path / "quiet.md"), "--quiet"]) == 0
    assert "wrote" not in capsys.readouterr().err
    assert main([*common]) == 0   # the table on standard output: nothing said
    captured = capsys.readouterr()
    assert "wrote" not in captured.err and "BLEU" in captured.out
