"""
How a training run executes: its settings (`TrainConfig`, with the learning-rate schedule), the
device and precision, the processes (`Distributed`: one, or those torchrun started), Ctrl-C and
SIGTERM (`StopSignals`), the clock and the budgets (`Progress`), and the watch for a loss that is
not finite. train.py reads as a loop over these; sample.py, bench.py and probe.py share the device
helpers.
"""
import dataclasses
import datetime
import math
import os
import re
import signal
import sys
import threading
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

import torch
import torch.distributed as dist

from configurator import UsageError, require
from model import GPTConfig, check_optimizer, count_params, matched_width

DTYPES = ('auto', 'float32', 'bfloat16', 'float16')
SCHEDULES = ('cosine', 'wsd')
PTDTYPES = {'float32': torch.float32, 'bfloat16': torch.bfloat16, 'float16': torch.float16}


@dataclass
class TrainConfig(GPTConfig):
    """Every default of a run: the model's GPTConfig fields plus nanoGPT's training keys."""
    # I/O
    out_dir: str = 'out'               # where ckpt.pt, log.jsonl and config.json go
    data_dir: str = 'data/pydoc_char'  # what a plain `python prepare.py` writes
    init_from: str = 'scratch'         # 'scratch' or 'resume' (from out_dir/ckpt.pt)
    new_data: bool = False             # resume on data other than the checkpoint's (fine-tuning); else refused
    eval_interval: int = 2000          # iterations between evaluations (and checkpoints)
    eval_iters: int = 200              # batches per split and evaluation, the same ones every time
    eval_seed: int = 0                 # draws the eval batches: one val set for every run and seed (-1: the run's seed, as before 2026-11-26)
    log_interval: int = 1              # iterations between progress lines / log rows
    always_save_checkpoint: bool = True  # else save at evals only when val loss improves
    # data
    vocab_size: int = 0                # 0 = the data's (meta.json); for raw llm.c shards 50304
    batch_size: int = 12               # micro-batch size of one process
    gradient_accumulation_steps: int = 40  # global: divided among the processes
    # optimizer; learning rate: linear warmup, then cosine decay (or warmup-stable-decay)
    optimizer: str = 'adamw'           # 'adamw', or 'muon' (Muon for hidden 2-D matrices, AdamW for the rest)
    learning_rate: float = 6e-4        # peak learning rate, after warmup
    max_iters: int = 600000            # stop after this many optimizer steps
    weight_decay: float = 1e-1         # AdamW decoupled decay of >= 2-D weights
    beta1: float = 0.9                 # AdamW first-moment decay
    beta2: float = 0.95                # AdamW second-moment decay
    grad_clip: float = 1.0             # 0 = no clipping
    decay_lr: bool = True              # warmup + decay (lr_schedule); False = constant learning_rate
    lr_schedule: str = 'cosine'        # 'cosine' to min_lr at lr_decay_iters, or 'wsd': constant, then a cooldown
    cooldown_frac: float = 0.2         # wsd: the cooldown's share of lr_decay_iters (1 - sqrt shape to min_lr)
    warmup_iters: int = 2000           # linear warmup steps
    lr_decay_iters: int = 600000       # ~ max_iters per Chinchilla
    min_lr: float = 6e-5               # ~ learning_rate / 10 per Chinchilla
    # budgets for comparing architectures at equal tokens or equal training time; 0 = no limit
    max_tokens: int = 0                # stop after this many training tokens (equal-token budget)
    max_seconds: float = 0.0           # counts train_s: time in training steps, evals excluded
    max_flops: float = 0.0             # stop at this many training FLOPs (tokens x GPT.flops_per_token)
    # system
    device: str = 'auto'               # 'auto' (cuda, mps, cpu), 'cpu', 'cuda', 'cuda:1', 'mps'
    dtype: str = 'auto'                # 'auto' (bfloat16 or float16 on cuda, else float32) or one of DTYPES
    compile: bool = False              # torch.compile the model (needs a C++ compiler on CPU)
    peak_flops: float = 0.0            # for MFU; 0 = the GPU's dense peak for dtype by name (PEAK_TFLOPS), none on CPU
    ddp_timeout_s: float = 1800.0      # DDP: a process that waits this long on the others stops the run with a message
    seed: int = 1337                   # sets the init, the batches and dropout; same seed = same run

    def __post_init__(self):
        for name, allowed in (('init_from', ('scratch', 'resume')), ('dtype', DTYPES),
                              ('lr_schedule', SCHEDULES)):
            require(self, name, lambda v: v in allowed, f"is not one of {', '.join(allowed)}")
        check_optimizer(self.optimizer)
        require(self, 'batch_size gradient_accumulation_steps eval_interval eval_iters log_interval',
                lambda v: v >= 1, "must be at least 1")
        require(self, 'max_iters warmup_iters lr_decay_iters max_tokens vocab_size',
                lambda v: v >= 0, "must not be negative")
        require(self, 'seed', lambda v: 0 <= v < 2**63, "must be in [0, 2**63)")  # torch's generators take 64 bits
        require(self, 'eval_seed', lambda v: -1 <= v < 2**63, "must be -1 (the run's seed) or in [0, 2**63)")
        require(self, 'max_seconds max_flops weight_decay grad_clip min_lr peak_flops', lambda v: 0 <= v < math.inf,
                "must be a finite number, not negative")
        require(self, 'learning_rate', lambda v: 0 < v < math.inf, "must be a positive number")
        require(self, 'ddp_timeout_s', lambda v: 0 < v < math.inf, "must be a positive number of seconds")
        require(self, 'beta1 beta2', lambda v: 0 <= v < 1, "must be in [0, 1)")
        if self.min_lr > self.learning_rate:
            raise ValueError(f"min_lr={self.min_lr} exceeds learning_rate={self.learning_rate}")
        require(self, 'cooldown_frac', lambda v: 0 < v <= 1, "must be in (0, 1]")
        if self.decay_lr and self.lr_decay_iters <= self.warmup_iters:
            raise ValueError(f"lr_decay_iters={self.lr_decay_iters} must exceed warmup_iters="
                             f"{self.warmup_iters} (or set decay_lr=False for a constant rate)")
        if self.decay_lr and self.lr_schedule == 'wsd' and self.cooldown_start() < self.warmup_iters:
            raise ValueError(f"lr_schedule='wsd': the cooldown (the last {self.cooldown_frac:g} of "
                             f"lr_decay_iters={self.lr_decay_iters}) starts at iter "
                             f"{self.cooldown_start()}, inside warmup_iters={self.warmup_iters}: "
                             "lower warmup_iters or cooldown_frac, or raise lr_decay_iters")
        # the model's own checks; vocab_size 0 means "the data's", known only once data_dir is read
        # (and with it whether match_params can match: train.py checks that once it knows)
        model = GPTConfig(**{**self.model_args(), 'vocab_size': self.vocab_size or 1})
        if self.vocab_size and self.match_params:
            matched_width(model)

    def model_args(self):
        """The GPTConfig fields of this config, as a dict."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(GPTConfig)}

    def val_seed(self):
        """The seed the evaluation batches are drawn from: eval_seed, the same for every run (so two
        seeds of one config, and two configs, are scored on the same text), or -1: the run's seed."""
        return self.seed if self.eval_seed == -1 else self.eval_seed

    def cooldown_start(self):
        """wsd: the iteration where the cooldown begins (the lr is constant before it)."""
        return self.lr_decay_iters - round(self.cooldown_frac * self.lr_decay_iters)

    def lr_at(self, it):
        """Learning rate at iteration `it`: linear warmup, then down to min_lr at lr_decay_iters, by a
        cosine over the whole run, or ('wsd') constant and then a cooldown over its last part."""
        if not self.decay_lr:
            return self.learning_rate
        if it < self.warmup_iters:
            return self.learning_rate * (it + 1) / (self.warmup_iters + 1)
        if it >= self.lr_decay_iters:
            return self.min_lr
        if self.lr_schedule == 'wsd':
            # warmup-stable-decay (Hagele et al. 2024, arXiv:2405.18392): a run with the same lr
            # before cooldown_start() is this run's prefix, so one constant-lr run can be branched
            # into cooldowns of any length (sweep.py does). Their best cooldown shape: 1 - sqrt.
            start = self.cooldown_start()
            if it < start:
                return self.learning_rate
            coeff = 1.0 - math.sqrt((it - start) / (self.lr_decay_iters - start))  # 1 down to 0
            return self.min_lr + coeff * (self.learning_rate - self.min_lr)
        decay_ratio = (it - self.warmup_iters) / (self.lr_decay_iters - self.warmup_iters)
        coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))  # from 1 down to 0
        return self.min_lr + coeff * (self.learning_rate - self.min_lr)


def config_text(config, width=110):
    """'config: k=v k=v ...' wrapped at `width` between pairs, never inside a value."""
    lines, line = [], 'config:'
    for pair in (f"{k}={v!r}" for k, v in config.items()):
        if len(line) + 1 + len(pair) > width and line.strip() != 'config:':
            lines.append(line)
            line = '   '
        line += ' ' + pair
    return '\n'.join(lines + [line])


# -----------------------------------------------------------------------------
# output that cannot stop a run

class Unstoppable:
    """sys.stdout / sys.stderr for a run: a write or flush that fails because the reader went away
    (`train.py | tee log` with tee killed, `| head`, a closed terminal) points the stream's file at
    /dev/null and goes on, so the run trains and saves as if nothing happened; log.jsonl and the
    checkpoint are its record."""

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


SWEEP_DIED = None  # the signal a run gets when the sweep that started it dies (set by stop_with_the_sweep)


def stop_with_the_sweep():
    """A run a sweep started (SWEEP_PID in its environment) is signalled when that sweep dies, even by
    SIGKILL (Linux's parent-death signal, SIGUSR2 here: it comes once per thread of the dying sweep, so
    it cannot be SIGTERM, whose second arrival aborts): it then saves and stops as after SIGTERM (exit
    143), never trains on alone. Before training starts the signal ends the run at once: nothing to save."""
    global SWEEP_DIED
    pid = os.environ.get('SWEEP_PID', '')
    if not pid.isdigit() or not sys.platform.startswith('linux'):
        return
    try:
        import ctypes
        if ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGUSR2):  # PR_SET_PDEATHSIG
            return
    except (OSError, AttributeError):
        return
    SWEEP_DIED = signal.SIGUSR2
    if os.getppid() != int(pid):  # the sweep died before the line above took effect
        raise SystemExit(128 + signal.SIGTERM)


# -----------------------------------------------------------------------------
# device and precision

def resolve_device(name='auto'):
    """'auto' picks cuda, then mps, then cpu; a device that is not there is a UsageError."""
    if name == 'auto':
        if torch.cuda.is_available():
            return 'cuda'
        return 'mps' if torch.backends.mps.is_available() else 'cpu'
    try:
        kind = torch.device(name).type
    except RuntimeError:
        kind = None
    if kind not in ('cpu', 'cuda', 'mps'):  # meta, hpu, ...: torch names them, this code does not run there
        raise UsageError(f"device {name!r} is not one this code runs on; use auto, cpu, cuda, cuda:N or mps")
    if kind == 'cuda' and not torch.cuda.is_available():
        raise UsageError(f"device {name!r}: CUDA is not available here; use --device=cpu (or auto)")
    if kind == 'mps' and not torch.backends.mps.is_available():
        raise UsageError(f"device {name!r}: MPS is not available here; use --device=cpu (or auto)")
    return name


def resolve_dtype(name, device_type):
    """'auto' is bfloat16 on CUDA GPUs that have it, float16 on older ones, float32 elsewhere."""
    if name == 'auto':
        if device_type != 'cuda':
            return 'float32'
        return 'bfloat16' if torch.cuda.is_bf16_supported() else 'float16'
    if name == 'bfloat16' and device_type == 'cuda' and not torch.cuda.is_bf16_supported():
        raise UsageError("this GPU has no bfloat16; use --dtype=float16 (with loss scaling) or float32")
    return name


def autocast_context(device_type, dtype):
    """torch.autocast for bfloat16 / float16 (also on CPU), a no-op context for float32."""
    dtype = PTDTYPES[resolve_dtype(dtype, device_type)] if isinstance(dtype, str) else dtype
    if dtype == torch.float32:
        return nullcontext()
    return torch.amp.autocast(device_type=device_type, dtype=dtype)


# Dense peaks (TFLOP/s, without 2:4 sparsity) from NVIDIA's datasheets, by GPU name as torch reports
# it (a regular expression, most specific first): (name, bf16/fp16 with float32 accumulation, tf32).
# float32 runs use the tf32 peak: train.py lets matmuls use tf32. A GPU not listed gets no MFU.
PEAK_TFLOPS = [(r'H200 NVL', 835, 418), (r'H200', 989, 495),
               (r'H100 PCIe', 756, 378), (r'H100 NVL', 835, 418), (r'H100', 989, 495),  # H100: SXM5
               (r'A100', 312, 156),  # SXM4 and PCIe, 40 and 80 GB
               (r'L40S', 362, 183), (r'L40\b', 181, 90.5), (r'L4\b', 121, 60), (r'\bA10\b', 125, 62.5),
               (r'RTX 4090', 165, 82.6), (r'RTX 3090 Ti', 80, 40), (r'RTX 3090', 71, 35.6)]


def peak_flops(device, override=0.0, dtype='bfloat16'):
    """Peak FLOP/s that MFU divides by: the override, else the GPU's dense peak for `dtype` (tf32's for
    float32) from PEAK_TFLOPS; None on CPU/MPS and on a GPU the table does not know."""
    if override:
        return override
    if not device.startswith('cuda'):
        return None
    name = torch.cuda.get_device_name(torch.device(device))
    row = next((row for row in PEAK_TFLOPS if re.search(row[0], name)), None)
    return None if row is None else (row[2] if dtype == 'float32' else row[1]) * 1e12


def decode_threads(model, prompt, *, given=0, device_type='cpu'):
    """(intra-op threads for decoding, why): `given` (a flag), else OMP_NUM_THREADS when set, else the
    fastest of 1, 2, 4, ... cores at decoding 16 tokens from `prompt` with the cache, measured after a
    warm-up: at batch 1 a token's small matmuls run slower on many threads than on one (a busy CPU
    makes it worse). Sets it, and leaves the GPU alone (None there)."""
    if device_type != 'cpu':
        return None, 'a GPU decodes'
    if given or os.environ.get('OMP_NUM_THREADS'):
        threads = given or torch.get_num_threads()
        torch.set_num_threads(threads)
        return threads, '--threads' if given else 'OMP_NUM_THREADS'
    cores = len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count()
    speed = {}
    for n in sorted({min(2 ** k, cores) for k in range(cores.bit_length())}):
        torch.set_num_threads(n)
        model.generate(prompt, 4, temperature=0)  # warm-up at this thread count
        t0 = time.perf_counter()
        model.generate(prompt, 16, temperature=0)
        speed[n] = 16 / (time.perf_counter() - t0)
    best = max(speed, key=speed.get)
    torch.set_num_threads(best)
    return best, "measured: " + ', '.join(f"{n}: {v:,.0f} tok/s" for n, v in speed.items())


def free_memory(device):
    """Bytes free for tensors on `device`: the GPU's free memory, the machine's available memory for the
    CPU (Linux's MemAvailable, else all of it), None where unknown (MPS)."""
    kind = torch.device(device).type
    if kind == 'cuda':
        return torch.cuda.mem_get_info(torch.device(device))[0]
    if kind != 'cpu':
        return None
    try:
        with open('/proc/meminfo') as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith('MemAvailable:'))
    except (OSError, StopIteration, ValueError):
        try:
            return os.sysconf('SC_PHYS_PAGES') * os.sysconf('SC_PAGE_SIZE')
        except (ValueError, OSError, AttributeError):
            return None


def check_memory(cfg, device):
    """A UsageError, before anything is allocated, when the model's float32 weights, gradients and AdamW
    moments (16 bytes a parameter; activations come on top) exceed the device's free memory: a model
    that cannot fit is one line instead of the kernel killing the process with no message."""
    n = count_params(GPTConfig(**cfg.model_args()))
    need, free = 16 * n, free_memory(device)
    if free is not None and need > free:
        raise UsageError(f"the model has {n / 1e6:,.1f}M parameters: its weights, gradients and optimizer "
                         f"state alone take {need / 2**30:,.1f} GiB, more than the {free / 2**30:,.1f} GiB "
                         f"free on {device}; lower vocab_size, n_embd or n_layer, or use a larger device")


def sync_device(device_type):
    """Wait for queued GPU work, so that a clock read measures it."""
    if device_type == 'cuda':
        torch.cuda.synchronize()
    elif device_type == 'mps':
        torch.mps.synchronize()


# -----------------------------------------------------------------------------
# the processes of a run

class Distributed:
    """
    One process, or the N that torchrun started (it sets RANK, LOCAL_RANK, WORLD_SIZE): every
    collective the loop needs, written so that with one process each is a no-op. The master (rank 0)
    prints, logs and writes checkpoints.
    """

    def __init__(self):
        self.ddp = int(os.environ.get('RANK', -1)) != -1
        self.rank, self.local_rank = int(os.environ.get('RANK', 0)), int(os.environ.get('LOCAL_RANK', 0))
        self.world = int(os.environ.get('WORLD_SIZE', 1))
        self.master = self.rank == 0
        self.ctrl = None  # a CPU (gloo) group for stop decisions, when the data group is NCCL

    def device(self, device):
        return f'cuda:{self.local_rank}' if self.ddp and device.startswith('cuda') else device

    @contextmanager
    def running(self, device, timeout_s, ckpt_path):
        """The process group for the run inside the block: a process that waits timeout_s on the others
        (one stopped, crashed or hangs) ends with a line naming its rank instead of hanging; the ranks
        leave together and the group is destroyed while the interpreter is alive."""
        if not self.ddp:
            yield self
            return
        # Imported first, before the group exists: this module binds `group=group.WORLD` as default
        # arguments
        # when first imported, and DDP imports it (through torch._dynamo). Imported later, it would
        # keep the
        # group alive past destroy_process_group, its gloo threads would die with the interpreter,
        # and that
        # aborts a finished rank now and then ("terminate called without an active exception").
        import torch.distributed.nn.functional as _  # noqa: F401
        cuda, timeout = device.startswith('cuda'), datetime.timedelta(seconds=timeout_s)
        dist.init_process_group(backend='nccl' if cuda else 'gloo', timeout=timeout)
        try:
            if cuda:
                torch.cuda.set_device(device)
                self.ctrl = dist.new_group(backend='gloo', timeout=timeout)  # a CPU all-reduce: no GPU sync
            yield self
            dist.barrier()  # none tears down its group while another still uses it
        except RuntimeError as e:
            if not (isinstance(e, dist.DistError) or any(s in str(e) for s in (
                    'Timed out', 'timed out', 'Connection reset', 'Connection closed', 'Broken pipe'))):
                raise
            kept = f"{ckpt_path} is kept as it was" if os.path.exists(ckpt_path) else "no checkpoint was saved"
            print(f"error: rank {self.rank} of {self.world}: the other processes did not answer within "
                  f"ddp_timeout_s={timeout_s:g}s or went away (one stopped, crashed or hangs: see its output); "
                  f"{kept}; {str(e).strip().splitlines()[0][:200]}", file=sys.stderr, flush=True)
            sys.stdout.flush()
            # exit now: the group is broken, and tearing it down (or the interpreter's exit, which
            # joins its
            # threads) can wait forever on an operation a lost peer never answers
            os._exit(2)
        finally:
            dist.destroy_process_group()

    def all_reduce(self, t, op=dist.ReduceOp.SUM):
        if self.ddp:
            dist.all_reduce(t, op=op)
        return t

    def agree(self, *flags):
        """The flags OR-ed over the processes, so that every process stops at the same point."""
        if not self.ddp:
            return [bool(f) for f in flags]
        t = torch.tensor([bool(f) for f in flags], dtype=torch.int64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=self.ctrl)
        return [bool(f) for f in t.tolist()]

    def gather(self, obj):
        """[obj of rank 0, obj of rank 1, ...] in every process."""
        out = [obj] * self.world
        if self.ddp:
            dist.all_gather_object(out, obj)
        return out


def micro_steps(accumulation, world):
    """Micro-steps of each process per iteration. gradient_accumulation_steps is global, divided among
    the processes; where it does not divide (1 over 8 GPUs) each process does ceil(A / N), so an
    iteration holds at least the micro-batches the config asks for, and then more tokens."""
    return -(-accumulation // world)


# -----------------------------------------------------------------------------
# stopping: signals, budgets, the clock

class StopSignals:
    """
    SIGINT / SIGTERM while training: the first is acknowledged at once and noted (the loop finishes
    its step, or cuts an evaluation short, then saves and exits); a second acts as it usually does
    (Ctrl-C: KeyboardInterrupt, exit code 130). Only the main thread can take signals. While
    `cut_short` is set (a single-process evaluation, which changes nothing) the first signal also
    raises CutShort at once, even inside one long batch (an 85M model's takes a minute on a CPU).
    """

    class CutShort(Exception):
        pass

    def __init__(self, *, announce):
        self.received, self.previous, self.announce = [], {}, announce
        self.cut_short = False

    def install(self):
        if threading.current_thread() is threading.main_thread():
            self.previous = {s: signal.signal(s, self.on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
            if SWEEP_DIED is not None:  # the sweep that started this run died: a stop, never an abort
                self.previous[SWEEP_DIED] = signal.signal(SWEEP_DIED, self.on_sweep_died)

    def restore(self, signals=None):
        for s, h in self.previous.items():
            if signals is None or s in signals:
                signal.signal(s, h)

    def on_sweep_died(self, signum, frame):
        """The parent-death signal comes once per thread of the dying sweep: the first stops the run
        (saved, as after SIGTERM), the others change nothing."""
        if not self.received:
            if self.announce:
                print("\nthe sweep that started this run has died: stopping after this step and saving a "
                      "checkpoint", file=sys.stderr, flush=True)
            self.on_signal(signal.SIGTERM, frame)

    def on_signal(self, signum, frame):
        self.received.append(signum)
        self.restore((signal.SIGINT, signal.SIGTERM))
        if self.announce:
            again = 'Ctrl-C again' if signum == signal.SIGINT else 'a second signal'
            print(f"\n{signal.Signals(signum).name}: stopping after this step and saving a "
                  f"checkpoint; {again} to abort", file=sys.stderr, flush=True)
        if self.cut_short:
            self.cut_short = False
            raise self.CutShort

    def __bool__(self):
        return bool(self.received)

    def exit(self, where, *, announce):
        """Say which signal stopped the run `where`, and exit with 128 + its number, as a shell does."""
        signum = (self.received or [signal.SIGTERM])[0]  # or another process's signal
        if announce:
            print(f"stopped by {signal.Signals(signum).name} {where}")
        raise SystemExit(128 + signum)


def duration(seconds):
    """4.2s, 42s, 1m32s, 5h03m, 3d04h: a duration at the precision an ETA deserves."""
    if seconds < 9.95:
        return f"{seconds:.1f}s"
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


class Progress:
    """
    The run's clock and budgets: which budget ends the run first, whether it has (`stop_reason`),
    whether an evaluation is due, and the progress line with its ETA. Iterations, tokens and FLOPs
    grow together, so each of those budgets is an iteration to reach; max_seconds counts train_s,
    the clock's seconds less the pauses (evaluations, checkpoints). The ETA adds the evaluations
    still to come.
    """

    def __init__(self, cfg, *, iter_num, tokens_seen, tokens_per_iter, flops_per_token, train_s=0.0, elapsed_s=0.0):
        ends = [(cfg.max_iters, 'max_iters')]
        for budget, tokens in (('max_tokens', cfg.max_tokens), ('max_flops', cfg.max_flops / flops_per_token)):
            if tokens:
                ends.append((iter_num + max(math.ceil((tokens - tokens_seen) / tokens_per_iter), 0), budget))
        self.end_iter, self.budget = min(ends)
        self.max_seconds, self.eval_interval = cfg.max_seconds, cfg.eval_interval
        self.eval_s = 0.0  # seconds per evaluation and checkpoint: estimated at start, then measured
        self.train_s0, self.elapsed_s0, self.t0, self.pause_s = train_s, elapsed_s, time.time(), 0.0

    def start(self):
        """Start the clock: train_s and elapsed_s count from here, on top of a resumed run's."""
        self.t0, self.pause_s = time.time(), 0.0

    @property
    def elapsed_s(self):
        return self.elapsed_s0 + time.time() - self.t0

    @property
    def train_s(self):
        return self.train_s0 + time.time() - self.t0 - self.pause_s

    @contextmanager
    def paused(self, evaluation=False):
        """Time inside the block is not training time; an evaluation's (with its checkpoint) is what the
        ETA counts for each one still to come."""
        t0 = time.time()
        try:
            yield
        finally:
            self.pause_s += time.time() - t0
            self.eval_s = time.time() - t0 if evaluation else self.eval_s

    def stop_reason(self, iter_num, out_of_time, signalled):
        """Why the run stops before iteration `iter_num`, or None: a signal first, then the budget reached."""
        if signalled:
            return 'signal'
        if iter_num >= self.end_iter:
            return self.budget
        return 'max_seconds' if out_of_time else None

    def out_of_time(self):
        return bool(self.max_seconds) and self.train_s >= self.max_seconds

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
        evals = end // every - (done - 1) // every + (end % every != 0)  # evals at iterations done..end
        return iters * s_per_iter + evals * self.eval_s

    def status(self, iter_num, train_s, s_per_iter):
        """'iter 250/2000 (12%)', or 'iter 250 (41% of max_seconds)', and 'ETA 1m32s' after step iter_num
        (counted from 0, as log.jsonl counts them): the line counts the steps done, 250 after step 249."""
        done = iter_num + 1
        iters, budget = self.left(done, train_s, s_per_iter)
        if budget == 'max_seconds':
            where = f"iter {done} ({100 * min(train_s / self.max_seconds, 1):.0f}% of max_seconds)"
        else:
            of = '' if budget == 'max_iters' else f" of {budget}"
            where = f"iter {done}/{self.end_iter} ({100 * min(done / max(self.end_iter, 1), 1):.0f}%{of})"
        return where, f"ETA {duration(self.seconds_left(done, train_s, s_per_iter))}"

    def start_estimate(self, micro_s, *, accum, eval_batches, iter_num, train_s, device_type):
        """From one timed micro-step: the eval estimate, and a warning line when the run would take
        hours on a CPU (a bare `python train.py` there: 85M parameters, 491,520 tokens per iteration)."""
        self.eval_s = eval_batches * micro_s / 3  # forward only: about a third of forward + backward
        s_per_iter = micro_s * accum
        total = self.seconds_left(iter_num, train_s, s_per_iter)
        if device_type == 'cuda' or total < 3600:
            return None
        iters, budget = self.left(iter_num, train_s, s_per_iter)
        return (f"note: this run would take about {duration(total)} on the {device_type.upper()} "
                f"({s_per_iter:.2f}s per iteration, {int(iters):,} iterations to {budget}, evals "
                "included); for a first run try `python train.py configs/quick.py`, or lower "
                "max_iters, or use a GPU")


# -----------------------------------------------------------------------------
# a loss that is not finite

class NonFiniteLoss(UsageError):
    """The loss became nan or inf: the run stops with one line and saves nothing."""


class NonFiniteWatch:
    """
    Notes the first iteration whose loss is nan or inf without waiting for the GPU (one tensor op
    per step); check() reads it, agreed over the processes, at steps that sync anyway (log, eval,
    save), and stops the run with one line naming the iteration and what to try.
    """

    def __init__(self, cfg, device, dist):
        self.cfg, self.dist = cfg, dist
        self.first = torch.full((), math.inf, device=device)  # inf: no bad loss yet

    def step(self, loss, iter_num):
        self.first = torch.where(torch.isfinite(loss), self.first, self.first.clamp(max=iter_num))

    def check(self, iter_num, *values, model=None, kept=''):
        """Stop if a loss so far, one of `values` or (with `model`) a weight is not finite: a step on inf
        gradients spoils the weights before any loss shows it."""
        first = self.dist.all_reduce(self.first.clone(), dist.ReduceOp.MIN).item()
        ok = first == math.inf and all(math.isfinite(v) for v in values)
        if model is not None:
            ok = ok and all(torch.isfinite(p).all() for p in model.parameters())
        if not ok:
            at = int(first) if math.isfinite(first) else iter_num
            raise NonFiniteLoss(f"loss is not finite at iter {at}: stopped without saving{kept}; "
                                f"try {non_finite_advice(self.cfg)}")


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
