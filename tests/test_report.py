"""`rerank report`: the HTML page's numbers against sacrebleu and hand counts, self-containedness,
runs, segment scores and bad input."""

import html
import json
import logging
import os
import re
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sacrebleu.metrics import BLEU

from rerank.cli import main
from rerank.formats import read_nbest
from rerank.htmlreport import analysis
from rerank.htmlreport.page import word_diff
from rerank.evaluation import evaluate_systems

HERE = os.path.dirname(__file__)
JOSHUA = os.path.join(HERE, "data", "joshua-bn-en", "full")
NBEST = os.path.join(JOSHUA, "output.gold")
REF_FILES = [os.path.join(JOSHUA, f"reference.en.{k}") for k in range(4)]
REF_ARGS = [x for path in REF_FILES for x in ("-r", path)]
WEIGHTS = os.path.join(HERE, "data", "report", "joshua.weights.json")
LM_WEIGHTS = os.path.join(HERE, "data", "report", "joshua.lm.json")
EVAL = os.path.join(HERE, "data", "eval")


def read(path):
    with open(path, encoding="utf-8") as fh:
        return fh.read().splitlines()


REFS = [read(p) for p in REF_FILES]


def bleu_plus1(hyp, i):
    """Sentence BLEU+1 x 100 against the four references, by sacrebleu (add-1 smoothing of orders 2-4)."""
    logging.getLogger("sacrebleu").setLevel(logging.ERROR)
    return BLEU(smooth_method="add-k", smooth_value=1, effective_order=False).sentence_score(hyp, [r[i] for r in REFS]).score


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    d = tmp_path_factory.mktemp("report")
    nbest = read_nbest(NBEST)
    (d / "first.txt").write_text("".join(nbest.hyps[int(i)] + "\n" for i in nbest.offsets[:-1]), encoding="utf-8")
    assert main(["apply", NBEST, "-w", WEIGHTS, "-o", str(d / "best.txt"), "--quiet"]) == 0
    argv = ["report", *REF_ARGS, "-b", "first=" + str(d / "first.txt"), "best=" + str(d / "best.txt"),
            "--nbest", "lm=" + NBEST, "--weights", LM_WEIGHTS, "--metrics", "bleu,chrf", "--ar", "300",
            "--bootstrap", "100", "--examples", "5", "-o", str(d / "page.html"), "--quiet"]
    assert main(argv) == 0
    return d, (d / "page.html").read_text(encoding="utf-8"), argv


def test_the_page_is_self_contained(page):
    _, text, _ = page
    assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>")
    for forbidden in ("<link", "<script", "<img", "<iframe", "@import"):
        assert forbidden not in text, forbidden
    assert set(re.findall(r"url\((.)", text)) == {"#"}  # SVG clip paths inside the page
    assert all(h.startswith("#") for h in re.findall(r'href="([^"]*)"', text))  # links inside the page only
    assert not re.search(r'\bsrc=', text)
    # the delta plot, two bucket plots, one gain histogram per system, the oracle curve
    assert text.count("<svg") == 1 + 2 + 2 + 1
    for section in ("significance", "length", "words", "changes-1", "changes-2", "oracle", "signatures"):
        assert f'<section id="{section}">' in text


def test_significance_table_holds_the_eval_numbers(page, capsys):
    d, text, argv = page
    i = argv.index("--examples")
    assert main(["eval", *argv[1:i], "--to", "json", "--quiet"]) == 0
    res = json.loads(capsys.readouterr().out)
    table = text[text.index('<table id="significance-table">'):text.index("</table>")]
    for r in res["results"]:
        assert f"<td>{r['system']}</td>" in table and f"{r['score']:.2f}" in table
        if r["system"] != "first":
            assert f"[{r['delta_low']:+.2f}, {r['delta_high']:+.2f}]" in table
    command = re.search(r'<pre id="command">(.*?)</pre>', text, re.S).group(1)
    assert "report" in command and "--nbest lm=" in command
    assert "BLEU|nrefs:4" in text and "chrF2|nrefs:4" in text


def test_changed_sentences_are_counted_and_sorted_by_sacrebleu_gain(page):
    d, text, _ = page
    first, best = read(d / "first.txt"), read(d / "best.txt")
    changed = [i for i in range(len(first)) if first[i] != best[i]]
    gains = {i: bleu_plus1(best[i], i) - bleu_plus1(first[i], i) for i in changed}
    better = sorted((i for i in changed if gains[i] > 1e-9), key=lambda i: -gains[i])
    worse = sorted((i for i in changed if gains[i] < -1e-9), key=lambda i: gains[i])
    section = text[text.index('<section id="changes-1">'):text.index('<section id="changes-2">')]
    assert (f"{len(changed)} of 100 outputs differ from first: <span class=\"pos\">{len(better)} better</span>, "
            f"<span class=\"neg\">{len(worse)} worse</span>") in section
    shown = [int(x) - 1 for x in re.findall(r"sentence (\d+): gain", section)]
    assert shown == better[:5] + worse[:5]
    top = better[0]
    assert f"gain <span class=\"pos\">{gains[top]:+.2f}</span>" in section
    # the words that differ are marked in both outputs
    assert "<del>" in section and "<ins>" in section and "reference 4</span>" in section


MARKUP = re.compile(r'<del>(.*?)</del>|<ins>(.*?)</ins>|<span class="(moved|lost)"[^>]*>(.*?)</span>|([^<]+)')


def diff_words(markup):
    """(mark, word) of each word of one side of `word_diff`'s HTML: '' for a kept word, else del,
    moved, lost (baseline) or ins (system); the markup must be made of these elements only."""
    matches = list(MARKUP.finditer(markup))
    assert "".join(m.group(0) for m in matches) == markup
    words = []
    for m in matches:
        struck, inserted, cls, span, plain = m.groups()
        mark, text = (("del", struck) if struck is not None else ("ins", inserted) if inserted is not None
                      else (cls, span) if cls else ("", plain))
        words += [(mark, w) for w in html.unescape(text).split()]
    return words


def check_word_diff(base, system, refs):
    """`word_diff`'s properties: both sides reproduce their words in order, the kept words are the same
    on both sides, and a dropped baseline word is struck only when the references hold no more of it
    than the baseline's other occurrences (kept first) use: clipped counts, the largest in one reference."""
    left, right = map(diff_words, word_diff(" ".join(base), " ".join(system), [" ".join(r) for r in refs]))
    assert [w for _, w in left] == base and [w for _, w in right] == system
    assert {m for m, _ in left} <= {"", "del", "moved", "lost"} and {m for m, _ in right} <= {"", "ins"}
    assert [w for m, w in left if not m] == [w for m, w in right if not m]
    held = Counter()
    for r in refs:
        held |= Counter(r)
    count = {mark: Counter(w for m, w in left if m == mark) for mark in ("", "del", "moved", "lost")}
    brought = Counter(w for m, w in right if m == "ins")
    for w in set(base):
        protected = count["moved"][w] + count["lost"][w]
        room = max(0, held[w] - count[""][w])
        assert protected == min(room, protected + count["del"][w]), w  # never struck while the references have room
        assert count["moved"][w] == min(protected, brought[w]), w  # moved: the system brings it in again
        marks = [m for m, x in left if x == w and m]
        assert marks == sorted(marks, key=["moved", "lost", "del"].index), w  # the first occurrences protected
    return left, right


WORDS = st.lists(st.sampled_from(["a", "b", "c", "the", "&amp;", "<b>", 'q"']), max_size=12)


@settings(max_examples=300, deadline=None)
@given(base=WORDS, system=WORDS, refs=st.lists(WORDS, max_size=3))
def test_word_diff_never_strikes_a_reference_word_and_round_trips(base, system, refs):
    check_word_diff(base, system, refs)


def test_word_diff_of_an_output_equal_to_its_reference_strikes_only_words_outside_it():
    """The issue's sentence: the system equals its reference, the baseline holds the same words in
    another order plus one wrong word: that word is the only one struck, the others are moved."""
    ref = "on the mat sat the cat".split()
    left, right = check_word_diff("the big cat sat on the mat".split(), ref, [ref])
    assert [w for m, w in left if m == "del"] == ["big"] and {m for m, _ in left} == {"", "del", "moved"}
    left, _ = check_word_diff("the the the cat".split(), "the cat".split(), ["the cat".split(), "the the".split()])
    assert [m for m, _ in left] == ["lost", "del", "", ""]  # "the" twice in one reference: the kept one and one more


def test_the_pages_examples_strike_no_reference_word(page):
    _, text, _ = page
    examples = re.findall(r'<div class="example (?:better|worse)">(.*?</div>)</div>', text)
    assert len(examples) == 20
    for example in examples:
        lines = re.findall(r'<div class="line"><span class="label">[^<]*</span> (.*?)</div>', example)
        refs, (left, right) = [html.unescape(r).split() for r in lines[:-2]], lines[-2:]
        assert len(refs) == 4
        base, system = [[w for _, w in diff_words(side)] for side in (left, right)]
        check_word_diff(base, system, refs)


def test_length_buckets_equal_sacrebleu_on_the_bucket_sentences():
    base, other = read(os.path.join(EVAL, "cap1.en")), read(os.path.join(EVAL, "cap2.en"))
    refs = [read(os.path.join(EVAL, "ref.en")), read(os.path.join(EVAL, "cap3.en"))]
    table = evaluate_systems(refs, [base], {"other": [other]}, metrics=["bleu", "ter"], ar=10, bootstrap=0)
    tok = BLEU().tokenizer
    buckets = analysis.length_buckets(table, refs, tok, edges=(10, 12))
    lengths = [(len(tok(a).split()) + len(tok(b).split())) / 2 for a, b in zip(*refs)]
    ids = [0 if x < 10 else 1 if x < 12 else 2 for x in lengths]
    assert buckets.counts == [ids.count(b) for b in range(3)] and min(buckets.counts) > 0
    for b in range(3):
        sel = [i for i, x in enumerate(ids) if x == b]
        for name, hyps in (("baseline", base), ("other", other)):
            sub = [hyps[i] for i in sel]
            expect = BLEU().corpus_score(sub, [[r[i] for i in sel] for r in refs]).score
            assert buckets.scores["bleu"][name][b] == pytest.approx(expect)
        assert buckets.deltas["ter"]["other"][b] == pytest.approx(
            buckets.scores["ter"]["baseline"][b] - buckets.scores["ter"]["other"][b])  # TER: lower is better
    assert buckets.labels == ["<10", "[10,12)", ">=12"]


def test_word_f_measure_by_frequency_by_hand():
    refs = [["a b c", "a a d"]]
    outputs = {"base": [["a b x", "a d d"]], "sys": [["a b c", "a a d"]]}
    freq = analysis.word_counts(refs[0], str.strip)
    assert freq == Counter({"a": 3, "b": 1, "c": 1, "d": 1})
    got = analysis.word_buckets(outputs, "base", refs, str.strip, freq, edges=(1, 2, 3))
    assert got.labels == ["<1", "1", "2", ">=3"] and got.counts == [0, 3, 0, 3]
    # freq 1 (b, c, d): matched b, d = 2 of 3 reference and 3 output words; a: matched 2 of 3 and 2
    assert got.scores[analysis.WORD_F]["base"] == pytest.approx([None, 100 * 4 / 6, None, 100 * 4 / 5])
    assert got.scores[analysis.WORD_F]["sys"] == pytest.approx([None, 100.0, None, 100.0])
    assert got.deltas[analysis.WORD_F]["sys"] == pytest.approx([None, 100 / 3, None, 20.0])


def test_oracle_curve_ends_at_the_oracle_and_starts_at_the_one_best(page):
    d, text, _ = page
    from rerank.oracles import oracle

    nbest = read_nbest(NBEST)
    ks, values = analysis.oracle_curve(nbest, REFS)
    assert ks == list(range(1, int(nbest.sizes.max()) + 1)) and values[-1] == pytest.approx(oracle(nbest, REFS).score)
    first = read(d / "first.txt")
    assert values[0] == pytest.approx(BLEU().corpus_score(first, REFS).score)
    # the page's curve is over the lists ranked by the lm weights: k = 1 is that system's 1-best
    lm = json.loads(open(LM_WEIGHTS).read())
    scores = nbest.features[:, nbest.feature_names.index("lm_0")] * lm["lm_0"]
    one_best = [nbest.hyps[lo + int(np.argmax(scores[lo:hi]))] for lo, hi in zip(nbest.offsets[:-1], nbest.offsets[1:])]
    row = re.search(r"<td>lm</td><td>([\d.]+)</td>", text).group(1)
    assert float(row) == pytest.approx(BLEU().corpus_score(one_best, REFS).score, abs=0.006)


def test_runs_and_segment_scores(tmp_path):
    rng = np.random.default_rng(1)
    cols = {"base": rng.uniform(0, 1, 40), **{f"good.run{r}": rng.uniform(0, 1, 40) for r in (1, 2, 3)}}
    tsv = tmp_path / "c.tsv"
    tsv.write_text("\t".join(cols) + "\n" + "".join("\t".join(str(v[i]) for v in cols.values()) + "\n"
                                                   for i in range(40)))
    out = tmp_path / "r.html"
    assert main(["report", "-r", os.path.join(EVAL, "ref.en"), "-b", "base=" + os.path.join(EVAL, "cap1.en"),
                 "good=" + os.path.join(EVAL, "good.en"), "--segment-scores", f"comet={tsv}", "--metrics", "comet,bleu",
                 "--ar", "100", "--bootstrap", "20", "-o", str(out), "--quiet"]) == 0
    text = out.read_text(encoding="utf-8")
    assert "runs: base 1, good 3" in text and "(first run of each)" in text
    gains = cols["good.run1"] - cols["base"]
    changed = np.array(read(os.path.join(EVAL, "cap1.en"))) != np.array(read(os.path.join(EVAL, "good.en.run1")))
    top = int(np.argmax(np.where(changed, gains, -9)))
    assert re.search(r"sentence (\d+): gain", text).group(1) == str(top + 1)
    assert f"{gains[top]:+.4f}" in text and "by sentence-level comet" in text


@pytest.mark.parametrize("extra,message", [
    (["--sentence-metric", "ter"], "--sentence-metric ter: not one of the scored metrics (bleu)"),
    (["--length-buckets", "5,3"], "--length-buckets '5,3': expected increasing integers >= 1"),
    (["--freq-buckets", "a"], "--freq-buckets 'a': expected increasing integers"),
    (["-o", os.path.join(EVAL, "cap1.en")], "the output is also the input"),
])
def test_bad_input_exits_2_and_writes_nothing(tmp_path, capsys, extra, message):
    out = tmp_path / "r.html"
    argv = ["report", "-r", os.path.join(EVAL, "ref.en"), "-b", os.path.join(EVAL, "cap1.en"),
            os.path.join(EVAL, "cap2.en"), "--metrics", "bleu", "--ar", "10", "--bootstrap", "0", *extra]
    code = main(argv + ([] if "-o" in extra else ["-o", str(out)]))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("rerank report: error: ") and message in err[0], err
    assert not out.exists() and os.path.getsize(os.path.join(EVAL, "cap1.en")) > 0
