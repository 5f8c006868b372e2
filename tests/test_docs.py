"""The documentation runs: every shell block of README.md, docs/*.md and docs/results/*.md.

One test per Markdown file. Its fenced blocks tagged ```sh, ```bash, ```shell or ```console are
taken in order and each runs as `bash -e -c BLOCK` in one fresh temporary folder per file, so a
later block may use the files an earlier block of the same file wrote; shell variables do not
carry over (each block is its own bash process, so a reader can start at any block that has the
files it needs). ```console blocks: a line starting with `$ ` is a command (a line ending in `\\`
continues it), every other line is output and is not run. Blocks tagged anything else (text,
toml, python, json) are shown, not run.

The temporary folder stands for the repository root, from which a reader copies the blocks
into a shell: it holds `rerank/data`, a copy of the data the package ships (Multi30k En→De
n-best lists, sources and references in rerank/data/multi30k, the embedding model
rerank/data/models/mlmme-small.pt, the Joshua example rerank/data/examples), with the Multi30k
files cut to their first DOC_SENTENCES sentences (the commands are the reader's, the data
smaller: every block still runs every code path it shows), so the docs give
paths relative to the repository root (`rerank/data/multi30k/val.en.gz`), and a block cannot
write into the repository. PATH starts with the bin folder of the Python running the tests, so
`rerank` is the installed command and `python` the Python running the tests (a `python - <<'EOF'`
block runs a script: docs/api.md); torch and BLAS get one thread, matplotlib no display.

Nothing a block prints is compared (scores move when the code or the data change): a block
passes when it exits with status 0, however long it takes (no block has a time limit: a loaded
machine only makes it slower; a block that hangs is ended after HANG_SECONDS, half an hour, so
that it cannot stall the suite, and its stdin is empty, so that none waits for input). The whole
test takes a few minutes of CPU, most of it the start-up of the commands and the training of the
tiny models of docs/models.md, docs/nmt.md and docs/embeddings.md; each block takes seconds. A
block that needs more (tens of seconds on a quiet machine) belongs in a ```text block with a
sentence saying why it is not run (hours of training, a GPU, data that does not ship, a study too
long for the suite), its full command kept, or is shrunk to a real but small case.

So that no command escapes: a fence must name its language (sh to run it, text to only show
it), and a command must not sit in an indented code block, which no test would run.
"""

import gzip
import itertools
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cli_helpers import HANG_SECONDS

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = Path("rerank") / "data"  # what a doc block may read, relative to the repository root
RUN_LANGS = {"sh", "bash", "shell", "console"}
# The blocks run on the first 300 sentences of each shipped Multi30k file (of 1,014 val and 1,000
# test_2016): the same commands a reader runs, on data small enough for the suite; 300 is the
# largest slice a block takes (docs/api.md's `select_sentences(range(300))`).
DOC_SENTENCES = 300
OPENING = re.compile(r"^( {0,3})(`{3,}|~{3,})[ \t]*([^\s`]*)")
INDENTED_COMMAND = re.compile(r"^(?: {4,}|\t)\$? ?(rerank|torchrun|python3?|pip|make)\s")


@dataclass
class Block:
    lang: str
    line: int  # 1-based line of the opening fence
    text: str

    @property
    def runnable(self) -> bool:
        return self.lang in RUN_LANGS

    def script(self) -> str:
        return console_commands(self.text) if self.lang == "console" else self.text


def fenced_blocks(markdown: str) -> list[Block]:
    """The fenced code blocks of a Markdown text, in order (CommonMark fences: ``` or ~~~, up to
    three spaces of indentation, closed by a fence of the same character at least as long)."""
    blocks, lines, i = [], markdown.splitlines(), 0
    while i < len(lines):
        match = OPENING.match(lines[i])
        if not match:
            i += 1
            continue
        fence, start = match.group(2), i
        closing = re.compile(r"^ {0,3}" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}[ \t]*$")
        i += 1
        while i < len(lines) and not closing.match(lines[i]):
            i += 1
        blocks.append(Block(match.group(3).lower(), start + 1, "\n".join(lines[start + 1:i]) + "\n"))
        i += 1
    return blocks


def console_commands(text: str) -> str:
    """The commands of a console transcript: `$ ` lines and their `\\` continuations."""
    commands, continued = [], False
    for line in text.splitlines():
        if continued:
            commands.append(line)
        elif line.startswith("$ "):
            commands.append(line[2:])
        else:
            continue
        continued = line.rstrip().endswith("\\")
    return "\n".join(commands) + "\n"


def hidden_commands(markdown: str) -> list[str]:
    """Code the test would not run although it looks like it should: untagged fences, and
    commands in indented code blocks (outside fences)."""
    problems, fenced = [], set()
    for block in fenced_blocks(markdown):
        fenced.update(range(block.line, block.line + block.text.count("\n") + 2))
        if not block.lang:
            problems.append(f"line {block.line}: a fence without a language: tag it sh (run by "
                            "tests/test_docs.py) or text (shown only, with a sentence saying why)")
    for number, line in enumerate(markdown.splitlines(), start=1):
        if number not in fenced and INDENTED_COMMAND.match(line):
            problems.append(f"line {number}: a command in an indented code block is never run: "
                            f"put it in a sh block (or a text block saying why not): {line.strip()}")
    return problems


def markdown_files() -> list[str]:
    paths = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
             *sorted((ROOT / "docs" / "results").glob("*.md"))]
    return [p.relative_to(ROOT).as_posix() for p in paths]


def block_env() -> dict:
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MPLBACKEND="Agg")
    env["PYTHONSAFEPATH"] = "1"  # `python -` blocks: the folder's rerank/ (data only) must not hide the package
    env.pop("PYTHONPATH", None)
    return env


@pytest.fixture(scope="module")
def shipped(tmp_path_factory) -> Path:
    """A copy of the shipped data, at the path it has in the repository, with every Multi30k text
    and n-best list cut to its first DOC_SENTENCES sentences."""
    root = tmp_path_factory.mktemp("shipped")
    shutil.copytree(ROOT / SHIPPED, root / SHIPPED)
    for path in sorted((root / SHIPPED / "multi30k").glob("*.gz")):
        cut_to_first_sentences(path, DOC_SENTENCES)
    return root / SHIPPED.parts[0]


def cut_to_first_sentences(path: Path, n: int) -> None:
    """Keep the first n sentences of a gzipped text file (n lines) or Moses n-best list (the lines
    of sentence ids 0..n-1, which come first)."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        lines = f.readlines()
    if " ||| " in lines[0]:
        kept = list(itertools.takewhile(lambda line: int(line.split(" ||| ", 1)[0]) < n, lines))
    else:
        kept = lines[:n]
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.writelines(kept)


def run_block(block: Block, cwd: Path, env: dict) -> str | None:
    """Run one block (stdin empty); a description of its failure, or None."""
    try:
        result = subprocess.run(["bash", "-e", "-c", block.script()], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                capture_output=True, text=True, timeout=HANG_SECONDS)
    except subprocess.TimeoutExpired:
        return f"still running after {HANG_SECONDS // 60} minutes: it hangs"
    if result.returncode == 0:
        return None
    return (f"exit status {result.returncode}\n--- stderr (end):\n"
            f"{result.stderr[-3000:]}\n--- stdout (end):\n{result.stdout[-1500:]}")


# The docs whose blocks run the models or the PRO tuner (torch, scikit-learn): their cases are marked `neural`.
NEURAL_DOCS = {"README.md", "docs/embeddings.md", "docs/formats.md",
               "docs/models.md", "docs/nmt.md", "docs/quickstart.md", "docs/tuning.md"}


# The docs whose blocks take longest (about half of this file's time) run in tests/test_docs_heavy.py,
# so that `make test`'s `--dist loadfile` can give them a worker of their own.
HEAVY_DOCS = ("docs/models.md", "docs/formats.md", "docs/embeddings.md")


def doc_params(names) -> list:
    """The docs as test parameters, those of NEURAL_DOCS marked `neural`."""
    return [pytest.param(name, marks=pytest.mark.neural) if name in NEURAL_DOCS else name for name in names]


@pytest.mark.parametrize("name", doc_params(n for n in markdown_files() if n not in HEAVY_DOCS))
def test_doc_shell_blocks_run(name, shipped, tmp_path):
    check_doc_blocks(name, shipped, tmp_path)


def check_doc_blocks(name: str, shipped: Path, tmp_path: Path) -> None:
    """Every runnable block of the doc `name` runs, in order, in a folder like the repository root
    with the cut shipped data; no command hides outside a block; nothing is left untracked."""
    markdown = (ROOT / name).read_text(encoding="utf-8")
    (tmp_path / shipped.name).symlink_to(shipped, target_is_directory=True)
    env, failures = block_env(), []
    for block in (b for b in fenced_blocks(markdown) if b.runnable):
        failure = run_block(block, tmp_path, env)
        if failure:
            failures.append(f"{name}:{block.line}: the {block.lang} block failed\n{block.text}{failure}")
            break  # later blocks may need this one's files
    failures += [f"{name}: {problem}" for problem in hidden_commands(markdown)]
    failures += [f"{name}: its blocks leave {', '.join(left)} in the repository root, and .gitignore does not cover "
                 "them" for left in [unignored(tmp_path, skip=(shipped.name, "rerank"))] if left]
    assert not failures, "\n\n".join(failures)


def unignored(folder: Path, skip=()) -> list[str]:
    """The entries a doc's blocks wrote into `folder` (the repository root to a reader) that the
    repository's .gitignore does not cover: running the docs from a clone leaves no untracked files."""
    made = [p.name + ("/" if p.is_dir() else "") for p in sorted(folder.iterdir()) if p.name not in skip]
    if not made:
        return []
    done = subprocess.run(["git", "check-ignore", "--no-index", "--stdin"], cwd=ROOT, input="\n".join(made),
                          capture_output=True, text=True)
    ignored = set(done.stdout.split())
    return [m for m in made if m not in ignored]


def test_the_main_docs_have_runnable_blocks():
    for name in ("README.md", "docs/quickstart.md", "docs/tuning.md", "docs/evaluation.md"):
        blocks = fenced_blocks((ROOT / name).read_text(encoding="utf-8"))
        assert any(b.runnable and "rerank " in b.script() for b in blocks), name


def test_block_extraction():
    doc = ("text\n```sh\nrerank info a\n```\n\n````bash\n```\nnested\n````\n~~~console\n"
           "$ rerank oracle a \\\n    -r b\nBLEU 12.3\n$ ls\nout\n~~~\n```\nbare\n```\n\n"
           "    rerank tune x -o w.json\n")
    blocks = fenced_blocks(doc)
    assert [(b.lang, b.line) for b in blocks] == [("sh", 2), ("bash", 6), ("console", 10), ("", 17)]
    assert blocks[1].text == "```\nnested\n"
    assert blocks[2].script() == "rerank oracle a \\\n    -r b\nls\n"
    problems = hidden_commands(doc)
    assert len(problems) == 2 and problems[0].startswith("line 17") and problems[1].startswith("line 21")
