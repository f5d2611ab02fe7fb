"""
What guards a run, so that train.py reads as a loop: Ctrl-C and SIGTERM (`Signals`, the tools' too),
a DDP process that does not answer, the checkpoint's format and the refusals before a resume, and
out_dir: one run at a time (a flock), what a killed run left settled before anything reads it, and
the run before a scratch start moved to prev/ (or dropped, if prev/ holds a longer one) before it
trains. Nobody needs to open this file to follow one step, a checkpoint or a batch.
"""
import contextlib
import dataclasses
import json
import math
import os
import re
import shutil
import signal
import sys
import threading

import torch
import torch.distributed as dist

from configurator import UsageError, fsync_dir, lock_folder, no_checkpoint, regular_file
from dataset import describe_data, describe_tokenizer, fingerprint, tokenizer_of
from model import GPTConfig

CHECKPOINT_FORMAT = 1
RUN_FILES = ('ckpt.pt', 'log.jsonl', 'config.json')


# -----------------------------------------------------------------------------
# processes: signals (train.py's, and the tools' that run children), a DDP process gone

class Signals:
    """SIGINT / SIGTERM inside `with Signals(first)`: the first is noted (the object turns true),
    announced as `first` ({n}: the children running) and sent on to every child in `procs` (which
    sweep.run_child fills). Then a second acts as usual (Ctrl-C: exit 130), or with forward=True
    (sweep.py, probe.py) is sent on too, or with once=True (a torchrun worker: torchrun sends the
    terminal's Ctrl-C on to it again, and kills it itself if it hangs) changes nothing. Inside
    cut_short(True) the first also raises CutShort."""

    class CutShort(Exception):
        pass

    def __init__(self, first, *, announce=True, forward=False, once=False):
        self.first, self.announce, self.forward, self.cutting = first, announce, forward, False
        self.once = once
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
        if self.cutting:
            self.cutting = False
            raise self.CutShort

    @contextlib.contextmanager
    def cut_short(self, enabled):
        self.cutting = enabled
        try:
            yield
        finally:
            self.cutting = False

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
# out_dir: one run at a time; a scratch run moves the run before it to prev/ first

RUN_FILES = ('log.jsonl', 'config.json', 'ckpt.pt')  # in the order they move: the checkpoint last


def lock_run_dir(out_dir):
    """Lock out_dir (made if missing) and settle what a killed run left, before anything reads it:
    its temp files go, but a save killed between its two renames is finished (config.json's temp
    with no ckpt.pt temp beside it), and so is a move to prev/ that out_dir/.moving/ holds. Returns
    what gives the lock back (and removes out_dir if this run made it and wrote nothing there)."""
    made = not os.path.exists(out_dir)
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as e:  # read-only, a file in the way, ...
        raise UsageError(f"out_dir {out_dir!r} cannot be created or written ({e.strerror}: "
                         f"{e.filename}); pass --out_dir=a/new/folder") from None
    if os.path.exists(os.path.join(out_dir, 'meta.json')):
        raise UsageError(f"{out_dir} holds a dataset (meta.json): a folder is a run's or a "
                         "dataset's; pass another --out_dir")
    fd = lock_folder(out_dir)

    def release():
        if made:
            with contextlib.suppress(OSError):  # (only if empty: a run that saved nothing)
                os.rmdir(out_dir)
        os.close(fd)
    try:
        for name in RUN_FILES:  # what a run renames over: only its own files
            regular_file(os.path.join(out_dir, name), "a run's file", output=True,
                         fix='move it away, or pass another --out_dir')
        prev = os.path.join(out_dir, 'prev')
        if os.path.lexists(prev) and not os.path.isdir(prev):  # (where the run before goes)
            raise UsageError(f"{prev} is not a folder: train.py keeps the run before a scratch "
                             "start there; move it away, or pass another --out_dir")
        names = os.listdir(out_dir)
        for name in names:
            temp = re.fullmatch(r'(ckpt\.pt|log\.jsonl|config\.json)(?:\.tmp(\d+))+', name)
            if temp and temp[1] == 'config.json' and f'ckpt.pt.tmp{temp[2]}' not in names:
                os.replace(os.path.join(out_dir, name), os.path.join(out_dir, 'config.json'))
            elif temp:
                os.remove(os.path.join(out_dir, name))
        if os.path.isdir(os.path.join(out_dir, '.moving')):
            move_to_prev(out_dir)
        shutil.rmtree(os.path.join(out_dir, '.gone'), ignore_errors=True)
    except OSError as e:
        release()
        raise UsageError(f"cannot tidy what a killed run left in {out_dir} ({e.strerror}: "
                         f"{e.filename}); fix that, or use another out_dir") from None
    except UsageError:
        release()
        raise
    return release


def start_run(out_dir, scratch):
    """A scratch run starts out_dir empty of runs: the run there moves to prev/ (prev/'s goes),
    unless it stopped with fewer tokens than prev/'s: then it goes. Decided from what each run's
    config.json says of its last save; nothing moves once training begins."""
    left = [n for n in RUN_FILES if os.path.exists(os.path.join(out_dir, n))]
    if not scratch or not left:
        return
    prev = os.path.join(out_dir, 'prev')
    now, before = last_save(out_dir), last_save(prev)
    keep = now and (now['finished'] or not before or now['tokens_seen'] >= before['tokens_seen'])
    print(f"note: this run starts over in {out_dir} (--init_from=resume continues a run instead): "
          + (f"the run there ({describe(now)}) moves to {prev}/" if keep else
             f"the run there ({describe(now)}) goes, fewer tokens than {prev}/'s" if now else
             "what a run stopped before its first checkpoint left there goes")
          + (f", replacing the one there ({describe(before)})" if keep and before else
             f"; {prev}/ keeps its run ({describe(before)})" if before else "")
          + (f"; `mv {prev} another/folder` makes a run of it again" if keep or before else ""))
    try:
        if keep:
            move_to_prev(out_dir)
        for name in reversed(left if not keep else ()):  # the checkpoint first: what is left is no run
            os.remove(os.path.join(out_dir, name))
    except OSError as e:  # read-only, a full disk, ...
        raise UsageError(f"out_dir {out_dir!r} cannot be created or written ({e.strerror}: "
                         f"{e.filename}); pass --out_dir=a/new/folder") from None


def last_save(folder):
    """{'iter_num', 'tokens_seen', 'finished'} of the run in `folder` as its config.json says, None
    without ckpt.pt; a run that does not say (an older train.py's) counts as finished."""
    if not os.path.isfile(os.path.join(folder, 'ckpt.pt')):
        return None
    with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
        with open(os.path.join(folder, 'config.json'), encoding='utf-8') as f:
            saved = json.load(f)['saved']
        if [type(saved[k]) for k in ('iter_num', 'tokens_seen', 'finished')] == [int, int, bool]:
            return saved
    return {'iter_num': None, 'tokens_seen': math.inf, 'finished': True}


def describe(saved):
    return ("saved by an older train.py" if saved['iter_num'] is None else
            f"iter {saved['iter_num']:,}, {'finished' if saved['finished'] else 'stopped early'}")


def move_to_prev(out_dir):
    """out_dir's run into prev/, the run there out of the way, each step a rename: run files into
    .moving/, prev/ to .gone/, .moving/ to prev/, then .gone/ goes. Taken again after a kill
    (lock_run_dir does, while .moving/ exists), it finishes."""
    def p(*names):
        return os.path.join(out_dir, *names)
    if not os.path.isdir(p('.moving')):
        shutil.rmtree(p('.gone'), ignore_errors=True)  # (a kill left it: already on its way out)
        os.mkdir(p('.moving'))
    for name in RUN_FILES:
        if os.path.exists(p(name)):
            os.replace(p(name), p('.moving', name))
    if os.path.isdir(p('prev')):
        os.replace(p('prev'), p('.gone'))
    os.replace(p('.moving'), p('prev'))
    fsync_dir(out_dir)
    shutil.rmtree(p('.gone'), ignore_errors=True)


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
                      f"(n_layer={cfg.n_layer}, n_embd={cfg.n_embd}, vocab_size={cfg.vocab_size})")


# -----------------------------------------------------------------------------
# the device, its peak FLOP/s, and durations as a person reads them

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


def duration(seconds):
    """4.2s, 42s, 1m32s, 5h03m, 3d04h: a duration at the precision an ETA deserves."""
    s = int(round(seconds))
    return (f"{seconds:.1f}s" if seconds < 9.95 else
            f"{s}s" if s < 60 else
            f"{s // 60}m{s % 60:02d}s" if s < 3600 else
            f"{s // 3600}h{s % 3600 // 60:02d}m" if s < 86400 else
            f"{s // 86400}d{s % 86400 // 3600:02d}h")
