"""`rerank embed train|eval|encode|extract-image-features`: multilingual multi-modal sentence
embeddings (Calixto & Liu 2017; VSE of Kiros et al. 2014 with K=1, beta=1)."""

from __future__ import annotations

import argparse
import json
import os
import sys

from rerank.embeddings.commands_extra import add_backretrieval, add_pseudopairs
from rerank.cliargs import nonnegative_float, nonnegative_int, positive_float, positive_int, terminal_bars
from rerank.device import add_torch_options, check_run_dir, setup_torch
from rerank.errors import InputError
from rerank.options import Writing, add_option_flags
from rerank.io import atomic_write, read_lines
from rerank.outputs import check_outputs


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "embed", help="train, evaluate and apply multilingual multi-modal sentence embeddings",
        description="Sentence embeddings in a joint image/multilingual space (one GRU per language, "
        "image features projected linearly, hinge ranking losses). They give the reranking features "
        "s_s (sentence-sentence cosine) and s_i (image-sentence cosine).",
        epilog="Example: rerank embed train --config cfg.json --data-dir DATA/multi30k --out runs/emb "
        "--max-minutes 30; rerank embed eval --model runs/emb/model.pt --data-dir DATA/multi30k "
        "--sts-dir DATA/sts. Multi-GPU / multi-process: torchrun --nproc_per_node N -m rerank embed train ... "
        "See docs/embeddings.md.")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True
    _add_train(verbs)
    _add_eval(verbs)
    _add_encode(verbs)
    _add_extract(verbs)
    add_pseudopairs(verbs)
    add_backretrieval(verbs)


def _add_train(verbs) -> None:
    from rerank.embeddings.config import MODES, PRESETS

    t = verbs.add_parser("train", help="train (or resume) a model",
                         description="Train on Multi30k (comparable task2 and/or translated task1). Without "
                         "image features the text-only model is trained (beta = 0). Resumes from "
                         "OUT/checkpoint.pt if present. The best model (validation on the first 500 val "
                         "images) is OUT/model.pt + OUT/model.json.")
    t.add_argument("--config", help="JSON config (keys as in embeddings/config.py DEFAULTS; default: none)")
    t.add_argument("--data-dir", required=True, help="Multi30k directory (task1/, task2/)")
    t.add_argument("--out", required=True, help="run directory (checkpoints, log, config, model)")
    t.add_argument("--preset", "--size", dest="preset", choices=list(PRESETS),
                   help="network sizes, the same words as `nmt train --preset`; overrides the config "
                   "(--size: alias; default: the config's, else cpu)")
    t.add_argument("--languages", help="comma-separated, e.g. en,de (default: the config's, else en,de)")
    t.add_argument("--sources", help="comma-separated: task2 (comparable), task1 (translated) "
                   "(default: the config's, else task2,task1)")
    t.add_argument("--contrastive", choices=list(MODES), help="(default: the config's, else random)")
    t.add_argument("--train-features", help="image features for the train split (.npy/.npz; default: none, "
                   "text-only)")
    t.add_argument("--val-features", help="image features for the val split (.npy/.npz; default: none)")
    t.add_argument("--max-minutes", type=positive_float,
                   help="wall-clock budget of this invocation, spent in whole epochs: training stops before an "
                   "epoch that would end after it (expected epoch time = the mean of the run's epochs so far; "
                   "default: the config's, else none)")
    t.add_argument("--max-epochs", type=positive_int, help="(default: the config's, else 30)")
    t.add_argument("--seed", type=nonnegative_int, help="(default: the config's, else 1234)")
    t.add_argument("--no-resume", action="store_true", help="ignore an existing checkpoint")
    _add_train_extras(t)
    add_option_flags(t, Writing)
    add_torch_options(t)
    t.set_defaults(func=run_train)


def _add_train_extras(t) -> None:
    """Options of issue 14: c2c pairs, AME alignment, pseudo-pairs, fine-tuning."""
    t.add_argument("--comparable-pairs", choices=["index", "all"],
                   help="task2 tuples per image: caption j with caption j (index, 5) or every cross-language caption "
                   "pair (all, 25 for en-de: the c2c data of Kadar et al.) (default: the config's, else index)")
    t.add_argument("--align-loss", choices=["rcsls"], help="keep the word embeddings of two languages aligned with a "
                   "bilingual dictionary (RCSLS, summed with the ranking loss as AME) (default: the config's, else none)")
    t.add_argument("--dictionary", help="bilingual dictionary for --align-loss, `src<TAB>tgt` per line, e.g. MUSE en-de "
                   "(default: the config's, else none)")
    t.add_argument("--align-weight", type=nonnegative_float, help="weight of the alignment loss (default: the config's, "
                   "else 1.0, the paper's equal sum)")
    t.add_argument("--pseudo-pairs", action="append", metavar="TSV", help="pseudo-pair file of `rerank embed "
                   "pseudopairs` as extra caption-caption data (repeatable; default: the config's, else none)")
    t.add_argument("--pseudo-src-lang", help="language of the source captions (2nd column) of --pseudo-pairs "
                   "(default: the run's first language)")
    t.add_argument("--pseudo-tgt-lang", help="language of the target captions (1st column) of --pseudo-pairs "
                   "(default: the run's second language)")
    t.add_argument("--init", metavar="MODEL", help="fine-tune this model (its vocabularies, sizes and weights) "
                   "(default: the config's, else train from scratch)")


def _add_eval(verbs) -> None:
    e = verbs.add_parser("eval", help="evaluate a model (ranking, translation retrieval, STS)",
                         description="Image<->sentence recall (val images 501-1014, needs --val-features and an "
                         "image model), en<->de translation retrieval on test_2016, STS Pearson on SemEval "
                         "2014/2015 images. Writes a Markdown and a JSON report next to the model.")
    e.add_argument("--model", required=True, help="model .pt (its .json beside it) or run directory")
    e.add_argument("--data-dir", help="Multi30k directory (default: none, no ranking or retrieval)")
    e.add_argument("--sts-dir", help="directory with sts2014-images.test.tsv and sts2015-images.test.tsv "
                   "(default: none)")
    e.add_argument("--val-features", help="image features for the val split (default: none)")
    e.add_argument("--dictionary", help="bilingual dictionary (`src<TAB>tgt` per line): report the alignment ratio of "
                   "the word embeddings (AME) (default: none)")
    e.add_argument("--out", help="report path stem (default: MODEL without .pt + .eval)")
    add_torch_options(e)
    e.set_defaults(func=run_eval)


def _add_encode(verbs) -> None:
    n = verbs.add_parser("encode", help="encode sentences (or image features) to a .npy matrix",
                         description="One sentence per input line (raw text; tokenised and lower-cased "
                         "internally) -> float32 (N, dim) unit vectors in .npy. An input without lines is "
                         "refused.")
    n.add_argument("--model", required=True, help="model .pt (its .json beside it) or run directory")
    n.add_argument("--lang", help="language of the sentences (default: none; needed with --input)")
    n.add_argument("--input", help="text file (gzip ok), one sentence per line (default: none)")
    n.add_argument("--image-features", help="encode these image features instead of sentences (default: none)")
    n.add_argument("-o", "--output", required=True, help=".npy output")
    n.add_argument("--batch-size", type=positive_int, default=256, help="rows per batch (default: %(default)s)")
    n.add_argument("--empty", choices=["error", "zero"], default="error",
                   help="what to do with empty lines: refuse them, or give them a zero vector (default: %(default)s)")
    add_torch_options(n)
    n.set_defaults(func=run_encode)


def _add_extract(verbs) -> None:
    x = verbs.add_parser("extract-image-features", help="CNN features for a list of images",
                         description="VGG19 fc7 (4096-d) or ResNet-50 pool5 (2048-d) features, one row per "
                         "line of --list, from a torchvision weights file given by path (nothing is "
                         "downloaded). Uses torchvision if it imports, else equivalent plain-torch networks.")
    x.add_argument("--images", required=True, help="image directory")
    x.add_argument("--list", required=True, help="image file names, one per line (e.g. train.txt)")
    x.add_argument("--backbone", required=True, choices=["vgg19-fc7", "resnet50-pool5"])
    x.add_argument("--weights", required=True, help="torchvision state_dict (.pth), e.g. vgg19-dcbb9e9d.pth")
    x.add_argument("--output", required=True, help=".npy output (its settings go to the .json beside it)")
    x.add_argument("--batch-size", type=positive_int, default=32, help="images per batch (default: %(default)s)")
    add_torch_options(x)
    x.set_defaults(func=run_extract)


def _config(args: argparse.Namespace) -> dict:
    """The config file's settings, overridden by the options given."""
    cfg = {}
    if args.config:
        try:
            with open(args.config, encoding="utf-8") as f:
                cfg = json.load(f)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InputError(f"cannot read config: {exc}", args.config) from None
        if not isinstance(cfg, dict):
            raise InputError("cannot read config: expected a JSON object of settings", args.config)
    for key in ("preset", "contrastive", "max_minutes", "max_epochs", "seed"):
        if getattr(args, key) is not None:
            cfg[key] = getattr(args, key)
    if args.languages:
        cfg["languages"] = args.languages.split(",")
    if args.sources:
        cfg["sources"] = args.sources.split(",")
    if args.train_features or args.val_features:
        cfg["image_features"] = {**cfg.get("image_features", {}), "train": args.train_features, "val": args.val_features}
    for key in ("comparable_pairs", "align_loss", "dictionary", "align_weight", "init"):
        if getattr(args, key) is not None:
            cfg[key] = getattr(args, key)
    if args.pseudo_pairs:
        langs = cfg.get("languages") or ["en", "de"]
        src, tgt = args.pseudo_src_lang or langs[0], args.pseudo_tgt_lang or langs[-1]
        cfg["pseudo_pairs"] = [*cfg.get("pseudo_pairs", []),
                               *({"file": f, "src_lang": src, "tgt_lang": tgt} for f in args.pseudo_pairs)]
    return cfg


def _echo(line: str) -> None:
    """A line of the training log on stderr, between the lines of a progress bar."""
    from tqdm import tqdm

    tqdm.write(line, file=sys.stderr)


def run_train(args: argparse.Namespace) -> int:
    from rerank.embeddings.train import train

    device = setup_torch(args)
    check_run_dir(args.out)
    path = train(_config(args), args.data_dir, args.out, device, resume=not args.no_resume, echo=_echo,
                 progress=terminal_bars(), wait=args.wait)
    print(path)
    return 0


def run_eval(args: argparse.Namespace) -> int:
    from rerank.embeddings.encoder import Encoder, model_paths
    from rerank.embeddings.evaluate import evaluate, to_markdown, write_report

    device = setup_torch(args)
    stem = args.out or model_paths(args.model)[0][:-3] + ".eval"
    check_outputs([stem + ".json", stem + ".md"], [*model_paths(args.model), args.val_features, args.dictionary])
    enc = Encoder.load(args.model)
    report = evaluate(enc, args.data_dir, args.sts_dir, {"val": args.val_features}, device, dictionary=args.dictionary)
    report["model"] = model_paths(args.model)[0]
    js, md = write_report(report, stem)
    print(to_markdown(report))
    print(f"reports: {md} {js}", file=sys.stderr)
    return 0


def run_encode(args: argparse.Namespace) -> int:
    import numpy as np

    from rerank.embeddings.encoder import Encoder, model_paths

    device = setup_torch(args)
    if not args.image_features and not (args.input and args.lang):
        raise InputError("give --input and --lang (or --image-features)")
    check_outputs([args.output], [*model_paths(args.model), args.input, args.image_features])
    enc = Encoder.load(args.model)
    if args.image_features:
        from rerank.embeddings.data import load_features

        if not enc.has_images:
            raise InputError("this model was trained without images (text-only): it cannot encode image features",
                             args.model)
        vec = enc.encode_images(load_features(args.image_features, None, enc.model.cfg.image_dim), device=device)
    else:
        lines = read_lines(args.input)
        if not lines:
            raise InputError("no lines to encode (the input is empty)", args.input)
        vec = enc.encode(lines, args.lang, args.batch_size, device, empty=args.empty, progress=terminal_bars())
    with atomic_write(args.output, "wb") as f:
        np.save(f, vec)
    print(f"{args.output}: {vec.shape[0]} x {vec.shape[1]}", file=sys.stderr)
    return 0


def run_extract(args: argparse.Namespace) -> int:
    import numpy as np

    from rerank.embeddings.images import extract_features

    device = setup_torch(args)
    settings = os.path.splitext(args.output)[0] + ".json"
    check_outputs([args.output, settings], [args.list, args.weights])
    names = [x.strip() for x in read_lines(args.list)]
    if not names or any(not x for x in names):
        raise InputError("the image list is empty or has empty lines", args.list)
    feats = extract_features(args.images, names, args.backbone, args.weights, args.batch_size, device)
    with atomic_write(args.output, "wb") as f:
        np.save(f, feats)
    with atomic_write(settings) as f:
        json.dump({"backbone": args.backbone, "weights": os.path.abspath(args.weights), "list": os.path.abspath(args.list),
                   "images": os.path.abspath(args.images), "shape": list(feats.shape)}, f, indent=1)
    print(f"{args.output}: {feats.shape[0]} x {feats.shape[1]}", file=sys.stderr)
    return 0
