"""The embedding model's inference on numpy: the torch Encoder's vectors without torch.

A trained MLMME/VSE encoder (embeddings.model) is, per language, a word embedding, a one-layer
GRU whose last state is the sentence vector, an optional linear projection to the joint space,
then L2 normalisation; images are an affine map, normalised. None of it needs autograd, so
`NumpyEncoder` runs it in float32 numpy: `s_s`, `s_i` and the `mlmme` MBR utility work in the core
install, and `rerank features -m` does not pay torch's import (about 3 s on the 2-core machine).

**Same vectors.** The weights are read from the model's `.pt` by embeddings.weights_reader (no
torch, no code run), widened to float32 as torch's load_state_dict does, and the arithmetic is
the torch Encoder's: gates r, z = sigmoid(a) = (1 + tanh(a / 2)) / 2 with the r and z columns of
the weights halved, n = tanh(x_n + r * (W_hn h + b_hn)), h' = n + z * (h - n). Only the BLAS
summation order differs, so the vectors agree with the torch path's within 1e-6
(tests/test_embeddings_numpy.py, on the shipped model and on test models of every config the
model allows).

**Speed.** Hypotheses of an n-best list share prefixes, and a GRU state depends only on the
prefix read so far, so the sentences are encoded as a trie, one depth at a time: at depth t every
distinct prefix of length t + 1 is one row, its input the word's row of the input table (the r
and z gates' recurrent biases folded in) and its previous state its parent's (the 19,897
distinct hypotheses of the optimised test_2016 20-best have 256,145
tokens and 96,525 distinct prefixes: 2.7x fewer GRU steps than a padded batch). The input
projection of all words, E W_ih^T + b_ih, is a table computed in vocabulary blocks of
TABLE_BLOCK rows on first use (one float32 GEMM per block; the whole table for a large
vocabulary would cost more than a short run), and each step's recurrent product is a GEMM of
BLOCK rows. With threads > 1 the blocks of a depth are shared by that many threads (numpy and
BLAS release the GIL), BLAS itself kept to one thread, so the thread count is what `--threads`
says.

**Batch independence.** A vector is bitwise the same whichever sentences are encoded with it
(sharded feature runs depend on this, as on the torch path): every GEMM has the same shape
whatever the batch holds (BLOCK rows, unused rows zero, a table block always its TABLE_BLOCK
vocabulary rows), a row's product does not depend on its place in the block (`_gemm`: BLAS where
a probe of the weights at first use shows it so; OpenBLAS's Haswell kernels, as on AMD EPYC, sum
a row in an order that depends on its place, and there numpy's own einsum loop, several times
slower, takes the products instead), numpy's element-wise tanh rounds alike on its vector and scalar paths (tested)
and the norms are summed per row in float64. Unlike the torch path, the vectors do not depend on
`batch_size` either (it is accepted for the same signature and ignored).

**What it runs.** Exactly the models embeddings.model builds: a config (the JSON's `model`)
with keys beyond ModelConfig's fields known here (SPEC_KEYS), a non-empty `extra`, or weights
other than the ones those sizes make (a second GRU layer, a reverse direction), is an
UnsupportedModel, and `load_encoder(backend="auto")` then falls back to the torch Encoder when
torch is installed. tests/test_embeddings_numpy.py fails when ModelConfig gains a field that is
not in SPEC_KEYS, so that a new encoder variant gets its numpy path (or its refusal) with it.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from rerank.embeddings.modelfile import locate, read_meta, read_vocabs, token_ids
from rerank.embeddings.vocab import AnyVocab
from rerank.embeddings.weights_reader import LegacyFormat, read_state_dict
from rerank.errors import InputError
from rerank.progress import Progress, track

__all__ = ["NumpyEncoder", "UnsupportedModel", "load_encoder", "BACKENDS"]

log = logging.getLogger(__name__)

BACKENDS = ("auto", "numpy", "torch")
BLOCK = 128                      # rows of every GEMM: recurrent, input table, projection, image
TABLE_BLOCK = BLOCK              # vocabulary rows of one block of the input table (the same GEMM shape as the
                                 # table-less path's BLOCK words)
TABLE_LIMIT_BYTES = 512 * 2**20  # a larger input table is not kept: each step projects its words
# ModelConfig's fields (embeddings.model) this module runs; dropout and init_std do not change inference
SPEC_KEYS = frozenset({"languages", "vocab_sizes", "word_dim", "hidden_dim", "joint_dim", "image_dim", "dropout",
                       "init_std", "align_pairs", "extra"})


class UnsupportedModel(InputError):
    """A model the numpy encoder does not run (a variant it does not know): the torch Encoder may."""


@dataclass(frozen=True)
class ModelSpec:
    """The sizes of a model, from its JSON's `model` object (embeddings.model.ModelConfig's fields)."""

    languages: list[str]
    vocab_sizes: dict[str, int]
    word_dim: int
    hidden_dim: int
    joint_dim: int
    image_dim: int
    align_pairs: list

    @classmethod
    def from_meta(cls, meta: dict, js: str) -> ModelSpec:
        """The spec of the JSON's `model`; UnsupportedModel for keys or extras it does not know,
        InputError for values of the wrong type."""
        model = meta["model"]
        unknown = sorted(set(model) - SPEC_KEYS)
        if unknown:
            raise UnsupportedModel(f"the numpy encoder does not know the model config keys {', '.join(unknown)}", js)
        if model.get("extra"):
            raise UnsupportedModel(f"the numpy encoder does not know the model's extra settings {model['extra']!r}", js)
        sizes = {"word_dim": 620, "hidden_dim": 1024, "joint_dim": 2048, "image_dim": 0}   # ModelConfig's defaults
        sizes.update({k: model[k] for k in sizes if k in model})
        languages, vocab_sizes = model.get("languages"), model.get("vocab_sizes")
        align = model.get("align_pairs", [])
        ok = (isinstance(languages, list) and languages and all(isinstance(x, str) for x in languages)
              and isinstance(vocab_sizes, dict) and all(isinstance(vocab_sizes.get(x), int) and vocab_sizes[x] > 0
                                                         for x in languages)
              and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in sizes.values())
              and min(sizes["word_dim"], sizes["hidden_dim"], sizes["joint_dim"]) > 0
              and isinstance(align, list) and all(isinstance(p, list) and len(p) == 2 for p in align))
        if not ok:
            raise InputError(f"not a valid model config (sizes, languages or vocab_sizes malformed: {model!r:.200})", js)
        return cls(list(languages), {x: vocab_sizes[x] for x in languages}, align_pairs=[list(p) for p in align],
                   **sizes)

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """name -> shape of every weight embeddings.model.MLMME has for this spec."""
        D, H, J = self.word_dim, self.hidden_dim, self.joint_dim
        out: dict[str, tuple[int, ...]] = {}
        for lang in self.languages:
            out[f"embed.{lang}.weight"] = (self.vocab_sizes[lang], D)
            out.update({f"gru.{lang}.weight_ih_l0": (3 * H, D), f"gru.{lang}.weight_hh_l0": (3 * H, H),
                        f"gru.{lang}.bias_ih_l0": (3 * H,), f"gru.{lang}.bias_hh_l0": (3 * H,)})
            if H != J:
                out[f"text_proj.{lang}.weight"] = (J, H)
        if self.image_dim:
            out.update({"image_proj.weight": (J, self.image_dim), "image_proj.bias": (J,)})
        for s, t in self.align_pairs:
            out[f"align.{s}_{t}"] = (D, D)
        return out


def check_weights(spec: ModelSpec, state: dict[str, np.ndarray], pt: str, what: str) -> None:
    """UnsupportedModel for weights of a variant (keys the spec does not make), InputError for
    missing weights or a shape that does not fit, as check_state_dict says them."""
    own = spec.shapes()
    missing = [k for k in own if k not in state]
    unexpected = [k for k in state if k not in own]
    if unexpected and not missing:   # weights beyond the model's: a variant (a second layer, a reverse GRU)
        raise UnsupportedModel(f"the numpy encoder does not know the weights {', '.join(unexpected[:3])}"
                               f"{' ...' if len(unexpected) > 3 else ''} of {what}", pt)
    if missing:
        raise InputError(f"the weights do not fit {what}: {len(missing)} missing keys {missing[:3]}, "
                         f"{len(unexpected)} unexpected keys {unexpected[:3]}", pt)
    for key, shape in own.items():
        if tuple(state[key].shape) != shape:
            raise InputError(f"the weights do not fit {what}: {key} has shape {tuple(state[key].shape)} "
                             f"where it expects {shape}", pt)
        if state[key].dtype.kind != "f":
            raise InputError(f"the weights do not fit {what}: {key} is {state[key].dtype}, not floating point", pt)


class _Language:
    """One language's weights in float32, laid out for the steps (r and z columns halved: exact),
    and its input table E W_ih^T + b_ih, computed in blocks of TABLE_BLOCK words on first use."""

    def __init__(self, state: dict[str, np.ndarray], lang: str, spec: ModelSpec):
        H = spec.hidden_dim
        half = np.ones(3 * H, dtype=np.float32)
        half[: 2 * H] = 0.5

        def f32(key: str) -> np.ndarray:
            return np.asarray(state[key], dtype=np.float32)

        self.embed = state[f"embed.{lang}.weight"]   # as stored (fp16 or fp32): rows widened when used
        self.w_ih_t = np.ascontiguousarray(f32(f"gru.{lang}.weight_ih_l0").T * half)
        self.w_hh_t = np.ascontiguousarray(f32(f"gru.{lang}.weight_hh_l0").T * half)
        # b_hh of the r and z gates joins b_ih (both are added to x W_ih^T + h W_hh^T); the n gate's is
        # inside r * (h W_hn^T + b_hn)
        b_hh = f32(f"gru.{lang}.bias_hh_l0") * half
        self.b_ih = f32(f"gru.{lang}.bias_ih_l0") * half
        self.b_ih[: 2 * H] += b_hh[: 2 * H]
        self.b_hn = b_hh[2 * H:].copy()
        proj = f"text_proj.{lang}.weight"
        self.proj_t = np.ascontiguousarray(f32(proj).T) if proj in state else None
        V = self.embed.shape[0]
        self.table: np.ndarray | None = None
        if V * 3 * H * 4 <= TABLE_LIMIT_BYTES:
            self.table = np.empty((V, 3 * H), dtype=np.float32)
        self.done = np.zeros(-(-V // TABLE_BLOCK), dtype=bool)

    def prepare(self, words: np.ndarray) -> None:
        """Compute the table blocks that hold `words` and are not computed yet (one GEMM of
        TABLE_BLOCK rows each, the last block padded)."""
        if self.table is None:
            return
        blocks = np.unique(words // TABLE_BLOCK)
        for b in blocks[~self.done[blocks]]:
            lo = int(b) * TABLE_BLOCK
            part = self.embed[lo:lo + TABLE_BLOCK]
            rows = np.zeros((TABLE_BLOCK, part.shape[1]), dtype=np.float32)   # fp16 -> fp32 is exact
            rows[: len(part)] = part
            self.table[lo:lo + len(part)] = (_gemm(rows, self.w_ih_t) + self.b_ih)[: len(part)]
            self.done[b] = True

    def inputs(self, words: np.ndarray) -> np.ndarray:
        """(BLOCK, 3H) input pre-activations x W_ih^T + b_ih of up to BLOCK word ids, then zero
        rows: from the table (prepared), or, without one, a GEMM of BLOCK embedding rows."""
        k = len(words)
        if self.table is not None:
            if k == BLOCK:
                return self.table[words]
            x = np.zeros((BLOCK, self.table.shape[1]), dtype=np.float32)
            x[:k] = self.table[words]
            return x
        rows = np.zeros((BLOCK, self.embed.shape[1]), dtype=np.float32)
        rows[:k] = self.embed[words]
        x = _gemm(rows, self.w_ih_t)
        x += self.b_ih
        return x


_ROWS_APART: dict[tuple[int, int, int], bool] = {}   # (k, n, BLAS threads) -> BLAS keeps rows apart


def rows_apart(w: np.ndarray, threads: int = 1) -> bool:
    """Whether float32 BLAS on `threads` threads gives each row of a BLOCK-row product with `w`
    the same bits wherever the row stands in the block (probed once per shape and thread count:
    random rows, their product and that of the rows shuffled)."""
    key = (w.shape[0], w.shape[1], threads)
    if key not in _ROWS_APART:
        rng = np.random.default_rng(0)
        a = rng.standard_normal((BLOCK, w.shape[0])).astype(np.float32)
        order = rng.permutation(BLOCK)
        with _blas_threads(threads):
            _ROWS_APART[key] = bool(np.array_equal((a @ w)[order], a[order] @ w))
    return _ROWS_APART[key]


def _gemm(a: np.ndarray, w: np.ndarray, threads: int = 1) -> np.ndarray:
    """a @ w, each row's result independent of its place in `a`: BLAS where it is so
    (`rows_apart`), else numpy's einsum loop (no BLAS: each element summed over k in one order)."""
    if rows_apart(w, threads):
        return a @ w
    return np.einsum("ik,kn->in", a, w, optimize=False)


def _step_block(lang: _Language, parents: np.ndarray, words: np.ndarray, out: np.ndarray) -> None:
    """One GRU step of up to BLOCK rows, on a block of exactly BLOCK rows: previous states
    `parents` (k, H, a fresh array), the words read (k,); the new states go to `out` (k, H)."""
    k, H = len(parents), lang.w_hh_t.shape[0]
    h = parents
    if k < BLOCK:
        h = np.zeros((BLOCK, H), dtype=np.float32)
        h[:k] = parents
    xb = lang.inputs(words)
    g = _gemm(h, lang.w_hh_t)
    rz = g[:, : 2 * H]
    rz += xb[:, : 2 * H]
    np.tanh(rz, out=rz)
    rz += 1.0
    rz *= 0.5
    n = g[:, 2 * H:]
    n += lang.b_hn
    n *= rz[:, :H]
    n += xb[:, 2 * H:]
    np.tanh(n, out=n)
    h -= n
    h *= rz[:, H:]
    h += n
    out[:] = h[:k]


def _normalise(v: np.ndarray) -> np.ndarray:
    """Rows over their L2 norms (at least 1e-12, as torch's F.normalize), the norms summed per row
    in float64; float32 out."""
    wide = v.astype(np.float64)
    norms = np.sqrt((wide * wide).sum(axis=1, keepdims=True))
    return (wide / np.maximum(norms, 1e-12)).astype(np.float32)


def _blocks_of(matrix: np.ndarray, weights_t: np.ndarray, bias: np.ndarray | None = None,
               threads: int = 1) -> np.ndarray:
    """matrix @ weights_t (+ bias) in GEMMs of exactly BLOCK rows (the last one padded), BLAS on
    `threads` threads."""
    out = np.empty((len(matrix), weights_t.shape[1]), dtype=np.float32)
    for s in range(0, len(matrix), BLOCK):
        part = matrix[s:s + BLOCK]
        rows = np.zeros((BLOCK, matrix.shape[1]), dtype=np.float32)
        rows[: len(part)] = part
        y = _gemm(rows, weights_t, threads)
        if bias is not None:
            y += bias
        out[s:s + BLOCK] = y[: len(part)]
    return out


class NumpyEncoder:
    """Encode sentences of any trained language, and image features, into the torch Encoder's
    normalised vectors, on numpy (see the module docstring). The same interface as
    embeddings.encoder.Encoder: languages, has_images, dim, image_dim, tokenize_ids, encode,
    encode_images; `threads` CPU threads (1: BLAS alone, on one thread)."""

    backend = "numpy"

    def __init__(self, spec: ModelSpec, state: dict[str, np.ndarray], vocabs: dict[str, AnyVocab],
                 meta: dict | None = None, threads: int = 1):
        self.spec, self.vocabs, self.meta, self.threads = spec, vocabs, meta or {}, threads
        self._state = state
        self._languages: dict[str, _Language] = {}
        self._image: tuple[np.ndarray, np.ndarray] | None = None
        if spec.image_dim:
            self._image = (np.ascontiguousarray(np.asarray(state["image_proj.weight"], dtype=np.float32).T),
                           np.asarray(state["image_proj.bias"], dtype=np.float32))

    @classmethod
    def load(cls, path: str, threads: int = 1) -> NumpyEncoder:
        """The model NAME.pt + NAME.json (`path`: either, NAME or their directory), read without
        torch; InputError naming the file for anything broken in them (the torch Encoder's
        messages), UnsupportedModel for a model this encoder does not run."""
        pt, js = locate(path)
        meta = read_meta(js)
        spec = ModelSpec.from_meta(meta, js)
        vocabs = read_vocabs(meta, spec, js)
        try:
            state = read_state_dict(pt, "model weights")
        except LegacyFormat as exc:
            raise UnsupportedModel(exc.problem, pt) from None
        check_weights(spec, state, pt, f"the model of {os.path.basename(js)}")
        return cls(spec, state, vocabs, meta, threads)

    @property
    def languages(self) -> list[str]:
        return list(self.spec.languages)

    @property
    def has_images(self) -> bool:
        return self._image is not None

    @property
    def dim(self) -> int:
        return self.spec.joint_dim

    @property
    def image_dim(self) -> int:
        return self.spec.image_dim

    def tokenize_ids(self, sentences: list[str], lang: str, empty: str = "error") -> list[list[int]]:
        return token_ids(self.vocabs, sentences, lang, empty)

    def _language(self, lang: str) -> _Language:
        if lang not in self._languages:
            self._languages[lang] = _Language(self._state, lang, self.spec)
        return self._languages[lang]

    def encode(self, sentences: list[str], lang: str, batch_size: int = 256, device: str | None = None,
               empty: str = "error", progress: Progress = False) -> np.ndarray:
        """(N, dim) float32 unit vectors for raw sentences in `lang` (same order as given); empty
        sentences (no tokens) raise InputError, or get a zero vector with empty='zero'.
        `batch_size` does not change the vectors here (see the module docstring); `device` must
        be the CPU (None or "cpu")."""
        if empty not in ("error", "zero"):
            raise ValueError("empty must be 'error' or 'zero'")
        _check_cpu(device)
        ids = self.tokenize_ids(list(sentences), lang, empty)
        return self.encode_ids(ids, lang, progress)

    def encode_ids(self, ids: list[list[int]], lang: str, progress: Progress = False) -> np.ndarray:
        """(N, dim) float32 unit vectors of word-id lists (empty lists: zero vectors)."""
        if lang not in self.vocabs:
            raise InputError(f"unknown language {lang!r}: this model encodes {', '.join(self.languages)}")
        out = np.zeros((len(ids), self.dim), dtype=np.float32)
        rows = np.array([i for i, x in enumerate(ids) if x], dtype=np.int64)
        if len(rows) == 0:
            return out
        weights = self._language(lang)
        for w in (weights.w_hh_t, weights.w_ih_t, weights.proj_t):   # probed before any thread runs
            if w is not None:
                rows_apart(w)
        with _blas_threads(1):   # threads > 1: this module's threads share the blocks
            states = self._last_states(weights, [ids[i] for i in rows], progress, f"encode {lang}")
            if weights.proj_t is not None:
                states = _blocks_of(states, weights.proj_t)
        out[rows] = _normalise(states)
        return out

    def _last_states(self, lang: _Language, ids: list[list[int]], progress: Progress, desc: str) -> np.ndarray:
        """(N, H) last GRU states of non-empty id lists, every distinct prefix stepped once (the trie,
        one depth at a time)."""
        sizes = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
        flat = np.fromiter((w for x in ids for w in x), dtype=np.int64, count=int(sizes.sum()))
        order = np.argsort(-sizes, kind="stable")            # longest first: depth t's rows are a prefix
        starts = (np.cumsum(sizes) - sizes)[order]
        sorted_sizes = sizes[order]
        alive = np.searchsorted(-sorted_sizes, -np.arange(1, int(sorted_sizes[0]) + 1), side="right")
        V = self.vocabs_size(lang)
        H = lang.w_hh_t.shape[0]
        node = np.zeros(len(ids), dtype=np.int64)          # each sorted row's prefix node at the last depth
        prev = np.zeros((1, H), dtype=np.float32)           # the states of that depth (the root: zero)
        out = np.empty((len(ids), H), dtype=np.float32)
        pool = None
        if self.threads > 1:
            from concurrent.futures import ThreadPoolExecutor

            pool = ThreadPoolExecutor(self.threads)
        try:
            for t in track(range(len(alive)), progress, desc, unit="step"):
                n_t = int(alive[t])
                words = flat[starts[:n_t] + t]
                keys, node[:n_t] = np.unique(node[:n_t] * V + words, return_inverse=True)
                states = np.empty((len(keys), H), dtype=np.float32)
                parents, step_words = keys // V, keys % V
                lang.prepare(step_words)

                def step(span: tuple[int, int], prev=prev, parents=parents, step_words=step_words,
                         states=states) -> None:
                    a, b = span
                    _step_block(lang, prev[parents[a:b]], step_words[a:b], states[a:b])

                spans = [(s, min(s + BLOCK, len(keys))) for s in range(0, len(keys), BLOCK)]
                if pool is None or len(spans) == 1:
                    for span in spans:
                        step(span)
                else:
                    list(pool.map(step, spans))
                ending = np.flatnonzero(sorted_sizes[:n_t] == t + 1)
                out[order[ending]] = states[node[ending]]
                prev = states
        finally:
            if pool is not None:
                pool.shutdown()
        return out

    @staticmethod
    def vocabs_size(lang: _Language) -> int:
        return int(lang.embed.shape[0])

    def encode_images(self, features: np.ndarray, batch_size: int = 256, device: str | None = None) -> np.ndarray:
        """(N, dim) float32 unit vectors for (N, image_dim) CNN features (GEMMs of BLOCK rows, so
        a vector does not depend on N)."""
        if self._image is None:
            raise InputError("this model was trained without images (text-only): it cannot encode image features")
        _check_cpu(device)
        feats = np.asarray(features, dtype=np.float32)
        if feats.ndim != 2 or feats.shape[1] != self.image_dim:
            raise InputError(f"image features of shape {feats.shape}, but the model expects (N, {self.image_dim})")
        with _blas_threads(self.threads):
            return _normalise(_blocks_of(feats, *self._image, threads=self.threads))


def _check_cpu(device) -> None:
    if device is not None and str(device).strip() != "cpu":
        raise InputError(f"the numpy encoder runs on the CPU, not {str(device).strip()!r}: the torch encoder "
                         "(backend torch) runs on a GPU", option="device")


def torch_installed() -> bool:
    return importlib.util.find_spec("torch") is not None


def load_encoder(path: str, backend: str = "auto", device: str | None = None, threads: int | None = None):
    """The encoder of the model at `path` for `backend`:

    - "numpy": NumpyEncoder (no torch; UnsupportedModel for a variant it does not run);
    - "torch": embeddings.encoder.Encoder (needs torch; for a GPU, and for training);
    - "auto": torch when `device` asks for CUDA and torch has it, else numpy, falling back to
      torch for a model the numpy encoder does not run (said in the log) when torch is installed.

    `threads` is the numpy encoder's thread count (None: 1); the torch encoder takes torch's."""
    from rerank.device import check_device

    if backend not in BACKENDS:
        raise InputError(f"unknown encoder backend {backend!r} (known: {', '.join(BACKENDS)})", option="backend")
    check_device(device)
    gpu = device is not None and str(device).strip() != "cpu"
    if backend == "auto" and gpu and torch_installed():
        import torch

        backend = "torch" if torch.cuda.is_available() else "numpy"
        if backend == "numpy":
            log.warning(f"CUDA is not available ({str(device).strip()} requested): using the CPU")
    elif backend == "auto" and gpu:
        log.warning(f"CUDA needs torch, which is not installed ({str(device).strip()} requested): using the CPU")
    if backend == "torch":
        return _torch_encoder(path)
    try:
        return NumpyEncoder.load(path, threads or 1)
    except UnsupportedModel as exc:
        if backend == "numpy" or not torch_installed():
            raise UnsupportedModel(f"{exc.problem}; the torch encoder runs every model of `rerank embed train`: "
                                   "pip install 'mlmme-rerank[neural]'", exc.path) from None
        log.info("%s: using the torch encoder", exc)
        return _torch_encoder(path)


def _torch_encoder(path: str):
    from rerank.errors import needs_neural

    with needs_neural("the torch encoder"):
        from rerank.embeddings.encoder import Encoder
    return Encoder.load(path)


@contextmanager
def _blas_threads(n: int):
    """BLAS (numpy's OpenBLAS) on `n` threads inside the block, its own count restored after;
    nothing where numpy's BLAS is not an OpenBLAS this finds."""
    lib = _openblas()
    if lib is None:
        yield
        return
    get, set_ = lib
    before = get()
    if before == n:
        yield
        return
    set_(n)
    try:
        yield
    finally:
        set_(before)


_OPENBLAS: list = []


def _openblas():
    """(get, set) of the thread count of the OpenBLAS numpy loaded (its wheels ship it in
    numpy.libs or numpy/.libs), or None."""
    if _OPENBLAS:
        return _OPENBLAS[0]
    import ctypes
    import glob

    found = None
    root = os.path.dirname(os.path.dirname(np.__file__))
    for lib in sorted(glob.glob(os.path.join(root, "numpy.libs", "*openblas*"))
                      + glob.glob(os.path.join(os.path.dirname(np.__file__), ".libs", "*openblas*"))):
        try:
            handle = ctypes.CDLL(lib)
        except OSError:
            continue
        for prefix, suffix in (("scipy_openblas", "64_"), ("scipy_openblas", ""), ("openblas", "64_"), ("openblas", "")):
            get = getattr(handle, f"{prefix}_get_num_threads{suffix}", None)
            set_ = getattr(handle, f"{prefix}_set_num_threads{suffix}", None)
            if get is not None and set_ is not None:
                get.restype, set_.argtypes = ctypes.c_int, [ctypes.c_int]
                found = (get, set_)
                break
        if found:
            break
    _OPENBLAS.append(found)
    return found
