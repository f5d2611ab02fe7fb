"""
Results as data: the results files that sweeps and the recall probe append to (one JSON record per
finished run), the statistics over seeds, markdown tables, plots, and the one order in which every
table lists the architectures. Every figure in the README is drawn from a results file through
these.
"""
import glob
import json
import math
import os
import sys
import threading

from configurator import UsageError, atomic_write, write_error

# gpt first (the baseline), then the transformer variants, then the gMLP family
ARCH_ORDER = ('gpt', 'gpt_rope', 'llama', 'primer_ez', 'swiglu', 'geglu', 'reglu', 'gmlp', 'amlp')


def arch_key(name):
    """Sort key that lists configs in ARCH_ORDER, any other config after them by name."""
    return (ARCH_ORDER.index(name) if name in ARCH_ORDER else len(ARCH_ORDER), name)


def config_paths(names):
    """Config files from paths or names (gpt -> configs/gpt.py); default: every architecture config
    (configs/*.py but quick.py and the shared _recipe.py)."""
    here = os.path.dirname(os.path.abspath(__file__))
    shipped = sorted(glob.glob(os.path.join(here, 'configs', '[!_]*.py')))
    known = [os.path.basename(p)[:-3] for p in shipped]
    paths = []
    for c in names:
        if c.endswith('.py'):
            if not os.path.isfile(c):
                raise UsageError(f"config {c!r} not found")
            paths.append(c)
        elif c in known:
            paths.append(os.path.relpath(shipped[known.index(c)]))
        else:
            raise UsageError(f"unknown config {c!r}; choose among {', '.join(known)} or pass a .py path")
    paths = paths or [os.path.relpath(p) for p in shipped if not p.endswith('quick.py')]
    if not paths:
        raise UsageError("no configs: pass config files or run from the repository root")
    return paths


# -----------------------------------------------------------------------------
# the results file

# the fields a record of each kind has: a reader refuses a file of another kind instead of
# misreading it
KINDS = {'sweep': ('config', 'seed', 'lr', 'size', 'budget', 'budget_value', 'optimizer', 'data_dir', 'val_loss'),
         'probe': ('config', 'width', 'T', 'N', 'lr', 'acc', 'steps_run')}


def read_results(path, kind='sweep'):
    """The records of a results file (JSON lines, one finished run each) of `kind` ('sweep' or 'probe'); no
    file: none. A last line cut short by a killed run is skipped; any other line that is not such a record
    is a UsageError naming it (a probe file given to sweep.py --report, a file that is not a results file)."""
    if os.path.isdir(path):
        raise UsageError(f"{path} is a folder; --results names a results file (JSON lines)")
    try:
        with open(path, 'rb') as f:
            lines = f.read().splitlines(keepends=True)
    except FileNotFoundError:
        return []
    except OSError as e:
        raise UsageError(f"cannot read {path!r} ({e.strerror})") from None
    records = []
    for n, line in enumerate(lines, 1):
        try:
            r = json.loads(line.decode('utf-8'))
        except ValueError:  # also UnicodeDecodeError
            r = None
        missing = [k for k in ('key', *KINDS[kind]) if k not in r] if isinstance(r, dict) else ['key']
        if not missing and r.get('kind', kind) == kind:
            records.append(r)
        elif line.strip() and (n < len(lines) or line.endswith(b'\n')):
            what = f"a {r['kind']} record" if isinstance(r, dict) and 'kind' in r else f"it lacks {missing[0]!r}"
            raise UsageError(f"{path} line {n} is not a {kind} results record ({what}); pass the "
                             f"results file {kind}.py wrote with --results")
    return records


def check_writable(path):
    """A UsageError now, before any training, if the results file cannot be appended to later."""
    folder = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as e:
        raise UsageError(f"cannot create {folder!r} for the results file ({e.strerror}); pass --results=...") from None
    why = 'a folder' if os.path.isdir(path) else 'no permission'
    if os.path.isdir(path) or not os.access(path if os.path.exists(path) else folder, os.W_OK):
        raise UsageError(f"cannot write the results file {path!r} ({why}); pass --results=a/file.jsonl you can write")


def append_record(path, record, *, kept='the run', lock=threading.Lock()):
    """One line per finished run, in one write (a line is whole even when two sweeps append to the same
    file), fsynced: an interrupted sweep keeps every finished run. `kept`: where the run's own output
    stays when the results file cannot be written (one line, not a traceback)."""
    data = (json.dumps(record) + '\n').encode()
    with lock:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as e:
            raise write_error(path, e, f"{kept} is kept; rerun the same command to record it") from None


def markdown_table(rows, columns):
    """rows: list of dicts; columns: list of (key, header, format)."""
    out = ['| ' + ' | '.join(h for _, h, _ in columns) + ' |',
           '|' + '|'.join('---' if i == 0 else '---:' for i in range(len(columns))) + '|']
    for r in rows:
        cells = []
        for key, _, fmt in columns:
            v = r.get(key)
            cells.append('–' if v is None else fmt.format(v))
        out.append('| ' + ' | '.join(cells) + ' |')
    return '\n'.join(out)



# -----------------------------------------------------------------------------
# statistics over seeds

def mean_std(values):
    n = len(values)
    mean = sum(values) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    return mean, std, n


def groups(records, *fields):
    out = {}
    for r in records:
        out.setdefault(tuple(r[f] for f in fields), []).append(r)
    return out


def frontier(points):
    """The (FLOPs, loss) points no cheaper point beats: the least loss reachable with at most that many
    FLOPs. A larger run that ends worse than a smaller one (an lr too high at its size) is left out."""
    out = []
    for f, l in sorted(points):
        if not out or l < out[-1][1]:
            out.append((f, l))
    return out


def compute_multiplier(reference, flops, loss):
    """
    Primer's compute multiplier: the training FLOPs the reference (gpt) needs to reach `loss`, over
    `flops`, interpolated linearly in log-FLOPs on the reference's frontier (its (FLOPs, loss) points
    that no cheaper point beats). Returns (multiplier, None), or (None, why) when `loss` lies outside
    the frontier's range: no extrapolation.
    """
    pts = frontier(reference)
    for (f0, l0), (f1, l1) in zip(pts, pts[1:]):
        if l1 <= loss <= l0:
            x = math.log(f0) + (loss - l0) * (math.log(f1) - math.log(f0)) / (l1 - l0)
            return math.exp(x) / flops, None
    if loss < pts[-1][1]:
        return None, f"> {pts[-1][0] / flops:.2f} (below gpt's lowest loss)"
    return None, f"< {pts[0][0] / flops:.2f} (above gpt's highest loss)"


# -----------------------------------------------------------------------------
# plots

def pyplot():
    """matplotlib.pyplot with the Agg backend, or None (and a one-line note) when it is not installed."""
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        print("plots skipped: matplotlib is not installed (pip install matplotlib)", file=sys.stderr)
        return None
    return plt


def save_png(fig, png, axes=(), xlabels=(), ylabel=None):
    """Label each of `axes` (a grid, a legend), then write the figure to `png` atomically. True."""
    import matplotlib.pyplot as plt
    for ax, xlabel in zip(axes, xlabels):
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3, which='both')
        ax.legend(fontsize=8)
    fig.tight_layout()
    atomic_write(png, lambda f: fig.savefig(f, format='png', dpi=110))
    plt.close(fig)
    return True


# -----------------------------------------------------------------------------
# sweeps: the best learning rate, mean ± std over seeds, the gap to gpt, scaling

def tuned_lrs(records, size=None):
    """{config: the lr whose seeds have the best mean final val loss}, tuned where the grid ran: AdamW
    at an iteration budget, at `size` where the results hold runs there, else at the size with the most
    runs of that config."""
    records = [r for r in records if r['budget'] == 'max_iters' and r['optimizer'] == 'adamw']
    sizes = {}
    for (name, at), rs in groups(records, 'config', 'size').items():
        sizes[name] = max(sizes.get(name, (False, 0, '')), (at == size, len(rs), at))
    return {name: best_lr(rs) for (name, at), rs in groups(records, 'config', 'size').items()
            if at == sizes[name][2]}


def best_lr(records):
    """The grid point with the best mean final val loss, compared on the seeds every grid point has
    (a grid tuned on seed 1 and replicated at its best must not let a 1-seed mean beat a 3-seed one)."""
    by_lr = groups(records, 'lr')
    common = set.intersection(*({r['seed'] for r in rs} for rs in by_lr.values()))
    return min(by_lr, key=lambda k: mean_std([r['val_loss'] for r in by_lr[k]
                                              if r['seed'] in common or not common])[0])[0]


def summary_rows(records):
    """One row per (corpus, config, size, budget, optimizer): the best lr of its grid, mean ± std (n) there
    in loss and in bits per byte, the grid's means, and the gap to gpt with its standard error."""
    rows = []
    for (data, name, size, budget, value, opt), rs in groups(records, 'data_dir', 'config', 'size', 'budget',
                                                             'budget_value', 'optimizer').items():
        by_lr = {lr: mean_std([r['val_loss'] for r in g]) for (lr,), g in groups(rs, 'lr').items()}
        lr = best_lr(rs)
        at = [r for r in rs if r['lr'] == lr]
        mean, std, n = by_lr[lr]
        bpb = [r['val_bpb'] for r in at if r.get('val_bpb') is not None]
        rows.append(dict(data=data, corpus=at[0].get('corpus', data), config=name, size=size, kind=budget,
                         budget=f"{budget}={value:g}", optimizer=opt, lr=lr, val=mean, std=std, n=n,
                         values=[r['val_loss'] for r in at], val_pm=f"{mean:.4f} ± {std:.4f} ({n})",
                         bpb_pm="{:.4f} ± {:.4f}".format(*mean_std(bpb)[:2]) if len(bpb) == n else None,
                         grid=' / '.join(f"{k:g}: {by_lr[k][0]:.4f}" + (f" ({by_lr[k][2]})" if by_lr[k][2] != n else '')
                                         for k in sorted(by_lr)),
                         params=at[0]['params'], tokens=mean_std([r['tokens'] for r in at])[0],
                         flops=mean_std([r['flops'] or 0 for r in at])[0],
                         train_s=mean_std([r['train_s'] or 0 for r in at])[0], runs=at))
    for row in rows:  # the gap to gpt on the same corpus, at the same size, budget and optimizer
        same = ('data', 'size', 'budget', 'optimizer')
        base = next((b for b in rows if b['config'] == 'gpt' and all(b[k] == row[k] for k in same)), None)
        if base is not None and row is not base:
            # paired by seed: a run's seed draws its val batches too, so at one seed every config is
            # evaluated on the same bytes, and the seed-to-seed change of the val sample cancels
            theirs = {r['seed']: r['val_loss'] for r in base['runs']}
            diffs = [r['val_loss'] - theirs[r['seed']] for r in row['runs'] if r['seed'] in theirs]
            if len(diffs) < 2:  # one pair has no spread: say so instead of a false ± 0
                row['gap'] = diffs[0] if diffs else row['val'] - base['val']
                row['gap_se'], row['vs_gpt'] = None, f"{row['gap']:+.4f} (1 seed: spread unknown)"
                continue
            row['gap'], sd, n = mean_std(diffs)
            row['gap_se'] = se = sd / math.sqrt(n)
            row['vs_gpt'] = f"{row['gap']:+.4f} ± {se:.4f}" + (' (noise)' if abs(row['gap']) < 2 * se else '')
    return sorted(rows, key=lambda r: (r['budget'], r['optimizer'], r['size'], arch_key(r['config'])))


SUMMARY_COLUMNS = [
    ('config', 'config', '{}'), ('size', 'size', '{}'), ('optimizer', 'opt', '{}'), ('budget', 'budget', '{}'),
    ('params', 'params', '{:,}'), ('lr', 'best lr', '{:g}'), ('val_pm', 'val loss mean ± std (n)', '{}'),
    ('bpb_pm', 'val bits per byte', '{}'), ('vs_gpt', 'vs gpt, paired by seed (± s.e.)', '{}'), ('tokens', 'tokens', '{:,.0f}'), ('flops', 'FLOPs', '{:.3g}'),
    ('train_s', 'train s', '{:.0f}'), ('grid', 'mean val loss per lr', '{}'),
]
SCALING_COLUMNS = [
    ('config', 'config', '{}'), ('size', 'size', '{}'), ('params', 'params', '{:,}'), ('budget', 'budget', '{}'),
    ('lr', 'best lr', '{:g}'), ('flops', 'training FLOPs', '{:.3g}'), ('val_pm', 'val loss mean ± std (n)', '{}'),
    ('bpb_pm', 'val bits per byte', '{}'), ('multiplier', 'compute multiplier vs gpt', '{}'),
]


def scaling_rows(rows):
    """Per (config, size) at one budget: mean FLOPs and loss, and the compute multiplier against gpt."""
    out = []
    for _, rs in groups(rows, 'data', 'kind', 'optimizer').items():
        ref = [(r['flops'], r['val']) for r in rs if r['config'] == 'gpt']
        front = frontier(ref)
        for r in rs:
            m, why = compute_multiplier(ref, r['flops'], r['val']) if len(ref) >= 2 else (None, 'no gpt curve')
            off = r['config'] == 'gpt' and (r['flops'], r['val']) not in front
            out.append({**r, 'multiplier': (f"{m:.2f}" if m else why) + (" (off gpt's frontier)" if off else '')})
    return sorted(out, key=lambda r: (arch_key(r['config']), r['flops']))


def plot_curves(ax, xs, curves, label):
    """A mean curve over seeds with a band from min to max; a run of one evaluation is a marker."""
    n = min(len(c) for c in curves)
    mean = [sum(c[i] for c in curves) / len(curves) for i in range(n)]
    line, = ax.plot(xs[:n], mean, marker='o' if n < 3 else None, ms=4, label=label)
    ax.fill_between(xs[:n], [min(c[i] for c in curves) for i in range(n)], [max(c[i] for c in curves) for i in range(n)],
                    color=line.get_color(), alpha=0.2)


def plot_sweep(rows, png):
    """Val loss against tokens and against FLOPs: the seeds' mean at the best lr, a band for min..max.
    The evaluation at step 0 (the untrained model) is left out of the curve."""
    plt = pyplot()
    if plt is None:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    for row in rows:
        curves = [r['curve'][1:] or r['curve'] for r in row['runs']]
        for ax, col in zip(axes, (1, 2)):
            plot_curves(ax, [p[col] or 0 for p in curves[0]], [[p[4] for p in c] for c in curves],
                        f"{row['config']} (lr {row['lr']:g}, n={row['n']})")
    return save_png(fig, png, axes, ('tokens', 'training FLOPs'), 'val loss (mean over seeds; band: min..max)')


def plot_scaling(rows, png):
    """Final val loss against training FLOPs (log scale), one line per architecture."""
    plt = pyplot()
    if plt is None:
        return False
    fig, ax = plt.subplots(figsize=(8, 5.5))
    for name, rs in sorted(groups(rows, 'config').items(), key=lambda kv: arch_key(kv[0][0])):
        rs = sorted(rs, key=lambda r: r['flops'])
        ax.errorbar([r['flops'] for r in rs], [r['val'] for r in rs], yerr=[r['std'] for r in rs],
                    marker='o', capsize=3, label=name[0], linewidth=2.5 if name[0] == 'gpt' else 1.2)
    ax.set_xscale('log')
    return save_png(fig, png, [ax], ['training FLOPs (GPT.flops_per_token x tokens)'], 'final val loss')
