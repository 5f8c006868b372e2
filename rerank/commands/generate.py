"""`rerank generate`: n candidates per source line from a model, by beam search or sampling
(`rerank.generate`)."""

from __future__ import annotations

import sys

import rerank
from rerank.cliargs import add_device_option, add_quiet, add_threads_option, bars
from rerank.commands import COMMANDS
from rerank.options import add_option_flags, options_from_args


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "generate", help=COMMANDS["generate"][1],
        description="Write N candidates for every source line: beam search (the N best of a beam of N) or "
        "sampling (ancestral; --temperature, --top-k, --top-p and --epsilon warp the next-token "
        "distributions in that order, as transformers does) from this project's NMT (--backend nmt), a "
        "CTranslate2 model (ct2: translate_batch's own sampling; epsilon is refused, CTranslate2 has no "
        "logits processor) or a transformers encoder-decoder (hf: generate with its warpers). Each row holds "
        "nmt, the model's log-probability of the candidate by forced decoding (untempered, EOS included), "
        "nmt_norm (per scored token) and count (the draws that gave it; duplicates are merged unless "
        "--keep-duplicates). The settings go to OUT.config.json beside the list (MBR reads them: a sampled "
        "list's default posterior is the counts). Same seed, same file; --shard i/N takes whole blocks, and "
        "under torchrun (torchrun --nproc_per_node N -m rerank generate ...) the ranks share the blocks and "
        "rank 0 writes the bytes one process writes. See docs/generate.md.",
        epilog="Example: rerank generate test.en -o test.sample64.jsonl -m runs/opt --backend nmt -n 64 "
        "--epsilon 0.02 --seed 1")
    parser.add_argument("source", help="source text, one sentence per line (.gz ok; no empty line)")
    parser.add_argument("-o", "--output", required=True, help="output n-best list (.gz compresses; - for stdout, "
                        "then no config is written)")
    add_option_flags(parser, rerank.GenerateOptions)
    add_device_option(parser, note="; under torchrun, cuda is each rank's cuda:LOCAL_RANK")
    add_threads_option(parser, default=1, why=": one per process; give more to a lone process on idle cores")
    add_quiet(parser)
    parser.set_defaults(func=run)


def run(args) -> int:
    options = options_from_args(rerank.GenerateOptions, args)   # --device and --threads too (the shared flags)
    done = rerank.generate(args.source, args.output, options, progress=bars(args), meta={"command": sys.argv})
    if args.shard and done.paths:
        print(f"note: shard {args.shard} holds sentences {done.first}..{done.end - 1} (--id-offset {done.first} keeps "
              "their ids)", file=sys.stderr)
    return 0
