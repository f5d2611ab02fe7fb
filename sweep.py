"""
Compare architectures by what they learn: train every config through train.py over seeds x a
learning-rate grid at one budget (or at several sizes), one record per finished run in a results
file, then tables and plots from that file alone.

    python sweep.py --seeds=3 --learning_rate=5e-4,1e-3,2e-3 --jobs=2   # every config: seeds x lr grid
    python sweep.py --seeds=3 --learning_rate=tuned --max_flops=8e12     # equal FLOPs, tuned lr
    python sweep.py --scaling --sizes=2x64,4x128,6x192 --learning_rate=tuned  # compute multipliers
    python sweep.py --configs=gpt,gmlp --block_size=256 --data_dir=data/x   # any train.py key too
    python sweep.py --report --results=results/sweep_stdlib.jsonl  # tables and plots, no training
    python sweep.py --plot out-gpt out-gmlp                        # val-loss plot of existing runs
    python sweep.py --quick                                        # the machinery in about a minute

Runs are independent train.py processes (`jobs` at a time, cores/jobs threads each). Any train.py
key given here (--block_size, --data_dir, --eval_iters, --device, ...) applies to every run. Each
finished run appends one record to the results file (config, seed, lr, budget, val loss, train
seconds, tokens, FLOPs, params, the eval curve); re-running skips finished runs, so an interrupted
sweep resumes. Budgets (max_iters / max_tokens / max_flops) become an iteration count per config and
the cosine schedule ends there; max_seconds stops by the clock. Results go to out-sweep/ unless
--results names a file.
"""
import collections
import dataclasses
import hashlib
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import time
from collections import namedtuple
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field

import torch

from checkpoint import config_from_dict, read_jsonl
from configurator import (UsageError, keys_given, lock_folder, numbers, parse_config, require,
                          run_main, split_flags)
from data import read_meta
from model import GPTConfig, count_flops, count_params
from results import (SCALING_COLUMNS, SUMMARY_COLUMNS, append_record, best_lr, check_writable,
                     config_paths, groups, markdown_table, plot_curves, plot_scaling, plot_sweep,
                     pyplot, read_results, save_png, scaling_rows, summary_rows, tuned_lrs)
from runtime import TrainConfig

BUDGETS = ('max_iters', 'max_tokens', 'max_flops', 'max_seconds')
TRAIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'train.py')
Plan = namedtuple('Plan', 'key run_dir cmd path size')  # one run: record key, folder, command


@dataclass
class SweepConfig:
    configs: list = field(default_factory=list)  # config files or names (gpt,gmlp); default: all
    scaling: bool = False       # each config at each of `sizes`: loss vs FLOPs, compute multipliers
    sizes: list = field(default_factory=lambda: ['2x64', '4x128', '5x160'])  # LAYERSxWIDTH, heads of 32
    seeds: int = 1              # seeds 1..N per (config, lr): the init, the batches and dropout
    learning_rate: list = field(default_factory=list)  # a grid (1e-3,2e-3), 'tuned', or the config's
    extend_lr: bool = False     # a best lr at the grid's edge: try 2x beyond it, until inside
    max_iters: int = 0          # budget: iterations (0 and no other budget: each config's max_iters)
    max_tokens: int = 0         # budget: equal tokens
    max_flops: float = 0.0      # budget: equal training FLOPs (GPT.flops_per_token x tokens)
    max_seconds: float = 0.0    # budget: equal training seconds
    jobs: int = 1               # runs at once, each with cores/jobs threads
    results: str = ''           # results file (JSON lines); '' = <out_prefix>/results.jsonl
    report: bool = False        # tables and plots from the results file only, no training
    quick: bool = False         # a few-minute sweep: 2 layers of 64, 100 iterations, 2 seeds, 2 lrs
    out_prefix: str = 'out-sweep'  # run directories (and the default results file) go here
    plot: bool = False          # --plot DIR [DIR ...]: plot existing runs
    json: bool = False          # print JSON instead of markdown tables
    png: str = ''               # where plots go; '' = the results file's name with .png

    def __post_init__(self):
        require(self, 'seeds jobs', lambda v: v >= 1, "must be at least 1")
        require(self, 'max_iters max_tokens', lambda v: v >= 0, "must not be negative")
        require(self, 'max_flops max_seconds', lambda v: 0 <= v < math.inf,
                "must be a finite number, not negative")


QUICK = dict(max_iters=100, seeds=2, learning_rate=['1e-3', '3e-3'], sizes=['1x32', '2x64'], jobs=2)
QUICK_TRAIN = ['--eval_iters=10', '--eval_interval=50']  # evaluations after step 0: a curve to draw


# -----------------------------------------------------------------------------
# planning: which runs a sweep makes

def parse_size(text):
    """'4x128' -> (n_layer 4, n_embd 128, n_head 4): heads of 32 channels."""
    try:
        n_layer, n_embd = (int(v) for v in text.lower().split('x'))
    except ValueError:
        raise UsageError(f"size {text!r} is not LAYERSxWIDTH (e.g. 4x128)") from None
    if n_layer < 1 or n_embd < 32 or n_embd % 32:
        raise UsageError(f"size {text!r}: need at least 1 layer and a width that is a multiple of "
                         "32")
    return dict(n_layer=n_layer, n_embd=n_embd, n_head=n_embd // 32)


def budget_of(sweep):
    """(kind, value) of the sweep's budget: the one given, else each config's own max_iters."""
    given = [(k, getattr(sweep, k)) for k in BUDGETS if getattr(sweep, k)]
    if len(given) > 1:
        raise UsageError(f"give one budget, not {' and '.join(k for k, _ in given)}")
    return given[0] if given else ('max_iters', 0)


def plan_run(path, sweep, overrides, *, seed, lr, size):
    """The train.py command line, the record key and the run directory of one run. Token and
    FLOPs budgets become an iteration count per config, and the learning-rate schedule ends there
    (lr_decay_iters), so every architecture finishes its cosine decay at the budget whatever its
    FLOPs per token. The key holds everything that changes the outcome; the folder is named by it."""
    name = os.path.basename(path)[:-3]
    args = [path, *overrides, *(f'--{k}={v}' for k, v in (size or {}).items()), f'--seed={seed}']
    if lr:
        args += [f'--learning_rate={lr}', f'--min_lr={lr / 10}']
    cfg = parse_config(TrainConfig, args)
    kind, value = budget_of(sweep)
    tokens_per_iter = cfg.batch_size * cfg.gradient_accumulation_steps * cfg.block_size
    iters = cfg.max_iters
    if kind == 'max_iters':
        iters = value = value or cfg.max_iters
    elif kind == 'max_tokens':
        iters = math.ceil(value / tokens_per_iter)
    elif kind == 'max_flops':
        meta = read_meta(cfg.data_dir) if os.path.isdir(cfg.data_dir) else None
        vocab = cfg.vocab_size or (meta or {}).get('vocab_size') or 50304
        fpt = count_flops(GPTConfig(**{**cfg.model_args(), 'vocab_size': vocab}))
        iters = math.ceil(value / (tokens_per_iter * fpt))
    budget = {'max_iters': iters if kind != 'max_seconds' else 10 ** 12, 'lr_decay_iters': iters,
              'warmup_iters': min(cfg.warmup_iters, max(iters // 10, 0))}
    if kind != 'max_iters':
        budget[kind] = value
    size_label = f"{cfg.n_layer}x{cfg.n_embd}"
    key = dict(config=name, size=size_label, seed=seed, lr=cfg.learning_rate, optimizer=cfg.optimizer,
               budget=kind, budget_value=value, data_dir=cfg.data_dir, block_size=cfg.block_size,
               batch_size=cfg.batch_size)
    key.update({k: getattr(cfg, k) for k in sorted(keys_given(overrides) - set(key))})  # eval_iters...
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:8]
    run_dir = os.path.join(sweep.out_prefix, f"{name}-{size_label}-s{seed}-lr{key['lr']:g}-"
                                             f"{cfg.optimizer}-{kind}{value:g}-{digest}")
    cmd = [sys.executable, TRAIN, *args, f'--out_dir={run_dir}', '--log_interval=50',
           *(f'--{k}={v}' for k, v in budget.items())]
    return Plan(key, run_dir, cmd, path, size)


def learning_rates(sweep, records, key):
    """The sweep's lr grid for one config at one size: the values given, or 'tuned': the best mean in
    the results file for that config on that corpus, at that size if the grid ran there."""
    if sweep.learning_rate == ['tuned']:
        same_data = [r for r in records if r['data_dir'] == key['data_dir']]
        best = tuned_lrs(same_data, key['size']).get(key['config'])
        if best is None:
            raise UsageError("--learning_rate=tuned: the results file has no finished runs of "
                             f"{key['config']} on {key['data_dir']} to tune from; run an lr grid "
                             "first (--learning_rate=5e-4,1e-3,2e-3)")
        return [best]
    if not sweep.learning_rate:
        return [0.0]  # the config's own
    return numbers('learning_rate', sweep.learning_rate, float)


def plan_sweep(sweep, paths, overrides, records):
    sizes = [parse_size(s) for s in sweep.sizes] if sweep.scaling else [None]
    cells = [(path, size) for size in sizes for path in paths]  # size: a dict of overrides, or None
    lrs = {(path, json.dumps(size)): learning_rates(
        sweep, records, plan_run(path, sweep, overrides, seed=1, lr=0, size=size).key)
        for path, size in cells}
    # seed-major order: an interrupted sweep has compared every config on the same seeds so far
    return [plan_run(path, sweep, overrides, seed=seed, lr=lrs[path, json.dumps(size)][k], size=size)
            for seed in range(1, sweep.seeds + 1) for k in range(max(map(len, lrs.values())))
            for path, size in cells if k < len(lrs[path, json.dumps(size)])]


def beyond_the_edges(sweep, overrides, plans, records, tried):
    """Plans for the runs that move a best lr off its grid's edge: where a config's best lr (on the
    seeds every grid point has) is the largest (smallest) tried, the same seeds at twice (half) it."""
    out = []
    cells = groups([{**p._asdict(), 'size': json.dumps(p.size)} for p in plans], 'path', 'size')
    for (path, size), ps in cells.items():
        keys = {json.dumps(p['key'], sort_keys=True) for p in ps}
        base = {k: v for k, v in ps[0]['key'].items() if k not in ('seed', 'lr')}
        rs = [r for r in records if {k: r['key'].get(k) for k in base} == base]
        if not rs or not keys & {json.dumps(r['key'], sort_keys=True) for r in rs}:
            continue
        lrs, best = sorted({r['lr'] for r in rs}), best_lr(rs)
        step = None if len(lrs) < 2 else 2.0 if best == lrs[-1] else 0.5 if best == lrs[0] else None
        for seed in sorted({r['seed'] for r in rs if r['lr'] == best}) if step else []:
            plan = plan_run(path, sweep, overrides, seed=seed, lr=best * step, size=json.loads(size))
            if plan.run_dir not in tried:
                out.append(plan)
    return out


# -----------------------------------------------------------------------------
# running: independent processes, a record appended as each finishes

def read_log(run_dir):
    path = os.path.join(run_dir, 'log.jsonl')
    if not os.path.isfile(path):
        raise UsageError(f"{path} not found; is {run_dir!r} a train.py out_dir?")
    return read_jsonl(path)


def read_config(run_dir):
    """A run's config.json as a dict, or a one-line UsageError naming what is wrong with it."""
    path = os.path.join(run_dir, 'config.json')
    try:
        with open(path, encoding='utf-8') as f:
            config = json.load(f)
    except (OSError, ValueError) as e:
        raise UsageError(f"{path} cannot be read ({type(e).__name__}); is {run_dir!r} a finished "
                         "train.py out_dir?") from None
    if not isinstance(config, dict):
        raise UsageError(f"{path} holds a JSON {type(config).__name__}, not a train.py config")
    return config


def run_summary(run_dir):
    rows = read_log(run_dir)
    evals = [r for r in rows if 'val_loss' in r]
    last = rows[-1] if rows else {}
    config = read_config(run_dir) if os.path.isfile(os.path.join(run_dir, 'config.json')) else None
    params = count_params(config_from_dict(config)) if config else None  # rebuilt from its config
    return dict(run=os.path.basename(os.path.normpath(run_dir)),
                final_val=evals[-1]['val_loss'] if evals else None,
                best_val=min(r['val_loss'] for r in evals) if evals else None,
                iters=last.get('iter'), tokens=last.get('tokens'), flops=last.get('flops'),
                seconds=last.get('train_s', last.get('elapsed_s')),
                ms_per_iter=(1000 * last['train_s'] / last['iter'])
                if last.get('train_s') and last.get('iter') else None, params=params)


def describe_corpus(data_dir):
    """'stdlib (cpython 3.11.7, sha256 1a2b3c4d5e6f) in data/stdlib_byte': what a run trained on."""
    try:
        source = (read_meta(data_dir) or {}).get('source', {})
    except UsageError:
        source = {}
    sha = source.get('sha256') and f"sha256 {source['sha256'][:12]}"
    about = ', '.join(v for v in (source.get('python'), sha) if v)
    return f"{source.get('name', '?')}{f' ({about})' if about else ''} in {data_dir}"


def record_of(key, run_dir, cmd, wall_s):
    """The results-file record of a finished run, from its log.jsonl and config.json."""
    rows = read_log(run_dir)
    evals = [r for r in rows if 'val_loss' in r]
    last, cfg = rows[-1], read_config(run_dir)
    model = config_from_dict(cfg)
    return {'kind': 'sweep', 'key': key, **key, **dict(
        val_loss=evals[-1]['val_loss'], best_val=min(r['val_loss'] for r in evals),
        val_bpb=evals[-1].get('val_bpb'), corpus=describe_corpus(cfg['data_dir']),
        train_loss=evals[-1]['train_loss'], iters=last['iter'], tokens=last['tokens'],
        flops=last.get('flops'), train_s=last.get('train_s'), wall_s=wall_s,
        params=count_params(model), flops_per_token=count_flops(model), n_layer=cfg['n_layer'],
        n_embd=cfg['n_embd'],
        curve=[[r['iter'], r['tokens'], r.get('flops'), r.get('train_s'), r['val_loss']]
               for r in evals],
        command=' '.join(cmd[1:]), date=time.strftime('%Y-%m-%d'),
        machine=f"{platform.machine()} {os.cpu_count()} cores, torch {torch.__version__}")}


def run_one(plan, env, results_path):
    """Train one planned run in a process of its own and append its record: (record, None), or
    (None, why)."""
    if os.path.isdir(plan.run_dir):  # an interrupted attempt starts over, unless a run uses it
        try:
            os.close(lock_folder(plan.run_dir, 'a run'))
        except UsageError as e:
            return None, f"skipped: {e}"
        shutil.rmtree(plan.run_dir, ignore_errors=True)
    t0 = time.time()
    proc = subprocess.run(plan.cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          env=env)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ['?'])[-1]
        return None, (f"failed: {plan.run_dir} (exit {proc.returncode}): {last}\n"
                      f"  rerun: {' '.join(plan.cmd)}")
    record = record_of(plan.key, plan.run_dir, plan.cmd, time.time() - t0)
    append_record(results_path, record, kept=plan.run_dir)
    return record, None


def run_all(sweep, plans, results_path):
    """Run every planned run not already in the results file, `jobs` at a time, with an ETA."""
    done = {json.dumps(r['key'], sort_keys=True) for r in read_results(results_path)}
    todo = [p for p in plans if json.dumps(p.key, sort_keys=True) not in done]
    cores = len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count()
    env = {**os.environ, 'OMP_NUM_THREADS': str(max(1, cores // sweep.jobs))}
    print(f"{len(todo)} runs to do ({len(plans) - len(todo)} already in {results_path}), "
          f"{sweep.jobs} at a time, {env['OMP_NUM_THREADS']} thread(s) each", file=sys.stderr,
          flush=True)
    started, failed = time.time(), 0
    with ThreadPoolExecutor(max_workers=sweep.jobs) as pool:
        futures = {pool.submit(run_one, plan, env, results_path): plan for plan in todo}
        for n, fut in enumerate(as_completed(futures), 1):
            record, why = fut.result()
            failed += record is None
            dt = time.time() - started
            print(f"  {why}" if why else f"[{n}/{len(todo)}] {os.path.basename(futures[fut].run_dir)}"
                  f": val {record['val_loss']:.4f} ({record['wall_s']:.0f}s; {dt / 60:.1f} min "
                  f"elapsed, ETA {dt / n * (len(todo) - n) / 60:.1f} min)", file=sys.stderr, flush=True)
    retry = f", {failed} failed (rerun the same command to retry them)" if failed else ""
    print(f"sweep: {len(todo) - failed} runs in {(time.time() - started) / 60:.1f} min{retry}",
          file=sys.stderr)
    return not failed


# -----------------------------------------------------------------------------
# reporting: tables and plots from the results file alone (the statistics are results.py's)

RUN_COLUMNS = [
    ('run', 'run', '{}'), ('params', 'params', '{:,}'), ('final_val', 'final val loss', '{:.4f}'),
    ('best_val', 'best val loss', '{:.4f}'), ('iters', 'iters', '{:,}'), ('tokens', 'tokens', '{:,}'),
    ('seconds', 'train s', '{:.0f}'), ('ms_per_iter', 'ms/iter', '{:.1f}'),
]


def plot_runs(run_dirs, png):
    """Val loss against tokens and against training seconds, one line per run; False without
    matplotlib."""
    plt = pyplot()
    if plt is None:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for run_dir in run_dirs:
        evals = [r for r in read_log(run_dir) if 'val_loss' in r]
        label = os.path.basename(os.path.normpath(run_dir))
        for ax, key in zip(axes, ('tokens', 'train_s')):
            xs = [r.get(key, r.get('elapsed_s', 0)) for r in evals]
            plot_curves(ax, xs, [[r['val_loss'] for r in evals]], label)
    return save_png(fig, png, axes, ('tokens', 'training seconds'), 'val loss')


def report(sweep, results_path, png):
    records = read_results(results_path)
    if not records:
        raise UsageError(f"no finished runs in {results_path}; run a sweep first (python sweep.py)")
    rows = summary_rows(records)
    if sweep.json:
        print(json.dumps([{k: v for k, v in r.items() if k != 'runs'} for r in rows], indent=1))
    parts = groups(rows, 'data', 'budget', 'optimizer')  # a table each, at its size with most runs
    several = len({k[0] for k in parts}) > 1  # corpora: then each plot's name says which
    plotted = []
    for (data, budget, opt), rs in parts.items():
        main_size = collections.Counter(r['size'] for r in rs).most_common(1)[0][0]
        main = [r for r in rs if r['size'] == main_size]
        if not sweep.json:
            print(f"\n### {rs[0]['corpus']}: {budget}, {opt}, size {main_size}\n")
            print(markdown_table(main, SUMMARY_COLUMNS))
        corpus = f"-{os.path.basename(data)}" if several else ''
        name = png.replace('.png', f"-{budget.replace('=', '')}-{opt}{corpus}.png") \
            if len(parts) > 1 else png
        if plot_sweep(main, name):
            plotted.append(name)
    for (data, kind, opt), rs in groups(rows, 'data', 'kind', 'optimizer').items():  # every size
        if len({r['size'] for r in rs}) > 1:
            if not sweep.json:
                print(f"\n### scaling on {rs[0]['corpus']}: {kind}, {opt}\n")
                print(markdown_table(scaling_rows(rs), SCALING_COLUMNS))
            corpus = f"-{os.path.basename(data)}" if several else ''
            name = png.replace('.png', f"-{kind}-{opt}{corpus}-scaling.png")
            if plot_scaling(rs, name):
                plotted.append(name)
    for p in plotted:
        print(f"plot: {p}", file=sys.stderr)
    return rows


def main(argv):
    own, overrides = split_flags(argv, SweepConfig, TrainConfig)
    positional = [a for a in own if not a.startswith('--')]
    sweep = parse_config(SweepConfig, [a for a in own if a.startswith('--')], config_files=False,
                         doc=__doc__, usage="python sweep.py [config.py ... | --configs=NAME,...] "
                                            "[--key=value ...]")
    if sweep.plot:
        if not positional:
            raise UsageError("--plot needs run directories: python sweep.py --plot out-gpt "
                             "out-gmlp")
        rows = [run_summary(d) for d in positional]
        print(json.dumps(rows, indent=1) if sweep.json else markdown_table(rows, RUN_COLUMNS))
        png = sweep.png or os.path.join(sweep.out_prefix, 'runs.png')
        if plot_runs(positional, png):
            print(f"plot: {png}", file=sys.stderr)
        return rows
    given = keys_given(argv)
    if sweep.quick:  # a few-minute version of the same sweep, at tiny sizes
        sweep = dataclasses.replace(sweep, **{k: v for k, v in QUICK.items() if k not in given})
        overrides = [*QUICK_TRAIN, *overrides]
        if not sweep.scaling and not {'n_layer', 'n_embd', 'n_head'} & given:
            overrides = ['--n_layer=2', '--n_embd=64', '--n_head=2', *overrides]
    paths = config_paths(sweep.configs + positional)
    for path in paths:  # every override is valid for every config before anything runs
        parse_config(TrainConfig, [path, *overrides])
    results_path = sweep.results or os.path.join(sweep.out_prefix, 'results.jsonl')
    png = sweep.png or os.path.splitext(results_path)[0] + '.png'
    ok = True
    if not sweep.report:
        check_writable(results_path)
        if sweep.max_seconds and sweep.jobs > 1:
            print("note: max_seconds with jobs > 1: runs share the cores, so equal seconds are not "
                  "equal work", file=sys.stderr)
        plans = plan_sweep(sweep, paths, overrides, read_results(results_path))
        ok, tried = run_all(sweep, plans, results_path), {p.run_dir for p in plans}
        while sweep.extend_lr and ok:  # until every best lr lies inside its grid
            more = beyond_the_edges(sweep, overrides, plans, read_results(results_path), tried)
            if not more:
                break
            print(f"extending the lr grid: {len(more)} run(s) whose best lr is the grid's edge",
                  file=sys.stderr)
            ok, plans = run_all(sweep, more, results_path), plans + more
            tried |= {p.run_dir for p in more}
    rows = report(sweep, results_path, png)
    if not ok:
        raise UsageError(f"some runs failed (see above); {results_path} keeps every finished run")
    return rows


if __name__ == '__main__':
    run_main(main)
