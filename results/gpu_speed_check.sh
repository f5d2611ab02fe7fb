#!/bin/bash
# #41 point 2 on one GPU, from the repository root: OUT=folder bash results/gpu_speed_check.sh (about 8 min).
# The recorded decoding step's GPU tests (whole output kept), bench.py's decode columns at GPT-2 124M (batch 1,
# 500 tokens; compiled too for gpt and llama), and sample.py with and without --compile on a 12x768 byte-level run.
# First run on an H100 on 2026-11-26 (results/h100/speed_check_2026-11-26.txt); its tests now live in test_model.py.
set -u; OUT=${OUT:?}; export PYTHONUNBUFFERED=1; T0=$(date +%s)
{ date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  python -c 'import torch,sys;print(torch.__version__, sys.version.split()[0])'; } > $OUT/machine.txt 2>&1
echo "== tests $(($(date +%s)-T0))s" >> $OUT/log.txt
timeout 240 python -m pytest -q test_model.py -k "captured or recorded_step or records_again or python_data or reused_cache or saved_cache" \
  > $OUT/pytest_captured.txt 2>&1; tail -3 $OUT/pytest_captured.txt >> $OUT/log.txt
G="--device=cuda --dtype=bfloat16 --n_layer=12 --n_head=12 --n_embd=768 --block_size=1024 --vocab_size=50304 --batch_size=1"
echo "== bench decode $(($(date +%s)-T0))s" >> $OUT/log.txt
timeout 200 python bench.py --configs=gpt,llama,primer_ez,gmlp,amlp,llama_primer $G --iters=1 --repeats=1 --warmup=1 \
  --decode_tokens=500 --json > $OUT/decode124_b1.jsonl 2> $OUT/bench_decode.err; tail -2 $OUT/bench_decode.err >> $OUT/log.txt
echo "== bench decode compiled (gpt, llama) $(($(date +%s)-T0))s" >> $OUT/log.txt
timeout 200 python bench.py --configs=gpt,llama $G --compile --iters=1 --repeats=1 --warmup=1 \
  --decode_tokens=500 --json > $OUT/decode124_b1_compiled.jsonl 2> $OUT/bench_decode_c.err; tail -2 $OUT/bench_decode_c.err >> $OUT/log.txt
echo "== sample $(($(date +%s)-T0))s" >> $OUT/log.txt
SRC="$(python -c 'import sysconfig;print(sysconfig.get_paths()["stdlib"])')/json/*.py"
python prepare.py "--input=$SRC" --tokenizer=byte --out_dir=data/json_byte > /dev/null 2>&1
python train.py configs/gpt.py --data_dir=data/json_byte --n_layer=12 --n_head=12 --n_embd=768 --block_size=1024 \
  --batch_size=1 --max_iters=1 --eval_iters=1 --device=cuda --out_dir=out-s124 > $OUT/train_s124.txt 2>&1
for c in False True False True; do
  python sample.py --out_dir=out-s124 --max_new_tokens=500 --compile=$c --seed=1 > $OUT/sample_$c.txt 2>> $OUT/sample_err.txt
done
grep -E "tokens in|compile" $OUT/sample_err.txt >> $OUT/log.txt; cmp $OUT/sample_False.txt $OUT/sample_True.txt >> $OUT/log.txt 2>&1 && echo "same text" >> $OUT/log.txt
echo "== done $(($(date +%s)-T0))s" >> $OUT/log.txt
