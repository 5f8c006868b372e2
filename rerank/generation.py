"""Candidates from any model: `rerank generate` and `rerank.generate` (beam search or sampling).

One job, whatever the model: read the source lines, cut them into blocks of `block` sentences (the
unit of shards and of resumption), sort each block's sentences by length and fill batches to a
token budget, ask the backend for `n` candidates per sentence, batch by batch, merge the
duplicates of each sentence (`count`, the times a candidate was drawn; `keep_duplicates` keeps
every draw as a row of count 1), score every distinct candidate by forced decoding under the model
itself, and write the list in the sentences' own order (default: the lossless JSON lines) with its
settings beside it (OUT.config.json, `GENERATED_BY`). Each finished block is kept in OUT.blocks/
(`BlockStore`) until the output is written, so that a killed run, rerun with the same settings,
generates only the blocks it had not finished.

The columns of every row:
- `nmt`: log p(candidate | source) under the model, untempered and unwarped, EOS included: what
  forced decoding of the string gives, as the direct and channel features score it (the backend's
  own scoring: CTranslate2 `score_batch`, transformers logits, the project NMT's teacher forcing);
- `nmt_norm`: `nmt` divided by the scored tokens (EOS included);
- `count`: how many of the `n` draws gave this string (1 for a beam list's rows).
`total` is `nmt`. A sampled list's rows are sorted by `nmt` (ties: the earlier draw), a beam
list's keep the beam's order.

Backends are plug-ins of the entry-point group `rerank.generators` (GENERATORS, a
rerank.plugins.Registry): this distribution's `nmt`, `ct2` and `hf` live in rerank.nmt.generate,
so the core imports no model library. A backend is a `Backend` subclass (see it).

Reproducible: a batch's random seed is derived from `seed`, its block and its place in the block
(numpy's SeedSequence), and a batch is the same batch however the job is cut: `shard i/N` takes
whole blocks (its ids start at `id_offset`: give the shard's first sentence and `cat` of the shards
is the one-process file), and under torchrun the ranks share the blocks (whole blocks of the
one-process batching, rerank.distributed) and rank 0 writes the bytes one process writes.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rerank.errors import InputError
from rerank.options import (NONNEGATIVE_INT, PATH, POSITIVE, POSITIVE_INT, PROBABILITY, Check, at_most, float_check,
                            option, wait_option, with_fields)
from rerank.plugins import Registry, subclass_check
from rerank.progress import Progress, progress_bar

log = logging.getLogger(__name__)

PathLike = str | os.PathLike
SEARCHES = ("sample", "beam")
COLUMNS = ("nmt", "nmt_norm", "count")
GENERATED_BY = "rerank generate"   # the config's "tool": a list this job wrote (rerank.consensus reads it)
SHARD_FORM = Check("i/N with 1 <= i <= N (e.g. 2/8)", str, lambda v: _shard(v) is not None, "a shard")
TOP_P = float_check("a number in (0, 1]", lambda v: 0 < v <= 1)


def _shard(text: object) -> tuple[int, int] | None:
    """(i, N) of a shard `i/N` (1-based), or None when it is not one."""
    if not isinstance(text, str):
        return None
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        return None
    return (i, n) if 1 <= i <= n else None


def _backends() -> tuple[str, ...]:
    return GENERATORS.names()


def _writable() -> tuple[str, ...]:
    from rerank.formats.table import format_names

    return format_names(writable=True)


# The ceiling of `n` (rerank generate -n): one sentence's n draws are decoded side by side in one
# batch (a sentence is never split), so the decoder's states, the draws' token ids and the merged
# rows grow with n, and MBR over the list costs n^2 pairs. 100,000 is two orders of magnitude above
# the pools MBR studies sample (64-1,024: Freitag et al. 2023; mbrs) and leaves room for oracle
# studies; past it a single sentence's batch outgrows a 24 GB machine.
MAX_CANDIDATES = 100_000


@dataclass(frozen=True)
class GenerateOptions:
    """What `rerank.generate` does (the flags of `rerank generate`). Sampling draws `n` candidates
    per sentence from the model's next-token distributions, warped as the libraries warp them, in
    transformers' order: `temperature`, then `top_k`, then `top_p`, then `epsilon` (each None: off);
    beam search keeps the `n` best of a beam of `n`. A value that is wrong whatever the data is
    refused here, in the words the command line says."""

    model: str = option(None, "the model: a `rerank nmt train` run (nmt), a CTranslate2 directory (ct2) or a "
                        "transformers encoder-decoder directory (hf)", flag=("-m", "--model"), dest="model",
                        check=PATH, metavar="DIR", default_text="none: give one")
    backend: str = option("nmt", "what runs the model: nmt (this project's attention NMT), ct2 (CTranslate2's "
                          "translate_batch), hf (transformers' generate) or an installed plug-in's",
                          choices=_backends, metavar="NAME")
    n: int = option(8, "candidates per sentence: draws when sampling, the beam size and n-best size in beam search "
                    f"(at most {MAX_CANDIDATES:,})", flag="-n", dest="n", check=at_most(POSITIVE_INT, MAX_CANDIDATES),
                    metavar="N")
    search: str = option("sample", "sample (ancestral sampling, warped by the options below) or beam", choices=SEARCHES)
    temperature: float = option(1.0, "sampling: the logits are divided by T", check=POSITIVE, metavar="T")
    top_k: int | None = option(None, "sampling: only the K most probable next tokens", check=POSITIVE_INT, metavar="K",
                               default_text="off")
    top_p: float | None = option(None, "sampling: only the most probable next tokens whose mass reaches P (nucleus)",
                                 check=TOP_P, metavar="P", default_text="off")
    epsilon: float | None = option(None, "sampling: only next tokens of probability at least E, the most probable "
                                   "always kept (Hewitt et al. 2022; Freitag et al. 2023 sample with 0.02)",
                                   check=PROBABILITY, metavar="E", default_text="off")
    seed: int = option(0, "the seed of the draws (each batch's from it, its block and its place)",
                       check=NONNEGATIVE_INT, metavar="S")
    keep_duplicates: bool = option(False, "keep every draw as a row (count 1) instead of one row per distinct "
                                   "candidate with its count")
    max_length: int | None = option(None, "the longest candidate in tokens, EOS included", check=POSITIVE_INT,
                                    metavar="L", default_text="the backend's: nmt 2 x source + 5, ct2 256, hf the "
                                    "model's generation config")
    batch_tokens: int = option(8192, "tokens per batch: n x (source tokens x 2) summed over its sentences",
                               check=POSITIVE_INT, metavar="T")
    block: int = option(128, "sentences sorted by length and batched together; shards and resumption take whole "
                        "blocks", check=POSITIVE_INT, metavar="B")
    to: str = option("jsonl", "output n-best format", flag="--to", dest="to", choices=_writable, metavar="FORMAT")
    shard: str | None = option(None, "generate for shard i of N (e.g. 1/4): the i-th of N ranges of whole blocks",
                               check=SHARD_FORM, metavar="i/N", default_text="all of them")
    id_offset: int = option(0, "id of the first output sentence (a shard's first sentence keeps its ids, so that "
                            "`cat` of the shards is the unsharded output)", check=NONNEGATIVE_INT, metavar="K")
    device: str = option("cpu", "torch or CTranslate2 device", cli=False)
    threads: int = option(1, "CPU threads of the model", check=POSITIVE_INT, cli=False)
    wait: bool = wait_option()

    def __post_init__(self) -> None:
        sampling = {"temperature": self.temperature != 1.0, "top_k": self.top_k is not None,
                    "top_p": self.top_p is not None, "epsilon": self.epsilon is not None}
        given = [name for name, on in sampling.items() if on]
        if self.search == "beam" and given:
            raise InputError(f"{given[0]} is a sampling option; beam search takes none (search is beam)",
                             option=given[0])

    def settings(self) -> dict[str, Any]:
        """What decides the candidates (for the config and the resumption key): no paths, no device."""
        keep = ("backend", "n", "search", "temperature", "top_k", "top_p", "epsilon", "seed", "keep_duplicates",
                "max_length", "batch_tokens", "block")
        return {name: getattr(self, name) for name in keep}


class Backend:
    """A generation backend (entry-point group `rerank.generators`): made once per job from the
    model directory and the job's options (`device` and `threads` in them), it

    - `lengths(sources)`: the token count of each source, for the batching;
    - `generate(sources, seed)`: `n` candidate strings per source, in draw order when sampling,
      best first in beam search (a batch's whole work: one seed for the batch);
    - `score(sources, outputs)`: (log p(output_i | source_i) by forced decoding, EOS included and
      untempered, float64; the tokens scored, EOS included), pairs scored as one batch or in a
      batching of its own that depends on these pairs alone.

    `start_block(seed)` is called before a block's first batch: a backend whose random stream cannot
    be reseeded per call (CTranslate2's is its worker thread's) starts it anew there, so that a
    block draws the same in whichever process and after whichever block it runs.
    `refuses(options)` (a classmethod) names an option the backend cannot honour, before any work
    (CTranslate2 and epsilon), or None. `describe()` says what the config should record (versions,
    the maximum length in force)."""

    name = "backend"

    def __init__(self, model: str, options: GenerateOptions) -> None:
        self.model, self.options = model, options

    @classmethod
    def refuses(cls, options: GenerateOptions) -> str | None:
        return None

    def lengths(self, sources: Sequence[str]) -> list[int]:
        raise NotImplementedError

    def start_block(self, seed: int) -> None:
        return None

    def generate(self, sources: Sequence[str], seed: int) -> list[list[str]]:
        raise NotImplementedError

    def score(self, sources: Sequence[str], outputs: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        return {}


GENERATORS: Registry[type[Backend]] = Registry("rerank.generators", "generation backend",
                                               check=subclass_check("rerank.generators", "rerank.generation:Backend"))


@dataclass(frozen=True)
class Generated:
    """What `rerank.generate` did: the files written (none on a torchrun rank but rank 0), the
    sentence range [first, end) of the input it covered, its rows and the config it recorded."""

    paths: list[str]
    first: int
    end: int
    rows: int
    config: dict


def config_path(output: str) -> str:
    """The settings file beside an n-best output: OUT without its extension, plus .config.json
    (as `rerank eval` writes its table's)."""
    return os.path.splitext(output)[0] + ".config.json"


def generated_by(nbest_path: str | None) -> dict | None:
    """The config `rerank generate` wrote beside an n-best file, or None (no such file, another
    tool's, unreadable: the list is then what any list is)."""
    if not nbest_path or nbest_path == "-":
        return None
    path = config_path(nbest_path)
    try:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, ValueError):
        return None
    return config if isinstance(config, dict) and config.get("tool") == GENERATED_BY else None


def read_sources(path: str) -> list[str]:
    """The source lines; an empty file or an empty line is an InputError naming it."""
    from rerank.io import iter_lines

    lines = []
    for number, text in iter_lines(path):
        if not text.strip():
            raise InputError("empty source line: a candidate of nothing cannot be generated (remove or fill it)",
                             path, number)
        lines.append(text)
    if not lines:
        raise InputError("no source lines (the file is empty)", path)
    return lines


def shard_blocks(n_sentences: int, block: int, shard: str | None) -> tuple[int, int]:
    """The sentence range [start, end) of shard `i/N`: the i-th of N contiguous ranges of whole
    blocks (all of them for None)."""
    n_blocks = -(-n_sentences // block)
    i, n = (_shard(shard) if shard else None) or (1, 1)
    first, last = (i - 1) * n_blocks // n, i * n_blocks // n
    return min(first * block, n_sentences), min(last * block, n_sentences)


def batch_seed(seed: int, block: int, batch: int | None = None) -> int:
    """The seed of one batch of a block (numpy's SeedSequence of (seed, block, batch)), or of the
    block itself (batch None: `Backend.start_block`), so that batches draw independently and a
    batch draws the same wherever it runs."""
    entropy = [seed, block] if batch is None else [seed, block, batch + 1]
    return int(np.random.SeedSequence(entropy).generate_state(1, dtype=np.uint32)[0] >> 1)


def plan_blocks(lengths: Sequence[int], first: int, end: int, options: GenerateOptions) -> list[list[list[int]]]:
    """The batches (sentence indices) of every block of sentences [first, end): a block's
    sentences sorted by length, longest first, cut to `batch_tokens` (a sentence costs n x 2 x its
    tokens)."""
    from rerank.score_cache import token_batches

    blocks = []
    for a in range(first, end, options.block):
        b = min(a + options.block, end)
        costs = [options.n * 2 * max(1, lengths[i]) for i in range(a, b)]
        blocks.append([[a + i for i in batch] for batch in token_batches(costs, options.batch_tokens)])
    return blocks


def merge(outputs: list[str], keep_duplicates: bool) -> tuple[list[str], list[int]]:
    """(distinct candidates in first-draw order, the times each was drawn); with `keep_duplicates`
    every draw, count 1."""
    if keep_duplicates:
        return list(outputs), [1] * len(outputs)
    counts: dict[str, int] = {}
    for text in outputs:
        counts[text] = counts.get(text, 0) + 1
    return list(counts), list(counts.values())


def run_batch(backend: Backend, sources: Sequence[str], seed: int, options: GenerateOptions) -> list[list[tuple]]:
    """Per source of one batch, its rows (text, log p, scored tokens, count) in the list's order."""
    drawn = backend.generate(sources, seed)
    merged = [merge(outs, options.keep_duplicates) for outs in drawn]
    pairs = [(src, text) for src, (texts, _) in zip(sources, merged) for text in texts]
    distinct = list(dict.fromkeys(pairs))
    logp, tokens = backend.score([p[0] for p in distinct], [p[1] for p in distinct])
    found = {pair: (float(logp[k]), float(tokens[k])) for k, pair in enumerate(distinct)}
    result = []
    for src, (texts, counts) in zip(sources, merged):
        rows = [(text, *found[(src, text)], count) for text, count in zip(texts, counts)]
        if options.search == "sample":   # most probable first; ties keep the draw order (a stable sort)
            rows.sort(key=lambda row: -row[1])
        result.append(rows)
    return result


def _to_list(rows: Sequence[list[tuple]]):
    from rerank.nbest import NBestList

    hyps = [[r[0] for r in sentence] for sentence in rows]
    features = [np.array([[r[1], r[1] / r[2], r[3]] for r in sentence], dtype=np.float64).reshape(-1, 3)
                for sentence in rows]
    totals = [np.array([r[1] for r in sentence], dtype=np.float64) for sentence in rows]
    return NBestList.from_lists(hyps, features, list(COLUMNS), totals)


def generate(source: PathLike, output: PathLike, options: GenerateOptions | None = None, *,
             progress: Progress = False, meta: dict | None = None, **keywords: Any) -> Generated:
    """Write `n` candidates per line of the file `source` to `output` (see the module doc), and
    their settings to OUT.config.json; returns a `Generated`. `options`: a GenerateOptions, whose
    fields `keywords` replace (model=..., backend="ct2", search="sample", epsilon=0.02, n=64).

    Bad input (no model, an unknown backend, an empty source line, an option the backend cannot
    honour) is an InputError before anything is written; the outputs are written atomically, with
    the output's lock held (`wait`). `meta` (such as the command line) goes into the config."""
    from rerank import distributed
    from rerank.options import check_options
    from rerank.outputs import check_outputs, nbest_outputs

    o = with_fields(GenerateOptions, options, "generation option", **keywords)
    check_options(o, as_keywords=True)
    if o.model is None:
        raise InputError("a model is needed (model)", option="model")
    source, output, model = os.fspath(source), os.fspath(output), os.fspath(o.model)
    cls = GENERATORS.get(o.backend, option="backend")
    refused = cls.refuses(o)
    if refused:
        raise InputError(refused, option="backend")
    if not os.path.exists(model):
        raise InputError("no such model directory", model, option="model")
    outputs = [*nbest_outputs(output, o.to), None if output == "-" else config_path(output)]
    check_outputs(outputs, [source, model])
    with distributed.ranks():
        return distributed.checked(lambda: _generate(cls, source, output, model, outputs, o, progress, meta))


def _generate(cls: type[Backend], source: str, output: str, model: str, outputs: list, o: GenerateOptions,
              progress: Progress, meta: dict | None) -> Generated:
    """`generate` from its checks on, on every torchrun rank: the lock and the writing on rank 0."""
    from rerank import distributed
    from rerank.io import file_digest, output_lock

    main = distributed.is_main()
    progress = progress if main else False
    with output_lock(outputs if main else [], o.wait):
        lines = read_sources(source)
        first, end = shard_blocks(len(lines), o.block, o.shard)
        backend = cls(model, dataclasses.replace(o, device=distributed.local_device(o.device)))
        lengths = [0] * len(lines)
        lengths[first:end] = backend.lengths(lines[first:end])
        blocks = plan_blocks(lengths, first, end, o)
        first_block = first // o.block
        store = BlockStore(output, {**o.settings(), "model": os.path.abspath(model), "source": file_digest(source)})
        finished = distributed.on_main(lambda: store.finished(first_block, len(blocks)))
        if finished and main:
            log.warning("note: %d of %d blocks read back from %s (an earlier run with these settings)", len(finished),
                        len(blocks), store.folder)

        def work(a: int, b: int) -> list:
            results = []
            todo = [j for j in range(a, b) if first_block + j not in finished]
            with progress_bar(progress, f"{o.search} {o.n}", sum(len(blocks[j]) for j in todo), unit="batch") as bar:
                for j in range(a, b):
                    block = first_block + j
                    if block in finished:
                        results.append(finished[block])
                        continue
                    backend.start_block(batch_seed(o.seed, block))
                    rows = []
                    for k, batch in enumerate(blocks[j]):
                        rows.append(run_batch(backend, [lines[i] for i in batch], batch_seed(o.seed, block, k), o))
                        bar.update(1)
                    store.put(block, rows)
                    results.append(rows)
            return results

        weights = [sum(lengths[i] for batch in batches for i in batch) for batches in blocks]
        done = [rows for part in distributed.map_parts(work, len(blocks), weights) for rows in part]
        by_sentence: list = [None] * (end - first)
        for batches, block_rows in zip(blocks, done):
            for batch, rows in zip(batches, block_rows):
                for i, sentence_rows in zip(batch, rows):
                    by_sentence[i - first] = sentence_rows
        config = {"tool": GENERATED_BY, **o.settings(), "model": os.path.abspath(model), "source": os.path.abspath(source),
                  "sentences": [first, end], "shard": o.shard, "id_offset": o.id_offset, "format": o.to,
                  "columns": {"nmt": "log p(candidate | source), forced decoding, untempered, EOS included",
                              "nmt_norm": "nmt / scored tokens (EOS included)", "count": "draws of the candidate"},
                  "backend_settings": backend.describe(), **(meta or {})}
        nbest = _to_list(by_sentence)
        paths = _write(nbest, output, config, o) if main else []
        if main:
            store.remove()
    return Generated(paths, first, end, nbest.n_hyps, config)


class BlockStore:
    """The finished blocks of a job, kept beside its output (OUT.blocks/, one JSON file a block,
    written atomically as the block ends) until the output is written: a killed or failed run
    rerun with the same settings, model and source reads them back and generates only the rest.
    A block file of other settings (its key) is not read; none is kept for standard output."""

    def __init__(self, output: str, settings: dict) -> None:
        self.folder = None if output == "-" else output + ".blocks"
        self.key = json.dumps(settings, sort_keys=True)

    def _path(self, block: int) -> str:
        assert self.folder is not None
        return os.path.join(self.folder, f"block-{block:06d}.json")

    def finished(self, first: int, count: int) -> dict[int, list]:
        """{block: its rows per batch} of the blocks first..first+count-1 found with this key."""
        found: dict[int, list] = {}
        if self.folder is None or not os.path.isdir(self.folder):
            return found
        for block in range(first, first + count):
            try:
                with open(self._path(block), encoding="utf-8") as f:
                    kept = json.load(f)
            except (OSError, ValueError):
                continue
            if isinstance(kept, dict) and kept.get("key") == self.key:
                found[block] = [[[tuple(row) for row in sentence] for sentence in batch] for batch in kept["rows"]]
        return found

    def put(self, block: int, rows: list) -> None:
        from rerank.io import atomic_write

        if self.folder is None:
            return
        try:
            os.makedirs(self.folder, exist_ok=True)
            with atomic_write(self._path(block), grouped=False) as f:
                json.dump({"key": self.key, "rows": rows}, f)
        except (OSError, InputError) as exc:   # a checkpoint that cannot be written is a note, not a failure
            log.warning("note: block %d not kept for a rerun: %s", block, exc)

    def remove(self) -> None:
        import shutil

        if self.folder is not None and os.path.isdir(self.folder):
            shutil.rmtree(self.folder, ignore_errors=True)


def _write(nbest, output: str, config: dict, o: GenerateOptions) -> list[str]:
    from rerank.io import atomic_write, output_group
    from rerank.nbestfile import write_nbest_noted

    with output_group():
        paths = write_nbest_noted(nbest, output, o.to, first_id=o.id_offset)
        if output != "-":
            with atomic_write(config_path(output)) as f:
                json.dump(config, f, indent=1)
                f.write("\n")
            paths.append(config_path(output))
    return paths
