"""Torch settings shared by the commands that run models, and checked loading of their files.

- `--device`: cpu, cuda or cuda:N, declared once (`add_device_option`, the CPU by default). CUDA
  asked for on a machine without it falls back to the CPU with a message; any other spelling is
  an error naming the accepted forms.
- `--threads`: torch CPU threads, declared once (`add_threads_option`), default
  `default_threads()` unless a command fixes its own: 2 when the machine has two idle cores,
  else 1 (idle = usable cores minus the 1-minute load average). torch's own default
  takes every core, and its OpenMP threads spin-wait when other processes hold the cores: on
  the 2-core development machine, loaded, two threads made GRU training and encoding 3-12x
  slower than one, while on the idle machine they decode about 1.5x faster (docs/nmt.md,
  docs/embeddings.md). The models are small, so more than two threads gain little. The thread
  count changes speed only: GRU and linear layers gave bitwise equal results with 1 and 2
  threads on this torch build.
- `prefer_passive_openmp`: OMP_WAIT_POLICY=PASSIVE for the command line unless the user set it.
  torch's OpenMP threads otherwise spin while they wait, and a neighbour that holds a core
  turns that spinning into the job's time: `rerank features --threads 2` beside a pure-Python
  busy loop ran at 0.21x its idle speed with 3.7x the CPU time, beside a 2-thread torch job at
  0.14x with 5.7x; passive, at 0.91x and 0.95x (benchmarks/bench_load.py, docs/features.md).
- `check_run_dir`: a training --out directory that cannot be made is refused before any work.
- `load_tensors` / `load_weights`: torch.load(..., weights_only=True) on the CPU, and a
  state_dict checked against the module, every failure of the file an InputError naming the file
  (the exceptions torch.load raises for a bad file, TORCH_LOAD_ERRORS, kept as its cause).

- `load_tokenizer`: a users' model's own tokenizer, offline, rebuilt from its tokenizer.json when
  the other transformers major version saved it.

torch is imported inside the functions, so the core imports without it.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import re
import struct

from rerank.errors import InputError, needs_neural
from rerank.options import POSITIVE_INT

log = logging.getLogger(__name__)
DEVICE_FORMS = "cpu, cuda or cuda:N (N = 0, 1, ...)"
_DEVICE = re.compile(r"cpu|cuda(?::(\d+))?")


def check_device(device) -> None:
    """InputError unless `device` (a string or None) has a form resolve_device knows; no torch
    needed, so a command can refuse a bad --device before any work."""
    if device is not None and _DEVICE.fullmatch(str(device).strip()) is None:
        raise InputError(f"device {str(device).strip()!r}: unknown device; use {DEVICE_FORMS}", option="device")


def resolve_device(device=None):
    """torch.device for a `--device` value (a string, a torch.device or None for the CPU).

    'cuda' or 'cuda:N' without CUDA falls back to the CPU with a message; an unknown form, or a
    GPU index the machine does not have, raises InputError.
    """
    import torch

    text = "cpu" if device is None else str(device).strip()
    match = _DEVICE.fullmatch(text)
    if match is None:
        raise InputError(f"device {text!r}: unknown device; use {DEVICE_FORMS}")
    if text.startswith("cuda"):
        if not torch.cuda.is_available():
            log.warning(f"CUDA is not available ({text} requested): using the CPU")
            return torch.device("cpu")
        count = torch.cuda.device_count()
        if match.group(1) is not None and int(match.group(1)) >= count:
            raise InputError(f"device {text}: this machine has {count} CUDA device(s), cuda:0 to cuda:{count - 1}")
    return torch.device(text)


def default_threads() -> int:
    """2 if two of the cores this process may use are idle, else 1 (see the module docstring)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    try:
        busy = os.getloadavg()[0]
    except (AttributeError, OSError):
        busy = 0.0
    return max(1, min(2, round(cores - busy)))


def prefer_passive_openmp() -> None:
    """Set OMP_WAIT_POLICY=PASSIVE unless it is set (see the module docstring). OpenMP reads it
    when torch is first imported, so the command line calls this before any command runs."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def add_torch_options(parser) -> None:
    """--device and --threads, as every command that runs torch takes them."""
    add_device_option(parser)
    add_threads_option(parser)


def add_device_option(parser, note: str = "", default: str | None = "cpu") -> None:
    """--device, declared here for every command that runs a model; the CPU by default. `note`
    adds what the command does with it (`rerank features`: each torchrun rank's own GPU). `default`
    None is for a command that tells a device given from none (eval and report refuse --device
    without --comet-model); what runs is then the CPU still, as the help says."""
    parser.add_argument("--device", default=default, help=f"{DEVICE_FORMS}{note}; CUDA without a GPU falls back "
                        "to the CPU with a message (default: cpu)")


def add_threads_option(parser, default: int | None = None, why: str = "") -> None:
    """--threads, declared here for every command that runs torch: by default `default_threads()`
    on this machine now (see the module docstring); a command whose models run best on a fixed
    count gives it as `default`, with `why` for the help."""
    if default is None:
        parser.add_argument("--threads", type=POSITIVE_INT.parse, default=default_threads(),
                            help="torch CPU threads (default: %(default)s on this machine now: 2 if two cores are "
                            "idle, else 1; torch's default of every core spins when other jobs hold them)")
    else:
        parser.add_argument("--threads", type=POSITIVE_INT.parse, default=default,
                            help=f"torch CPU threads (default: %(default)s{why})")


def setup_torch(args):
    """Apply args.threads and return the resolved args.device (call before any work)."""
    import torch

    torch.set_num_threads(args.threads)
    return resolve_device(args.device)


def check_run_dir(path: str) -> None:
    """A training run directory (--out): it, or the folders to create for it, must be possible."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise InputError("the run directory is a file", path)
    parent = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise InputError(f"cannot create it: {parent} is a file", path)
    if not os.path.isdir(path) and not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"cannot create it in {parent} (permission denied)", path)


# What torch.load raises for a file that is no sound PyTorch file (an empty, truncated, damaged or
# foreign file, a pickle weights_only refuses), found by loading such files, thousands of them cut,
# with bytes changed, or random, in both of torch's formats: the zip reader's RuntimeError, the
# unpickler's UnpicklingError, EOFError, IndexError, KeyError, UnicodeDecodeError and ValueError,
# struct.error from a damaged record, AssertionError from the legacy format's storage table, OSError
# from the file system. Anything else out of torch.load is a bug, not bad input.
TORCH_LOAD_ERRORS: tuple[type[Exception], ...] = (
    OSError, RuntimeError, pickle.UnpicklingError, EOFError, IndexError, KeyError, ValueError, struct.error,
    AssertionError)


def _unreadable(path: str, exc: Exception) -> str:
    """Why torch.load failed, in words: a damaged zip, objects weights_only refuses, or no torch file."""
    with open(path, "rb") as f:
        head = f.read(4)
    refusal = re.search(r"(?:Unsupported global: GLOBAL|unsupported GLOBAL) (\S+)", str(exc))   # a class; a function
    if refusal:
        return f"it holds a {refusal.group(1)} object, which weights_only loading refuses (tensors and plain values only)"
    if head == b"PK\x03\x04":
        return "a damaged or truncated PyTorch file"
    return f"not a PyTorch file (it starts with {head!r})" if head else "an empty file, not a PyTorch file"


def load_tensors(path: str, what: str = "model file"):
    """torch.load(path, weights_only=True) onto the CPU; InputError naming the file when it is
    missing, not a PyTorch file, truncated or holds anything but tensors and plain values."""
    import torch

    if not os.path.isfile(path):
        raise InputError(f"{what} not found" if not os.path.isdir(path) else f"{what} is a directory", path)
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except TORCH_LOAD_ERRORS as exc:
        raise InputError(f"cannot read the {what}: {_unreadable(path, exc)}", path) from exc


def _describe(value) -> str:
    import torch

    if isinstance(value, torch.Tensor):
        return f"a bare tensor of shape {tuple(value.shape)}"
    return f"a {type(value).__name__}"


def check_state_dict(own: dict, state, path: str, what: str = "the model") -> None:
    """InputError unless `state` is a state_dict with exactly the keys and shapes of `own`."""
    import torch

    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise InputError(f"expected a state_dict (names -> tensors), found {_describe(state)}", path)
    missing = [k for k in own if k not in state]
    unexpected = [k for k in state if k not in own]
    if missing or unexpected:
        raise InputError(f"the weights do not fit {what}: {len(missing)} missing keys {missing[:3]}, "
                         f"{len(unexpected)} unexpected keys {unexpected[:3]}", path)
    for key, tensor in own.items():
        if tuple(state[key].shape) != tuple(tensor.shape):
            raise InputError(f"the weights do not fit {what}: {key} has shape {tuple(state[key].shape)} "
                             f"where it expects {tuple(tensor.shape)}", path)


def load_weights(module, state, path: str, what: str = "the model") -> None:
    """Check `state` against `module` (check_state_dict) and load it (fp16 copied into fp32 alike)."""
    check_state_dict(module.state_dict(), state, path, what)
    module.load_state_dict(state)


# What AutoTokenizer.from_pretrained raises for a directory whose tokenizer files are missing or bad,
# found by loading directories with each file removed, cut or garbled:
# OSError (a config that is no JSON to transformers), ValueError (no tokenizer files, a class this
# transformers lacks, JSON and UTF-8 errors), TypeError (transformers 5 on a Marian directory without
# its tokenizer files). Anything else is a bug, not bad input.
TOKENIZER_LOAD_ERRORS = (OSError, ValueError, TypeError)


def load_tokenizer(path: str):
    """The model's own tokenizer, offline. A tokenizer saved by the other transformers major
    version (5.x configs name classes 4.x lacks) is rebuilt from its portable tokenizer.json and
    the special tokens of tokenizer_config.json (the users' models of rerank.nmt.backends, MetricX)."""
    with needs_neural("a Hugging Face or CTranslate2 model"):
        from transformers import AutoTokenizer, PreTrainedTokenizerFast
    try:
        return AutoTokenizer.from_pretrained(path, local_files_only=True)
    except TOKENIZER_LOAD_ERRORS as exc:
        fast = os.path.join(path, "tokenizer.json")
        if not os.path.isfile(fast):
            raise InputError(f"cannot load the model's tokenizer ({type(exc).__name__}: {one_line(exc)}); a CTranslate2 "
                             "directory needs the tokenizer files beside model.bin (the converter's copy_files option)",
                             path) from exc
        log.info("AutoTokenizer failed on %s (%s): using its tokenizer.json", path, exc)
        return PreTrainedTokenizerFast(tokenizer_file=fast, **_special_tokens(path))


def one_line(exc: Exception, limit: int = 300) -> str:
    """An exception's message on one line, cut at `limit` characters."""
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[:limit] + " ..."


def _special_tokens(path: str) -> dict:
    config_path = os.path.join(path, "tokenizer_config.json")
    try:
        with open(config_path, encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, json.JSONDecodeError):
        return {}
    tokens = {}
    for key in ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token"):
        value = config.get(key)
        if isinstance(value, dict):
            value = value.get("content")
        if isinstance(value, str):
            tokens[key] = value
    return tokens
