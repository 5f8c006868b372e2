"""Helpers shared by the command-line tests: run `rerank` in-process, write small input files."""

from rerank.cli import main


def run(args, capsys):
    """(exit status, stdout, stderr) of `rerank ARGS` run in-process."""
    code = main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def write(tmp_path, name, text):
    """Write `text` to tmp_path/name (UTF-8); returns the path as a string."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)
