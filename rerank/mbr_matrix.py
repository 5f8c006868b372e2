"""The MBR utility matrix, saved and reused (`MBROptions.matrix`, `--mbr-matrix DIR`).

Exact MBR's cost is the utility of every (hypothesis, pseudo-reference) pair of each list; the
decision over those numbers (the temperature's posterior, a reference limit, candidates, another
decoder) is cheap. With a matrix folder the first exact run saves every list's full matrix
(hypotheses x pseudo-references: every hypothesis of the list, in the list's order, both ways)
and a later run with the same lists and utility reads it instead of scoring any pair: the exact
method, or a decoder that scores pairs (c2f, pruning, probabilistic: `READS`), which reads a
matrix but writes none (it would have to score every pair).

The folder (docs/features.md, "The utility matrix", says the same):

    DIR/index.json          written last, atomically: the folder's table of contents
    DIR/block-000000.npy    one per block of whole lists that mbr_scores scored, written as it goes

Each block file is a NumPy .npy array, 1-D float64 (np.load(path, mmap_mode="r") maps it without
reading it): the lists' row-major n x n matrices one after another, U[i, j] = U(h_i, h_j) of the
list's rows i and j (counted from the list's first row), higher is better (a lower-is-better
metric is already oriented, as the feature uses it). index.json is

    {"format": "rerank-mbr-matrix/1", "dtype": "float64",
     "signature": {"utility": NAME, "class": MODULE.CLASS, "lowercase": BOOL,
                   "options": {...}  (a text utility's settings) | "model_sha256": HEX (a model utility's)},
     "lists": [{"file": "block-000000.npy", "start": OFFSET, "n": ROWS, "sha256": HEX}, ...]}

one entry per list of the n-best, in order: its matrix is file[start : start + n * n]. `sha256`
is of the JSON array [source or null, text, text, ...] of the list's hypotheses as compared
(lowercased when `lowercase`) and of its source when the utility reads sources. A run reads the
folder when it has an index, and refuses in one line naming the file when the signature, the
number of lists, a list's size or its digest differ, or a block file is missing or short; without
an index (a new folder, or a run killed before the end: its block files are left over) it writes
the matrix afresh, removing old block files first. One writer at a time (rerank.io.output_lock on
the index).
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import logging
import os
from collections.abc import Iterable, Sequence

import numpy as np

from rerank.errors import InputError
from rerank.io import atomic_write, output_lock, read_json_object

log = logging.getLogger(__name__)

FORMAT = "rerank-mbr-matrix/1"
INDEX = "index.json"
SCALARS = (str, int, float, bool, type(None))
MATRIX = ("matrix",)   # the option the messages name (the command line says its flag)


def utility_signature(name: str, utility: object, lowercase: bool = False) -> dict:
    """What the matrix's numbers depend on besides the texts: the utility's name and class,
    whether texts are lowercased, and a model utility's model (sha256 of its files,
    rerank.score_cache.model_digest) or a text utility's settings (its public scalar attributes:
    bleu's tokeniser and smoothing, chrF's word order)."""
    cls = type(utility)
    signature: dict = {"utility": name, "class": f"{cls.__module__}.{cls.__qualname__}", "lowercase": bool(lowercase)}
    path = getattr(utility, "path", None)
    if getattr(cls, "needs_model", True) and isinstance(path, (str, os.PathLike)):
        from rerank.score_cache import model_digest

        signature["model_sha256"] = model_digest(os.fspath(path))
    else:
        signature["options"] = {key: value for key, value in sorted(vars(utility).items())
                                if not key.startswith("_") and isinstance(value, SCALARS)}
    return signature


WRITES = ("exact",)                                # scores every pair of each list: writes a matrix, or reads it
READS = ("exact", "c2f", "pruning", "probabilistic")   # score pairs (rerank.mbr_decoders.PairScorer): read one


def matrix_store(options, utility: object, lowercase: bool, sizes: Iterable[int]) -> MatrixStore | None:
    """The store of `options.matrix` (an MBROptions; None without a folder) for the lists of
    `sizes` scored by the `utility` object. A method that scores no pair (aggregate, centroid) is
    an InputError, and so is a decoder that scores some pairs (READS) with a folder holding no
    matrix: it would have to score every pair to write one."""
    if options.matrix is None:
        return None
    method = options.method
    if method not in READS:
        raise InputError(f"a utility matrix (matrix) is for the methods that score pairs ({', '.join(READS)}): the "
                         f"{method} method scores none", option="matrix")
    store = MatrixStore(options.matrix, utility_signature(options.utility, utility, lowercase), sizes)
    if method not in WRITES and not store.reading:
        raise InputError(f"the {method} method reads a utility matrix (matrix) but writes none (it scores some pairs alone): "
                         "write it with the exact method first", store.index_path, option="matrix")
    return store


def list_digest(texts: Sequence[str], source: str | None) -> str:
    """sha256 of one list's compared texts (and its source where the utility reads it)."""
    return hashlib.sha256(json.dumps([source, *texts], ensure_ascii=False).encode("utf-8", "surrogatepass")).hexdigest()


def describe(signature: object) -> str:
    return json.dumps(signature, sort_keys=True)


class MatrixStore:
    """One run's matrix folder: `with store:` holds its lock and, when writing, writes the index
    at the end (only if the run succeeded and every list with rows has its matrix). Between,
    `wrap` gives mbr_scores a utility whose `exact` answers from the folder."""

    def __init__(self, folder: str | os.PathLike, signature: dict, sizes: Iterable[int]):
        self.folder = os.fspath(folder)
        self.index_path = os.path.join(self.folder, INDEX)
        self.signature, self.sizes = signature, [int(n) for n in sizes]
        n_lists = len(self.sizes)
        if os.path.exists(self.folder) and not os.path.isdir(self.folder):
            raise InputError("the utility matrix folder (matrix) is not a folder", self.folder, option="matrix")
        self.reading = os.path.isfile(self.index_path)
        self.entries: list[dict | None] = [None] * n_lists
        self.arrays: dict[str, np.ndarray] = {}
        self.blocks = 0
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> MatrixStore:
        if not self.reading:
            try:
                os.makedirs(self.folder, exist_ok=True)
            except OSError as exc:
                raise InputError(f"cannot make the utility matrix folder: {exc.strerror}", self.folder) from None
        self._stack.enter_context(output_lock([self.index_path]))
        self.reading = os.path.isfile(self.index_path)   # another writer may have finished meanwhile
        if self.reading:
            self._read_index()
        else:
            for stale in glob.glob(os.path.join(glob.escape(self.folder), "block-*.npy")):
                os.unlink(stale)   # a killed run's: no index names them
        return self

    def __exit__(self, kind, value, traceback) -> None:
        try:
            if kind is None and not self.reading:
                self._write_index()
        finally:
            self._stack.close()

    def _read_index(self) -> None:
        index = read_json_object(self.index_path, "utility matrix index")
        if index.get("format") != FORMAT or not isinstance(index.get("lists"), list):
            raise InputError(f"not a utility matrix index of this version ({FORMAT}): remove the folder to rebuild it",
                             self.index_path)
        if index.get("signature") != self.signature:
            raise InputError(f"the utility matrix was made by {describe(index.get('signature'))}, not "
                             f"{describe(self.signature)}: use another folder (matrix) or remove this one",
                             self.index_path, mentions=MATRIX)
        if len(index["lists"]) != len(self.sizes):
            raise InputError(f"the utility matrix holds {len(index['lists'])} lists, the n-best {len(self.sizes)}: "
                             "use another folder (matrix) or remove this one", self.index_path, mentions=MATRIX)
        for k, (entry, n) in enumerate(zip(index["lists"], self.sizes)):
            if not isinstance(entry, dict) or entry.get("n") != n:
                raise InputError(f"list {k + 1} has {n} hypotheses, its utility matrix "
                                 f"{entry.get('n') if isinstance(entry, dict) else 'none'}: use another folder "
                                 "(matrix) or remove this one", self.index_path, mentions=MATRIX)
        self.entries = index["lists"]

    def _write_index(self) -> None:
        for k, n in enumerate(self.sizes):
            if self.entries[k] is None and n == 0:   # a list without rows holds no pair: an empty matrix
                self.entries[k] = {"file": None, "start": 0, "n": 0, "sha256": None}
        if any(entry is None for entry in self.entries):   # a decoder that scored no pair of some list
            log.warning("the utility matrix of %s is incomplete (some lists had no pair scored): no index written, "
                        "so the folder holds no matrix", self.folder)
            return
        index = {"format": FORMAT, "dtype": "float64", "signature": self.signature, "lists": self.entries}
        with atomic_write(self.index_path, grouped=False) as out:
            json.dump(index, out, ensure_ascii=False)

    def wrap(self, utility, first: int, offsets: np.ndarray) -> StoredUtility:
        """`utility` for the block of lists first, first + 1, ... (row `offsets` from 0)."""
        return StoredUtility(self, utility, first, np.asarray(offsets, dtype=np.int64))

    def array(self, name: str) -> np.ndarray:
        """A block file, memory-mapped; a missing or damaged one is an InputError naming it."""
        if name not in self.arrays:
            path = os.path.join(self.folder, os.path.basename(name))
            try:
                values = np.load(path, mmap_mode="r", allow_pickle=False)
            except (OSError, ValueError) as exc:
                raise InputError(f"cannot read this utility matrix block ({exc}): remove the folder to rebuild it",
                                 path) from None
            if values.ndim != 1 or values.dtype != np.float64:
                raise InputError("not a utility matrix block (a 1-D float64 array): remove the folder to rebuild it",
                                 path)
            self.arrays[name] = values
        return self.arrays[name]

    def read(self, first: int, sizes: np.ndarray, digests: list[str]) -> np.ndarray:
        """The block's lists' matrices, concatenated, checked against their sizes and texts."""
        parts = []
        for k, (n, digest) in enumerate(zip(sizes.tolist(), digests)):
            entry = self.entries[first + k] or {}   # every entry of a read index is a dict (_read_index)
            if n and entry.get("sha256") != digest:
                raise InputError(f"list {first + k + 1}'s texts are not those of the utility matrix: use another "
                                 "folder (matrix) or remove this one", self.index_path, mentions=MATRIX)
            if n:
                values, start = self.array(str(entry["file"])), int(entry["start"])
                if start < 0 or start + n * n > len(values):
                    raise InputError(f"this utility matrix block is shorter than the index says (list {first + k + 1})"
                                     ": remove the folder to rebuild it", os.path.join(self.folder, entry["file"]))
                parts.append(np.asarray(values[start:start + n * n]))
        return np.concatenate(parts) if parts else np.zeros(0)

    def write(self, first: int, sizes: np.ndarray, digests: list[str], values: np.ndarray) -> None:
        """Save a block's matrices (its file at once, atomically) and note them for the index."""
        name = f"block-{self.blocks:06d}.npy"
        self.blocks += 1
        with atomic_write(os.path.join(self.folder, name), "wb", grouped=False) as out:
            np.save(out, np.ascontiguousarray(values, dtype=np.float64), allow_pickle=False)
        start = 0
        for k, (n, digest) in enumerate(zip(sizes.tolist(), digests)):
            self.entries[first + k] = {"file": name, "start": start, "n": n, "sha256": digest if n else None}
            start += n * n


class StoredUtility:
    """A utility whose `exact` answers from the matrix folder: read there, or computed for every
    pair of the block once (the utility's own `exact` on every pair, so the values are the same
    numbers as without a folder), saved, and gathered at the pairs asked. Everything else is the
    utility's. `exact` takes the block's own texts and rows; `holds_matrix` tells the decoders'
    PairScorer to ask it so, and not to embed or subset the texts."""

    holds_matrix = True

    def __init__(self, store: MatrixStore, utility, first: int, offsets: np.ndarray):
        self._store, self._utility, self._first, self._offsets = store, utility, first, offsets
        self._values: np.ndarray | None = None

    def __getattr__(self, name: str):
        return getattr(self._utility, name)

    @property
    def expected_exact(self):
        """The utility's own exact sum (consensus.VectorUtility.expected_exact), from the folder's
        matrices through the same `matrix_expected`: the bits of a run without the folder. Absent
        (AttributeError) when the utility has none, so that exact MBR takes the pairs."""
        if not hasattr(self._utility, "expected_exact"):
            raise AttributeError("expected_exact")
        return self._expected_exact

    def _expected_exact(self, sources, texts, offsets, p) -> np.ndarray:
        from rerank.consensus import list_of_row, matrix_expected

        return matrix_expected(self.matrices(sources, texts, list_of_row(self._offsets)), self._offsets, p)

    def matrices(self, sources, texts, group) -> np.ndarray:
        """The block's lists' full matrices in pair_index's layout: read from the folder, or the
        utility's own `exact` on every pair of the block once, saved."""
        if self._values is None:
            from rerank.consensus import pair_index

            offsets = self._offsets
            sizes = np.diff(offsets)
            reads = getattr(self._utility, "needs_sources", True)
            digests = [list_digest(texts[offsets[k]:offsets[k + 1]], sources[k] if reads and sources else None)
                       for k in range(len(sizes))]
            if self._store.reading:
                self._values = self._store.read(self._first, sizes, digests)
            else:
                every_I, every_J, _ = pair_index(offsets)
                self._values = np.asarray(self._utility.exact(sources, texts, group, every_I, every_J),
                                          dtype=np.float64)
                self._store.write(self._first, sizes, digests, self._values)
        return self._values

    def exact(self, sources, texts, group, I, J) -> np.ndarray:
        offsets = self._offsets
        sizes = np.diff(offsets)
        pair_offsets = np.concatenate([[0], np.cumsum(sizes ** 2)]).astype(np.int64)
        values = self.matrices(sources, texts, group)
        g = np.asarray(group)[I]
        return values[pair_offsets[g] + (I - offsets[g]) * sizes[g] + (J - offsets[g])]
