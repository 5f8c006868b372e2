"""Undoing subword segmentation and Moses escaping on read (--post-process, --unescape)."""

import json

import pytest
from hypothesis import given, settings, strategies as st

from rerank.formats import read_nbest
from rerank.formats.text import HTML_ESCAPES, undo_sentencepiece, undo_subword_nmt, unescape_html
from tests.cli_helpers import run, write

WORDS = st.lists(st.text(st.characters(categories=["L", "N", "P"], exclude_characters="@\u2581&"), min_size=1,
                         max_size=8), min_size=1, max_size=8)


def _bpe(words: list[str], cuts: list[int]) -> str:
    """subword-nmt's segmentation of `words`: each word cut after `cut` characters, `@@` on every piece but the last."""
    pieces = []
    for word, cut in zip(words, cuts):
        k = cut % len(word)
        pieces += [word[:k] + "@@", word[k:]] if k else [word]
    return " ".join(pieces)


def _spm(words: list[str], cuts: list[int]) -> str:
    """SentencePiece's pieces of `words`: `▁` starts each word, a word cut in two."""
    pieces = []
    for word, cut in zip(words, cuts):
        k = cut % len(word)
        pieces += ["\u2581" + word[:k], word[k:]] if k else ["\u2581" + word]
    return " ".join(pieces)


@settings(max_examples=200, deadline=None)
@given(words=WORDS, cuts=st.lists(st.integers(0, 7), min_size=8, max_size=8))
def test_post_processing_gives_back_the_words(words, cuts):
    assert undo_subword_nmt(_bpe(words, cuts)) == " ".join(words)
    assert undo_sentencepiece(_spm(words, cuts)) == " ".join(words)


@settings(max_examples=200, deadline=None)
@given(text=st.text(st.sampled_from(list("ab &;|[]<>'\"#1"))))
def test_unescaping_inverts_moses_escaping(text):
    escaped = (text.replace("&", "&amp;").replace("|", "&#124;").replace("<", "&lt;").replace(">", "&gt;")
               .replace("'", "&apos;").replace('"', "&quot;").replace("[", "&#91;").replace("]", "&#93;"))
    assert unescape_html(escaped) == text


@pytest.mark.neural
@settings(max_examples=200, deadline=None)
@given(parts=st.lists(st.sampled_from(list("ab &;|[]<>'\"#1pqtuosl")) | st.sampled_from(list(HTML_ESCAPES))))
def test_unescaping_is_sacremoses_unescape_xml(parts):
    from sacremoses import MosesDetokenizer

    text = "".join(parts)
    assert unescape_html(text) == MosesDetokenizer().unescape_xml(text)


def test_every_command_reads_post_processed_text_and_says_what_it_saw(tmp_path, capsys):
    path = write(tmp_path, "n", "0 ||| a ma@@ n &apos;s ||| f= 1 ||| 1\n0 ||| a m@@ an ||| f= 2 ||| 2\n")
    code, out, err = run(["info", path], capsys)
    assert code == 0 and "try post_process='subword_nmt'" in out and "try unescape='html'" in out
    assert "try post_process='subword_nmt'" in err  # every command's note
    code, out, err = run(["info", path, "--post-process", "subword_nmt", "--unescape", "html", "--json"], capsys)
    summary = json.loads(out)
    assert code == 0 and summary["text"] == {"post_process": "subword_nmt", "unescape": "html"}
    assert not any(": try " in p for p in summary["problems"]) and ": try " not in err
    out_path = tmp_path / "o.nbest"
    code, _, err = run(["convert", path, "--post-process", "subword_nmt", "--unescape", "html", "-o", out_path], capsys)
    assert code == 0 and [h for h in read_nbest(str(out_path)).hyps] == ["a man 's", "a man"]


def test_sentencepiece_on_decoded_text_says_it_removed_every_space(tmp_path, capsys):
    path = write(tmp_path, "n", "0 ||| a man ||| f= 1 ||| 1\n")
    code, _, err = run(["info", path, "--post-process", "sentencepiece"], capsys)
    assert code == 0 and "every space was removed" in err


def test_post_processing_is_recorded_in_the_tuned_weights(tmp_path, capsys):
    path = write(tmp_path, "n", "0 ||| a ma@@ n runs on the grass ||| f= 1 ||| 1\n"
                 "0 ||| a d@@ og runs on the grass ||| f= 2 ||| 2\n")
    ref = write(tmp_path, "r", "a dog runs on the grass\n")
    code, _, err = run(["tune", "--nbest", path, "-r", ref, "--post-process", "subword_nmt", "-o", tmp_path / "w.json",
                        "--tokenize", "none", "--quiet"], capsys)
    assert code == 0, err
    meta = json.loads((tmp_path / "w.json").read_text())["meta"]
    assert meta["nbest_text"] == {"post_process": "subword_nmt", "unescape": "none"}
    assert meta["tuned_score"] == pytest.approx(100.0)  # "a dog ..." is the reference only once joined
