"""
Speed, memory and quality per architecture, side by side.

    python bench.py                                  # speed table for every config in configs/
    python bench.py configs/gpt.py configs/gmlp.py --device=cuda --dtype=bfloat16 --compile=true
    python bench.py --sweep --data_dir=data/shakespeare_char --max_iters=2000   # quality, via train.py
    python bench.py --sweep --max_seconds=120        # ... at equal wall-clock instead
    python bench.py --plot out-gpt out-gmlp          # val-loss plot of existing runs

Speed mode builds each config's model at the config's own shape (overridable, e.g. --n_layer=12)
and times forward + backward + AdamW step after warm-up (median of `repeats` timings of `iters`
steps), then decoding with and without the model's cache. Peak memory is CUDA's max allocated,
or on CPU the growth of the peak resident set of a fresh process per config (torch itself excluded).
"""
import dataclasses
import glob
import json
import multiprocessing
import os
import resource
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

from configurator import UsageError, atomic_write, parse_config, run_main


@dataclass
class BenchConfig:
    configs: list = field(default_factory=list)  # config files; default: every configs/*.py but quick.py
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
    repeats: int = 5            # timings; the median is reported
    warmup: int = 5             # untimed steps first
    decode_tokens: int = 256    # new tokens per decoding timing (from a 1-token prompt)
    decode_block_size: int = 0  # 0 = the config's block_size
    peak_flops: float = 0.0     # for MFU; 0 = the GPU's bf16 peak by name (train.PEAK_TFLOPS), none on CPU
    json: bool = False          # print JSON instead of a markdown table
    # quality mode
    sweep: bool = False         # quality mode: train each config through train.py
    data_dir: str = ''          # '' = each config's own
    max_iters: int = 0          # 0 = each config's own
    max_tokens: int = 0         # sweep budget: equal tokens
    max_seconds: float = 0.0    # sweep budget: equal training seconds
    out_prefix: str = 'sweep'   # runs go to <out_prefix>-<config name>/
    plot: bool = False          # --plot DIR [DIR ...]: plot existing runs
    png: str = ''               # where the plot goes; '' = <out_prefix>.png or runs.png


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
    tokens_per_s = batch_size * T / dt
    if device.startswith('cuda'):
        peak_mem = torch.cuda.max_memory_allocated()
    else:
        peak_mem = rss_bytes('VmHWM') - base
    peak = peak_flops(device, bench.peak_flops)
    row = dict(config=os.path.basename(path)[:-3], params=model.get_num_params(),
               ms_per_iter=dt * 1000, tokens_per_s=tokens_per_s,
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


SPEED_COLUMNS = [
    ('config', 'config', '{}'), ('params', 'params', '{:,}'), ('ms_per_iter', 'ms/iter', '{:.1f}'),
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
# quality mode: train through train.py, then tables and plots from log.jsonl

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
        from model import GPT
        from train import config_from_dict
        with open(os.path.join(run_dir, 'config.json')) as f:
            params = GPT(config_from_dict(json.load(f))).get_num_params()
    return dict(run=os.path.basename(os.path.normpath(run_dir)),
                final_val=evals[-1]['val_loss'] if evals else None,
                best_val=min(r['val_loss'] for r in evals) if evals else None,
                iters=last.get('iter'), tokens=last.get('tokens'),
                seconds=last.get('train_s', last.get('elapsed_s')),
                ms_per_iter=(1000 * last['train_s'] / last['iter']) if last.get('train_s') and last.get('iter') else None,
                params=params)


QUALITY_COLUMNS = [
    ('run', 'run', '{}'), ('params', 'params', '{:,}'), ('final_val', 'final val loss', '{:.4f}'),
    ('best_val', 'best val loss', '{:.4f}'), ('iters', 'iters', '{:,}'), ('tokens', 'tokens', '{:,}'),
    ('seconds', 'train s', '{:.0f}'), ('ms_per_iter', 'ms/iter', '{:.1f}'),
]


def plot_runs(run_dirs, png):
    """Val loss against tokens and against training seconds, one line per run. False without matplotlib."""
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        print("plots skipped: matplotlib is not installed (pip install matplotlib)", file=sys.stderr)
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
    fig.tight_layout()
    atomic_write(png, lambda f: fig.savefig(f, format='png', dpi=110))
    plt.close(fig)
    return True


def sweep(bench, paths):
    run_dirs = []
    started = time.time()
    for i, path in enumerate(paths):
        name = os.path.basename(path)[:-3]
        out_dir = f"{bench.out_prefix}-{name}"
        cmd = [sys.executable, 'train.py', path, f'--out_dir={out_dir}', f'--device={bench.device}',
               f'--dtype={bench.dtype}', f'--compile={bench.compile}']
        for key in ('data_dir', 'max_iters', 'max_tokens', 'max_seconds', 'batch_size',
                    'block_size', 'n_layer', 'n_head', 'n_embd'):
            if getattr(bench, key):
                cmd.append(f'--{key}={getattr(bench, key)}')
        if (bench.max_tokens or bench.max_seconds) and not bench.max_iters:
            # the budget decides, not each config's max_iters (its lr schedule still ends at lr_decay_iters)
            cmd.append(f'--max_iters={10 ** 12}')
        done = time.time() - started
        eta = f", ETA {done / i * (len(paths) - i):.0f}s" if i else ""
        print(f"[{i + 1}/{len(paths)}] training {name} -> {out_dir} ({done:.0f}s elapsed{eta})",
              file=sys.stderr, flush=True)
        result = subprocess.run(cmd, stdout=subprocess.DEVNULL)
        if result.returncode != 0:
            raise UsageError(f"training {path} failed (exit {result.returncode}); rerun: {' '.join(cmd)}")
        run_dirs.append(out_dir)
    return run_dirs


def config_paths(bench):
    paths = bench.configs or sorted(p for p in glob.glob('configs/*.py') if not p.endswith('quick.py'))
    for p in paths:
        if not os.path.isfile(p):
            raise UsageError(f"config {p!r} not found")
    if not paths:
        raise UsageError("no configs: pass config files or run from the repository root")
    return paths


def main(argv):
    # bare switches read naturally on the command line: --sweep, --plot DIR..., --json, --compile
    argv = [f'{a}=true' if a in ('--sweep', '--plot', '--json', '--compile') else a for a in argv]
    positional = [a for a in argv if not a.startswith('--')]
    flags = [a for a in argv if a.startswith('--')]
    bench = parse_config(BenchConfig, flags, config_files=False)
    if bench.plot:
        run_dirs = positional
        if not run_dirs:
            raise UsageError("--plot needs run directories: python bench.py --plot out-gpt out-gmlp")
    else:
        bad = [a for a in positional if not a.endswith('.py')]
        if bad:
            raise UsageError(f"unexpected argument {bad[0]!r}; pass config files (configs/*.py) or --plot DIR...")
        bench.configs = bench.configs + positional
    if bench.plot or bench.sweep:
        if bench.sweep:
            run_dirs = sweep(bench, config_paths(bench))
        rows = [run_summary(d) for d in run_dirs]
        png = bench.png or (f"{bench.out_prefix}.png" if bench.sweep else 'runs.png')
        if bench.json:
            print(json.dumps(rows, indent=1))
        else:
            print(markdown_table(rows, QUALITY_COLUMNS))
        if plot_runs(run_dirs, png):
            print(f"plot: {png}", file=sys.stderr)
        return rows
    rows, shape = speed(bench, config_paths(bench))
    if bench.json:
        print(json.dumps({'setup': shape, 'rows': rows}, indent=1))
    else:
        print(f"{shape}\n")
        print(markdown_table(rows, SPEED_COLUMNS))
    return rows


if __name__ == '__main__':
    run_main(main)
