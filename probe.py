"""
Multi-query associative recall (MQAR): can a token mixer find, by content, a token it saw earlier?

    python probe.py --quick                           # smoke run: two mixers, one tiny cell
    python probe.py                                   # the default grid (RESULTS.md §5)
    python probe.py --views=mixer,block --pairs=4,16  # any grid: also configs, widths, seq_lens
    python probe.py --full                            # Zoology's grid (its first line: cells and steps)
    python probe.py --replot                          # table and PNG again from the results file

Zoology (Arora et al. 2023, arXiv:2312.04927) measures the token mixer: its MQAR models have no
channel MLP, 2 layers, batch 512, AdamW (weight decay 0.1) on a cosine schedule, the best of a
learning-rate grid up to 1e-2, loss on the answers only. Two views of every config of configs/, at a
shared small shape (2 layers, width d, heads of 32, block_size T):
- mixer (the default, Zoology's): the config's token mixer, its channel MLP removed (ffn='none':
  attention or MDHA alone, with the config's norms, positions and heads); gMLP and aMLP, whose SGU
  is the mixer, stay whole. Configs with one mixer share a run.
- block: the whole block as the config defines it.

A sequence (FILLER = 0, keys from 1..V/2-1, values from V/2..V-1, keys distinct in a sequence):

    k1 v1 k2 v2 ... kN vN  0 0 k2 0 k1 0 0 ... kN 0        inputs: N pairs, then N queries
    -1 -1 ..................  -1 v2 -1 v1 -1 ... vN -1      targets: the paired value at each query

No answer appears after its query, so no shortcut scores above 1/N (a value of the sequence at
random). Training sequences are fresh every step; the held-out set is fixed. Each cell trains for
`budget` x the steps of the emergence law (recall needs about 10^5.7 sqrt(batch x T) tokens, Aoyama
et al. arXiv:2511.16893), stopping early at stop_acc, at each learning rate in turn until one
solves it. Each run appends its record to the results file as it ends; a rerun skips finished runs.
"""
import os
import signal

if __name__ == "__main__":  # Ctrl-C while torch imports (seconds): exit 130, quietly
    signal.signal(signal.SIGINT, lambda *_: os._exit(130))

import contextlib
import hashlib
import itertools
import json
import math
import sys
import time
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from configurator import UsageError, hold, parse_config, regular_file, require, run_main
from guards import Signals, duration
from model import GPTConfig, GPT
from report import markdown_table, pyplot, save_png
from stats import (append_record, arch_key, check_writable, config_paths, keys_given, machine,
                   numbers, read_results, split_flags)
from train import TrainConfig, train_step

FILLER = 0  # the pad token between queries; never a key or a value
VIEWS = ('mixer', 'block')


@dataclass
class ProbeConfig:
    configs: list = field(default_factory=list)  # names (gpt,gmlp) or files; default: every arch
    views: list = field(default_factory=lambda: ['mixer'])  # mixer (token mixer alone) and/or block
    widths: list = field(default_factory=lambda: ['64'])  # model widths d (n_embd)
    seq_lens: list = field(default_factory=lambda: ['64'])  # sequence lengths T (also block_size)
    pairs: list = field(default_factory=lambda: ['4'])  # key-value pairs N per sequence (3N <= T)
    n_layer: int = 2           # layers of every model (two: an induction-style lookup needs them)
    head_size: int = 32        # n_head = width // head_size for attention blocks
    vocab_size: int = 256      # FILLER + keys (1..V/2-1) + values (V/2..V-1): N <= V/2 - 1
    batch_size: int = 512      # sequences per step, fresh ones every step (Zoology's 512)
    learning_rate: list = field(default_factory=lambda: ['3e-3', '1e-2', '1e-3'])  # tried in turn
    budget: float = 1.0        # steps: budget x the emergence law's 10^5.7 sqrt(B T) tokens / B T
    warmup_frac: float = 0.1   # linear warmup over this share of the steps, then cosine to lr/10
    weight_decay: float = 0.1  # AdamW decoupled weight decay (GPT.configure_optimizers)
    eval_interval: int = 100   # steps between held-out evaluations (the curve's points)
    eval_seqs: int = 512       # held-out sequences per cell, the same ones every evaluation
    stop_acc: float = 0.99     # a run stops early, and the cell counts as solved, at this accuracy
    seed: int = 0              # sets the init, the training sequences and the held-out set
    results: str = ''          # JSON lines; '' = out-probe/results.jsonl (quick.jsonl with --quick)
    png: str = ''              # the plot; '' = the results file's name with .png
    replot: bool = False       # table and PNG from the results file only, no training
    quick: bool = False        # about a minute: gpt and gmlp mixers at T=16, N=2, budget 0.05
    full: bool = False         # Zoology's grid: both views, T=64,256, N=4,16,64, d=64,128

    def __post_init__(self):
        require(self, 'n_layer head_size batch_size eval_interval eval_seqs', lambda v: v >= 1,
                "must be at least 1")
        require(self, 'vocab_size', lambda v: v >= 6,
                "is too small: it holds FILLER, keys and values")
        require(self, 'stop_acc', lambda v: 0 < v <= 1, "must be in (0, 1]")
        require(self, 'budget', lambda v: 0 < v < math.inf, "must be a positive number")
        require(self, 'warmup_frac', lambda v: 0 <= v < 1, "must be in [0, 1)")
        require(self, 'weight_decay', lambda v: 0 <= v < math.inf,
                "must be a finite number, not negative")
        require(self, 'seed', lambda v: 0 <= v < 2**63, "must be in [0, 2**63)")
        bad = [v for v in self.views if v not in VIEWS]
        if bad:
            raise ValueError(f"views: {bad[0]!r} is not one of {', '.join(VIEWS)}")


QUICK = dict(configs=['gpt', 'gmlp'], seq_lens=['16'], pairs=['2'], vocab_size=32, batch_size=64,
             budget=0.05, learning_rate=['1e-2'], eval_interval=50,
             results=os.path.join('out-probe', 'quick.jsonl'))
FULL = dict(views=['mixer', 'block'], widths=['64', '128'], seq_lens=['64', '256'],
            pairs=['4', '16', '64'],
            learning_rate=['1e-4', '4.6e-4', '2.2e-3', '1e-2'])  # Zoology's logspace(-4, -2, 4)


def law_steps(probe, T):
    """Optimizer steps a cell trains for: budget x the emergence law's 10^5.7 sqrt(B T) tokens."""
    tokens = 10 ** 5.7 * math.sqrt(probe.batch_size * T)
    return max(1, math.ceil(probe.budget * tokens / (probe.batch_size * T)))


# -----------------------------------------------------------------------------
# the data: a pure function of (seed, what), generated in memory

def mqar_batch(rng, *, batch, T, n_pairs, vocab):
    """(x, y): int64 arrays (batch, T) of MQAR sequences drawn from the numpy Generator `rng`: x
    holds N = n_pairs key-value pairs at 0..2N-1, then the N keys again in random order at random
    positions of the rest, FILLER elsewhere; y: the paired value at those queries, -1 elsewhere."""
    N, half = n_pairs, vocab // 2
    if N > half - 1:
        raise UsageError(f"N={N} pairs need {N} distinct keys but vocab_size={vocab} has "
                         f"{half - 1}; raise vocab_size to at least {2 * (N + 1)}")
    if 3 * N > T:
        raise UsageError(f"N={N} pairs and N queries do not fit in T={T} positions (needs 3N <= T)")
    rows = np.arange(batch)[:, None]
    keys = 1 + np.argsort(rng.random((batch, half - 1)), axis=1)[:, :N]  # N distinct keys per row
    values = rng.integers(half, vocab, size=(batch, N))
    x = np.full((batch, T), FILLER, dtype=np.int64)
    y = np.full((batch, T), -1, dtype=np.int64)
    x[:, 0:2 * N:2], x[:, 1:2 * N:2] = keys, values
    # the query slots, and which pair each query asks for
    where = 2 * N + np.sort(np.argsort(rng.random((batch, T - 2 * N)), axis=1)[:, :N], axis=1)
    order = np.argsort(rng.random((batch, N)), axis=1)
    x[rows, where] = keys[rows, order]
    y[rows, where] = values[rows, order]
    return x, y


def batch_at(seed, *key, batch, T, n_pairs, vocab):
    """Batch `key` of a run as tensors: (seed, 0, step) trains, (seed, 1) is the held-out set."""
    x, y = mqar_batch(np.random.default_rng([seed, T, n_pairs, vocab, *key]), batch=batch, T=T,
                      n_pairs=n_pairs, vocab=vocab)
    return torch.from_numpy(x), torch.from_numpy(y)


def accuracy(logits, targets):
    """Share of answer positions (targets != -1) whose argmax is the target."""
    mask = targets != -1
    return (logits.argmax(dim=-1)[mask] == targets[mask]).float().mean().item()


def accuracy_by_distance(logits, x, y, n_pairs, buckets=4):
    """[[from, to, accuracy, answers], ...]: accuracy by how far back a query's key stands (its
    position minus the key's), in `buckets` equal ranges of the distances 1..T."""
    rows, t = (y != -1).nonzero(as_tuple=True)
    key_at = (x[rows, :2 * n_pairs:2] == x[rows, t][:, None]).float().argmax(dim=1) * 2
    dist, right = (t - key_at).numpy(), (logits.argmax(dim=-1)[rows, t] == y[rows, t]).numpy()
    edges = np.linspace(1, x.size(1), buckets + 1)
    which = np.clip(np.searchsorted(edges, dist, side='right') - 1, 0, buckets - 1)
    return [[int(edges[b]), int(edges[b + 1]), float(right[which == b].mean()),
             int((which == b).sum())] for b in range(buckets) if (which == b).any()]


# -----------------------------------------------------------------------------
# one run: a config's mixer or block at the probe's shape, trained as train.py trains

def model_args(path, probe, *, view, width, T, overrides=()):
    """The GPTConfig fields of config file `path` (with train.py `overrides`: --bias=True) at the
    probe's shape; a transformer block's channel MLP removed in the mixer view (ffn='none')."""
    cfg = parse_config(TrainConfig, [path, *overrides])
    args = {**cfg.model_args(), 'n_layer': probe.n_layer, 'n_embd': width,
            'n_head': max(1, width // probe.head_size), 'block_size': T,
            'vocab_size': probe.vocab_size, 'dropout': 0.0, 'match_params': '', 'ffn_hidden': 0,
            'gmlp_d_ffn': 0}
    if view == 'mixer' and args['block'] == 'transformer':
        args['ffn'] = 'none'
    try:
        GPTConfig(**args)
    except ValueError as e:
        raise UsageError(f"{path} at width {width}, T={T}: {e}") from None
    return args


def run_key(probe, args, *, view, T, N, lr):
    """What identifies a run in the results file: everything that changes its outcome."""
    model = hashlib.sha256(json.dumps(args, sort_keys=True).encode()).hexdigest()[:12]
    return dict(model=model, view=view, width=args['n_embd'], T=T, N=N, lr=lr,
                n_layer=probe.n_layer, vocab=probe.vocab_size, batch=probe.batch_size,
                steps=law_steps(probe, T), seed=probe.seed, warmup_frac=probe.warmup_frac,
                weight_decay=probe.weight_decay, stop_acc=probe.stop_acc,
                eval_interval=probe.eval_interval, eval_seqs=probe.eval_seqs)


def train_run(args, probe, key, stopper=()):
    """Train one run and return its results record (None once `stopper` turned true: stopped), a
    line at each evaluation."""
    t0, cpu0 = time.time(), time.process_time()
    steps, lr = key['steps'], key['lr']
    cfg = TrainConfig(**{**args, 'learning_rate': lr, 'min_lr': lr / 10, 'max_iters': steps,
                         'lr_decay_iters': steps, 'weight_decay': probe.weight_decay,
                         'warmup_iters': int(probe.warmup_frac * steps), 'seed': probe.seed})
    torch.manual_seed(probe.seed)
    model = GPT(GPTConfig(**args))
    optimizer = model.configure_optimizers(cfg.weight_decay, lr, (cfg.beta1, cfg.beta2), 'cpu')
    data = dict(T=key['T'], n_pairs=key['N'], vocab=probe.vocab_size)
    X_val, Y_val = batch_at(probe.seed, 1, batch=probe.eval_seqs, **data)  # the held-out set
    X, Y = batch_at(probe.seed, 0, 0, batch=probe.batch_size, **data)
    scaler = torch.amp.GradScaler('cpu', enabled=False)  # (float32: no loss scaling)
    curve, step = [], 0
    while True:
        if step % probe.eval_interval == 0 or step == steps:
            model.eval()
            with torch.no_grad():
                logits, loss = model(X_val, Y_val)
            model.train()
            acc, loss = accuracy(logits, Y_val), loss.item()
            curve.append([step, acc, loss])
            print(f"  {key['view']} {args['block']} {args['attn']} {args['ffn']} step "
                      f"{step}: held-out acc {acc:.3f}, loss {loss:.3f} "
                      f"({duration(time.time() - t0)})", file=sys.stderr, flush=True)
            if acc >= probe.stop_acc or step == steps or not math.isfinite(loss):
                break
        if stopper:  # probe.py was stopped: this run is not recorded
            return None
        for group in optimizer.param_groups:
            group['lr'] = cfg.lr_at(step)  # train.py's warmup + cosine
        _, (X, Y) = train_step(model, optimizer, scaler, contextlib.nullcontext(), X, Y,
                               lambda m: batch_at(probe.seed, 0, step + 1,
                                                  batch=probe.batch_size, **data),
                               grad_clip=cfg.grad_clip)  # train.py's step
        step += 1
    solved_at = next((s for s, a, _ in curve if a >= probe.stop_acc), None)
    return dict(kind='probe', key=key, **key, acc=curve[-1][1],
                best_acc=max(c[1] for c in curve), solved=solved_at is not None,
                solved_at=solved_at, steps_run=step, seconds=time.time() - t0,
                cpu_seconds=time.process_time() - cpu0, params=model.get_num_params(),
                **{k: args[k] for k in ('block', 'attn', 'ffn', 'pos_emb')}, curve=curve,
                acc_by_distance=accuracy_by_distance(logits, X_val, Y_val, key['N']),
                date=time.strftime('%Y-%m-%d'),
                machine=f"{machine('cpu')}, {torch.get_num_threads()} thread(s)")


# -----------------------------------------------------------------------------
# the grid: cells run in worker processes, a record appended as each run ends

def plan(probe, paths, widths, seq_lens, pairs, lrs, overrides=()):
    """([(cell, [run keys, one per lr not yet run], model args, configs sharing that model)] for
    every cell not solved in the results file, the number of cells skipped)."""
    done = {json.dumps(r['key'], sort_keys=True): r for r in read_results(probe.results, 'probe')}
    cells = {}
    # gpt's cell first: the calibration the other numbers rest on
    paths = sorted(paths, key=lambda p: arch_key(os.path.basename(p)[:-3]))
    for view, T, N, width, path in itertools.product(probe.views, seq_lens, pairs, widths, paths):
        if 3 * N > T:
            continue
        args = model_args(path, probe, view=view, width=width, T=T, overrides=overrides)
        keys = [run_key(probe, args, view=view, T=T, N=N, lr=lr) for lr in lrs]
        name = ' '.join([os.path.basename(path)[:-3], *overrides])  # gpt_rope --bias=True
        cell = (view, width, T, N, keys[0]['model'])
        cells.setdefault(cell, (keys, args, []))[2].append(name)
    todo = []
    for cell, (keys, args, names) in cells.items():
        runs = [done.get(json.dumps(k, sort_keys=True)) for k in keys]
        if not any(r and r['solved'] for r in runs) and not all(runs):
            todo.append((cell, [k for k, r in zip(keys, runs) if not r], args, names))
    return todo, len(cells) - len(todo)


def run_grid(probe, todo, stopper):
    """Run every planned cell in turn, in this process: its learning rates in turn, the next one
    only while none so far reached stop_acc. Returns (runs recorded, cells cut short): a signal to
    `stopper` stops the running cell at its next step (a rerun starts it over), and the grid."""
    t_start, n_runs = time.time(), 0
    for done, (_, keys, args, configs) in enumerate(todo):
        names = sorted(configs, key=arch_key)
        for key in keys:
            record = None if stopper else train_run(args, probe, key, stopper)
            if record is None:  # stopped
                return n_runs, len(todo) - done
            record.update(configs=names, config=names[0],
                          command=' '.join(['python', 'probe.py', *sys.argv[1:]]))
            append_record(probe.results, record, kept='nothing else: the run')
            n_runs += 1
            print(f"[{n_runs} runs, {len(todo) - done - 1} cells left] {key['view']} "
                  f"{','.join(names)} d{key['width']} T{key['T']} N{key['N']} lr {key['lr']:g}: "
                  f"acc {record['acc']:.3f} at step {record['steps_run']}/{key['steps']} "
                  f"({duration(record['seconds'])}); elapsed {duration(time.time() - t_start)}",
                  file=sys.stderr, flush=True)
            if record['solved']:  # its later learning rates are not tried
                break
    return n_runs, 0


# -----------------------------------------------------------------------------
# reporting: the table and plot, from the results file alone

def best_runs(records):
    """{(config, view, width, T, N): the best record over learning rates (by final accuracy, then
    the fewest steps to stop_acc)} for every config a record stands for."""
    best = {}
    for r in records:
        score = (r['acc'], -(r['solved_at'] if r.get('solved_at') is not None else math.inf))
        for name in r.get('configs', [r['config']]):
            cell = (name, r.get('view', 'block'), r['width'], r['T'], r['N'])
            if cell not in best or score > best[cell][0]:
                best[cell] = (score, r)
    return {cell: r for cell, (_, r) in best.items()}


def probe_table(records):
    """Markdown: one row per (config, view, width), one column per (T, N): the best accuracy over
    learning rates and, where it solved, the steps (sequences) it took to reach stop_acc."""
    best = best_runs(records)
    if not best:
        return "(no runs yet)"
    rows = sorted({cell[:3] for cell in best}, key=lambda r: (r[1], arch_key(r[0]), r[2]))
    cols, out = sorted({cell[3:] for cell in best}), []
    for c, view, w in rows:
        runs = [best.get((c, view, w, *col)) for col in cols]  # None: a cell not run ('–')
        params = {r['params'] for r in runs if r}
        cells = [r and f"{r['acc']:.2f}" + (f" ({r['solved_at']:,} steps, lr {r['lr']:g})"
                                            if r.get('solved_at') is not None else '')
                 for r in runs]
        p = f"{min(params) / 1e3:.0f}k" + (f"–{max(params) / 1e3:.0f}k" if len(params) > 1 else '')
        shared = next((r.get('configs') for r in best.values() if c in r.get('configs', [])), [c])
        first = min(shared, key=arch_key)  # the cell's run, named by its first config in ARCH_ORDER
        same = f" (= {first})" if first != c and view == 'mixer' else ''
        out.append([f"{c}{same}", view, w, p, *cells])
    headers = ['config', 'view', 'width', 'params', *(f"T={T} N={N}" for T, N in cols)]
    return markdown_table(out, headers, left=(1,))


def plot_probe(records, png):
    """Accuracy against N, one panel per T, one line per config (solid: mixer view, dashed: block);
    dotted: 1/N. The last panel: held-out accuracy during training at the smallest cell."""
    plt, best = pyplot(), best_runs(records)
    if plt is None or not best:
        return False
    Ts, widths = sorted({cell[3] for cell in best}), sorted({cell[2] for cell in best})
    fig, axes = plt.subplots(1, len(Ts) + 1, figsize=(4.2 * len(Ts) + 5.5, 4.2), squeeze=False)
    colors = plt.rcParams['axes.prop_cycle'].by_key()['color']
    lines = [(c, view, colors[ci % len(colors)], style)  # a color per config, a style per view
             for ci, c in enumerate(sorted({cell[0] for cell in best}, key=arch_key))
             for view, style in (('mixer', '-'), ('block', '--'))]
    for ax, T in zip(axes[0][:-1], Ts):
        for (c, view, color, style), w in itertools.product(lines, widths):
            pts = sorted((cell[4], r['acc']) for cell, r in best.items()
                         if cell[:4] == (c, view, w, T))
            if pts:
                ax.plot(*zip(*pts), marker='o', ms=3, color=color, linestyle=style,
                        label=f"{c} {view} d={w}")
        Ns = sorted({cell[4] for cell in best if cell[3] == T})
        ax.plot(Ns, [1 / N for N in Ns], 'k:', lw=1, label='1/N: a value of the sequence at random')
        ax.set_xscale('log', base=2)
        ax.set_title(f"T = {T}")
        ax.set_ylim(-0.02, 1.02)
    ax, first = axes[0][-1], min(best, key=lambda cell: (cell[3], cell[4], -cell[2]))
    for c, view, color, style in lines:
        r = best.get((c, view, *first[2:]))
        if r:
            steps, accs = [p[0] for p in r['curve']], [p[1] for p in r['curve']]
            ax.plot(steps, accs, color=color, linestyle=style)
    ax.axhline(1 / first[4], color='k', linestyle=':', lw=1)
    ax.set_title(f"held-out accuracy in training: T = {first[3]}, N = {first[4]}, d = "
                 f"{first[2]}", fontsize=9)
    for ax, xlabel in zip(axes[0], ['key-value pairs N'] * len(Ts) + ['training step']):
        ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel('MQAR accuracy (held out)')
    axes[0][-1].legend(*axes[0][0].get_legend_handles_labels(), fontsize=7, loc='center left',
                       bbox_to_anchor=(1.0, 0.5))
    return save_png(fig, png)


def main(argv):
    own, overrides = split_flags(argv, ProbeConfig, TrainConfig)  # train.py keys change every model
    probe = parse_config(ProbeConfig, own, config_files=False,
                         usage="python probe.py [--key=value ...]", doc=__doc__)
    given = keys_given(argv)
    for preset, values in (('quick', QUICK), ('full', FULL)):
        if getattr(probe, preset):
            probe = replace(probe, **{k: v for k, v in values.items() if k not in given})
    probe.results = probe.results or os.path.join('out-probe', 'results.jsonl')
    if probe.png:  # an output that is a device or a pipe: refused now, never replaced by a file
        regular_file(probe.png, '--png', output=True)
    paths = config_paths(probe.configs)
    widths, seq_lens, pairs = (numbers(k, getattr(probe, k), int)
                               for k in ('widths', 'seq_lens', 'pairs'))
    lrs = list(dict.fromkeys(numbers('learning_rate', probe.learning_rate, float)))  # each once
    if not probe.replot:
        if any(w % probe.head_size for w in widths):  # attention: width // head_size heads
            fits = [h for h in range(1, min(widths) + 1) if all(w % h == 0 for w in widths)]
            raise UsageError(f"head_size={probe.head_size} does not divide width "
                             f"{next(w for w in widths if w % probe.head_size)}; pick head_size "
                             f"among {fits[-6:]} (or other --widths)")
        if max(pairs) > probe.vocab_size // 2 - 1:
            raise UsageError(f"N={max(pairs)} pairs need that many distinct keys; "
                             f"vocab_size={probe.vocab_size} has {probe.vocab_size // 2 - 1}: "
                             f"raise it to at least {2 * (max(pairs) + 1)}")
        if not any(3 * N <= T for T in seq_lens for N in pairs):
            raise UsageError("no (T, N) in the grid has 3N <= T: lower --pairs or raise --seq_lens")
        check_writable(probe.results)
        give_back = hold(probe.results, file=True)  # this probe's file while it runs: another is refused
        try:
            # every config is checked (model_args) before anything trains
            todo, skipped = plan(probe, paths, widths, seq_lens, pairs, lrs, overrides)
            steps = ', '.join(f'T={T}: {law_steps(probe, T):,}' for T in seq_lens)
            print(f"{len(todo)} cells to run ({skipped} already in {probe.results}), up to "
                  f"{len(lrs)} learning rates each, one at a time; steps per cell by the emergence "
                  f"law: {steps}", file=sys.stderr, flush=True)
            t0 = time.time()
            with Signals("stopping: the running cell stops (a rerun starts it over), none more "
                         "starts; the finished ones are kept") as stopper:
                n, cut = run_grid(probe, todo, stopper)
        finally:
            give_back()
        print(f"{n} runs in {duration(time.time() - t0)}", file=sys.stderr)
        if stopper:
            print(f"stopped: {n} runs recorded in {probe.results}, {cut} cell(s) cut short; "
                  f"continue with: python probe.py {' '.join(argv)}", file=sys.stderr)
            raise SystemExit(stopper.exit_code())
    records = read_results(probe.results, 'probe')
    if not records:
        raise UsageError(f"no records in {probe.results!r}; run `python probe.py` first (or pass "
                         "--results=...)")
    print(probe_table(records))
    png = probe.png or os.path.splitext(probe.results)[0] + '.png'
    if plot_probe(records, png):
        print(f"plot: {png}", file=sys.stderr)
    return records


if __name__ == "__main__":
    run_main(main)
