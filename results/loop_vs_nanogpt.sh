#!/bin/bash
# Our train.py loop against nanoGPT's, side by side on this machine's CPU: gpt at 4x128 (4 layers,
# 4 heads, width 128), block 64, batch 12, float32, no compile, a log line every iteration. Rounds
# alternate the two; the figure is the median ms per iteration from iteration 20 on.
#   bash results/loop_vs_nanogpt.sh path/to/nanoGPT [iterations per run, 400] [rounds, 3]
# Needs a nanoGPT checkout (git clone https://github.com/karpathy/nanoGPT); writes nothing here:
# its data, runs and the raw per-iteration times go to a temporary folder (printed at the end).
set -euo pipefail
NANO=$(cd "${1:?usage: bash results/loop_vs_nanogpt.sh path/to/nanoGPT [iters] [rounds]}" && pwd)
N=${2:-400}; ROUNDS=${3:-3}; PY=${PY:-python}
REPO=$(cd "$(dirname "$0")/.." && pwd); WORK=$(mktemp -d); RAW=$WORK/raw.txt
[ -f "$NANO/train.py" ] || { echo "error: $NANO/train.py not found; pass a nanoGPT checkout" >&2; exit 2; }
cd "$REPO" && $PY prepare.py --out_dir="$WORK/pydoc_char" > /dev/null
mkdir -p "$WORK/nano/data/pyd"
trap 'rm -f "$NANO/data/_loop_vs_ours"' EXIT  # the one thing put in the nanoGPT checkout
ln -sfn "$WORK/nano/data/pyd" "$NANO/data/_loop_vs_ours"
$PY - "$WORK" <<'P'
import json, os, pickle, sys
import numpy as np
sys.path.insert(0, '.')
from dataset import load_shard
work = sys.argv[1]
meta = json.load(open(f'{work}/pydoc_char/meta.json'))
for split in ('train', 'val'):
    ids = np.concatenate([load_shard(f'{work}/pydoc_char/{n}') for n in meta['shards'][split]])
    ids.astype(np.uint16).tofile(f'{work}/nano/data/pyd/{split}.bin')
pickle.dump({'vocab_size': meta['vocab_size']}, open(f'{work}/nano/data/pyd/meta.pkl', 'wb'))
P
COMMON="--n_layer=4 --n_head=4 --n_embd=128 --block_size=64 --batch_size=12
 --gradient_accumulation_steps=1 --max_iters=$N --lr_decay_iters=$N --eval_interval=100000
 --eval_iters=1 --log_interval=1 --device=cpu --dtype=float32 --compile=False --dropout=0.0
 --bias=False --learning_rate=1e-3 --min_lr=1e-4 --warmup_iters=50"
for round in $(seq "$ROUNDS"); do
  (cd "$NANO" && $PY train.py --dataset=_loop_vs_ours --out_dir="$WORK/nano-out" \
     --always_save_checkpoint=False $COMMON 2>&1 | awk -v r="$round" '/^iter [0-9]+:/ {
       for (i = 1; i <= NF; i++) if ($i == "time") { gsub("ms,", "", $(i+1)); print "nanoGPT", r, $2, $(i+1) } }') >> "$RAW"
  rm -rf "$WORK/ours-out"
  $PY train.py configs/quick.py --data_dir="$WORK/pydoc_char" --out_dir="$WORK/ours-out" $COMMON > /dev/null 2>&1
  $PY - "$WORK/ours-out/log.jsonl" "$round" <<'P' >> "$RAW"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"loss"' in l]
for a, b in zip(rows, rows[1:]):
    print('ours', sys.argv[2], f"{b['iter']}:", round(1000 * (b['elapsed_s'] - a['elapsed_s']), 3))
P
done
$PY - "$RAW" <<'P'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
med = {}
for who in ('nanoGPT', 'ours'):
    ms = [float(m) for w, r, it, m in rows if w == who and int(it.rstrip(':')) >= 20]
    med[who] = statistics.median(ms)
    rounds = sorted({r for w, r, _, _ in rows if w == who})
    per = [statistics.median([float(m) for w, r, it, m in rows if w == who and r == k
                              and int(it.rstrip(':')) >= 20]) for k in rounds]
    print(f"{who}: median {med[who]:.2f} ms/iter over {len(ms)} iterations (per round: "
          f"{', '.join(f'{p:.2f}' for p in per)})")
print(f"ours / nanoGPT: {med['ours'] / med['nanoGPT']:.3f}x (raw: {sys.argv[1]})")
P
