"""
Results as data: the results files that sweeps and the recall probe append to (one JSON record per
finished run), the statistics over seeds, markdown tables, plots, and the one order in which every
table lists the architectures. Every figure in RESULTS.md is drawn from a results file through
these.
"""
import glob
import json
import math
import os
import sys
import threading

from configurator import UsageError, atomic_write, write_error
from jobs import locked_append
from model import MATCH_TOLERANCE

# gpt first (the seeds' baseline), then the transformer variants (llama, today's baseline, with its own
# variants), then the gMLP family
ARCH_ORDER = ('gpt', 'gpt_rope', 'llama', 'llama_gelu', 'llama_primer', 'primer_ez', 'swiglu', 'geglu', 'reglu',
              'gmlp', 'amlp')


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


def key_id(key):
    """A record key as one string, the same for equal keys: what says two records are one run."""
    return json.dumps(key, sort_keys=True)


SAID = set()  # notes already printed by this process: a file read three times says its notes once


def say_once(note):
    if note not in SAID:
        SAID.add(note)
        print(f"note: {note}", file=sys.stderr)


def parse_record(line, kind):
    """(the record a line holds, or None; what it lacks). A line that is a cut-short record glued to a
    whole one (appends before cut-short lines were set aside) gives the whole one."""
    starts = [0] + [i for i in range(1, len(line)) if line.startswith(b'{"kind": ', i)]
    for start in starts:
        try:
            r = json.loads(line[start:].decode('utf-8'))
        except ValueError:  # also UnicodeDecodeError
            continue
        missing = [k for k in ('key', *KINDS[kind]) if k not in r] if isinstance(r, dict) else ['key']
        if not missing and r.get('kind', kind) == kind:
            return r, start
        return None, (f"a {r['kind']} record" if isinstance(r, dict) and 'kind' in r
                      else f"it lacks {missing[0]!r}")
    return None, 'not JSON'


def read_results(path, kind='sweep'):
    """The records of a results file (JSON lines, one finished run each) of `kind` ('sweep' or
    'probe'); no file: none. Said once on stderr and skipped: a last line cut short by a killed writer
    (the next append sets it aside), the cut-short part of a record glued to it, and a second record of
    a run already recorded (the first is kept). Any other line that is not such a record is a
    UsageError naming it (a probe file given to sweep.py --report, a file that is not a results file)."""
    if os.path.isdir(path):
        raise UsageError(f"{path} is a folder; --results names a results file (JSON lines)")
    try:
        with open(path, 'rb') as f:
            lines = f.read().splitlines(keepends=True)
    except FileNotFoundError:
        return []
    except OSError as e:
        raise UsageError(f"cannot read {path!r} ({e.strerror})") from None
    records, seen, twice = [], {}, []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        r, why = parse_record(line.rstrip(b'\r\n'), kind)
        if r is None and n == len(lines) and not line.endswith(b'\n'):
            say_once(f"{path} line {n} is cut short (a writer killed mid-line): skipped; the next record "
                     f"appended moves it to {path}.partial")
            continue
        if r is None:
            raise UsageError(f"{path} line {n} is not a {kind} results record ({why}); pass a results "
                             f"file {kind}.py wrote, or delete that line")
        if why:
            say_once(f"{path} line {n} starts with {why} bytes of a record cut short, then a whole "
                     "record: the whole one is read")
        r.setdefault('schedule', 'cosine')  # records from before lr_schedule existed
        k = key_id(r['key'])
        if k in seen:
            twice.append(f"{n} (as line {seen[k]})")
            continue
        seen[k] = n
        records.append(r)
    if twice:
        say_once(f"{path} records {len(twice)} run(s) twice, lines {', '.join(twice[:5])}"
                 f"{' ...' if len(twice) > 5 else ''}: the first record of each is read")
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
    """One line per finished run, in one write under a lock on the file (a line is whole even when
    two sweeps, or a sweep and a probe, append to the same file), fsynced: an interrupted sweep keeps
    every finished run. A cut-short last line left by a killed writer is first moved to
    `path`.partial, with a note. `kept`: where the run's own output stays when the results file
    cannot be written (one line, not a traceback)."""
    data = (json.dumps(record) + '\n').encode()
    with lock:
        try:
            note = locked_append(path, data, aside=f"{path}.partial")
        except OSError as e:
            raise write_error(path, e, f"{kept} is kept; rerun the same command to record it") from None
    if note:
        print(f"note: {note}", file=sys.stderr)


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
    the frontier's range: no extrapolation. Also the two frontier points it read between.
    """
    pts = frontier(reference)
    for (f0, l0), (f1, l1) in zip(pts, pts[1:]):
        if l1 <= loss <= l0:
            x = math.log(f0) + (loss - l0) * (math.log(f1) - math.log(f0)) / (l1 - l0)
            return math.exp(x) / flops, None, ((f0, l0), (f1, l1))
    if loss < pts[-1][1]:
        return None, f"> {pts[-1][0] / flops:.2f} (below gpt's lowest loss)", ()
    return None, f"< {pts[0][0] / flops:.2f} (above gpt's highest loss)", ()


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

def tuned_lrs(records, size=None, *, schedule='cosine', budget=None):
    """{config: the lr whose seeds have the best mean final val loss}, tuned where the grid ran: AdamW,
    the `schedule`, at the iteration budget `budget` (None: any), at `size` where the results hold runs
    there, else at the size with the most runs of that config."""
    records = [r for r in records if r['budget'] == 'max_iters' and r['optimizer'] == 'adamw'
               and r.get('schedule', 'cosine') == schedule and budget in (None, r['budget_value'])]
    sizes = {}
    for (name, at), rs in groups(records, 'config', 'size').items():
        sizes[name] = max(sizes.get(name, (False, 0, '')), (at == size, len(rs), at))
    out = {}
    for (name, at), rs in groups(records, 'config', 'size').items():
        if at == sizes[name][2]:  # at one size, several budgets: the largest's grid
            last = max(r['budget_value'] for r in rs)
            out[name] = best_lr([r for r in rs if r['budget_value'] == last])
    return out


def best_lr(records):
    """The grid point with the best mean final val loss, compared on the seeds every grid point has
    (a grid tuned on seed 1 and replicated at its best must not let a 1-seed mean beat a 3-seed one)."""
    by_lr = groups(records, 'lr')
    common = set.intersection(*({r['seed'] for r in rs} for rs in by_lr.values()))
    return min(by_lr, key=lambda k: mean_std([r['val_loss'] for r in by_lr[k]
                                              if r['seed'] in common or not common])[0])[0]


def grid_edge(lrs, best):
    """'top' / 'bottom' when the best lr is the largest / smallest of a grid of 2 or more, else None."""
    if len(lrs) < 2:
        return None
    return 'top' if best == max(lrs) else 'bottom' if best == min(lrs) else None


REFERENCES = ('gpt', 'llama')  # the seeds' baseline (the GPT-2 block) and today's
SAME_RUN = ('data', 'size', 'budget', 'optimizer', 'schedule')  # rows a gap compares


def paired_gap(row, base):
    """(mean gap, its standard error or None, the cell's text, per-seed gaps) of row's runs minus
    base's, paired by seed: a run's seed draws its val batches too, so at one seed both configs are
    scored on the same bytes, and the seed-to-seed change of the val sample cancels."""
    theirs = {r['seed']: r['val_loss'] for r in base['runs']}
    diffs = [r['val_loss'] - theirs[r['seed']] for r in row['runs'] if r['seed'] in theirs]
    if len(diffs) < 2:  # one pair has no spread: say so instead of a false ± 0
        gap = diffs[0] if diffs else row['val'] - base['val']
        return gap, None, f"{gap:+.4f} (1 seed: spread unknown)", diffs
    gap, sd, n = mean_std(diffs)
    se = sd / math.sqrt(n)
    return gap, se, f"{gap:+.4f} ± {se:.4f}" + (' (noise)' if abs(gap) < 2 * se else ''), diffs


def summary_rows(records):
    """One row per (corpus, config, size, budget, optimizer, schedule): the best lr of its grid (marked
    where it is the grid's edge), mean ± std (n) there in loss and in bits per byte, the grid's means,
    and the gap to each reference (gpt, llama) paired by seed, with its standard error."""
    rows = []
    for (data, name, size, budget, value, opt, sched), rs in groups(
            records, 'data_dir', 'config', 'size', 'budget', 'budget_value', 'optimizer', 'schedule').items():
        by_lr = {lr: mean_std([r['val_loss'] for r in g]) for (lr,), g in groups(rs, 'lr').items()}
        lr = best_lr(rs)
        edge = grid_edge(list(by_lr), lr)
        at = [r for r in rs if r['lr'] == lr]
        mean, std, n = by_lr[lr]
        bpb = [r['val_bpb'] for r in at if r.get('val_bpb') is not None]
        rows.append(dict(
            data=data, corpus=at[0].get('corpus', data), config=name, size=size, kind=budget,
            budget=f"{budget}={value:g}", budget_value=value, optimizer=opt, schedule=sched, lr=lr,
            edge=edge, tuned=len(by_lr) >= 3 and edge is None,
            lr_text=f"{lr:g}" + (f" ({edge} of grid: --extend_lr)" if edge else ''),
            val=mean, std=std, n=n, values=[r['val_loss'] for r in at],
            val_pm=f"{mean:.4f} ± {std:.4f} ({n})",
            bpb_pm="{:.4f} ± {:.4f}".format(*mean_std(bpb)[:2]) if len(bpb) == n else None,
            grid=' / '.join(f"{k:g}: {by_lr[k][0]:.4f}" + (f" ({by_lr[k][2]})" if by_lr[k][2] != n else '')
                            for k in sorted(by_lr)),
            params=at[0]['params'], params_text=f"{at[0]['params']:,}", tokens=mean_std([r['tokens'] for r in at])[0],
            flops=mean_std([r['flops'] or 0 for r in at])[0],
            train_s=mean_std([r['train_s'] or 0 for r in at])[0], runs=at,
            hellaswag_pm="{:.4f} ± {:.4f} ({})".format(*mean_std([r['hellaswag_acc_norm'] for r in at]))
            if all('hellaswag_acc_norm' in r for r in at) else None))
    for row in rows:  # the gaps to each reference on the same corpus, size, budget, optimizer, schedule
        for ref in REFERENCES:
            base = next((b for b in rows if b['config'] == ref and all(b[k] == row[k] for k in SAME_RUN)), None)
            if base is not None and row is not base:
                suffix = '' if ref == 'gpt' else f'_{ref}'
                (row[f'gap{suffix}'], row[f'gap{suffix}_se'], row[f'vs_{ref}'],
                 row[f'gaps{suffix}']) = paired_gap(row, base)
                off = row['params'] / base['params'] - 1
                if ref == 'gpt' and abs(off) > MATCH_TOLERANCE:  # not matched: the table says so
                    row['params_text'] += f" ({off:+.0%} vs gpt: not matched)"
    return sorted(rows, key=lambda r: (r['budget'], r['optimizer'], r['schedule'], r['size'],
                                       arch_key(r['config'])))


SUMMARY_COLUMNS = [
    ('config', 'config', '{}'), ('size', 'size', '{}'), ('optimizer', 'opt', '{}'), ('budget', 'budget', '{}'),
    ('params_text', 'params', '{}'), ('lr_text', 'best lr', '{}'), ('val_pm', 'val loss mean ± std (n)', '{}'),
    ('bpb_pm', 'val bits per byte', '{}'), ('vs_gpt', 'vs gpt, paired by seed (± s.e.)', '{}'),
    ('vs_llama', 'vs llama, paired by seed (± s.e.)', '{}'), ('tokens', 'tokens', '{:,.0f}'),
    ('flops', 'FLOPs', '{:.3g}'), ('train_s', 'train s', '{:.0f}'), ('grid', 'mean val loss per lr', '{}'),
]
HELLASWAG_COLUMN = ('hellaswag_pm', 'HellaSwag acc_norm mean ± std (n)', '{}')  # where the records have it
SCALING_COLUMNS = [
    ('config', 'config', '{}'), ('size', 'size', '{}'), ('params', 'params', '{:,}'), ('budget', 'budget', '{}'),
    ('lr_text', 'best lr', '{}'), ('flops', 'training FLOPs', '{:.3g}'), ('val_pm', 'val loss mean ± std (n)', '{}'),
    ('bpb_pm', 'val bits per byte', '{}'), ('multiplier', 'compute multiplier vs gpt', '{}'),
]


def scaling_rows(rows):
    """Per (config, size, budget) of one budget kind: mean FLOPs and loss, and the compute multiplier
    against gpt's frontier. A multiplier read on a stretch of gpt's frontier whose ends did not both
    have an lr grid with the best inside is an upper bound ('≤'): a tuned gpt there could only be
    lower, and then need fewer FLOPs."""
    out = []
    for _, rs in groups(rows, 'data', 'kind', 'optimizer', 'schedule').items():
        ref = [r for r in rs if r['config'] == 'gpt']
        front = frontier([(r['flops'], r['val']) for r in ref])
        tuned = {(r['flops'], r['val']) for r in ref if r['tuned']}
        for r in rs:
            m, why, used = (compute_multiplier([(g['flops'], g['val']) for g in ref], r['flops'], r['val'])
                            if len(ref) >= 2 else (None, 'no gpt curve', ()))
            on_front = r['config'] == 'gpt' and (r['flops'], r['val']) in front
            text = why if m is None else (f"{m:.2f}" if on_front or all(p in tuned for p in used) else
                                          f"≤ {m:.2f} (gpt's lr not tuned there)")
            off = r['config'] == 'gpt' and (r['flops'], r['val']) not in front
            out.append({**r, 'multiplier': text + (" (off gpt's frontier)" if off else '')})
    return sorted(out, key=lambda r: (arch_key(r['config']), r['flops']))


def plot_curves(ax, xs, curves, label):
    """A mean curve over seeds with a band from min to max; a run of one evaluation is a marker."""
    n = min(len(c) for c in curves)
    mean = [sum(c[i] for c in curves) / len(curves) for i in range(n)]
    line, = ax.plot(xs[:n], mean, marker='o' if n < 3 else None, ms=4, label=label)
    ax.fill_between(xs[:n], [min(c[i] for c in curves) for i in range(n)], [max(c[i] for c in curves) for i in range(n)],
                    color=line.get_color(), alpha=0.2)


def plot_sweep(rows, png, title=None):
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
    if title:
        fig.suptitle(title, fontsize=11)
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


# -----------------------------------------------------------------------------
# the regime view: at one size, how each gap moves as training grows

def regime_groups(rows):
    """{(data, size, optimizer, schedule, kind): rows} for every size trained at 2 or more budgets of one
    kind: the budgets along which a ranking can hold or not."""
    out = groups(rows, 'data', 'size', 'optimizer', 'schedule', 'kind')
    return {k: rs for k, rs in out.items() if len({r['budget_value'] for r in rs}) > 1}


def tokens_per_param(rs):
    """{budget_value: training tokens per gpt parameter there} (each config's own count is within 1%)."""
    params = next((r['params'] for r in rs if r['config'] == 'gpt'), rs[0]['params'])
    return {v: mean_std([r['tokens'] for r in g])[0] / params for (v,), g in groups(rs, 'budget_value').items()}


def regime_tables(rs):
    """Markdown tables of one regime group: each config's val loss and rank at every budget, then its
    gap to each reference (paired by seed) at every budget. Configs in the order of the last budget."""
    tpp = tokens_per_param(rs)
    budgets = sorted(tpp)
    cell = {(r['config'], r['budget_value']): r for r in rs}
    last = sorted((r for r in rs if r['budget_value'] == budgets[-1]), key=lambda r: r['val'])
    names = [r['config'] for r in last] + sorted({r['config'] for r in rs} - {r['config'] for r in last},
                                                 key=arch_key)
    rank = {}
    for v in budgets:
        for i, r in enumerate(sorted((r for r in rs if r['budget_value'] == v), key=lambda r: r['val']), 1):
            rank[r['config'], v] = i
    head = [f"{tpp[v]:.1f} ({v:g})" for v in budgets]
    out = [f"rank, val loss (nats/byte) mean ± std (n) and best lr at each budget: tokens per parameter "
           f"({rs[0]['kind']})",
           '', '| config | ' + ' | '.join(head) + ' |', '|---|' + '---:|' * len(budgets)]
    for name in names:
        out.append(f"| {name} | " + ' | '.join(
            f"#{rank[name, v]} {cell[name, v]['val']:.4f} ± {cell[name, v]['std']:.4f} ({cell[name, v]['n']}), "
            f"lr {cell[name, v]['lr']:g}" + (f" ({cell[name, v]['edge']} of grid)" if cell[name, v]['edge'] else '')
            if (name, v) in cell else '–' for v in budgets) + ' |')
    for ref in REFERENCES:
        if not any(r['config'] == ref for r in rs):
            continue
        out += ['', f"gap to {ref} (nats/byte), paired by seed (± s.e.; (noise): within 2 s.e.)", '',
                '| config | ' + ' | '.join(head) + ' |', '|---|' + '---:|' * len(budgets)]
        for name in (n for n in names if n != ref):
            out.append(f"| {name} | " + ' | '.join(
                cell[name, v].get(f'vs_{ref}', '–') if (name, v) in cell else '–' for v in budgets) + ' |')
    return '\n'.join(out)


def plot_regime(rs, png, title):
    """Each config's gap to each reference (one panel each) against tokens per parameter (log axis):
    one line per config through the mean paired gap, a band from the smallest to the largest per-seed
    gap where there are 2 or more seeds. With neither reference in `rs` (a sweep of other configs
    alone), one panel of each config's val loss, its band the seeds' range."""
    plt = pyplot()
    if plt is None:
        return False
    refs = [ref for ref in REFERENCES if any(r['config'] == ref for r in rs)] or [None]
    tpp = tokens_per_param(rs)
    fig, axes = plt.subplots(1, len(refs), figsize=(7 * len(refs), 5.5), squeeze=False)
    for ax, ref in zip(axes[0], refs):
        y = 'val' if ref is None else 'gap' if ref == 'gpt' else f'gap_{ref}'
        spread = (lambda r: r['values']) if ref is None else (lambda r: r[y.replace('gap', 'gaps')] or [r[y]])
        for (name,), g in sorted(groups(rs, 'config').items(), key=lambda kv: arch_key(kv[0][0])):
            g = sorted((r for r in g if y in r), key=lambda r: r['budget_value'])
            if not g:
                continue
            xs = [tpp[r['budget_value']] for r in g]
            line, = ax.plot(xs, [r[y] for r in g], marker='o', ms=4, label=name)
            ax.fill_between(xs, [min(spread(r)) for r in g], [max(spread(r)) for r in g],
                            color=line.get_color(), alpha=0.15)
        if ref is not None:
            ax.axhline(0, color='black', linewidth=1)
        ax.set_xscale('log')
        ax.set_title("val loss (no gpt or llama runs to compare with)" if ref is None else
                     f"gap to {ref} (below 0: better than {ref})", fontsize=10)
    fig.suptitle(title, fontsize=11)
    return save_png(fig, png, axes[0], ['training tokens per parameter'] * len(refs),
                    'val loss (nats/byte); band: seeds' if refs == [None] else
                    'val loss gap (nats/byte), paired by seed; band: seeds')


# -----------------------------------------------------------------------------
# the recall probe (probe.py): the best run of each cell, its table and plot

def best_runs(records):
    """{(config, view, width, T, N): the record with the best final accuracy over learning rates} (the
    fewest steps to stop_acc among runs that solved), for every config a record stands for."""
    best = {}
    for r in records:
        score = (r['acc'], -(r['solved_at'] if r.get('solved_at') is not None else math.inf))
        for name in r.get('configs', [r['config']]):
            cell = (name, r.get('view', 'block'), r['width'], r['T'], r['N'])
            if cell not in best or score > best[cell][0]:
                best[cell] = (score, r)
    return {cell: r for cell, (_, r) in best.items()}


def probe_table(records):
    """Markdown: one row per (config, view, width), one column per (T, N): the best accuracy over learning
    rates and, where it solved, the steps (sequences) it took to reach stop_acc."""
    best = best_runs(records)
    if not best:
        return "(no runs yet)"
    rows = sorted({cell[:3] for cell in best}, key=lambda r: (r[1], arch_key(r[0]), r[2]))
    cols = sorted({cell[3:] for cell in best})
    out = ['| config | view | width | params | ' + ' | '.join(f"T={T} N={N}" for T, N in cols) + ' |',
           '|---|---|---:|---:|' + '---:|' * len(cols)]
    for c, view, w in rows:
        cells, params = [], set()
        for T, N in cols:
            r = best.get((c, view, w, T, N))
            if r is None:
                cells.append('–')
                continue
            params.add(r['params'])
            solved = f" ({r['solved_at']:,} steps, lr {r['lr']:g})" if r.get('solved_at') is not None else ''
            cells.append(f"{r['acc']:.2f}{solved}")
        p = f"{min(params) / 1e3:.0f}k" + (f"–{max(params) / 1e3:.0f}k" if len(params) > 1 else '')
        shared = next((r.get('configs') for r in best.values() if c in r.get('configs', [])), [c])
        first = min(shared, key=arch_key)  # the cell's run, named by its first config in ARCH_ORDER
        same = f" (= {first})" if first != c and view == 'mixer' else ''
        out.append(f"| {c}{same} | {view} | {w} | {p} | " + ' | '.join(cells) + ' |')
    return '\n'.join(out)


def plot_probe(records, png):
    """Accuracy against N, one panel per T, one line per config (solid: mixer view, dashed: block);
    dotted: 1/N, what a model scores that answers with one of the sequence's values at random. The last
    panel: held-out accuracy during training at the smallest cell."""
    plt = pyplot()
    best = best_runs(records)
    if plt is None or not best:
        return False
    Ts = sorted({cell[3] for cell in best})
    configs = sorted({cell[0] for cell in best}, key=arch_key)
    fig, axes = plt.subplots(1, len(Ts) + 1, figsize=(4.2 * len(Ts) + 5.5, 4.2), squeeze=False)
    colors = plt.rcParams['axes.prop_cycle'].by_key()['color']
    for ax, T in zip(axes[0][:-1], Ts):
        for ci, c in enumerate(configs):
            for view, style in (('mixer', '-'), ('block', '--')):
                for w in sorted({cell[2] for cell in best}):
                    pts = sorted((cell[4], r['acc']) for cell, r in best.items() if cell[:4] == (c, view, w, T))
                    if pts:
                        ax.plot(*zip(*pts), marker='o', ms=3, color=colors[ci % len(colors)], linestyle=style,
                                label=f"{c} {view} d={w}")
        Ns = sorted({cell[4] for cell in best if cell[3] == T})
        ax.plot(Ns, [1 / N for N in Ns], 'k:', lw=1, label='1/N: a value of the sequence at random')
        ax.set_xscale('log', base=2)
        ax.set_title(f"T = {T}")
        ax.set_ylim(-0.02, 1.02)
    ax, first = axes[0][-1], min(best, key=lambda cell: (cell[3], cell[4], -cell[2]))
    for ci, c in enumerate(configs):
        for view, style in (('mixer', '-'), ('block', '--')):
            r = best.get((c, view, *first[2:]))
            if r:
                ax.plot([p[0] for p in r['curve']], [p[1] for p in r['curve']], color=colors[ci % len(colors)],
                        linestyle=style)
    ax.axhline(1 / first[4], color='k', linestyle=':', lw=1)
    ax.set_title(f"held-out accuracy in training: T = {first[3]}, N = {first[4]}, d = {first[2]}", fontsize=9)
    for ax, xlabel in zip(axes[0], ['key-value pairs N'] * len(Ts) + ['training step']):
        ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel('MQAR accuracy (held out)')
    axes[0][-1].legend(*axes[0][0].get_legend_handles_labels(), fontsize=7, loc='center left',
                       bbox_to_anchor=(1.0, 0.5))
    return save_png(fig, png)
