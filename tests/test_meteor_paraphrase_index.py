"""The METEOR paraphrase index: the same entries as the text table, exact look-ups, and a disk cache
that is reused, rebuilt when corrupt or stale, and skipped when it cannot be written."""

import gzip
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rerank.metrics.meteor.paraphrase as para
from rerank import dedup
from rerank.metrics.meteor.__main__ import main as build_ahead
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
    monkeypatch.delenv("RERANK_CACHE_DIR", raising=False)  # else it, not XDG_CACHE_HOME, places the cache
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


# ---- the vectorised builder against the straightforward one -------------------------------------

def reference_arrays(path):
    """The index arrays built the plain way (dicts over the split lines; the builder before it was
    vectorised): ids in order of first appearance over the phrase lines, then the paraphrase lines."""
    with gzip.open(path, "rb") as fh:
        lines = fh.read().split(b"\n")
    refs, pars = lines[1::3], lines[2::3]
    count = min(len(refs), len(pars))
    word_id, phrase_id, phrases = {}, {}, []

    def pid(line):
        key = tuple(word_id.setdefault(w, len(word_id)) for w in line.split())
        if key and key not in phrase_id:
            phrase_id[key] = len(phrases)
            phrases.append(key)
        return phrase_id[key] if key else -1

    ref_ids = [pid(r) for r in refs[:count]]
    par_ids = [pid(q) for q in pars[:count]]
    max_len = max(map(len, phrases), default=0)
    weights = para.hash_weights(max_len)
    hashes = [sum((w + 1) * weights[k] for k, w in enumerate(p)) % (1 << 64) for p in phrases]
    order = sorted(range(len(phrases)), key=lambda p: (hashes[p], p))
    rank = {old: new for new, old in enumerate(order)}
    entries = [[] for _ in order]
    for r, q in zip(ref_ids, par_ids):
        if r >= 0 and q >= 0:
            entries[rank[r]].append(rank[q])
    offsets = lambda lists: np.cumsum([0] + [len(x) for x in lists]).tolist()  # noqa: E731
    return {"words": list(b"\n".join(word_id)), "phrase_hash": [hashes[p] for p in order],
            "phrase_off": offsets([phrases[p] for p in order]), "phrase_words": [w for p in order for w in phrases[p]],
            "entry_off": offsets(entries), "entry_par": [q for e in entries for q in e]}, max_len


WORDS = [b"a", b"b", b"ab", b"the", b"dog", b"caf\xc3\xa9", "日本語".encode(), b"x\x00y", b"\xff\xfe",
         b"seven77", b"eight888", b"fifteen-bytes15", b"sixteen-bytes-16", b"a-word-of-twenty-four-b",
         b"w" * 40, b"z" * 300]  # lengths around the key widths (7, 8, 15, 16, 24 bytes) and past 240
SPACES = [b" ", b"  ", b"\t", b" \t ", b"\r", b"\x0b", b"\x0c"]


@st.composite
def tables(draw):
    """A paraphrase table's text: triples (probability, phrase, paraphrase) over a small pool of
    phrases (so lines repeat, next to each other and apart), with single spaces only or with
    extra, leading and trailing whitespace; empty phrases; possibly a cut last triple."""
    canonical = draw(st.booleans())
    pool = []
    for _ in range(draw(st.integers(1, 8))):
        words = draw(st.lists(st.sampled_from(WORDS), max_size=8))
        if canonical:
            pool.append(b" ".join(words))
        else:
            seps = draw(st.lists(st.sampled_from(SPACES), min_size=len(words) + 1, max_size=len(words) + 1))
            lead, trail = (draw(st.sampled_from([b""] + SPACES)) for _ in range(2))
            pool.append(lead + b"".join(w + s for w, s in zip(words, seps[1:])).rstrip(b"".join(SPACES)) + trail
                        if draw(st.booleans()) else lead + seps[0].join(words) + trail)
    phrase = st.sampled_from(pool)
    triples = []
    for ref in draw(st.lists(phrase, max_size=12)):
        for par in draw(st.lists(phrase, min_size=1, max_size=3)):  # a phrase's paraphrases together
            triples.append(b"0.5\n" + ref + b"\n" + par + b"\n")
    text = b"".join(triples)
    return text[:draw(st.integers(0, len(text)))] if draw(st.booleans()) else text


def assert_same_index(path, sentences):
    arrays, max_len = para.build_arrays(path)
    want, want_len = reference_arrays(path)
    assert max_len == want_len
    for name in para.ARRAYS:
        assert arrays[name].tolist() == want[name], name
    index = para.ParaphraseIndex(arrays, max_len)
    plain = grouped(text_entries(path))
    assert index_table(index) == plain  # the same entries per phrase, in file order
    occurring = ngrams(sentences, max_len)
    assert index.select(sentences).table == grouped((r, q) for r, q in text_entries(path)
                                                    if r in occurring and q in occurring)
    return plain


def as_sentences(text):
    return [[w.decode("utf-8", "surrogateescape") for w in line.split()] for line in text.split(b"\n")]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(text=tables(), collide=st.booleans())
def test_builder_equals_the_plain_builder(tmp_path, text, collide):
    """The same arrays as the dict-based builder on tables with repeated words and lines, odd
    whitespace, empty phrases, UTF-8 and non-UTF-8 bytes, words past every key width; also when
    every hash collides (the exact comparisons then decide everything)."""
    table = tmp_path / "table.gz"
    with gzip.open(table, "wb") as fh:
        fh.write(text)
    with pytest.MonkeyPatch.context() as mp:
        if collide:
            # every line, word and phrase hashes to 0
            mp.setattr(dedup, "hash_items", lambda tiers, lengths, salt=None: np.zeros(len(lengths), np.uint64))
            mp.setattr(para, "hash_weights", lambda n: [1 << 63] * n)  # phrase hashes 0 or 2**63
        assert_same_index(str(table), as_sentences(text))


def test_builder_equals_the_plain_builder_on_the_shipped_table(cache):
    entries = assert_same_index(TABLE, sentences())
    assert sum(map(len, entries.values())) == 28683


@settings(max_examples=200, deadline=None)
@given(high=st.lists(st.integers(0, 3), max_size=300), data=st.data())
def test_argsort_stable_equals_numpys(high, data):
    """Values that share their high bits (beside the positions) or fit below them."""
    shift = data.draw(st.sampled_from([0, 20, 50, 62]))
    low = data.draw(st.lists(st.integers(0, (1 << 12) - 1), min_size=len(high), max_size=len(high)))
    values = np.array([(h << shift) + (x if shift > 12 else 0) for h, x in zip(high, low)], dtype=np.uint64)
    assert para._argsort_stable(values).tolist() == np.argsort(values, kind="stable").tolist()


def test_tables_read_as_gzip_reads_them(tmp_path):
    """Several gzip members with zero padding between and after them; a cut file is an error."""
    text = b"0.5\nbig dog\nlarge dog\n0.2\ndog\nhound\n"
    packed = gzip.compress(text[:10]) + b"\0\0" + gzip.compress(text[10:]) + b"\0"
    table = tmp_path / "t.gz"
    table.write_bytes(packed)
    with gzip.open(table, "rb") as fh:
        assert para._read_gzip(str(table)) == fh.read() == text
    table.write_bytes(packed[:len(packed) // 2])
    with pytest.raises(EOFError):
        para._read_gzip(str(table))


def test_index_built_ahead_by_the_module_command(cache, tmp_path, capsys):
    """`python -m rerank.metrics.meteor [RESOURCES]` builds every table's index into the
    cache (make install runs it), then finds it up to date; without a table it says so and succeeds."""
    folder = tmp_path / "meteor"
    (folder / "data").mkdir(parents=True)
    shutil.copy(TABLE, folder / "data" / "paraphrase-en.gz")
    assert build_ahead([str(folder)]) == 0
    table = str(folder / "data" / "paraphrase-en.gz")
    assert f"built into {para.index_file(table)}" in capsys.readouterr().out and len(cache) == 1
    assert para.load_index(para.index_file(table), para.fingerprint(table)).n_entries == 28683
    para._OPEN.clear()
    assert build_ahead([str(folder)]) == 0
    assert "is up to date" in capsys.readouterr().out and len(cache) == 1
    (folder / "data" / "paraphrase-en.gz").unlink()
    run = subprocess.run([sys.executable, "-m", "rerank.metrics.meteor", str(folder)],
                         capture_output=True, text=True,
                         env={**{k: v for k, v in os.environ.items() if k != "RERANK_CACHE_DIR"},
                              "XDG_CACHE_HOME": str(tmp_path / "xdg")})
    assert run.returncode == 0 and "nothing to build (no paraphrase-XX.gz" in run.stdout, run
