"""Feature weights: JSON files ({"feature": w} or {"weights": {...}, "meta": {...}}), Moses
``name= v1 v2`` lines and moses.ini [weight] sections, Joshua config ``name value`` lines;
applying them to an n-best list."""

from __future__ import annotations

import itertools
import json
import logging
import re
from collections.abc import Callable, Collection

import numpy as np

from rerank.errors import InputError
from rerank.formats.common import parse_number
from rerank.io import atomic_write, iter_lines
from rerank.nbest import NBestList, segment_argmax

log = logging.getLogger(__name__)


WEIGHT_FORMATS = ("JSON ({\"name\": w} or {\"weights\": {...}}), Moses `name= v1 v2` lines (a repeated name "
                  "continues its group, as in mert-moses.pl's run*.dense), a moses.ini [weight] section, or "
                  "Joshua config `name value` lines")
_SECTION = re.compile(r"^\s*\[([^\]]*)\]\s*$")


def read_weights(path: str) -> dict[str, float]:
    """Weights by feature name from any of WEIGHT_FORMATS.

    A Moses group `tm= 1 2` gives `tm_0`, `tm_1` (as the Moses n-best reader names its
    columns), a single value keeps the name; Joshua config parameters (`key = value`) and
    moses.ini sections other than [weight] are skipped.
    """
    lines = list(iter_lines(path))
    text = "\n".join(line for _, line in lines).strip()
    if not text:
        raise InputError(f"empty weights file (weights formats: {WEIGHT_FORMATS})", path)
    if text.startswith("{"):
        return _read_json_weights(text, path)
    if any(_SECTION.match(line) for _, line in lines):
        return _read_weight_lines(_moses_ini_weights(lines, path), path, moses_only=True)
    return _read_weight_lines(lines, path)


def _read_json_weights(text: str, path: str) -> dict[str, float]:
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


def _moses_ini_weights(lines: list[tuple[int, str]], path: str) -> list[tuple[int, str]]:
    """The lines of a moses.ini's [weight] section."""
    section, kept, found = None, [], False
    for number, line in lines:
        match = _SECTION.match(line)
        if match:
            section = match.group(1).strip()
            found = found or section == "weight"
        elif section == "weight":
            kept.append((number, line))
    if not found:
        raise InputError(f"a moses.ini-style file without a [weight] section (weights formats: {WEIGHT_FORMATS})", path)
    return kept


def _read_weight_lines(lines: list[tuple[int, str]], path: str, moses_only: bool = False) -> dict[str, float]:
    """Moses group lines (repeated names continue a group), Joshua `name value` lines, `a=1 b=2` pairs."""
    rows = [(number, list(itertools.takewhile(lambda t: not t.startswith("#"), line.split()))) for number, line in lines]
    rows = [(number, tokens) for number, tokens in rows if tokens]  # (a token starting with # starts a comment)
    joshua = not moses_only and any((len(t) == 2 and "=" not in t[0] + t[1]) or t[1:2] == ["="] for _, t in rows)
    groups: dict[str, tuple[int, list[float]]] = {}  # Moses group -> (first line, values)
    single: list[tuple[str, float, int]] = []  # (name, value, line) of Joshua lines and pairs
    for number, tokens in rows:
        if len(tokens[0]) > 1 and tokens[0].endswith("="):
            _moses_groups(tokens, groups, path, number)
        elif moses_only:
            raise InputError(f"expected `name= v1 v2` in the [weight] section, got {' '.join(tokens)!r}", path, number)
        elif joshua and tokens[:2] == ["weights", "="]:  # Joshua's `weights = name value name value ...`
            if len(tokens) % 2:
                raise InputError("`weights =` needs name value pairs", path, number)
            single.extend((n, _value(v, n, path, number), number) for n, v in zip(tokens[2::2], tokens[3::2]))
        elif joshua and "=" in " ".join(tokens):
            continue  # a Joshua config parameter (`key = value`, `key=value`)
        elif len(tokens) == 2 and "=" not in tokens[0] + tokens[1]:
            single.append((tokens[0], _value(tokens[1], tokens[0], path, number), number))
        elif all("=" in t[1:] and not t.endswith("=") for t in tokens):
            for name, _, value in (t.partition("=") for t in tokens):
                single.append((name, _value(value, name, path, number), number))
        else:
            raise InputError(f"cannot read {' '.join(tokens)!r} as weights (weights formats: {WEIGHT_FORMATS})", path, number)
    if not groups and not single:
        raise InputError(f"no weights found (weights formats: {WEIGHT_FORMATS})", path)
    return _merge_weights(groups, single, path)


def _moses_groups(tokens: list[str], groups: dict, path: str, number: int) -> None:
    """`name= v1 v2 name2= v3` appended to `groups` (a name seen before continues its group)."""
    counts: list[list] = []  # [name, values on this line] per `name=` token
    for token in tokens:
        if token.endswith("="):
            if token == "=":
                raise InputError("'=' without a weight name", path, number)
            counts.append([token[:-1], 0])
        else:
            name = counts[-1][0]
            groups.setdefault(name, (number, []))[1].append(_value(token, name, path, number))
            counts[-1][1] += 1
    for name, count in counts:
        if not count:
            raise InputError(f"weight {name!r} has no value", path, number)


def _value(token: str, name: str, path: str, number: int) -> float:
    return parse_number(token, f"weight of {name!r}", path, number)


def _merge_weights(groups: dict, single: list, path: str) -> dict[str, float]:
    """Groups expanded to columns (`tm_0`, `tm_1`; a single value keeps the name) and the single weights."""
    weights: dict[str, float] = {}
    origin: dict[str, str] = {}
    entries: list[tuple[str, float, int, str]] = []
    for group, (number, values) in groups.items():
        names = [group] if len(values) == 1 else [f"{group}_{k}" for k in range(len(values))]
        where = f"line {number}" if len(values) == 1 else f"line {number}, as a column of the group {group!r}"
        entries.extend((name, value, number, where) for name, value in zip(names, values))
    for name, value, number in single:
        entries.append((name, value, number, f"line {number}"))
    for name, value, number, where in sorted(entries, key=lambda e: e[2]):  # file order (stable)
        if name in weights:
            raise InputError(f"weight {name!r} given twice (first on {origin[name]})", path, number)
        weights[name], origin[name] = value, where
    return weights


def write_weights(path: str, weights: dict[str, float], meta: dict | None = None) -> None:
    payload = {"weights": {k: float(v) for k, v in weights.items()}, "meta": meta or {}}
    with atomic_write(path) as out:
        json.dump(payload, out, indent=2)
        out.write("\n")


def tuned_toward(path: str) -> list[str]:
    """The columns a weights file was tuned toward (`rerank tune --metric column:NAME` records them
    as the meta's `objective_columns`): no features, so a list that carries them ranks with weight 0
    on them, unwarned. Empty for every other file."""
    text = "\n".join(line for _, line in iter_lines(path)).strip()
    if not text.startswith("{"):
        return []
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return []  # read_weights says what is wrong with it
    meta = data.get("meta") if isinstance(data, dict) else None
    columns = meta.get("objective_columns") if isinstance(meta, dict) else None
    return [str(c) for c in columns] if isinstance(columns, list) else []


def weight_vector(weights: dict[str, float], feature_names: list[str], source: str = "weights",
                  warn: Callable[[str], object] | None = None, objective: Collection[str] = ()) -> np.ndarray:
    """Align weights to the n-best's columns: unknown names with a nonzero weight are errors (a weight
    of 0 changes no ranking: a column the dev list had but the tuner left at 0, said), missing ones
    get 0 (warned, except the `objective` columns the weights were tuned toward, which are no
    features)."""
    unknown = [name for name in weights if name not in feature_names]
    nonzero = [name for name in unknown if weights[name] != 0]
    if nonzero:
        raise InputError(f"weights for features the n-best lacks: {', '.join(nonzero)} "
                         f"(n-best has: {', '.join(feature_names)})", source)
    if unknown:
        (warn or log.warning)(f"note: {source}: weight 0 for {', '.join(unknown)}, which the n-best lacks; "
                              "it changes nothing")
    missing = [name for name in feature_names if name not in weights and name not in objective]
    if missing:
        (warn or log.warning)(f"warning: {source}: no weight for {', '.join(missing)}; using 0")
    return np.array([weights.get(name, 0.0) for name in feature_names], dtype=np.float64)


SCORE_ROWS = 4096  # rows scored at a time (a block stays in the CPU caches)


def window_scores(features: np.ndarray, w: np.ndarray) -> np.ndarray:
    """w·f of every row, summed over the columns from the first: f0*w0 + f1*w1 + ... in IEEE
    double, one column of a SCORE_ROWS-row block at a time. A row's score depends on its own
    values only: a BLAS matrix-vector product rounds a row by where it falls in the matrix (the
    last rows are summed apart), so a list read whole, a block at a time or with rows left out
    (tuning merges duplicates) would rank near-ties differently. Tuning, `rerank apply` (whole or
    streamed) and `rerank eval --weights` all rank with this sum (`best_rows`)."""
    features = np.asarray(features, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    out = np.zeros(len(features))
    with np.errstate(over="ignore", invalid="ignore"):
        for start in range(0, len(features), SCORE_ROWS):
            block, acc = features[start:start + SCORE_ROWS], out[start:start + SCORE_ROWS]
            for k in range(block.shape[1]):
                acc += block[:, k] * w[k]
    bad = np.flatnonzero(~np.isfinite(out))
    if len(bad):
        raise InputError(f"the model score w·f of hypothesis {int(bad[0])} is {out[bad[0]]}: its features times the "
                         "weights overflow the float range")
    return out


def model_scores(nbest: NBestList, w: np.ndarray) -> np.ndarray:
    """w·f of every hypothesis (`window_scores`)."""
    return window_scores(nbest.features, w)


def best_rows(nbest: NBestList, w: np.ndarray) -> np.ndarray:
    """Row of the arg-max hypothesis of every sentence under w·f (`window_scores`); ties go to the
    earlier hypothesis (`segment_argmax`). The one ranking of tuning and of `rerank apply`."""
    return segment_argmax(model_scores(nbest, w), nbest.offsets)


def resorted(nbest: NBestList, w: np.ndarray, scores: np.ndarray | None = None) -> NBestList:
    """Each list sorted by model score (`scores`, else computed), best first (stable: ties keep the original order)."""
    scores = model_scores(nbest, w) if scores is None else scores
    order = np.lexsort((nbest.rank_of_hyp, -scores, nbest.sentence_of_hyp))
    out = nbest.reorder(order)
    return NBestList(out.offsets, out.hyps, out.features, out.feature_names, out.groups, scores[order], dict(nbest.missing))
