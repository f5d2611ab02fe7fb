"""
What a run keeps on disk and how it comes back: the checkpoint (the model's config and uncompiled
weights, the optimizer, the run's state and every random generator, so a resumed run equals a
straight one), the checks before resuming, and `RunFiles`: out_dir's ckpt.pt, log.jsonl and
config.json, written atomically, with a previous run kept in out_dir/prev/.
"""
import dataclasses
import glob
import json
import math
import os
import random
import re
import shutil
import sys
from dataclasses import dataclass

import numpy as np
import torch

from configurator import UsageError, atomic_write, disk_full, lock_folder, write_error
from data import describe_data, fingerprint, fsync_dir, read_meta
from model import GPT, GPTConfig
from tokenizer import describe_tokenizer, load_tokenizer, tokenizer_of

CHECKPOINT_FORMAT = 1
RESUME_KEYS = ('optimizer', 'scaler', 'iter_num', 'tokens_seen', 'best_val_loss', 'rng')


@dataclass
class RunState:
    """Where a run stands: saved in every checkpoint, restored on resume."""
    iter_num: int = 0                 # optimizer steps taken
    tokens_seen: int = 0              # training tokens, over every process
    best_val_loss: float = math.inf
    train_s: float = 0.0              # seconds in training steps (evaluations and checkpoints excluded)
    elapsed_s: float = 0.0            # wall-clock seconds
    evaluated_at: int = None          # the iteration of the last evaluation that ran to the end
    saved_at: int = None              # the iteration of the last checkpoint: none is written twice
    finished: bool = False            # the run reached its budget (not stopped by a signal or a crash)


def load_checkpoint(path, device='cpu'):
    """The checkpoint dict at `path` (tensors on `device`); a missing or unreadable file is a UsageError."""
    if not os.path.isfile(path):
        raise UsageError(f"no checkpoint at {path!r}; train one first (python prepare.py && python "
                         "train.py configs/quick.py) or point out_dir at the right folder")
    try:
        ckpt = torch.load(path, map_location=device, weights_only=True)
    except Exception as e:  # truncated, garbage, or not a torch file at all (torch's own advice to
        # pass weights_only=False would run arbitrary pickled code: not something to suggest)
        raise UsageError(f"checkpoint {path!r} cannot be read ({type(e).__name__}): it is "
                         "truncated, corrupt or not written by train.py; retrain, or restore a "
                         "good copy") from None
    if not isinstance(ckpt, dict) or not {'model', 'model_args'} <= ckpt.keys():
        raise UsageError(f"{path!r} is not a checkpoint written by train.py (no 'model'/'model_args')")
    version = ckpt.get('format_version', 1)
    if type(version) is not int or version > CHECKPOINT_FORMAT:  # a newer format: its fields would be dropped
        raise UsageError(f"{path} has checkpoint format {version!r}; this code reads format "
                         f"{CHECKPOINT_FORMAT} and older: use the code that wrote it (git pull)")
    wrong = next((k for k, kinds in FIELD_TYPES.items() if k in ckpt and not isinstance(ckpt[k], kinds)), None)
    if wrong is None and not all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in ckpt['model'].items()):
        wrong = 'model'
    if wrong:
        raise UsageError(f"{path}: its {wrong!r} is a {type(ckpt[wrong]).__name__}, not what "
                         "train.py writes; the file is damaged or not ours: retrain, or restore a "
                         "good copy")
    return ckpt


# what each field of a checkpoint holds (bool is an int in Python: iter_num=True is refused by name)
FIELD_TYPES = {'model': dict, 'model_args': dict, 'config': dict, 'meta': (dict, type(None)), 'optimizer': dict,
               'scaler': dict, 'iter_num': int, 'tokens_seen': int, 'best_val_loss': (float, int), 'train_s': (float, int),
               'elapsed_s': (float, int), 'rng': list, 'evaluated': bool, 'finished': bool, 'writer': int}


def config_from_dict(d):
    """A GPTConfig from a dict (model_args, config.json): missing fields take today's defaults,
    fields GPTConfig no longer has are dropped."""
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
    """A UsageError unless the run `cfg` on data `meta` can continue checkpoint `ckpt` exactly: written
    by this train.py, the same architecture (dropout may change), optimizer and tokenizer."""
    missing = [k for k in RESUME_KEYS if k not in ckpt]
    if missing:
        raise UsageError(f"{path} has no {', '.join(missing)}: it was not written by this train.py, "
                         f"so it cannot resume exactly; use another out_dir with init_from='scratch'")
    if not ckpt['rng'] or not all(isinstance(r, dict) and {'torch', 'numpy', 'python', 'data'} <= r.keys()
                                  for r in ckpt['rng']):
        raise UsageError(f"{path}: its random generator states are not what train.py writes; the "
                         "file is damaged or not ours: use another out_dir with "
                         "init_from='scratch'")
    saved, asked = {**dataclasses.asdict(GPTConfig()), **ckpt['model_args']}, cfg.model_args()
    diff = [k for k in asked if k != 'dropout' and saved.get(k) != asked[k]]
    if diff:
        raise UsageError(f"{path} holds another architecture: " + ", ".join(
            f"{k}={saved.get(k)!r} (asked {asked[k]!r})" for k in diff)
            + "; resume with the checkpoint's config or use another out_dir")
    saved_opt = (ckpt.get('config') or {}).get('optimizer', 'adamw')  # before 'optimizer' was a key: AdamW
    if saved_opt != cfg.optimizer:  # optimizer state of one does not load into the other
        raise UsageError(f"{path} was trained with optimizer={saved_opt!r}, asked "
                         f"{cfg.optimizer!r}; resume with --optimizer={saved_opt} or start a new "
                         "out_dir")
    # one val curve, one val set: its batches are drawn from eval_seed (-1 before the setting existed); a
    # changed eval_iters keeps the first batches (keys (1, k) for k below both counts)
    saved = (ckpt.get('config') or {}).get('eval_seed', -1)
    if saved != cfg.eval_seed:
        raise UsageError(f"{path} was evaluated with eval_seed={saved}, asked {cfg.eval_seed}: its val curve "
                         f"would change val set midway; resume with --eval_seed={saved} or start a new out_dir")
    # token ids mean what the checkpoint's tokenizer says (it is stored in the checkpoint for
    # sample.py)
    if 'meta' in ckpt and tokenizer_of(meta) != tokenizer_of(ckpt['meta']):
        raise UsageError(f"{cfg.data_dir} is tokenized with {describe_tokenizer(meta)} but {path} "
                         f"was trained with {describe_tokenizer(ckpt['meta'])}; resume on data "
                         "prepared with the checkpoint's tokenizer, or train this data in a new "
                         "out_dir")
    switch = data_switch(ckpt, meta)
    if switch and not cfg.new_data:  # one val curve, one corpus
        raise UsageError(f"{cfg.data_dir} holds {switch['data_switch']['to']}, but {path} was trained on "
                         f"{switch['data_switch']['from']}; resume on that data, or pass --new_data=True "
                         "to go on training on this one (fine-tuning: log.jsonl marks the switch)")


def data_switch(ckpt, meta):
    """A log row for a resume on other data than the checkpoint's (same tokenizer), or None."""
    old = ckpt.get('meta')
    if old is None or meta is None or fingerprint(old) == fingerprint(meta):
        return None
    before, after = describe_data(old), describe_data(meta)
    if before == after:  # the same name and source: the fingerprints tell them apart
        before, after = f"{before} (data {fingerprint(old)})", f"{after} (data {fingerprint(meta)})"
    return {'iter': ckpt['iter_num'], 'data_switch': {'from': before, 'to': after}}


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


def restore(ckpt, model, optimizer, scaler, *, cfg, dist):
    """Load a checkpoint into the model, optimizer and scaler and return its RunState; the random
    generators too when as many processes resume as saved it. The checkpoint dict is emptied once
    its tensors are copied: the caller's reference to it would otherwise keep a second copy."""
    load_weights(model, ckpt['model'])
    optimizer.load_state_dict(ckpt['optimizer'])
    if ckpt['scaler'] and scaler.is_enabled():  # empty when saved without float16
        scaler.load_state_dict(ckpt['scaler'])
    iter_num = ckpt['iter_num']
    state = RunState(iter_num=iter_num, tokens_seen=ckpt['tokens_seen'], best_val_loss=ckpt['best_val_loss'],
                     train_s=ckpt.get('train_s', 0.0), elapsed_s=ckpt.get('elapsed_s', 0.0), saved_at=iter_num,
                     evaluated_at=iter_num if ckpt.get('evaluated', True) else None)  # False: its eval was cut short
    if dist.master:
        due = not ckpt.get('evaluated', True) and iter_num % cfg.eval_interval == 0  # (else: none is due here)
        print(f"resuming from iter {iter_num} ({state.tokens_seen:,} tokens)"
              + (", its evaluation first (cut short when it was saved)" if due else ""))
    states = ckpt['rng']
    if len(states) == dist.world:
        set_rng_state(states[dist.rank])
    elif dist.master:
        print(f"note: checkpoint written by {len(states)} processes, resuming with {dist.world}: "
              f"same batches, other dropout masks")
    if states[0]['data']['seed'] != cfg.seed and dist.master:
        print(f"note: seed {cfg.seed} differs from the checkpoint's {states[0]['data']['seed']}: "
              f"batches will differ from a straight run")
    ckpt.clear()
    return state


def make_checkpoint(model, optimizer, scaler, state, *, cfg, meta, rng):
    """The dict ckpt.pt holds: the uncompiled model's weights and its config, so it loads without
    the config file; the optimizer and the RunState, so it resumes; `rng`: every process's generators."""
    for s in rng:
        s['data'] = {'seed': cfg.seed, 'iter': state.iter_num}  # batches are drawn by (seed, iter, micro-step)
    return {'format_version': CHECKPOINT_FORMAT, 'model': model.state_dict(), 'model_args': cfg.model_args(),
            'config': dataclasses.asdict(cfg), 'meta': meta, 'optimizer': optimizer.state_dict(),
            'scaler': scaler.state_dict(), 'iter_num': state.iter_num, 'tokens_seen': state.tokens_seen,
            'best_val_loss': state.best_val_loss, 'train_s': state.train_s, 'elapsed_s': state.elapsed_s,
            'rng': rng, 'evaluated': state.evaluated_at == state.iter_num,  # False: resuming evaluates first
            'finished': state.finished}


# -----------------------------------------------------------------------------
# what a script that reads a trained run needs: which checkpoint, and its tokenizer

def checkpoint_path(out_dir, *, verb='sampling'):
    """out_dir/ckpt.pt; with no out_dir, a run in this folder (out*/ckpt.pt): the newest that finished its
    training (the run just trained: out-quick/ of the quick start, out-gmlp/ of configs/gmlp.py), else
    the newest, named on stderr as the run `verb` reads (None: said by the caller, later)."""
    if out_dir:
        return os.path.join(out_dir, 'ckpt.pt')
    runs = sorted(glob.glob(os.path.join('out*', 'ckpt.pt')), key=os.path.getmtime, reverse=True)
    if not runs:
        raise UsageError("no checkpoint here (out*/ckpt.pt); train one first (python prepare.py && "
                         "python train.py configs/quick.py: about two minutes on a CPU) or pass "
                         "--out_dir=the/run")
    finished = [p for p in runs if (peek(p) or {}).get('finished')]
    chosen = (finished or runs)[0]
    if verb:
        names = ', '.join(os.path.dirname(p) for p in runs)
        others = f" of {len(runs)} ({names}; pick one with --out_dir)" if runs[1:] else ""
        which = "the newest finished run" if finished else "the newest run (none here finished its training)"
        print(f"no --out_dir given: {verb} {which} here{others}: {os.path.dirname(chosen)}", file=sys.stderr)
    return chosen


def tokenizer_for(ckpt, vocab_size, *, ranks_file='', out_dir=''):
    """The tokenizer of the data the checkpoint was trained on: its 'meta', else data_dir's. A BPE ranks
    file that moved is `ranks_file`, else found by its sha256 beside the run, its data or in data/."""
    meta = ckpt.get('meta')
    if meta is None:  # an older checkpoint: the data directory it names, if it is still there
        data_dir = (ckpt.get('config') or {}).get('data_dir')
        meta = read_meta(data_dir) if data_dir and os.path.isdir(data_dir) else None
    if meta is None:
        if vocab_size < 50257:
            raise UsageError("the checkpoint does not record its tokenizer (no 'meta') and its "
                             "data_dir has no meta.json; rerun prepare.py into the data_dir it was "
                             "trained on")
        # raw llm.c shards (no meta.json) hold GPT-2 tokens, and train.py gives them vocab_size
        # 50304
        print("note: the checkpoint does not record its tokenizer; assuming GPT-2 BPE (raw llm.c "
              "shards)", file=sys.stderr)
        meta = {'tokenizer': {'kind': 'tiktoken', 'name': 'gpt2'}}
    data_dir = (ckpt.get('config') or {}).get('data_dir') or ''
    look_in = [d for d in dict.fromkeys([out_dir, data_dir, os.path.dirname(data_dir.rstrip('/')), 'data', '.'])
               if d and os.path.isdir(d)]
    tok = load_tokenizer(meta, ranks_file=ranks_file, look_in=look_in)
    if tok.vocab_size > vocab_size:
        raise UsageError(f"the tokenizer ({tok.name}, {tok.vocab_size} tokens) is larger than the "
                         f"model's vocab_size={vocab_size}: the checkpoint's meta does not match "
                         "its model")
    return tok


# -----------------------------------------------------------------------------
# out_dir's files

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
            raise UsageError(f"{path} line {n} is not a log row (a JSON object with an integer "
                             f"'iter'): {what}; delete that line, or the file, and rerun")
    return rows


RUN_FILES = ('ckpt.pt', 'log.jsonl', 'config.json')
# ckpt.pt.tmp<pid>: atomic_write's file being written; ckpt.pt.new<pid>: staged, complete, waiting
# for a rename
STAGED = re.compile(r'(?:ckpt\.pt|log\.jsonl|config\.json)\.(?:tmp|new)(\d+)(?:\.tmp\d+)*')
PREV_STAGED = re.compile(r'prev\.(?:tmp|old)(\d+)')  # the next prev/ being built, the one it replaces


def pid_running(pid):
    """Whether a process with this id exists (a temp file named after it may still be written)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def peek(path):
    """A checkpoint's iter_num, tokens_seen, finished and writer, read without loading its tensors; None
    when there is no file, {} when it cannot be read."""
    if not os.path.isfile(path):
        return None
    try:
        ckpt = torch.load(path, map_location='cpu', weights_only=True, mmap=True)
        return {k: ckpt.get(k) for k in ('iter_num', 'tokens_seen', 'finished', 'writer')}
    except Exception:  # truncated, not ours: the caller treats it as something to keep
        return {}


class RunFiles:
    """
    What a run writes in out_dir (the master process only): ckpt.pt, log.jsonl, config.json, and
    prev/.
    - One run at a time: out_dir is locked (hold) before anything is written there, and as soon as
      it exists; a second run into it is refused with one line naming the first.
    - Nothing in out_dir changes before open(), which the run calls once everything is checked.
      open() first settles what a killed run left mid-way (settle), so out_dir never holds a mix of
      two runs.
    - A scratch run over a previous run writes its log as log.jsonl.new<pid>; its first checkpoint
      and config are staged as ckpt.pt.new<pid> and config.json.new<pid>; then prev/ is rebuilt
      beside the old one from hard links of out_dir's run and swapped in, and the rename of the
      staged ckpt.pt commits. Before that rename, every interruption is undone to the state before
      the run; after it, finished. One generation: the run that leaves prev/ goes, except that a run
      stopped before its end (a signal, a crash) that holds less training than prev/'s is the one
      replaced: rerunning a config and pressing Ctrl-C, twice, does not lose the trained model.
    - config.json is written with the run's first checkpoint, so it describes ckpt.pt.
    - A failed write (a full disk) is one line naming the path; the last good checkpoint stays.
    """

    def __init__(self, cfg):
        self.cfg, self.out_dir, self.pid = cfg, cfg.out_dir, os.getpid()
        self.ckpt_path, self.log_path, self.config_path = (os.path.join(cfg.out_dir, n) for n in RUN_FILES)
        self.prev = os.path.join(cfg.out_dir, 'prev')
        self.log, self.log_name, self.lock = None, self.log_path, None
        self.pending = self.committed = self.config_written = False

    def path(self, name, pid=None):
        return os.path.join(self.out_dir, name if pid is None else f"{name}.new{pid}")

    def hold(self):
        """Lock out_dir if it exists: nothing changes there, and a second run into it is refused now."""
        if self.lock is None and os.path.isdir(self.out_dir):
            self.lock = lock_folder(self.out_dir, 'a run')

    def open(self, start_iter):
        """Create and lock out_dir, settle what killed runs left, and open the log (on resume: its rows
        before the checkpoint)."""
        try:
            os.makedirs(self.out_dir, exist_ok=True)
        except OSError as e:
            raise UsageError(f"out_dir {self.out_dir!r} cannot be created ({e.strerror}); "
                             f"pass --out_dir=a/new/folder") from None
        self.hold()
        for name in os.listdir(self.out_dir):
            m = STAGED.fullmatch(name) or PREV_STAGED.fullmatch(name)
            if m and int(m.group(1)) != self.pid and not pid_running(int(m.group(1))):
                try:
                    self.settle(int(m.group(1)))
                except OSError as e:
                    raise UsageError(f"cannot tidy what a killed run left in {self.out_dir} "
                                     f"({e.strerror}: {e.filename}); fix that, or use another "
                                     "out_dir") from None
        if self.cfg.init_from == 'resume' and os.path.isfile(self.ckpt_path) and not os.path.isfile(self.config_path):
            saved = load_checkpoint(self.ckpt_path).get('config')  # killed between the two writes
            if saved:  # (a scratch run moves what is there to prev/ as it is, readable or not)
                self.write(self.config_path, lambda f: f.write(json.dumps(saved, indent=1).encode()))
        rows = []
        if self.cfg.init_from == 'resume' and os.path.exists(self.log_path):
            # an eval row at start_iter came before the checkpoint; step rows from start_iter on did
            # not
            rows = [r for r in read_jsonl(self.log_path)
                    if r['iter'] < start_iter or (r['iter'] == start_iter and 'val_loss' in r)]
        if self.cfg.init_from == 'scratch' and any(os.path.exists(self.path(n)) for n in RUN_FILES):
            self.pending, self.log_name = True, self.path('log.jsonl', self.pid)
            print(f"note: {self.out_dir} holds a previous run: it stays as it is until this run "
                  f"saves its first checkpoint, then moves to {self.prev}/")
        try:
            self.write(self.log_name, lambda f: f.write(''.join(json.dumps(r) + '\n' for r in rows).encode()))
            self.log = open(self.log_name, 'a')
        except OSError as e:
            self.close()
            raise write_error(self.log_name, e, self.kept(e)) from None
        except UsageError:
            self.close()
            raise

    def settle(self, pid):
        """Finish or undo the rotation process `pid` left mid-way. After its commit (the staged ckpt.pt
        renamed into place) put its staged log and config in place and drop the prev/ it replaced; before
        it, remove what it staged and put the old prev/ back. Then remove its temp files."""
        committed = (pid == self.pid and self.committed) or (
            pid != self.pid and not os.path.exists(self.path('ckpt.pt', pid))
            and (peek(self.ckpt_path) or {}).get('writer') == pid)
        for name in RUN_FILES:
            staged = self.path(name, pid)
            if committed and name != 'ckpt.pt' and os.path.exists(staged):
                os.replace(staged, self.path(name))
        old, new = f"{self.prev}.old{pid}", f"{self.prev}.tmp{pid}"
        if os.path.isdir(old) and not committed:
            if os.path.isdir(self.prev):  # swapped in already: it holds hard links of out_dir's run, still there
                shutil.rmtree(self.prev)
            os.replace(old, self.prev)
        for path in (old, new):
            shutil.rmtree(path, ignore_errors=True)
        for name in os.listdir(self.out_dir):
            m = STAGED.fullmatch(name)
            if m and int(m.group(1)) == pid:
                os.remove(self.path(name))

    def moves_to_prev(self):
        """Whether out_dir's run moves to prev/ at this run's first checkpoint. Not when it was stopped
        before its end and holds less training than prev/'s run, or holds no checkpoint while prev/ does:
        then it is the one replaced."""
        here, there = peek(self.ckpt_path), peek(os.path.join(self.prev, 'ckpt.pt'))
        if here is None:
            return there is None
        if not here or not there or here.get('finished') in (True, None):  # unreadable, or finished (or older)
            return True
        return (here.get('tokens_seen') or 0) >= (there.get('tokens_seen') or 0)

    def rotate(self):
        """The first checkpoint over a previous run, staged already: prev/ rebuilt and swapped in, then
        the commit (ckpt.pt renamed into place), then the log and config."""
        moves = self.moves_to_prev()
        old, new = f"{self.prev}.old{self.pid}", f"{self.prev}.tmp{self.pid}"
        if moves:
            os.makedirs(new)
            for name in RUN_FILES:
                if os.path.exists(self.path(name)):
                    try:
                        os.link(self.path(name), os.path.join(new, name))
                    except OSError:  # a file system without hard links: a copy
                        shutil.copy2(self.path(name), os.path.join(new, name))
            fsync_dir(new)
            if os.path.isdir(self.prev):
                os.replace(self.prev, old)
            os.replace(new, self.prev)
            fsync_dir(self.out_dir)
        os.replace(self.path('ckpt.pt', self.pid), self.ckpt_path)  # the commit
        self.committed = True
        self.settle(self.pid)
        fsync_dir(self.out_dir)
        if moves:
            odd = peek(os.path.join(self.prev, 'ckpt.pt')) == {}
            print(f"note: {self.out_dir} held a checkpoint{' that cannot be read' * odd}: the previous run "
                  f"(ckpt.pt, log.jsonl, config.json) is kept in {self.prev}/"
                  + ("" if odd else "; --init_from=resume continues a run instead of starting over"))
        else:
            print(f"note: {self.out_dir} held a run stopped before its end with less training than "
                  f"the one in {self.prev}/, which stays; this run replaces it")

    def write_row(self, row):
        """One JSON object per line; a value that is not a finite number (an MFU figured from a bad peak)
        is written as null: NaN and Infinity are not JSON, and would stop every reader of the log."""
        row = {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in row.items()}
        try:
            self.log.write(json.dumps(row, allow_nan=False) + '\n')
            self.log.flush()  # readable while the run goes on (sweep.py --plot, tail -f)
        except OSError as e:
            raise write_error(self.log_name, e, self.kept(e)) from None

    def save(self, ckpt):
        """The checkpoint, atomically; the first one of a run over a previous run rotates that one to prev/.
        The checkpoint names its writer, so a rotation killed after its commit is finished by the next run."""
        ckpt['writer'] = self.pid
        config = lambda f: f.write(json.dumps(dataclasses.asdict(self.cfg), indent=1).encode())  # noqa: E731
        if not self.pending:
            self.write(self.ckpt_path, lambda f: torch.save(ckpt, f))
            if not self.config_written:
                self.write(self.config_path, config)
        else:
            self.write(self.path('ckpt.pt', self.pid), lambda f: torch.save(ckpt, f))
            self.write(self.path('config.json', self.pid), config)
            try:
                self.rotate()  # the open log keeps appending to the same file, renamed
            except OSError as e:
                where = (f"this checkpoint is saved and the previous run is in {self.prev}/; the next run finishes "
                         f"the move" if self.committed else f"the previous run in {self.out_dir} is kept as it was")
                raise UsageError(f"could not move the previous run of {self.out_dir!r} to {self.prev!r} "
                                 f"({(e.strerror or str(e)).lower()}); {where}") from None
            self.pending, self.log_name = False, self.log_path
        self.config_written = True

    def close(self):
        """Close the log, settle this run's own rotation if it failed half-way (before its commit: undone,
        after: finished), and release out_dir."""
        if self.log is not None:
            try:
                self.log.close()
            except OSError:  # the disk is still full: what the log holds is what it holds
                pass
        try:
            if os.path.isdir(self.out_dir):
                self.settle(self.pid)
        except OSError as e:  # what is left is settled by the next run in out_dir
            print(f"note: could not tidy {self.out_dir} ({e.strerror}); the next run there does", file=sys.stderr)
        finally:
            if self.lock is not None:
                os.close(self.lock)
                self.lock = None

    def write(self, path, write):
        """atomic_write, ending its one line with what is kept."""
        try:
            atomic_write(path, write)
        except UsageError as e:
            raise UsageError(f"{e}; {self.kept(e)}") from None

    def kept(self, e):
        """What a failed write leaves: the previous run, or the last checkpoint, as it was."""
        full = disk_full(e)
        if self.pending:
            return f"the previous run in {self.out_dir} is kept as it was" + ("; free some space and rerun" * full)
        if os.path.exists(self.ckpt_path):
            return f"{self.ckpt_path} is kept as it was" + ("; free some space and resume with --init_from=resume"
                                                           * full)
        return "no checkpoint was saved"
