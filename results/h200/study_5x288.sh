#!/bin/bash
# Run from the repository root on a machine with one GPU: OUT=some/folder bash results/h200/study_5x288.sh
# (records are appended to OUT/shapes_site.jsonl by each run as it finishes; DEADLINE_S, default 540 s,
# stops the sweeps; Ctrl-C or SIGTERM stops them too, keeping every finished record).
# The 5x288 study on one GPU (#40 point 4/5), a queue of pipelines in priority order, PIPES of them at once
# (default 3, three runs each: about 8 runs at once): for each config a WSD lr grid at seed 1 (extended until the best is inside),
# then seeds 2 and 3 at the best; gpt and llama also under cosine at the top budget (grid at seed 1, seed 2
# at its best). A pipeline, or a later sweep of one, starts only while STAGE_S seconds remain before the
# deadline (default 480: on an H100 with 9 compiled runs at once a grid's 15 runs took 7.3-7.9 minutes,
# results/h200/study_2026-11-26_h100.txt), so that what starts can finish, and only when its previous sweep ended whole (a grid cut short tunes no seeds). A stopped
# constant-lr run starts over in the next session (its checkpoint goes with the machine).
# Each session continues from the committed records. The work folder is OUT's own: two studies with
# different OUT share nothing, and a stop of one never stops the other or a later one; a second study
# with the same OUT is refused (a flock on OUT/.study.lock, released when the first ends).
# Env: OUT (where records go), DEADLINE_S, PIPES, STAGE_S, SMALL=1 (a CPU rehearsal at 2x64, into DATA), PRIOR (the
# records continued when OUT has none: the committed ones; none for SMALL), NEW_DATA=1 (see below).
set -u
OUT=${OUT:?}; DEADLINE_S=${DEADLINE_S:-540}; PIPES=${PIPES:-3}; STAGE_S=${STAGE_S:-480}; T0=$(date +%s)
PY=${PY:-python3}; export PYTHONUNBUFFERED=1
mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
exec 9>>"$OUT/.study.lock"  # one study per OUT: a second would wipe the first's work folder and log
flock -n 9 || { echo "error: another study is running with OUT=$OUT; wait for it, or pass another OUT" >&2; exit 2; }
S=/tmp/study-$(echo "$OUT" | sha256sum | cut -c1-12); rm -rf "$S"; mkdir -p "$S/logs"
R=$OUT/shapes_site.jsonl; LOG=$OUT/study.log; : > "$LOG"
# the committed records a study continues (none for the rehearsal)
[ "${SMALL:-0}" = 1 ] && PRIOR=${PRIOR-} || PRIOR=${PRIOR-results/h200/shapes_site.jsonl}
if [ "${SMALL:-0}" = 1 ]; then
  SRC="$($PY -c 'import sysconfig;print(sysconfig.get_paths()["stdlib"])')/json/**/*.py"
  DATA=${DATA:-data/rehearsal_byte}; SZ=2x64; B="--max_iters=20,40"; TOP=40; BT="--batch_size=4 --block_size=32"
  DEV="--device=cpu --threads=1 --eval_iters=2 --eval_interval=20 --warmup_iters=5"  # (one thread: the grids and seeds one setting)
else
  SRC="$($PY -c 'import site;print(site.getsitepackages()[0])')/**/*.py"
  DATA=data/site_byte; SZ=5x288; B="--max_iters=195,390,780,1560,3125"; TOP=3125; BT="--batch_size=128 --block_size=256"
  # compiled: 8 compiled runs at once do 444 iterations/s on an H100, 8 eager ones 201, 1 eager 100
  # (results/h100/levers_2026-11-26.txt); compile is part of a run's setting, so the eager records of
  # the first session stay apart and these runs redo them
  DEV="--device=cuda --dtype=bfloat16 --compile --eval_iters=20 --eval_interval=390 --warmup_iters=50"
fi
{ date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1
  $PY -c 'import torch,sys;print(torch.__version__, sys.version.split()[0])'; } > "$OUT/machine.txt"
$PY prepare.py "--input=$SRC" --tokenizer=byte --errors=replace --out_dir=$DATA >> "$OUT/machine.txt" 2>&1 \
  || { cat "$OUT/machine.txt"; exit 1; }
# a later session continues: the runs already recorded are skipped; the runs append to R in OUT itself,
# so what comes back from the machine holds every record, wherever the session ends. The corpus is
# this machine's site-packages: on another image it is other text, and the study would start over on
# it unnoticed; it stops instead, unless NEW_DATA=1 (a new study on purpose: the fingerprint keeps the
# records apart)
SEEN=$R; [ -f "$R" ] || SEEN=$PRIOR
if [ "${NEW_DATA:-0}" != 1 ] && [ -f "$SEEN" ]; then
  why=$($PY - "$DATA" "$SEEN" <<'P'
import sys
sys.path.insert(0, '.')
import stats
from dataset import fingerprint, read_meta
fp, had = fingerprint(read_meta(sys.argv[1])), {r['key'].get('data') for r in stats.read_results(sys.argv[2])}
if had - {None} and fp not in had:
    print(f"the corpus prepared in {sys.argv[1]} (data {fp}) is not the one the records of {sys.argv[2]} "
          f"were trained on ({', '.join(sorted(had - {None}))}); this machine's files differ: NEW_DATA=1 "
          "starts a study on this corpus (its records kept apart by the fingerprint)")
P
) || why="the check of the corpus against $SEEN failed (above); NEW_DATA=1 skips it"
  [ -z "$why" ] || { echo "error: $why" | tee -a "$LOG" >&2; exit 2; }
fi
cp $DATA/meta.json "$OUT/shapes_site_meta.json"
[ -f "$R" ] || [ ! -f "$PRIOR" ] || cp "$PRIOR" "$R"
C="--scaling --sizes=$SZ $BT $DEV --data_dir=$DATA --results=$R --out_prefix=$S/runs"
W="$C $B --lr_schedule=wsd"; K="$C --max_iters=$TOP --lr_schedule=cosine"
at() { echo "[$(( $(date +%s) - T0 ))s]"; }
say() { echo "$(at) $*" | tee -a "$LOG"; }
late() { # why no stage may start now (or nothing: it may)
  if [ -e "$S/stop" ]; then echo "stopped ($(cat "$S/stop"))"
  elif [ $(( DEADLINE_S - ($(date +%s) - T0) )) -lt $STAGE_S ]; then echo "fewer than STAGE_S=${STAGE_S}s left before the deadline"; fi; }
pipe() { # name, then sweeps separated by ';;': each starts only while time remains and the one before ended whole.
  # A pipeline's sweeps write a results file of its own (a sweep holds its results file's lock while it
  # runs: pipelines into one file would take turns), begun from R; the files are merged into R at the end
  local name=$1; shift; local args=() why rc
  [ -f "$OUT/pipe_$name.jsonl" ] || cp "$R" "$OUT/pipe_$name.jsonl" 2>/dev/null || :
  for a in "$@" ";;"; do
    if [ "$a" = ";;" ]; then
      why=$(late); if [ -n "$why" ]; then say "$name: not started: sweep.py ${args[*]}: $why"; return; fi
      say "$name: sweep.py ${args[*]}"
      $PY sweep.py "${args[@]}" --results="$OUT/pipe_$name.jsonl" >> "$S/logs/$name.log" 2>&1; rc=$?
      if [ $rc != 0 ]; then say "$name: sweep.py exited $rc: its later stages are not started"; return; fi
      args=()
    else args+=($a); fi
  done; say "$name: done"; }
grid() { # config, its lr grid: WSD grid at seed 1 (extended), then seeds 2 and 3 at the best
  echo "$1_wsd --configs=$1 $W --jobs=3 --learning_rate=$2 --extend_lr ;; --configs=$1 $W --jobs=2 --seeds=3 --learning_rate=tuned"; }
cosine() { echo "$1_cos --configs=$1 $K --jobs=3 --learning_rate=$2 ;; --configs=$1 $K --jobs=1 --seeds=2 --learning_rate=tuned"; }
QUEUE=("$(grid gpt 2e-3,4e-3,8e-3)" "$(grid llama 1e-3,2e-3,4e-3)" "$(grid gmlp 4e-3,8e-3,1.6e-2)"
       "$(grid primer_ez 2e-3,4e-3,8e-3)" "$(grid llama_primer 1e-3,2e-3,4e-3)" "$(grid gpt_rope 2e-3,4e-3,8e-3)"
       "$(grid swiglu 2e-3,4e-3,8e-3)" "$(cosine llama 1e-3,2e-3,4e-3)" "$(cosine gpt 2e-3,4e-3,8e-3)")
dispatch() { # the queue, PIPES pipelines at once; none starts once `late` says why not
  for item in "${QUEUE[@]}"; do
    while [ $(jobs -rp | wc -l) -ge $PIPES ]; do sleep 2; done
    why=$(late); if [ -n "$why" ]; then say "not started: ${item%% *}: $why"; continue; fi
    pipe $item &
    sleep 1
  done; wait; }
stop() { # $1: why. No stage starts from here on; the running sweeps stop their runs (which save) and exit
  [ -e "$S/stop" ] && return; echo "$1" > "$S/stop"; say "stopping: $1"
  pkill -INT -f "sweep.py .*--out_prefix=$S/runs" 2>/dev/null  # then up to 15 s while their runs save
  for _ in $(seq 15); do pgrep -f "sweep.py .*--out_prefix=$S/runs" > /dev/null || break; sleep 1; done
  pkill -INT -f "sweep.py .*--out_prefix=$S/runs" 2>/dev/null; pkill -TERM -f "train.py .*--out_dir=$S/runs" 2>/dev/null; }
trap 'stop "a signal"; SIGNALLED=1' INT TERM; SIGNALLED=0
dispatch & DISPATCH=$!
while [ $(( $(date +%s) - T0 )) -lt $DEADLINE_S ] && kill -0 $DISPATCH 2>/dev/null; do
  sleep 5; n=$(( ${n:-0} + 1 ))
  [ $((n % 12)) = 1 ] && nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader >> "$OUT/machine.txt" 2>&1
done
kill -0 $DISPATCH 2>/dev/null && stop "the deadline, DEADLINE_S=${DEADLINE_S}s"
wait
for f in "$S"/logs/*.log; do [ -e "$f" ] && { echo "== $(basename "$f")"; cat "$f"; } >> "$LOG"; done
$PY - "$R" "$OUT"/pipe_*.jsonl <<'P'  # the pipelines' records into R as written, each run once (R's first)
import json, os, sys
sys.path.insert(0, '.')
import stats
from configurator import atomic_write, read_jsonl
seen, lines = set(), []
for path in [f for f in sys.argv[1:] if os.path.exists(f)]:
    for _, r in read_jsonl(path):
        if r and isinstance(r.get('key'), dict) and stats.run_id(r['key']) not in seen:
            seen.add(stats.run_id(r['key']))
            lines.append(json.dumps(r) + '\n')
if lines:
    atomic_write(sys.argv[1], lambda f: f.write(''.join(lines).encode()))
P
$PY sweep.py --report --results=$R --png=$S/shapes_site.png > "$OUT/report.md" 2>&1
say "end"; tail -c 3000 "$OUT/report.md"
[ $SIGNALLED = 0 ] || exit 130
