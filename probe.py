"""
Multi-query associative recall (MQAR): can a block find, by content, a token it saw earlier?

    python probe.py --quick                          # a few minutes on 2 CPU cores
    python probe.py                                  # the default grid: 32 runs (README §9: measured times)
    python probe.py --configs=gpt,gmlp --widths=64 --seq_lens=64 --pairs=4,8
    python probe.py --replot                         # table and PNG again from the results file

Zoology (Arora et al. 2023, arXiv:2312.04927 sec. 3) found that attention solves MQAR at every
width while gated convolutions, whose token mixing does not depend on the input (gMLP's SGU is
one), need a width that grows with the sequence length. gMLP's paper added a tiny attention
(aMLP, arXiv:2105.08050 sec. 4.3) because gMLP lagged on cross-token lookups. This probe trains
each config of configs/ (its block type and flags, at a small shared shape) on MQAR sequences
generated here, through model.py and train.py's AdamW and schedule, and reports accuracy on a
fixed held-out set at each sequence length T and number of key-value pairs N.

A sequence (FILLER = 0, keys from 1..V/2-1, values from V/2..V-1, keys distinct in a sequence):

    k1 v1 k2 v2 ... kN vN  0 0 k2 0 k1 0 0 ... kN 0        inputs: N pairs, then N queries
    -1 -1 ..................  -1 v2 -1 v1 -1 ... vN -1      targets: the paired value at each query

The target at a query key's own position is its value (the next token, as in a language model's
targets), so loss and accuracy count the N answer positions only (-1 elsewhere, ignored).

Each (config, width, T, N) cell is trained at the learning rates of `lr` in turn until one reaches
stop_acc on the held-out set; one record per run is appended to the results file (JSON lines) as
it finishes, with the accuracy curve. A re-run skips the runs already there, so an interrupted
grid resumes; --replot redraws the table and the PNG from that file alone.
"""
import dataclasses
import json
import math
import multiprocessing
import os
import platform
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

import numpy as np

from configurator import UsageError, keys_given, parse_config, run_main
from results import append_record, arch_key, config_paths, pyplot, read_results, save_png
from runtime import TrainConfig, duration

FILLER = 0  # the pad token between queries; never a key or a value


@dataclass
class ProbeConfig:
    configs: list = field(default_factory=list)  # config files or names (gpt,gmlp); default: every configs/*.py but quick.py
    widths: list = field(default_factory=lambda: ['64', '128'])  # n_embd values (model width d)
    seq_lens: list = field(default_factory=lambda: ['64'])  # sequence lengths T (also block_size), e.g. 64,128,256
    pairs: list = field(default_factory=lambda: ['4', '16'])  # key-value pairs N per sequence (3N <= T), e.g. 4,8,16,32
    n_layer: int = 2                 # layers of every model (attention needs 2 for an induction-style lookup)
    head_size: int = 32              # n_head = width // head_size for attention blocks
    vocab_size: int = 128            # FILLER + keys (1..V/2-1) + values (V/2..V-1); needs V/2-1 >= N
    match_params: str = ''           # '' = each block's paper width (gMLP 6d); 'gpt' = model.matched_width
    steps: int = 1500                # optimizer steps per run (the cosine schedule ends here)
    batch_size: int = 32             # sequences per step, fresh ones every step
    lr: list = field(default_factory=lambda: ['3e-3'])  # peak learning rates, tried in turn until one solves (e.g. 3e-3,1e-2)
    warmup_iters: int = 100          # linear warmup steps of TrainConfig.lr_at
    min_lr_ratio: float = 0.1        # min_lr = lr * this, at the end of the cosine
    weight_decay: float = 0.1        # AdamW decoupled weight decay (GPT.configure_optimizers)
    eval_interval: int = 100         # steps between held-out evaluations (the curve's points)
    eval_seqs: int = 512             # held-out sequences per cell, the same ones every evaluation
    stop_acc: float = 0.99           # a run stops early, and the cell counts as solved, at this accuracy
    seed: int = 0                    # sets the init, the training sequences and the held-out set
    jobs: int = 2                    # runs at once, one thread each
    results: str = 'results/probe.jsonl'  # the results file (JSON lines), appended run by run
    png: str = ''                    # the plot; '' = the results file's name with .png
    replot: bool = False             # table and PNG from the results file only, no training
    quick: bool = False              # a few-minute grid: gpt, primer_ez, gmlp, amlp at width 64, T=64, N=4,8, 600 steps

    def __post_init__(self):
        for name in ('n_layer', 'head_size', 'steps', 'batch_size', 'eval_interval', 'eval_seqs', 'jobs'):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.vocab_size < 6:
            raise ValueError(f"vocab_size={self.vocab_size} is too small: it holds FILLER, keys and values")
        if not 0.0 < self.stop_acc <= 1.0:
            raise ValueError(f"stop_acc must be in (0, 1], got {self.stop_acc}")
        if not 0.0 <= self.min_lr_ratio <= 1.0:
            raise ValueError(f"min_lr_ratio must be in [0, 1], got {self.min_lr_ratio}")
        if self.warmup_iters >= self.steps:
            raise ValueError(f"warmup_iters={self.warmup_iters} must be below steps={self.steps}")


QUICK = dict(configs=['gpt', 'primer_ez', 'gmlp', 'amlp'], widths=['64'], seq_lens=['64'],
             pairs=['4', '8'], steps=600, results='results/probe_quick.jsonl')


def numbers(name, texts, kind):
    """A list flag's strings as ints or floats, or a UsageError naming the flag."""
    try:
        values = [kind(t) for t in texts]
    except ValueError:
        raise UsageError(f"--{name}={','.join(texts)}: give {kind.__name__}s separated by commas") from None
    if not values or min(values) <= 0:
        raise UsageError(f"--{name}={','.join(texts)}: give one or more positive numbers")
    return values


# -----------------------------------------------------------------------------
# the data: a pure function of (seed, what), generated in memory

def mqar_batch(rng, *, batch, T, n_pairs, vocab):
    """
    (x, y): int64 arrays (batch, T) of MQAR sequences, drawn from the numpy Generator `rng`.
    x holds N = n_pairs key-value pairs at positions 0..2N-1, then the N keys again in a random
    order at random positions of the rest, FILLER elsewhere; y is the paired value at those query
    positions and -1 everywhere else.
    """
    N, half = n_pairs, vocab // 2
    if N > half - 1:
        raise UsageError(f"N={N} pairs need {N} distinct keys but vocab_size={vocab} has {half - 1}; "
                         f"raise vocab_size to at least {2 * (N + 1)}")
    if 3 * N > T:
        raise UsageError(f"N={N} pairs and N queries do not fit in T={T} positions (needs 3N <= T)")
    rows = np.arange(batch)[:, None]
    keys = 1 + np.argsort(rng.random((batch, half - 1)), axis=1)[:, :N]  # N distinct keys per row
    values = rng.integers(half, vocab, size=(batch, N))
    x = np.full((batch, T), FILLER, dtype=np.int64)
    y = np.full((batch, T), -1, dtype=np.int64)
    x[:, 0:2 * N:2], x[:, 1:2 * N:2] = keys, values
    where = 2 * N + np.sort(np.argsort(rng.random((batch, T - 2 * N)), axis=1)[:, :N], axis=1)  # query slots
    order = np.argsort(rng.random((batch, N)), axis=1)  # which pair each query asks for
    x[rows, where] = keys[rows, order]
    y[rows, where] = values[rows, order]
    return x, y


def batch_at(seed, *key, batch, T, n_pairs, vocab):
    """Batch `key` of a run as torch tensors: (seed, 0, step) trains, (seed, 1) is the held-out set."""
    import torch
    x, y = mqar_batch(np.random.default_rng([seed, T, n_pairs, vocab, *key]), batch=batch, T=T,
                      n_pairs=n_pairs, vocab=vocab)
    return torch.from_numpy(x), torch.from_numpy(y)


def accuracy(logits, targets):
    """Share of answer positions (targets != -1) whose argmax is the target; other positions do not count."""
    mask = targets != -1
    return (logits.argmax(dim=-1)[mask] == targets[mask]).float().mean().item()


# -----------------------------------------------------------------------------
# one run: a config file's block at the probe's shape, trained as train.py trains

def train_config(path, probe, *, width, T, lr):
    """TrainConfig of config file `path` with the probe's shape, data and schedule; the block
    type and its flags (attn, ffn, block, pos_emb, norm, bias, ...) stay the file's."""
    cfg = parse_config(TrainConfig, [path])
    shape = dict(n_layer=probe.n_layer, n_embd=width, n_head=max(1, width // probe.head_size),
                 block_size=T, vocab_size=probe.vocab_size, dropout=0.0, match_params=probe.match_params,
                 ffn_hidden=0, gmlp_d_ffn=0)
    schedule = dict(learning_rate=lr, min_lr=lr * probe.min_lr_ratio, max_iters=probe.steps,
                    warmup_iters=probe.warmup_iters, lr_decay_iters=probe.steps, decay_lr=True,
                    weight_decay=probe.weight_decay, batch_size=probe.batch_size, seed=probe.seed,
                    device='cpu', dtype='float32')
    try:
        return dataclasses.replace(cfg, **shape, **schedule)
    except ValueError as e:
        raise UsageError(f"{path} at width {width}, T={T}: {e}") from None


def train_run(path, probe, key, threads=None, log=False):
    """Train one run (key: config, width, T, N, lr, ...) and return its results record;
    threads=None leaves torch's thread count as it is; log: a stderr line at each evaluation."""
    import torch
    threads_before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        return _train_run(path, probe, key, log)
    finally:
        torch.set_num_threads(threads_before)  # in this process (jobs=1, tests), later work is not changed


def _train_run(path, probe, key, log):
    import torch
    from model import GPT, GPTConfig, ffn_width, gmlp_width
    t0, cpu0 = time.time(), time.process_time()
    cfg = train_config(path, probe, width=key['width'], T=key['T'], lr=key['lr'])
    mcfg = GPTConfig(**cfg.model_args())
    torch.manual_seed(cfg.seed)
    model = GPT(mcfg)
    optimizer = model.configure_optimizers(cfg.weight_decay, cfg.learning_rate, (cfg.beta1, cfg.beta2), 'cpu')
    data = dict(T=key['T'], n_pairs=key['N'], vocab=probe.vocab_size)
    X_val, Y_val = batch_at(cfg.seed, 1, batch=probe.eval_seqs, **data)  # the held-out set

    @torch.no_grad()
    def evaluate():
        model.eval()
        logits, loss = model(X_val, Y_val)
        model.train()
        return accuracy(logits, Y_val), loss.item()

    curve, step = [], 0
    while True:
        if step % probe.eval_interval == 0 or step == probe.steps:
            acc, loss = evaluate()
            curve.append([step, acc, loss])
            if log:
                print(f"  {key['config']} step {step}: held-out acc {acc:.3f}, loss {loss:.3f} "
                      f"({duration(time.time() - t0)})", file=sys.stderr, flush=True)
            if acc >= probe.stop_acc or step == probe.steps:
                break
        lr = cfg.lr_at(step)  # train.py's warmup + cosine
        for group in optimizer.param_groups:
            group['lr'] = lr
        X, Y = batch_at(cfg.seed, 0, step, batch=probe.batch_size, **data)
        _, loss = model(X, Y)
        loss.backward()
        if cfg.grad_clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        step += 1
        if not math.isfinite(loss.item()):
            curve.append([step, 0.0, float('nan')])
            break
    acc = curve[-1][1]
    width_knob = ffn_width(mcfg) if mcfg.block == 'transformer' else gmlp_width(mcfg)
    return dict(kind='probe', key=key, **key, acc=acc, best_acc=max(c[1] for c in curve), solved=acc >= probe.stop_acc,
                steps_run=step, seconds=time.time() - t0,
                cpu_seconds=time.process_time() - cpu0, params=model.get_num_params(),
                hidden=width_knob, block=mcfg.block, attn=mcfg.attn, ffn=mcfg.ffn, pos_emb=mcfg.pos_emb,
                curve=curve, date=time.strftime('%Y-%m-%d'),
                machine=f"{platform.machine()} {os.cpu_count()} cores, torch {torch.__version__}, "
                        f"{torch.get_num_threads()} thread(s)")


def run_key(probe, path, width, T, N, lr):
    """What identifies a run in the results file: everything that changes its outcome."""
    return dict(config=os.path.basename(path)[:-3], width=width, T=T, N=N, lr=lr, n_layer=probe.n_layer,
                head_size=probe.head_size, vocab=probe.vocab_size, steps=probe.steps, batch=probe.batch_size,
                warmup=probe.warmup_iters, min_lr_ratio=probe.min_lr_ratio, weight_decay=probe.weight_decay,
                seed=probe.seed, stop_acc=probe.stop_acc, eval_interval=probe.eval_interval,
                match_params=probe.match_params, eval_seqs=probe.eval_seqs)


def ident(key):
    return json.dumps(key, sort_keys=True)


# -----------------------------------------------------------------------------
# the grid: cells run in worker processes, a record appended as each run ends

def run_grid(probe, paths, widths, seq_lens, pairs, lrs):
    """Every cell (config, width, T, N) not yet solved in the results file: its learning rates in turn,
    the next one only while none so far reached stop_acc. Returns the number of runs made."""
    done = {ident(r['key']): r for r in read_results(probe.results, 'probe')}
    cells, skipped = [], 0
    for T in seq_lens:
        for N in pairs:
            if 3 * N > T:
                continue
            for width in widths:
                for path in paths:
                    keys = [run_key(probe, path, width, T, N, lr) for lr in lrs]
                    if any(done.get(ident(k), {}).get('solved') for k in keys) or all(ident(k) in done for k in keys):
                        skipped += 1
                        continue
                    cells.append([k for k in keys if ident(k) not in done])
    left_out = [(T, N) for T in seq_lens for N in pairs if 3 * N > T]
    if left_out:
        print(f"note: skipping (T, N) = {', '.join(f'({T}, {N})' for T, N in left_out)}: "
              f"N pairs and N queries need 3N <= T", file=sys.stderr)
    print(f"{len(cells)} cells to run ({skipped} already in {probe.results}), up to {len(lrs)} lr each, "
          f"{probe.jobs} at a time, {probe.steps} steps max", file=sys.stderr, flush=True)
    if not cells:
        return 0
    by_name = {os.path.basename(p)[:-3]: p for p in paths}

    def cost(key):  # relative cost of a full run: T^1.3 roughly tracks measured CPU step times here
        return (key['T'] / 64) ** 1.3 * (key['width'] / 64)

    t_start, work_done, n_runs = time.time(), 0.0, 0
    pending = {}  # future -> (cell, index of its key)
    queue = list(cells)
    # jobs > 1: worker processes of one thread each; jobs = 1: in this process (no start-up), every thread
    pool = (ProcessPoolExecutor(max_workers=probe.jobs, mp_context=multiprocessing.get_context('spawn'))
            if probe.jobs > 1 else ThreadPoolExecutor(max_workers=1))
    with pool:
        def submit(cell, i):
            key = cell[i]
            one = probe.jobs > 1  # worker processes: one thread each, quiet; else every thread, a line per eval
            pending[pool.submit(train_run, by_name[key['config']], probe, key, 1 if one else None, not one)] = (cell, i)

        while queue and len(pending) < probe.jobs:
            submit(queue.pop(0), 0)
        while pending:
            finished, _ = wait(list(pending), return_when=FIRST_COMPLETED)
            for fut in finished:
                cell, i = pending.pop(fut)
                record = fut.result()
                record['command'] = ' '.join(['python', 'probe.py', *sys.argv[1:]])
                append_record(probe.results, record, kept='nothing else: the run')
                n_runs += 1
                work_done += cost(record['key']) * max(record['steps_run'], 1) / probe.steps
                retry = not record['solved'] and i + 1 < len(cell)  # the cell's next learning rate
                if retry:
                    submit(cell, i + 1)
                elif queue:
                    submit(queue.pop(0), 0)
                remaining = sum(cost(c[0]) for c in queue) + sum(cost(c[j]) for c, j in pending.values())
                rate = work_done / max(time.time() - t_start, 1e-9)
                k = record['key']
                print(f"[{n_runs} runs, {len(queue) + len(pending)} cells left] "
                      f"{k['config']} w{k['width']} T{k['T']} N{k['N']} lr {k['lr']:g}: acc {record['acc']:.3f} "
                      f"at step {record['steps_run']} ({duration(record['seconds'])}); "
                      f"elapsed {duration(time.time() - t_start)}, ETA ~{duration(remaining / max(rate, 1e-9))}",
                      file=sys.stderr, flush=True)
    return n_runs


# -----------------------------------------------------------------------------
# reporting: from the results file alone

def best_runs(records):
    """{(config, width, T, N): the record with the best final accuracy over learning rates}; where
    the same cell was run under several settings (steps, vocab, ...), the latest records count."""
    best = {}
    for r in records:
        cell = (r['config'], r['width'], r['T'], r['N'])
        if cell not in best or r['acc'] > best[cell]['acc']:
            best[cell] = r
    return best


def table(records):
    """Markdown: one row per (config, width), one column per (T, N): best accuracy over learning rates."""
    best = best_runs(records)
    if not best:
        return "(no runs yet)"
    rows = sorted({(c, w) for c, w, _, _ in best}, key=lambda cw: (arch_key(cw[0]), cw[1]))
    cols = sorted({(T, N) for _, _, T, N in best})
    out = ['| config | width | params | ' + ' | '.join(f"T={T} N={N}" for T, N in cols) + ' |',
           '|---|---:|---:|' + '---:|' * len(cols)]
    for c, w in rows:
        cells, params = [], set()
        for T, N in cols:
            r = best.get((c, w, T, N))
            if r is None:
                cells.append('–')
                continue
            params.add(r['params'])
            cells.append(f"{r['acc']:.2f}")
        p = f"{min(params) / 1e3:.0f}k" + (f"–{max(params) / 1e3:.0f}k" if len(params) > 1 else '')
        out.append(f"| {c} | {w} | {p} | " + ' | '.join(cells) + ' |')
    return '\n'.join(out)


def plot(records, png):
    """Accuracy against N, one panel per T, one line per config (solid: widest, dashed: narrower);
    dotted: 1/N, what a model scores that copies one of the sequence's values without finding the key."""
    plt = pyplot()
    if plt is None:
        return False
    best = best_runs(records)
    if not best:
        return False
    Ts = sorted({T for _, _, T, _ in best})
    widths = sorted({w for _, w, _, _ in best}, reverse=True)
    configs = sorted({c for c, _, _, _ in best}, key=arch_key)
    fig, axes = plt.subplots(1, len(Ts) + 1, figsize=(4.2 * len(Ts) + 5.5, 4.2), sharey=True, squeeze=False)
    colors = plt.rcParams['axes.prop_cycle'].by_key()['color']
    styles = ['-', '--', ':', '-.']
    for ax, T in zip(axes[0][:-1], Ts):
        for ci, c in enumerate(configs):
            for wi, w in enumerate(widths):
                pts = sorted((N, r['acc']) for (c2, w2, T2, N), r in best.items() if (c2, w2, T2) == (c, w, T))
                if pts:
                    ax.plot(*zip(*pts), marker='o', ms=3, color=colors[ci % len(colors)],
                            linestyle=styles[wi % len(styles)], label=f"{c} d={w}")
        Ns = sorted({N for _, _, T2, N in best if T2 == T})
        ax.plot(Ns, [1 / N for N in Ns], 'k:', lw=1, label='1/N: one of the context values at random')
        ax.set_xscale('log', base=2)
        ax.set_title(f"T = {T}")
        ax.set_xlabel('key-value pairs N')
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    # the last panel: how the accuracy got there, at the easiest cell (smallest T and N, widest model)
    ax, (T, N, w) = axes[0][-1], (Ts[0], min(N for _, _, T2, N in best if T2 == Ts[0]), widths[0])
    for ci, c in enumerate(configs):
        r = best.get((c, w, T, N))
        if r:
            ax.plot([p[0] for p in r['curve']], [p[1] for p in r['curve']], color=colors[ci % len(colors)])
    ax.axhline(1 / N, color='k', linestyle=':', lw=1)
    ax.set_title(f"accuracy during training: T = {T}, N = {N}, d = {w}", fontsize=9)
    ax.set_xlabel(f"training step (batch of {next(iter(best.values()))['batch']} sequences)")
    ax.grid(alpha=0.3)
    axes[0][0].set_ylabel('MQAR accuracy (held out)')
    axes[0][-1].legend(*axes[0][0].get_legend_handles_labels(), fontsize=7, loc='center left',
                       bbox_to_anchor=(1.0, 0.5))
    save_png(fig, png)
    return True


def report(probe):
    records = read_results(probe.results, 'probe')
    if not records:
        raise UsageError(f"no records in {probe.results!r}; run `python probe.py` first (or pass --results=...)")
    print(table(records))
    png = probe.png or os.path.splitext(probe.results)[0] + '.png'
    if plot(records, png):
        print(f"plot: {png}", file=sys.stderr)
    return records


def main(argv):
    probe = parse_config(ProbeConfig, argv, config_files=False, usage="python probe.py [--key=value ...]", doc=__doc__)
    given = keys_given(argv)
    if probe.quick:
        probe = dataclasses.replace(probe, **{k: v for k, v in QUICK.items() if k not in given})
    paths = config_paths(probe.configs)
    widths = numbers('widths', probe.widths, int)
    seq_lens = numbers('seq_lens', probe.seq_lens, int)
    pairs = numbers('pairs', probe.pairs, int)
    lrs = numbers('lr', probe.lr, float)
    if not probe.replot:
        if max(pairs) > probe.vocab_size // 2 - 1:
            raise UsageError(f"N={max(pairs)} pairs need that many distinct keys; vocab_size={probe.vocab_size} "
                             f"has {probe.vocab_size // 2 - 1}: raise it to at least {2 * (max(pairs) + 1)}")
        if not any(3 * N <= T for T in seq_lens for N in pairs):
            raise UsageError("no (T, N) in the grid has 3N <= T: lower --pairs or raise --seq_lens")
        for path in paths:  # every config is valid at every width before anything runs
            for w in widths:
                train_config(path, probe, width=w, T=max(seq_lens), lr=lrs[0])
        t0 = time.time()
        n = run_grid(probe, paths, widths, seq_lens, pairs, lrs)
        print(f"{n} runs in {duration(time.time() - t0)}", file=sys.stderr)
    return report(probe)


if __name__ == "__main__":
    run_main(main)
