"""The variants of the embedding study (recipes.embedding_study): one JSON file per variant in
recipes/configs/embeddings/, read and checked here before anything runs. Every error names the file.

A variant is a list of stages run in order; the last one is a training stage, whose model is
evaluated:

    {"description": "...", "estimated_minutes": 20,
     "stages": [
      {"name": "slice", "kind": "train", "config": {... keys of embeddings/config.py ...}},
      {"name": "pairs", "kind": "pseudopairs", "model": "slice", "src_lang": "en", "tgt_lang": "de",
       "filter": null},
      {"name": "tuned", "kind": "train", "init": "slice", "pseudo_pairs": ["pairs"], "config": {...}}]}

- train: `rerank embed train` with `config` (epoch-bound: max_minutes must be null, so a run
  regenerates); `init` names an earlier training stage to fine-tune, `pseudo_pairs` earlier
  pseudo-pair stages whose pairs join the data; a relative `dictionary` is read under --data-dir.
- pseudopairs: pseudo-pairs (seed 003, section 2.2) with the model of training stage `model`,
  which must use disjoint_halves: every caption of the images that keep only `tgt_lang` is paired
  with its nearest caption among those of the images that keep only `src_lang`; `filter` P keeps
  the pairs at or above the P-th percentile of the cosines (null: all).

A stage's identity (its key) is its name and settings plus the keys of the stages it uses, so two
variants with the same stage share its run (it is trained once).
"""

from __future__ import annotations

import hashlib
import json
import os
import re

from rerank.errors import InputError
from rerank.io import read_json_object

CONFIGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "configs", "embeddings")
ISSUE14 = ("aligned-sum", "aligned-max", "aligned-sum-max", "c2c-all", "ame", "disjoint", "disjoint-aligned-slice",
           "disjoint-pseudo-scratch", "disjoint-pseudo-finetune")
# the text-side levers of issue 49, each against its baseline (infonce: the loss; the rest one change each)
LEVERS = ("infonce", "infonce-t0.02", "infonce-task1", "infonce-4lang", "infonce-bpe", "infonce-bpe-max", "wide-sum-max",
          "bpe-sum-max", "infonce-4lang-bpe-max")
ORDER = ISSUE14 + LEVERS + ("default",)
GROUPS = {"all": "every variant", "study": "every variant but default", "levers": "the text-side levers (issue 49)"}
STAGE_KEYS = {"train": {"name", "kind", "config", "init", "pseudo_pairs"},
              "pseudopairs": {"name", "kind", "model", "src_lang", "tgt_lang", "filter"}}
NAME = re.compile(r"[A-Za-z0-9][\w-]*")


def available(configs: str = CONFIGS) -> list[str]:
    """The variants with a config file, in the study's order (others after, by name)."""
    if not os.path.isdir(configs):
        raise InputError("no variant configurations here (not a directory)", configs)
    names = sorted(f[:-5] for f in os.listdir(configs) if f.endswith(".json"))
    return [n for n in ORDER if n in names] + [n for n in names if n not in ORDER]


def select(spec: str | None, configs: str = CONFIGS) -> list[str]:
    """The variants of --variants: names and the groups `all` and `study`, comma-separated."""
    names, chosen = available(configs), []
    for word in (spec or "all").split(","):
        word = word.strip()
        if word == "levers":
            chosen += [n for n in names if n in LEVERS]
        elif word in GROUPS:
            chosen += [n for n in names if word == "all" or n != "default"]
        elif word in names:
            chosen.append(word)
        else:
            raise InputError(f"unknown variant {word!r}: the variants are {', '.join(names)} "
                             f"(or {' / '.join(GROUPS)})", configs)
    return list(dict.fromkeys(chosen))


def load_variant(name: str, configs: str = CONFIGS) -> dict:
    """configs/NAME.json, checked (check_variant); adds its path as `file` and the stage keys."""
    path = os.path.join(configs, f"{name}.json")
    value = read_json_object(path, "variant settings")
    try:
        check_variant(value)
    except InputError as exc:
        raise InputError(exc.problem, path) from None
    value["file"] = path
    add_keys(value["stages"])
    return value


def check_variant(value) -> None:
    """InputError (without the file; load_variant adds it) for a variant that is not as described above."""
    if not isinstance(value, dict) or not isinstance(value.get("stages"), list) or not value["stages"]:
        raise InputError('expected a JSON object with a non-empty list "stages"')
    extra = sorted(set(value) - {"description", "estimated_minutes", "stages"})
    if extra:
        raise InputError(f"unknown keys {', '.join(extra)} (expected description, estimated_minutes, stages)")
    minutes = value.get("estimated_minutes")
    if minutes is not None and (isinstance(minutes, bool) or not isinstance(minutes, (int, float)) or minutes <= 0):
        raise InputError(f"estimated_minutes must be a positive number, got {minutes!r}")
    seen: dict[str, dict] = {}
    for i, stage in enumerate(value["stages"]):
        where = f"stage {i + 1}"
        if not isinstance(stage, dict) or stage.get("kind") not in STAGE_KEYS:
            raise InputError(f"{where}: expected an object with kind {' or '.join(STAGE_KEYS)}")
        name = stage.get("name")
        if not isinstance(name, str) or not NAME.fullmatch(name) or name in seen:
            raise InputError(f"{where}: name must be a unique word (letters, digits, - and _), got {name!r}")
        where = f"stage {name}"
        extra = sorted(set(stage) - STAGE_KEYS[stage["kind"]])
        if extra:
            raise InputError(f"{where}: unknown keys {', '.join(extra)} for a {stage['kind']} stage")
        (_check_train if stage["kind"] == "train" else _check_pairs)(stage, seen, where)
        seen[name] = stage
    if value["stages"][-1]["kind"] != "train":
        raise InputError("the last stage must be a train stage (its model is evaluated)")


def _earlier(seen: dict, ref, kind: str, where: str, key: str) -> dict:
    if ref not in seen or seen[ref]["kind"] != kind:
        raise InputError(f"{where}: {key} must name an earlier {kind} stage, got {ref!r}")
    return seen[ref]


def _check_train(stage: dict, seen: dict, where: str) -> None:
    from rerank.embeddings.config import resolve_config

    config = stage.get("config")
    if not isinstance(config, dict):
        raise InputError(f"{where}: config must be a JSON object of embedding settings (embeddings/config.py)")
    for key in ("init", "pseudo_pairs"):
        if key in config:
            raise InputError(f"{where}: set {key} on the stage (naming an earlier stage), not in its config")
    if config.get("max_minutes") is not None:
        raise InputError(f"{where}: max_minutes must be null: budgets are epochs, so the run regenerates")
    try:
        resolve_config(config)
    except InputError as exc:
        raise InputError(f"{where}: {exc.problem}") from None
    if "init" in stage:
        _earlier(seen, stage["init"], "train", where, "init")
    pairs = stage.get("pseudo_pairs", [])
    if not isinstance(pairs, list):
        raise InputError(f"{where}: pseudo_pairs must be a list of pseudopairs stage names")
    for ref in pairs:
        _earlier(seen, ref, "pseudopairs", where, "pseudo_pairs")


def _check_pairs(stage: dict, seen: dict, where: str) -> None:
    from rerank.embeddings.config import resolve_config

    model = resolve_config(_earlier(seen, stage.get("model"), "train", where, "model")["config"])
    if not model["disjoint_halves"]:
        raise InputError(f"{where}: the model's stage {stage['model']} must train on disjoint_halves (the pairs "
                         "connect the two halves)")
    langs = [stage.get("src_lang"), stage.get("tgt_lang")]
    if sorted(map(str, langs)) != sorted(model["languages"]):
        raise InputError(f"{where}: src_lang and tgt_lang must be the model's two languages {model['languages']}, "
                         f"got {langs}")
    p = stage.get("filter")
    if p is not None and (isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p < 100):
        raise InputError(f"{where}: filter must be a percentile in [0, 100) or null, got {p!r}")


def add_keys(stages: list[dict]) -> None:
    """Each stage's `key`: a digest of its settings and of the keys of the stages it uses."""
    keys: dict[str, str] = {}
    for stage in stages:
        uses = [stage.get("init"), stage.get("model"), *stage.get("pseudo_pairs", [])]
        blob = json.dumps({"stage": stage, "uses": [keys[u] for u in uses if u]}, sort_keys=True)
        stage["key"] = keys[stage["name"]] = hashlib.sha256(blob.encode()).hexdigest()[:10]
