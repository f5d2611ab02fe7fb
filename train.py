"""
Train one of model.py's architectures on the token shards prepare.py writes.

    python prepare.py                                   # char-level pydoc corpus -> data/pydoc_char
    python train.py configs/quick.py                    # about a minute on 2 CPU cores
    python train.py configs/gmlp.py --max_iters=100     # any key can be overridden as --key=value
    torchrun --standalone --nproc_per_node=8 train.py configs/gpt.py     # DDP: GPUs, or CPU processes

The loop has nanoGPT's shape: DDP only when torchrun sets RANK, autocast (GradScaler for float16
only), gradient accumulation with the gradient all-reduce on the last micro-step only, the next
batch fetched while the forward pass runs. What it adds to make comparisons fair and exact:
- every batch is a pure function of (seed, iteration, global micro-step), so N processes with
  accumulation A/N each draw exactly the batches one process with accumulation A draws, and a
  resumed run draws those of a straight run (an A that N does not divide is rounded up to a
  multiple of N, and the start says so: an iteration then holds more tokens);
- stopping at equal tokens (max_tokens), FLOPs (max_flops) or training seconds (max_seconds,
  evals excluded); each progress line shows the position against that budget and an ETA;
- Ctrl-C (or SIGTERM) is acknowledged at once, cuts an evaluation short, saves and exits 130;
  the checkpoint resumes exactly; a second Ctrl-C aborts;
- out_dir/log.jsonl with tokens, train_s and MFU from each model's own FLOP count.
"""
import dataclasses
import datetime
import errno
import json
import math
import os
import random
import re
import signal
import sys
import threading
import time
from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from configurator import UsageError, atomic_write, parse_config, run_main
from model import GPT, OPTIMIZERS, GPTConfig
from prepare import find_shards, load_shard, read_meta

CHECKPOINT_FORMAT = 1
RESUME_KEYS = ('optimizer', 'scaler', 'iter_num', 'tokens_seen', 'best_val_loss', 'rng')
DTYPES = ('auto', 'float32', 'bfloat16', 'float16')
PTDTYPES = {'float32': torch.float32, 'bfloat16': torch.bfloat16, 'float16': torch.float16}


@dataclass
class TrainConfig(GPTConfig):
    """Every default of a run: the model's GPTConfig fields plus nanoGPT's training keys."""
    # I/O
    out_dir: str = 'out'               # where ckpt.pt, log.jsonl and config.json go
    data_dir: str = 'data/pydoc_char'  # what a plain `python prepare.py` writes
    init_from: str = 'scratch'         # 'scratch' or 'resume' (from out_dir/ckpt.pt)
    eval_interval: int = 2000          # iterations between evaluations (and checkpoints)
    eval_iters: int = 200              # batches per split and evaluation, the same ones every time
    log_interval: int = 1              # iterations between progress lines / log rows
    always_save_checkpoint: bool = True  # else save at evals only when val loss improves
    # data
    vocab_size: int = 0                # 0 = the data's (meta.json); for raw llm.c shards 50304
    batch_size: int = 12               # micro-batch size of one process
    gradient_accumulation_steps: int = 40  # global: divided among the processes
    # optimizer, linear warmup then cosine decay
    optimizer: str = 'adamw'           # 'adamw', or 'muon' (Muon for hidden 2-D matrices, AdamW for the rest)
    learning_rate: float = 6e-4        # peak learning rate, after warmup
    max_iters: int = 600000            # stop after this many optimizer steps
    weight_decay: float = 1e-1         # AdamW decoupled decay of >= 2-D weights
    beta1: float = 0.9                 # AdamW first-moment decay
    beta2: float = 0.95                # AdamW second-moment decay
    grad_clip: float = 1.0             # 0 = no clipping
    decay_lr: bool = True              # warmup + cosine decay; False = constant learning_rate
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
    peak_flops: float = 0.0            # for MFU; 0 = the GPU's bf16 peak by name (PEAK_TFLOPS), none on CPU
    ddp_timeout_s: float = 1800.0      # DDP: a process that waits this long on the others stops the run with a message
    seed: int = 1337                   # sets the init, the batches and dropout; same seed = same run

    def __post_init__(self):
        def choose(name, allowed):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name}={getattr(self, name)!r} is not one of {', '.join(allowed)}")
        choose('init_from', ('scratch', 'resume'))
        choose('dtype', DTYPES)
        choose('optimizer', OPTIMIZERS)
        if self.optimizer == 'muon' and not hasattr(torch.optim, 'Muon'):
            raise ValueError(f"optimizer='muon' needs torch.optim.Muon (torch >= 2.9); this is torch "
                             f"{torch.__version__}: upgrade torch or use optimizer='adamw'")
        for name in ('batch_size', 'gradient_accumulation_steps', 'eval_interval', 'eval_iters',
                     'log_interval'):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ('max_iters', 'warmup_iters', 'lr_decay_iters', 'max_tokens', 'max_seconds', 'max_flops',
                     'seed', 'vocab_size', 'weight_decay', 'grad_clip', 'min_lr'):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative, got {getattr(self, name)}")
        if self.learning_rate <= 0:
            raise ValueError(f"learning_rate must be positive, got {self.learning_rate}")
        if not 0 < self.ddp_timeout_s < math.inf:
            raise ValueError(f"ddp_timeout_s must be a positive number of seconds, got {self.ddp_timeout_s}")
        if self.min_lr > self.learning_rate:
            raise ValueError(f"min_lr={self.min_lr} exceeds learning_rate={self.learning_rate}")
        for name in ('beta1', 'beta2'):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {getattr(self, name)}")
        if self.decay_lr and self.lr_decay_iters <= self.warmup_iters:
            raise ValueError(f"lr_decay_iters={self.lr_decay_iters} must exceed warmup_iters="
                             f"{self.warmup_iters} (or set decay_lr=False for a constant rate)")
        # the model's own checks; vocab_size 0 means "the data's", known only once data_dir is read
        GPTConfig(**{**self.model_args(), 'vocab_size': self.vocab_size or 1})

    def model_args(self):
        """The GPTConfig fields of this config, as a dict."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(GPTConfig)}


# -----------------------------------------------------------------------------
# helpers, also imported by sample.py and bench.py

def resolve_device(name='auto'):
    """'auto' picks cuda, then mps, then cpu; a device that is not there is a UsageError."""
    if name == 'auto':
        if torch.cuda.is_available():
            return 'cuda'
        return 'mps' if torch.backends.mps.is_available() else 'cpu'
    try:
        kind = torch.device(name).type
    except RuntimeError:
        raise UsageError(f"device {name!r} is not a device name; use auto, cpu, cuda, cuda:N or mps") from None
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


# dense bf16 peaks (TFLOP/s) by GPU name, for MFU; other GPUs need --peak_flops
# (matched as substrings of torch.cuda.get_device_name, most specific first)
PEAK_TFLOPS = [('H200', 989), ('H100 PCIe', 756), ('H100 NVL', 835), ('H100', 989), ('A100', 312),
               ('L40S', 362), ('L40', 181), ('L4', 121), ('A10G', 125), ('RTX 4090', 165)]


def peak_flops(device, override=0.0):
    """Peak FLOP/s that MFU divides by: the override, else the GPU's bf16 dense peak; None on CPU/MPS."""
    if override:
        return override
    if not device.startswith('cuda'):
        return None
    name = torch.cuda.get_device_name(torch.device(device))
    return next((tf * 1e12 for key, tf in PEAK_TFLOPS if key in name), None)


def sync_device(device_type):
    """Wait for queued GPU work, so that a clock read measures it."""
    if device_type == 'cuda':
        torch.cuda.synchronize()
    elif device_type == 'mps':
        torch.mps.synchronize()


def autocast_context(device_type, dtype):
    """torch.autocast for bfloat16 / float16 (also on CPU), a no-op context for float32."""
    dtype = PTDTYPES[resolve_dtype(dtype, device_type)] if isinstance(dtype, str) else dtype
    if dtype == torch.float32:
        return nullcontext()
    return torch.amp.autocast(device_type=device_type, dtype=dtype)


def load_checkpoint(path, device='cpu'):
    """The checkpoint dict at `path` (tensors on `device`); a missing or unreadable file is a UsageError."""
    if not os.path.isfile(path):
        raise UsageError(f"no checkpoint at {path!r}; train one first (python train.py configs/quick.py) "
                         f"or point out_dir at the right folder")
    try:
        ckpt = torch.load(path, map_location=device, weights_only=True)
    except Exception as e:  # truncated, garbage, or not a torch file at all (torch's own advice to
        # pass weights_only=False would run arbitrary pickled code: not something to suggest)
        raise UsageError(f"checkpoint {path!r} cannot be read ({type(e).__name__}): it is truncated, "
                         f"corrupt or not written by train.py; retrain, or restore a good copy") from None
    if not isinstance(ckpt, dict) or not {'model', 'model_args'} <= ckpt.keys():
        raise UsageError(f"{path!r} is not a checkpoint written by train.py (no 'model'/'model_args')")
    return ckpt


def tokenizer_of(meta):
    """What a resumed run must keep: the data's tokenizer as meta.json describes it (None, raw llm.c
    shards: GPT-2 BPE), less the ranks file's path (its sha256 says what it holds)."""
    tok = {'kind': 'tiktoken', 'name': 'gpt2'} if meta is None else meta.get('tokenizer')
    return {k: v for k, v in tok.items() if k != 'ranks_file'} if isinstance(tok, dict) else tok


def describe_tokenizer(meta):
    """'char (65 characters)', 'tiktoken gpt2', 'raw shards (GPT-2 BPE)': a tokenizer in a few words."""
    tok = tokenizer_of(meta)
    if meta is None:
        return "raw shards (GPT-2 BPE)"
    if not isinstance(tok, dict):
        return repr(tok)
    if tok.get('kind') == 'char':
        return f"char ({len(tok.get('chars', ''))} characters)"
    return ' '.join(str(tok[k]) for k in ('kind', 'name', 'ranks_sha256') if k in tok)


def config_from_dict(d):
    """A GPTConfig from a dict (model_args, config.json): missing fields take today's defaults,
    fields GPTConfig no longer has are dropped."""
    known = {f.name for f in dataclasses.fields(GPTConfig)}
    try:
        return GPTConfig(**{k: v for k, v in d.items() if k in known})
    except ValueError as e:
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


def get_lr(it, cfg):
    """Learning rate at iteration `it`: linear warmup, then cosine decay to min_lr at lr_decay_iters."""
    if not cfg.decay_lr:
        return cfg.learning_rate
    if it < cfg.warmup_iters:
        return cfg.learning_rate * (it + 1) / (cfg.warmup_iters + 1)
    if it > cfg.lr_decay_iters:
        return cfg.min_lr
    decay_ratio = (it - cfg.warmup_iters) / (cfg.lr_decay_iters - cfg.warmup_iters)
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))  # from 1 down to 0
    return cfg.min_lr + coeff * (cfg.learning_rate - cfg.min_lr)


class Batches:
    """
    Random windows of block_size + 1 tokens from memory-mapped shards, uniform over every
    window of every shard. Batch `key` is a pure function of (seed, *key): each draw seeds a fresh
    numpy Generator, so any process can draw any batch without drawing the ones before it (DDP
    ranks, resumed runs) and the sampler has no state to save.
    """

    def __init__(self, paths, *, block_size, batch_size, seed, device, check_vocab=0):
        self.shards = [load_shard(p) for p in paths]
        self.block_size, self.batch_size, self.seed, self.device = block_size, batch_size, seed, device
        self.paths, self.check_vocab = paths, check_vocab  # ids >= the model's vocab_size: an IndexError
        self.starts = np.array([max(len(s) - block_size, 0) for s in self.shards])  # windows per shard
        self.ends = np.cumsum(self.starts)
        if self.ends[-1] == 0:
            raise UsageError(f"{os.path.dirname(paths[0])}: every shard is shorter than block_size + 1 = "
                             f"{block_size + 1} tokens; lower block_size or prepare more text")

    def get(self, *key):
        rng = np.random.default_rng([self.seed, *key])
        pos = rng.integers(self.ends[-1], size=self.batch_size)  # window index over all shards
        shard = np.searchsorted(self.ends, pos, side='right')
        start = pos - (self.ends[shard] - self.starts[shard])
        T = self.block_size
        xy = np.stack([self.shards[s][i:i + T + 1] for s, i in zip(shard, start)]).astype(np.int64)
        if self.check_vocab and xy.max() >= self.check_vocab:  # cheap: one small batch
            bad = next(s for s, i in zip(shard, start) if self.shards[s][i:i + T + 1].max() >= self.check_vocab)
            meta = os.path.join(os.path.dirname(self.paths[bad]), 'meta.json')
            fix = (f"{meta} does not match its shards: rerun prepare.py" if os.path.exists(meta) else
                   "pass a larger --vocab_size (GPT-2 shards: 50304)")
            raise UsageError(f"{self.paths[bad]} holds token id {int(xy.max())} >= vocab_size={self.check_vocab}; "
                             f"{fix}")
        xy = torch.from_numpy(xy)  # (B, T + 1)
        x, y = xy[:, :-1].contiguous(), xy[:, 1:].contiguous()  # (B, T) inputs and next-token targets
        if self.device.startswith('cuda'):  # pinned memory: the copy overlaps with compute
            return (x.pin_memory().to(self.device, non_blocking=True),
                    y.pin_memory().to(self.device, non_blocking=True))
        return x.to(self.device), y.to(self.device)


def read_jsonl(path):
    """The rows of a log.jsonl: JSON objects with an integer 'iter'. A last line cut short by a killed
    run is skipped; any other line that is not such a row is a UsageError naming it (nothing is dropped)."""
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
        elif line.strip() and (n < len(lines) or line.endswith(b'\n')):  # a blank line is no row either
            what = repr(line[:40].decode('utf-8', 'replace')) + ('...' if len(line) > 40 else '')
            raise UsageError(f"{path} line {n} is not a log row (a JSON object with an integer 'iter'): {what}; "
                             f"delete that line, or the file, and rerun")
    return rows


def rng_state():
    """Every random generator of this process, in types torch.load(weights_only=True) accepts."""
    name, keys, pos, has_gauss, gauss = np.random.get_state()
    return {'torch': torch.get_rng_state(),
            'cuda': torch.cuda.get_rng_state() if torch.cuda.is_initialized() else None,
            'numpy': (name, keys.tolist(), pos, has_gauss, gauss),
            'python': random.getstate()}


def set_rng_state(state):
    torch.set_rng_state(state['torch'])
    if state['cuda'] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state(state['cuda'])
    name, keys, pos, has_gauss, gauss = state['numpy']
    np.random.set_state((name, np.array(keys, dtype=np.uint32), pos, has_gauss, gauss))
    random.setstate(state['python'])


def config_text(config, width=110):
    """'config: k=v k=v ...' wrapped at `width` between pairs, never inside a value."""
    lines, line = [], 'config:'
    for pair in (f"{k}={v!r}" for k, v in config.items()):
        if len(line) + 1 + len(pair) > width and line.strip() != 'config:':
            lines.append(line)
            line = '   '
        line += ' ' + pair
    return '\n'.join(lines + [line])


def micro_steps(accumulation, world):
    """Micro-steps of each process per iteration. gradient_accumulation_steps is global, divided among
    the processes; where it does not divide (1 over 8 GPUs) each process does ceil(A / N), so an
    iteration holds at least the micro-batches the config asks for, and then more tokens."""
    return -(-accumulation // world)


def prepare_command(data_dir):
    """The prepare.py command that writes `data_dir` (prepare.py's default is data/<corpus>_<tokenizer>)."""
    corpus, _, tok = os.path.basename(os.path.normpath(data_dir)).partition('_')
    if corpus not in ('pydoc', 'shakespeare'):
        return f"python prepare.py --input=YOUR_TEXT --out_dir={data_dir}"
    args = ['--dataset=shakespeare'] if corpus == 'shakespeare' else []
    tok = tok or 'char'
    if tok != 'char':
        args.append(f"--tokenizer={tok}")
    if os.path.normpath(data_dir) != os.path.join('data', f"{corpus}_{tok}"):
        args.append(f"--out_dir={data_dir}")
    return ' '.join(['python prepare.py', *args])


RUN_FILES = ('ckpt.pt', 'log.jsonl', 'config.json')
TEMP_FILE = re.compile(r'(?:ckpt\.pt|log\.jsonl|config\.json)\.tmp(\d+)(?:\.tmp\d+)?')  # name.tmp<pid>


def disk_full(e):
    """Whether an exception comes from a full disk (or quota), also through the RuntimeError torch.save
    raises for it ('unexpected pos'), whose context is the OSError."""
    while e is not None:
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        e = e.__cause__ or e.__context__
    return False


def pid_running(pid):
    """Whether a process with this id exists (a temp file named after it may still be written)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


class RunFiles:
    """
    What a run writes in out_dir (the master process only): ckpt.pt, log.jsonl, config.json.
    - Nothing in out_dir changes before open(), which the run calls once everything is checked.
    - A scratch run in an out_dir that holds a previous run writes its log under a temp name; at its
      first checkpoint the previous run's three files move to out_dir/prev/ (one generation: an older
      prev/ is replaced) and this run's take their place. A run that fails before its first checkpoint
      leaves out_dir as it was; rerunning a config never destroys a trained model.
    - config.json is written with the run's first checkpoint, so it describes ckpt.pt.
    - A failed write (a full disk) is one line naming the path; the last good checkpoint stays.
    """

    def __init__(self, cfg):
        self.cfg, self.out_dir = cfg, cfg.out_dir
        self.ckpt_path, self.log_path, self.config_path = (os.path.join(cfg.out_dir, n) for n in RUN_FILES)
        self.prev = os.path.join(cfg.out_dir, 'prev')
        self.staged = f"{self.ckpt_path}.tmp{os.getpid()}"  # the first checkpoint over a previous run
        self.log, self.log_name, self.pending, self.config_written = None, self.log_path, False, False

    def open(self, start_iter):
        """Create out_dir, remove the temp files of killed runs, and open the log (on resume: its rows
        before the checkpoint)."""
        try:
            os.makedirs(self.out_dir, exist_ok=True)
        except OSError as e:
            raise UsageError(f"out_dir {self.out_dir!r} cannot be created ({e.strerror}); "
                             f"pass --out_dir=a/new/folder") from None
        rows = []
        if self.cfg.init_from == 'resume' and os.path.exists(self.log_path):
            # an eval row at start_iter came before the checkpoint; step rows from start_iter on did not
            rows = [r for r in read_jsonl(self.log_path)
                    if r['iter'] < start_iter or (r['iter'] == start_iter and 'val_loss' in r)]
        for name in os.listdir(self.out_dir):  # ckpt.pt.tmp<pid> of a run killed with -9
            m = TEMP_FILE.fullmatch(name)
            if m and not pid_running(int(m.group(1))):
                try:
                    os.remove(os.path.join(self.out_dir, name))
                except OSError:  # another run removed it first, or it is not ours to remove
                    pass
        if self.cfg.init_from == 'scratch' and any(os.path.exists(os.path.join(self.out_dir, n)) for n in RUN_FILES):
            self.pending, self.log_name = True, f"{self.log_path}.tmp{os.getpid()}"
            print(f"note: {self.out_dir} holds a previous run: it stays as it is until this run saves its first "
                  f"checkpoint, then moves to {self.prev}/")
        try:
            self.write(self.log_name, lambda f: f.write(''.join(json.dumps(r) + '\n' for r in rows).encode()))
            self.log = open(self.log_name, 'a')
        except OSError as e:
            self.close()
            raise UsageError(self.failed(self.log_name, e)) from None
        except UsageError:
            self.close()
            raise

    def write_row(self, row):
        try:
            self.log.write(json.dumps(row) + '\n')
            self.log.flush()  # readable while the run goes on (bench.py --plot, tail -f)
        except OSError as e:
            raise UsageError(self.failed(self.log_name, e)) from None

    def save(self, ckpt):
        """The checkpoint, atomically; the first one of a run over a previous run moves that one to prev/."""
        if not self.pending:
            self.write(self.ckpt_path, lambda f: torch.save(ckpt, f))
        else:
            self.write(self.staged, lambda f: torch.save(ckpt, f))
            try:
                os.makedirs(self.prev, exist_ok=True)
                for name in RUN_FILES:  # prev/ holds one run, never a mix of two
                    if os.path.exists(os.path.join(self.prev, name)):
                        os.remove(os.path.join(self.prev, name))
                for name in RUN_FILES:
                    if os.path.exists(os.path.join(self.out_dir, name)):
                        os.replace(os.path.join(self.out_dir, name), os.path.join(self.prev, name))
                os.replace(self.staged, self.ckpt_path)
                os.replace(self.log_name, self.log_path)  # the open log keeps appending: same file
            except OSError as e:
                raise UsageError(f"cannot move the previous run of {self.out_dir!r} to {self.prev!r} "
                                 f"({e.strerror}); move it yourself, or use another out_dir") from None
            self.pending, self.log_name = False, self.log_path
            print(f"note: {self.out_dir} held a checkpoint: the previous run (ckpt.pt, log.jsonl, config.json) is "
                  f"kept in {self.prev}/; --init_from=resume continues a run instead of starting over")
        if not self.config_written:
            self.write(self.config_path,
                       lambda f: f.write(json.dumps(dataclasses.asdict(self.cfg), indent=1).encode()))
            self.config_written = True

    def close(self):
        """Close the log; a run that never saved over a previous run removes its temp files."""
        if self.log is not None:
            try:
                self.log.close()
            except OSError:  # the disk is still full: what the log holds is what it holds
                pass
        if self.pending:
            for path in (self.log_name, self.staged):
                if os.path.exists(path):
                    os.remove(path)

    def write(self, path, write):
        """atomic_write, with a full disk called by its name (torch.save says 'unexpected pos')."""
        try:
            atomic_write(path, write)
        except UsageError as e:
            if not disk_full(e):
                raise
            raise UsageError(self.failed(path, e)) from None

    def failed(self, path, e):
        """The one line for a write that failed."""
        full = disk_full(e)
        why = "no space left on device" if full else (e.strerror or str(e))
        if self.pending:
            kept = f"the previous run in {self.out_dir} is kept as it was" + ("; free some space and rerun" * full)
        elif os.path.exists(self.ckpt_path):
            kept = f"{self.ckpt_path} is kept as it was" + ("; free some space and resume with --init_from=resume"
                                                             * full)
        else:
            kept = "no checkpoint was saved"
        path = re.sub(r'(\.tmp\d+)+$', '', path)  # the file it is to become (a temp one until the first save)
        return f"could not write {path!r}: {why}; {kept}"


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


class NonFiniteLoss(UsageError):
    """The loss became nan or inf: the run stops with one line and saves nothing."""


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
    Where a run stands against the budget that ends it first, and when it will end. Iterations,
    tokens and FLOPs grow together, so each of those budgets is an iteration to reach; max_seconds
    counts train_s. The ETA adds the evaluations still to come, at the duration of the last one.
    """

    def __init__(self, cfg, *, iter_num, tokens_seen, tokens_per_iter, flops_per_token):
        ends = [(cfg.max_iters, 'max_iters')]
        for budget, tokens in (('max_tokens', cfg.max_tokens), ('max_flops', cfg.max_flops / flops_per_token)):
            if tokens:
                ends.append((iter_num + max(math.ceil((tokens - tokens_seen) / tokens_per_iter), 0), budget))
        self.end_iter, self.budget = min(ends)
        self.max_seconds, self.eval_interval = cfg.max_seconds, cfg.eval_interval
        self.eval_s = 0.0  # seconds per evaluation and checkpoint: estimated at start, then measured

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
        """'iter 249/2000 (12%)', or 'iter 249 (41% of max_seconds)', and 'ETA 1m32s' after step iter_num."""
        done = iter_num + 1
        iters, budget = self.left(done, train_s, s_per_iter)
        if budget == 'max_seconds':
            where = f"iter {iter_num} ({100 * min(train_s / self.max_seconds, 1):.0f}% of max_seconds)"
        else:
            of = '' if budget == 'max_iters' else f" of {budget}"
            where = f"iter {iter_num}/{self.end_iter} ({100 * min(done / max(self.end_iter, 1), 1):.0f}%{of})"
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
                f"({s_per_iter:.2f}s per iteration, {int(iters):,} iterations to {budget}, evals included); "
                f"for a first run try `python train.py configs/quick.py`, or lower max_iters, or use a GPU")


class StopSignals:
    """
    SIGINT / SIGTERM while training: the first is acknowledged at once and noted (the loop finishes
    its step, or cuts an evaluation short, then saves and exits); a second acts as it usually does
    (Ctrl-C: KeyboardInterrupt, exit code 130). Only the main thread can take signals.
    While `cut_short` is set (a single-process evaluation, which changes nothing) the first signal
    also raises CutShort at once, even inside one long batch (an 85M model's takes a minute on a CPU).
    """

    class CutShort(Exception):
        pass

    def __init__(self, *, announce):
        self.received, self.previous, self.announce = [], {}, announce
        self.cut_short = False

    def install(self):
        if threading.current_thread() is threading.main_thread():
            self.previous = {s: signal.signal(s, self.on_signal) for s in (signal.SIGINT, signal.SIGTERM)}

    def restore(self):
        for s, h in self.previous.items():
            signal.signal(s, h)

    def on_signal(self, signum, frame):
        self.received.append(signum)
        self.restore()
        if self.announce:
            again = 'Ctrl-C again' if signum == signal.SIGINT else 'a second signal'
            print(f"\n{signal.Signals(signum).name}: stopping after this step and saving a checkpoint; "
                  f"{again} to abort", file=sys.stderr, flush=True)
        if self.cut_short:
            self.cut_short = False
            raise self.CutShort

    def __bool__(self):
        return bool(self.received)


# -----------------------------------------------------------------------------

def main(argv):
    cfg = parse_config(TrainConfig, argv)

    # processes: DDP when torchrun set RANK, otherwise one process
    ddp = int(os.environ.get('RANK', -1)) != -1
    rank, local_rank = int(os.environ.get('RANK', 0)), int(os.environ.get('LOCAL_RANK', 0))
    world = int(os.environ.get('WORLD_SIZE', 1))
    master = rank == 0  # the process that prints, logs and writes checkpoints
    device = resolve_device(cfg.device)
    if ddp and device.startswith('cuda'):
        device = f'cuda:{local_rank}'
    device_type = torch.device(device).type
    dtype = resolve_dtype(cfg.dtype, device_type)
    accum = micro_steps(cfg.gradient_accumulation_steps, world)  # micro-steps of this process per iteration

    # data; the model's vocabulary is the data's unless set larger (e.g. padded to a multiple of 64)
    if not os.path.isdir(cfg.data_dir):
        raise UsageError(f"data_dir {cfg.data_dir!r} not found; run `{prepare_command(cfg.data_dir)}` first "
                         f"or pass --data_dir=...")
    meta = read_meta(cfg.data_dir)
    train_paths, val_paths = find_shards(cfg.data_dir, 'train'), find_shards(cfg.data_dir, 'val')
    ckpt_path = os.path.join(cfg.out_dir, 'ckpt.pt')
    ckpt = load_checkpoint(ckpt_path) if cfg.init_from == 'resume' else None
    if ckpt is not None:
        missing = [k for k in RESUME_KEYS if k not in ckpt]
        if missing:
            raise UsageError(f"{ckpt_path} has no {', '.join(missing)}: it was not written by this train.py, "
                             f"so it cannot resume exactly; use another out_dir with init_from='scratch'")
    vocab = (cfg.vocab_size or (ckpt and ckpt['model_args'].get('vocab_size'))
             or (meta and meta['vocab_size']) or 50304)  # 50304: GPT-2's 50257 padded, for raw llm.c shards
    if meta and vocab < meta['vocab_size']:
        source = ("the --vocab_size given; leave it at 0 to use the data's" if cfg.vocab_size else
                  f"the vocab of the checkpoint in {cfg.out_dir}; resume on the data it was trained on")
        raise UsageError(f"vocab_size={vocab} is smaller than the data's {meta['vocab_size']} "
                         f"({cfg.data_dir}/meta.json): {source}")
    cfg = dataclasses.replace(cfg, device=device, dtype=dtype, vocab_size=vocab)
    model_args = cfg.model_args()
    if ckpt is not None:  # same architecture, or a clear error; dropout may change between runs
        saved = {**dataclasses.asdict(GPTConfig()), **ckpt['model_args']}
        diff = [k for k in model_args if k != 'dropout' and saved.get(k) != model_args[k]]
        if diff:
            raise UsageError(f"{ckpt_path} holds another architecture: " + ", ".join(
                f"{k}={saved.get(k)!r} (asked {model_args[k]!r})" for k in diff)
                + "; resume with the checkpoint's config or use another out_dir")
        saved_opt = (ckpt.get('config') or {}).get('optimizer', 'adamw')  # before 'optimizer' was a key: AdamW
        if saved_opt != cfg.optimizer:  # optimizer state of one does not load into the other
            raise UsageError(f"{ckpt_path} was trained with optimizer={saved_opt!r}, asked {cfg.optimizer!r}; "
                             f"resume with --optimizer={saved_opt} or start a new out_dir")
        # token ids mean what the checkpoint's tokenizer says (it is stored in the checkpoint for sample.py)
        if 'meta' in ckpt and tokenizer_of(meta) != tokenizer_of(ckpt['meta']):
            raise UsageError(f"{cfg.data_dir} is tokenized with {describe_tokenizer(meta)} but {ckpt_path} was "
                             f"trained with {describe_tokenizer(ckpt['meta'])}; resume on data prepared with the "
                             f"checkpoint's tokenizer, or train this data in a new out_dir")

    if ddp:  # a process that waits ddp_timeout_s on the others (one stopped or hangs) raises, not hangs
        # Imported first, before the group exists: this module binds `group=group.WORLD` as default arguments
        # when first imported, and DDP imports it (through torch._dynamo). Imported later, it would keep the
        # group alive past destroy_process_group, its gloo threads would die with the interpreter, and that
        # aborts a finished rank now and then ("terminate called without an active exception").
        import torch.distributed.nn.functional as _  # noqa: F401  (binds `_`, not `torch`, in main)
        dist.init_process_group(backend='nccl' if device_type == 'cuda' else 'gloo',
                                timeout=datetime.timedelta(seconds=cfg.ddp_timeout_s))
        if device_type == 'cuda':
            torch.cuda.set_device(device)
    try:
        summary = train(cfg, model_args, meta, ckpt, train_paths, val_paths, device_type, accum,
                        ddp=ddp, rank=rank, world=world, master=master)
        if ddp:  # the ranks leave together: none tears down its group while another still uses it
            dist.barrier()
        return summary
    except RuntimeError as e:
        if not (ddp and lost_contact(e)):
            raise
        kept = f"{ckpt_path} is kept as it was" if os.path.exists(ckpt_path) else "no checkpoint was saved"
        raise UsageError(f"rank {rank} of {world}: the other processes did not answer within ddp_timeout_s="
                         f"{cfg.ddp_timeout_s:g}s or went away (one stopped, crashed or hangs: see its output); "
                         f"{kept}; {str(e).strip().splitlines()[0][:200]}") from None
    finally:
        if ddp:
            dist.destroy_process_group()


def lost_contact(e):
    """Whether a RuntimeError is a collective that timed out or lost a peer (gloo says so in its message)."""
    return isinstance(e, dist.DistError) or any(s in str(e) for s in (
        'Timed out', 'timed out', 'Connection reset', 'Connection closed', 'Broken pipe'))


def build(cfg, model_args, ckpt, device_type, *, rank, world, master):
    """The model, optimizer and loss scaler, fresh or from the checkpoint, and where the run stands:
    (iter_num, tokens_seen, best_val_loss, train_s, elapsed_s, evaluated_at). A checkpoint is emptied once
    its tensors are copied into the model and optimizer, so the run does not hold a second copy."""
    torch.manual_seed(cfg.seed)  # the same initial weights in every process and every run
    raw_model = GPT(GPTConfig(**model_args))
    if ckpt is not None:
        load_weights(raw_model, ckpt['model'])
    raw_model.to(cfg.device)
    optimizer = raw_model.configure_optimizers(cfg.weight_decay, cfg.learning_rate, (cfg.beta1, cfg.beta2),
                                               device_type, optimizer=cfg.optimizer)
    scaler = torch.amp.GradScaler(device_type, enabled=(cfg.dtype == 'float16'))  # float16 only
    torch.manual_seed(cfg.seed + 1 + rank)  # dropout masks: a stream of their own in each process
    if ckpt is None:  # evaluated_at: the iteration of the last evaluation that ran to the end
        return raw_model, optimizer, scaler, (0, 0, float('inf'), 0.0, 0.0, None)
    optimizer.load_state_dict(ckpt['optimizer'])
    if ckpt['scaler'] and scaler.is_enabled():  # empty when saved without float16
        scaler.load_state_dict(ckpt['scaler'])
    iter_num = ckpt['iter_num']
    evaluated_at = iter_num if ckpt.get('evaluated', True) else None  # False: its eval was cut short
    state = (iter_num, ckpt['tokens_seen'], ckpt['best_val_loss'], ckpt.get('train_s', 0.0),
             ckpt.get('elapsed_s', 0.0), evaluated_at)
    states = ckpt['rng']
    if len(states) == world:
        set_rng_state(states[rank])
    elif master:
        print(f"note: checkpoint written by {len(states)} processes, resuming with {world}: "
              f"same batches, other dropout masks")
    if states[0]['data']['seed'] != cfg.seed and master:
        print(f"note: seed {cfg.seed} differs from the checkpoint's {states[0]['data']['seed']}: "
              f"batches will differ from a straight run")
    ckpt.clear()  # the caller still holds the dict: emptying it is what frees the memory
    return raw_model, optimizer, scaler, state


def train(cfg, model_args, meta, ckpt, train_paths, val_paths, device_type, accum, *, ddp, rank, world, master):
    device = cfg.device
    tokens_per_iter = world * accum * cfg.batch_size * cfg.block_size
    ckpt_path = os.path.join(cfg.out_dir, 'ckpt.pt')
    if master:
        print(config_text(dataclasses.asdict(cfg)))
        rounded = "" if world * accum == cfg.gradient_accumulation_steps else (
            f" (gradient_accumulation_steps={cfg.gradient_accumulation_steps} rounded up to {world * accum}, "
            f"a multiple of {world} processes)")
        print(f"tokens per iteration: {tokens_per_iter:,} = {world} process(es) x {accum} micro-step(s) "
              f"x batch_size {cfg.batch_size} x block_size {cfg.block_size}{rounded}")
    if device_type == 'cuda':
        torch.backends.cuda.matmul.allow_tf32 = True  # allow tf32 on matmul
        torch.backends.cudnn.allow_tf32 = True  # allow tf32 on cudnn
    ctx = autocast_context(device_type, cfg.dtype)
    batches = {split: Batches(paths, block_size=cfg.block_size, batch_size=cfg.batch_size,
                              seed=cfg.seed, device=device, check_vocab=cfg.vocab_size)
               for split, paths in (('train', train_paths), ('val', val_paths))}

    raw_model, optimizer, scaler, (iter_num, tokens_seen, best_val_loss, train_s0, elapsed_s0, evaluated_at) = \
        build(cfg, model_args, ckpt, device_type, rank=rank, world=world, master=master)
    if master and meta is None:
        print(f"note: no meta.json in {cfg.data_dir}: raw shards, the model's vocab_size is {cfg.vocab_size}")
    peak = peak_flops(device, cfg.peak_flops)
    flops_per_token = raw_model.flops_per_token()  # training FLOPs at block_size: the max_flops budget's unit
    if master:
        print(f"model: {raw_model.get_num_params() / 1e6:.2f}M parameters, "
              f"{flops_per_token / 1e6:.1f} MFLOPs per token (training)")
    model = torch.compile(raw_model) if cfg.compile else raw_model  # eval runs this one
    train_model = model
    if ddp:
        train_model = DDP(model, device_ids=[torch.device(device).index] if device_type == 'cuda' else None)
    # stop decisions (signal, clock) must agree across processes: a CPU all-reduce, no GPU sync
    ctrl_group = (dist.new_group(backend='gloo', timeout=datetime.timedelta(seconds=cfg.ddp_timeout_s))
                  if ddp and device_type == 'cuda' else None)

    def all_reduce(t, op=dist.ReduceOp.SUM):
        if ddp:
            dist.all_reduce(t, op=op)
        return t

    def agree(*flags):
        """The flags OR-ed over the processes, so that every process stops at the same point."""
        if not ddp:
            return [bool(f) for f in flags]
        t = torch.tensor([bool(f) for f in flags], dtype=torch.int64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=ctrl_group)
        return [bool(f) for f in t.tolist()]

    BIG = 2 ** 62
    first_bad = torch.full((), BIG, dtype=torch.int64, device=device)  # first iteration with a nan/inf loss

    def check_finite(*values, weights=False):
        """Stop with one line if a loss so far (or a weight) is nan/inf. It syncs: log, eval and save steps only."""
        bad = all_reduce(first_bad.clone(), dist.ReduceOp.MIN).item()
        ok = all(math.isfinite(v) for v in values)
        if weights:  # a step on inf gradients spoils the weights before any loss shows it
            ok = ok and all(torch.isfinite(p).all() for p in raw_model.parameters())
        if bad < BIG or not ok:
            at = bad if bad < BIG else iter_num
            kept = f"; {ckpt_path} is kept as it was" if os.path.exists(ckpt_path) else ""
            raise NonFiniteLoss(f"loss is not finite at iter {at}: stopped without saving{kept}; "
                                f"try {non_finite_advice(cfg)}")

    @torch.no_grad()
    def estimate_loss():
        """Mean loss over the same eval_iters batches of each split every time, shared among processes;
        None when a signal cuts it short: at once in one process, between batches (the same ones) with DDP."""
        out = {}
        model.eval()
        try:
            stop_signals.cut_short = not ddp
            for split, data in batches.items():
                total = torch.zeros((), device=device)
                for k in range(rank, rank + cfg.eval_iters, world):  # the same count in every process
                    if agree(stop_signals)[0]:
                        return None
                    if k < cfg.eval_iters:
                        X, Y = data.get(1, k)  # key (1, k): never one of the training keys (0, iter, step)
                        with ctx:
                            _, loss = model(X, Y)
                        total += loss.float()
                out[split] = all_reduce(total).item() / cfg.eval_iters
            stop_signals.cut_short = False  # inside the try: a signal from here on is only noted
        except StopSignals.CutShort:
            return None
        finally:
            stop_signals.cut_short = False
            model.train()
        return out

    def save_checkpoint():
        check_finite(weights=True)
        states = [None] * world
        if ddp:
            dist.all_gather_object(states, rng_state())
        else:
            states[0] = rng_state()
        if not master:
            return
        for s in states:
            s['data'] = {'seed': cfg.seed, 'iter': iter_num}  # batches are drawn by (seed, iter, micro-step)
        ckpt = {'format_version': CHECKPOINT_FORMAT, 'model': raw_model.state_dict(), 'model_args': model_args,
                'config': dataclasses.asdict(cfg), 'meta': meta, 'optimizer': optimizer.state_dict(),
                'scaler': scaler.state_dict(), 'iter_num': iter_num, 'tokens_seen': tokens_seen,
                'best_val_loss': best_val_loss, 'train_s': train_s, 'elapsed_s': elapsed_s, 'rng': states,
                'evaluated': evaluated_at == iter_num}  # False: resuming runs the eval at iter_num first
        files.save(ckpt)
        print(f"saved {ckpt_path} at iter {iter_num}")

    # out_dir's ckpt.pt, log.jsonl (one JSON object per line) and config.json: opened once all is checked
    files, start_iter = RunFiles(cfg), iter_num
    write_row = files.write_row

    @torch.no_grad()
    def evaluate():
        """estimate_loss with a line before and after; None (nothing logged) when a signal cut it short."""
        if master:
            print(f"step {iter_num}: evaluating, {cfg.eval_iters} batches per split...", flush=True)
        t0 = time.time()
        losses = estimate_loss()
        if master and losses is not None:
            print(f"step {iter_num}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f} "
                  f"({duration(time.time() - t0)})", flush=True)
        elif master:
            print(f"step {iter_num}: evaluation cut short, not logged; resuming runs it first", flush=True)
        return losses

    def warm_up():
        """One forward + backward before the clock starts, then undone (gradients, RNG): compiling is
        not training time, and its duration sizes up the run. Seconds it took."""
        state = rng_state()
        sync_device(device_type)
        t0 = time.time()
        with train_model.no_sync() if ddp else nullcontext():
            with ctx:
                _, loss = train_model(X, Y)
            scaler.scale(loss).backward()
        sync_device(device_type)
        seconds = time.time() - t0
        optimizer.zero_grad(set_to_none=True)
        set_rng_state(state)
        return seconds

    # SIGINT / SIGTERM: acknowledge, finish the step (or cut an eval short), save, exit; a second aborts
    stop_signals = StopSignals(announce=master)
    progress = Progress(cfg, iter_num=iter_num, tokens_seen=tokens_seen, tokens_per_iter=tokens_per_iter,
                        flops_per_token=flops_per_token)

    summary = {'train_loss': None, 'val_loss': None}
    train_s = elapsed_s = 0.0
    last = {'iter': iter_num, 'tokens': tokens_seen, 'train_s': train_s0}  # the previous log row
    saved_at = start_iter if cfg.init_from == 'resume' else None
    X, Y = batches['train'].get(0, iter_num, rank * accum)  # the first micro-batch
    micro_s = warm_up()  # also compiles, with compile=True
    if not cfg.compile:  # (then it timed the compiler, not a step)
        note = progress.start_estimate(micro_s, accum=accum, eval_batches=2 * math.ceil(cfg.eval_iters / world),
                                       iter_num=iter_num, train_s=train_s0, device_type=device_type)
        if master and note:
            print(note, flush=True)
    batches['val'].get(1, 0)  # the first eval batch: its token ids are checked too before out_dir changes
    if master:
        files.open(start_iter)
    stop_signals.install()
    t_start, pause_s = time.time(), 0.0  # pause_s: seconds in evals and checkpoints
    try:
        while True:
            elapsed_s = elapsed_s0 + time.time() - t_start
            train_s = train_s0 + time.time() - t_start - pause_s
            stop = ('max_iters' if iter_num >= cfg.max_iters else
                    'max_tokens' if cfg.max_tokens and tokens_seen >= cfg.max_tokens else
                    'max_flops' if cfg.max_flops and tokens_seen * flops_per_token >= cfg.max_flops else None)
            signalled, out_of_time = agree(stop_signals, cfg.max_seconds and train_s >= cfg.max_seconds)
            stop = 'signal' if signalled else stop or ('max_seconds' if out_of_time else None)

            # evaluate (also at the end) and save; not twice at one iteration (that of a resumed checkpoint)
            if (iter_num % cfg.eval_interval == 0 or stop) and stop != 'signal' and evaluated_at != iter_num:
                sync_device(device_type)
                t0 = time.time()
                losses = evaluate()
                if losses is None:  # cut short by a signal: not logged, not a best_val_loss
                    stop = 'signal'
                else:
                    check_finite(losses['train'], losses['val'])
                    summary.update(train_loss=losses['train'], val_loss=losses['val'])
                    if master:
                        write_row({'iter': iter_num, 'train_loss': losses['train'], 'val_loss': losses['val'],
                                   'lr': get_lr(iter_num, cfg), 'tokens': tokens_seen,
                                   'flops': tokens_seen * flops_per_token, 'elapsed_s': elapsed_s,
                                   'train_s': train_s})
                    improved = losses['val'] < best_val_loss
                    best_val_loss = min(best_val_loss, losses['val'])
                    evaluated_at = iter_num
                    if iter_num > 0 and (improved or cfg.always_save_checkpoint):
                        save_checkpoint()
                        saved_at = iter_num
                    progress.eval_s = time.time() - t0
                pause_s += time.time() - t0
            if stop:
                break

            # one optimizer step over `accum` micro-batches
            lr = get_lr(iter_num, cfg)
            for group in optimizer.param_groups:
                group['lr'] = lr
            loss_sum = torch.zeros((), device=device)
            for micro_step in range(accum):
                if ddp:  # all-reduce the gradients on the last micro-step only
                    train_model.require_backward_grad_sync = (micro_step == accum - 1)
                with ctx:
                    _, loss = train_model(X, Y)
                    loss = loss / accum  # the mean over micro-steps, as one big batch would have it
                # fetch the next micro-batch while the forward pass runs on the GPU
                if micro_step + 1 < accum:
                    X, Y = batches['train'].get(0, iter_num, rank * accum + micro_step + 1)
                else:
                    X, Y = batches['train'].get(0, iter_num + 1, rank * accum)
                scaler.scale(loss).backward()
                loss_sum += loss.detach()
            if cfg.grad_clip != 0.0:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(raw_model.parameters(), cfg.grad_clip)
            scaler.step(optimizer)  # skipped by the scaler if float16 gradients overflowed
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
            first_bad = torch.where(torch.isfinite(loss_sum) | (first_bad < BIG), first_bad, iter_num)
            tokens_seen += tokens_per_iter

            if iter_num % cfg.log_interval == 0:
                check_finite()
                lossf = all_reduce(loss_sum).item() / world  # the mean over every micro-step of every process
                train_s = train_s0 + time.time() - t_start - pause_s
                elapsed_s = elapsed_s0 + time.time() - t_start
                dt = max(train_s - last['train_s'], 1e-9)
                s_per_iter = dt / (iter_num + 1 - last['iter'])
                tokens_per_s = (tokens_seen - last['tokens']) / dt
                mfu = raw_model.estimate_mfu(tokens_per_s / world, peak) if peak else None  # per device
                if master:
                    where, eta = progress.status(iter_num, train_s, s_per_iter)  # iter 249/2000 (12%), ETA 1m32s
                    print(f"{where}: loss {lossf:.4f}, lr {lr:.2e}, {1000 * s_per_iter:.1f}ms/iter, "
                          f"{tokens_per_s:,.0f} tok/s" + (f", mfu {100 * mfu:.2f}%" if peak else "") + f", {eta}",
                          flush=True)
                    write_row({'iter': iter_num, 'loss': lossf, 'lr': lr, 'tokens': tokens_seen,
                               'flops': tokens_seen * flops_per_token, 'elapsed_s': elapsed_s, 'train_s': train_s,
                               'tokens_per_s': tokens_per_s, 'mfu': mfu})
                last = {'iter': iter_num + 1, 'tokens': tokens_seen, 'train_s': train_s}
            iter_num += 1

        if saved_at != iter_num:  # the final state (also after a signal)
            save_checkpoint()
    finally:
        stop_signals.restore()
        files.close()

    summary.update(iter_num=iter_num, tokens=tokens_seen, flops=tokens_seen * flops_per_token,
                   best_val_loss=best_val_loss, train_s=train_s, elapsed_s=elapsed_s0 + time.time() - t_start,
                   stop=stop, ckpt_path=ckpt_path, params=raw_model.get_num_params())
    if stop == 'signal':
        signum = (stop_signals.received or [signal.SIGTERM])[0]  # or another process's signal
        if master:
            print(f"stopped by {signal.Signals(signum).name} at iter {iter_num}; resume with --init_from=resume")
        raise SystemExit(128 + signum)
    if master:
        print(f"done: {stop} at iter {iter_num}, {tokens_seen:,} tokens, {train_s:.1f}s training")
    return summary


if __name__ == "__main__":
    run_main(main)
