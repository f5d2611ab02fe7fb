"""
Speed and memory per architecture, side by side: a training step, and decoding with and without the
model's cache.

    python bench.py                                  # every config in configs/, at its own shape
    python bench.py configs/gpt.py configs/gmlp.py --device=cuda --dtype=bfloat16 --compile
    python bench.py --n_layer=12 --n_head=12 --n_embd=768 --block_size=1024  # any train.py key
    python bench.py --reference=../nanoGPT/model.py --n_layer=12 --n_head=12 --n_embd=768 \
        --block_size=1024 --vocab_size=50304 --batch_size=32 --device=cuda --dtype=bfloat16

With --reference=FILE, a model file with nanoGPT's interface (GPTConfig, GPT(config), forward(idx,
targets) -> (logits, loss), configure_optimizers(weight_decay, learning_rate, betas, device_type):
nanoGPT's model.py, which you fetch yourself; nothing of it is in this repository) is timed beside
our gpt block at the same shape, with the same loop and optimizer settings, in one process, the two
alternating round by round, and the ratio of their training speeds is printed.

Each config's model is built at the config's own shape, with any train.py key given here on top
(--n_layer, --batch_size, --device, --dtype, --compile, ...). train.py's training step (forward,
backward, clipping, the optimizer) is timed after warm-up: the median of `repeats` timings of
`iters` steps, with min..max; then greedy decoding of `decode_tokens` tokens from a 1-token prompt,
with and without the cache (and, on a GPU, the fixed-shape step recorded as a CUDA graph, as
sample.py --compile runs it; with --compile also the compiled model's step in a graph). Peak
memory is CUDA's max allocated, or on CPU the growth of the peak resident set of a fresh process per
config (torch itself excluded). Quality (val loss over seeds and learning rates) is sweep.py's.
"""
import os
import signal

if __name__ == "__main__":  # Ctrl-C while torch loads (seconds): exit 130, quietly
    signal.signal(signal.SIGINT, lambda *_: os._exit(130))

import contextlib
import dataclasses
import functools
import json
import multiprocessing
import resource
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

import torch

from configurator import HERE, UsageError, parse_config, regular_file, require, run_main
from model import DecodeCache, GPTConfig, GPT
from report import markdown_table
from sample import CapturedStep, stream
from stats import config_paths, split_flags
from guards import autocast_context, peak_flops, resolve_device, resolve_dtype
from train import TrainConfig, train_step


UNSTABLE = 0.25  # (max - min) / median of the timings above which a row is marked UNSTABLE


@dataclass
class BenchConfig:
    configs: list = field(default_factory=list)  # config files or names (gpt,gmlp); default: all
    iters: int = 10             # training steps per timing
    repeats: int = 5            # timings; the median is reported with min..max
    warmup: int = 5             # untimed steps first
    decode_tokens: int = 256    # new tokens per decoding timing (1-token prompt); 0 = no decoding
    decode_block_size: int = 0  # decoding's block_size; 0 = the config's
    reference: str = ''         # a model file with nanoGPT's interface, timed beside our gpt
    json: bool = False          # print JSON instead of a markdown table

    def __post_init__(self):
        require(self, 'iters repeats', lambda v: v >= 1, "must be at least 1")
        require(self, 'warmup decode_tokens decode_block_size', lambda v: v >= 0,
                "must not be negative")


def rss_bytes(key='VmHWM'):
    """Peak (VmHWM) or current (VmRSS) resident set of this process; ru_maxrss without /proc."""
    try:
        with open('/proc/self/status') as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key + ':'))
    except (OSError, StopIteration):  # no /proc, or no such line
        pass
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kB on Linux, bytes on macOS
    return rss if sys.platform == 'darwin' else rss * 1024


def one_step(model, x, y, ctx, scaler, opt, grad_clip):
    """train.py's training step (one micro-step) on one batch."""
    train_step(model, opt, scaler, ctx, x, y, lambda m: (x, y), grad_clip=grad_clip)


def sync_device(device_type):
    """Wait for queued GPU work, so that a clock read measures it."""
    if device_type == 'cuda':
        torch.cuda.synchronize()
    elif device_type == 'mps':
        torch.mps.synchronize()


def timed_round(step, iters, device_type):
    """Seconds per step of `iters` calls of step(), the device synchronised before and after."""
    sync_device(device_type)
    t0 = time.perf_counter()
    for _ in range(iters):
        step()
    sync_device(device_type)
    return (time.perf_counter() - t0) / iters


def median_and_range(times):
    """(the median of per-step seconds, 'min–max' in ms, marked UNSTABLE where the spread is wide:
    the machine was busy and the median is suspect)."""
    dt = sorted(times)[len(times) // 2]
    return dt, (f"{min(times) * 1000:.1f}–{max(times) * 1000:.1f}"
                + (' UNSTABLE' if (max(times) - min(times)) / dt > UNSTABLE else ''))


def setup(path, overrides):
    """(cfg, device, device_type, dtype, GPTConfig, autocast context, scaler) of config `path`."""
    cfg = parse_config(TrainConfig, [path, *overrides])
    device = resolve_device(cfg.device)
    device_type = torch.device(device).type
    dtype = resolve_dtype(cfg.dtype, device_type)
    mcfg = GPTConfig(**{**cfg.model_args(), 'vocab_size': cfg.vocab_size or 256})  # 0: bytes
    return (cfg, device, device_type, dtype, mcfg, autocast_context(device_type, dtype),
            torch.amp.GradScaler(device_type, enabled=dtype == 'float16'))


def setup_text(cfg, device, dtype):
    return (f"device={device} dtype={dtype} compile={cfg.compile} torch={torch.__version__} "
            f"threads={torch.get_num_threads()}")


def speed_row(path, bench, overrides):
    """One config's row, measured in this (fresh) process."""
    cfg, device, device_type, dtype, mcfg, ctx, scaler = setup(path, overrides)
    torch.manual_seed(0)
    if device_type == 'cuda':
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    base = 0 if device_type == 'cuda' else rss_bytes('VmRSS')  # torch itself is not the model's
    model = GPT(mcfg).to(device)
    opt = model.configure_optimizers(cfg.weight_decay, 1e-3, (cfg.beta1, cfg.beta2), device_type,
                                     cfg.optimizer)
    step_model = torch.compile(model) if cfg.compile else model
    T = mcfg.block_size
    x = torch.randint(0, mcfg.vocab_size, (cfg.batch_size, T + 1), device=device)
    x, y = x[:, :-1], x[:, 1:]

    def step():
        one_step(step_model, x, y, ctx, scaler, opt, cfg.grad_clip)
    for _ in range(bench.warmup):
        step()
    times = [timed_round(step, bench.iters, device_type) for _ in range(bench.repeats)]
    dt, ms_range = median_and_range(times)
    tokens_per_s = cfg.batch_size * T / dt
    peak_mem = (torch.cuda.max_memory_allocated() if device_type == 'cuda' else
                rss_bytes('VmHWM') - base)
    peak = peak_flops(device, cfg.peak_flops, dtype)
    row = dict(config=os.path.basename(path)[:-3], params=model.get_num_params(),
               ms_per_iter=dt * 1000, ms_min=min(times) * 1000, ms_max=max(times) * 1000,
               ms_range=ms_range, tokens_per_s=tokens_per_s,
               flops_per_token=model.flops_per_token(), peak_mem_mb=peak_mem / 2 ** 20,
               mfu=model.estimate_mfu(tokens_per_s, peak),
               setup=setup_text(cfg, device, dtype))
    if bench.decode_tokens:  # 1 prompt token, greedy, batch 1: cached, uncached, captured
        if bench.decode_block_size:
            model = GPT(dataclasses.replace(mcfg, block_size=bench.decode_block_size)).to(device)
        model.eval()
        prompt = torch.zeros(1, 1, dtype=torch.long, device=device)
        ways = {'cached': {}, 'uncached': dict(use_cache=False)}
        if device_type == 'cuda':  # the fixed-shape step as a CUDA graph (sample.py --compile)
            ways['captured'] = dict(fixed=True, step=CapturedStep(model))
            if cfg.compile:  # the compiled model's kernels in the graph (compiled in the warm-up)
                compiled = torch.compile(model, dynamic=False)
                ways['compiled'] = dict(fixed=True, step=CapturedStep(compiled))
        for way, kw in ways.items():
            cache = DecodeCache(model.config.n_layer, fixed=kw.get('fixed', False))  # both calls
            with ctx:
                for n in (8, bench.decode_tokens):  # a warm-up (and the recording), then the timing
                    dt = timed_round(lambda: list(stream(model, prompt, n, temperature=0,
                                                         cache=cache, **kw)), 1, device_type)
            row[f'decode_tok_s_{way}'] = bench.decode_tokens / dt
    return row


def load_reference(path):
    """The module a --reference file defines, checked for nanoGPT's interface: a one-line error
    otherwise."""
    import importlib.util
    regular_file(path, "--reference (a model file with nanoGPT's interface, e.g. its model.py)")
    if not path.endswith('.py'):
        raise UsageError(f"--reference={path!r} is not a Python file (.py): name nanoGPT's "
                         "model.py or a file with its interface")
    spec = importlib.util.spec_from_file_location('reference_model', path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as e:  # its own import or syntax error, or an exit: one line
        why = f"{type(e).__name__}: {e}".splitlines()[0] if str(e) else type(e).__name__
        raise UsageError(f"--reference={path!r} failed to load: {why}") from None
    missing = [n for n in ('GPTConfig', 'GPT') if not hasattr(module, n)]
    if not missing and not hasattr(module.GPT, 'configure_optimizers'):
        missing = ['GPT.configure_optimizers']
    if missing:
        raise UsageError(f"--reference={path!r} defines no {' or '.join(missing)}: it needs "
                         "nanoGPT's model.py interface (GPTConfig, GPT(config), forward(idx, "
                         "targets) -> (logits, loss))")
    return module


def side_by_side(bench, overrides):
    """Our gpt block and the --reference model at one shape, one loop in this process, timed in
    alternating rounds (a busy machine slows both alike): (their rows, ours / theirs, setup)."""
    cfg, device, device_type, dtype, mcfg, ctx, scaler = setup(
        os.path.join(HERE, 'configs', 'gpt.py'), overrides)
    ref = load_reference(bench.reference)
    shape = dict(block_size=mcfg.block_size, vocab_size=mcfg.vocab_size, n_layer=mcfg.n_layer,
                 n_head=mcfg.n_head, n_embd=mcfg.n_embd, dropout=0.0, bias=mcfg.bias)
    known = ({f.name for f in dataclasses.fields(ref.GPTConfig)}
             if dataclasses.is_dataclass(ref.GPTConfig) else set(shape))
    models, theirs = {}, {k: v for k, v in shape.items() if k in known}
    T = mcfg.block_size
    x = torch.randint(0, mcfg.vocab_size, (cfg.batch_size, T + 1), device=device)
    x, y = x[:, :-1].contiguous(), x[:, 1:].contiguous()  # as a data loader gives them
    for name, build in (('ours (gpt)', lambda: GPT(mcfg)),
                        ('reference', lambda: ref.GPT(ref.GPTConfig(**theirs)))):
        torch.manual_seed(0)
        # what the reference prints as it builds (nanoGPT's counts) goes to stderr, not into --json
        try:
            with contextlib.redirect_stdout(sys.stderr):
                model = build().to(device)
                opt = model.configure_optimizers(cfg.weight_decay, 1e-3, (cfg.beta1, cfg.beta2),
                                                 device_type)
                one_step(model, x, y, ctx, scaler, opt, cfg.grad_clip)  # or a line why not
        except Exception as e:  # a GPTConfig, GPT or forward unlike nanoGPT's: one line
            why = f"{type(e).__name__}: {e}".splitlines()[0]
            raise UsageError(f"the {name} model does not build or train as nanoGPT's interface "
                             f"does (GPTConfig(**shape), GPT(config), forward(idx, targets) -> "
                             f"(logits, loss)): {why}") from None
        step_model = torch.compile(model) if cfg.compile else model
        models[name] = (functools.partial(one_step, step_model, x, y, ctx, scaler, opt,
                                          cfg.grad_clip), model)
    for step, _ in models.values():
        for _ in range(bench.warmup):
            step()
    times = {name: [] for name in models}
    for r in range(bench.repeats):  # alternating: ours first in even rounds, theirs in odd ones
        for name in (list(models) if r % 2 == 0 else list(models)[::-1]):
            times[name].append(timed_round(models[name][0], bench.iters, device_type))
    peak = peak_flops(device, cfg.peak_flops, dtype)
    fpt = models['ours (gpt)'][1].flops_per_token()  # one shape: one FLOP count for both (ours)
    rows = []
    for name, ts in times.items():
        dt, ms_range = median_and_range(ts)
        params = sum(p.numel() for p in models[name][1].parameters())  # a tied weight once
        rows.append(dict(config=name, params=params, ms_per_iter=dt * 1000, ms_range=ms_range,
                         tokens_per_s=cfg.batch_size * T / dt, flops_per_token=fpt,
                         mfu=models['ours (gpt)'][1].estimate_mfu(cfg.batch_size * T / dt, peak)))
    ratio = rows[0]['tokens_per_s'] / rows[1]['tokens_per_s']
    if abs(rows[1]['params'] / rows[0]['params'] - 1) > 0.01:
        print(f"note: the reference has {rows[1]['params']:,} parameters, ours "
              f"{rows[0]['params']:,}: not the same model at this shape, so the ratio is not a "
              "like-for-like speed", file=sys.stderr)
    return rows, ratio, (f"{setup_text(cfg, device, dtype)} batch={cfg.batch_size} block={T} "
                         f"reference={bench.reference}")


SPEED_COLUMNS = [
    ('config', 'config', '{}'), ('params', 'params', '{:,}'), ('ms_per_iter', 'ms/iter', '{:.1f}'),
    ('ms_range', 'min–max', '{}'), ('tokens_per_s', 'train tok/s', '{:,.0f}'),
    ('flops_per_token', 'FLOPs/token', '{:,.0f}'), ('mfu', 'MFU', '{:.1%}'),
    ('peak_mem_mb', 'peak MiB', '{:,.0f}'),
    ('decode_tok_s_cached', 'decode tok/s cached', '{:,.0f}'),
    ('decode_tok_s_uncached', 'decode tok/s uncached', '{:,.0f}'),
    ('decode_tok_s_captured', 'CUDA graph', '{:,.0f}'),
    ('decode_tok_s_compiled', 'compiled graph', '{:,.0f}')]


def show(bench, rows, setup, columns, **more):
    """Print the rows as JSON (with the setup and `more`), else the setup and a table (True)."""
    if bench.json:
        print(json.dumps({'setup': setup, 'rows': rows, **more}, indent=1))
    else:
        print(f"{setup}\n")
        print(markdown_table(rows, columns))
    return not bench.json


def main(argv):
    own, overrides = split_flags(argv, BenchConfig, TrainConfig)
    bench = parse_config(BenchConfig, [a for a in own if a.startswith('--')], config_files=False,
                         doc=__doc__, usage="python bench.py [config.py ... | --configs=NAME,...] "
                                            "[--key=value ...]")
    if bench.reference:  # ours beside a reference model file, one process, alternating
        if [a for a in own if not a.startswith('--')] or bench.configs:
            raise UsageError("--reference times our gpt block beside the reference file; name no "
                             "configs with it (set the shape with --n_layer, --n_head, --n_embd, "
                             "--block_size)")
        rows, ratio, setup = side_by_side(bench, overrides)
        if show(bench, rows, setup, SPEED_COLUMNS[:7], ours_over_reference=ratio):
            print(f"\nours / reference: {ratio:.3f}x training tokens per second (medians of "
                  f"{bench.repeats} alternating timings of {bench.iters} steps)")
        return rows
    paths = config_paths(bench.configs + [a for a in own if not a.startswith('--')])
    for path in paths:  # every key valid for every config (the device there) before anything runs
        resolve_device(parse_config(TrainConfig, [path, *overrides]).device)
    rows = []
    # each config in a fresh process: its peak memory is its own, not what earlier ones left behind
    spawn = multiprocessing.get_context('spawn')
    for i, path in enumerate(paths):
        print(f"[{i + 1}/{len(paths)}] {path}", file=sys.stderr, flush=True)
        with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool:
            rows.append(pool.submit(speed_row, path, bench, overrides).result())
    if show(bench, rows, [r.pop('setup') for r in rows][0], SPEED_COLUMNS):
        if any('UNSTABLE' in r['ms_range'] for r in rows):
            print(f"\nUNSTABLE: the slowest timing is more than {UNSTABLE:.0%} of the median off "
                  "the fastest; the machine was busy: rerun those configs (more --repeats) before "
                  "trusting them")
    return rows


if __name__ == '__main__':
    run_main(main)
