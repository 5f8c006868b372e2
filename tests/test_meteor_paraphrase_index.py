"""The METEOR paraphrase index: the same entries as the text table, exact look-ups, and a disk cache
that is reused, rebuilt when corrupt or stale, and skipped when it cannot be written."""

import gzip
import os
import shutil

import numpy as np
import pytest

import rerank.metrics.meteor.paraphrase as para
from rerank.metrics.meteor import MeteorMetric

DATA = os.path.join(os.path.dirname(__file__), "data", "eval")
TABLE = os.path.join(DATA, "meteor", "paraphrase-en.gz")


def text_entries(path):
    """The text table read as Meteor reads it: (phrase, paraphrase) words of every triple, file order."""
    with gzip.open(path, "rb") as fh:
        lines = fh.read().split(b"\n")
    words = lambda line: tuple(w.decode("utf-8", "surrogateescape") for w in line.split())  # noqa: E731
    return [(words(r), words(q)) for r, q in zip(lines[1::3], lines[2::3]) if r.split() and q.split()]


def grouped(entries):
    table = {}
    for ref, par in entries:
        table.setdefault(ref, []).append(par)
    return table


def index_table(index):
    """{phrase: paraphrases in order} of every entry of an index."""
    off, par = index.arrays["entry_off"], index.arrays["entry_par"]
    return {index.phrase(p): [index.phrase(q) for q in par[off[p]:off[p + 1]].tolist()]
            for p in range(len(off) - 1) if off[p + 1] > off[p]}


def ngrams(sentences, longest=7):
    return {tuple(s[i:j]) for s in sentences for i in range(len(s)) for j in range(i + 1, min(len(s), i + longest) + 1)}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(para, "_OPEN", {})
    builds = []
    real = para.build_arrays
    monkeypatch.setattr(para, "build_arrays", lambda path: builds.append(path) or real(path))
    return builds


def sentences():
    metric = MeteorMetric("en", ["exact"])
    texts = []
    for name in ("ref.en", "cap1.en", "cap2.en", "cap3.en", "good.en.run1"):
        with open(os.path.join(DATA, name), encoding="utf-8") as fh:
            texts += fh.read().splitlines()
    return [metric.words(t) for t in texts]


def test_index_holds_the_text_tables_entries(cache):
    index = para.open_index(TABLE)
    entries = text_entries(TABLE)
    assert index.n_entries == len(entries) == 28683
    assert index_table(index) == grouped(entries)
    assert index._buffer is not None and os.listdir(para.cache_dir())[0].endswith(".idx")


def test_selection_equals_the_text_table_restricted_to_the_texts(cache):
    sents = sentences()
    occurring = ngrams(sents)
    want = grouped((r, q) for r, q in text_entries(TABLE) if r in occurring and q in occurring)
    got = para.open_index(TABLE).select(sents)
    assert got.table == want and sum(map(len, want.values())) == 688
    words = sents[0]
    assert got.paths(words, 0) == [(len(r), q) for r in sorted(want, key=len) if tuple(words[:len(r)]) == r
                                   for q in want[r]]


def test_cache_is_reused_corrupt_or_stale_is_rebuilt(cache, tmp_path):
    table = tmp_path / "paraphrase-en.gz"
    shutil.copy(TABLE, table)
    first = index_table(para.open_index(str(table)))
    para._OPEN.clear()
    para.open_index(str(table))
    assert len(cache) == 1  # the second open read the cache
    (file,) = [os.path.join(para.cache_dir(), f) for f in os.listdir(para.cache_dir())]
    for damage in (lambda b: b[:-1] + bytes([b[-1] ^ 1]), lambda b: b[: len(b) // 2], lambda b: b"", lambda b: b"junk" + b):
        data = open(file, "rb").read()
        open(file, "wb").write(damage(data))
        para._OPEN.clear()
        assert index_table(para.open_index(str(table))) == first
        assert open(file, "rb").read() == data  # rebuilt, identical
    builds = len(cache)
    with gzip.open(table, "wb") as fh:  # same path, other contents
        fh.write(b"0.5\nbig dog\nlarge dog\n0.2\ndog\nhound\n")
    para._OPEN.clear()
    assert index_table(para.open_index(str(table))) == {("big", "dog"): [("large", "dog")], ("dog",): [("hound",)]}
    os.utime(table, ns=(1, 1))  # only the mtime changed: rebuilt too
    para._OPEN.clear()
    para.open_index(str(table))
    assert len(cache) == builds + 2 and len(os.listdir(para.cache_dir())) == 1


def test_unusual_tables_and_no_writable_cache(cache, tmp_path, monkeypatch):
    """Empty phrases, repeated entries, extra whitespace, bytes that are not UTF-8, a cut last triple;
    a cache folder that cannot be created: the index lives in memory."""
    table = tmp_path / "odd.gz"
    text = (b"1\na  b\nc\n1\n \nx\n1\na b\nc\n1\nc\na\tb\n1\n\xff\xfe\nc\n1\nc\n\xff\xfe\n1\nd\ne\n1\nq\n")
    with gzip.open(table, "wb") as fh:
        fh.write(text)
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    index = para.open_index(str(table))
    assert index._buffer is None
    assert index_table(index) == grouped(text_entries(str(table)))
    assert index_table(index)[("a", "b")] == [("c",), ("c",)]  # repeated entries are kept, as the jar reads them
    got = index.select([["a", "b", "c"], ["d", "e"]])
    assert got.table == {("a", "b"): [("c",), ("c",)], ("c",): [("a", "b")], ("d",): [("e",)]}


def test_hash_collisions_are_resolved_by_comparing_words(cache, monkeypatch):
    monkeypatch.setattr(para, "hash_weights", lambda n: [0] * n)  # every phrase hashes to 0
    index = para.open_index(TABLE)
    assert not index.arrays["phrase_hash"].any()
    sents = sentences()[:10]
    occurring = ngrams(sents)
    want = grouped((r, q) for r, q in text_entries(TABLE) if r in occurring and q in occurring)
    assert index.select(sents).table == want and want


def test_native_meteor_equals_with_and_without_cache(cache, tmp_path):
    folder = tmp_path / "dist"
    (folder / "data").mkdir(parents=True)
    shutil.copy(TABLE, folder / "data" / "paraphrase-en.gz")
    from rerank.metrics.meteor.resources import default_jar

    if default_jar() is None:
        pytest.skip("pycocoevalcap's meteor-1.5.jar is not installed")
    shutil.copy(default_jar(), folder / "meteor-1.5.jar")
    with open(os.path.join(DATA, "cap1.en"), encoding="utf-8") as fh:
        hyps = fh.read().splitlines()
    with open(os.path.join(DATA, "ref.en"), encoding="utf-8") as fh:
        refs = fh.read().splitlines()
    jar = str(folder / "meteor-1.5.jar")
    built = MeteorMetric("en", resources=jar).sentence_stats(hyps, [refs])
    para._OPEN.clear()
    cached = MeteorMetric("en", resources=jar).sentence_stats(hyps, [refs])
    stored = np.loadtxt(os.path.join(DATA, "meteor", "cap1.en.jar-stats"))
    assert len(cache) == 1
    np.testing.assert_array_equal(built, cached)
    assert built[:, 16:20].sum() > 0 and built[:, 0].tolist() == stored[:, 0].tolist()
