"""
What guards a training run, so that train.py reads as a loop: the signals that stop it, budgets and
the ETA line, the nan stop, a DDP process that waits too long, a model that cannot fit, the checks
before a resume (another architecture, optimizer, tokenizer, val set or corpus is refused), and
out_dir's files (`RunFiles`: one run at a time, the previous run kept whole in prev/). Nobody needs
to open this file to follow one step, a checkpoint or a batch.
"""
import dataclasses
import json
import logging
import math
import os
import re
import shutil
import signal
import sys
import threading
import time
from contextlib import contextmanager, nullcontext

import torch
import torch.distributed as dist

from configurator import (UsageError, atomic_write, disk_full, fsync_dir, lock_folder,
                          no_checkpoint, quick_start, write_error)
from dataset import describe_data, describe_tokenizer, fingerprint, tokenizer_of
from model import GPT, GPTConfig, count_params


CHECKPOINT_FORMAT = 1
RESUME_KEYS = ('optimizer', 'scaler', 'iter_num', 'tokens_seen', 'best_val_loss', 'rng')


# -----------------------------------------------------------------------------
# stopping: signals, budgets and the ETA

class StopSignals:
    """SIGINT / SIGTERM while training: the first is noted and acknowledged (the loop finishes its
    step, saves and exits); a second acts as usual (Ctrl-C: exit 130). Inside cut_short(True) (a
    one-process evaluation, which changes nothing) the first also raises CutShort at once."""

    class CutShort(Exception):
        pass

    def __init__(self, *, announce):
        self.received, self.previous, self.announce, self.cutting = [], {}, announce, False

    def install(self):
        if threading.current_thread() is threading.main_thread():
            self.previous = {s: signal.signal(s, self.on_signal)
                             for s in (signal.SIGINT, signal.SIGTERM)}
        return self

    def restore(self):
        for s, h in self.previous.items():
            signal.signal(s, h)
        self.previous = {}

    def on_signal(self, signum, frame):
        self.received.append(signum)
        self.restore()
        if self.announce:
            again = 'Ctrl-C again' if signum == signal.SIGINT else 'a second signal'
            print(f"\n{signal.Signals(signum).name}: stopping after this step and saving a "
                  f"checkpoint; {again} to abort", file=sys.stderr, flush=True)
        if self.cutting:
            self.cutting = False
            raise self.CutShort

    @contextmanager
    def cut_short(self, enabled):
        self.cutting = enabled
        try:
            yield
        finally:
            self.cutting = False

    def __bool__(self):
        return bool(self.received)

    def exit(self, where, *, announce):
        """Say which signal stopped the run `where`; exit with 128 + its number, as a shell does."""
        signum = (self.received or [signal.SIGTERM])[0]  # or another process's signal
        if announce:
            print(f"stopped by {signal.Signals(signum).name} {where}")
        raise SystemExit(128 + signum)


def duration(seconds):
    """4.2s, 42s, 1m32s, 5h03m, 3d04h: a duration at the precision an ETA deserves."""
    s = int(round(seconds))
    return (f"{seconds:.1f}s" if seconds < 9.95 else
            f"{s}s" if s < 60 else
            f"{s // 60}m{s % 60:02d}s" if s < 3600 else
            f"{s // 3600}h{s % 3600 // 60:02d}m" if s < 86400 else
            f"{s // 86400}d{s % 86400 // 3600:02d}h")


class Progress:
    """The run's budgets (tokens and FLOPs grow with iterations: each is an iteration to reach;
    max_seconds counts train_s), whether one ended it, whether an evaluation is due, and the
    progress line with its ETA, evaluations to come included at eval_s each."""

    def __init__(self, cfg, *, iter_num, tokens_seen, tokens_per_iter, flops_per_token):
        ends = [(cfg.max_iters, 'max_iters')]
        for budget, tokens in (('max_tokens', cfg.max_tokens),
                               ('max_flops', cfg.max_flops / flops_per_token)):
            if tokens:
                iters = max(math.ceil((tokens - tokens_seen) / tokens_per_iter), 0)
                ends.append((iter_num + iters, budget))
        self.end_iter, self.budget = min(ends)
        self.max_seconds, self.eval_interval, self.eval_s = cfg.max_seconds, cfg.eval_interval, 0.0

    def stop_reason(self, iter_num, out_of_time, signalled):
        """Why the run stops before iteration `iter_num`, or None: a signal first, then a budget."""
        if signalled:
            return 'signal'
        if iter_num >= self.end_iter:
            return self.budget
        return 'max_seconds' if out_of_time else None

    def out_of_time(self, train_s):
        return bool(self.max_seconds) and train_s >= self.max_seconds

    def eval_due(self, iter_num, stop):
        """An evaluation every eval_interval iterations and at the end (not after a signal)."""
        return (iter_num % self.eval_interval == 0 or stop is not None) and stop != 'signal'

    def left(self, done, train_s, s_per_iter):
        """(iterations still to run after `done`, the budget that ends the run)."""
        iters = max(self.end_iter - done, 0)
        if self.max_seconds and (self.max_seconds - train_s) < iters * s_per_iter:
            return max(self.max_seconds - train_s, 0.0) / s_per_iter, 'max_seconds'
        return iters, self.budget

    def seconds_left(self, done, train_s, s_per_iter):
        """Training and evaluation seconds until the run ends, `done` iterations in."""
        iters, _ = self.left(done, train_s, s_per_iter)
        end, every = done + int(iters), self.eval_interval
        evals = end // every - (done - 1) // every + (end % every != 0)  # at iterations done..end
        return iters * s_per_iter + evals * self.eval_s

    def status(self, iter_num, train_s, s_per_iter):
        """'iter 250/2000 (12%)', or 'iter 250 (41% of max_seconds)', and 'ETA 1m32s' after step
        iter_num (counted from 0, as log.jsonl counts them): the steps done, 250 after step 249."""
        done = iter_num + 1
        iters, budget = self.left(done, train_s, s_per_iter)
        if budget == 'max_seconds':
            where = f"iter {done} ({100 * min(train_s / self.max_seconds, 1):.0f}% of max_seconds)"
        else:
            of = '' if budget == 'max_iters' else f" of {budget}"
            share = 100 * min(done / max(self.end_iter, 1), 1)
            where = f"iter {done}/{self.end_iter} ({share:.0f}%{of})"
        return where, f"ETA {duration(self.seconds_left(done, train_s, s_per_iter))}"

    def start_estimate(self, micro_s, *, accum, eval_batches, iter_num, train_s, device_type):
        """From one timed micro-step: the eval estimate, and a warning line when the run would take
        hours on a CPU (a bare `python train.py` there: 85M parameters)."""
        self.eval_s = eval_batches * micro_s / 3  # forward only: a third of forward + backward
        s_per_iter = micro_s * accum
        total = self.seconds_left(iter_num, train_s, s_per_iter)
        if device_type == 'cuda' or total < 3600:
            return None
        iters, budget = self.left(iter_num, train_s, s_per_iter)
        return (f"note: this run would take about {duration(total)} on the {device_type.upper()} "
                f"({s_per_iter:.2f}s per iteration, {int(iters):,} iterations to {budget}, evals "
                f"included); lower max_iters, use a GPU, or for a first run try "
                f"`{quick_start(prepare=False)}` (about a minute)")


def config_text(config, width=100):
    """'config: k=v k=v ...' wrapped at `width` between pairs, never inside a value."""
    lines, line = [], 'config:'
    for pair in (f"{k}={v!r}" for k, v in config.items()):
        if len(line) + 1 + len(pair) > width and line.strip() != 'config:':
            lines.append(line)
            line = '   '
        line += ' ' + pair
    return '\n'.join(lines + [line])


def say_start(cfg, procs, accum, model, peak, switch, state, progress, micro_s):
    """What the run is, in its first lines (master); a warning when it would take hours on a CPU."""
    rounded = "" if procs.world * accum == cfg.gradient_accumulation_steps else (
        f" (gradient_accumulation_steps={cfg.gradient_accumulation_steps} rounded up to "
        f"{procs.world * accum}, a multiple of {procs.world} processes)")
    print(f"tokens per iteration: {procs.world * accum * cfg.batch_size * cfg.block_size:,} = "
          f"{procs.world} process(es) x {accum} micro-step(s) x batch_size {cfg.batch_size} x "
          f"block_size {cfg.block_size}{rounded}")
    print(f"model: {model.get_num_params() / 1e6:.2f}M parameters, "
          f"{model.flops_per_token() / 1e6:.1f} MFLOPs per token (training)")
    if peak is None and cfg.device.startswith('cuda'):
        print(f"note: no peak FLOP/s known for {torch.cuda.get_device_name(cfg.device)!r}: MFU is "
              "not logged; --peak_flops=<its dense FLOP/s for this dtype> gives it")
    if switch:
        print(f"note: --new_data: resuming at iter {state.iter_num} on "
              f"{switch['data_switch']['to']}, after {switch['data_switch']['from']}")
    note = progress.start_estimate(  # from a warm step (compiled or not)
        micro_s, accum=accum, eval_batches=2 * math.ceil(cfg.eval_iters / procs.world),
        iter_num=state.iter_num, train_s=state.train_s, device_type=torch.device(cfg.device).type)
    if note:
        print(note, flush=True)


def resolve_device(name='auto'):
    """'auto' picks cuda, then mps, then cpu; a device that is not there is a UsageError."""
    if name == 'auto':
        return ('cuda' if torch.cuda.is_available() else
                'mps' if torch.backends.mps.is_available() else 'cpu')
    try:
        kind = torch.device(name).type
    except RuntimeError:
        kind = None
    if kind not in ('cpu', 'cuda', 'mps'):  # meta, hpu, ...: torch knows them, this code does not
        raise UsageError(f"device {name!r} is not one this code runs on; use auto, cpu, cuda, "
                         "cuda:N or mps")
    if kind != 'cpu' and not (torch.cuda if kind == 'cuda' else torch.backends.mps).is_available():
        raise UsageError(f"device {name!r}: {kind.upper()} is not available here; use "
                         "--device=cpu (or auto)")
    return name


def sync_device(device_type):
    """Wait for queued GPU work, so that a clock read measures it."""
    if device_type == 'cuda':
        torch.cuda.synchronize()
    elif device_type == 'mps':
        torch.mps.synchronize()


@contextmanager
def compile_cache(compiling):
    """While compiling: torch's warning (a traceback) for each cache entry cut short is unsaid: the
    entry is compiled afresh; one that breaks the compile is configurator.compile_failure's line."""
    log = logging.getLogger('torch._inductor.codecache')
    level = log.level
    log.setLevel(logging.ERROR if compiling else level)
    try:
        yield
    finally:
        log.setLevel(level)


def warm_up(model, X, Y, ctx, scaler, optimizer, procs, compiling=False):
    """Two forward + backward passes before the clock starts, then undone (gradients, dropout's
    random state): the first compiles (not training time), the second's seconds size up the run."""
    if compiling and procs.master:
        print("compiling the model (torch.compile): about a minute on a CPU, less on a GPU...",
              flush=True)
    devices, times = [X.device] if X.device.type == 'cuda' else [], []
    with torch.random.fork_rng(devices=devices), (model.no_sync() if procs.ddp else nullcontext()):
        for _ in range(2):  # the first pass is cold (caches, allocations) or compiles
            sync_device(X.device.type)
            t0 = time.time()
            with compile_cache(compiling):
                with ctx:
                    _, loss = model(X, Y)
                scaler.scale(loss).backward()
                if compiling and not times:  # evaluation's graph (eval mode, no grad) too
                    with torch.no_grad(), ctx:
                        model.eval()(X, Y)
                    model.train()
            sync_device(X.device.type)
            times.append(time.time() - t0)
    optimizer.zero_grad(set_to_none=True)
    if compiling and procs.master:
        print(f"compiled in {duration(times[0])}", flush=True)
    return times[1]


# Dense peaks (TFLOP/s, without 2:4 sparsity) from NVIDIA's datasheets, by the GPU's name as torch
# reports it (a regular expression, most specific first): (name, bf16/fp16 with float32
# accumulation, tf32). float32 runs use the tf32 peak: train.py lets matmuls use tf32. A GPU not
# listed gets no MFU.
PEAK_TFLOPS = [(r'H200 NVL', 835, 418), (r'H200', 989, 495),
               (r'H100 PCIe', 756, 378), (r'H100 NVL', 835, 418), (r'H100', 989, 495),  # H100: SXM5
               (r'A100', 312, 156),  # SXM4 and PCIe, 40 and 80 GB
               (r'L40S', 362, 183), (r'L40\b', 181, 90.5), (r'L4\b', 121, 60),
               (r'\bA10\b', 125, 62.5),
               (r'RTX 4090', 165, 82.6), (r'RTX 3090 Ti', 80, 40), (r'RTX 3090', 71, 35.6)]


def peak_flops(device, override=0.0, dtype='bfloat16'):
    """Peak FLOP/s that MFU divides by: the override, else the GPU's dense peak for `dtype` (tf32's
    for float32) from PEAK_TFLOPS; None on CPU/MPS and on a GPU the table does not know."""
    if override:
        return override
    if not device.startswith('cuda'):
        return None
    name = torch.cuda.get_device_name(torch.device(device))
    row = next((row for row in PEAK_TFLOPS if re.search(row[0], name)), None)
    return None if row is None else (row[2] if dtype == 'float32' else row[1]) * 1e12


# -----------------------------------------------------------------------------
# a loss that is not finite, a process that does not answer, a model that cannot fit

class NonFiniteLoss(UsageError):
    """The loss became nan or inf: the run stops with one line and saves nothing."""


def check_finite(iter_num, cfg, files, *values, model=None):
    """Stop the run in one line if one of `values` (losses, read where they are waited for
    anyway) or, with `model`, a weight is not finite (inf gradients spoil them unseen)."""
    ok = all(math.isfinite(v) for v in values)
    if model is not None:
        ok = ok and all(torch.isfinite(p).all() for p in model.parameters())
    if not ok:
        raise NonFiniteLoss(f"loss is not finite at iter {iter_num}: stopped without "
                            f"saving{files.kept()}; try {non_finite_advice(cfg)}")


def non_finite_advice(cfg):
    """What to try after a nan/inf loss, leaving out what the run already does."""
    tips = ["a lower learning_rate"]
    if cfg.warmup_iters == 0 and cfg.decay_lr:
        tips.append("warmup_iters > 0")
    if cfg.grad_clip == 0 or cfg.grad_clip > 1.0:
        tips.append("grad_clip=1.0")
    if cfg.dtype == 'float16':  # float16 overflows where bfloat16 (or float32) does not
        bf16 = not cfg.device.startswith('cuda') or torch.cuda.is_bf16_supported()
        tips.append("dtype=bfloat16" if bf16 else "dtype=float32")
    return ', '.join(tips[:-1]) + (' or ' if len(tips) > 1 else '') + tips[-1]


def ddp_failed(e, procs, timeout_s, ckpt_path):
    """A collective that timed out, or a peer gone: one line naming this rank, then exit 2 at once
    (tearing down the broken group can wait forever on a lost peer). Else the caller raises e."""
    if not (isinstance(e, dist.DistError) or any(s in str(e) for s in (
            'Timed out', 'timed out', 'Connection reset', 'Connection closed', 'Broken pipe'))):
        return
    kept = (f"{ckpt_path} is kept as it was" if os.path.exists(ckpt_path) else
            "no checkpoint was saved")
    print(f"error: rank {procs.rank} of {procs.world}: the other processes did not answer within "
          f"ddp_timeout_s={timeout_s:g}s or went away (one stopped, crashed or hangs: see its "
          f"output); {kept}; {str(e).strip().splitlines()[0][:200]}", file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(2)


def free_memory(device):
    """Bytes free for tensors on `device`: the GPU's free memory, the machine's available memory for
    the CPU (Linux's MemAvailable, else all of it), None where unknown (MPS)."""
    kind = torch.device(device).type
    if kind == 'cuda':
        return torch.cuda.mem_get_info(torch.device(device))[0]
    if kind != 'cpu':
        return None
    try:
        with open('/proc/meminfo') as f:
            return next(int(line.split()[1]) * 1024 for line in f
                        if line.startswith('MemAvailable:'))
    except (OSError, StopIteration, ValueError):
        try:
            return os.sysconf('SC_PHYS_PAGES') * os.sysconf('SC_PAGE_SIZE')
        except (ValueError, OSError, AttributeError):
            return None


def check_memory(cfg, device):
    """A UsageError, before anything is allocated, when the model's float32 weights, gradients and
    AdamW moments (16 bytes a parameter; activations on top) exceed the device's free memory."""
    n = count_params(GPTConfig(**cfg.model_args()))
    need, free = 16 * n, free_memory(device)
    if free is not None and need > free:
        raise UsageError(f"the model has {n / 1e6:,.1f}M parameters: its weights, gradients and "
                         f"optimizer state alone take {need / 2**30:,.1f} GiB, more than the "
                         f"{free / 2**30:,.1f} GiB free on {device}; lower vocab_size, n_embd or "
                         "n_layer, or use a larger device")


class Unstoppable:
    """sys.stdout / sys.stderr for a run: a write or flush that fails because the reader went away
    (`train.py | tee log` with tee killed, `| head`, a closed terminal) points the stream's file at
    /dev/null and goes on: the run trains and saves; log.jsonl and the checkpoint are its record."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text):
        try:
            return self.stream.write(text)
        except OSError:  # BrokenPipeError, EIO, ...
            self.silence()
            return len(text)

    def flush(self):
        try:
            self.stream.flush()
        except OSError:
            self.silence()

    def silence(self):
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), self.stream.fileno())
            self.stream.flush()  # what was buffered goes to /dev/null now
        except (OSError, ValueError):
            pass

    def __getattr__(self, name):
        return getattr(self.stream, name)


def keep_output_from_stopping_the_run():
    """Wrap sys.stdout and sys.stderr in Unstoppable (once)."""
    for name in ('stdout', 'stderr'):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, Unstoppable):
            setattr(sys, name, Unstoppable(stream))


# -----------------------------------------------------------------------------
# what a checkpoint must be, and whether a run can resume it

def load_checkpoint(path, device='cpu'):
    """The checkpoint dict at `path` (tensors on `device`); missing or unreadable: a UsageError."""
    if not os.path.isfile(path):
        raise no_checkpoint(path) from None
    try:
        ckpt = torch.load(path, map_location=device, weights_only=True)
    except Exception as e:  # truncated, garbage, or not a torch file at all (torch's own advice to
        # pass weights_only=False would run arbitrary pickled code: not something to suggest)
        raise UsageError(f"checkpoint {path!r} cannot be read ({type(e).__name__}): it is "
                         "truncated, corrupt or not written by train.py; retrain, or restore a "
                         "good copy") from None
    if not isinstance(ckpt, dict) or not {'model', 'model_args'} <= ckpt.keys():
        raise UsageError(f"{path!r} is not a checkpoint train.py wrote (no 'model'/'model_args')")
    version = ckpt.get('format_version', 1)
    if type(version) is not int or version > CHECKPOINT_FORMAT:  # newer: fields would be dropped
        raise UsageError(f"{path} has checkpoint format {version!r}; this code reads format "
                         f"{CHECKPOINT_FORMAT} and older: use the code that wrote it (git pull)")
    wrong = next((k for k, kinds in FIELD_TYPES.items()
                  if k in ckpt and not isinstance(ckpt[k], kinds)), None)
    if wrong is None and not all(isinstance(k, str) and isinstance(v, torch.Tensor)
                                 for k, v in ckpt['model'].items()):
        wrong = 'model'
    if wrong:
        raise UsageError(f"{path}: its {wrong!r} is a {type(ckpt[wrong]).__name__}, not what "
                         "train.py writes; the file is damaged or not ours: retrain, or restore a "
                         "good copy")
    return ckpt


# what each field of a checkpoint holds (bool is an int in Python: iter_num=True is refused by name)
FIELD_TYPES = {'model': dict, 'model_args': dict, 'config': dict, 'meta': (dict, type(None)),
               'optimizer': dict, 'scaler': dict, 'iter_num': int, 'tokens_seen': int,
               'best_val_loss': (float, int), 'train_s': (float, int), 'elapsed_s': (float, int),
               'rng': list, 'evaluated': bool, 'finished': bool, 'writer': int}


def config_from_dict(d):
    """A GPTConfig from a dict (model_args): missing fields take today's defaults, gone ones go."""
    known = {f.name for f in dataclasses.fields(GPTConfig)}
    try:
        return GPTConfig(**{k: v for k, v in d.items() if k in known})
    except (ValueError, TypeError) as e:  # TypeError: a field of the wrong type (n_layer='4')
        raise UsageError(f"checkpoint model_args are not valid for this model.py: {e}") from None


def load_weights(model, state):
    """load_state_dict, with the prefixes torch.compile / DDP add stripped and a one-line error."""
    state = {k.removeprefix('_orig_mod.').removeprefix('module.'): v for k, v in state.items()}
    try:
        model.load_state_dict(state)
    except RuntimeError as e:
        raise UsageError(f"checkpoint weights do not fit the model they describe: "
                         f"{str(e).splitlines()[0]}") from None
    return model


def model_from_checkpoint(ckpt):
    """Rebuild the GPT a checkpoint holds from its own 'model_args' (no config file needed)."""
    return load_weights(GPT(config_from_dict(ckpt['model_args'])), ckpt['model'])


def check_resumable(ckpt, cfg, meta, path):
    """A UsageError unless the run `cfg` on data `meta` can continue checkpoint `ckpt` exactly:
    written by this train.py, the same architecture (dropout may change), optimizer and tokenizer;
    the log row of a switch to other data (--new_data), or None."""
    missing = [k for k in RESUME_KEYS if k not in ckpt]
    if missing:
        raise UsageError(f"{path} has no {', '.join(missing)}: it was not written by this "
                         "train.py, so it cannot resume exactly; use another out_dir with "
                         "init_from='scratch'")
    if not ckpt['rng'] or not all(isinstance(r, dict) and {'torch', 'numpy', 'python', 'data'}
                                  <= r.keys() for r in ckpt['rng']):
        raise UsageError(f"{path}: its random generator states are not what train.py writes; the "
                         "file is damaged or not ours: use another out_dir with "
                         "init_from='scratch'")
    saved, asked = {**dataclasses.asdict(GPTConfig()), **ckpt['model_args']}, cfg.model_args()
    diff = [k for k in asked if k != 'dropout' and saved.get(k) != asked[k]]
    if diff:
        raise UsageError(f"{path} holds another architecture: " + ", ".join(
            f"{k}={saved.get(k)!r} (asked {asked[k]!r})" for k in diff)
            + "; resume with the checkpoint's config or use another out_dir")
    saved_opt = (ckpt.get('config') or {}).get('optimizer', 'adamw')  # (no key: before Muon)
    if saved_opt != cfg.optimizer:  # optimizer state of one does not load into the other
        raise UsageError(f"{path} was trained with optimizer={saved_opt!r}, asked "
                         f"{cfg.optimizer!r}; resume with --optimizer={saved_opt} or start a new "
                         "out_dir")
    # one val curve, one val set: its batches are drawn from eval_seed (-1 before the setting
    # existed); a changed eval_iters keeps the first batches (keys (1, k) below both counts)
    saved = (ckpt.get('config') or {}).get('eval_seed', -1)
    if saved != cfg.eval_seed:
        raise UsageError(f"{path} was evaluated with eval_seed={saved}, asked {cfg.eval_seed}: its "
                         f"val curve would change val set midway; resume with --eval_seed={saved} "
                         "or start a new out_dir")
    # token ids mean what the checkpoint's tokenizer says (stored in the checkpoint for sample.py)
    if 'meta' in ckpt and tokenizer_of(meta) != tokenizer_of(ckpt['meta']):
        raise UsageError(f"{cfg.data_dir} is tokenized with {describe_tokenizer(meta)} but {path} "
                         f"was trained with {describe_tokenizer(ckpt['meta'])}; resume on data "
                         "prepared with the checkpoint's tokenizer, or train this data in a new "
                         "out_dir")
    switch = data_switch(ckpt, meta)
    if switch and not cfg.new_data:  # one val curve, one corpus
        raise UsageError(f"{cfg.data_dir} holds {switch['data_switch']['to']}, but {path} was "
                         f"trained on {switch['data_switch']['from']}; resume on that data, or "
                         "pass --new_data=True to go on training on this one (fine-tuning: "
                         "log.jsonl marks the switch)")
    return switch


def data_switch(ckpt, meta):
    """A log row for a resume on other data than the checkpoint's (same tokenizer), or None."""
    old = ckpt.get('meta')
    if old is None or meta is None or fingerprint(old) == fingerprint(meta):
        return None
    before, after = describe_data(old), describe_data(meta)
    if before == after:  # the same name and source: the fingerprints tell them apart
        before, after = f"{before} (data {fingerprint(old)})", f"{after} (data {fingerprint(meta)})"
    return {'iter': ckpt['iter_num'], 'data_switch': {'from': before, 'to': after}}


def peek(path):
    """A checkpoint's iter_num, tokens_seen, finished and writer, read without loading its tensors;
    None when there is no file, {} when it cannot be read."""
    if not os.path.isfile(path):
        return None
    try:
        ckpt = torch.load(path, map_location='cpu', weights_only=True, mmap=True)
        return {k: ckpt.get(k) for k in ('iter_num', 'tokens_seen', 'finished', 'writer')}
    except Exception:  # truncated, not ours: the caller treats it as something to keep
        return {}


# -----------------------------------------------------------------------------
# out_dir's files

def read_jsonl(path):
    """The rows of a log.jsonl: JSON objects with an integer 'iter'. A last line cut short by a
    killed run is skipped; any other line that is not such a row is a UsageError naming it."""
    try:
        with open(path, 'rb') as f:
            lines = f.read().splitlines(keepends=True)
    except OSError as e:
        raise UsageError(f"cannot read {path!r} ({e.strerror})") from None
    rows = []
    for n, line in enumerate(lines, 1):
        try:
            row = json.loads(line.decode('utf-8'))
        except ValueError:  # also UnicodeDecodeError
            row = None
        if isinstance(row, dict) and type(row.get('iter')) is int:
            rows.append(row)
        elif line.strip() and (n < len(lines) or line.endswith(b'\n')):  # (a blank line is no row)
            what = repr(line[:40].decode('utf-8', 'replace')) + ('...' if len(line) > 40 else '')
            raise UsageError(f"{path} line {n} is not a log row (a JSON object with an integer "
                             f"'iter'): {what}; delete that line, or the file, and rerun")
    return rows


RUN_FILES = ('ckpt.pt', 'log.jsonl', 'config.json')


class RunFiles:
    """
    What a run writes in out_dir (the master process; elsewhere each method does nothing): ckpt.pt,
    log.jsonl, config.json (with the first checkpoint), prev/. out_dir is locked from the start and
    changes only from open(), once every check passed. A scratch run over a previous run writes in
    out_dir/.new/ until its first checkpoint, then the previous run moves to prev/ whole (`swap`; a
    cut-short move is finished by the next run: `settle`) unless it was stopped with less training
    than prev/'s run, which stays. A failed write is one line; the last good checkpoint stays.
    """

    def __init__(self, cfg, *, master=True):
        self.cfg, self.out_dir, self.master = cfg, cfg.out_dir, master
        self.ckpt_path, self.log_path, self.config_path = (os.path.join(cfg.out_dir, n)
                                                           for n in RUN_FILES)
        self.prev = os.path.join(cfg.out_dir, 'prev')
        self.log, self.lock, self.staged, self.config_written = None, None, False, False
        if master and os.path.isdir(self.out_dir):  # refused now, not after a warm-up
            self.lock = lock_folder(self.out_dir, 'a run')

    def path(self, name):
        """Where this run writes file `name`: out_dir, or out_dir/.new/ until its first save."""
        return os.path.join(self.out_dir, *(['.new'] if self.staged else []), name)

    def open(self, start_iter, first_rows=()):
        """Create and lock out_dir, settle what a killed run left, and open the log (on resume: its
        rows before the checkpoint), then write `first_rows`."""
        if not self.master:
            return
        try:
            os.makedirs(self.out_dir, exist_ok=True)
        except OSError as e:
            raise UsageError(f"out_dir {self.out_dir!r} cannot be created ({e.strerror}); "
                             f"pass --out_dir=a/new/folder") from None
        self.lock = self.lock or lock_folder(self.out_dir, 'a run')
        try:
            settle(self.out_dir)
        except OSError as e:
            raise UsageError(f"cannot tidy what a killed run left in {self.out_dir} ({e.strerror}: "
                             f"{e.filename}); fix that, or use another out_dir") from None
        resume, rows = self.cfg.init_from == 'resume', []
        if resume and os.path.isfile(self.ckpt_path) and not os.path.isfile(self.config_path):
            saved = load_checkpoint(self.ckpt_path).get('config')  # killed between the two writes
            if saved:
                self.write(self.config_path,
                           lambda f: f.write(json.dumps(saved, indent=1).encode()))
        if resume and os.path.exists(self.log_path):
            # an eval row at start_iter came before the checkpoint; step rows from there on did not
            rows = [r for r in read_jsonl(self.log_path)
                    if r['iter'] < start_iter or (r['iter'] == start_iter and 'val_loss' in r)]
        if not resume and any(os.path.exists(os.path.join(self.out_dir, n)) for n in RUN_FILES):
            self.staged = True
            os.makedirs(os.path.join(self.out_dir, '.new'), exist_ok=True)
            then = (f"moves to {self.prev}/" if moves_to_prev(self.out_dir, self.prev) else
                    f"goes: {self.prev}/ keeps its run, which has more training")
            print(f"note: {self.out_dir} holds a previous run: this run starts over "
                  "(--init_from=resume continues that one instead); the previous run stays as it "
                  f"is until this run saves its first checkpoint, then {then}")
        try:
            text = ''.join(json.dumps(r) + '\n' for r in rows).encode()
            self.write(self.path('log.jsonl'), lambda f: f.write(text))
            self.log = open(self.path('log.jsonl'), 'a')
        except (OSError, UsageError) as e:
            self.close()
            if isinstance(e, UsageError):
                raise
            raise write_error(self.path('log.jsonl'), e, self.what_is_kept(e)) from None
        for row in first_rows:
            self.write_row(row)

    def write_row(self, row):
        """One JSON object per line; a value that is not a finite number (an MFU from a bad peak)
        is written as null: NaN and Infinity are not JSON, and would stop the log's readers."""
        if not self.master:
            return
        row = {k: None if isinstance(v, float) and not math.isfinite(v) else v
               for k, v in row.items()}
        try:
            self.log.write(json.dumps(row, allow_nan=False) + '\n')
            self.log.flush()  # readable while the run goes on (sweep.py --plot, tail -f)
        except OSError as e:
            raise write_error(self.log_path, e, self.what_is_kept(e)) from None

    def save(self, ckpt):
        """config.json (with the first checkpoint), then the checkpoint, each atomically; the first
        one of a run staged in .new/ commits it, and the previous run moves to prev/."""
        if not self.master:
            return
        if not self.config_written:
            self.write(self.path('config.json'), lambda f: f.write(
                json.dumps(dataclasses.asdict(self.cfg), indent=1).encode()))
            self.config_written = True
        self.write(self.path('ckpt.pt'), lambda f: torch.save(ckpt, f))
        if self.staged:
            try:
                kept = swap(self.out_dir)
            except OSError as e:
                raise UsageError(f"could not move the previous run of {self.out_dir!r} to "
                                 f"{self.prev!r} ({(e.strerror or str(e)).lower()}); this "
                                 "checkpoint is saved, and the next run in that folder finishes "
                                 "the move") from None
            self.staged = False
            say_moved(self.out_dir, kept)

    def close(self):
        """Close the log, finish or undo what this run left half-way in out_dir, and release it."""
        if not self.master:
            return
        if self.log is not None:
            try:
                self.log.close()
            except OSError:  # the disk is still full: what the log holds is what it holds
                pass
        try:
            if os.path.isdir(self.out_dir):
                settle(self.out_dir)
        except OSError as e:  # what is left is settled by the next run in out_dir
            print(f"note: could not tidy {self.out_dir} ({e.strerror}); the next run there "
                  "does", file=sys.stderr)
        finally:
            if self.lock is not None:
                os.close(self.lock)
                self.lock = None

    def write(self, path, write):
        """atomic_write, ending its one line with what is kept."""
        try:
            atomic_write(path, write)
        except UsageError as e:
            raise UsageError(f"{e}; {self.what_is_kept(e)}") from None

    def kept(self):
        """The end of a stop line: the last checkpoint, if there is one, stays as it was."""
        return f"; {self.ckpt_path} is kept as it was" if os.path.exists(self.ckpt_path) else ""

    def what_is_kept(self, e):
        """What a failed write leaves: the previous run, or the last checkpoint, as it was."""
        if self.staged:
            return (f"the previous run in {self.out_dir} is kept as it was"
                    + "; free some space and rerun" * disk_full(e))
        if os.path.exists(self.ckpt_path):
            return (f"{self.ckpt_path} is kept as it was"
                    + "; free some space and resume with --init_from=resume" * disk_full(e))
        return "no checkpoint was saved"


def say_moved(out_dir, kept):
    """The note of a scratch run's first checkpoint over a previous run."""
    prev = os.path.join(out_dir, 'prev')
    if not kept:
        print(f"note: {out_dir} held a run stopped before its end with less training than the one "
              f"in {prev}/, which stays; this run replaces it")
        return
    odd = peek(os.path.join(prev, 'ckpt.pt')) == {}
    print(f"note: {out_dir} held a checkpoint{' that cannot be read' * odd}: the previous run "
          f"(ckpt.pt, log.jsonl, config.json) is kept in {prev}/"
          + ("" if odd else "; --init_from=resume continues a run instead of starting over"))


def swap(out_dir):
    """A run staged in out_dir/.new/ saved its first checkpoint there: link the previous run into
    .old/, which becomes prev/ by one rename (or is dropped: moves_to_prev); rename .new/ .commit/,
    move its files into out_dir. out_dir or prev/ holds the trained run whole, prev/ never a mix;
    each step can be taken again (settle). Whether the previous run went to prev/."""
    def p(*names):
        return os.path.join(out_dir, *names)
    keep = True
    if os.path.isdir(p('.new')):  # (until .commit/ exists, out_dir's files are the previous run's)
        for folder in ('.old', '.gone'):
            shutil.rmtree(p(folder), ignore_errors=True)
        old = [name for name in RUN_FILES if os.path.exists(p(name))]
        if old:
            os.makedirs(p('.old'))
            for name in old:
                try:
                    os.link(p(name), p('.old', name))
                except OSError:  # a file system without hard links: a copy
                    shutil.copy2(p(name), p('.old', name))
            keep = moves_to_prev(p('.old'), p('prev'))
            if keep and os.path.isdir(p('prev')):
                os.replace(p('prev'), p('.gone'))
            os.replace(p('.old'), p('prev') if keep else p('.gone'))
            fsync_dir(out_dir)
            shutil.rmtree(p('.gone'), ignore_errors=True)
        os.replace(p('.new'), p('.commit'))
    for name in os.listdir(p('.commit')):
        os.replace(p('.commit', name), p(name))
    os.rmdir(p('.commit'))
    fsync_dir(out_dir)
    return keep


def settle(out_dir):
    """What a run killed mid-way left in out_dir: its temp files go; a .new/ without a checkpoint
    goes; one with a checkpoint, or a .commit/, was committed: its swap is finished."""
    shutil.rmtree(os.path.join(out_dir, '.gone'), ignore_errors=True)
    for name in os.listdir(out_dir):  # atomic_write's temp files of writers that died
        m = re.fullmatch(r'(?:ckpt\.pt|log\.jsonl|config\.json)\.tmp(\d+)(?:\.tmp\d+)*', name)
        if m and not pid_running(int(m.group(1))):
            os.remove(os.path.join(out_dir, name))
    if (os.path.isdir(os.path.join(out_dir, '.commit'))
            or os.path.isfile(os.path.join(out_dir, '.new', 'ckpt.pt'))):
        swap(out_dir)
    elif os.path.isdir(os.path.join(out_dir, '.new')):
        shutil.rmtree(os.path.join(out_dir, '.new'))


def moves_to_prev(old, prev):
    """Whether the run in folder `old` replaces prev/'s. Not when it was stopped before its end with
    less training than prev/'s, or holds no checkpoint while prev/ does: then prev/ stays."""
    here, there = peek(os.path.join(old, 'ckpt.pt')), peek(os.path.join(prev, 'ckpt.pt'))
    if here is None:
        return there is None
    if not here or not there or here.get('finished') in (True, None):  # unreadable or finished
        return True
    return (here.get('tokens_seen') or 0) >= (there.get('tokens_seen') or 0)


def pid_running(pid):
    """Whether a process with this id exists (a temp file named after it may still be written)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True
