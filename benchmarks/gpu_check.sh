#!/usr/bin/env bash
# The GPU check of docs/benchmarks/gpu.md, prepared for one call on a lent GPU machine (no network):
# installs the working tree without downloading, sets threads and offline Hugging Face variables, and
# runs benchmarks/gpu_check.py under a time limit, writing gpu_check.json, gpu_check.md and
# gpu_check.log into --out (default: $OUT, the folder the device tool brings back).
#
#   bash benchmarks/gpu_check.sh [--out DIR] [--device cuda|cpu] [--quick | --size quick|full] [--threads N]
#                                [--time-limit SECONDS] [--wheels DIR] [--install auto|pip|path] [--parts a,b]
#
# --device cpu runs every part on the CPU twice (CPU against CPU): the path the tests take.
# --time-limit: the whole script's seconds (default 450, for a device call of 480 s); the Python
#   part gets what the install left, less 15 s, and skips the parts that would start too late.
# --wheels DIR: wheels to install first (pip --no-index --target, nothing downloaded); default .whl
#   when that folder exists (the device tool's `carry`). The machine's image lacks sacremoses.
# --install: auto (default) uses an install of this very tree if Python already imports one
#   (an editable install, as `make` makes), else pip-installs a copy of the tree into a temporary
#   folder (--no-deps --no-build-isolation --no-index, so offline); `pip` always does that;
#   `path` puts the tree on PYTHONPATH with a generated entry-point record (no pip at all), which
#   is also the fallback when pip fails.
# PYTHON names the interpreter (default python3, on the device machine the one with CUDA torch).
set -euo pipefail

PY=${PYTHON:-python3}
[[ $PY == */* ]] && PY=$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")  # a relative path, before the cd
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
out=${OUT:-gpu-check}
wheels=""
install=auto
limit=450
threads=$(nproc 2> /dev/null || echo 1)
((threads > 16)) && threads=16
pass=()
while (($#)); do
    case $1 in
        --out) out=$2; shift 2 ;;
        --wheels) wheels=$2; shift 2 ;;
        --install) install=$2; shift 2 ;;
        --time-limit) limit=$2; shift 2 ;;
        --threads) threads=$2; shift 2 ;;
        -h | --help) sed -n '2,20p' "$0"; exit 0 ;;
        *) pass+=("$1"); shift ;;
    esac
done
case $install in auto | pip | path) ;; *) echo "gpu_check.sh: --install auto, pip or path, not $install" >&2; exit 2 ;; esac
[[ -z $wheels && -d .whl ]] && wheels=.whl
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")
trap 'rm -rf "$work"' EXIT

export OMP_NUM_THREADS=$threads MKL_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}  # as the rerank command line sets it (docs/features.md)
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1 HF_HUB_DISABLE_PROGRESS_BARS=1
export HF_HOME="$work/hf" XDG_CACHE_HOME="$work/cache" RERANK_CACHE_DIR="$work/cache/rerank"
export TOKENIZERS_PARALLELISM=false MPLBACKEND=Agg PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH=${PYTHONPATH:-}

if [[ -n $wheels ]]; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$work/wheels" \
        "$wheels"/*.whl
    PYTHONPATH="$work/wheels${PYTHONPATH:+:$PYTHONPATH}"
fi

tree_installed() {  # this tree's rerank is imported, and its plug-ins are registered
    (cd / && "$PY" - "$repo" 2> /dev/null) << 'EOF'
import os, sys
from importlib.metadata import entry_points
import rerank
here = os.path.realpath(os.path.join(sys.argv[1], "rerank"))
names = {e.name for e in entry_points(group="rerank.features")}
sys.exit(0 if os.path.realpath(os.path.dirname(rerank.__file__)) == here and {"mlmme", "channel"} <= names else 1)
EOF
}

pip_install() {  # a copy of the tree, so that the build leaves nothing in it
    mkdir -p "$work/src"
    cp -a pyproject.toml README.md rerank mira embeddings nmt recipes "$work/src/"
    "$PY" -m pip install -q --no-deps --no-build-isolation --no-index --no-cache-dir --no-compile \
        --target "$work/site" "$work/src" > "$work/pip.log" 2>&1
}

path_install() {  # the tree on PYTHONPATH (rerank/mira etc. are links), entry points from pyproject.toml
    "$PY" - "$repo/pyproject.toml" "$work/shim" << 'EOF'
import os, sys, tomllib
project = tomllib.load(open(sys.argv[1], "rb"))["project"]
info = os.path.join(sys.argv[2], f"mlmme_rerank-{project['version']}.dist-info")
os.makedirs(info)
open(os.path.join(info, "METADATA"), "w").write(f"Metadata-Version: 2.1\nName: mlmme-rerank\nVersion: {project['version']}\n")
with open(os.path.join(info, "entry_points.txt"), "w") as f:
    for group, entries in project["entry-points"].items():
        f.write(f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in entries.items()) + "\n")
EOF
    PYTHONPATH="$repo:$work/shim${PYTHONPATH:+:$PYTHONPATH}"
}

if [[ $install == auto ]] && tree_installed; then
    how="an install of this tree that Python imports already"
elif [[ $install != path ]] && pip_install; then
    PYTHONPATH="$work/site${PYTHONPATH:+:$PYTHONPATH}"
    how="pip install --no-deps --no-build-isolation --no-index --target (a temporary folder) of a copy of the tree"
else
    [[ $install != path ]] && { echo "gpu_check.sh: pip install failed, using PYTHONPATH:" >&2; tail -n 5 "$work/pip.log" >&2; }
    path_install
    how="PYTHONPATH=the tree, entry points generated from pyproject.toml"
fi
export PYTHONPATH GPU_CHECK_INSTALL="$how${wheels:+; wheels from $wheels}"
echo "gpu_check.sh: $GPU_CHECK_INSTALL ($SECONDS s); $threads threads; output in $out"

left=$((limit - SECONDS))
((left < 30)) && left=30
status=0
timeout --kill-after=10 "$left" "$PY" benchmarks/gpu_check.py --out "$out" --threads "$threads" \
    --time-limit $((left - 15)) "${pass[@]}" 2>&1 | tee "$out/gpu_check.log" || status=$?
exit "$status"
