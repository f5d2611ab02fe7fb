"""
Train one of model.py's architectures on the token shards prepare.py writes.

    python prepare.py                                   # char-level pydoc corpus -> data/pydoc_char
    python train.py configs/quick.py                    # about a minute on 2 CPU cores
    python train.py configs/gmlp.py --max_iters=100     # any key can be overridden as --key=value
    torchrun --standalone --nproc_per_node=8 train.py configs/gpt.py  # DDP: GPUs or CPU processes

nanoGPT's loop (DDP when torchrun sets RANK, autocast, the all-reduce on the last micro-step only,
the next batch fetched during the forward pass), made exact for comparisons: every batch is a pure
function of (seed, iteration, global micro-step), so N processes draw the batches one process draws
and a resumed run those of a straight one; budgets of tokens, FLOPs or seconds; Ctrl-C saves a
checkpoint that resumes bitwise. Reading order: the settings and the lr schedule, precision,
batches, the checkpoint, out_dir's files, when to stop, main() and the loop in four steps, the one
training step. guards.py guards a run: processes, signals, refusals, out_dir held, prev/.
"""
import os
import signal

if __name__ == "__main__":  # Ctrl-C while torch loads (seconds): exit 130, quietly
    signal.signal(signal.SIGINT, lambda *_: os._exit(130))

import contextlib
import dataclasses
import datetime
import json
import logging
import math
import random
import shlex
import sys
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from configurator import (UsageError, atomic_write, parse_config, quick_start, read_log, require,
                          run_main, write_error)
from dataset import fingerprint, open_dataset
from guards import (CHECKPOINT_FORMAT, DTYPES, Signals, autocast_context, busy, check_resumable,
                    ddp_failed, duration, hold_run, kept, load_checkpoint, out_of_memory,
                    peak_flops, resolve_device, resolve_dtype, start_over)
from model import GPT, GPTConfig, check_optimizer, matched_width

SCHEDULES = ('cosine', 'wsd')


@dataclass
class TrainConfig(GPTConfig):
    """Every default of a run: the model's GPTConfig fields plus nanoGPT's training keys."""
    # I/O
    out_dir: str = 'out'               # where ckpt.pt, log.jsonl and config.json go
    data_dir: str = 'data/pydoc_char'  # what a plain `python prepare.py` writes
    init_from: str = 'scratch'         # 'scratch' or 'resume' (from out_dir/ckpt.pt)
    new_data: bool = False             # resume on other data than the checkpoint's (fine-tuning)
    eval_interval: int = 2000          # iterations between evaluations (and checkpoints)
    eval_iters: int = 200              # batches per split and evaluation, the same ones every time
    eval_seed: int = 0                 # draws the eval batches, one val set for all; -1: the seed's
    log_interval: int = 1              # iterations between progress lines / log rows
    always_save_checkpoint: bool = True  # else save at evals only when val loss improves
    # data
    vocab_size: int = 0                # 0 = the data's (meta.json); for raw llm.c shards 50304
    batch_size: int = 12               # micro-batch size of one process
    gradient_accumulation_steps: int = 40  # global: divided among the processes
    # optimizer; learning rate: linear warmup, then cosine decay (or warmup-stable-decay)
    optimizer: str = 'adamw'           # 'adamw', or 'muon' (hidden 2-D matrices; AdamW the rest)
    learning_rate: float = 6e-4        # peak learning rate, after warmup
    max_iters: int = 600000            # stop after this many optimizer steps
    weight_decay: float = 1e-1         # AdamW decoupled decay of >= 2-D weights
    beta1: float = 0.9                 # AdamW first-moment decay
    beta2: float = 0.95                # AdamW second-moment decay
    grad_clip: float = 1.0             # 0 = no clipping
    decay_lr: bool = True              # warmup + decay (lr_schedule); False = constant rate
    lr_schedule: str = 'cosine'        # 'cosine' to min_lr, or 'wsd': constant, then a cooldown
    cooldown_frac: float = 0.2         # wsd: the cooldown's share of lr_decay_iters (1 - sqrt)
    warmup_iters: int = 2000           # linear warmup steps
    lr_decay_iters: int = 600000       # ~ max_iters per Chinchilla
    min_lr: float = 6e-5               # ~ learning_rate / 10 per Chinchilla
    # budgets for comparing architectures at equal tokens or equal training time; 0 = no limit
    max_tokens: int = 0                # stop after this many training tokens (equal-token budget)
    max_seconds: float = 0.0           # counts train_s: time in training steps, evals excluded
    max_flops: float = 0.0             # stop at this many training FLOPs (tokens x flops_per_token)
    # system
    device: str = 'auto'               # 'auto' (cuda, mps, cpu), 'cpu', 'cuda', 'cuda:1', 'mps'
    dtype: str = 'auto'                # 'auto' (bf16, fp16 on old GPUs; float32 on CPU) or DTYPES
    compile: bool = False              # torch.compile the model (needs a C++ compiler on CPU)
    peak_flops: float = 0.0            # for MFU; 0 = the GPU's dense peak for dtype; none on CPU
    ddp_timeout_s: float = 1800.0      # DDP: a process waiting this long on another stops the run
    seed: int = 1337                   # the init, the batches and dropout: same seed = same run

    def __post_init__(self):
        for name, allowed in (('init_from', ('scratch', 'resume')), ('dtype', DTYPES),
                              ('lr_schedule', SCHEDULES)):
            require(self, name, lambda v: v in allowed, f"is not one of {', '.join(allowed)}")
        check_optimizer(self.optimizer)
        require(self, 'batch_size gradient_accumulation_steps eval_interval eval_iters '
                'log_interval', lambda v: v >= 1, "must be at least 1")
        require(self, 'max_iters warmup_iters lr_decay_iters max_tokens vocab_size',
                lambda v: v >= 0, "must not be negative")
        require(self, 'seed', lambda v: 0 <= v < 2**63, "must be in [0, 2**63)")  # torch's: 64 bits
        require(self, 'eval_seed', lambda v: -1 <= v < 2**63, "must be -1 or in [0, 2**63)")
        require(self, 'max_seconds max_flops weight_decay grad_clip min_lr peak_flops',
                lambda v: 0 <= v < math.inf, "must be a finite number, not negative")
        require(self, 'learning_rate', lambda v: 0 < v < math.inf, "must be a positive number")
        require(self, 'ddp_timeout_s', lambda v: 0 < v < math.inf,
                "must be a positive number of seconds")
        require(self, 'beta1 beta2', lambda v: 0 <= v < 1, "must be in [0, 1)")
        if self.min_lr > self.learning_rate:
            raise ValueError(f"min_lr={self.min_lr} exceeds learning_rate={self.learning_rate}")
        require(self, 'cooldown_frac', lambda v: 0 < v <= 1, "must be in (0, 1]")
        if self.decay_lr and self.lr_decay_iters <= self.warmup_iters:
            raise ValueError(f"lr_decay_iters={self.lr_decay_iters} must exceed warmup_iters="
                             f"{self.warmup_iters} (or set decay_lr=False for a constant rate)")
        start = self.cooldown_start()
        if self.decay_lr and self.lr_schedule == 'wsd' and start < self.warmup_iters:
            raise ValueError(f"lr_schedule='wsd': its cooldown (the last {self.cooldown_frac:g})"
                             f" starts at iter {start}, inside warmup_iters={self.warmup_iters}: "
                             "lower warmup_iters or cooldown_frac")
        # the model's own checks; vocab_size 0 means "the data's", known only once data_dir is read
        # (and with it whether match_params can match: train.py checks that once it knows)
        model = GPTConfig(**{**self.model_args(), 'vocab_size': self.vocab_size or 1})
        if self.vocab_size and self.match_params:
            matched_width(model)

    def model_args(self):  # the GPTConfig fields of this config, as a dict
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(GPTConfig)}

    def val_seed(self):
        """The evaluation batches' seed: eval_seed, one val set for every run; -1: the run's."""
        return self.seed if self.eval_seed == -1 else self.eval_seed

    def cooldown_start(self, n=None):  # wsd: the iteration where the cooldown begins (of n iterations)
        n = n or self.lr_decay_iters
        return n - round(self.cooldown_frac * n)

    def lr_at(self, it):
        """Learning rate at iteration `it`: linear warmup, then down to min_lr at lr_decay_iters,
        by a cosine over the whole run, or ('wsd') constant and then a cooldown over its end."""
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


# -----------------------------------------------------------------------------
# processes' share of a step

def micro_steps(accumulation, world):
    """A process's share of gradient_accumulation_steps (global), rounded up: 1 over 8 GPUs is 1."""
    return -(-accumulation // world)


# -----------------------------------------------------------------------------
# batches: every one a pure function of (seed, key)

class Batches:
    """
    Random windows of block_size + 1 tokens, uniform over every window of every (memory-mapped)
    shard. Batch `key` is a pure function of (seed, *key): any process draws any batch without the
    ones before it (DDP ranks, resumed runs), and the sampler has no state to save. Keys: (0,
    iteration, global micro-step) for training, (1, k) for the k-th evaluation batch.
    """

    def __init__(self, shards, *, block_size, batch_size, seed, device, check_vocab=0):
        self.paths, self.shards = zip(*shards)  # (path, memory-mapped tokens) of each shard
        self.block_size, self.batch_size, self.seed = block_size, batch_size, seed
        self.device, self.check_vocab = device, check_vocab  # ids >= it: refused
        self.starts = np.array([max(len(s) - block_size, 0) for s in self.shards])  # windows
        self.ends = np.cumsum(self.starts)
        if self.ends[-1] == 0:
            split = os.path.basename(self.paths[0]).partition('_')[0]  # train_*.bin, val_*.bin
            more = ' (or a larger --val_fraction)' if split == 'val' else ''
            raise UsageError(f"{os.path.dirname(self.paths[0])}: the {split} split holds no window "
                             f"of block_size + 1 = {block_size + 1} tokens (its longest shard: "
                             f"{max(len(s) for s in self.shards):,}); lower block_size, or prepare "
                             f"more text{more}")

    def get(self, *key):
        rng = np.random.default_rng([self.seed, *key])
        pos = rng.integers(self.ends[-1], size=self.batch_size)  # window index over all shards
        shard = np.searchsorted(self.ends, pos, side='right')
        start = pos - (self.ends[shard] - self.starts[shard])
        T = self.block_size
        rows = [self.shards[s][i:i + T + 1] for s, i in zip(shard, start)]
        xy = np.stack(rows).astype(np.int64)
        if self.check_vocab and xy.max() >= self.check_vocab:  # cheap: one small batch
            bad = next(s for s, row in zip(shard, rows) if row.max() >= self.check_vocab)
            meta = os.path.join(os.path.dirname(self.paths[bad]), 'meta.json')
            fix = (f"{meta} does not match its shards: rerun prepare.py" if os.path.exists(meta)
                   else "pass a larger --vocab_size (GPT-2 shards: 50304)")
            raise UsageError(f"{self.paths[bad]} holds token id {int(xy.max())} >= "
                             f"vocab_size={self.check_vocab}; {fix}")
        xy = torch.from_numpy(xy)  # (B, T + 1)
        x, y = xy[:, :-1].contiguous(), xy[:, 1:].contiguous()  # (B, T) inputs, next-token targets
        if self.device.startswith('cuda'):  # pinned memory: the copy overlaps with compute
            return (x.pin_memory().to(self.device, non_blocking=True),
                    y.pin_memory().to(self.device, non_blocking=True))
        return x.to(self.device), y.to(self.device)


def run_batches(cfg, shards):
    """Training's batches, from the run's seed; each split's evaluation batches, from val_seed()."""
    shape = dict(block_size=cfg.block_size, batch_size=cfg.batch_size, device=cfg.device,
                 check_vocab=cfg.vocab_size)
    scored = {s: Batches(shards[s], seed=cfg.val_seed(), **shape) for s in ('train', 'val')}
    return Batches(shards['train'], seed=cfg.seed, **shape), scored


def bits_per_byte(meta, split, loss):
    """Nats per token as bits per byte of text (loss / ln 2 x tokens per byte, which prepare.py
    records): char, byte and BPE runs on one scale. None for raw shards."""
    ratio = ((meta or {}).get('tokens_per_byte') or {}).get(split)
    return None if ratio is None else loss / math.log(2) * ratio


# -----------------------------------------------------------------------------
# the checkpoint: what it holds, and how a run resumes exactly

@dataclass
class RunState:
    """Where a run stands: saved in every checkpoint, restored on resume."""
    iter_num: int = 0                 # optimizer steps taken
    tokens_seen: int = 0              # training tokens, over every process
    best_val_loss: float = math.inf
    train_s: float = 0.0              # seconds in training steps (evaluations excluded)
    elapsed_s: float = 0.0            # wall-clock seconds
    evaluated_at: int = None          # the iteration of the last evaluation that ran to the end
    saved_at: int = None              # the iteration of the last checkpoint: none is written twice
    finished: bool = False            # the run reached its budget (no signal or crash stopped it)


def make_checkpoint(model, optimizer, scaler, state, *, cfg, meta, rng):
    """The dict ckpt.pt holds: the uncompiled model's weights and its config, so it loads without
    the config file; the optimizer and the RunState, so it resumes; `rng`: every process's
    generators, and where the batches stand (they are drawn by (seed, iteration, micro-step))."""
    for s in rng:
        s['data'] = {'seed': cfg.seed, 'iter': state.iter_num}
    return {'format_version': CHECKPOINT_FORMAT, 'model': model.state_dict(),
            'model_args': cfg.model_args(), 'config': dataclasses.asdict(cfg), 'meta': meta,
            'optimizer': optimizer.state_dict(), 'scaler': scaler.state_dict(),
            'iter_num': state.iter_num, 'tokens_seen': state.tokens_seen,
            'best_val_loss': state.best_val_loss, 'train_s': state.train_s,
            'elapsed_s': state.elapsed_s, 'rng': rng, 'finished': state.finished,
            'evaluated': state.evaluated_at == state.iter_num}  # False: resuming evaluates first


def rng_state():
    """Every random generator of this process, in types torch.load(weights_only=True) accepts."""
    name, keys, pos, has_gauss, gauss = np.random.get_state()
    return {'torch': torch.get_rng_state(),
            'cuda': torch.cuda.get_rng_state() if torch.cuda.is_initialized() else None,
            'numpy': (name, keys.tolist(), pos, has_gauss, gauss), 'python': random.getstate()}


def set_rng_state(state):
    torch.set_rng_state(state['torch'])
    if state['cuda'] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state(state['cuda'])
    name, keys, pos, has_gauss, gauss = state['numpy']
    np.random.set_state((name, np.array(keys, dtype=np.uint32), pos, has_gauss, gauss))
    random.setstate(state['python'])


def restore(ckpt, model, optimizer, scaler, *, cfg, procs):
    """Load a checkpoint into the model, optimizer and scaler, and the random generators when as
    many processes resume as saved it; its RunState. The dict is emptied (no second copy kept)."""
    try:  # (a checkpoint another train.py wrote, nanoGPT's say, or a corrupt one: one line)
        model.load_state_dict(ckpt['model'])
        optimizer.load_state_dict(ckpt['optimizer'])
        if ckpt['scaler'] and scaler.is_enabled():  # empty when saved without float16
            scaler.load_state_dict(ckpt['scaler'])
        it, evaluated = ckpt['iter_num'], ckpt.get('evaluated', True)  # False: its eval was cut
        state = RunState(iter_num=it, tokens_seen=ckpt['tokens_seen'], saved_at=it,  # short
                         best_val_loss=ckpt['best_val_loss'], train_s=ckpt.get('train_s', 0.0),
                         elapsed_s=ckpt.get('elapsed_s', 0.0),
                         evaluated_at=it if evaluated else None)
        rng = ckpt['rng']
    except (RuntimeError, ValueError, KeyError) as e:
        raise UsageError(f"{cfg.out_dir}/ckpt.pt cannot resume here: it was not written by this "
                         f"train.py, or is corrupt ({' '.join(str(e).split())[:200]}); retrain "
                         "it, or restore a good copy") from None
    if procs.master:
        due = not evaluated and it % cfg.eval_interval == 0
        print(f"resuming from iter {it} ({state.tokens_seen:,} tokens)"
              + (", its evaluation first (the run stopped before it)" if due else ""))
        if len(rng) != procs.world or rng[0]['data']['seed'] != cfg.seed:
            print(f"note: {procs.world} process(es) and seed {cfg.seed} resume a checkpoint of "
                  f"{len(rng)} and {rng[0]['data']['seed']}: not the batches or dropout masks of "
                  "a straight run")
    if len(rng) == procs.world:
        set_rng_state(rng[procs.rank])
    ckpt.clear()
    return state


# -----------------------------------------------------------------------------
# out_dir's files, the master's to write (guards.py holds out_dir and keeps the run before: prev/)

def open_log(folder, cfg, start_iter, rows=()):
    """log.jsonl in `folder`: on resume, its rows from before the checkpoint; then `rows`."""
    path, old = os.path.join(folder, 'log.jsonl'), []
    if cfg.init_from == 'resume' and os.path.exists(path):  # an eval row at start_iter came before
        old = [r for r in read_log(path)  # the checkpoint, the step rows from there on after it
               if r['iter'] < start_iter or r['iter'] == start_iter and 'val_loss' in r]
    atomic_write(path, lambda f: f.write(''.join(json.dumps(r) + '\n' for r in old).encode()))
    log = open(path, 'a')
    for row in rows:
        write_row(log, row)
    return log


def write_row(log, row):
    """One JSON object per line, flushed; a number that is not finite is null (NaN is not JSON)."""
    row = {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in row.items()}
    try:
        log.write(json.dumps(row) + '\n')
        log.flush()
    except OSError as e:
        raise write_error(log.name, e) from None


def save(raw_model, optimizer, scaler, state, cfg, meta, procs):
    """ckpt.pt, whole or not at all (a temp file renamed into place): the master's."""
    if not all(torch.isfinite(p).all() for p in raw_model.parameters()):  # inf gradients spoil them
        raise UsageError(f"a weight is not finite at iter {state.iter_num}: stopped without saving")
    rng = procs.gather(rng_state())
    if procs.master:
        ckpt = make_checkpoint(raw_model, optimizer, scaler, state, cfg=cfg, meta=meta, rng=rng)
        path = os.path.join(cfg.out_dir, 'ckpt.pt')
        atomic_write(path, lambda f: torch.save(ckpt, f))
        print(f"saved {path} at iter {state.iter_num}")
    state.saved_at = state.iter_num


# -----------------------------------------------------------------------------
# processes: one, or the N that torchrun started (DDP)

class Distributed:
    """One process, or the N that torchrun started (it sets RANK, LOCAL_RANK, WORLD_SIZE): every
    collective the loop needs, a no-op with one process. The master (rank 0) prints and saves."""

    def __init__(self):
        self.ddp = 'RANK' in os.environ
        self.rank, self.world = int(os.environ.get('RANK', 0)), int(os.environ.get('WORLD_SIZE', 1))
        self.local_rank, self.master = int(os.environ.get('LOCAL_RANK', 0)), self.rank == 0
        self.ctrl = None  # a CPU (gloo) group for stop decisions, when the data group is NCCL

    def device(self, device):
        return f'cuda:{self.local_rank}' if self.ddp and device.startswith('cuda') else device

    @contextlib.contextmanager
    def running(self, device, timeout_s, out_dir):
        """The process group for the block; a process waiting timeout_s on the others (one stopped,
        crashed or hangs) ends with one line naming its rank (guards.ddp_failed)."""
        if not self.ddp:
            yield self
            return
        # imported before the group exists: imported later (DDP does), it keeps the group alive past
        # destroy_process_group; its gloo threads, dying later, abort a finished rank now and then
        import torch.distributed.nn.functional as _  # noqa: F401
        cuda, timeout = device.startswith('cuda'), datetime.timedelta(seconds=timeout_s)
        dist.init_process_group(backend='nccl' if cuda else 'gloo', timeout=timeout)
        try:
            if cuda:
                torch.cuda.set_device(device)
                self.ctrl = dist.new_group(backend='gloo', timeout=timeout)
            try:
                yield self
            except SystemExit:  # a stop every process agreed on (a signal): it ends as a run does
                dist.barrier()
                raise
            dist.barrier()  # none tears down its group while another still uses it (and a gloo
            # thread finishing the last gather is not joined at exit while it waits for the GIL)
        except RuntimeError as e:
            ddp_failed(e, self, timeout_s, out_dir)  # a timeout or a lost peer: one line, exit 2
            raise
        finally:
            dist.destroy_process_group()

    def all_reduce(self, t, op=dist.ReduceOp.SUM, group=None):
        if self.ddp:
            dist.all_reduce(t, op=op, group=group)
        return t

    def agree(self, *flags):
        """The flags OR-ed over the processes, so that every process stops at the same point."""
        t = torch.tensor([bool(f) for f in flags], dtype=torch.int64)
        return [bool(f) for f in self.all_reduce(t, dist.ReduceOp.MAX, self.ctrl).tolist()]

    def gather(self, obj):
        """[obj of rank 0, obj of rank 1, ...] in every process."""
        out = [obj] * self.world
        if self.ddp:
            dist.all_gather_object(out, obj)
        return out


# -----------------------------------------------------------------------------
# when the run stops, and the progress line

def budget_end(cfg, state, tokens_per_iter, flops_per_token):
    """(the iteration the run stops before, the budget that ends it; max_seconds counts train_s)."""
    ends = [(cfg.max_iters, 'max_iters')]
    for budget, tokens in (('max_tokens', cfg.max_tokens),
                           ('max_flops', cfg.max_flops / flops_per_token)):
        if tokens:
            iters = max(math.ceil((tokens - state.tokens_seen) / tokens_per_iter), 0)
            ends.append((state.iter_num + iters, budget))
    return min(ends)


def progress(cfg, state, end, s_per_iter):
    """('iter 250/2000 (12%)', 'ETA 1m32s') after step state.iter_num (counted from 0, as log.jsonl
    counts them: 250 steps done), or 'iter 250 (41% of max_seconds)' when time ends the run first;
    the ETA is seconds per iteration times the iterations left."""
    done, (end_iter, budget) = state.iter_num + 1, end
    left = max(end_iter - done, 0) * s_per_iter
    if cfg.max_seconds and cfg.max_seconds - state.train_s < left:
        left = max(cfg.max_seconds - state.train_s, 0)
        where = f"iter {done} ({100 * min(state.train_s / cfg.max_seconds, 1):.0f}% of max_seconds)"
    else:
        of = '' if budget == 'max_iters' else f" of {budget}"
        where = f"iter {done}/{end_iter} ({100 * min(done / max(end_iter, 1), 1):.0f}%{of})"
    return where, f"ETA {duration(left)}"


# -----------------------------------------------------------------------------
# the run

def main(argv):
    if not argv:  # nanoGPT's bare train.py is GPT-2 124M for days: say what to run instead
        raise UsageError(f"give a config: {quick_start(prepare=False)} (about a minute on a CPU), "
                         "or one per architecture in configs/; --help lists every key")
    cfg = parse_config(TrainConfig, argv, doc=__doc__)
    procs = Distributed()  # one process, or the ones torchrun started
    device = procs.device(resolve_device(cfg.device))
    cfg = dataclasses.replace(cfg, device=device,
                              dtype=resolve_dtype(cfg.dtype, torch.device(device).type))
    meta, shards = open_dataset(cfg.data_dir)
    with procs.running(device, cfg.ddp_timeout_s, cfg.out_dir):
        # out_dir held, and what a killed run left there settled, before anything reads it
        release = hold_run(cfg.out_dir) if procs.master else (lambda: None)
        try:
            return train(*resume_or_not(cfg, procs, meta), procs, meta, shards, argv)
        except (RuntimeError, MemoryError) as e:  # the model or a first batch too large for memory
            raise out_of_memory(e, cfg) or e
        finally:
            release()


def resume_or_not(cfg, procs, meta):
    """(cfg with the model's vocabulary, the checkpoint to resume or None, the log row of a resume
    on other data or None), once every check passed."""
    if len(set(procs.gather(fingerprint(meta)))) > 1:  # (a prepare.py swapped it between reads)
        raise UsageError(f"{cfg.data_dir} changed while the processes read it: rerun")
    path = os.path.join(cfg.out_dir, 'ckpt.pt')
    ckpt = load_checkpoint(path) if cfg.init_from == 'resume' else None
    # the model's vocabulary is the data's unless set larger (e.g. padded to a multiple of 64)
    vocab = (cfg.vocab_size or (ckpt and ckpt['model_args'].get('vocab_size'))
             or (meta and meta['vocab_size']) or 50304)  # GPT-2's 50257 padded: raw llm.c shards
    if meta and vocab < meta['vocab_size']:
        source = ("the --vocab_size given; leave it at 0 to use the data's" if cfg.vocab_size else
                  f"the checkpoint's in {cfg.out_dir}; resume on the data it was trained on")
        raise UsageError(f"vocab_size={vocab} is smaller than the data's {meta['vocab_size']} "
                         f"({cfg.data_dir}/meta.json): {source}")
    try:  # (the checks that need the vocabulary: match_params at this shape)
        cfg = dataclasses.replace(cfg, vocab_size=vocab)
    except ValueError as e:
        raise UsageError(str(e)) from None
    switch = ckpt and check_resumable(ckpt, cfg, meta, path)
    if procs.master:
        print("config: " + ' '.join(f"{k}={v!r}" for k, v in dataclasses.asdict(cfg).items()))
        if meta is None:
            print(f"note: no meta.json in {cfg.data_dir}: raw shards, vocab_size {vocab}")
    return cfg, ckpt, switch


def build(cfg, procs, ckpt):
    """The model three ways (raw_model: as built, saved and sized; model: compiled or not, as
    evaluated; trained: wrapped in DDP or not, as stepped), its optimizer and loss scaler, and the
    RunState: fresh, or from the checkpoint."""
    device_type = torch.device(cfg.device).type
    torch.manual_seed(cfg.seed)  # the same initial weights in every process and every run
    raw_model = GPT(GPTConfig(**cfg.model_args())).to(cfg.device)
    optimizer = raw_model.configure_optimizers(cfg.weight_decay, cfg.learning_rate,
                                               (cfg.beta1, cfg.beta2), device_type, cfg.optimizer)
    scaler = torch.amp.GradScaler(device_type, enabled=(cfg.dtype == 'float16'))  # float16 only
    torch.manual_seed(cfg.seed + 1 + procs.rank)  # dropout masks: a stream in each process
    state = (RunState(saved_at=0) if ckpt is None  # (a scratch run: nothing to save at iteration 0)
             else restore(ckpt, raw_model, optimizer, scaler, cfg=cfg, procs=procs))
    if device_type == 'cuda':
        torch.backends.cuda.matmul.allow_tf32 = True  # allow tf32 on matmul
        torch.backends.cudnn.allow_tf32 = True  # allow tf32 on cudnn
    if cfg.compile:  # its cache's warnings about entries cut short (recompiled) say nothing to do
        logging.getLogger('torch._inductor.codecache').setLevel(logging.ERROR)
    model = torch.compile(raw_model) if cfg.compile else raw_model
    trained = model if not procs.ddp else DDP(
        model, device_ids=[procs.local_rank] if device_type == 'cuda' else None)
    return (raw_model, model, trained), optimizer, scaler, state


def train(cfg, ckpt, switch, procs, meta, shards, argv):
    batches, scored = run_batches(cfg, shards)  # (a block_size the data cannot fill: said first)
    (raw_model, model, trained), optimizer, scaler, state = build(cfg, procs, ckpt)
    ctx = autocast_context(torch.device(cfg.device).type, cfg.dtype)
    accum = micro_steps(cfg.gradient_accumulation_steps, procs.world)  # this process's
    tokens_per_iter = procs.world * accum * cfg.batch_size * cfg.block_size
    flops_per_token = raw_model.flops_per_token()  # at block_size: the max_flops budget's unit
    end_iter, budget = end = budget_end(cfg, state, tokens_per_iter, flops_per_token)
    peak = peak_flops(cfg.device, cfg.peak_flops, cfg.dtype)  # for MFU: this GPU's, once

    def batch(m):  # this process's micro-step m of the step (m = accum: the next step's first)
        return batches.get(0, state.iter_num + m // accum, procs.rank * accum + m % accum)
    X, Y = batch(0)
    scored['val'].get(1, 0)  # the first eval batch's ids are checked too before out_dir changes
    log = None
    if procs.master:
        say_start(cfg, procs, accum, raw_model)
        if cfg.init_from == 'scratch':
            start_over(cfg.out_dir)  # the run there moves to prev/ (or goes): guards.py
        log = open_log(cfg.out_dir, cfg, state.iter_num, [switch] if switch else [])
        atomic_write(os.path.join(cfg.out_dir, 'config.json'),  # this start's settings, to read
                     lambda f: f.write(json.dumps(dataclasses.asdict(cfg), indent=1).encode()))
    t0, elapsed0, first_iter, first_s = time.time(), state.elapsed_s, state.iter_num, state.train_s
    scores = dict.fromkeys(('train_loss', 'val_loss', 'train_bpb', 'val_bpb'))  # the last eval's
    signals = Signals("stopping after this step (a checkpoint is saved if it trained)",
                      announce=procs.master, once=procs.ddp)  # (under torchrun: see Signals)
    try:
        signals.install()  # (a `with` would indent the loop once more)
        while True:
            # 1. stop? at a budget or a signal, decided together by every process
            state.elapsed_s = elapsed0 + time.time() - t0
            signalled, out_of_time = procs.agree(
                signals, cfg.max_seconds and state.train_s >= cfg.max_seconds)
            stop = ('signal' if signalled else budget if state.iter_num >= end_iter
                    else 'max_seconds' if out_of_time else None)
            state.finished = stop not in (None, 'signal')  # a checkpoint from here on is the last

            # 2. evaluate every eval_interval iterations and at the end (not after a signal, nor
            # twice at one iteration: a resumed one's), and save; a signal meanwhile stops the run
            if (stop != 'signal' and (state.iter_num % cfg.eval_interval == 0 or stop)
                    and state.evaluated_at != state.iter_num):
                losses = evaluate(model, scored, state.iter_num, cfg, meta, ctx, signals, procs)
                improved = losses['val_loss'] < state.best_val_loss
                record_eval(losses, state, cfg, log, flops_per_token)
                scores.update(losses)
                if state.iter_num > 0 and (improved or cfg.always_save_checkpoint):
                    save(raw_model, optimizer, scaler, state, cfg, meta, procs)
                if not stop and procs.agree(signals)[0]:
                    stop = 'signal'
            if stop:
                break

            # 3. one optimizer step over `accum` micro-batches (group lr: schedule x its lr_scale)
            t_step, lr = time.time(), cfg.lr_at(state.iter_num)
            for group in optimizer.param_groups:
                group['lr'] = lr * group.get('lr_scale', 1.0)  # (older checkpoints: none)
            loss_sum, (X, Y) = train_step(trained, optimizer, scaler, ctx, X, Y, batch,
                                          accum=accum, grad_clip=cfg.grad_clip)
            state.tokens_seen += tokens_per_iter

            # 4. log: a progress line and a row of log.jsonl
            logged = state.iter_num % cfg.log_interval == 0
            # the mean over micro-steps and processes; reading it waits for the step
            lossf = procs.all_reduce(loss_sum).item() / procs.world if logged else None
            now = time.time()
            if state.iter_num > first_iter:  # the first step (it compiles) is not training time
                state.train_s += now - t_step
            state.elapsed_s = elapsed0 + now - t0
            if logged:
                if not math.isfinite(lossf):  # (the weights: save() checks them)
                    raise UsageError(f"loss is not finite at iter {state.iter_num}: stopped "
                                     "without saving")
                steps = state.iter_num - first_iter  # the steps train_s counts (this process's)
                s_per_iter = (state.train_s - first_s) / steps if steps else now - t_step
                tokens_per_s = tokens_per_iter / s_per_iter
                row = {'iter': state.iter_num, 'loss': lossf, 'lr': lr, 'tokens': state.tokens_seen,
                       'flops': state.tokens_seen * flops_per_token, 'elapsed_s': state.elapsed_s,
                       'train_s': state.train_s, 'tokens_per_s': tokens_per_s,
                       'mfu': raw_model.estimate_mfu(tokens_per_s / procs.world, peak)}  # per GPU
                if procs.master:
                    print(progress_line(row, s_per_iter, cfg, state, end), flush=True)
                    write_row(log, row)
            state.iter_num += 1
        if state.saved_at != state.iter_num:  # the final state (also after a signal)
            save(raw_model, optimizer, scaler, state, cfg, meta, procs)
    except (UsageError, RuntimeError, MemoryError, OSError) as e:  # a failed write, a loss not
        why = (e if isinstance(e, UsageError) else  # finite, a step too large for memory: one line,
               UsageError(f"{e.filename}: {e.strerror}") if isinstance(e, OSError) and e.filename
               else out_of_memory(e, cfg))  # and what is kept
        if why is None:
            raise
        raise UsageError(f"{why}; {kept(cfg.out_dir)}") from None
    finally:
        signals.restore()
        if log is not None:
            with contextlib.suppress(OSError):  # (a full disk: the log holds what it holds)
                log.close()
    if stop == 'signal':
        stopped(signals.exit_code(), procs, state, argv)
    return ended(cfg, procs, state, stop, scores, flops_per_token, raw_model)


def stopped(code, procs, state, argv):
    """A signal stopped the run: say where, and the command that resumes it; exit 128 + the signal's
    number, as a shell does."""
    if procs.master:
        again = [sys.argv[0], *(a for a in argv if not a.startswith('--init_from=')),
                 '--init_from=resume']
        print(f"stopped by {signal.Signals(code - 128).name} "
              + (f"at iter {state.iter_num}; resume with: "
                 + ('python ' if procs.world == 1 else 'torchrun <its options> ') + shlex.join(again)
                 if state.iter_num else "before any training: nothing saved"))
    raise SystemExit(code)


def ended(cfg, procs, state, stop, scores, flops_per_token, raw_model):  # what main() returns
    if procs.master:
        print(f"done: {stop} at iter {state.iter_num}, {state.tokens_seen:,} tokens, "
              f"{state.train_s:.1f}s training")
    return {**scores, 'iter_num': state.iter_num, 'tokens': state.tokens_seen, 'stop': stop,
            'flops': state.tokens_seen * flops_per_token, 'best_val_loss': state.best_val_loss,
            'train_s': state.train_s, 'elapsed_s': state.elapsed_s,
            'ckpt_path': os.path.join(cfg.out_dir, 'ckpt.pt'), 'params': raw_model.get_num_params()}


def train_step(model, optimizer, scaler, ctx, X, Y, batch, *, accum=1, grad_clip=0.0):
    """One optimizer step over `accum` micro-batches: the loop's, bench.py's and probe.py's. X, Y:
    the first micro-batch; batch(m): micro-step m's, fetched while the forward pass runs on the
    GPU (m = accum: the next step's first). (The loss summed over micro-steps, the next X, Y.)"""
    loss_sum = torch.zeros((), device=X.device)
    for micro_step in range(accum):
        if isinstance(model, DDP):  # all-reduce the gradients on the last micro-step only
            model.require_backward_grad_sync = (micro_step == accum - 1)
        with ctx:
            _, loss = model(X, Y)
            loss = loss / accum  # the mean over micro-steps, as one big batch would have it
        X, Y = batch(micro_step + 1)
        scaler.scale(loss).backward()
        loss_sum += loss.detach()
    if grad_clip != 0.0:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    scaler.step(optimizer)  # skipped by the scaler if float16 gradients overflowed
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    return loss_sum, (X, Y)


@torch.no_grad()
def evaluate(model, batches, iter_num, cfg, meta, ctx, signals, procs):
    """The mean loss over the same eval_iters batches of each split every time, over the processes,
    in bits per byte too, and its standard error (how far this val sample's mean may sit from the
    split's). A signal meanwhile lets it finish (the loop then saves and stops)."""
    if procs.master:
        print(f"step {iter_num}: evaluating, {cfg.eval_iters} batches per split...", flush=True)
    t0, out, first = time.time(), {}, signals.first
    signals.first = "the evaluation in progress finishes, then the run stops (a checkpoint is saved if it trained)"
    model.eval()
    try:
        for split, data in batches.items():
            each = torch.zeros(cfg.eval_iters, device=cfg.device)  # each batch's loss
            for k in range(procs.rank, cfg.eval_iters, procs.world):  # this process's share
                X, Y = data.get(1, k)  # key (1, k): never a training key (0, iter, step)
                with ctx:
                    _, loss = model(X, Y)
                each[k] = loss.float()
            each = procs.all_reduce(each).tolist()
            n = len(each)
            out[f'{split}_loss'] = loss = sum(each) / n
            out[f'{split}_bpb'] = bits_per_byte(meta, split, loss)  # None for raw shards
            # s.e. of the mean = sd of the batch losses / sqrt(n); the batch losses let a report
            # say the same of a gap between two runs
            var = sum((v - loss) ** 2 for v in each) / (n - 1) if n > 1 else None
            out[f'{split}_se'] = None if var is None else math.sqrt(var / n)
        out['val_batches'] = [round(v, 5) for v in each]
    finally:
        model.train()
        signals.first = first
    if procs.master:
        se, bpb = out['val_se'], out['val_bpb']
        print(f"step {iter_num}: train loss {out['train_loss']:.4f}, val loss {out['val_loss']:.4f}"
              + (f" ± {se:.4f} (s.e. over {cfg.eval_iters} batches)" if se is not None else "")
              + (f" ({bpb:.4f} bits per byte)" if bpb is not None else "")
              + f" ({duration(time.time() - t0)})", flush=True)
    return out


def record_eval(losses, state, cfg, log, flops_per_token):
    """Check an evaluation and log it; the best val loss so far."""
    if not math.isfinite(losses['train_loss'] + losses['val_loss']):
        raise UsageError(f"loss is not finite at iter {state.iter_num}: stopped without saving")
    if log is not None:
        write_row(log, {'iter': state.iter_num, **losses, 'lr': cfg.lr_at(state.iter_num),
                        'tokens': state.tokens_seen, 'flops': state.tokens_seen * flops_per_token,
                        'elapsed_s': state.elapsed_s, 'train_s': state.train_s})
    state.best_val_loss = min(state.best_val_loss, losses['val_loss'])
    state.evaluated_at = state.iter_num


def say_start(cfg, procs, accum, model):
    """What the run is, in its first line (the master's), and a busy CPU (guards.busy)."""
    print(f"tokens per iteration: {procs.world * accum * cfg.batch_size * cfg.block_size:,} = "
          f"{procs.world} process(es) x {accum} micro-step(s) x batch_size {cfg.batch_size} x "
          f"block_size {cfg.block_size}; model: {model.get_num_params() / 1e6:.2f}M parameters"
          + ("; compiling it (torch.compile): the first step takes about a minute on a CPU, less on"
             " a GPU, and is not counted as training time" if cfg.compile else ""), flush=True)
    note = cfg.device == 'cpu' and busy(torch.get_num_threads(), "OMP_NUM_THREADS=1 before the "
                                        "command trains on one (its losses then differ from "
                                        "another thread count's in their last digits)")
    if note:
        print(note, flush=True)


def progress_line(row, s_per_iter, cfg, state, end):
    """The progress line of a log.jsonl row."""
    where, eta = progress(cfg, state, end, s_per_iter)
    return (f"{where}: loss {row['loss']:.4f}, lr {row['lr']:.2e}, {1000 * s_per_iter:.1f}ms/iter, "
            f"{row['tokens_per_s']:,.0f} tok/s"
            + (f", mfu {100 * row['mfu']:.2f}%" if row['mfu'] is not None else "") + f", {eta}")


if __name__ == "__main__":
    run_main(main)
