"""Native METEOR 1.5 against the Meteor jar: stored jar statistics (always) and the live jar (with Java)."""

import os
import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest

from rerank.metrics import make_metric
from rerank.metrics.meteor import MeteorMetric, meteor_score, summable
from rerank.metrics.meteor.jar import MeteorJar, java_available
from rerank.metrics.meteor.normalize import normalize_line
from rerank.errors import InputError
from rerank.metrics.meteor.resources import MeteorResourceError, default_jar
from tests.cli_helpers import HANG_SECONDS

DATA = os.path.join(os.path.dirname(__file__), "data", "eval")
needs_java = pytest.mark.skipif(not java_available() or default_jar() is None, reason="no Java or no Meteor jar")
EN_ALL = ("exact", "stem", "synonym", "paraphrase")


def lines(name):
    with open(os.path.join(DATA, name), encoding="utf-8") as fh:
        return fh.read().splitlines()


@pytest.fixture(scope="module")
def slice_jar(tmp_path_factory):
    """A Meteor distribution whose paraphrase table holds only the entries whose words all occur in
    the English test files (tests/data/eval/meteor/paraphrase-en.gz, cut from Meteor 1.5's table):
    on these files it aligns exactly like the full table (the stored jar statistics were made with
    the full table), and loads in a second instead of twenty."""
    jar = default_jar()
    if jar is None:
        pytest.skip("pycocoevalcap's meteor-1.5.jar is not installed")
    folder = tmp_path_factory.mktemp("meteor")
    (folder / "data").mkdir()
    shutil.copy(jar, folder / "meteor-1.5.jar")
    shutil.copy(os.path.join(DATA, "meteor", "paraphrase-en.gz"), folder / "data" / "paraphrase-en.gz")
    with pytest.MonkeyPatch.context() as env:  # the table's index is cached here, not in ~/.cache
        env.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
        yield str(folder / "meteor-1.5.jar")


@pytest.fixture(scope="module")
def meteor_en(slice_jar):
    return MeteorMetric("en", EN_ALL, resources=slice_jar)


@pytest.mark.parametrize("lang", ["en", "fr", "de"])
def test_normalizer_equals_jar_output(lang):
    """Expected lines were produced by the jar's own Normalizer (edu.cmu.meteor.util.Normalizer LANG true)."""
    metric = MeteorMetric(lang, ["exact"])
    src = lines("meteor/tricky.txt")
    expect = lines(f"meteor/tricky.norm.{lang}")
    assert [normalize_line(s, lang, metric.nonbreaking) for s in src] == expect


@pytest.mark.parametrize("hyp", ["cap1.de", "good.de.run1"])
def test_native_german_exact_stem_equals_stored_jar_stats(hyp):
    metric = MeteorMetric("de", ["exact", "stem"])
    native = metric.sentence_stats(lines(hyp), [lines("ref.de")])
    jar = summable(np.loadtxt(os.path.join(DATA, "meteor", f"{hyp}.jar-stats")))
    np.testing.assert_array_equal(native, jar)
    assert round(metric.score_from_stats(native.sum(0)) / 100, 4) == round(metric.score_from_stats(jar.sum(0)) / 100, 4)


@pytest.mark.parametrize("hyp", ["cap1.en", "good.en.run1"])
def test_native_english_all_modules_equals_stored_jar_stats(meteor_en, hyp):
    native = meteor_en.sentence_stats(lines(hyp), [lines("ref.en")])
    jar = summable(np.loadtxt(os.path.join(DATA, "meteor", f"{hyp}.jar-stats")))
    np.testing.assert_array_equal(native, jar)
    if hyp == "cap1.en":  # stem, synonym and paraphrase stages are really used on this slice
        assert native[:, 8:12].sum() > 0 and native[:, 12:16].sum() > 0 and native[:, 16:20].sum() > 0


@needs_java
def test_live_jar_agrees_with_native_german_and_english(meteor_en, slice_jar):
    ref_de, hyp_de = lines("ref.de")[:25], lines("cap2.de")[:25]
    native = MeteorMetric("de", ["exact", "stem"]).sentence_stats(hyp_de, [ref_de])
    jar_metric = MeteorMetric("de", ["exact", "stem"], backend="jar")
    jar = jar_metric.sentence_stats(hyp_de, [ref_de])
    np.testing.assert_array_equal(native, jar)
    ref_en, hyp_en = lines("ref.en")[:20], lines("cap2.en")[:20]
    native = meteor_en.sentence_stats(hyp_en, [ref_en, lines("cap3.en")[:20]])  # two references
    jar = MeteorJar(slice_jar, "en", EN_ALL).stats(hyp_en, [ref_en, lines("cap3.en")[:20]])
    np.testing.assert_array_equal(native, summable(jar))


@needs_java
def test_score_formula_equals_jar_eval():
    """The jar's EVAL command scores aggregated statistics; ours must give the same number."""
    stats = np.loadtxt(os.path.join(DATA, "meteor", "cap1.de.jar-stats"))
    metric = MeteorMetric("de", ["exact", "stem"])
    total = summable(stats).sum(0)
    request = "EVAL ||| " + " ".join(f"{x:g}" for x in stats[1]) + "\n"
    # one segment through EVAL (Meteor scores a single segment's statistics as given)
    out = subprocess.run(["java", "-jar", default_jar(), "-", "-", "-stdio", "-l", "de", "-m", "exact stem"],
                         input=request, capture_output=True, text=True, check=True).stdout.split()
    assert float(out[0]) == pytest.approx(meteor_score(stats[1], metric.params, metric.weights), abs=1e-12)
    # the whole corpus: the jar's default (non-stdio) scoring of the same files
    res = subprocess.run(["java", "-jar", default_jar(), os.path.join(DATA, "cap1.de"), os.path.join(DATA, "ref.de"),
                          "-l", "de", "-norm", "-m", "exact stem"], capture_output=True, text=True, check=True).stdout
    final = float([line for line in res.splitlines() if line.startswith("Final score:")][0].split()[-1])
    assert metric.score_from_stats(total) / 100 == pytest.approx(final, abs=1e-9)


def test_missing_resources_and_bad_options_are_clear():
    with pytest.raises(MeteorResourceError, match="paraphrase-de.gz"):
        MeteorMetric("de")  # default German modules include paraphrase, not shipped here
    with pytest.raises(InputError, match="unknown language"):
        MeteorMetric("xx")
    with pytest.raises(InputError, match="modules"):
        MeteorMetric("en", ["stem"])
    with pytest.raises(MeteorResourceError, match="synonym"):
        MeteorMetric("de", ["exact", "synonym"])
    metric = make_metric("meteor", lang="de", meteor_options={"modules": ["exact", "stem"]})
    assert "modules:exact+stem" in metric.signature() and "weights:1 0.8" in metric.signature()


def test_identical_and_empty_segments():
    metric = MeteorMetric("de", ["exact", "stem"])
    stats = metric.sentence_stats(["Ein Hund rennt .", "", "Hund"], [["Ein Hund rennt .", "Ein Hund", ""]])
    assert metric.score_from_stats(stats[0]) == pytest.approx(100.0)
    assert stats[0, 20] == 0  # a perfect segment adds no chunks when summed
    assert metric.score_from_stats(stats[1]) == 0.0 and metric.score_from_stats(stats[2]) == 0.0


# --- the jar's pipes: a fake "jar" (a Python script) that floods stderr ---------------------------

FLOODING_JAR = r"""
import sys
for n, line in enumerate(sys.stdin):
    assert line.startswith("SCORE ||| ")
    sys.stderr.write(f"log line {n} " * 6000 + "\n")          # ~80 kB per request, > 1 MB in all
    sys.stderr.flush()
    print(" ".join([str(n), str(len(line.split(" ||| ")))] + ["0"] * 21), flush=True)
"""

FAILING_JAR = r"""
import sys
sys.stdin.readline()
sys.stderr.write("warming up\n" * 40000)                        # 440 kB before the real message
sys.stderr.write("Error: unknown language code xx\n")
sys.exit(1)
"""


def _fake_jar(tmp_path, monkeypatch, script):
    """A MeteorJar whose command (built in MeteorJar.__init__ as `java -jar ...`) runs `script`."""
    import rerank.metrics.meteor.jar as jar_module

    path = tmp_path / "fake_meteor.py"
    path.write_text(script, encoding="utf-8")
    monkeypatch.setattr(jar_module, "java_available", lambda: True)
    jar = MeteorJar(str(tmp_path / "meteor-1.5.jar"), "en", ["exact"])
    jar.cmd = [sys.executable, str(path)]
    return jar


def _run_with_timeout(jar, call, seconds=HANG_SECONDS):
    """call() on a thread; a call still running after `seconds` (HANG_SECONDS: the fake answers at
    once, so only a deadlock lasts that long) is a deadlock: kill the fake, fail."""
    box = {}

    def target():
        try:
            box["value"] = call()
        except Exception as exc:  # noqa: BLE001 (handed to the test)
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        jar._proc.kill()
        pytest.fail(f"the Meteor jar call did not return within {seconds}s (pipe deadlock)")
    return box


def test_jar_stderr_flood_does_not_block(tmp_path, monkeypatch):
    jar = _fake_jar(tmp_path, monkeypatch, FLOODING_JAR)
    hyps, refs = [f"hyp {i}" for i in range(20)], [[f"ref {i}" for i in range(20)], [f"alt {i}" for i in range(20)]]
    box = _run_with_timeout(jar, lambda: jar.stats(hyps, refs))
    assert "error" not in box, box.get("error")
    stats = box["value"]
    assert stats.shape == (20, 23)
    np.testing.assert_array_equal(stats[:, 0], np.arange(20))    # answers in request order
    assert np.all(stats[:, 1] == 4)                              # SCORE + two references + hypothesis
    jar.close()


def test_jar_failure_keeps_the_end_of_stderr(tmp_path, monkeypatch):
    jar = _fake_jar(tmp_path, monkeypatch, FAILING_JAR)
    box = _run_with_timeout(jar, lambda: jar.stats(["a", "b", "c"], [["x", "y", "z"]]))
    error = box.get("error")
    assert isinstance(error, MeteorResourceError)
    assert "failed after 0 of 3 segments" in str(error)
    assert str(error).endswith("Error: unknown language code xx")
