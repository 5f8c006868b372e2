#!/bin/bash
# Train the NMT flavours on Multi30k (M30k_T) en->de and write 20/50-best lists for val and test_2016.
# Usage:
#   recipes/nmt_multi30k.sh train FLAVOUR             # resumable: run again to go on from last.pt
#   recipes/nmt_multi30k.sh decode FLAVOUR SPLIT K    # SPLIT val|test_2016_flickr, K = beam = n-best size
#   recipes/nmt_multi30k.sh all                       # the three flavours side by side, then 12 decodes, 2 at a time
# env: DATA (default /work/shared/data/multi30k/task1/raw), ROOT (default /work/runs/nmt/cpu),
#      SIZE (cpu|small|paper|tiny, default cpu), MIN (training minutes, default 70), THREADS (default 1).
# Outputs in ROOT/FLAVOUR: checkpoints, train.log, {val,test_2016}.{K}best.gz, *.scores.json, 1-best text.
# These are the commands that produced rerank/data/multi30k/*best.gz (see docs/nmt.md).
set -euo pipefail
DATA=${DATA:-/work/shared/data/multi30k/task1/raw}
ROOT=${ROOT:-/work/runs/nmt/cpu}
SIZE=${SIZE:-cpu}; MIN=${MIN:-70}; THREADS=${THREADS:-1}
export DATA ROOT SIZE MIN THREADS

case "${1:-}" in
train)
  F=$2; O=$ROOT/$F; mkdir -p "$O"
  echo "=== $(date -u) train $F ($SIZE, $MIN min, $THREADS thread(s))"
  python -m rerank.nmt train --data-dir "$DATA" --out "$O" --preset "$SIZE" --flavour "$F" --batch-size 80 \
    --max-minutes "$MIN" --max-epochs 30 --patience 3 --threads "$THREADS" 2>> "$O/train.stderr"
  ;;
decode)
  F=$2; S=$3; K=$4; O=$ROOT/$F; short=${S%_flickr}
  echo "=== $(date -u) translate $F $S beam $K"
  python -m rerank.nmt translate --model "$O" --input "$DATA/$S.en.gz" --beam "$K" --nbest "$K" --batch-size 32 \
    --threads "$THREADS" --nbest-out "$O/$short.${K}best.gz" --output "$O/$short.${K}beam.1best.txt" \
    --ref "$DATA/$S.de.gz" --scores-out "$O/$short.${K}best.scores.json" 2> "$O/translate.$short.$K.stderr"
  ;;
all)
  mkdir -p "$ROOT"
  for F in weak regular optimised; do "$0" train "$F" > "$ROOT.$F.train.log" 2>&1 & done
  wait
  for K in 50 20; do for S in test_2016_flickr val; do for F in weak regular optimised; do
    echo "$F $S $K"; done; done; done | xargs -P 2 -n 3 "$0" decode
  ;;
*)
  sed -n '2,10p' "$0"; exit 2
  ;;
esac
