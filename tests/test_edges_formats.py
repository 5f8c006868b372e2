"""Format edges: fairseq output found past its log lines."""

from rerank.cli import main
from rerank.formats import DETECT_LINES, ReadReport, detect_format, read_nbest
from tests.test_formats import FAIRSEQ

GOOD = "0 ||| a b ||| f= 1 g= 2 ||| 3\n0 ||| a c ||| f= 2 ||| 2\n1 ||| d ||| f= 0 g= 1 ||| 1\n"
LOG = ("2024-05-01 10:00:00 | INFO | fairseq_cli.generate | Namespace(beam=5, nbest=2, path='x.pt')\n"
       "2024-05-01 10:00:01 | INFO | fairseq.data.data_utils | loaded 2 examples from: test.de-en.de\n")


def run(args, capsys):
    code = main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


# --- fairseq output that starts with log lines ---------------------------------------------------

def test_fairseq_found_past_log_lines_and_the_skip_is_said(tmp_path, capsys):
    path = write(tmp_path, "gen.out", LOG + "\n" + FAIRSEQ)
    report = ReadReport()
    assert detect_format(path, report) == "fairseq"
    assert report.notes == ["read as fairseq output: skipped 3 log line(s) before the first S-/T-/H-/D-/P- line"]
    code, out, err = run(["convert", path, "-o", "-"], capsys)
    assert code == 0
    assert out.splitlines() == ["0 ||| two men . ||| nmt= -0.5 ||| -0.5", "1 ||| a dog runs . ||| nmt= -0.25 ||| -0.25",
                                "1 ||| a dog is running . ||| nmt= -0.75 ||| -0.75"]
    assert f"note: {path}: read as fairseq output: skipped 3 log line(s)" in err


def test_fairseq_found_by_a_p_line_and_plain_stays_plain(tmp_path):
    assert detect_format(write(tmp_path, "p.out", "log\nP-0\t-0.1 -0.2\nH-0\t-0.3\tx\n")) == "fairseq"
    assert detect_format(write(tmp_path, "plain.txt", "a man rides\nH-0 is no fairseq line without a tab\n")) == "plain"
    assert detect_format(write(tmp_path, "moses", "\n" + GOOD)) == "moses"
    late = write(tmp_path, "late.out", "log\n" * DETECT_LINES + FAIRSEQ)  # beyond where detection looks
    assert detect_format(late) == "plain" and read_nbest(late, "fairseq").n_sentences == 2
