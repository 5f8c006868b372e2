"""Feature weights: JSON files ({"feature": w} or {"weights": {...}, "meta": {...}}) and
Moses-style ``name= v1 v2`` lines; applying them to an n-best list."""

from __future__ import annotations

import json
import sys

import numpy as np

from rerank.errors import InputError
from rerank.io import atomic_write, iter_lines
from rerank.nbest import NBestList, segment_argmax


def read_weights(path: str) -> dict[str, float]:
    """Weights by feature name, from JSON or Moses ``name= v1 v2`` / Joshua ``name v`` lines."""
    lines = list(iter_lines(path))
    text = "\n".join(line for _, line in lines).strip()
    if not text:
        raise InputError("empty weights file", path)
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"invalid JSON: {exc.msg}", path, exc.lineno) from None
        table = data.get("weights", data) if isinstance(data, dict) else None
        if not isinstance(table, dict):
            raise InputError("JSON weights must be an object of feature: weight", path)
        weights = {}
        for name, value in table.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value):
                raise InputError(f"weight of {name!r} is not a finite number: {value!r}", path)
            weights[name] = float(value)
        return weights
    return _read_moses_weights(lines, path)


def _read_moses_weights(lines: list[tuple[int, str]], path: str) -> dict[str, float]:
    weights: dict[str, float] = {}

    def put(name: str, value: str, number: int):
        if name in weights:
            raise InputError(f"weight {name!r} given twice", path, number)
        try:
            weights[name] = float(value)
        except ValueError:
            raise InputError(f"weight of {name!r}: {value!r} is not a number", path, number) from None
        if not np.isfinite(weights[name]):
            raise InputError(f"weight of {name!r} is {value}", path, number)

    for number, line in lines:
        tokens = line.split("#", 1)[0].split()
        if not tokens:
            continue
        if "=" in tokens[0] and not tokens[0].endswith("="):  # name=value pairs
            for token in tokens:
                name, _, value = token.partition("=")
                put(name, value, number)
            continue
        group_name, values = None, []
        groups: list[tuple[str, list[str]]] = []
        for token in tokens:
            if token.endswith("="):
                group_name, values = token[:-1], []
                groups.append((group_name, values))
            elif group_name is None and len(tokens) == 2:  # Joshua config: `name value`
                groups.append((tokens[0], [tokens[1]]))
                break
            elif group_name is None:
                raise InputError(f"cannot read weight line {line!r}: expected `name= v1 v2`", path, number)
            else:
                values.append(token)
        for name, vals in groups:
            if not vals:
                raise InputError(f"weight {name!r} has no value", path, number)
            if len(vals) == 1:
                put(name, vals[0], number)
            else:
                for k, v in enumerate(vals):
                    put(f"{name}_{k}", v, number)
    return weights


def write_weights(path: str, weights: dict[str, float], meta: dict | None = None) -> None:
    payload = {"weights": {k: float(v) for k, v in weights.items()}, "meta": meta or {}}
    with atomic_write(path) as out:
        json.dump(payload, out, indent=2)
        out.write("\n")


def weight_vector(weights: dict[str, float], feature_names: list[str], source: str = "weights",
                  warn=lambda msg: print(msg, file=sys.stderr)) -> np.ndarray:
    """Align weights to the n-best's columns: unknown names are errors, missing ones get 0 (warned)."""
    unknown = [name for name in weights if name not in feature_names]
    if unknown:
        raise InputError(f"weights for features the n-best lacks: {', '.join(unknown)} (n-best has: {', '.join(feature_names)})", source)
    missing = [name for name in feature_names if name not in weights]
    if missing:
        warn(f"warning: {source}: no weight for {', '.join(missing)}; using 0")
    return np.array([weights.get(name, 0.0) for name in feature_names], dtype=np.float64)


def model_scores(nbest: NBestList, w: np.ndarray) -> np.ndarray:
    return nbest.features @ w


def best_rows(nbest: NBestList, w: np.ndarray) -> np.ndarray:
    """Row of the arg-max hypothesis of every sentence; ties go to the earlier rank."""
    return segment_argmax(model_scores(nbest, w), nbest.offsets)


def best_hypotheses(nbest: NBestList, weights: dict[str, float]) -> list[str]:
    w = weight_vector(weights, nbest.feature_names)
    return [nbest.hyps[int(r)] for r in best_rows(nbest, w)]


def resorted(nbest: NBestList, w: np.ndarray) -> NBestList:
    """Each list sorted by model score, best first (stable: ties keep the original order)."""
    scores = model_scores(nbest, w)
    order = np.lexsort((nbest.rank_of_hyp, -scores, nbest.sentence_of_hyp))
    out = nbest.reorder(order)
    return NBestList(out.offsets, out.hyps, out.features, out.feature_names, out.groups, scores[order], dict(nbest.missing))
