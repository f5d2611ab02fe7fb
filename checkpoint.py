"""
What a run keeps on disk and how it comes back: the checkpoint (the model's config and uncompiled
weights, the optimizer, the run's state and every random generator, so a resumed run equals a straight
one), the checks before resuming, and `RunFiles`: out_dir's ckpt.pt, log.jsonl and config.json,
written atomically, with a previous run kept in out_dir/prev/.
"""
import dataclasses
import json
import math
import os
import random
import re
from dataclasses import dataclass

import numpy as np
import torch

from configurator import UsageError, atomic_write, disk_full, write_error
from model import GPT, GPTConfig
from tokenizer import describe_tokenizer, tokenizer_of

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


def check_resumable(ckpt, cfg, meta, path):
    """A UsageError unless the run `cfg` on data `meta` can continue checkpoint `ckpt` exactly: written
    by this train.py, the same architecture (dropout may change), optimizer and tokenizer."""
    missing = [k for k in RESUME_KEYS if k not in ckpt]
    if missing:
        raise UsageError(f"{path} has no {', '.join(missing)}: it was not written by this train.py, "
                         f"so it cannot resume exactly; use another out_dir with init_from='scratch'")
    saved, asked = {**dataclasses.asdict(GPTConfig()), **ckpt['model_args']}, cfg.model_args()
    diff = [k for k in asked if k != 'dropout' and saved.get(k) != asked[k]]
    if diff:
        raise UsageError(f"{path} holds another architecture: " + ", ".join(
            f"{k}={saved.get(k)!r} (asked {asked[k]!r})" for k in diff)
            + "; resume with the checkpoint's config or use another out_dir")
    saved_opt = (ckpt.get('config') or {}).get('optimizer', 'adamw')  # before 'optimizer' was a key: AdamW
    if saved_opt != cfg.optimizer:  # optimizer state of one does not load into the other
        raise UsageError(f"{path} was trained with optimizer={saved_opt!r}, asked {cfg.optimizer!r}; "
                         f"resume with --optimizer={saved_opt} or start a new out_dir")
    # token ids mean what the checkpoint's tokenizer says (it is stored in the checkpoint for sample.py)
    if 'meta' in ckpt and tokenizer_of(meta) != tokenizer_of(ckpt['meta']):
        raise UsageError(f"{cfg.data_dir} is tokenized with {describe_tokenizer(meta)} but {path} was "
                         f"trained with {describe_tokenizer(ckpt['meta'])}; resume on data prepared with the "
                         f"checkpoint's tokenizer, or train this data in a new out_dir")


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
            'rng': rng, 'evaluated': state.evaluated_at == state.iter_num}  # False: resuming evaluates first


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
            raise UsageError(f"{path} line {n} is not a log row (a JSON object with an integer 'iter'): {what}; "
                             f"delete that line, or the file, and rerun")
    return rows


RUN_FILES = ('ckpt.pt', 'log.jsonl', 'config.json')
TEMP_FILE = re.compile(r'(?:ckpt\.pt|log\.jsonl|config\.json)\.tmp(\d+)(?:\.tmp\d+)?')  # name.tmp<pid>


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
            raise write_error(self.log_name, e, self.kept(e)) from None
        except UsageError:
            self.close()
            raise

    def write_row(self, row):
        try:
            self.log.write(json.dumps(row) + '\n')
            self.log.flush()  # readable while the run goes on (sweep.py --plot, tail -f)
        except OSError as e:
            raise write_error(self.log_name, e, self.kept(e)) from None

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
