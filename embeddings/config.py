"""Settings of embedding training: the defaults, and a user's config checked key by key.

Config keys (JSON; any omitted key takes its DEFAULTS value, `preset` sets the sizes word_dim,
hidden_dim, joint_dim): languages, sources (task1 translated / task2 comparable Multi30k),
image_features {train, val}, beta, margin, contrastive (random|sum|max|infonce), temperature (for infonce), negatives (for random),
lr, batch_size, grad_clip, max_epochs, patience, min_freq, seed, max_minutes (wall-clock budget
of one invocation, spent in whole epochs: see rerank.budget), checkpoint_minutes, ...
Issue 14 keys: comparable_pairs (index: caption j with caption j of an image, 5 tuples; all: every
cross-language caption pair, 25 for en-de, the c2c data of Kadar et al. 2019), align_loss (None or
rcsls: AME word alignment, embeddings.align), dictionary, align_weight, align_knn, align_batch,
align_neighbours, align_languages, align_map (linear: a learned map W initialised to the
identity; identity: W = I), pseudo_pairs (a list of {file, src_lang, tgt_lang}: TSV files of
`rerank embed pseudopairs`, caption-caption training tuples), init (a model to fine-tune),
disjoint_halves (the disjoint setting of Kadar et al. 2019 simulated on Multi30k: the first
language's captions of the first half of the training images, the second language's of the other
half; embeddings.data.languages_kept) and aligned_images (K: the first K images keep both).
subword (None: words seen min_freq times; bpe or unigram: SentencePiece pieces of the Moses
tokens, learnt on the training text) and subword_size (pieces per language, the specials included).
Unknown keys, and numbers out of their range, are errors naming the key.
"""

from __future__ import annotations

import math
from typing import Any

from rerank.errors import InputError

MODES = ("random", "sum", "max", "infonce")
COMPARABLE_PAIRS = ("index", "all")       # task2 caption pairs per image: j-j (5) or every pair (25)
ALIGN_LOSSES = ("rcsls",)                 # word-embedding alignment objectives (embeddings.align)
ALIGN_MAPS = ("linear", "identity")          # contrastive sampling of the hinge losses (embeddings.losses)
LANGUAGES = ("en", "de", "fr", "cs")      # Moses tokeniser languages (embeddings.tokenize)
TASK2_LANGS = ("en", "de")                # the languages of comparable Multi30k (task2) captions
SUBWORDS = ("bpe", "unigram")             # SentencePiece models of the vocabularies (embeddings.vocab)

# Network sizes (the same words as `rerank nmt train --preset`); no torch here, so the command
# line can offer them without loading it.
PRESETS = {
    "paper": {"word_dim": 620, "hidden_dim": 1024, "joint_dim": 2048},
    "cpu": {"word_dim": 300, "hidden_dim": 512, "joint_dim": 1024},
    "small": {"word_dim": 128, "hidden_dim": 256, "joint_dim": 256},
    "tiny": {"word_dim": 32, "hidden_dim": 32, "joint_dim": 32},  # smoke tests only
}

DEFAULTS: dict[str, Any] = {
    "preset": "cpu", "languages": ["en", "de"], "sources": ["task2", "task1"], "comparable_per_image": 5,
    "image_features": {"train": None, "val": None}, "min_freq": 2, "max_vocab": None, "max_len": 50,
    "dropout": 0.5, "init_std": 0.01, "beta": 0.5, "margin": 0.2, "contrastive": "random", "temperature": 0.05, "negatives": 5,
    "lr": 2e-4, "batch_size": 128, "grad_clip": 2.0, "max_epochs": 30, "patience": 5, "seed": 1234,
    "max_minutes": None, "max_steps": None, "checkpoint_minutes": 10.0, "train_limit": None, "validate": True, "select_images": 500,
    "comparable_pairs": "index", "align_loss": None, "dictionary": None, "align_weight": 1.0, "align_knn": 10,
    "align_batch": 1024, "align_neighbours": None, "align_languages": None, "align_map": "linear",
    "pseudo_pairs": [], "init": None, "disjoint_halves": False, "aligned_images": 0,
    "subword": None, "subword_size": 8000,
}


def resolve_config(user: dict) -> dict:
    """Defaults < preset sizes < user keys. Unknown keys, and values of the wrong type or range,
    are errors naming the key (typos should not pass)."""
    preset = user.get("preset", DEFAULTS["preset"])
    if preset not in PRESETS:
        raise InputError(f"unknown preset {preset!r}: expected one of {', '.join(PRESETS)}")
    known = set(DEFAULTS) | {"word_dim", "hidden_dim", "joint_dim"}
    bad = sorted(set(user) - known)
    if bad:
        raise InputError(f"unknown config keys: {', '.join(bad)}")
    for key, kind in (("languages", list), ("sources", list), ("image_features", dict), ("pseudo_pairs", list)):
        if user.get(key) is not None and not isinstance(user[key], kind):
            raise InputError(f"config key {key} must be a JSON {'list' if kind is list else 'object'}, got {user[key]!r}")
    cfg = {**DEFAULTS, **PRESETS[preset], **user}
    cfg["image_features"] = {**DEFAULTS["image_features"], **(user.get("image_features") or {})}
    if cfg["contrastive"] not in MODES:
        raise InputError(f"unknown contrastive mode {cfg['contrastive']!r}: expected one of {', '.join(MODES)}")
    bad_langs = [x for x in cfg["languages"] if x not in LANGUAGES]
    if bad_langs or len(set(cfg["languages"])) != len(cfg["languages"]):
        raise InputError(f"languages {cfg['languages']}: each must be one of {', '.join(LANGUAGES)}, without repeats")
    _check_numbers(cfg)
    if not cfg["sources"] or not all(x in ("task1", "task2") for x in cfg["sources"]):
        raise InputError(f"config key sources: a list of task1 and/or task2, got {cfg['sources']!r}")
    _check_extras(cfg)
    return cfg


def _choice(cfg: dict, key: str, choices: tuple, optional: bool = False) -> None:
    if not (optional and cfg[key] is None) and cfg[key] not in choices:
        raise InputError(f"config key {key} must be one of {', '.join(map(str, choices))}"
                         f"{' or null' if optional else ''}, got {cfg[key]!r}")


def _check_extras(cfg: dict) -> None:
    """The keys of word alignment, pseudo-pairs, fine-tuning and c2c pairs (issue 14)."""
    _choice(cfg, "comparable_pairs", COMPARABLE_PAIRS)
    _choice(cfg, "subword", SUBWORDS, optional=True)
    _choice(cfg, "align_loss", ALIGN_LOSSES, optional=True)
    _choice(cfg, "align_map", ALIGN_MAPS)
    for key in ("dictionary", "init"):
        if cfg[key] is not None and not (isinstance(cfg[key], str) and cfg[key]):
            raise InputError(f"config key {key} must be a file name or null, got {cfg[key]!r}")
    if cfg["align_loss"] and not cfg["dictionary"]:
        raise InputError(f"align_loss {cfg['align_loss']} needs a bilingual dictionary (config key dictionary)")
    if not isinstance(cfg["disjoint_halves"], bool):
        raise InputError(f"config key disjoint_halves must be true or false, got {cfg['disjoint_halves']!r}")
    if cfg["disjoint_halves"] and len(cfg["languages"]) != 2:
        raise InputError(f"config key disjoint_halves needs exactly two languages, got {cfg['languages']}")
    beyond = [x for x in cfg["languages"] if x not in TASK2_LANGS]
    if "task2" in cfg["sources"] and cfg["contrastive"] == "random" and beyond and set(TASK2_LANGS) <= set(cfg["languages"]):
        # (without both task2 languages, the data's own error says that task2 cannot serve)
        raise InputError(f"task2 has no {', '.join(beyond)} captions, so its tuples lack those languages: train them "
                         "with contrastive sum, max or infonce")
    if cfg["aligned_images"] and not cfg["disjoint_halves"]:
        raise InputError("config key aligned_images needs disjoint_halves: true (without it every image is aligned)")
    pair = cfg["align_languages"]
    if pair is not None and (not isinstance(pair, list) or len(pair) != 2 or pair[0] == pair[1]
                             or any(x not in cfg["languages"] for x in pair)):
        raise InputError(f"config key align_languages must be two different languages of {cfg['languages']} "
                         f"(source, target), got {pair!r}")
    if cfg["align_loss"] and pair is None and len(cfg["languages"]) < 2:
        raise InputError("align_loss needs two languages")
    for i, spec in enumerate(cfg["pseudo_pairs"]):
        if not isinstance(spec, dict) or set(spec) != {"file", "src_lang", "tgt_lang"} \
                or sorted([spec["src_lang"], spec["tgt_lang"]]) != sorted(cfg["languages"]):
            raise InputError(f"config key pseudo_pairs[{i}] must be {{\"file\": TSV, \"src_lang\": L1, \"tgt_lang\": L2}} "
                             f"with the run's two languages {cfg['languages']}, got {spec!r}")


def _int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _number(v) -> bool:
    return (_int(v) or isinstance(v, float)) and math.isfinite(v)


# what a numeric config key must be: (description, test, keys); None is allowed for OPTIONAL keys
_NUMBERS = (
    ("an integer >= 1", lambda v: _int(v) and v >= 1,
     ("batch_size", "max_epochs", "patience", "negatives", "max_len", "min_freq", "word_dim", "hidden_dim",
      "joint_dim", "comparable_per_image", "select_images", "max_vocab", "max_steps", "train_limit", "align_knn",
      "align_batch", "align_neighbours")),
    ("an integer >= 300 (256 byte pieces, the specials and some more)", lambda v: _int(v) and v >= 300,
     ("subword_size",)),
    ("an integer >= 0", lambda v: _int(v) and v >= 0, ("seed", "aligned_images")),
    ("a number > 0", lambda v: _number(v) and v > 0, ("lr", "checkpoint_minutes", "max_minutes", "temperature")),
    ("a number >= 0", lambda v: _number(v) and v >= 0, ("margin", "grad_clip", "init_std", "align_weight")),
    ("a number in [0, 1)", lambda v: _number(v) and 0 <= v < 1, ("dropout",)),
    ("a number in [0, 1]", lambda v: _number(v) and 0 <= v <= 1, ("beta",)),
)
OPTIONAL = ("max_vocab", "max_steps", "train_limit", "max_minutes", "align_batch", "align_neighbours")


def _check_numbers(cfg: dict) -> None:
    """InputError naming the first config key whose value is not the number it must be."""
    for what, test, keys in _NUMBERS:
        for key in keys:
            value = cfg[key]
            if not (value is None and key in OPTIONAL) and not test(value):
                raise InputError(f"config key {key} must be {what}, got {value!r}")
