"""
Compare architectures by what they learn: train every config through train.py over seeds x a
learning-rate grid at one or more budgets (or at several sizes), one record per finished run in a
results file, then tables and plots from that file alone.

    python sweep.py --seeds=3 --learning_rate=5e-4,1e-3,2e-3 --jobs=2   # every config: seeds x lr grid
    python sweep.py --seeds=3 --learning_rate=tuned --max_flops=8e12     # equal FLOPs, tuned lr
    python sweep.py --lr_scale=0.5,1,2 --lr_schedule=wsd --max_iters=500,1000,2000,4000  # the regime study
    python sweep.py --scaling --sizes=2x64,4x128,6x192 --learning_rate=tuned  # compute multipliers
    python sweep.py --configs=gpt,gmlp --block_size=256 --data_dir=data/x   # any train.py key too
    python sweep.py --report --results=results/sweep_stdlib.jsonl  # tables and plots, no training
    python sweep.py --plot out-gpt out-gmlp                        # val-loss plot of existing runs
    python sweep.py --quick                                        # the machinery in about a minute

Runs are train.py processes (`jobs` at a time, cores/jobs threads each); any train.py key given here
applies to every run. Each finished run appends one record to the results file, found again by its
key: the run's settings as train.py resolves them and the data's fingerprint, less NO_EFFECT. A
rerun skips recorded runs and resumes stopped ones; Ctrl-C stops the runs (they save). Budgets
become iterations per config, where the schedule ends; with --lr_schedule=wsd one constant-lr run
serves every budget of a (config, lr, seed), branched at each cooldown (Hagele et al. 2024).
"""
import os
import signal

if __name__ == "__main__":  # Ctrl-C while the imports load (torch takes seconds): exit 130, quietly
    signal.signal(signal.SIGINT, lambda *_: os._exit(130))

import dataclasses
import hashlib
import itertools
import json
import math
import runpy
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from configurator import (HERE, UsageError, atomic_write, config_not_found, cores,
                          exec_config_file, hold, parse_config, regular_file, require, run_main)
from dataset import fingerprint, open_dataset, read_meta, sha256_file
from guards import Signals, hold_run, peek, resolve_device, start_over
from hellaswag import read_hellaswag
from model import GPTConfig, count_flops
from report import markdown_table, plot_curves, pyplot, save_png, sweep_report
from stats import (ARCH, BUDGET, RUN_COLUMNS, SHAPE, append_record, best_lr,
                   check_writable, config_paths, differing, keys_given, numbers, read_results,
                   read_log, record_of, run_id, run_summary, setting, split_flags, tuned_lr)
from train import TrainConfig

BUDGETS = ('max_iters', 'max_tokens', 'max_flops', 'max_seconds')
TRAIN, EVAL = os.path.join(HERE, 'train.py'), os.path.join(HERE, 'hellaswag.py')
# train.py settings that cannot change a run's outcome: left out of its key (every other one is in)
NO_EFFECT = ('out_dir', 'init_from', 'log_interval', 'always_save_checkpoint', 'ddp_timeout_s',
             'peak_flops')
# what a wsd branch changes (its evaluations too: they read the model, they do not change it)
LENGTH = ('budget_value', 'max_iters', 'lr_decay_iters', 'max_tokens', 'max_flops', 'eval_interval')
EVALS = 8  # evaluations per run (a curve to draw) unless --eval_interval is given


@dataclass
class SweepConfig:
    configs: list = field(default_factory=list)  # config files or names (gpt,gmlp); default: all
    scaling: bool = False       # each config at each of `sizes`: loss vs FLOPs, compute multipliers
    sizes: list = field(default_factory=lambda: ['3x96', '4x128', '5x160'])  # LAYERSxWIDTH, heads of 32
    seeds: int = 1              # seeds 1..N per (config, lr): the init, the batches and dropout
    learning_rate: list = field(default_factory=list)  # a grid (1e-3,2e-3), 'tuned', or the config's
    lr_scale: list = field(default_factory=list)  # a grid of multiples of each config's own lr (0.5,1,2)
    extend_lr: bool = False     # a best lr at the grid's edge: try 2x beyond it, until inside
    max_iters: list = field(default_factory=list)   # budget(s): iterations (none: each config's max_iters)
    max_tokens: list = field(default_factory=list)  # budget(s): equal tokens
    max_flops: list = field(default_factory=list)   # budget(s): equal training FLOPs (GPT.flops_per_token x tokens)
    max_seconds: float = 0.0    # budget: equal training seconds
    recipe: str = ''            # a config file applied after each architecture config (configs/_fineweb124m.py)
    hellaswag: str = ''         # score each finished run on this HellaSwag jsonl (hellaswag.py): a column ('' = none)
    hellaswag_limit: int = 0    # with --hellaswag: its first N items only (0 = all)
    jobs: int = 1               # runs at once, each with cores/jobs threads
    threads: int = 0            # CPU threads per run (in its key); 0 = cores/jobs
    results: str = ''           # results file (JSON lines); '' = <out_prefix>/results.jsonl; --report: a,b reads several
    report: bool = False        # tables and plots from the results file only, no training
    quick: bool = False         # the machinery in about a minute: gpt, llama, gmlp at 2x64, 100 iterations, 2 seeds x 2 lrs
    out_prefix: str = 'out-sweep'  # run directories (and the default results file) go here
    plot: bool = False          # --plot DIR [DIR ...]: plot existing runs
    json: bool = False          # print JSON instead of markdown tables
    png: str = ''               # where plots go; '' = the results file's name with .png

    def __post_init__(self):
        require(self, 'seeds jobs', lambda v: v >= 1, "must be at least 1")
        require(self, 'threads', lambda v: v >= 0, "must not be negative (0 = cores/jobs)")
        require(self, 'max_seconds', lambda v: 0 <= v < math.inf,
                "must be a finite number, not negative")
        require(self, 'hellaswag_limit', lambda v: v >= 0, "must not be negative (0 = every item)")


# --quick: three blocks, two seeds, two learning rates, 2 x 64 at a 64-byte context (where gMLP's
# spatial weights let it match gpt's parameters), 100 iterations
QUICK = dict(configs=['gpt', 'llama', 'gmlp'], max_iters=['100'], seeds=2,
             learning_rate=['2e-3', '4e-3'], sizes=['1x32', '2x64'], jobs=2)
QUICK_TRAIN = ['--eval_iters=10', '--block_size=64']


@dataclass
class Plan:
    """One run of a sweep: what it is (its key and summary fields), where, and how to train it."""
    key: dict           # the resolved run: the record of this run is found by it
    fields: dict        # what a record shows of it: config, size, seed, lr, budget, schedule, ...
    run_dir: str
    cmd: list           # train.py's command for the whole run from scratch
    iters: int          # the iteration it ends at (None: max_seconds)
    cost: float         # training FLOPs of the run, for the ETA
    trunk: str = None   # wsd: the folder of the constant-lr run it branches from, else None
    trunk_cmd: list = None  # that run's command, less its --max_iters
    branch_at: int = 0  # wsd: the iteration where its cooldown starts
    derived: dict = field(default_factory=dict)  # set by the sweep, not by the user or the recipe
    warmup_kept: bool = False  # the warmup is the setting's, at every budget: given, or wsd's


def parse_size(text):
    """'4x128' -> (n_layer 4, n_embd 128, n_head 4): heads of 32 channels."""
    try:
        n_layer, n_embd = (int(v) for v in text.lower().split('x'))
    except ValueError:
        raise UsageError(f"size {text!r} is not LAYERSxWIDTH (e.g. 4x128)") from None
    if n_layer < 1 or n_embd < 32 or n_embd % 32:
        raise UsageError(f"size {text!r}: need at least 1 layer "
                         "and a width that is a multiple of 32")
    return dict(n_layer=n_layer, n_embd=n_embd, n_head=n_embd // 32)


def budget_of(sweep):
    """(kind, [values]) of the one budget given, else ('max_iters', [0]): each config's own."""
    given = [k for k in BUDGETS if getattr(sweep, k)]
    if len(given) > 1:
        raise UsageError(f"give one budget, not {' and '.join(given)}")
    if not given:
        return 'max_iters', [0]
    kind = given[0]
    if kind == 'max_seconds':
        return kind, [sweep.max_seconds]
    return kind, sorted(set(numbers(kind, getattr(sweep, kind),
                                    float if kind == 'max_flops' else integer)))


def threads_per_run(sweep):
    return sweep.threads or max(1, cores() // sweep.jobs)


def integer(text):
    """'4200' or '8.5e6' as an int; a ValueError for '1.5'."""
    if not float(text).is_integer():
        raise ValueError(text)
    return int(float(text))


def digest(key):
    return hashlib.sha256(run_id(key).encode()).hexdigest()[:10]


def plan_run(path, sweep, overrides, *, seed, lr, size, budget=None):
    """One run's train.py command, key (the run as train.py will resolve it, less NO_EFFECT, with
    the data's fingerprint) and folder (named by the key). Token and FLOPs budgets become iterations
    where the lr schedule ends: every architecture decays fully at the budget whatever its FLOPs."""
    name = os.path.basename(path)[:-3]
    recipe = [sweep.recipe] if sweep.recipe else []  # applied after the config: its keys win
    flags = keys_given(overrides)  # the user's keys; with the recipe's: never replaced by the sweep
    given = flags | set(exec_config_file(sweep.recipe) if recipe else ())
    args = [path, *recipe, *overrides, *(f'--{k}={v}' for k, v in (size or {}).items()),
            f'--seed={seed}']
    if lr:
        args += [f'--learning_rate={lr}'] + ([] if 'min_lr' in given else [f'--min_lr={lr / 10}'])
    cfg = parse_config(TrainConfig, args)
    if 'init_from' in given or cfg.init_from != 'scratch':
        raise UsageError(f"{name}: init_from={cfg.init_from!r}: a sweep starts each run itself and "
                         "resumes a stopped one (rerun the same sweep); leave init_from out")
    kind, values = budget_of(sweep)
    value = values[0] if budget is None else budget
    tokens_per_iter = cfg.batch_size * cfg.gradient_accumulation_steps * cfg.block_size
    meta = read_meta(cfg.data_dir) if os.path.isdir(cfg.data_dir) else None
    vocab = cfg.vocab_size or (meta or {}).get('vocab_size') or 50304
    try:  # (match_params can be checked once the vocabulary is known)
        fpt = count_flops(GPTConfig(**{**cfg.model_args(), 'vocab_size': vocab}))
    except ValueError as e:
        raise UsageError(f"{name}: {e}") from None
    iters = cfg.max_iters
    if kind == 'max_iters':
        iters = value = value or cfg.max_iters
    elif kind != 'max_seconds':  # tokens or FLOPs
        iters = math.ceil(value / (tokens_per_iter * (fpt if kind == 'max_flops' else 1)))
    wsd = cfg.decay_lr and cfg.lr_schedule == 'wsd'
    if 'lr_decay_iters' in flags and cfg.lr_decay_iters != iters and kind != 'max_seconds':
        raise UsageError(f"--lr_decay_iters={cfg.lr_decay_iters}: a sweep ends each run's schedule "
                         f"at its budget ({iters} iterations here); leave --lr_decay_iters out, or "
                         "give the budget instead")
    budget = {'max_iters': iters if kind != 'max_seconds' else 10 ** 12, 'lr_decay_iters': iters,
              'always_save_checkpoint': True}  # stopped anywhere, it loses an eval_interval at most
    derived = {}  # what the sweep set that neither the user nor the recipe did: said up front
    # warmup: 10% of a short budget at most, unless given; a wsd run keeps the config's (its runs at
    # every budget share their beginning)
    kept = 'warmup_iters' in given or wsd
    if not kept and cfg.warmup_iters > iters // 10:
        budget['warmup_iters'] = derived['warmup_iters'] = max(iters // 10, 0)
    if 'eval_interval' not in given and kind != 'max_seconds':  # EVALS points a curve
        budget['eval_interval'] = derived['eval_interval'] = max(1, iters // EVALS)
    if kind != 'max_iters':
        budget[kind] = value
    try:
        run = dataclasses.replace(cfg, **budget)
    except ValueError as e:  # a kept warmup too long for this budget: the two ways out
        def room(n):  # the longest warmup a budget of n iterations has room for
            return cfg.cooldown_start(n) if wsd else n - 1
        fix = '' if not (kept and cfg.decay_lr and room(iters) < cfg.warmup_iters) else (
            f"; give --warmup_iters={max(room(iters), 0)} or less, or budgets of "
            f"{next(n for n in itertools.count(iters) if room(n) >= cfg.warmup_iters)} iterations "
            "or more")
        raise UsageError(f"{name} at {kind}={value:g}: {e}{fix}") from None
    size_label = f"{cfg.n_layer}x{cfg.n_embd}"
    key = {'config': name, 'budget': kind, 'budget_value': value, 'data': fingerprint(meta),
           **{k: v for k, v in dataclasses.asdict(run).items() if k not in NO_EFFECT},
           'data_dir': os.path.normpath(cfg.data_dir)}  # data/x/ is data/x
    if resolve_device(run.device) == 'cpu':  # threads change a CPU run's sums: another run
        key['threads'] = threads_per_run(sweep)
    if sweep.hellaswag:  # a record with the score is another record
        key['hellaswag'] = {'items': sha256_file(sweep.hellaswag)[:12],
                            'limit': sweep.hellaswag_limit}
    # which val batches score a run, in words: equal words, the same text
    val_set = (f"{run.eval_iters} x {run.batch_size} x {run.block_size} tokens of val, "
               + ("each run's own seed" if run.eval_seed == -1 else f"eval_seed {run.eval_seed}"))
    fields = dict(config=name, size=size_label, seed=seed, lr=cfg.learning_rate,
                  optimizer=cfg.optimizer, budget=kind, budget_value=value, data_dir=cfg.data_dir,
                  block_size=cfg.block_size, batch_size=cfg.batch_size,
                  schedule=cfg.lr_schedule if cfg.decay_lr else 'constant', val_set=val_set)
    label = f"{name}-{size_label}-s{seed}-lr{cfg.learning_rate:g}-{cfg.optimizer}"
    run_dir = os.path.join(sweep.out_prefix,
                           f"{label}{'-wsd' if wsd else ''}-{kind}{value:g}-{digest(key)}")

    def train(out_dir, *flags):  # train.py's command into out_dir
        return [sys.executable, TRAIN, *args, f'--out_dir={out_dir}', '--log_interval=50', *flags]
    cmd = train(run_dir, *(f'--{k}={v}' for k, v in budget.items()))
    plan = Plan(key, fields, run_dir, cmd, None if kind == 'max_seconds' else iters,
                iters * tokens_per_iter * fpt, derived=derived, warmup_kept=kept)
    if wsd and kind != 'max_seconds':  # branched from the constant-lr run of the same settings
        trunk_key = {k: v for k, v in key.items() if k not in LENGTH}
        plan.trunk = os.path.join(sweep.out_prefix, f"{label}-wsd-trunk-{digest(trunk_key)}")
        plan.branch_at = run.cooldown_start()
        plan.trunk_cmd = train(plan.trunk, '--max_tokens=0', '--max_flops=0', '--max_seconds=0',
                               '--always_save_checkpoint=True',
                               f'--warmup_iters={run.warmup_iters}',
                               f'--eval_interval={run.eval_interval}')
    return plan


def learning_rates(sweep, records, first):
    """The lr grid for one config at one size (`first`: its plan at seed 1, the config's lr): the
    values given, multiples of the config's own (lr_scale), or 'tuned': the best mean of the results
    file's runs of the whole setting of `first` but seed, lr, size (this one where a grid ran here)
    and budget (the sweep's largest if a grid ran there; a warmup kept at every budget is the
    setting's: warmup_kept), said; none is a one-line error."""
    if sweep.learning_rate and sweep.lr_scale:
        raise UsageError("give --learning_rate (a grid, or tuned) or --lr_scale (multiples of each "
                         "config's lr), not both")
    if sweep.learning_rate == ['tuned']:
        key, kind, values = first.key, *budget_of(sweep)
        # a warmup kept at every budget is the setting's; the size: tuned_lr prefers this one
        drop = (*(k for k in BUDGET if not (k == 'warmup_iters' and first.warmup_kept)), *SHAPE,
                'budget', 'hellaswag')
        want = setting({'key': key, 'data_dir': first.fields['data_dir']}, drop)
        same = [r for r in records if setting(r, drop) == want and r['config'] == key['config']]
        size = first.fields['size']
        best = tuned_lr(same, size, (kind, max(values)))
        if best is None:  # said with the settings its runs of that config differ in, if any
            diff = sorted({k for r in records if r['config'] == key['config']
                           for k in differing([setting(r, drop), want])})
            raise UsageError(f"--learning_rate=tuned: the results file has no finished runs of "
                             f"{key['config']} with this sweep's setting to tune from"
                             + (f" (those it has differ in {', '.join(diff)})" if diff else "")
                             + "; run an lr grid first (--learning_rate=5e-4,1e-3,2e-3), or pass "
                             "the setting of the runs to tune from")
        lr, at, (kind_at, value) = best
        print(f"{key['config']} at {size}: --learning_rate=tuned is {lr:g}, the best of this "
              f"setting's lr grid at {at}, {kind_at}={value:g}", file=sys.stderr)
        return [lr]
    if sweep.lr_scale:
        return list(dict.fromkeys(first.fields['lr'] * f
                                  for f in numbers('lr_scale', sweep.lr_scale, float)))
    if not sweep.learning_rate:
        return [0.0]  # the config's own
    return list(dict.fromkeys(numbers('learning_rate', sweep.learning_rate, float)))  # each once


def plan_sweep(sweep, paths, overrides, records):
    sizes = [parse_size(s) for s in sweep.sizes] if sweep.scaling else [None]
    cells = [(path, size) for size in sizes for path in paths]  # size: a dict of overrides, or None
    grids = [learning_rates(sweep, records, plan_run(p, sweep, overrides, seed=1, lr=0, size=s))
             for p, s in cells]
    _, values = budget_of(sweep)
    # seed-major order: an interrupted sweep has compared every config on the same seeds so far
    return [plan_run(path, sweep, overrides, seed=seed, lr=grid[k], size=size, budget=v)
            for seed in range(1, sweep.seeds + 1) for k in range(max(map(len, grids)))
            for (path, size), grid in zip(cells, grids) if k < len(grid) for v in values]


def grid_cell(key):
    """A run's setting less its seed and lr: the runs of one lr grid."""
    return run_id({k: v for k, v in key.items() if k not in ('seed', 'learning_rate', 'min_lr')})


def beyond_the_edges(sweep, overrides, plans, records, tried):
    """Plans for the runs that move a best lr off its grid's edge: wherever a config's best lr at a
    size and budget (on the seeds every grid point has) is the largest (smallest) tried, the same
    seeds at twice (half) it, at that budget."""
    firsts, by_cell, out = {}, {}, []  # a cell's first plan, its records
    for p in plans:
        firsts.setdefault(grid_cell(p.key), p)
    for r in records:
        by_cell.setdefault(grid_cell(r['key']), []).append(r)
    for c, p in firsts.items():
        rs = by_cell.get(c, [])
        lrs = sorted({r['lr'] for r in rs})
        if len(lrs) < 2:
            continue
        best = best_lr(rs)
        step = 2.0 if best == lrs[-1] else 0.5 if best == lrs[0] else None
        size = {k: p.key[k] for k in SHAPE} if sweep.scaling else None
        for seed in sorted({r['seed'] for r in rs if r['lr'] == best}) if step else []:
            plan = plan_run(p.cmd[2], sweep, overrides, seed=seed, lr=best * step, size=size,
                            budget=p.fields['budget_value'])
            if plan.run_dir not in tried:
                out.append(plan)
    return out


class Sweep:
    """The runs of one sweep command as they go: the results file (this sweep's alone while it runs:
    main() holds its lock), the threads' environment, the stop, and the progress."""

    def __init__(self, sweep, results_path, stopper):
        self.results, self.stopper, self.score_items = results_path, stopper, sweep.hellaswag
        self.env = {**os.environ, 'OMP_NUM_THREADS': str(threads_per_run(sweep)),
                    'SWEEP_PID': str(os.getpid())}
        self.lock, self.t0 = threading.Lock(), time.time()
        self.done = self.left = 0.0  # FLOPs trained so far and still to train, for the ETA
        self.recorded, self.failed, self.stopped = [], [], []
        self.dead_trunks = set()  # constant-lr runs that failed: their later branches are not tried

    def train(self, cmd, resume):
        """train.py via --child: (True, seconds), or (False, why; None or 'stopped' if stopped)."""
        t0 = time.time()
        child = [cmd[0], os.path.abspath(__file__), '--child', *cmd[1:]]
        proc = run_child(self.stopper, child + (['--init_from=resume'] if resume else []),
                         env=self.env)
        if proc is None:
            return False, None
        if proc.returncode and self.stopper:
            return False, 'stopped'
        if proc.returncode and ' is in use: ' in last_line(proc):  # taken since the sweep looked
            return False, f"not started: {last_line(proc)[7:]}; a rerun of this sweep trains it"
        if proc.returncode and '--new_data=True' in last_line(proc):  # advice a sweep cannot take
            run_dir = next(a.split('=', 1)[1] for a in cmd if a.startswith('--out_dir='))
            return False, (f"exit {proc.returncode}: the data in its data_dir changed under this "
                           f"run's checkpoint in {run_dir}; prepare the data it was trained on, or rerun "
                           "the sweep to train it anew on this data (a scratch start: the run there "
                           "goes to prev/ by train.py's rule)")
        if proc.returncode:
            return False, f"exit {proc.returncode}: {last_line(proc)}\n  rerun: {' '.join(cmd)}"
        return True, time.time() - t0

    def branch(self, plan):
        """plan.run_dir (held, with no run it can use) made plan's constant-lr run at the cooldown's
        start: that run trained (or resumed) up to there, then copied in, the checkpoint last,
        once a scratch start's rule took what was there (prev/): True. False when that run is
        already past it (the branch then trains from scratch, the same run); None when stopped or
        failed (said)."""
        state = peek(plan.trunk) or {}
        at = state.get('iter_num')
        if at is not None and at > plan.branch_at:  # a sweep with other budgets took it further
            return False
        if at != plan.branch_at or not state['finished']:
            until = [f'--max_iters={plan.branch_at}',
                     f"--lr_decay_iters={max(plan.key['lr_decay_iters'], plan.branch_at + 1)}"]
            ok, why = self.train(plan.trunk_cmd + until, resume=at is not None)
            at = (peek(plan.trunk) or {}).get('iter_num')
            if ok and at != plan.branch_at:
                ok, why = False, f"it ended at iter {at}, not {plan.branch_at}"
            if not ok:
                if why not in (None, 'stopped') and not why.startswith('not started'):
                    self.dead_trunks.add(plan.trunk)  # failed: its later branches are not tried
                return self.note(plan, None, why, trunk=True)
        give_back = hold_run(plan.trunk)  # (read whole: no other sweep trains it on meanwhile)
        try:
            if (peek(plan.trunk) or {}).get('iter_num') != plan.branch_at:
                return False
            start_over(plan.run_dir)
            for name in ('log.jsonl', 'config.json', 'ckpt.pt'):  # the checkpoint last: a run then
                with open(os.path.join(plan.trunk, name), 'rb') as src:
                    atomic_write(os.path.join(plan.run_dir, name),
                                 lambda f: shutil.copyfileobj(src, f))
        finally:
            give_back()
        return True

    def run(self, plan):
        """Train one planned run (resumed where it stopped, or branched from its constant-lr run)
        and append its record. Its folder is held while the sweep looks and copies: one another
        process holds is not started (said; a rerun trains it); a run there that cannot be used
        goes through a scratch start's rule (prev/), one past the plan is left as it is (said)."""
        wall, branched = 0.0, None
        try:
            give_back = hold_run(plan.run_dir)
            try:
                state = peek(plan.run_dir)
                if state and plan.iters is not None and state['iter_num'] > plan.iters:
                    return self.note(plan, None, f"{plan.run_dir} holds a run past this plan "
                                     f"(iter {state['iter_num']:,} of {plan.iters:,}), left as it "
                                     "is; move it away to train the planned run")
                if state and fingerprint(state['meta']) != plan.key['data']:
                    state = None  # another dataset's: a scratch start takes it (prev/'s rule)
                trunk = self.branch(plan) if plan.trunk and state is None else False
                if trunk is None:
                    return None
                state = peek(plan.run_dir) if trunk else state
            finally:
                give_back()
        except UsageError as e:
            return self.note(plan, None, f"not started: {str(e).partition(';')[0]}; a rerun of "
                             "this sweep trains it" if ' is in use: ' in str(e) else str(e))
        if state and plan.trunk and state['iter_num'] >= plan.branch_at:
            branched = f"{os.path.basename(plan.trunk)} at iter {plan.branch_at}"
        if not (state and state['finished'] and state['iter_num'] == plan.iters):
            ok, wall = self.train(plan.cmd, resume=state is not None)
            if not ok:
                return self.note(plan, None, wall)
        state = peek(plan.run_dir) or {}
        at = state.get('iter_num')
        if not state.get('finished') or (plan.iters is not None and at != plan.iters):
            return self.note(plan, None, f"{plan.run_dir} ended at iter {at} without finishing "
                                         f"its {plan.iters} iterations; not recorded")
        if fingerprint(state['meta']) != plan.key['data']:  # a record says what it trained on
            return self.note(plan, None, f"{plan.run_dir} trained on data "
                                         f"{fingerprint(state['meta'])}, not the "
                                         f"{plan.key['data']} this sweep planned: "
                                         f"{plan.fields['data_dir']} was prepared anew during "
                                         "the sweep; not recorded: rerun the sweep")
        record = record_of(plan, wall, branched, state['meta'])
        if 'hellaswag' in plan.key:  # scored by hellaswag.py before the run counts as recorded
            out = os.path.join(plan.run_dir, 'eval_hellaswag.json')
            limit, device = plan.key['hellaswag']['limit'], plan.key['device']
            proc = run_child(self.stopper, [
                sys.executable, EVAL, f'--out_dir={plan.run_dir}', f'--input={self.score_items}',
                f'--limit={limit}', f'--json={out}', f'--device={device}'], env=self.env)
            if proc is None or proc.returncode:
                return self.note(plan, None, 'stopped' if proc is None or self.stopper
                                 else f"hellaswag.py failed: {last_line(proc)}")
            with open(out) as f:
                r = json.load(f)
            record.update({f'hellaswag_{k}': r[k] for k in ('acc_norm', 'acc', 'n')})
        append_record(self.results, record, kept=plan.run_dir)
        return self.note(plan, record, None)

    def note(self, plan, record, why, trunk=False):
        """Count and print what became of a run."""
        with self.lock:
            if record is not None:
                self.recorded.append(record)
                self.done += plan.cost
                dt = time.time() - self.t0
                eta = dt / max(self.done, 1e-9) * max(self.left - self.done, 0)
                print(f"[{len(self.recorded)}] {os.path.basename(plan.run_dir)}: val "
                      f"{record['val_loss']:.4f} ({record['wall_s']:.0f}s wall; {dt / 60:.1f} min "
                      f"elapsed, ETA {eta / 60:.1f} min)", file=sys.stderr, flush=True)
            elif why == 'stopped' or why is None:
                self.stopped.append(plan)
            else:
                self.failed.append(plan)
                what = f"the constant-lr run {plan.trunk}" if trunk else plan.run_dir
                print(f"  failed: {what} ({why})", file=sys.stderr, flush=True)
        return record


def last_line(proc):
    """What a failed script said last on stderr (its one-line error)."""
    return (proc.stderr.strip().splitlines() or ['?'])[-1]


def run_unit(unit, runs):
    for plan in unit:
        if runs.stopper or plan.trunk in runs.dead_trunks:  # (a failed trunk was said once)
            runs.note(plan, None, None)
        else:
            runs.run(plan)


def run_all(sweep, plans, results_path, stopper):
    """Run every planned run not already in the results file, `jobs` at a time; True when every one
    is recorded. A signal stops them all: the running ones save, none more starts."""
    done = {run_id(r['key']) for r in read_results(results_path)}
    todo = list({run_id(p.key): p for p in plans if run_id(p.key) not in done}.values())  # each once
    runs = Sweep(sweep, results_path, stopper)
    units = {}  # the threads' work, in plan order: a run alone, or the branches of one trunk
    for p in todo:
        units.setdefault(p.trunk or p.run_dir, []).append(p)
    units = [sorted(u, key=lambda p: p.branch_at) for u in units.values()]
    for unit in units:  # the FLOPs each run adds: a branch, its part of the trunk and its cooldown
        for before, p in zip([None] + unit[:-1], unit):
            if p.trunk and before is not None:
                p.cost *= (p.iters - before.branch_at) / p.iters
    runs.left = sum(p.cost for p in todo)
    chains = sum(1 for u in units if u[0].trunk)
    how = f" ({chains} constant-lr runs branched into cooldowns)" if chains else ""
    print(f"{len(todo)} runs to do{how} ({len(done & {run_id(p.key) for p in plans})} already in "
          f"{results_path}), "
          f"{sweep.jobs} at a time, {runs.env['OMP_NUM_THREADS']} thread(s) each; a line per run "
          "gives its process's wall seconds (start-up, evaluations, a branch's constant-lr run and "
          "sharing the cores included), a table's 'train s / run s' its training steps' seconds and "
          "its own clock", file=sys.stderr, flush=True)
    with ThreadPoolExecutor(max_workers=sweep.jobs) as pool:
        futures = [pool.submit(run_unit, u, runs) for u in units]
        while not all(f.done() for f in futures):
            wait(futures, timeout=0.5)  # the main thread stays free for signals
        for f in futures:
            f.result()  # a bug in a thread is a traceback here, not a silent hole
    minutes = (time.time() - runs.t0) / 60
    if stopper:
        kept = {d for p in runs.stopped for d in (p.run_dir, p.trunk)  # branches share a trunk's
                if d and os.path.isfile(os.path.join(d, 'ckpt.pt'))}
        print(f"stopped: {len(runs.recorded)} runs finished and recorded in {results_path} in "
              f"{minutes:.1f} min, {len(runs.stopped)} not finished (their progress kept in "
              f"{len(kept)} checkpoint(s)), {len(runs.failed)} failed; continue with: python "
              f"sweep.py {' '.join(sys.argv[1:])}", file=sys.stderr, flush=True)
        raise SystemExit(stopper.exit_code())
    retry = (f", {len(runs.failed)} failed (fix what their lines above say, then rerun the same "
             "command: it trains only what is not recorded)" if runs.failed else "")
    print(f"sweep: {len(runs.recorded)} runs in {minutes:.1f} min{retry}", file=sys.stderr)
    return not runs.failed


def run_planned(sweep, plans, overrides, results_path, stopper):
    """Run what of `plans` is not recorded, then (--extend_lr) beyond each grid's edge until every
    best lr lies inside (a failed run, a diverged lr, ends no other grid's extension): (every run
    recorded, the plans)."""
    ok, tried = run_all(sweep, plans, results_path, stopper), {p.run_dir for p in plans}
    while sweep.extend_lr:
        more = beyond_the_edges(sweep, overrides, plans, read_results(results_path), tried)
        if not more:
            break
        which = {}  # {(config, size, lr, budget kind): its budgets}
        for f in (p.fields for p in more):
            which.setdefault((f['config'], f['size'], f['lr'], f['budget']), set()).add(f['budget_value'])
        print(f"extending the lr grid: {len(more)} run(s) whose best lr is the grid's edge: " + '; '.join(
            f"{c} {size} at lr {lr:g} ({kind}={', '.join(f'{v:g}' for v in sorted(vs))})"
            for (c, size, lr, kind), vs in which.items()), file=sys.stderr)
        ok, plans = run_all(sweep, more, results_path, stopper) and ok, plans + more
        tried |= {p.run_dir for p in more}
    return ok, plans


def check_data(sweep, data_dirs):
    """Every config's data before any run starts (--quick makes the stdlib corpus it needs)."""
    for data_dir in data_dirs:
        stdlib = os.path.normpath(data_dir) == os.path.join('data', 'stdlib_byte')
        if sweep.quick and not os.path.exists(data_dir) and stdlib:
            print(f"--quick: preparing {data_dir} from this Python's standard library "
                  "(python prepare.py --dataset=stdlib)", file=sys.stderr)
            proc = subprocess.run([sys.executable, os.path.join(HERE, 'prepare.py'),
                                   '--dataset=stdlib'], capture_output=True, text=True)
            if proc.returncode:
                raise UsageError(f"python prepare.py --dataset=stdlib failed: {last_line(proc)}")
        open_dataset(data_dir)  # (its meta.json checked, the tokenizer it describes too)


def announce(plans):
    """Say every value the sweep chose (never one the user or the recipe set), and where evaluation
    would take more than a quarter of a run's time."""
    said = {}
    for p in plans:
        for k, v in p.derived.items():
            said.setdefault(k, {}).setdefault(p.fields['budget_value'], v)
    why = {'eval_interval': f"{EVALS} evaluations a run",
           'warmup_iters': "10% of the budget at most"}
    for k, at in said.items():
        values = ', '.join(f"{v} at {b:g}" for b, v in sorted(at.items())[:4])
        print(f"note: the sweep sets {k} ({why[k]}): {values}{' ...' if len(at) > 4 else ''}; "
              f"give --{k} to set it yourself", file=sys.stderr)
    worst = (0,)
    for p, k in [(p, p.key) for p in plans if p.iters]:
        evals = p.iters // k['eval_interval'] + 2  # (step 0 and the end)
        forward = evals * 2 * k['eval_iters'] / 3  # a forward pass: about a third of a step
        share = forward / (forward + p.iters * k['gradient_accumulation_steps'])
        worst = max(worst, (share, p.fields['budget_value'], evals, k['eval_iters']))
    if worst[0] > 0.25:
        share, b, evals, n = worst
        print(f"note: evaluation will take about {share:.0%} of a run's time at budget {b:g} "
              f"({evals} evaluations x 2 splits x {n} batches); "
              "fewer with --eval_interval or --eval_iters", file=sys.stderr)


def check_arguments(sweep, argv):
    """Everything the command line alone can get wrong, said now in one line; the keys it gives."""
    given = keys_given(argv)
    budget_of(sweep)  # a bad budget is one line now, before anything runs; a bad lr too
    for key in [k for k in ('learning_rate', 'lr_scale')
                if getattr(sweep, k) not in ([], ['tuned'])]:
        numbers(key, getattr(sweep, key), float)
    if ',' in sweep.results and not sweep.report:
        raise UsageError(f"--results={sweep.results}: a sweep that trains writes one results file; "
                         "several (comma-separated) are read together by --report only")
    for flag, path in [('recipe', sweep.recipe), ('hellaswag', sweep.hellaswag),  # a file or none
                       *(('results', p) for p in sweep.results.split(','))]:
        if path and os.path.exists(path) and not os.path.isfile(path) and not os.path.isdir(path):
            raise UsageError(f"--{flag}={path!r} is not a regular file "
                             "(a device, pipe or socket); name a file")
        if path and flag != 'results' and not os.path.isfile(path):
            raise (config_not_found(path, '--recipe') if flag == 'recipe' else
                   UsageError(f"--{flag}={path!r} not found"))
        if path and flag != 'results' and not os.access(path, os.R_OK):
            raise UsageError(f"cannot read {path!r} (permission denied)")
    if sweep.hellaswag:  # read now, not after the first run has trained
        read_hellaswag(sweep.hellaswag, sweep.hellaswag_limit)
    if 'sizes' in given and not sweep.scaling:
        raise UsageError("--sizes is read by --scaling only: add --scaling, or set one size with "
                         "--n_layer, --n_embd and --n_head")
    return given


def plot_runs(run_dirs, png):
    """Val loss against tokens and against training seconds, a line per run (False: no pyplot)."""
    plt = pyplot()
    if plt is None:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for run_dir in run_dirs:
        evals = [r for r in read_log(run_dir) if 'val_loss' in r]
        label = os.path.basename(os.path.normpath(run_dir))
        for ax, key in zip(axes, ('tokens', 'train_s')):
            xs = [r.get(key, r.get('elapsed_s', 0)) for r in evals]
            plot_curves(ax, xs, [[r['val_loss'] for r in evals]], label)
    return save_png(fig, png, axes, ('tokens', 'training seconds'), 'val loss (nats/token)')


def main(argv):
    if not argv:  # every config at its default budget: not what a first try should start unasked
        raise UsageError("a bare sweep trains every config for hours on a CPU; see it work first: "
                         "python sweep.py --quick (about a minute), or name what to compare: "
                         "--configs=gpt,gmlp --max_iters=500 (python sweep.py --help)")
    own, overrides = split_flags(argv, SweepConfig, TrainConfig)
    positional = [a for a in own if not a.startswith('--')]
    sweep = parse_config(SweepConfig, [a for a in own if a.startswith('--')], config_files=False,
                         doc=__doc__, usage="python sweep.py [config.py ... | --configs=NAME,...] "
                                            "[--key=value ...]")
    if sweep.png:  # an output that is a device or a pipe: refused now, never replaced by a file
        regular_file(sweep.png, '--png', output=True)
    if sweep.plot:
        if not positional:
            raise UsageError("--plot needs run directories: "
                             "python sweep.py --plot out-gpt out-gmlp")
        rows = [run_summary(d) for d in positional]
        print(json.dumps(rows, indent=1) if sweep.json else markdown_table(rows, RUN_COLUMNS))
        png = sweep.png or os.path.join(sweep.out_prefix, 'runs.png')
        if plot_runs(positional, png):
            print(f"plot: {png}", file=sys.stderr)
        return rows
    given = check_arguments(sweep, argv)
    if sweep.quick:  # a minute's version of the same sweep, at tiny sizes
        users = given | ({'configs'} if positional else set())  # the user's keys win, and
        users |= {'max_iters'} if any(getattr(sweep, k) for k in BUDGETS) else set()  # a budget
        sweep = dataclasses.replace(sweep, **{k: v for k, v in QUICK.items() if k not in users})
        overrides = [*QUICK_TRAIN, *overrides]
        if not sweep.scaling and not {'n_layer', 'n_embd', 'n_head'} & given:
            overrides = ['--n_layer=2', '--n_embd=64', '--n_head=2', *overrides]
    paths = config_paths(sweep.configs + positional)
    recipe = [sweep.recipe] if sweep.recipe else []
    data_dirs = {parse_config(TrainConfig, [path, *recipe, *overrides]).data_dir: path
                 for path in paths}  # every override is valid for every config before anything runs
    for path in paths if recipe else ():  # a recipe comes after each config: it must keep its block
        alone, ours = (parse_config(TrainConfig, [path, *r, *overrides]) for r in ([], recipe))
        changed = ', '.join(f"{k}={getattr(ours, k)!r}" for k in ARCH[1:]
                            if getattr(alone, k) != getattr(ours, k))
        if changed:
            raise UsageError(f"--recipe={sweep.recipe} changes {os.path.basename(path)[:-3]}'s "
                             f"architecture ({changed}), so its rows would be named for a block "
                             "they did not train; keep architecture keys in the config files")
    results_path = sweep.results or os.path.join(sweep.out_prefix, 'results.jsonl')
    png = sweep.png or os.path.splitext(results_path.split(',')[0])[0] + '.png'
    ok = True
    if not sweep.report:
        check_writable(results_path)  # (files the user named first, then what the runs need)
        check_data(sweep, data_dirs)
        if sweep.max_seconds and sweep.jobs > 1:
            print("note: max_seconds with jobs > 1: runs share the cores, "
                  "so equal seconds are not equal work", file=sys.stderr)
        try:  # made now, before any run starts
            os.makedirs(sweep.out_prefix, exist_ok=True)
        except OSError as e:
            raise UsageError(f"cannot create {e.filename!r} ({e.strerror}); "
                             "pass --out_prefix=a/folder/you/can/write") from None
        with Signals("stopping: {n} running train.py runs save their checkpoints and stop, none "
                     "more starts", forward=True) as stopper:
            # the results file is this sweep's while it runs: another sweep on it waits, then finds
            # recorded what this one trained (a run is trained and recorded once), and plans from
            # it (a tuned lr from the grid that sweep ran)
            give_back = hold(results_path, file=True, stop=stopper,
                             waiting=f"another sweep is writing {results_path}")
            if give_back is None:  # stopped while it waited
                raise SystemExit(stopper.exit_code())
            try:
                plans = plan_sweep(sweep, paths, overrides, read_results(results_path))
                announce(plans)
                ok, plans = run_planned(sweep, plans, overrides, results_path, stopper)
            finally:
                give_back()
        only, records = {run_id(p.key) for p in plans}, read_results(results_path)  # this sweep's
        if sweep.extend_lr:  # runs (--report alone: the whole file) and, of its seeds, the grids it
            mine = {(grid_cell(p.key), p.key['seed']) for p in plans}  # extends (a rerun's too)
            only |= {run_id(r['key']) for r in records if (grid_cell(r['key']), r['seed']) in mine}
        if not ok and not any(run_id(r['key']) in only for r in records):
            raise UsageError("every run failed (their lines above say why); nothing to report")
    rows = sweep_report(sweep, results_path, png, only=None if sweep.report else only)
    if not ok:
        raise UsageError(f"some runs failed (see above); {results_path} keeps every finished run")
    return rows


# -----------------------------------------------------------------------------
# many runs as child processes: a stop that reaches every one

def run_child(stopper, cmd, **kwargs):
    """cmd in a session of its own (a terminal's Ctrl-C reaches it once, through `stopper`), stderr
    kept in a file (no pipe to close when this process dies): a CompletedProcess, or None once
    stopped."""
    with tempfile.TemporaryFile('w+') as err:
        with stopper.lock:
            if stopper:
                return None
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, text=True,
                                    start_new_session=True, **kwargs)
            stopper.procs.add(proc)
        try:
            proc.wait()
        finally:
            with stopper.lock:
                stopper.procs.discard(proc)
        err.seek(0)
        return subprocess.CompletedProcess(cmd, proc.returncode, None, err.read())


# -----------------------------------------------------------------------------
# a run as this sweep starts it: train.py, stopped by the sweep's death

def stop_with_the_sweep():
    """`python sweep.py --child train.py ARGS`, how Sweep starts a run: train.py, stopped as by
    SIGTERM (it saves) when the sweep dies, even by SIGKILL. Linux's parent-death signal, SIGUSR2
    (once per thread of the dying sweep: not SIGTERM, whose second aborts), becomes one SIGTERM."""
    pid = os.environ.get('SWEEP_PID', '')
    if not pid.isdigit() or not sys.platform.startswith('linux'):
        return
    try:
        import ctypes
        if ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGUSR2):  # PR_SET_PDEATHSIG
            return
    except (OSError, AttributeError):
        return
    died = []

    def on_sweep_died(signum, frame):
        if not died:
            died.append(signum)
            print("\nthe sweep that started this run has died: stopping after this step and saving "
                  "a checkpoint", file=sys.stderr, flush=True)
            os.kill(os.getpid(), signal.SIGTERM)
    signal.signal(signal.SIGUSR2, on_sweep_died)
    if os.getppid() != int(pid):  # the sweep died before the prctl above took effect
        raise SystemExit(128 + signal.SIGTERM)


if __name__ == '__main__':
    if sys.argv[1:2] == ['--child']:  # a run the sweep started: see stop_with_the_sweep
        stop_with_the_sweep()
        sys.argv = sys.argv[2:]
        runpy.run_path(sys.argv[0], run_name='__main__')
    else:
        run_main(main)
