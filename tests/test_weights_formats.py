"""Weights in the formats users already have: JSON, Moses lines (repeated names continue a
group, as in mert-moses.pl's run*.dense), a moses.ini [weight] section, Joshua config."""

import pytest

from rerank.cli import main
from rerank.errors import InputError
from rerank.formats import read_nbest
from rerank.weights import read_weights, weight_vector
from tests.cli_helpers import write

JOSHUA_CONFIG = """\
feature-function = LanguageModel -lm_type kenlm -lm_order 5 -minimizing false -lm_file lm.gz
# tm = thrax pt 12 grammar.gz
tm = thrax -owner pt -maxspan 12 -path grammar.gz
mark_oovs=false
top_n = 10
feature-function = OOVPenalty

###### model weights
lm_0 1.2373676802179452
tm_pt_0 -2.4497429277910214   # a comment
WordPenalty -3.6942747832593694
OOVPenalty 1.0
"""

MOSES_INI = """\
[input-factors]
0

[feature]
KENLM name=LM0 factor=0 path=lm.arpa order=3
PhraseDictionaryMemory name=TranslationModel0 num-features=4 path=phrase-table input-factor=0 output-factor=0

[weight]
LM0= 0.5
TranslationModel0= 0.2 0.2 0.3 -0.1
WordPenalty0= -1

[threads]
4
"""

DENSE = """\
LM0= 0.5
TranslationModel0= 0.2
TranslationModel0= 0.2
TranslationModel0= 0.3
TranslationModel0= -0.1
WordPenalty0= -1
"""


def test_moses_ini_and_dense_file_give_the_group_columns(tmp_path):
    expected = {"LM0": 0.5, "TranslationModel0_0": 0.2, "TranslationModel0_1": 0.2, "TranslationModel0_2": 0.3,
                "TranslationModel0_3": -0.1, "WordPenalty0": -1.0}
    assert read_weights(write(tmp_path, "moses.ini", MOSES_INI)) == expected
    assert read_weights(write(tmp_path, "run1.dense", DENSE)) == expected
    assert list(read_weights(write(tmp_path, "run1.dense", DENSE))) == list(expected)  # file order
    # the same columns as the Moses n-best reader makes of `TranslationModel0= a b c d`
    nbest = read_nbest(write(tmp_path, "n.nbest", "0 ||| a ||| LM0= -3 TranslationModel0= 1 2 3 4 WordPenalty0= -1 ||| 0\n"))
    assert weight_vector(expected, nbest.feature_names).tolist() == [0.5, 0.2, 0.2, 0.3, -0.1, -1.0]


def test_joshua_config_weights_and_its_parameters_skipped(tmp_path):
    assert read_weights(write(tmp_path, "joshua.config", JOSHUA_CONFIG)) == {
        "lm_0": 1.2373676802179452, "tm_pt_0": -2.4497429277910214, "WordPenalty": -3.6942747832593694, "OOVPenalty": 1.0}
    assert read_weights(write(tmp_path, "j6.config", "top-n = 300\nweights = lm_0 1.5 tm_pt_0 -2\n")) == {"lm_0": 1.5, "tm_pt_0": -2.0}
    assert read_weights(write(tmp_path, "pairs", "lm_0=1.5 tm_pt_0=-2\n")) == {"lm_0": 1.5, "tm_pt_0": -2.0}
    assert read_weights(write(tmp_path, "hash", "a#b 2\n")) == {"a#b": 2.0}  # `#` starts a comment only as a token


def test_apply_reproduces_the_decoder_ranking_with_a_moses_ini(tmp_path, capsys):
    lines = ("0 ||| a ||| tm= 1 0 lm= -2 ||| 0\n0 ||| b ||| tm= 0 1 lm= -1 ||| 0\n"
             "1 ||| c ||| tm= 0 0 lm= 0 ||| 0\n1 ||| d ||| tm= 2 2 lm= -9 ||| 0\n")
    nbest = write(tmp_path, "n.nbest", lines)
    ini = write(tmp_path, "moses.ini", "[weight]\ntm= 1 -1\nlm= 0.5\n")
    assert main(["apply", nbest, "-w", ini, "-o", str(tmp_path / "best")]) == 0
    # a: 1 - 1 = 0, b: -1 - 0.5 = -1.5; c: 0, d: 0 - 4.5
    assert (tmp_path / "best").read_text() == "a\nc\n"


BAD = [
    ("tm= 1 2\ntm_0= 3\n", r"w:2: weight 'tm_0' given twice \(first on line 1, as a column of the group 'tm'\)"),
    ("tm_1 3\ntm= 1 2\n", r"w:2: weight 'tm_1' given twice \(first on line 1\)"),
    ("a 1\na 2\n", r"w:2: weight 'a' given twice \(first on line 1\)"),
    ("a= 1\nb=\n", r"w:2: weight 'b' has no value"),
    ("a= 1 x\n", r"w:1: weight of 'a': 'x' is not a number"),
    ("a= 1e400\n", r"w:1: weight of 'a': 1e400 is too large for a 64-bit float"),
    ("a nan\n", r"w:1: weight of 'a' is nan"),
    ("hello world again\n",
     r"w:1: cannot read 'hello world again' as weights \(weights formats: JSON .*moses.ini \[weight\] section.*Joshua config"),
    ("[feature]\nKENLM\n", r"w: a moses.ini-style file without a \[weight\] section \(weights formats: JSON"),
    ("[weight]\nLM0 0.5\n", r"w:2: expected `name= v1 v2` in the \[weight\] section"),
    ("# only a comment\n\n", r"w: no weights found \(weights formats: JSON"),
    ("top_n = 10\nmark_oovs=false\n", r"w: no weights found"),
    ("[weight]\n\n[threads]\n4\n", r"w: no weights found"),
    ("", r"w: empty weights file"),
    ('{"a": "x"}', r"w: weight of 'a' is not a finite number"),
]


@pytest.mark.parametrize("text,message", BAD)
def test_bad_weights_name_file_line_and_the_formats(tmp_path, text, message):
    with pytest.raises(InputError, match=message):
        read_weights(write(tmp_path, "w", text))

