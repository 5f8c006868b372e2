"""A Transformer channel model of our own through the Hugging Face path (issue 27, item 6).

    python -m rerank.recipes.marian_channel train --out runs/marian [--minutes 50] [--threads 1]
    python -m rerank.recipes.marian_channel compare --model runs/marian/model --out runs/marian/compare [--publish]

`train` trains a small transformers Marian encoder-decoder German -> English on Multi30k (task1
train, 29,000 pairs) with a joint BPE tokenizer made by recipes/tiny_models.py's
`train_tokenizer` (Metaspace, `</s>` appended, `<pad>` the last id: an OPUS-MT-style model for
nmt/backends.py and the CTranslate2 converter). A plain torch loop: AdamW, inverse-square-root
schedule with warmup, label smoothing, token-budget batches, a fixed seed, a resumable checkpoint
(model, optimizer, step, epoch position, RNG) every few minutes, validation loss each epoch (or
every N steps); the best model by validation loss is saved as a save_pretrained directory
OUT/model with its tokenizer. `<pad>` is outside the softmax in training as in scoring (the
backend bans it, as OPUS-MT models ban it from generation).

`compare` scores the shipped lists with the model through the users'-model backend (columns
channel_tf, channel_tf_norm beside the shipped GRU channel and lm columns), tunes k-best MIRA on
val for the systems of `comparison_systems` (each channel alone, each with the LM, both with the
LM) on the same seeds, evaluates them on test_2016 with significance against the GRU system, and
gives each channel score's own argmax BLEU; `--publish` renders it into docs/results/stronger.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
import time
from typing import Any

from rerank.cliargs import add_threads_option

DATA = os.path.join("..", "shared", "data", "multi30k", "task1", "raw")
logger = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- training


def _log(path: str | None, msg: str) -> None:
    """An INFO record of this module's logger, and the line with its time in the run's log file."""
    line = time.strftime("%Y-%m-%d %H:%M:%S") + " " + msg
    logger.info(line)
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


def _read(path: str) -> list[str]:
    from rerank.io import read_lines

    return [line.strip() for line in read_lines(path)]


def _config(args) -> dict:
    keys = ["train_src", "train_tgt", "val_src", "val_tgt", "vocab_size", "d_model", "layers", "heads", "ffn",
            "dropout", "lr", "warmup", "betas", "weight_decay", "label_smoothing", "batch_tokens", "max_len", "seed",
            "minutes", "epochs", "max_steps", "val_every", "checkpoint_minutes", "threads"]
    return {k: getattr(args, k) for k in keys}


def _tokenizer(out: str, config: dict, log):
    """The joint BPE tokenizer, trained once on the training text (both sides) and reused on resume."""
    from transformers import PreTrainedTokenizerFast

    from rerank.recipes.tiny_models import train_tokenizer

    path = os.path.join(out, "tokenizer")
    if os.path.isfile(os.path.join(path, "tokenizer.json")):
        return PreTrainedTokenizerFast.from_pretrained(path)
    lines = [s for p in (config["train_src"], config["train_tgt"]) for s in _read(p) if s]
    tokenizer = train_tokenizer(lines, vocab_size=config["vocab_size"])
    tokenizer.save_pretrained(path)
    log(f"tokenizer: {len(tokenizer)} ids, <pad> = {tokenizer.pad_token_id}, </s> = {tokenizer.eos_token_id}")
    return tokenizer


def build_model(tokenizer, config: dict):
    from transformers import MarianConfig, MarianMTModel

    pad, eos = tokenizer.pad_token_id, tokenizer.eos_token_id
    mc = MarianConfig(vocab_size=len(tokenizer), d_model=config["d_model"], encoder_layers=config["layers"],
                      decoder_layers=config["layers"], encoder_attention_heads=config["heads"],
                      decoder_attention_heads=config["heads"], encoder_ffn_dim=config["ffn"],
                      decoder_ffn_dim=config["ffn"], dropout=config["dropout"], attention_dropout=0.0,
                      activation_dropout=0.0, max_position_embeddings=max(256, config["max_len"] + 2),
                      scale_embedding=True, share_encoder_decoder_embeddings=True, tie_word_embeddings=True,
                      pad_token_id=pad, eos_token_id=eos, decoder_start_token_id=pad, forced_eos_token_id=eos,
                      bad_words_ids=[[pad]])
    model = MarianMTModel(mc)
    model.generation_config.bad_words_ids = [[pad]]
    model.generation_config.decoder_start_token_id = pad
    model.generation_config.pad_token_id = pad
    model.generation_config.eos_token_id = eos
    model.generation_config.max_length = config["max_len"] + 2
    model.generation_config.num_beams = 1
    return model


def encode_pairs(tokenizer, src: list[str], tgt: list[str], max_len: int) -> list[tuple[list[int], list[int]]]:
    """Token ids of (source, target) pairs, `</s>` on both; pairs with an empty side or a side
    longer than max_len are left out."""
    s_ids = tokenizer(src)["input_ids"]
    t_ids = tokenizer(text_target=tgt)["input_ids"]
    return [(s, t) for s, t, a, b in zip(s_ids, t_ids, src, tgt)
            if a and b and len(s) <= max_len and len(t) <= max_len]


def epoch_batches(pairs, budget: int, seed: int, epoch: int) -> list[list[int]]:
    """The batches of one epoch: a seeded shuffle, a stable sort by length (so equal lengths keep
    the random order), cut by padded tokens (src + tgt), and the batch order shuffled."""
    import torch

    g = torch.Generator().manual_seed(seed * 100003 + epoch)
    order = torch.randperm(len(pairs), generator=g).tolist()
    order.sort(key=lambda i: (len(pairs[i][1]), len(pairs[i][0])))
    batches: list[list[int]] = []
    batch: list[int] = []
    ls, lt = 0, 0
    for i in order:
        s, t = len(pairs[i][0]), len(pairs[i][1])
        if batch and (max(ls, s) + max(lt, t)) * (len(batch) + 1) > budget:
            batches.append(batch)
            batch, ls, lt = [], 0, 0
        batch.append(i)
        ls, lt = max(ls, s), max(lt, t)
    if batch:
        batches.append(batch)
    perm = torch.randperm(len(batches), generator=g).tolist()
    return [batches[k] for k in perm]


def _tensors(torch, pairs, idx: list[int], pad: int):
    src = [pairs[i][0] for i in idx]
    tgt = [pairs[i][1] for i in idx]
    ws, wt = max(map(len, src)), max(map(len, tgt))
    input_ids = torch.tensor([s + [pad] * (ws - len(s)) for s in src])
    attn = torch.tensor([[1] * len(s) + [0] * (ws - len(s)) for s in src])
    dec = torch.tensor([[pad] + t[:-1] + [pad] * (wt - len(t)) for t in tgt])
    dec_mask = torch.tensor([[1] * len(t) + [0] * (wt - len(t)) for t in tgt])
    labels = torch.tensor([t + [-1] * (wt - len(t)) for t in tgt])
    return input_ids, attn, dec, dec_mask, labels


def batch_loss(torch, model, pairs, idx, pad: int, smoothing: float):
    """(smoothed loss summed over target tokens, NLL summed, tokens) with `<pad>` outside the softmax."""
    input_ids, attn, dec, dec_mask, labels = _tensors(torch, pairs, idx, pad)
    logits = model(input_ids=input_ids, attention_mask=attn, decoder_input_ids=dec,
                   decoder_attention_mask=dec_mask).logits
    banned = torch.zeros(logits.shape[-1], dtype=torch.bool)
    banned[pad] = True
    logp = torch.log_softmax(logits.masked_fill(banned, float("-inf")), dim=-1)
    keep = labels >= 0
    nll = -logp.gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    uniform = -logp.masked_fill(banned, 0.0).sum(-1) / (logits.shape[-1] - 1)
    loss = ((1 - smoothing) * nll + smoothing * uniform)[keep].sum()
    return loss, nll[keep].sum(), int(keep.sum())


def validate(torch, model, pairs, pad: int, budget: int) -> tuple[float, float]:
    """(NLL per target token, perplexity) on the validation pairs, no smoothing, no dropout."""
    model.eval()
    total, tokens = 0.0, 0
    with torch.no_grad():
        for idx in epoch_batches(pairs, budget, 0, 0):
            _, nll, n = batch_loss(torch, model, pairs, idx, pad, 0.0)
            total, tokens = total + float(nll), tokens + n
    model.train()
    return total / tokens, math.exp(total / tokens)


def _lr(step: int, peak: float, warmup: int) -> float:
    step = max(step, 1)
    return peak * min(step / warmup, math.sqrt(warmup / step))


def train(args) -> dict:
    import torch

    torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)
    log_path = os.path.join(args.out, "train.log") if args.log is None else (args.log or None)

    def log(msg):
        _log(log_path, msg)

    config = _config(args)
    ckpt_path = os.path.join(args.out, "checkpoint.pt")
    resuming = os.path.isfile(ckpt_path)
    if resuming:  # the run's own settings; the budget options may change on resume
        with open(os.path.join(args.out, "train_config.json"), encoding="utf-8") as f:
            saved = json.load(f)
        budget_keys = ("minutes", "epochs", "max_steps", "val_every", "checkpoint_minutes", "threads")
        config = {**saved, **{k: config[k] for k in budget_keys}}
    tokenizer = _tokenizer(args.out, config, log)
    import transformers

    config["versions"] = {"torch": torch.__version__, "transformers": transformers.__version__}
    with open(os.path.join(args.out, "train_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=1)
    pad = tokenizer.pad_token_id
    train_pairs = encode_pairs(tokenizer, _read(config["train_src"]), _read(config["train_tgt"]), config["max_len"])
    val_pairs = encode_pairs(tokenizer, _read(config["val_src"]), _read(config["val_tgt"]), config["max_len"])
    torch.manual_seed(config["seed"])
    model = build_model(tokenizer, config)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=config["lr"], betas=tuple(config["betas"]), eps=1e-9,
                            weight_decay=config["weight_decay"])
    state: dict[str, Any] = {"step": 0, "epoch": 0, "batch": 0, "seconds": 0.0, "best_val": None, "history": []}
    if resuming:
        ckpt = torch.load(ckpt_path, weights_only=True)
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        torch.set_rng_state(ckpt["rng"])
        state = json.loads(ckpt["state"])
        log(f"resumed from {ckpt_path}: step {state['step']}, epoch {state['epoch'] + 1} batch {state['batch']}, "
            f"{state['seconds'] / 60:.1f} minutes trained")
    else:
        n_params = sum(p.numel() for p in model.parameters())
        log(f"training {len(train_pairs)} pairs ({len(val_pairs)} val), {n_params} parameters, "
            f"{args.threads} thread(s), config {json.dumps(config)}")
    start, last_ckpt = time.time() - state["seconds"], time.time()

    def save_checkpoint():
        state["seconds"] = time.time() - start
        tmp = ckpt_path + ".tmp"
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "rng": torch.get_rng_state(),
                    "state": json.dumps(state)}, tmp)
        os.replace(tmp, ckpt_path)

    def evaluate():
        loss, ppl = validate(torch, model, val_pairs, pad, config["batch_tokens"])
        entry = {"step": state["step"], "epoch": state["epoch"] + state["batch"] / max(1, n_batches),
                 "minutes": round((time.time() - start) / 60, 2), "val_nll": loss, "val_ppl": ppl}
        state["history"].append(entry)
        better = state["best_val"] is None or loss < state["best_val"]
        if better:
            state["best_val"] = loss
            model.save_pretrained(os.path.join(args.out, "model"))
            tokenizer.save_pretrained(os.path.join(args.out, "model"))
        log(f"validation step {state['step']}: nll/token {loss:.4f}, perplexity {ppl:.2f}"
            + (" (best: saved model)" if better else ""))
        with open(os.path.join(args.out, "history.json"), "w", encoding="utf-8") as f:
            json.dump({"history": state["history"], "best_val_nll": state["best_val"],
                       "best_val_ppl": math.exp(state["best_val"]), "step": state["step"],
                       "minutes": round((time.time() - start) / 60, 2)}, f, indent=1)

    def out_of_budget() -> bool:
        return ((config["max_steps"] and state["step"] >= config["max_steps"])
                or (config["minutes"] and time.time() - start >= 60 * config["minutes"]))

    stopped = "epochs"
    n_batches = 0
    window = {"loss": 0.0, "tokens": 0, "t": time.time()}
    while state["epoch"] < config["epochs"]:
        batches = epoch_batches(train_pairs, config["batch_tokens"], config["seed"], state["epoch"])
        n_batches = len(batches)
        while state["batch"] < n_batches:
            if out_of_budget():
                break
            idx = batches[state["batch"]]
            for group in opt.param_groups:
                group["lr"] = _lr(state["step"] + 1, config["lr"], config["warmup"])
            loss, nll, n = batch_loss(torch, model, train_pairs, idx, pad, config["label_smoothing"])
            opt.zero_grad(set_to_none=True)
            (loss / n).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            state["step"] += 1
            state["batch"] += 1
            window["loss"] += float(nll.detach())
            window["tokens"] += n
            if state["step"] % 50 == 0:
                dt = time.time() - window["t"]
                log(f"step {state['step']} epoch {state['epoch'] + 1} batch {state['batch']}/{n_batches}: "
                    f"train nll/token {window['loss'] / window['tokens']:.4f}, lr {opt.param_groups[0]['lr']:.2e}, "
                    f"{window['tokens'] / dt:.0f} target tokens/s")
                window = {"loss": 0.0, "tokens": 0, "t": time.time()}
            if config["val_every"] and state["step"] % config["val_every"] == 0:
                evaluate()
            if time.time() - last_ckpt >= 60 * config["checkpoint_minutes"]:
                save_checkpoint()
                last_ckpt = time.time()
        else:
            state["epoch"] += 1
            state["batch"] = 0
            if not config["val_every"]:
                evaluate()
            save_checkpoint()
            continue
        stopped = "max_steps" if config["max_steps"] and state["step"] >= config["max_steps"] else "minutes"
        break
    if not state["history"] or state["history"][-1]["step"] != state["step"]:
        evaluate()
    save_checkpoint()
    log(f"stopped ({stopped}) at step {state['step']}, epoch {state['epoch'] + state['batch'] / max(1, n_batches):.2f}, "
        f"{state['seconds'] / 60:.1f} minutes; best val perplexity {math.exp(state['best_val']):.2f}")
    return {"step": state["step"], "stopped": stopped, "best_val_ppl": math.exp(state["best_val"]),
            "model": os.path.join(args.out, "model")}


def add_train_arguments(p) -> None:
    p.add_argument("--out", default=os.path.join("runs", "marian"), help="run directory (default: %(default)s)")
    p.add_argument("--train-src", default=os.path.join(DATA, "train.de.gz"), help="(default: %(default)s)")
    p.add_argument("--train-tgt", default=os.path.join(DATA, "train.en.gz"), help="(default: %(default)s)")
    p.add_argument("--val-src", default=os.path.join(DATA, "val.de.gz"), help="(default: %(default)s)")
    p.add_argument("--val-tgt", default=os.path.join(DATA, "val.en.gz"), help="(default: %(default)s)")
    p.add_argument("--vocab-size", type=int, default=8000)
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--layers", type=int, default=3, help="encoder and decoder layers each (default: %(default)s)")
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--ffn", type=int, default=1024)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--lr", type=float, default=1e-3, help="peak learning rate (default: %(default)s)")
    p.add_argument("--warmup", type=int, default=400, help="warmup steps (default: %(default)s)")
    p.add_argument("--betas", type=float, nargs=2, default=[0.9, 0.98])
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--label-smoothing", type=float, default=0.1)
    p.add_argument("--batch-tokens", type=int, default=4096, help="padded source + target tokens per batch")
    p.add_argument("--max-len", type=int, default=100, help="longest side in tokens kept for training")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--minutes", type=float, default=50, help="training wall-clock budget over all resumes "
                   "(0: none; default: %(default)s)")
    p.add_argument("--epochs", type=int, default=100, help="(default: %(default)s)")
    p.add_argument("--max-steps", type=int, default=0, help="stop after this many updates (0: no limit)")
    p.add_argument("--val-every", type=int, default=0, help="validate every N steps (0: each epoch)")
    p.add_argument("--checkpoint-minutes", type=float, default=5.0)
    add_threads_option(p, default=1)
    p.add_argument("--log", help="log file (default: OUT/train.log; '' for stderr only)")


# ----------------------------------------------------------------------------- comparison

SPLITS = {"val": "val", "test_2016": "test_2016_flickr"}
GRU, MARIAN = ["channel", "channel_norm"], ["channel_tf", "channel_tf_norm"]


def comparison_systems():
    from rerank.recipes.demo import BASE_FEATURES
    from rerank.recipes.experiment import SystemSpec

    lm = ["lm", "lm_norm"]
    return [SystemSpec("MIRA: NMT features", BASE_FEATURES),
            SystemSpec("+ channel (GRU)", BASE_FEATURES + GRU),
            SystemSpec("+ channel (Marian)", BASE_FEATURES + MARIAN),
            SystemSpec("+ channel + lm (GRU)", BASE_FEATURES + GRU + lm),
            SystemSpec("+ channel + lm (Marian)", BASE_FEATURES + MARIAN + lm),
            SystemSpec("+ both channels + lm", BASE_FEATURES + GRU + MARIAN + lm)]


def featured_list(args, flavour: str, split: str, n: int, log) -> str:
    """The shipped list with the Marian model's channel scores as channel_tf, channel_tf_norm
    (the shipped GRU channel and lm columns kept); written once, reused on a re-run."""
    from rerank import api
    from rerank.recipes.demo import shipped_lists

    out = os.path.join(args.out, "features", f"{flavour}.{split}.{n}best.gz")
    if os.path.isfile(out):
        return out
    nbest = api.read_nbest(shipped_lists(args.nbest_dir)[(flavour, n)][split])
    sources = _read(os.path.join(args.text_dir, f"{SPLITS[split]}.en.gz"))
    if args.sentences:
        nbest = nbest.select_sentences(range(min(args.sentences, nbest.n_sentences)))
        sources = sources[:nbest.n_sentences]
    t = time.time()
    scored = api.add_features(nbest.select_features(["nmt"]), ["channel", "channel_norm"], sources=sources,
                              channel_model=args.model, threads=args.threads, cache=args.score_cache)
    log(f"{flavour} {split} {n}-best: {nbest.n_hyps} hypotheses scored by {args.model} in {time.time() - t:.0f} s")
    for name, column in zip(MARIAN, GRU):
        nbest = nbest.with_feature(name, scored.column(column))
    os.makedirs(os.path.dirname(out), exist_ok=True)
    api.write_nbest(nbest, out)
    return out


def channel_decisions(nbest, refs) -> dict:
    """Corpus BLEU of the untuned decision of each channel score (its argmax per list)."""
    import sacrebleu

    from rerank.recipes.experiment import rerank

    return {c: sacrebleu.corpus_bleu(rerank(nbest, {c: 1.0}), refs).score for c in (GRU[0], MARIAN[0])}


def model_record(model_dir: str) -> dict:
    """What the trained model is: its training run's history (OUT/history.json beside OUT/model),
    the epochs it saw and its parameter count."""
    from transformers import AutoModelForSeq2SeqLM

    with open(os.path.join(os.path.dirname(os.path.abspath(model_dir)), "history.json"), encoding="utf-8") as f:
        history = json.load(f)
    from rerank.progress import transformers_bars_off

    with transformers_bars_off():
        model = AutoModelForSeq2SeqLM.from_pretrained(model_dir, local_files_only=True)
    return {"best_val_ppl": history["best_val_ppl"], "steps": history["step"], "minutes": history["minutes"],
            "epochs": history["history"][-1]["epoch"], "parameters": sum(p.numel() for p in model.parameters())}


def compare(args, command: str, log) -> dict:
    from rerank import api
    from rerank.recipes.experiment import leading_references, mira, run_experiment

    study = {"command": command, "model": model_record(args.model),
             "runs": args.runs, "epochs": args.epochs, "seed": args.seed, "lists": {}}
    for flavour in args.flavours.split(","):
        for n in (int(x) for x in args.nbest.split(",")):
            paths = {split: featured_list(args, flavour, split, n, log) for split in SPLITS}
            dev, test = api.read_nbest(paths["val"]), api.read_nbest(paths["test_2016"])
            refs = {split: leading_references(os.path.join(args.text_dir, f"{stem}.de.gz"), nb.n_sentences)
                    for (split, stem), nb in zip(SPLITS.items(), (dev, test))}
            out = os.path.join(args.out, "experiments", f"{flavour}.{n}best")
            evaluation = api.EvalOptions(metrics=("bleu", "meteor", "ter"), lang="de", second_baseline="+ channel + lm (GRU)",
                                         ar=args.ar, bootstrap=args.bootstrap, seed=args.seed, tokenize="13a",
                                         meteor={"modules": ["exact", "stem"]})
            result = run_experiment(dev, refs["val"], test, refs["test_2016"], comparison_systems(),
                                    mira(args.runs, args.seed, args.epochs, "13a"), evaluation, out_dir=out, log=log)
            table = json.loads(result.table.to_json())
            study["lists"][f"{flavour} {n}-best"] = {
                "table": table, "dev_bleu": result.dev_scores,
                "decision_bleu": {"val": channel_decisions(dev, refs["val"]),
                                  "test_2016": channel_decisions(test, refs["test_2016"])}}
            log(f"{flavour} {n}-best: done")
    with open(os.path.join(args.out, "marian_channel.json"), "w", encoding="utf-8") as f:
        json.dump(study, f, indent=1)
    return study


def report(study: dict) -> str:
    """Markdown: per list, each system's test BLEU (marks), METEOR, TER and mean val BLEU, then the
    channel columns' own argmax BLEU."""
    from rerank.recipes.results_docs import _marks, _score

    m = study["model"]
    lines = [f"The Marian model: {m['parameters'] / 1e6:.1f} M parameters, {m['steps']} updates ({m['epochs']:.2f} "
             f"epochs) in {m['minutes']:.0f} minutes, validation perplexity {m['best_val_ppl']:.2f} per target token.", "",
             "| list | system | test BLEU | METEOR | TER | val BLEU (mean of runs) |", "|---|---|---|---|---|---|"]
    for key, res in study["lists"].items():
        table = res["table"]
        for system in table["systems"]:
            val = res["dev_bleu"].get(system)
            val = f"{sum(val) / len(val):.2f}" if val else ""
            cells = [f"{_score(table, system, m):.2f} {_marks(table, system, m)}".rstrip() for m in ("bleu", "meteor", "ter")]
            lines.append(f"| {key} | {system} | {' | '.join(cells)} | {val} |")
    lines += ["", "The channel score alone (its argmax per list, no tuning), corpus BLEU, val / test_2016 (`_norm` "
              "divides by the source's length, the same for the whole list, so its argmax is the same):", "",
              "| list | GRU channel | Marian channel |", "|---|---|---|"]
    for key, res in study["lists"].items():
        d = res["decision_bleu"]
        cells = [f"{d['val'][c]:.2f} / {d['test_2016'][c]:.2f}" for c in (GRU[0], MARIAN[0])]
        lines.append(f"| {key} | {' | '.join(cells)} |")
    return "\n".join(lines)


def add_compare_arguments(p) -> None:
    p.add_argument("--model", default=os.path.join("runs", "marian", "model"),
                   help="the trained model directory (default: %(default)s)")
    p.add_argument("--out", default=os.path.join("runs", "marian", "compare"), help="(default: %(default)s)")
    p.add_argument("--nbest-dir", help="the n-best lists (default: the shipped ones)")
    p.add_argument("--text-dir", default=DATA, help="Multi30k task1 raw text (default: %(default)s)")
    p.add_argument("--flavours", default="optimised,regular,weak")
    p.add_argument("--nbest", default="20", help="list sizes (default: %(default)s)")
    p.add_argument("--sentences", type=int, default=0, help="only the first N sentences (0: all)")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--epochs", type=int, default=60)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--ar", type=int, default=10000, help="approximate randomisation trials")
    p.add_argument("--bootstrap", type=int, default=1000)
    add_threads_option(p, default=1)
    p.add_argument("--score-cache", help="score-cache file (default: none)")
    p.add_argument("--publish", action="store_true",
                   help="copy marian_channel.json to docs/results/stronger/ and re-render the pages")


# ----------------------------------------------------------------------------- entry point


def main(argv: list[str] | None = None) -> int:
    """The command line of this module, with the log lines (INFO records) on stderr."""
    from rerank.cliargs import stderr_log

    with stderr_log(logging.INFO):
        return _main(argv)


def _main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rerank.recipes.marian_channel", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    add_train_arguments(sub.add_parser("train", help="train the Marian de->en channel model"))
    add_compare_arguments(sub.add_parser("compare", help="tune and compare it with the GRU channel"))
    args = ap.parse_args(argv)
    logging.getLogger("transformers").setLevel(logging.ERROR)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.command == "train":
        result = train(args)
        print(json.dumps(result))
        return 0
    os.makedirs(args.out, exist_ok=True)
    command = "python -m rerank.recipes.marian_channel " + " ".join(argv if argv is not None else sys.argv[1:])
    study = compare(args, command, lambda msg: _log(os.path.join(args.out, "compare.log"), msg))
    print(report(study))
    if args.publish:
        from rerank.io import atomic_copy
        from rerank.recipes.results_docs import DOCS, write_docs

        atomic_copy(os.path.join(args.out, "marian_channel.json"), os.path.join(DOCS, "stronger", "marian_channel.json"))
        write_docs()
    return 0


if __name__ == "__main__":
    sys.exit(main())
