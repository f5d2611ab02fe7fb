"""
Speed, memory and quality per architecture, side by side.

    python bench.py                                  # speed table for every config in configs/
    python bench.py configs/gpt.py configs/gmlp.py --device=cuda --dtype=bfloat16 --compile=true
    python bench.py --sweep --seeds=3 --lr=5e-4,1e-3,2e-3 --jobs=2   # quality: every config, seeds x lr grid
    python bench.py --sweep --seeds=3 --lr=tuned --max_flops=8e12     # ... at equal training FLOPs, tuned lr
    python bench.py --scaling --sizes=2x64,4x128,6x192 --lr=tuned     # loss vs FLOPs, compute multipliers
    python bench.py --report --results=results/sweep.jsonl            # tables and plots again, no training
    python bench.py --plot out-gpt out-gmlp                           # val-loss plot of existing runs

Quality mode runs train.py once per (config, size, lr, seed), as independent processes (`jobs` at a
time), and appends one record per finished run to the results file (config, seed, lr, budget, val
loss, train seconds, tokens, FLOPs, params, the eval curve). Re-running skips finished runs, so an
interrupted sweep resumes; tables and plots are made from that file alone (--report). Budgets
(max_iters / max_tokens / max_flops) become an iteration count per config and the cosine schedule
ends there; max_seconds stops by the clock.

Speed mode builds each config's model at the config's own shape (overridable, e.g. --n_layer=12)
and times forward + backward + AdamW step after warm-up (median of `repeats` timings of `iters`
steps), then decoding with and without the model's cache. Peak memory is CUDA's max allocated,
or on CPU the growth of the peak resident set of a fresh process per config (torch itself excluded).
"""
import collections
import dataclasses
import glob
import json
import math
import multiprocessing
import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field

from configurator import UsageError, atomic_write, parse_config, run_main


@dataclass
class BenchConfig:
    configs: list = field(default_factory=list)  # config files or names (gpt,gmlp); default: every configs/*.py but quick.py
    # speed mode
    device: str = 'auto'        # 'auto' (cuda, mps, cpu), 'cpu', 'cuda', 'cuda:N', 'mps'
    dtype: str = 'float32'      # float32 | bfloat16 | float16 (autocast)
    compile: bool = False       # torch.compile each model
    batch_size: int = 0         # 0 = each config's own
    block_size: int = 0         # 0 = each config's own
    n_layer: int = 0            # 0 = each config's own
    n_head: int = 0             # 0 = each config's own
    n_embd: int = 0             # 0 = each config's own
    vocab_size: int = 65        # Tiny Shakespeare char-level; 50304 for GPT-2 BPE
    iters: int = 10             # training steps per timing
    repeats: int = 5            # timings; the median is reported with min..max
    warmup: int = 5             # untimed steps first
    decode_tokens: int = 256    # new tokens per decoding timing (from a 1-token prompt)
    decode_block_size: int = 0  # 0 = the config's block_size
    peak_flops: float = 0.0     # for MFU; 0 = the GPU's bf16 peak by name (train.PEAK_TFLOPS), none on CPU
    json: bool = False          # print JSON instead of a markdown table
    # quality mode
    sweep: bool = False         # quality mode: train each config through train.py, seeds x lr grid
    scaling: bool = False       # quality mode at each of `sizes`: loss vs FLOPs and compute multipliers
    sizes: list = field(default_factory=lambda: ['2x64', '4x128', '5x160'])  # scaling: LAYERSxWIDTH, heads of 32
    seeds: int = 1              # seeds 1..N per (config, lr): each changes the init, the batches and dropout
    lr: list = field(default_factory=list)  # lr grid (e.g. 5e-4,1e-3,2e-3), 'tuned' (best in results), or the config's
    optimizer: str = ''         # '' = each config's own; 'adamw' or 'muon'
    data_dir: str = ''          # '' = each config's own
    eval_iters: int = 0         # 0 = each config's own
    eval_interval: int = 0      # 0 = each config's own (the final eval is always made)
    max_iters: int = 0          # sweep budget: iterations (0 and no other budget: each config's max_iters)
    max_tokens: int = 0         # sweep budget: equal tokens
    max_flops: float = 0.0      # sweep budget: equal training FLOPs (GPT.flops_per_token x tokens)
    max_seconds: float = 0.0    # sweep budget: equal training seconds
    jobs: int = 1               # runs at once, each with cores/jobs threads
    results: str = ''           # results file (JSON lines); '' = <out_prefix>.jsonl
    report: bool = False        # tables and plots from the results file only, no training
    quick: bool = False         # a few-minute sweep: 2 layers of 64, 100 iterations, 2 seeds, 2 lrs
    out_prefix: str = 'out-sweep'  # run directories go in this folder
    plot: bool = False          # --plot DIR [DIR ...]: plot existing runs
    png: str = ''               # where plots go; '' = the results file's name with .png

    def __post_init__(self):
        for name in ('iters', 'repeats', 'seeds', 'jobs'):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ('warmup', 'decode_tokens', 'max_iters', 'max_tokens', 'max_flops', 'max_seconds', 'eval_iters',
                     'eval_interval'):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative, got {getattr(self, name)}")
        if self.optimizer not in ('', 'adamw', 'muon'):
            raise ValueError(f"optimizer={self.optimizer!r} is not one of adamw, muon ('' = each config's own)")


# -----------------------------------------------------------------------------
# speed mode

def rss_bytes(key='VmHWM'):
    """Peak (VmHWM) or current (VmRSS) resident set of this process; ru_maxrss where /proc is missing."""
    try:
        with open('/proc/self/status') as f:
            for line in f:
                if line.startswith(key + ':'):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kB on Linux, bytes on macOS
    return rss if sys.platform == 'darwin' else rss * 1024


def model_config_from(path, bench):
    """The GPTConfig a training config file describes, with the bench's shape overrides."""
    from model import GPTConfig
    from train import TrainConfig
    cfg = parse_config(TrainConfig, [path])
    args = cfg.model_args()
    for key in ('block_size', 'n_layer', 'n_head', 'n_embd'):
        if getattr(bench, key):
            args[key] = getattr(bench, key)
    args['vocab_size'] = bench.vocab_size
    try:
        return GPTConfig(**args), bench.batch_size or cfg.batch_size
    except ValueError as e:
        raise UsageError(f"{path}: {e}") from None


def speed_row(path, bench, device):
    import torch
    from model import GPT
    from train import autocast_context, peak_flops, sync_device
    mcfg, batch_size = model_config_from(path, bench)
    device_type = device.split(':')[0]
    torch.manual_seed(0)
    if device.startswith('cuda'):
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    base = 0 if device.startswith('cuda') else rss_bytes('VmRSS')  # torch itself is not the model's
    model = GPT(mcfg).to(device)
    opt = model.configure_optimizers(0.1, 1e-3, (0.9, 0.99), device_type)
    ctx = autocast_context(device_type, bench.dtype)
    scaler = torch.amp.GradScaler(device_type, enabled=bench.dtype == 'float16')
    step_model = torch.compile(model) if bench.compile else model
    T = mcfg.block_size
    x = torch.randint(0, mcfg.vocab_size, (batch_size, T + 1), device=device)
    x, y = x[:, :-1], x[:, 1:]

    def step():
        with ctx:
            _, loss = step_model(x, y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)

    for _ in range(bench.warmup):
        step()
    times = []
    for _ in range(bench.repeats):
        sync_device(device_type)
        t0 = time.perf_counter()
        for _ in range(bench.iters):
            step()
        sync_device(device_type)
        times.append((time.perf_counter() - t0) / bench.iters)
    dt = sorted(times)[len(times) // 2]
    spread = (max(times) - min(times)) / dt  # a wide spread: the machine was busy, the median is suspect
    tokens_per_s = batch_size * T / dt
    if device.startswith('cuda'):
        peak_mem = torch.cuda.max_memory_allocated()
    else:
        peak_mem = rss_bytes('VmHWM') - base
    peak = peak_flops(device, bench.peak_flops)
    row = dict(config=os.path.basename(path)[:-3], params=model.get_num_params(),
               ms_per_iter=dt * 1000, ms_min=min(times) * 1000, ms_max=max(times) * 1000,
               ms_range=f"{min(times) * 1000:.1f}–{max(times) * 1000:.1f}" + (' UNSTABLE' if spread > UNSTABLE else ''),
               tokens_per_s=tokens_per_s,
               flops_per_token=model.flops_per_token(), peak_mem_mb=peak_mem / 2 ** 20,
               mfu=model.estimate_mfu(tokens_per_s, peak) if peak else None)
    # decoding: one prompt token, decode_tokens new ones, greedy; with and without the cache
    if bench.decode_tokens:
        dcfg = mcfg
        if bench.decode_block_size:
            dcfg = dataclasses.replace(mcfg, block_size=bench.decode_block_size)
            model = GPT(dcfg).to(device)
        model.eval()
        prompt = torch.zeros(1, 1, dtype=torch.long, device=device)
        for use_cache in (True, False):
            with ctx:
                model.generate(prompt, 8, temperature=0, use_cache=use_cache)  # warm-up
                sync_device(device_type)
                t0 = time.perf_counter()
                model.generate(prompt, bench.decode_tokens, temperature=0, use_cache=use_cache)
                sync_device(device_type)
            key = 'decode_tok_s_cached' if use_cache else 'decode_tok_s_uncached'
            row[key] = bench.decode_tokens / (time.perf_counter() - t0)
    return row


def markdown_table(rows, columns):
    """rows: list of dicts; columns: list of (key, header, format)."""
    out = ['| ' + ' | '.join(h for _, h, _ in columns) + ' |',
           '|' + '|'.join('---' if i == 0 else '---:' for i in range(len(columns))) + '|']
    for r in rows:
        cells = []
        for key, _, fmt in columns:
            v = r.get(key)
            cells.append('–' if v is None else fmt.format(v))
        out.append('| ' + ' | '.join(cells) + ' |')
    return '\n'.join(out)


UNSTABLE = 0.25  # (max - min) / median of the timings above which a row is marked UNSTABLE
SPEED_COLUMNS = [
    ('config', 'config', '{}'), ('params', 'params', '{:,}'), ('ms_per_iter', 'ms/iter', '{:.1f}'),
    ('ms_range', 'min–max', '{}'),
    ('tokens_per_s', 'train tok/s', '{:,.0f}'), ('flops_per_token', 'FLOPs/token', '{:,.0f}'),
    ('mfu', 'MFU', '{:.1%}'), ('peak_mem_mb', 'peak MiB', '{:,.0f}'),
    ('decode_tok_s_cached', 'decode tok/s cached', '{:,.0f}'),
    ('decode_tok_s_uncached', 'decode tok/s uncached', '{:,.0f}'),
]


def speed(bench, paths):
    import torch
    from train import resolve_device
    device = resolve_device(bench.device)
    if bench.dtype not in ('float32', 'bfloat16', 'float16'):
        raise UsageError(f"dtype {bench.dtype!r} is not one of float32, bfloat16, float16")
    rows = []
    # each config in a fresh process: peak memory is then its own, not what earlier configs left behind
    spawn = multiprocessing.get_context('spawn')
    for i, path in enumerate(paths):
        print(f"[{i + 1}/{len(paths)}] {path}", file=sys.stderr, flush=True)
        with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool:
            rows.append(pool.submit(speed_row, path, bench, device).result())
    shape = f"device={device} dtype={bench.dtype} compile={bench.compile} torch={torch.__version__} threads={torch.get_num_threads()}"
    return rows, shape


# -----------------------------------------------------------------------------
# quality mode: train through train.py, one record per run in a results file, tables and plots from it

def read_log(run_dir):
    from train import read_jsonl
    path = os.path.join(run_dir, 'log.jsonl')
    if not os.path.isfile(path):
        raise UsageError(f"{path} not found; is {run_dir!r} a train.py out_dir?")
    return read_jsonl(path)


def run_summary(run_dir):
    rows = read_log(run_dir)
    evals = [r for r in rows if 'val_loss' in r]
    last = rows[-1] if rows else {}
    params = None
    if os.path.isfile(os.path.join(run_dir, 'config.json')):  # rebuild the model to count its parameters
        from model import count_params
        from train import config_from_dict
        with open(os.path.join(run_dir, 'config.json')) as f:
            params = count_params(config_from_dict(json.load(f)))
    return dict(run=os.path.basename(os.path.normpath(run_dir)),
                final_val=evals[-1]['val_loss'] if evals else None,
                best_val=min(r['val_loss'] for r in evals) if evals else None,
                iters=last.get('iter'), tokens=last.get('tokens'), flops=last.get('flops'),
                seconds=last.get('train_s', last.get('elapsed_s')),
                ms_per_iter=(1000 * last['train_s'] / last['iter']) if last.get('train_s') and last.get('iter') else None,
                params=params)


QUALITY_COLUMNS = [
    ('run', 'run', '{}'), ('params', 'params', '{:,}'), ('final_val', 'final val loss', '{:.4f}'),
    ('best_val', 'best val loss', '{:.4f}'), ('iters', 'iters', '{:,}'), ('tokens', 'tokens', '{:,}'),
    ('seconds', 'train s', '{:.0f}'), ('ms_per_iter', 'ms/iter', '{:.1f}'),
]


def _pyplot():
    """matplotlib.pyplot with the Agg backend, or None (and a one-line note) when it is not installed."""
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        print("plots skipped: matplotlib is not installed (pip install matplotlib)", file=sys.stderr)
        return None
    return plt


def save_png(fig, png):
    import matplotlib.pyplot as plt
    fig.tight_layout()
    atomic_write(png, lambda f: fig.savefig(f, format='png', dpi=110))
    plt.close(fig)


def plot_runs(run_dirs, png):
    """Val loss against tokens and against training seconds, one line per run. False without matplotlib."""
    plt = _pyplot()
    if plt is None:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for run_dir in run_dirs:
        evals = [r for r in read_log(run_dir) if 'val_loss' in r]
        label = os.path.basename(os.path.normpath(run_dir))
        axes[0].plot([r.get('tokens', 0) for r in evals], [r['val_loss'] for r in evals], marker='.', label=label)
        axes[1].plot([r.get('train_s', r.get('elapsed_s', 0)) for r in evals], [r['val_loss'] for r in evals], marker='.', label=label)
    for ax, xlabel in zip(axes, ('tokens', 'training seconds')):
        ax.set_xlabel(xlabel)
        ax.set_ylabel('val loss')
        ax.grid(alpha=0.3)
        ax.legend()
    save_png(fig, png)
    return True


# --- planning: which runs a sweep makes ---

BUDGETS = ('max_iters', 'max_tokens', 'max_flops', 'max_seconds')


def parse_size(text):
    """'4x128' -> (n_layer 4, n_embd 128, n_head 4): heads of 32 channels."""
    try:
        n_layer, n_embd = (int(v) for v in text.lower().split('x'))
    except ValueError:
        raise UsageError(f"size {text!r} is not LAYERSxWIDTH (e.g. 4x128)") from None
    if n_layer < 1 or n_embd < 32 or n_embd % 32:
        raise UsageError(f"size {text!r}: need at least 1 layer and a width that is a multiple of 32")
    return dict(n_layer=n_layer, n_embd=n_embd, n_head=n_embd // 32)


def budget_of(bench):
    """(kind, value) of the sweep's budget: the one given, else each config's own max_iters."""
    given = [(k, getattr(bench, k)) for k in BUDGETS if getattr(bench, k)]
    if len(given) > 1:
        raise UsageError(f"give one budget, not {' and '.join(k for k, _ in given)}")
    return given[0] if given else ('max_iters', 0)


def plan_run(path, bench, *, seed, lr, size):
    """The train.py command line and the record key of one run. Token and FLOPs budgets become an
    iteration count per config, and the learning-rate schedule ends there (lr_decay_iters), so every
    architecture finishes its cosine decay at the budget whatever its FLOPs per token."""
    from model import GPT, GPTConfig
    from train import TrainConfig
    name = os.path.basename(path)[:-3]
    overrides = dict(size or {})
    for key in ('block_size', 'batch_size', 'data_dir', 'eval_iters', 'eval_interval', 'optimizer'):
        if getattr(bench, key):
            overrides[key] = getattr(bench, key)
    if not size:
        for key in ('n_layer', 'n_head', 'n_embd'):
            if getattr(bench, key):
                overrides[key] = getattr(bench, key)
    cfg = dataclasses.replace(parse_config(TrainConfig, [path]), **overrides, seed=seed,
                              **({'learning_rate': lr, 'min_lr': lr / 10} if lr else {}))
    kind, value = budget_of(bench)
    tokens_per_iter = cfg.batch_size * cfg.gradient_accumulation_steps * cfg.block_size
    iters = cfg.max_iters
    if kind == 'max_iters':
        iters = value = value or cfg.max_iters
    elif kind == 'max_tokens':
        iters = math.ceil(value / tokens_per_iter)
    elif kind == 'max_flops':
        from prepare import read_meta
        meta = read_meta(cfg.data_dir) if os.path.isdir(cfg.data_dir) else None
        vocab = cfg.vocab_size or (meta or {}).get('vocab_size') or 50304
        fpt = GPT(GPTConfig(**{**cfg.model_args(), 'vocab_size': vocab})).flops_per_token()
        iters = math.ceil(value / (tokens_per_iter * fpt))
    args = {**overrides, 'seed': seed, 'max_iters': iters if kind != 'max_seconds' else 10 ** 12,
            'lr_decay_iters': iters, 'warmup_iters': min(cfg.warmup_iters, max(iters // 10, 0))}
    if kind != 'max_iters':
        args[kind] = value
    if lr:
        args.update(learning_rate=lr, min_lr=lr / 10)
    size_label = f"{cfg.n_layer}x{cfg.n_embd}"
    key = dict(config=name, size=size_label, seed=seed, lr=cfg.learning_rate if not lr else lr,
               optimizer=cfg.optimizer, budget=kind, budget_value=value, data_dir=cfg.data_dir,
               block_size=cfg.block_size, batch_size=cfg.batch_size)
    run_dir = os.path.join(bench.out_prefix, f"{name}-{size_label}-s{seed}-lr{key['lr']:g}-{cfg.optimizer}-{kind}{value:g}")
    cmd = [sys.executable, 'train.py', path, f'--out_dir={run_dir}', f'--device={bench.device}',
           f'--dtype={bench.dtype}', f'--compile={bench.compile}', '--log_interval=50',
           *(f'--{k}={v}' for k, v in args.items())]
    return key, run_dir, cmd


def learning_rates(bench, name, records):
    """The sweep's lr grid for one config: the values given, or 'tuned': the best mean of the results file."""
    if bench.lr == ['tuned']:
        best = tuned_lrs(records).get(name)
        if best is None:
            raise UsageError(f"--lr=tuned: the results file has no finished runs of {name} to tune from; "
                             f"run an lr grid first (--lr=5e-4,1e-3,2e-3)")
        return [best]
    try:
        return [float(v) for v in bench.lr] or [0.0]  # 0: the config's own
    except ValueError:
        raise UsageError(f"--lr={','.join(bench.lr)}: give numbers (3e-4,1e-3) or 'tuned'") from None


# --- running: independent processes, a record appended as each finishes ---

def read_results(path):
    """The records of a results file (JSON lines); a line cut short by a killed sweep is skipped."""
    records = []
    if os.path.isfile(path):
        with open(path, encoding='utf-8', errors='replace') as f:
            for line in f:
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                if isinstance(r, dict) and 'key' in r:
                    records.append(r)
    return records


def append_record(path, record, lock=threading.Lock()):
    """One line per finished run, flushed and fsynced: an interrupted sweep keeps every finished run."""
    with lock:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, 'a', encoding='utf-8') as f:
            f.write(json.dumps(record) + '\n')
            f.flush()
            os.fsync(f.fileno())


def record_of(key, run_dir, cmd, wall_s):
    """The results-file record of a finished run, from its log.jsonl and config.json."""
    import platform
    import torch
    rows = read_log(run_dir)
    evals = [r for r in rows if 'val_loss' in r]
    last = rows[-1]
    summary = run_summary(run_dir)
    with open(os.path.join(run_dir, 'config.json')) as f:
        cfg = json.load(f)
    from model import GPT
    from train import config_from_dict
    model = GPT(config_from_dict(cfg))
    return dict(key=key, **key, val_loss=evals[-1]['val_loss'], best_val=min(r['val_loss'] for r in evals),
                train_loss=evals[-1]['train_loss'], iters=last['iter'], tokens=last['tokens'],
                flops=last.get('flops'), train_s=last.get('train_s'), wall_s=wall_s, params=summary['params'],
                flops_per_token=model.flops_per_token(), n_layer=cfg['n_layer'], n_embd=cfg['n_embd'],
                curve=[[r['iter'], r['tokens'], r.get('flops'), r.get('train_s'), r['val_loss']] for r in evals],
                command=' '.join(cmd[1:]), date=time.strftime('%Y-%m-%d'),
                machine=f"{platform.machine()} {os.cpu_count()} cores, torch {torch.__version__}")


def run_all(bench, plans, results_path):
    """Run every planned run not already in the results file, `jobs` at a time, with progress and ETA."""
    done = {json.dumps(r['key'], sort_keys=True) for r in read_results(results_path)}
    todo = [p for p in plans if json.dumps(p[0], sort_keys=True) not in done]
    skipped = len(plans) - len(todo)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count()
    jobs = bench.jobs or 1
    env = {**os.environ, 'OMP_NUM_THREADS': str(max(1, cores // jobs))}
    print(f"{len(todo)} runs to do ({skipped} already in {results_path}), {jobs} at a time, "
          f"{env['OMP_NUM_THREADS']} thread(s) each", file=sys.stderr, flush=True)
    started, finished, failed = time.time(), [], []

    def one(plan):
        key, run_dir, cmd = plan
        shutil.rmtree(run_dir, ignore_errors=True)  # an interrupted earlier attempt starts over
        t0 = time.time()
        proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ['?'])[-1]
            failed.append(plan)
            print(f"  failed: {run_dir} (exit {proc.returncode}): {last}\n  rerun: {' '.join(cmd)}",
                  file=sys.stderr, flush=True)
            return
        record = record_of(key, run_dir, cmd, time.time() - t0)
        append_record(results_path, record)
        finished.append(plan)
        n, dt = len(finished) + len(failed), time.time() - started
        eta = dt / n * (len(todo) - n)
        print(f"[{n}/{len(todo)}] {os.path.basename(run_dir)}: val {record['val_loss']:.4f} "
              f"({time.time() - t0:.0f}s; {dt / 60:.1f} min elapsed, ETA {eta / 60:.1f} min)", file=sys.stderr, flush=True)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(one, todo))
    print(f"sweep: {len(finished)} runs in {(time.time() - started) / 60:.1f} min"
          + (f", {len(failed)} failed (rerun the same command to retry them)" if failed else ""), file=sys.stderr)
    return not failed


def plan_sweep(bench, paths, records):
    sizes = [parse_size(s) for s in bench.sizes] if bench.scaling else [None]
    # seed-major order: an interrupted sweep has compared every config on the same seeds so far
    plans = []
    lrs = {path: learning_rates(bench, os.path.basename(path)[:-3], records) for path in paths}
    for seed in range(1, bench.seeds + 1):
        for size in sizes:
            for k in range(max(len(v) for v in lrs.values())):
                for path in paths:
                    if k < len(lrs[path]):
                        plans.append(plan_run(path, bench, seed=seed, lr=lrs[path][k], size=size))
    return plans


# --- reporting: tables and plots from the results file alone ---

def mean_std(values):
    n = len(values)
    mean = sum(values) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    return mean, std, n


def groups(records, *fields):
    out = {}
    for r in records:
        out.setdefault(tuple(r[f] for f in fields), []).append(r)
    return out


def tuned_lrs(records):
    """{config: the lr whose seeds have the best mean final val loss}, tuned where the grid ran: AdamW
    at an iteration budget, at the size with the most runs of that config."""
    records = [r for r in records if r['budget'] == 'max_iters' and r['optimizer'] == 'adamw']
    sizes = {}
    for (name, size), rs in groups(records, 'config', 'size').items():
        sizes[name] = max(sizes.get(name, (0, None)), (len(rs), size))
    return {name: best_lr(rs) for (name, size), rs in groups(records, 'config', 'size').items()
            if size == sizes[name][1]}


def best_lr(records):
    """The grid point with the best mean final val loss, compared on the seeds every grid point has
    (a grid tuned on seed 1 and replicated at its best must not let a 1-seed mean beat a 3-seed one)."""
    by_lr = groups(records, 'lr')
    common = set.intersection(*({r['seed'] for r in rs} for rs in by_lr.values()))
    return min(by_lr, key=lambda k: mean_std([r['val_loss'] for r in by_lr[k]
                                              if r['seed'] in common or not common])[0])[0]


def summary_rows(records):
    """One row per (config, size, budget, optimizer): the best lr of its grid, mean ± std (n) there,
    the grid's means, and the gap to gpt with its standard error."""
    rows = []
    for (name, size, budget, value, opt), rs in groups(records, 'config', 'size', 'budget', 'budget_value', 'optimizer').items():
        by_lr = {lr: mean_std([r['val_loss'] for r in g]) for (lr,), g in groups(rs, 'lr').items()}
        lr = best_lr(rs)
        at = [r for r in rs if r['lr'] == lr]
        mean, std, n = by_lr[lr]
        rows.append(dict(config=name, size=size, budget=f"{budget}={value:g}", optimizer=opt, lr=lr,
                         val=mean, std=std, n=n, values=[r['val_loss'] for r in at],
                         grid=' / '.join(f"{k:g}: {by_lr[k][0]:.4f}" + (f" ({by_lr[k][2]})" if by_lr[k][2] != n else '')
                                         for k in sorted(by_lr)),
                         params=at[0]['params'], tokens=mean_std([r['tokens'] for r in at])[0],
                         flops=mean_std([r['flops'] or 0 for r in at])[0],
                         train_s=mean_std([r['train_s'] or 0 for r in at])[0], runs=at))
    for row in rows:  # the gap to gpt under the same size, budget and optimizer
        base = next((b for b in rows if b['config'] == 'gpt' and (b['size'], b['budget'], b['optimizer'])
                     == (row['size'], row['budget'], row['optimizer'])), None)
        if base is not None and row is not base:
            row['gap'] = row['val'] - base['val']
            if min(row['n'], base['n']) < 2:  # one seed has no spread: say so instead of a false ± 0
                row['gap_se'], row['vs_gpt'] = None, f"{row['gap']:+.4f} (1 seed: spread unknown)"
                continue
            se = math.sqrt(row['std'] ** 2 / row['n'] + base['std'] ** 2 / base['n'])
            row['gap_se'] = se
            row['vs_gpt'] = f"{row['gap']:+.4f} ± {se:.4f}" + (' (noise)' if abs(row['gap']) < 2 * se else '')
    order = {n: i for i, n in enumerate(ARCH_ORDER)}
    return sorted(rows, key=lambda r: (r['budget'], r['optimizer'], r['size'], order.get(r['config'], 99), r['config']))


ARCH_ORDER = ('gpt', 'llama', 'primer_ez', 'swiglu', 'geglu', 'reglu', 'gmlp', 'amlp')
SUMMARY_COLUMNS = [
    ('config', 'config', '{}'), ('size', 'size', '{}'), ('optimizer', 'opt', '{}'), ('budget', 'budget', '{}'),
    ('params', 'params', '{:,}'), ('lr', 'best lr', '{:g}'), ('val_pm', 'val loss mean ± std (n)', '{}'),
    ('vs_gpt', 'vs gpt (± s.e.)', '{}'), ('tokens', 'tokens', '{:,.0f}'), ('flops', 'FLOPs', '{:.3g}'),
    ('train_s', 'train s', '{:.0f}'), ('grid', 'mean val loss per lr', '{}'),
]


def summary_table(rows):
    for r in rows:
        r['val_pm'] = f"{r['val']:.4f} ± {r['std']:.4f} ({r['n']})"
    return markdown_table(rows, SUMMARY_COLUMNS)


def compute_multiplier(reference, flops, loss):
    """
    Primer's compute multiplier: the training FLOPs the reference (gpt) needs to reach `loss`, over
    `flops`, interpolated linearly in log-FLOPs on the reference's (FLOPs, loss) points. Returns
    (multiplier, None), or (None, why) when `loss` lies outside the reference's range: no extrapolation.
    """
    pts = sorted(reference)
    for (f0, l0), (f1, l1) in zip(pts, pts[1:]):
        if min(l0, l1) <= loss <= max(l0, l1) and l0 != l1:
            x = math.log(f0) + (loss - l0) * (math.log(f1) - math.log(f0)) / (l1 - l0)
            return math.exp(x) / flops, None
    lo = min(l for _, l in pts)
    if loss < lo:
        return None, f"> {pts[-1][0] / flops:.2f} (below gpt's lowest loss)"
    return None, f"< {pts[0][0] / flops:.2f} (above gpt's highest loss)"


def scaling_rows(rows):
    """Per (config, size) at one budget: mean FLOPs and loss, and the compute multiplier against gpt."""
    out = []
    for (budget, opt), rs in groups(rows, 'budget', 'optimizer').items():
        ref = [(r['flops'], r['val']) for r in rs if r['config'] == 'gpt']
        for r in rs:
            m, why = compute_multiplier(ref, r['flops'], r['val']) if len(ref) >= 2 else (None, 'no gpt curve')
            out.append({**r, 'multiplier': f"{m:.2f}" if m else why})
    return out


SCALING_COLUMNS = [
    ('config', 'config', '{}'), ('size', 'size', '{}'), ('params', 'params', '{:,}'), ('lr', 'lr', '{:g}'),
    ('flops', 'training FLOPs', '{:.3g}'), ('val_pm', 'val loss mean ± std (n)', '{}'),
    ('multiplier', 'compute multiplier vs gpt', '{}'),
]


def plot_sweep(rows, png):
    """Val loss against tokens and against FLOPs: the seeds' mean at the best lr, a band for min..max."""
    plt = _pyplot()
    if plt is None:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    for row in rows:
        curves = [r['curve'] for r in row['runs']]
        n = min(len(c) for c in curves)
        for ax, col in zip(axes, (1, 2)):
            x = [curves[0][i][col] or 0 for i in range(n)]
            vals = [[c[i][4] for c in curves] for i in range(n)]
            mean = [sum(v) / len(v) for v in vals]
            line, = ax.plot(x[1:], mean[1:], label=f"{row['config']} (lr {row['lr']:g}, n={row['n']})")
            ax.fill_between(x[1:], [min(v) for v in vals[1:]], [max(v) for v in vals[1:]],
                            color=line.get_color(), alpha=0.2)
    for ax, xlabel in zip(axes, ('tokens', 'training FLOPs')):
        ax.set_xlabel(xlabel)
        ax.set_ylabel('val loss (mean over seeds; band: min..max)')
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    save_png(fig, png)
    return True


def plot_scaling(rows, png):
    """Final val loss against training FLOPs (log scale), one line per architecture."""
    plt = _pyplot()
    if plt is None:
        return False
    fig, ax = plt.subplots(figsize=(8, 5.5))
    for name, rs in groups(rows, 'config').items():
        rs = sorted(rs, key=lambda r: r['flops'])
        ax.errorbar([r['flops'] for r in rs], [r['val'] for r in rs], yerr=[r['std'] for r in rs],
                    marker='o', capsize=3, label=name[0], linewidth=2.5 if name[0] == 'gpt' else 1.2)
    ax.set_xscale('log')
    ax.set_xlabel('training FLOPs (GPT.flops_per_token x tokens)')
    ax.set_ylabel('final val loss')
    ax.grid(alpha=0.3, which='both')
    ax.legend()
    save_png(fig, png)
    return True


def report(bench, results_path, png):
    records = read_results(results_path)
    if not records:
        raise UsageError(f"no finished runs in {results_path}; run a sweep first (python bench.py --sweep)")
    rows = summary_rows(records)
    if bench.json:
        print(json.dumps([{k: v for k, v in r.items() if k != 'runs'} for r in rows], indent=1))
    parts = groups(rows, 'budget', 'optimizer')
    plotted = []
    for (budget, opt), rs in parts.items():
        tag = f"{budget.split('=')[0]}-{opt}"
        sizes = collections.Counter(r['size'] for r in rs)
        main_size = sizes.most_common(1)[0][0]
        main = [r for r in rs if r['size'] == main_size]
        if not bench.json:
            print(f"\n### {budget}, {opt}, size {main_size}\n")
            print(summary_table(main))
        if plot_sweep(main, png.replace('.png', f'-{tag}.png') if len(parts) > 1 else png):
            plotted.append(png.replace('.png', f'-{tag}.png') if len(parts) > 1 else png)
        if len(sizes) > 1:
            srows = sorted(scaling_rows(rs), key=lambda r: (ARCH_ORDER.index(r['config']) if r['config'] in ARCH_ORDER
                                                            else 99, r['flops']))
            if not bench.json:
                for r in srows:
                    r['val_pm'] = f"{r['val']:.4f} ± {r['std']:.4f} ({r['n']})"
                print(f"\n### scaling: {budget}, {opt}\n")
                print(markdown_table(srows, SCALING_COLUMNS))
            if plot_scaling(rs, png.replace('.png', f'-{tag}-scaling.png')):
                plotted.append(png.replace('.png', f'-{tag}-scaling.png'))
    for p in plotted:
        print(f"plot: {p}", file=sys.stderr)
    return rows


def config_paths(names):
    """Config files from paths or names (gpt -> configs/gpt.py); default: every architecture config.
    Shared by bench.py and probe.py."""
    here = os.path.dirname(os.path.abspath(__file__))
    shipped = sorted(glob.glob(os.path.join(here, 'configs', '*.py')))
    known = [os.path.basename(p)[:-3] for p in shipped]
    paths = []
    for c in names:
        if c.endswith('.py'):
            if not os.path.isfile(c):
                raise UsageError(f"config {c!r} not found")
            paths.append(c)
        elif c in known:
            paths.append(os.path.relpath(shipped[known.index(c)]))
        else:
            raise UsageError(f"unknown config {c!r}; choose among {', '.join(known)} or pass a .py path")
    paths = paths or [os.path.relpath(p) for p in shipped if not p.endswith('quick.py')]
    if not paths:
        raise UsageError("no configs: pass config files or run from the repository root")
    return paths


QUICK = dict(max_iters=100, eval_iters=10, seeds=2, lr=['1e-3', '3e-3'], sizes=['1x32', '2x64'], jobs=2)


def quality(bench, paths, given=()):
    """--sweep / --scaling: plan the runs, run those not yet in the results file, then report.
    `given`: the keys set on the command line, which --quick leaves as they are."""
    if bench.quick:  # a few-minute version of the same mode, at tiny sizes
        bench = dataclasses.replace(bench, **{k: v for k, v in QUICK.items() if k not in given})
        if not bench.scaling and not {'n_layer', 'n_embd', 'n_head'} & set(given):
            bench = dataclasses.replace(bench, n_layer=2, n_embd=64, n_head=2)
    results_path = bench.results or f"{bench.out_prefix}.jsonl"
    png = bench.png or os.path.splitext(results_path)[0] + '.png'
    ok = True
    if not bench.report:
        if bench.max_seconds and bench.jobs > 1:
            print("note: max_seconds with jobs > 1: runs share the cores, so equal seconds are not equal work",
                  file=sys.stderr)
        records = read_results(results_path)
        ok = run_all(bench, plan_sweep(bench, paths, records), results_path)
    rows = report(bench, results_path, png)
    if not ok:
        raise UsageError(f"some runs failed (see above); {results_path} keeps every finished run")
    return rows


def main(argv):
    # bare switches read naturally on the command line: --sweep, --plot DIR..., --json, --compile
    switches = ('--sweep', '--scaling', '--report', '--quick', '--plot', '--json', '--compile')
    argv = [f'{a}=true' if a in switches else a for a in argv]
    if '-h' in argv or '--help' in argv:
        print(__doc__.strip() + '\n')
    positional = [a for a in argv if not a.startswith('--')]
    flags = [a for a in argv if a.startswith('--')]
    bench = parse_config(BenchConfig, flags, config_files=False,
                         usage="python bench.py [config.py | --configs=NAME,...] [--key=value ...]")
    if bench.plot:
        run_dirs = positional
        if not run_dirs:
            raise UsageError("--plot needs run directories: python bench.py --plot out-gpt out-gmlp")
    else:
        bench.configs = bench.configs + positional
    if bench.sweep or bench.scaling or bench.report:
        return quality(bench, config_paths(bench.configs), given={a[2:].partition('=')[0] for a in flags})
    if bench.plot:
        rows = [run_summary(d) for d in run_dirs]
        png = bench.png or 'runs.png'
        if bench.json:
            print(json.dumps(rows, indent=1))
        else:
            print(markdown_table(rows, QUALITY_COLUMNS))
        if plot_runs(run_dirs, png):
            print(f"plot: {png}", file=sys.stderr)
        return rows
    rows, shape = speed(bench, config_paths(bench.configs))
    if bench.json:
        print(json.dumps({'setup': shape, 'rows': rows}, indent=1))
    else:
        print(f"{shape}\n")
        print(markdown_table(rows, SPEED_COLUMNS))
        if any('UNSTABLE' in r['ms_range'] for r in rows):
            print(f"\nUNSTABLE: the slowest timing is more than {UNSTABLE:.0%} of the median off the fastest; "
                  f"the machine was busy: rerun those configs (more --repeats) before trusting them")
    return rows


if __name__ == '__main__':
    run_main(main)
