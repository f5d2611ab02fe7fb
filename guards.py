"""
What guards a run, so that train.py reads as a loop: Ctrl-C and SIGTERM (`Signals`, the tools' too),
a DDP process that does not answer, the checkpoint's format and the refusals before a resume,
out_dir (held by one run at a time; what a killed run left settled before anything reads it; the run
before a scratch start moved to prev/, or dropped for a finished or longer one there, judged from
the checkpoints alone), a model too large for memory, the device and precision asked for. Nobody
needs to open this file to follow one step, a checkpoint or a batch.
"""
import contextlib
import dataclasses
import datetime
import os
import re
import signal
import sys
import threading
from contextlib import nullcontext

import torch
import torch.distributed as dist

from configurator import (UsageError, cores, hold, no_checkpoint, refuse_foreign, regular_file,
                          swap_in)
from dataset import describe_data, describe_tokenizer, fingerprint, tokenizer_of
from model import GPTConfig

CHECKPOINT_FORMAT = 1


# -----------------------------------------------------------------------------
# processes: signals (train.py's, and the tools' that run children), a DDP process gone

class Signals:
    """SIGINT / SIGTERM inside `with Signals(first)`: the first is noted (the object turns true),
    announced as `first` ({n}: the children running) and sent on to every child in `procs` (which
    sweep.run_child fills). Then a second acts as usual (Ctrl-C: exit 130), or with forward=True
    (sweep.py, probe.py) is sent on too, or with once=True (a torchrun worker: torchrun sends the
    terminal's Ctrl-C on to it again, and kills it itself if it hangs) changes nothing."""

    def __init__(self, first, *, announce=True, forward=False, once=False):
        self.first, self.announce, self.forward, self.once = first, announce, forward, once
        self.received, self.previous, self.procs, self.lock = [], {}, set(), threading.Lock()

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self.previous = {s: signal.signal(s, self.on_signal)
                             for s in (signal.SIGINT, signal.SIGTERM)}
        return self

    def __exit__(self, *exc):
        for s, h in self.previous.items():
            signal.signal(s, h)
        self.previous = {}

    install, restore = __enter__, __exit__  # (for a block that would need one indent more)

    def __bool__(self):
        return bool(self.received)

    def on_signal(self, signum, frame):
        again, name = bool(self.received), signal.Signals(signum).name
        if again and self.once:
            return
        self.received.append(signum)
        if not (self.forward or self.once):
            self.__exit__()
        with self.lock:
            procs = list(self.procs)
        if self.announce:
            key = 'Ctrl-C' if signum == signal.SIGINT else name
            print(f"\n{name}: " + (f"sent on to {len(procs)} running children, which now abort"
                                   if again else self.first.format(n=len(procs)) +
                                   ('' if self.once else f"; {key} again to abort")),
                  file=sys.stderr, flush=True)
        for p in procs:
            with contextlib.suppress(ProcessLookupError):  # it has just exited
                p.send_signal(signum)

    def exit_code(self):
        return 128 + (self.received or [signal.SIGTERM])[0]  # (or another process's signal)


def ddp_failed(e, procs, timeout_s, out_dir):
    """A collective that timed out, or a peer gone: one line naming this rank, then exit 2 at once
    (tearing down the broken group can wait forever on a lost peer). Else the caller raises e."""
    if not (isinstance(e, dist.DistError) or any(s in str(e) for s in (
            'Timed out', 'timed out', 'Connection reset', 'Connection closed', 'Broken pipe'))):
        return
    print(f"error: rank {procs.rank} of {procs.world}: the other processes did not answer within "
          f"ddp_timeout_s={timeout_s:g}s or went away (one stopped, crashed or hangs: see its "
          f"output); {kept(out_dir)}; "
          f"{str(e).strip().splitlines()[0][:200]}", file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(2)


# -----------------------------------------------------------------------------
# what a checkpoint must be, and whether a run can resume it

def load_checkpoint(path):
    """The checkpoint dict train.py wrote at `path`; anything else is a one-line UsageError."""
    if not os.path.isfile(path):
        raise no_checkpoint(path)
    try:
        ckpt = torch.load(path, map_location='cpu', weights_only=True)
        version = ckpt.get('format_version', 1)
        dict(ckpt['model_args']), ckpt['model']  # (a dict holding both)
    except Exception as e:  # truncated, garbage, not ours (torch's advice, weights_only=False, would
        raise UsageError(f"checkpoint {path!r} cannot be read ({type(e).__name__}): it is "  # run
                         "truncated, corrupt or not written by train.py; retrain, or restore a "
                         "good copy") from None  # ... any pickled code: never to suggest)
    if version != CHECKPOINT_FORMAT:
        raise UsageError(f"{path} has checkpoint format {version!r}; this code reads format "
                         f"{CHECKPOINT_FORMAT}: use the code that wrote it")
    return ckpt


def check_resumable(ckpt, cfg, meta, path):
    """A UsageError unless the run `cfg` on data `meta` can continue checkpoint `ckpt` exactly: the
    same architecture (dropout may change), optimizer, val set and tokenizer; the log row of a
    switch to other data (--new_data), or None."""
    saved, asked = {**dataclasses.asdict(GPTConfig()), **ckpt['model_args']}, cfg.model_args()
    diff = [k for k in asked if k != 'dropout' and saved.get(k) != asked[k]]
    if diff:
        raise UsageError(f"{path} holds another architecture: " + ", ".join(
            f"{k}={saved.get(k)!r} (asked {asked[k]!r})" for k in diff)
            + "; resume with the checkpoint's config or use another out_dir")
    config = ckpt.get('config') or {}  # (no key: from before the setting, at its old value)
    for key, old, why in (('optimizer', config.get('optimizer', 'adamw'),
                           "an optimizer's state loads into its own kind only"),
                          ('eval_seed', config.get('eval_seed', -1),
                           "its val curve would change val set midway")):
        if old != getattr(cfg, key):
            raise UsageError(f"{path} was trained with {key}={old!r}, asked {getattr(cfg, key)!r}: "
                             f"{why}; resume with --{key}={old} or start a new out_dir")
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


# -----------------------------------------------------------------------------
# out_dir: one run at a time (held), the run before a scratch start kept in prev/, a run's progress
# from its checkpoint alone

RUN_FILES = ('ckpt.pt', 'log.jsonl', 'config.json')  # a run's files; the checkpoint moves first


def peek(folder):
    """How far the run in `folder` got, from its checkpoint alone (its tensors unread): iter_num,
    tokens_seen, finished (an older train.py's, which does not say: not), meta; None without a
    checkpoint it can read."""
    import torch
    path = os.path.join(folder, 'ckpt.pt')
    if not os.path.isfile(path):  # (a pipe there is no checkpoint, and would never end)
        return None
    try:
        ckpt = torch.load(path, map_location='cpu', weights_only=True, mmap=True)
        return {'iter_num': int(ckpt['iter_num']), 'tokens_seen': int(ckpt.get('tokens_seen', 0)),
                'finished': ckpt.get('finished') is True, 'meta': ckpt.get('meta')}
    except Exception:  # no file, truncated, not ours
        return None


def run_file(name):
    """A name a run writes in its folder: its files, and their temp files."""
    return re.fullmatch(r'(ckpt\.pt|log\.jsonl|config\.json)(\.tmp\d+)*', name)


def run_files(folder):  # (what of a folder is a run's, for foreign)
    return run_file


def hold_run(out_dir):
    """hold(out_dir) for a run: a dataset there is refused, and what a killed process left is
    settled before anything reads it (its temp files go, a move to prev/ is finished)."""
    give_back = hold(out_dir)
    try:
        if os.path.exists(os.path.join(out_dir, 'meta.json')):
            raise UsageError(f"{out_dir} holds a dataset (meta.json): a folder is a run's or a "
                             "dataset's; pass another --out_dir")
        for name in RUN_FILES:  # what a run renames over: only its own files
            regular_file(os.path.join(out_dir, name), "a run's file", output=True,
                         fix='move it away, or pass another --out_dir')
        for name in os.listdir(out_dir):
            if run_file(name) and '.tmp' in name:
                os.remove(os.path.join(out_dir, name))
        moving = os.path.join(out_dir, '.moving')
        with contextlib.suppress(OSError):  # (made by a move killed before it began: empty)
            os.rmdir(moving)
        if os.path.isfile(os.path.join(moving, 'ckpt.pt')) or os.path.lexists(moving + '.old'):
            move_to_prev(out_dir)
    except BaseException:
        give_back()
        raise
    return give_back


def start_over(out_dir):
    """A scratch start in out_dir (held): the run there moves to prev/, the run in prev/ going,
    unless prev/'s is finished or longer and this one is not: then this one goes. A run goes only
    in favour of a finished run or a strictly longer one (tokens trained; a tie of two unfinished
    runs keeps the newer)."""
    if not any(os.path.exists(os.path.join(out_dir, n)) for n in RUN_FILES):
        return
    prev = os.path.join(out_dir, 'prev')
    now, before = peek(out_dir), peek(prev)
    if now is None and os.path.exists(os.path.join(out_dir, 'ckpt.pt')):  # one it cannot read: a run
        now = {'iter_num': None, 'tokens_seen': 0, 'finished': False}  # of which nothing is known
    keep = now and (now['finished'] or not before or now['tokens_seen'] > before['tokens_seen']
                    or now['tokens_seen'] == before['tokens_seen'] and not before['finished'])
    try:
        if keep:
            move_to_prev(out_dir)
        else:
            for name in RUN_FILES:  # the checkpoint first: what is left is no run
                if os.path.exists(os.path.join(out_dir, name)):
                    os.remove(os.path.join(out_dir, name))
    except OSError as e:  # read-only, a full disk, ...: every run stays whole where it is
        raise UsageError(f"{e.filename}: {e.strerror}; nothing was lost: the next start in "
                         f"{out_dir} finishes what this one began") from None
    print(f"note: this run starts over in {out_dir} (--init_from=resume continues a run instead): "
          + (f"the run there ({describe(now)}) moved to {prev}/" if keep else
             f"the run there ({describe(now)}) went: {prev}/ keeps a finished or longer one" if now
             else "what a run stopped before its first checkpoint left there went")
          + (f", replacing the one there ({describe(before)})" if keep and before else
             f" ({describe(before)})" if before else "")
          + (f"; `mv {prev} another/folder` makes a run of it again" if keep or before else ""))


def describe(run):
    return ("a checkpoint that cannot be read" if run['iter_num'] is None else
            f"iter {run['iter_num']:,}, {run['tokens_seen']:,} tokens, "
            f"{'finished' if run['finished'] else 'stopped early'}")


def move_to_prev(out_dir):
    """out_dir's run into prev/, prev/'s run out of the way: the run's files into .moving/, the
    checkpoint first (from then on .moving/ holds a run on its way), then swap_in(.moving, prev).
    Taken again after a kill (hold_run does, while .moving/ holds a checkpoint), it finishes. prev/
    is held throughout: a run resumed there (--out_dir=D/prev) is never moved under it."""
    moving, prev = os.path.join(out_dir, '.moving'), os.path.join(out_dir, 'prev')
    what = "train.py (it keeps the run before a scratch start in prev/)"
    if os.path.islink(prev) or os.path.lexists(prev) and not os.path.isdir(prev):  # (before hold)
        refuse_foreign(prev, run_files, what)
    give_back = hold(prev)
    try:
        refuse_foreign(prev, run_files, what)
        on_its_way = os.path.isfile(os.path.join(moving, 'ckpt.pt'))  # (a move a kill cut short)
        if on_its_way or os.path.exists(os.path.join(out_dir, 'ckpt.pt')):
            if not on_its_way:  # a move begins: nothing may be in its way
                refuse_foreign(moving, lambda _: lambda name: False, what)
            os.makedirs(moving, exist_ok=True)
            for name in RUN_FILES:
                if os.path.exists(os.path.join(out_dir, name)):
                    os.replace(os.path.join(out_dir, name), os.path.join(moving, name))
        swap_in(moving, prev, run_files, what, ready=os.path.isfile(os.path.join(moving, 'ckpt.pt')))
    finally:
        give_back()


def kept(out_dir):
    """What a run stopped by an error leaves: its last checkpoint, or the run before in prev/."""
    path, prev = os.path.join(out_dir, 'ckpt.pt'), os.path.join(out_dir, 'prev')
    return (f"{path} is the last checkpoint saved" if os.path.exists(path) else "no checkpoint was saved"
            + (f" (the run before is in {prev}/)" if os.path.exists(os.path.join(prev, 'ckpt.pt'))
               else ""))


def out_of_memory(e, cfg):
    """The one line for an allocation that failed (the model, a batch, a step's activations; CPU
    or GPU, torch's or numpy's): its size, and what to lower; None for any other error."""
    if not (isinstance(e, (MemoryError, torch.OutOfMemoryError)) or "can't allocate" in str(e)):
        return None
    size = re.search(r'allocate (?:memory: you tried to allocate )?([\d.]+ [KMGT]?i?B|\d+ bytes)',
                     str(e))
    return UsageError(f"out of memory on {cfg.device}" + (f" ({size[1]} at once)" if size else "")
                      + f": lower batch_size ({cfg.batch_size}; gradient_accumulation_steps keeps "
                      f"the tokens per step), block_size ({cfg.block_size}), or the model's size "
                      f"(n_layer={cfg.n_layer}, n_embd={cfg.n_embd}, "
                      f"vocab_size={cfg.vocab_size or 'the data'})")


# -----------------------------------------------------------------------------
# the device and precision, its peak FLOP/s, and durations as a person reads them

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


DTYPES = ('auto', 'float32', 'bfloat16', 'float16')
PTDTYPES = {'float32': torch.float32, 'bfloat16': torch.bfloat16, 'float16': torch.float16}


def resolve_dtype(name, device_type):
    """'auto' is bfloat16 on CUDA GPUs that have it, float16 on older ones, float32 elsewhere."""
    bf16 = device_type == 'cuda' and torch.cuda.is_bf16_supported()
    if name == 'auto':
        return 'float32' if device_type != 'cuda' else 'bfloat16' if bf16 else 'float16'
    if name == 'bfloat16' and device_type == 'cuda' and not bf16:
        raise UsageError("this GPU has no bfloat16; use --dtype=float16 (with loss scaling) or "
                         "float32")
    return name


def autocast_context(device_type, dtype):
    """torch.autocast for bfloat16 / float16 (also on CPU), a no-op context for float32."""
    dtype = PTDTYPES[resolve_dtype(dtype, device_type)] if isinstance(dtype, str) else dtype
    return (nullcontext() if dtype == torch.float32 else
            torch.amp.autocast(device_type=device_type, dtype=dtype))


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


def busy(threads, fix):
    """The line for a machine busier than its cores at start (its load over the last minute): each
    of a step's `threads` waits for a core, which can make it many times slower; `fix` says how to
    use fewer. None when it is not busy, or one thread runs."""
    load, n = os.getloadavg()[0] if hasattr(os, 'getloadavg') else 0.0, cores()
    if threads > 1 and load > n:
        return (f"note: this machine is busy (load {load:.1f} on {n} cores): {threads} threads wait "
                f"for cores at every step, which can make it many times slower; {fix}")
    return None


def duration(seconds):
    """1:32:05 (h:mm:ss): a duration at the precision an ETA deserves."""
    return str(datetime.timedelta(seconds=round(seconds)))
