#!/bin/bash
# #47 point 2 on one GPU, from the repository root: OUT=folder bash results/gpu_levers.sh (about 3 min).
# How fast many small runs go on one GPU: the 5x288 study's model (gpt, batch 128 x 256, bf16), N
# bench.py processes at once (N = 1, 4, 8, 12), eager and torch.compile'd; each process's median
# ms/iter over 3 timings of 30 steps. Summed iterations/s is what a study queue gets. One JSON line per
# process in OUT/levers.jsonl as it finishes; machine and torch in OUT/machine.txt.
set -u; OUT=${OUT:?}; mkdir -p "$OUT"; T0=$(date +%s); export PYTHONUNBUFFERED=1
{ date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  python -c 'import torch,sys;print(torch.__version__, sys.version.split()[0])'; } > "$OUT/machine.txt" 2>&1
SHAPE="configs/gpt.py --n_layer=5 --n_head=9 --n_embd=288 --block_size=256 --batch_size=128 --vocab_size=256"
RUN="--device=cuda --dtype=bfloat16 --iters=30 --repeats=3 --warmup=5 --decode_tokens=0 --json"
if [ "${SMALL:-0}" = 1 ]; then  # a CPU rehearsal of the script itself
  SHAPE="configs/gpt.py --n_layer=1 --n_head=2 --n_embd=32 --block_size=16 --batch_size=2 --vocab_size=64"
  RUN="--device=cpu --dtype=float32 --iters=2 --repeats=1 --warmup=1 --decode_tokens=0 --json"; fi
NS=${NS:-1 4 8 12}; NC=${NC:-1 4}
lever() { # name, N, extra flags: N processes at once, each a JSON line (lever, n, rank) in levers.jsonl
  local name=$1 n=$2; shift 2; local pids=()
  for i in $(seq 1 $n); do
    ( python bench.py $SHAPE $RUN "$@" > "$OUT/.r_${name}_${n}_${i}" 2>> "$OUT/errors.txt"
      python -c "import json,sys; d=json.load(open(sys.argv[1])); r=d['rows'][0]
print(json.dumps(dict(lever=sys.argv[2], n=int(sys.argv[3]), rank=int(sys.argv[4]), ms_per_iter=r['ms_per_iter'],
      ms_range=r['ms_range'], tokens_per_s=r['tokens_per_s'], mfu=r['mfu'], setup=d['setup'])))" \
        "$OUT/.r_${name}_${n}_${i}" $name $n $i >> "$OUT/levers.jsonl" 2>> "$OUT/errors.txt"
      rm -f "$OUT/.r_${name}_${n}_${i}" ) &
    pids+=($!)
  done
  wait "${pids[@]}"
  echo "[$(( $(date +%s) - T0 ))s] $name x$n done" >> "$OUT/log.txt"; }
for n in $NS; do lever eager $n; done
for n in $NC; do lever compiled $n --compile; done
python - "$OUT/levers.jsonl" >> "$OUT/log.txt" <<'EOF'
import json, sys, collections
rows = [json.loads(l) for l in open(sys.argv[1])]
by = collections.defaultdict(list)
for r in rows:
    by[(r['lever'], r['n'])].append(r)
for (lever, n), rs in sorted(by.items()):
    its = sum(1000 / r['ms_per_iter'] for r in rs)
    print(f"{lever:9} x{n:2}: {len(rs)} processes, {its:7.1f} iterations/s in all, "
          f"{its / n:6.1f} each, MFU {sum(r['mfu'] or 0 for r in rs):.3f} in all")
EOF
echo "[$(( $(date +%s) - T0 ))s] end" >> "$OUT/log.txt"; cat "$OUT/log.txt"
