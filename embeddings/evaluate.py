"""Evaluation of embedding models: image<->sentence ranking (Calixto & Liu protocol), translation
retrieval (Kadar et al. Table 7) and STS Pearson r (Calixto & Liu Table 2).

Protocol: M30k_C val is split in two -- the first 500 images for model selection, the other 514
for evaluation, 5 captions per image. Translation retrieval uses task1 test_2016 (1000 pairs).
"""

from __future__ import annotations

import json
import os

import numpy as np
from scipy.stats import pearsonr

from rerank.embeddings.data import image_list, load_comparable, load_features, load_translated
from rerank.errors import InputError
from rerank.io import atomic_write, iter_lines

SELECT_IMAGES = 500
STS_FILES = {"sts2014-images": "sts2014-images.test.tsv", "sts2015-images": "sts2015-images.test.tsv"}


def recall_summary(ranks: np.ndarray) -> dict:
    """R@1/5/10 in percent and the median rank, from 1-based ranks."""
    ranks = np.asarray(ranks)
    return {"r1": float(100 * np.mean(ranks <= 1)), "r5": float(100 * np.mean(ranks <= 5)),
            "r10": float(100 * np.mean(ranks <= 10)), "medr": float(np.median(ranks)), "n": int(len(ranks))}


def paired_ranks(queries: np.ndarray, items: np.ndarray) -> np.ndarray:
    """Rank (1-based) of items[i] for queries[i] among all items (ties count in its favour)."""
    sims = queries @ items.T
    gold = np.diag(sims)
    return (sims > gold[:, None]).sum(1) + 1


def image_sentence_ranks(images: np.ndarray, captions: np.ndarray, per_image: int) -> tuple[np.ndarray, np.ndarray]:
    """captions[c] describes images[c // per_image]. Returns (image->text ranks of the best
    correct caption per image, text->image rank of the right image per caption)."""
    n = len(images)
    if len(captions) != n * per_image:
        raise ValueError("captions must hold per_image rows for every image")
    sims = images @ captions.T                                    # (n, n * per_image)
    owner = np.arange(len(captions)) // per_image
    best = sims.reshape(n, n, per_image)[np.arange(n), np.arange(n)].max(1)
    i2t = (sims > best[:, None]).sum(1) + 1
    gold = sims[owner, np.arange(len(captions))]
    t2i = (sims > gold[None, :]).sum(0) + 1
    return i2t, t2i


def read_sts(path: str) -> tuple[list[str], list[str], np.ndarray]:
    """STS TSV (gold, sentence 1, sentence 2); rows without a gold score are skipped. Read through
    rerank.io (gzip, byte-order mark, bytes that are not UTF-8 named by line)."""
    s1, s2, gold = [], [], []
    for number, line in iter_lines(path):
        row = line.split("\t")
        if len(row) != 3:
            raise InputError(f"expected 3 tab-separated fields, found {len(row)}", path, number)
        if not row[0].strip():
            continue
        try:
            value = float(row[0])
        except ValueError:
            raise InputError(f"gold score {row[0]!r} is not a number", path, number) from None
        if not np.isfinite(value):
            raise InputError(f"gold score {row[0]!r} is not finite", path, number)
        gold.append(value)
        s1.append(row[1])
        s2.append(row[2])
    return s1, s2, np.asarray(gold)


def sts_pearson(encoder, path: str, lang: str = "en", device: str = "cpu") -> dict:
    s1, s2, gold = read_sts(path)
    a = encoder.encode(s1, lang, device=device, empty="zero")
    b = encoder.encode(s2, lang, device=device, empty="zero")
    pred = 5 * (a * b).sum(1)
    return {"pearson": float(pearsonr(pred, gold)[0]), "n": int(len(gold))}


def retrieval_both_ways(encoder, data_dir: str, split: str, languages: list[str], limit: slice | None = None,
                        device: str = "cpu") -> dict:
    """{"a->b": recall_summary} for every ordered pair of `languages` on task1 `split`, each
    language's captions read and encoded once (a pair's two directions share the vectors)."""
    cap = load_translated(data_dir, split, languages)
    vectors = {lang: encoder.encode(cap[lang] if limit is None else cap[lang][limit], lang, device=device, empty="zero")
               for lang in languages}
    out = {}
    for i, src in enumerate(languages):
        for tgt in languages[i + 1:]:
            for a, b in ((src, tgt), (tgt, src)):
                out[f"{a}->{b}"] = recall_summary(paired_ranks(vectors[a], vectors[b]))
    return out


def image_sentence(encoder, data_dir: str, features: str, lang: str, images: slice, device: str = "cpu") -> dict:
    """i2t / t2i recalls on M30k_C val images `images` with the 5 captions in `lang`."""
    names = image_list(data_dir, "val", "task2")
    feats = load_features(features, len(names), encoder.model.cfg.image_dim)[images]
    cols = load_comparable(data_dir, "val", [lang])[lang]
    caps = [cols[k][i] for i in range(len(names))[images] for k in range(5)]
    vi = encoder.encode_images(feats, device=device)
    vc = encoder.encode(caps, lang, device=device, empty="zero")
    i2t, t2i = image_sentence_ranks(vi, vc, 5)
    return {"i2t": recall_summary(i2t), "t2i": recall_summary(t2i)}


def selection_score(encoder, data_dir: str, languages: list[str], val_features: str | None, device: str = "cpu",
                    select_images: int = SELECT_IMAGES) -> tuple[float, dict]:
    """Model-selection criterion on the first 500 val images: sum of R@1+R@5+R@10 over
    image<->sentence (if images) and translation retrieval between language pairs (task1 val)."""
    parts, score = {}, 0.0
    first = slice(0, select_images)
    if val_features and encoder.has_images:
        for lang in [x for x in languages if x in ("en", "de")]:
            r = image_sentence(encoder, data_dir, val_features, lang, first, device)
            parts[f"img-{lang}"] = r
            score += sum(r[d][k] for d in ("i2t", "t2i") for k in ("r1", "r5", "r10"))
    for key, r in retrieval_both_ways(encoder, data_dir, "val", languages, first, device).items():
        parts[key] = r
        score += r["r1"] + r["r5"] + r["r10"]
    return score, parts


def alignment(encoder, dictionary: str, languages: list[str] | None = None) -> dict:
    """004's alignment ratio of the model's word embeddings over a bilingual dictionary
    (embeddings.align.alignment_ratio), for the model's aligned pair, else `languages` or its
    first two languages, with its learned map W if it has one."""
    from rerank.embeddings.align import Aligner

    pairs = encoder.model.cfg.align_pairs
    src, tgt = languages or (pairs[0] if pairs else encoder.languages[:2])
    if len(encoder.languages) < 2 or src not in encoder.languages or tgt not in encoder.languages:
        raise InputError(f"alignment ratio {src}-{tgt}: the model has languages {', '.join(encoder.languages)}")
    result = Aligner.build(dictionary, src, tgt, encoder.vocabs).ratio(encoder.model)
    result["learned_map"] = encoder.model.align_map(src, tgt) is not None
    return result


def evaluate(encoder, data_dir: str | None, sts_dir: str | None = None, image_features: dict | None = None,
             device: str = "cpu", select_images: int = SELECT_IMAGES, dictionary: str | None = None) -> dict:
    """Full report: image<->sentence (val images 500-1013), translation retrieval on test_2016 and
    on all of task1 val (the set that chooses: training selects on its first 500 pairs), STS
    Pearson on SemEval 2014/2015 images (English), the alignment ratio over `dictionary`."""
    image_features = image_features or {}
    langs = encoder.languages
    uses_images = bool(encoder.has_images and image_features.get("val"))
    report = {"languages": langs, "model_has_images": encoder.has_images, "uses_images": uses_images,
              "training": encoder.meta.get("training", {}), "image_sentence": {}, "translation_retrieval": {},
              "translation_retrieval_val": {}, "sts": {}}
    if data_dir:
        if uses_images:
            rest = slice(select_images, None)
            for lang in [x for x in langs if x in ("en", "de")]:
                report["image_sentence"][lang] = image_sentence(encoder, data_dir, image_features["val"], lang, rest, device)
        else:
            report["image_sentence_note"] = ("not evaluated: text-only model" if not encoder.has_images
                                             else "not evaluated: no val image features given")
        report["translation_retrieval"] = retrieval_both_ways(encoder, data_dir, "test_2016", langs, None, device)
        report["translation_retrieval_val"] = retrieval_both_ways(encoder, data_dir, "val", langs, None, device)
    if sts_dir and "en" in langs:
        for name, fname in STS_FILES.items():
            path = os.path.join(sts_dir, fname)
            if os.path.exists(path):
                report["sts"][name] = sts_pearson(encoder, path, "en", device)
    if dictionary:
        report["alignment"] = alignment(encoder, dictionary)
    return report


def to_markdown(report: dict) -> str:
    """The report as Markdown tables."""
    images = "yes" if report["uses_images"] else "no (text-only)" if not report["model_has_images"] else "no"
    lines = ["# Embedding model evaluation", "", f"Languages: {', '.join(report['languages'])}. Images used: {images}.", ""]
    tr = report.get("training") or {}
    if tr:
        c = tr.get("config", {})
        lines += [f"Training: preset {c.get('preset')}, contrastive {c.get('contrastive')}, dropout {c.get('dropout')}, "
                  f"sources {c.get('sources')}; {tr.get('images', '')}; step {tr.get('step')} (epoch {tr.get('epoch')}) "
                  f"of {tr.get('final_step', '?')}, {tr.get('final_status', tr.get('status', ''))}.", ""]
    if report["image_sentence"]:
        lines += ["## Image-sentence ranking (M30k_C val images 501-1014, 5 captions each)", "",
                  "| lang | dir | R@1 | R@5 | R@10 | MedR |", "|---|---|---|---|---|---|"]
        for lang, r in report["image_sentence"].items():
            for d in ("i2t", "t2i"):
                x = r[d]
                lines.append(f"| {lang} | {d} | {x['r1']:.1f} | {x['r5']:.1f} | {x['r10']:.1f} | {x['medr']:.0f} |")
        lines.append("")
    elif report.get("image_sentence_note"):
        lines += [f"Image-sentence ranking: {report['image_sentence_note']}.", ""]
    if report["translation_retrieval"]:
        lines += ["## Translation retrieval (task1 test_2016, 1000 pairs)", "",
                  "| direction | R@1 | R@5 | R@10 | MedR |", "|---|---|---|---|---|"]
        for d, x in report["translation_retrieval"].items():
            lines.append(f"| {d} | {x['r1']:.1f} | {x['r5']:.1f} | {x['r10']:.1f} | {x['medr']:.0f} |")
        lines.append("")
    if report.get("translation_retrieval_val"):
        lines += ["## Translation retrieval (task1 val, all pairs: the selection set)", "",
                  "| direction | R@1 | R@5 | R@10 | MedR |", "|---|---|---|---|---|"]
        for d, x in report["translation_retrieval_val"].items():
            lines.append(f"| {d} | {x['r1']:.1f} | {x['r5']:.1f} | {x['r10']:.1f} | {x['medr']:.0f} |")
        lines.append("")
    if report.get("alignment"):
        a = report["alignment"]
        lines += ["## Word alignment ratio (AME, P@1 of dictionary translations, %)", "",
                  "| pair | map | pairs | src->tgt | tgt->src | mean |", "|---|---|---|---|---|---|",
                  f"| {a['languages']} | {'learned W' if a['learned_map'] else 'identity'} | {a['pairs']} | "
                  f"{a['src->tgt']:.2f} | {a['tgt->src']:.2f} | {a['mean']:.2f} |", ""]
    if report["sts"]:
        lines += ["## STS (Pearson r of 5 cos with gold)", "", "| set | pairs | Pearson r |", "|---|---|---|"]
        for name, x in report["sts"].items():
            lines.append(f"| {name} | {x['n']} | {x['pearson']:.3f} |")
        lines.append("")
    return "\n".join(lines)


def write_report(report: dict, stem: str) -> tuple[str, str]:
    """Write STEM.json and STEM.md; returns their paths."""
    with atomic_write(stem + ".json") as f:
        json.dump(report, f, indent=1)
    with atomic_write(stem + ".md") as f:
        f.write(to_markdown(report))
    return stem + ".json", stem + ".md"
