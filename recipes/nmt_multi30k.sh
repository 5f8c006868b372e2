#!/bin/bash
# Train one NMT flavour on Multi30k (M30k_T) en->de, then write 20/50-best lists for test_2016 and val.
# Usage: recipes/nmt_multi30k.sh FLAVOUR [DATA_DIR] [RUN_ROOT]
#   env: SIZE (cpu|small|paper, default small), MIN (training minutes, default 65), THREADS (default 1)
# Outputs in RUN_ROOT/FLAVOUR: checkpoints, train.log, {val,test_2016}.{20,50}best.gz, *.scores.json.
# These are the commands that produced rerank/data/multi30k/*best.gz (see docs/nmt.md).
set -euo pipefail
F=$1
D=${2:-/work/shared/data/multi30k/task1/raw}
ROOT=${3:-/work/runs/nmt}
SIZE=${SIZE:-small}; MIN=${MIN:-65}; THREADS=${THREADS:-1}
O=$ROOT/$F
mkdir -p "$O"
echo "=== $(date -u) train $F"
python -m nmt train --data-dir "$D" --out "$O" --size "$SIZE" --flavour "$F" --batch-size 80 --max-minutes "$MIN" \
  --max-epochs 30 --patience 3 --threads "$THREADS" 2> "$O/train.stderr"
for K in 20 50; do
  for S in test_2016_flickr val; do
    short=${S%_flickr}
    echo "=== $(date -u) translate $F $S beam $K"
    python -m nmt translate --model "$O" --input "$D/$S.en.gz" --beam $K --nbest $K --batch-size 32 \
      --threads "$THREADS" --nbest-out "$O/$short.${K}best.gz" --output "$O/$short.${K}beam.1best.txt" \
      --ref "$D/$S.de.gz" --scores-out "$O/$short.${K}best.scores.json" 2> "$O/translate.$short.$K.stderr"
  done
done
echo "=== $(date -u) done $F"
