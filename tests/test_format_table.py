"""The format table: one record per format feeds the readers, detection, the command line and the docs."""

import json
import re
from pathlib import Path

import pytest

from rerank.cli import build_parser
from rerank.errors import InputError
from rerank.formats import ReadReport, detect_format, format_names, formats, read_nbest, write_nbest
from rerank.formats.table import markdown_table
from tests.cli_helpers import run, write

DOCS = Path(__file__).parent.parent / "docs" / "formats.md"


def test_the_docs_table_is_the_records_table():
    text = DOCS.read_text(encoding="utf-8")
    found = re.search(r"<!-- formats-table: begin -->\n(.*?)<!-- formats-table: end -->", text, re.S)
    assert found and found.group(1) == markdown_table()


def _choices(command: str, flag: str) -> list[str]:
    sub = next(a for a in build_parser()._subparsers._group_actions[0].choices.items() if a[0] == command)[1]
    return list(sub._option_string_actions[flag].choices)


@pytest.mark.parametrize("command", ["info", "convert", "tune", "apply", "oracle", "features", "add-feature"])
def test_every_command_offers_every_format_and_its_options(command):
    assert _choices(command, "--format") == list(format_names())
    sub = build_parser()._subparsers._group_actions[0].choices[command]
    for record in formats().values():
        for option in record.options:
            assert option.flag in sub._option_string_actions, (command, option.flag)
    assert "--post-process" in sub._option_string_actions and "--unescape" in sub._option_string_actions
    if "--to" in sub._option_string_actions:
        assert _choices(command, "--to") == list(format_names(writable=True))


def test_the_help_names_every_layout(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["info", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    for name, record in formats().items():
        assert f"{name} ({' '.join(record.layout.split())})" in help_text


def test_a_read_only_format_is_not_written(tmp_path):
    nbest = read_nbest(write(tmp_path, "n", "0 ||| a ||| f= 1 ||| 1\n"))
    with pytest.raises(InputError, match="read only"):
        write_nbest(nbest, str(tmp_path / "o"), "sockeye")
    assert not (tmp_path / "o").exists()


# --- detection: each layout to its format, and nothing with structure read as plain ---------------------

LAYOUTS = {
    "moses": "0 ||| a man ||| tm= -1 -2 lm= -3 ||| -4\n",
    "joshua": "0 ||| a man ||| tm=-1 lm=-3 ||| -4\n",
    "marian": "0 ||| a man ||| F0= -1.5 ||| -0.75\n",
    "fairseq": "S-0\tein Mann\nH-0\t-0.5\ta man\n",
    "sockeye": json.dumps({"sentence_id": 1, "translation": "a man", "score": 0.5, "translations": ["a man", "man"],
                           "scores": [[0.5], [0.9]]}) + "\n",
    "jsonl": json.dumps({"id": 0, "hyp": "a man", "features": {"f": 1.0}}) + "\n",
    "opennmt": "a man\t-0.5\nman\t-0.9\n",
    "plain": "a man\nman\n",
}


@pytest.mark.parametrize("fmt", list(LAYOUTS))
def test_each_layout_is_detected_as_its_format(tmp_path, fmt):
    assert detect_format(write(tmp_path, "x", LAYOUTS[fmt])) == fmt


def test_every_built_in_format_has_a_detection_case():
    assert set(LAYOUTS) == {name for name, record in formats().items() if record.detect is not None}


@pytest.mark.parametrize("text", [
    '{"some": "json", "object": 1}\n',            # JSON lines of no known producer
    "a man\tsits down\n",                          # tabs, not a score
    "a man\t-0.5\nman\n",                          # a score on some lines only
    '{"translations": ["a"]\n',                    # broken JSON is not plain text either
    '[\n  {\n    "id": 1\n  }\n]\n',                  # pretty-printed JSON
])
def test_structure_no_reader_claims_is_one_clear_error(tmp_path, capsys, text):
    path = write(tmp_path, "x", text)
    code, _, err = run(["info", path], capsys)
    assert code == 2 and "cannot tell the n-best format" in err and "tried" in err and "--format" in err
    assert "plain" in err and err.count("\n") == 1


def test_plain_only_when_said_for_structured_text(tmp_path):
    path = write(tmp_path, "x", "a man\tsits down\n")
    assert read_nbest(path, "plain").hyps[0] == "a man\tsits down"
    assert detect_format(write(tmp_path, "y", '{"Hello," she said.}\n')) == "plain"  # braces, not JSON


def test_what_convert_writes_as_plain_reads_back_without_the_format(tmp_path, capsys):
    """Its side files say it is plain, whatever its text holds (tabs from fairseq, `{"` from jsonl)."""
    source = write(tmp_path, "fs.txt", 'H-0\t-0.5\ta\tb\nH-0\t-0.7\t{"k": 1}\nH-1\t-0.1\tc\n')
    out = tmp_path / "plain.txt"
    code, _, err = run(["convert", source, "--to", "plain", "-o", out], capsys)
    assert code == 0, err
    report = ReadReport()
    again = read_nbest(str(out), report=report)
    assert report.detected == "plain" and list(again.hyps) == ["a\tb", '{"k": 1}', "c"] and again.sizes.tolist() == [2, 1]


def test_a_guess_from_a_single_line_is_said(tmp_path, capsys):
    code, out, _ = run(["info", write(tmp_path, "x", LAYOUTS["jsonl"])], capsys)
    assert code == 0 and "format:      jsonl (detected)" in out and "guessed from the file's only line" in out
    code, out, _ = run(["info", write(tmp_path, "y", LAYOUTS["jsonl"]), "--format", "jsonl"], capsys)
    assert code == 0 and "format:      jsonl\n" in out and "guessed" not in out


def test_bare_lines_are_opennmt_when_a_list_size_is_given(tmp_path):
    path = write(tmp_path, "x", "a\nb\nc\nd\n")
    assert detect_format(path) == "plain"
    nbest = read_nbest(path, nbest_size=2)
    assert nbest.sizes.tolist() == [2, 2] and nbest.feature_names == []
