#!/usr/bin/env bash
# Regenerates every file in tests/data/producers/ from scratch: scratch venvs, data
# preparation, tiny model training (a few minutes each, one CPU thread), decoding of the
# first 20 sentences of Multi30k task1 test_2016 (de -> en), and copying the outputs here.
#
# The test suite never runs this script. It needs Python 3.11, PyPI access (pip as set up on
# the machine: torch==2.13.0 CPU comes from the local wheel cache /opt/wheels or PyPI) and
# about 15 minutes of one CPU core (plus the venv installs). Re-run on the machine that made
# the committed files (venvs already built) it reproduced them byte for byte; other CPUs or
# library builds may give other numbers, but the same layouts.
#
# Usage: bash tests/data/producers/make_outputs.sh [WORKDIR]   (default WORKDIR=/tmp/producers)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
W="${1:-/tmp/producers}"
M30K="${M30K:-$(cd "$HERE/../../../.." 2>/dev/null && pwd)/shared/data/multi30k/task1/raw}"
[ -d "$M30K" ] || M30K=/work/shared/data/multi30k/task1/raw
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
PY=python3.11
mkdir -p "$W/data"
D="$W/data"

# ---------------------------------------------------------------- venvs
mkvenv() {  # name, then pip arguments (several installs separated by ';;')
  local name=$1; shift
  [ -x "$W/venv-$name/bin/python" ] && return 0
  $PY -m venv "$W/venv-$name"
  local args=()
  for a in "$@" ";;"; do
    if [ "$a" = ";;" ]; then
      if [ ${#args[@]} -gt 0 ]; then "$W/venv-$name/bin/pip" install "${args[@]}"; fi
      args=()
    else
      args+=("$a")
    fi
  done
}
# OpenNMT-py 3.4.3 pins torch<2.2; torch 2.13 is installed over it on purpose (works with
# TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1). It also pulls ctranslate2 3.24 (unused here).
mkvenv onmt torch==2.13.0 ";;" OpenNMT-py==3.4.3 subword-nmt==0.3.8 sacremoses==0.2.0 ";;" torch==2.13.0
mkvenv marian pymarian==1.12.42
# sockeye 3.1.34 pins torch<1.14: install it without dependencies beside torch 2.13 + numpy 1.26
mkvenv sockeye torch==2.13.0 numpy==1.26.4 ";;" --no-deps sockeye==3.1.34 ";;" portalocker sacrebleu pyyaml
mkvenv eole torch==2.13.0 ";;" eole==0.6.4 aiohttp
mkvenv ct2 torch==2.13.0 ";;" ctranslate2==4.8.5 pyyaml

# ---------------------------------------------------------------- data
for s in train val test_2016_flickr; do for l in de en; do
  zcat "$M30K/$s.$l.gz" > "$D/$s.$l"
done; done
head -n 20 "$D/test_2016_flickr.de" > "$D/test20.de"
head -n 20 "$D/test_2016_flickr.en" > "$D/test20.en"
# the test_2016 lines whose English reference holds ' or " (for the escaped-target Marian model)
grep -n "'\\|\"" "$D/test_2016_flickr.en" | cut -d: -f1 > "$D/quote_lines.txt"
awk 'NR==FNR{k[$1]=1;next} (FNR in k)' "$D/quote_lines.txt" "$D/test_2016_flickr.de" > "$D/quote.de"
awk 'NR==FNR{k[$1]=1;next} (FNR in k)' "$D/quote_lines.txt" "$D/test_2016_flickr.en" > "$D/quote.en"
cat > "$D/tok.py" <<'EOF'
import sys
from sacremoses import MosesTokenizer
lang, escape = sys.argv[1], sys.argv[2] == "escape"
mt = MosesTokenizer(lang=lang)
for line in sys.stdin:
    print(" ".join(mt.tokenize(line.strip(), escape=escape)))
EOF
OPY="$W/venv-onmt/bin/python"
for s in train val test20; do for l in de en; do
  $OPY "$D/tok.py" $l noescape < "$D/$s.$l" > "$D/$s.tok.$l"
done; done
$OPY "$D/tok.py" en escape < "$D/train.en" > "$D/train.tokesc.en"
"$W/venv-onmt/bin/subword-nmt" learn-joint-bpe-and-vocab --input "$D/train.tok.de" "$D/train.tok.en" \
  -s 2000 -o "$D/bpe2000.codes" --write-vocabulary "$D/bpevocab.de" "$D/bpevocab.en"
for s in train val test20; do for l in de en; do
  "$W/venv-onmt/bin/subword-nmt" apply-bpe -c "$D/bpe2000.codes" --vocabulary "$D/bpevocab.$l" \
    --vocabulary-threshold 1 < "$D/$s.tok.$l" > "$D/$s.bpe.$l"
done; done

# ---------------------------------------------------------------- OpenNMT-py 3.4.3
mkdir -p "$W/onmt/out" && cd "$W/onmt"
cat > config.yaml <<EOF
save_data: run/data
src_vocab: run/vocab.src
tgt_vocab: run/vocab.tgt
overwrite: true
data:
  corpus_1:
    path_src: $D/train.bpe.de
    path_tgt: $D/train.bpe.en
  valid:
    path_src: $D/val.bpe.de
    path_tgt: $D/val.bpe.en
save_model: run/model
save_checkpoint_steps: 100000
train_steps: 1200
valid_steps: 100000
report_every: 50
seed: 1234
world_size: 1
gpu_ranks: []
num_workers: 0
batch_type: tokens
batch_size: 1024
valid_batch_size: 512
bucket_size: 8192
optim: adam
learning_rate: 1.0
warmup_steps: 200
decay_method: noam
rnn_size: 128
encoder_type: transformer
decoder_type: transformer
position_encoding: true
enc_layers: 1
dec_layers: 1
heads: 2
hidden_size: 128
word_vec_size: 128
transformer_ff: 256
dropout: [0.1]
attention_dropout: [0.1]
src_seq_length: 60
tgt_seq_length: 60
EOF
cat > train.py <<'EOF'
import sys, torch
torch.set_num_threads(1)
from onmt.bin.train import main
sys.exit(main())
EOF
cat > translate.py <<'EOF'
import sys, torch
torch.set_num_threads(1)
from onmt.bin.translate import main
sys.exit(main())
EOF
export TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1
"$W/venv-onmt/bin/onmt_build_vocab" -config config.yaml -n_sample -1 -num_threads 1
$OPY train.py -config config.yaml
T="$OPY translate.py -model run/model_step_1200.pt -src $D/test20.bpe.de -beam_size 4 -n_best 4 -batch_size 1 -gpu -1 -seed 1"
$T -output out/nbest4.with_score.txt -with_score
$T -output out/nbest4.txt
$T -output out/nbest4.with_score.lp-none.txt -with_score -length_penalty none

# ---------------------------------------------------------------- Marian (pymarian 1.12.42)
mkdir -p "$W/marian/out" && cd "$W/marian"
MPY="$W/venv-marian/bin/python"
mtrain() {  # model dir, target training file
  mkdir -p "$1"
  $MPY -m pymarian train --type transformer --cpu-threads 1 --workspace 1024 --seed 1111 \
    --model "$1/model.npz" --train-sets "$D/train.de" "$2" \
    --vocabs "$1/vocab.spm" "$1/vocab.spm" --dim-vocabs 4000 4000 \
    --sentencepiece-max-lines 29000 --sentencepiece-options '--num_threads=1' \
    --dim-emb 64 --enc-depth 1 --dec-depth 1 --transformer-heads 2 --transformer-dim-ffn 128 \
    --mini-batch 32 --maxi-batch 100 --max-length 60 --learn-rate 0.001 --lr-warmup 200 \
    --after 3000u --disp-freq 100u --save-freq 100000u --valid-freq 100000u \
    --log "$1/train.log" --quiet
}
mdecode() {  # model dir, output, extra options (INPUT overrides the source file)
  local m=$1 o=$2; shift 2
  $MPY -m pymarian decode --cpu-threads 1 --workspace 256 --quiet \
    --models "$m/model.npz" --vocabs "$m/vocab.spm" "$m/vocab.spm" \
    --input "${INPUT:-$D/test20.de}" --beam-size 4 --n-best --mini-batch 1 --maxi-batch 1 --output "$o" "$@"
}
mtrain model-raw "$D/train.en"
mdecode model-raw out/nbest.txt
mdecode model-raw out/nbest.align-hard.txt --alignment hard
mdecode model-raw out/nbest.align-soft.txt --alignment soft
mdecode model-raw out/nbest.wordscores.txt --word-scores
mdecode model-raw out/nbest.nospm.txt --no-spm-decode
mdecode model-raw out/nbest.normalize1.txt --normalize 1
mdecode model-raw out/nbest.all.txt --no-spm-decode --alignment hard --word-scores
mtrain model-tokesc "$D/train.tokesc.en"
mdecode model-tokesc out/nbest.tokesc.txt
mdecode model-tokesc out/nbest.tokesc.nospm.txt --no-spm-decode
INPUT="$D/quote.de" mdecode model-tokesc out/quote.tokesc.txt

# ---------------------------------------------------------------- Sockeye 3.1.34
mkdir -p "$W/sockeye/out" && cd "$W/sockeye"
SB="$W/venv-sockeye/bin"
"$SB/sockeye-train" --use-cpu --env=OMP_NUM_THREADS=1 --seed 1 \
  --source "$D/train.bpe.de" --target "$D/train.bpe.en" \
  --validation-source "$D/val.bpe.de" --validation-target "$D/val.bpe.en" \
  --output model --overwrite-output \
  --num-layers 1:1 --transformer-model-size 64 --transformer-attention-heads 2 \
  --transformer-feed-forward-num-hidden 128 --num-embed 64:64 \
  --batch-type word --batch-size 1024 --max-seq-len 60 \
  --optimizer adam --initial-learning-rate 0.002 --learning-rate-warmup 200 \
  --max-updates 1200 --checkpoint-interval 600 --decode-and-evaluate 0 --quiet-secondary-workers
"$SB/python" - "$D/test20.bpe.de" test20.bpe.de.jsonl <<'EOF'
import json, sys
with open(sys.argv[1], encoding="utf-8") as f, open(sys.argv[2], "w", encoding="utf-8") as g:
    for i, line in enumerate(f):
        g.write(json.dumps({"text": line.rstrip("\n"), "my_key": "seg%d" % (i + 1)}, ensure_ascii=False) + "\n")
EOF
ST="$SB/sockeye-translate --use-cpu --env=OMP_NUM_THREADS=1 -m model --output-type json --beam-size 4 --nbest-size 4 --batch-size 1 --seed 1"
$ST --input "$D/test20.bpe.de" --output out/nbest4.json
$ST --json-input --input test20.bpe.de.jsonl --output out/nbest4.json-input.json
$ST --input "$D/test20.bpe.de" --output out/nbest4.lp-alpha0.json --length-penalty-alpha 0

# ---------------------------------------------------------------- eole 0.6.4
mkdir -p "$W/eole/out" && cd "$W/eole"
EPY="$W/venv-eole/bin/python"
# toy sentence-level label for the estimator head: min(1, |tgt BPE tokens| / |src BPE tokens|)
$EPY - "$D" <<'EOF'
import sys
D = sys.argv[1] + "/"
for split in ("train", "val"):
    s = open(D + split + ".bpe.de").read().splitlines()
    t = open(D + split + ".bpe.en").read().splitlines()
    with open(D + split + ".sco", "w") as f:
        for a, b in zip(s, t):
            f.write("%.4f\n" % min(1.0, len(b.split()) / max(1, len(a.split()))))
EOF
cat > config.yaml <<EOF
src_vocab: run/vocab.src
tgt_vocab: run/vocab.tgt
save_data: run/data
overwrite: true
seed: 1234
report_every: 50
data:
  corpus_1:
    path_src: $D/train.bpe.de
    path_tgt: $D/train.bpe.en
    path_sco: $D/train.sco
  valid:
    path_src: $D/val.bpe.de
    path_tgt: $D/val.bpe.en
    path_sco: $D/val.sco
training:
  model_path: run/model
  train_steps: 1200
  save_checkpoint_steps: 1200
  valid_steps: 100000
  world_size: 1
  gpu_ranks: []
  num_workers: 0
  batch_type: tokens
  batch_size: 1024
  valid_batch_size: 512
  bucket_size: 8192
  optim: adam
  learning_rate: 1.0
  warmup_steps: 200
  decay_method: noam
  dropout: [0.1]
  attention_dropout: [0.1]
model:
  architecture: transformer
  hidden_size: 128
  layers: 1
  heads: 2
  transformer_ff: 256
  add_estimator: true
  embeddings:
    word_vec_size: 128
    position_encoding_type: SinusoidalInterleaved
EOF
cat > eole1.py <<'EOF'
import sys, torch
torch.set_num_threads(1)
from eole.bin.main import main
sys.argv[0] = "eole"
sys.exit(main())
EOF
$EPY eole1.py build_vocab -config config.yaml -n_sample -1 -num_threads 1
$EPY eole1.py train -config config.yaml
# the same weights loaded as a model without estimator head (config.json edited)
mkdir -p run/model-noestim
$EPY - <<'EOF'
import json
c = json.load(open("run/model/config.json"))
c["model"]["add_estimator"] = False
json.dump(c, open("run/model-noestim/config.json", "w"), indent=2)
EOF
ln -sf "$(readlink -f run/model/model.00.safetensors)" run/model-noestim/model.00.safetensors
ln -sf "$(readlink -f run/model/vocab.json)" run/model-noestim/vocab.json
EP="$EPY eole1.py predict -src $D/test20.bpe.de -beam_size 4 -n_best 4 -batch_size 1 -batch_type sents -seed 1"
$EP -model_path run/model -output out/nbest4.with_score.txt -with_score
$EP -model_path run/model -output out/nbest4.plain.txt
$EP -model_path run/model-noestim -output out/nbest4.noestim.with_score.txt -with_score
$EP -model_path run/model-noestim -output out/nbest4.noestim.with_score.lp-none.txt -with_score -length_penalty none

# ---------------------------------------------------------------- CTranslate2 4.8.5
mkdir -p "$W/ct2/out" && cd "$W/ct2"
CPY="$W/venv-ct2/bin/python"
"$W/venv-ct2/bin/ct2-opennmt-py-converter" --model_path "$W/onmt/run/model_step_1200.pt" \
  --output_dir model --force --unsafe_deserialization
cat > translate_ct2.py <<'EOF'
import json, sys
import ctranslate2
model_dir, src_path, out_path = sys.argv[1:4]
extra = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
translator = ctranslate2.Translator(model_dir, device="cpu", inter_threads=1, intra_threads=1)
with open(src_path, encoding="utf-8") as f:
    batch = [line.split() for line in f]
results = translator.translate_batch(batch, beam_size=4, num_hypotheses=4, return_scores=True, **extra)
with open(out_path, "w", encoding="utf-8") as out:
    for r in results:
        out.write(json.dumps({"hypotheses": r.hypotheses, "scores": r.scores}, ensure_ascii=False) + "\n")
EOF
$CPY translate_ct2.py model "$D/test20.bpe.de" out/nbest4.jsonl
$CPY translate_ct2.py model "$D/test20.bpe.de" out/nbest4.lp0.jsonl '{"length_penalty": 0}'

# ---------------------------------------------------------------- copy into the repo
cp "$D/test20.de" "$HERE/src.de"
cp "$D/test20.en" "$HERE/ref.en"
mkdir -p "$HERE/bpe" "$HERE/marian" "$HERE/opennmt" "$HERE/sockeye" "$HERE/eole" "$HERE/ctranslate2"
cp "$D/test20.bpe.de" "$HERE/bpe/src.bpe.de"
cp "$D/test20.tok.en" "$HERE/bpe/ref.tok.en"
for f in nbest.txt nbest.align-hard.txt nbest.wordscores.txt nbest.nospm.txt nbest.normalize1.txt \
         nbest.all.txt nbest.tokesc.txt nbest.tokesc.nospm.txt; do
  cp "$W/marian/out/$f" "$HERE/marian/"
done
# soft alignments are large: keep the whole n-best blocks of the first 3 sources only
awk -F' \\|\\|\\| ' '$1<3' "$W/marian/out/nbest.align-soft.txt" > "$HERE/marian/nbest.align-soft.first3.txt"
cp "$W/marian/out/quote.tokesc.txt" "$HERE/marian/nbest.quote.tokesc.txt"
cp "$D/quote.de" "$HERE/marian/quote.de"
cp "$D/quote.en" "$HERE/marian/quote.en"
cp "$D/quote_lines.txt" "$HERE/marian/quote.lines"
cp "$W"/onmt/out/*.txt "$HERE/opennmt/"
cp "$W"/sockeye/out/*.json "$HERE/sockeye/"
cp "$W/sockeye/test20.bpe.de.jsonl" "$HERE/sockeye/src.bpe.de.jsonl"
cp "$W"/eole/out/*.txt "$HERE/eole/"
cp "$W"/ct2/out/*.jsonl "$HERE/ctranslate2/"
echo "done: outputs in $HERE"
