"""Multi30k for the embedding models: comparable (task2) and translated (task1) captions, image
features, and per-epoch training tuples (an image with one caption per language).

Layout of --data-dir (as ../shared/data/multi30k):
  task1/raw/{split}.{lang}.gz, task1/image_splits/{split}.txt   (split test_2016_flickr)
  task2/raw/{split}.{1..5}.{en,de}.gz, task2/image_splits/{split}_images.txt (split test_2016)
"""

from __future__ import annotations

import itertools
import os
import zipfile
from dataclasses import dataclass, field

import numpy as np

from rerank.embeddings.config import TASK2_LANGS
from rerank.embeddings.tokenize import check_language, tokenize
from rerank.errors import InputError
from rerank.io import iter_lines, read_lines

TASK1_SPLIT = {"train": "train", "val": "val", "test_2016": "test_2016_flickr"}


def _find(path: str) -> str | None:
    for cand in (path, path + ".gz"):
        if os.path.exists(cand):
            return cand
    if path.endswith(".gz") and os.path.exists(path[:-3]):
        return path[:-3]
    return None


def read_captions(path: str, n_expected: int | None = None) -> list[str]:
    """Caption lines of one file; errors name the file and line for empty lines or a wrong count."""
    real = _find(path)
    if real is None:
        raise InputError("file not found", path)
    lines = []
    for number, line in iter_lines(real):
        if not line.strip():
            raise InputError("empty caption", real, number)
        lines.append(line)
    if n_expected is not None and len(lines) != n_expected:
        raise InputError(f"{len(lines)} lines, but the image list has {n_expected}", real)
    return lines


def image_list(data_dir: str, split: str, task: str = "task1") -> list[str]:
    """Image file names of a split (task1 and task2 lists are identical)."""
    if task == "task1":
        path = os.path.join(data_dir, "task1", "image_splits", TASK1_SPLIT.get(split, split) + ".txt")
    else:
        path = os.path.join(data_dir, "task2", "image_splits", f"{split}_images.txt")
    if not os.path.exists(path):
        raise InputError("image list not found", path)
    return [x.strip() for x in read_lines(path)]


def load_translated(data_dir: str, split: str, languages: list[str]) -> dict[str, list[str]]:
    """task1: lang -> one caption per image of the split (line i = image i)."""
    n = len(image_list(data_dir, split, "task1"))
    name = TASK1_SPLIT.get(split, split)
    return {lang: read_captions(os.path.join(data_dir, "task1", "raw", f"{name}.{lang}.gz"), n) for lang in languages}


def load_comparable(data_dir: str, split: str, languages: list[str]) -> dict[str, list[list[str]]]:
    """task2: lang -> five caption lists (caption k of every image), for en and de."""
    n = len(image_list(data_dir, split, "task2"))
    out = {}
    for lang in languages:
        if lang not in TASK2_LANGS:
            continue
        out[lang] = [read_captions(os.path.join(data_dir, "task2", "raw", f"{split}.{k}.{lang}.gz"), n) for k in range(1, 6)]
    return out


def _read_array(path: str) -> np.ndarray:
    """The array of a .npy file, or of a .npz file's one array (or the one named 'features')."""
    if not os.path.isfile(path):
        raise InputError("image feature file not found" if not os.path.isdir(path) else
                         "the image feature file is a directory", path)
    try:
        data = np.load(path, mmap_mode="r" if path.endswith(".npy") else None, allow_pickle=False)
        if isinstance(data, np.lib.npyio.NpzFile):
            keys = list(data.keys())
            if len(keys) != 1 and "features" not in keys:
                raise InputError(f"expected one array (or one named 'features'), found {keys}", path)
            data = data["features" if "features" in keys else keys[0]]
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise InputError(f"cannot read image features: {_unreadable(path, exc)}", path) from None
    return data


def _unreadable(path: str, exc: Exception) -> str:
    """Why np.load failed, in words: an object array, a damaged file, or no array file at all."""
    text = str(exc).strip() or type(exc).__name__
    if "Object arrays" in text or "Python objects" in text:
        return "it holds Python objects (an object array): object arrays are refused"
    with open(path, "rb") as f:
        head = f.read(6)
    if head.startswith((b"\x93NUMPY", b"PK")):
        return f"a damaged or truncated .npy/.npz file ({text.splitlines()[0][:120]})"
    return f"not a .npy/.npz array file (it starts with {head!r})" if head else "an empty file, not a .npy/.npz file"


def load_features(path: str, n_rows: int | None, dim: int | None = None) -> np.ndarray:
    """Image features (.npy, or .npz with one array): a 2-d array of finite numbers with one row
    per line of the image list (`n_rows`; None accepts any number but 0) and `dim` columns if given."""
    data = _read_array(path)
    if data.dtype.kind not in "fiu":
        raise InputError(f"image features must be numbers, found dtype {data.dtype}", path)
    if data.ndim != 2:
        raise InputError(f"image features must be a 2-d array (rows x dims), got shape {data.shape}", path)
    if n_rows is not None and data.shape[0] != n_rows:
        raise InputError(f"{data.shape[0]} feature rows, but the image list has {n_rows} lines", path)
    if data.shape[0] == 0 or data.shape[1] == 0:
        raise InputError(f"no image features (shape {data.shape})", path)
    if dim is not None and data.shape[1] != dim:
        raise InputError(f"feature dimension {data.shape[1]}, but the model expects {dim}", path)
    out = np.array(data, dtype=np.float32)  # a writable in-memory copy
    bad = ~np.isfinite(out).all(axis=1)
    if bad.any():
        raise InputError(f"row {int(np.argmax(bad)) + 1} holds a value that is not a finite float32 number "
                         f"({int(bad.sum())} such rows)", path)
    return out


@dataclass
class Pools:
    """Tokenised sentences per language (id arrays) and, per image unit, the candidate sentences."""

    languages: list[str]
    sentences: dict[str, list[np.ndarray]] = field(default_factory=dict)   # lang -> ids per sentence
    unit_image: list[int] = field(default_factory=list)                     # image index of each unit
    unit_cands: list[dict[str, list[int]]] = field(default_factory=list)    # lang -> sentence indices
    unit_sample: list[bool] = field(default_factory=list)                   # pick one candidate per epoch

    def add(self, image: int, cands: dict[str, list[int]], sample: bool) -> None:
        self.unit_image.append(image)
        self.unit_cands.append(cands)
        self.unit_sample.append(sample)

    def only_complete(self) -> int:
        """Keep only the units with captions in at least two languages (a caption-caption pair for
        R_ML: every language when there are two); returns how many were dropped."""
        full = [u for u, c in enumerate(self.unit_cands) if len(c) >= min(2, len(self.languages))]
        dropped = len(self.unit_cands) - len(full)
        self.unit_image = [self.unit_image[u] for u in full]
        self.unit_cands = [self.unit_cands[u] for u in full]
        self.unit_sample = [self.unit_sample[u] for u in full]
        return dropped


def languages_kept(n_images: int, languages: list[str], disjoint_halves: bool = False,
                   aligned_images: int = 0) -> list[tuple[str, ...]]:
    """The languages whose captions each of the first `n_images` images keeps. All of them, but with
    `disjoint_halves` (the disjoint setting of Kadar et al. 2019, simulated on Multi30k; two
    languages): the first language on the first half of the images, the second language on the
    second half, and both on the first `aligned_images` images (a small aligned slice, taken from
    the first half)."""
    if not disjoint_halves:
        return [tuple(languages)] * n_images
    if len(languages) != 2:
        raise InputError(f"config key disjoint_halves needs exactly two languages, got {languages}")
    half = n_images // 2
    if aligned_images > half:
        raise InputError(f"config key aligned_images: {aligned_images} aligned images, but the first half has "
                         f"only {half} of the {n_images} training images")
    return [tuple(languages) if i < aligned_images else (languages[0],) if i < half else (languages[1],)
            for i in range(n_images)]


def disjoint_captions(data_dir: str, split: str, languages: list[str], sources: list[str], limit: int | None = None,
                      aligned_images: int = 0) -> dict[str, list[str]]:
    """Per language, the raw captions of the images that keep only that language in the disjoint
    setting (`languages_kept`): the two disjoint corpora that pseudo-pairs connect (seed 003,
    section 2.2). task1 caption first, then the task2 captions, image by image."""
    n = len(image_list(data_dir, split))
    n = n if limit is None else min(n, limit)
    keep = languages_kept(n, languages, True, aligned_images)
    t1 = load_translated(data_dir, split, languages) if "task1" in sources else {}
    t2 = load_comparable(data_dir, split, languages) if "task2" in sources else {}
    out: dict[str, list[str]] = {lang: [] for lang in languages}
    for i, kept in enumerate(keep):
        if len(kept) == 1:
            lang = kept[0]
            out[lang] += ([t1[lang][i]] if t1 else []) + ([col[i] for col in t2[lang]] if t2 else [])
    return out


@dataclass(frozen=True)
class PoolOptions:
    """How `build_pools` makes the training units and vocabularies of a split: the training
    config's keys of the same names (`limit` is its train_limit; `from_config`)."""

    comparable_per_image: int = 5
    comparable_pairs: str = "index"
    max_len: int = 50
    min_freq: int = 1
    max_vocab: int | None = None
    limit: int | None = None
    disjoint_halves: bool = False
    aligned_images: int = 0
    subword: str | None = None       # None (words), "bpe" or "unigram" (SentencePiece pieces)
    subword_size: int = 8000
    seed: int = 1234

    @classmethod
    def from_config(cls, cfg: dict) -> PoolOptions:
        """The options of a checked training config (rerank.embeddings.config)."""
        keys = ("comparable_per_image", "comparable_pairs", "max_len", "min_freq", "max_vocab", "disjoint_halves",
                "aligned_images", "subword", "subword_size", "seed")
        return cls(**{key: cfg[key] for key in keys}, limit=cfg["train_limit"])


def build_pools(data_dir: str, split: str, languages: list[str], sources: list[str], vocabs: dict | None = None,
                options: PoolOptions | None = None, extra_pairs: list | None = None) -> tuple[Pools, dict]:
    """Training units and vocabularies (built here from the tokenised split unless `vocabs` given).

    task1 gives one tuple per image; task2 gives fixed tuples per image (comparable_per_image >= 5:
    caption j with caption j, or with comparable_pairs "all" every cross-language pair, 25 for
    en-de) or n tuples per image whose captions are resampled every epoch (each language's caption
    drawn independently, so from all pairs). `extra_pairs`: caption-caption tuples without an
    image, (lang a, lang b, [(sentence a, sentence b), ...]) per pseudo-pair file; each gets an
    image number of its own past the split's images (never a negative of itself, no features).
    `options` (`PoolOptions`; None: the defaults): `limit` keeps only the first `limit` images
    (small experiments and tests); sentences are cut at `max_len` tokens; the vocabularies keep
    words seen `min_freq` times, at most `max_vocab`, or with `subword` are SentencePiece models
    of `subword_size` pieces learnt on the tokens. With `disjoint_halves` an image keeps only
    the captions of the languages `languages_kept` gives it (its tuples lack the others; the
    vocabularies see only the kept captions)."""
    from rerank.embeddings.vocab import SubwordVocab, Vocab

    o = PoolOptions() if options is None else options
    for lang in languages:
        check_language(lang)
    pools = Pools(languages=list(languages))
    tokens: dict[str, list[list[str]]] = {lang: [] for lang in languages}
    n = len(image_list(data_dir, split))
    keep = languages_kept(n if o.limit is None else min(n, o.limit), languages, o.disjoint_halves, o.aligned_images)

    def add(lang, sents, every=False):
        """Tokenise the kept sentences (line i = image i; every line if `every`): {line: sentence index}."""
        lines = range(len(sents)) if every else [i for i, kept in enumerate(keep) if lang in kept]
        start = len(tokens[lang])
        tokens[lang].extend(tokenize(sents[i], lang)[:o.max_len] for i in lines)
        return dict(zip(lines, range(start, len(tokens[lang]))))

    if "task1" in sources:
        cap = load_translated(data_dir, split, languages)
        idx = {lang: add(lang, cap[lang]) for lang in languages}
        for i, kept in enumerate(keep):
            pools.add(i, {lang: [idx[lang][i]] for lang in kept}, False)
    if "task2" in sources:
        # task2 has English and German only: with more languages (fr, cs of task1) its tuples hold
        # just those two, and the terms of the other languages leave them out (in-batch modes)
        t2 = [lang for lang in languages if lang in TASK2_LANGS]
        if len(t2) < 2:
            raise InputError(f"comparable Multi30k (task2) has only en and de captions, and languages {languages} "
                             "do not hold both; drop task2 or add the language")
        comparable = load_comparable(data_dir, split, t2)
        _add_comparable(pools, {lang: [add(lang, col) for col in comparable[lang]] for lang in t2},
                        [tuple(lang for lang in langs if lang in TASK2_LANGS) for langs in keep], o.comparable_per_image,
                        o.comparable_pairs)
    if extra_pairs:
        first = n
        for a, b, rows in extra_pairs:
            ia, ib = add(a, [r[0] for r in rows], True), add(b, [r[1] for r in rows], True)
            for j, k in zip(ia.values(), ib.values()):
                pools.add(first, {a: [j], b: [k]}, False)
                first += 1
    if not pools.unit_image:
        raise InputError(f"no training data: sources {sources} gave no tuples")
    if vocabs is None:
        if o.subword:   # pieces learnt from this split's tokens (the training text) alone
            vocabs = {lang: SubwordVocab.build(tokens[lang], o.subword_size, o.subword, o.seed) for lang in languages}
        else:
            vocabs = {lang: Vocab.build(tokens[lang], o.min_freq, o.max_vocab) for lang in languages}
    for lang in languages:
        v = vocabs[lang]
        pools.sentences[lang] = [np.asarray(v.ids(t) or [1], dtype=np.int64) for t in tokens[lang]]
    return pools, vocabs


def _add_comparable(pools: Pools, idx: dict, keep: list, per_image: int, pairs: str) -> None:
    """task2 units: idx[lang][j][i] = sentence index of caption j of image i (for the kept languages)."""
    for i, kept in enumerate(keep):
        if per_image >= 5:
            combos = (itertools.product(range(5), repeat=len(kept)) if pairs == "all"
                      else ((j,) * len(kept) for j in range(5)))
            for js in combos:
                pools.add(i, {lang: [idx[lang][j][i]] for lang, j in zip(kept, js)}, False)
        else:
            for _ in range(per_image):
                pools.add(i, {lang: [idx[lang][j][i] for j in range(5)] for lang in kept}, True)


def epoch_tuples(pools: Pools, seed: int, epoch: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """This epoch's tuples in training order: (image index, {lang: sentence index, -1 where the
    tuple has no caption in that language (disjoint halves)}).

    Deterministic in (seed, epoch) so every DDP rank and every resumed run sees the same order."""
    rng = np.random.default_rng([seed, epoch, 1])
    n = len(pools.unit_image)
    sent = {lang: np.full(n, -1, dtype=np.int64) for lang in pools.languages}
    for u in range(n):
        cands = pools.unit_cands[u]
        for lang in pools.languages:
            c = cands.get(lang)
            if c:
                sent[lang][u] = c[rng.integers(len(c))] if pools.unit_sample[u] else c[0]
    order = rng.permutation(n)
    return np.asarray(pools.unit_image, dtype=np.int64)[order], {lang: s[order] for lang, s in sent.items()}


def sample_negatives(images: np.ndarray, m: int, seed: int, epoch: int) -> np.ndarray:
    """(n, m) indices of contrastive tuples for each tuple, always from a different image."""
    rng = np.random.default_rng([seed, epoch, 2])
    n = len(images)
    neg = rng.integers(n, size=(n, m))
    for _ in range(100):
        bad = images[neg] == images[:, None]
        if not bad.any():
            return neg
        neg[bad] = rng.integers(n, size=int(bad.sum()))
    raise InputError("cannot sample contrastive examples: all tuples show the same image")


def pad_batch(seqs: list[np.ndarray]):
    """List of id arrays -> (LongTensor (B, L) padded with 0, LongTensor lengths)."""
    import torch

    lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
    out = np.zeros((len(seqs), int(lengths.max())), dtype=np.int64)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = s
    return torch.from_numpy(out), torch.from_numpy(lengths)
