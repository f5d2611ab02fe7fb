"""
Tables and plots from a results file: the sweep's summary (mean ± sd over seeds at the best lr,
gaps to gpt and llama with 95% t intervals), the regime, schedule and transfer views (does a gap
hold across budgets, schedules, shapes), scaling, and the val-loss plots of runs. Every figure in
README.md and RESULTS.md is drawn from a committed results file through these
(`python sweep.py --report --results=FILE`).
"""
import json
import math
import os
import re
import sys
import textwrap

from configurator import HERE, UsageError, atomic_write, regular_file
from model import MATCH_TOLERANCE
from stats import (ARCH, BUDGET, CONTEXT, DEFAULTS, PER_CONFIG_BUDGETS, REFERENCES, SIZE, arch_key,
                   at_flops, bound_text, card, change_marks, choose_lr, compared, compute_multiplier,
                   differing, frontier, gap_fields, groups, interval, key_id, mean_std, paired_gap,
                   read_many, run_id, say_once, seeds_text, setting, spread_text)


# -----------------------------------------------------------------------------
# plots and tables

def pyplot():
    """matplotlib.pyplot with the Agg backend, or None (and a one-line note) without matplotlib."""
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        print("plots skipped: matplotlib is not installed (pip install matplotlib)",
              file=sys.stderr)
        return None
    return plt


def suptitle(fig, text):
    """A figure's title, wrapped to lines that fit it; a corpus's hash is for tables, not titles."""
    text = re.sub(r' \(sha256 [0-9a-f]+\)|, sha256 [0-9a-f]+', '', text)
    fig.suptitle(textwrap.fill(text, 110), fontsize=10)


def save_png(fig, png, axes=(), xlabels=(), ylabel=None):
    """Label each of `axes` (a grid, a legend), then write the figure to `png` atomically. True."""
    import matplotlib.pyplot as plt
    for ax, xlabel in zip(axes, xlabels):
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3, which='both')
        ax.legend(fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(png)), exist_ok=True)
    atomic_write(png, lambda f: fig.savefig(f, format='png', dpi=110))
    plt.close(fig)
    return True


def markdown_table(rows, columns, left=()):
    """rows: dicts, or lists of cells when `columns` are plain headers; columns: (key, header,
    format) each. A missing cell is '–'; the first column and those in `left` align left."""
    if columns and isinstance(columns[0], str):
        rows = [dict(enumerate(r)) for r in rows]
        columns = [(i, h, '{}') for i, h in enumerate(columns)]
    return '\n'.join(['| ' + ' | '.join(h for _, h, _ in columns) + ' |',
                      '|' + '|'.join('---' if i == 0 or key in left else '---:'
                                     for i, (key, _, _) in enumerate(columns)) + '|']
                     + ['| ' + ' | '.join('–' if r.get(key) is None else fmt.format(r.get(key))
                                          for key, _, fmt in columns) + ' |' for r in rows])


def references(rs):
    """The references (gpt, llama) that rows `rs` hold runs of."""
    return [ref for ref in REFERENCES if any(r['config'] == ref for r in rs)]


def vs(r, ref):
    """Row r's paired gap to `ref` as a table shows it; '–' without one (or without a row)."""
    return r.get(f'vs_{ref}', '–') if r else '–'


def by_config(config_of):
    """The labels of {label: config}, in ARCH_ORDER of their configs, then by name."""
    return sorted(config_of, key=lambda n: arch_key(config_of[n]) + (n,))


def gap_of(ref):
    """The field of a row's paired gap to `ref`: 'gap' (to gpt), 'gap_llama'."""
    return 'gap' if ref == 'gpt' else f'gap_{ref}'


def view_table(lines, first, columns, text, y=None, paired=False):
    """A view's markdown table: a row per (first cells, a row or None under each of `columns`) of
    `lines`; with gap `y`, what it does from the first column to each later (change_marks)."""
    marks = [f"{columns[0]} → {c}" for c in columns[1:]] if y else []
    body = [[*lead, *(text(r) if r else '–' for r in got),
             *(change_marks(got, y, paired, columns) if y else ())] for lead, got in lines]
    head = [*first, *columns, *marks]
    return markdown_table(body, head, left=range(len(head) - len(marks), len(head)))


# -----------------------------------------------------------------------------
# the sweep summary: a row per setting

def summary_rows(records):
    """One row per run setting: its best lr, the val loss there over its distinct seeds (a seed
    recorded twice, from two folders, is said, not averaged), the paired gap to each reference."""
    cells = {}
    for r in records:
        cells.setdefault(key_id(setting(r)), []).append(r)
    rows = []
    for cell, rs in cells.items():
        by_lr, twice = {}, []
        for r in rs:
            if by_lr.setdefault(r['lr'], {}).setdefault(r['seed'], r) is not r:
                twice.append(f"{r['config']} seed {r['seed']} lr {r['lr']:g}")
        if twice:
            say_once(f"{len(twice)} run(s) recorded twice under one setting (the same run from two "
                     f"folders?): {', '.join(twice[:3])}{' ...' if len(twice) > 3 else ''}; "
                     "the first is read")
        lr, chosen_on = choose_lr(by_lr)
        edge = (None if len(by_lr) < 2 else 'top' if lr == max(by_lr)  # of the grid
                else 'bottom' if lr == min(by_lr) else None)
        at = [by_lr[lr][s] for s in sorted(by_lr[lr])]
        first, plain = at[0], setting(at[0])
        mean, std, n = mean_std([r['val_loss'] for r in at])
        bpb = [r['val_bpb'] for r in at if r.get('val_bpb') is not None]
        how = ("the only lr" if len(by_lr) == 1
               else f"best of {len(by_lr)} on {seeds_text(chosen_on)}")
        means = {k: mean_std([r['val_loss'] for r in v.values()]) for k, v in by_lr.items()}
        # a transfer view matches shapes by tokens per parameter: budgets of iterations and of
        # tokens are one kind there (of FLOPs or seconds, not: at one, the configs' tokens differ)
        kind = first['budget'] if first['budget'] in PER_CONFIG_BUDGETS else 'max_iters'
        rows.append(dict(
            setting=cell, **{view: key_id(setting(first, drop)) for view, drop in (
                ('context', compared(first)),
                ('regime', ARCH + BUDGET), ('scaling', ARCH + BUDGET + SIZE))},
            transfer=key_id({**setting(first, ARCH + BUDGET + SIZE + CONTEXT), 'budget': kind}),
            data=plain['data'],
            shape_context={k: v for k, v in plain.items() if k in CONTEXT},
            data_dir=first['data_dir'], corpus=first.get('corpus', first['data_dir']),
            config=first['config'], label=first['config'], size=first['size'], kind=first['budget'],
            budget=f"{first['budget']}={first['budget_value']:g}",
            budget_value=first['budget_value'], optimizer=first['optimizer'],
            schedule=first['schedule'], val_set=first.get('val_set'),
            lr=lr, edge=edge, tuned=len(by_lr) >= 3 and edge is None, chosen_on=chosen_on,
            edge_text=f" ({edge} of grid)" if edge else '',
            lr_text=f"{lr:g} ({how}" + (f"; {edge} of grid: --extend_lr)" if edge else ')'),
            val=mean, std=std, n=n, seeds=sorted(by_lr[lr]), values=[r['val_loss'] for r in at],
            unit='nats/byte' if len(bpb) == n and all(  # byte-level: a token is a byte
                abs(b * math.log(2) - r['val_loss']) < 1e-6 for b, r in zip(bpb, at))
            else 'nats/token',
            val_pm=spread_text(mean, std, n),
            bpb_pm=spread_text(*mean_std(bpb)) if len(bpb) == n else None,
            grid=' / '.join(f"{k:g}: {means[k][0]:.4f} (n={means[k][2]})" for k in sorted(means))
            if len(means) > 1 else None,
            params=first['params'], params_text=f"{first['params']:,}",
            **{k: mean_std([r[k] for r in at if r.get(k)] or [0])[0]  # (of the runs recording it)
               for k in ('tokens', 'flops', 'train_s', 'wall_s')}, runs=at,
            hellaswag_pm=spread_text(*mean_std([r['hellaswag_acc_norm'] for r in at]))
            if all('hellaswag_acc_norm' in r for r in at) else None))
    name_apart(rows)
    for row in rows:  # the gaps to each reference on the same setting but the architecture
        for ref in REFERENCES:
            base = [b for b in rows
                    if b['config'] == ref and b['context'] == row['context'] and b is not row]
            y = gap_of(ref)
            if len(base) != 1 or not (gap := paired_gap(row, base[0], y)):
                continue
            row.update(gap, **{f'vs_{ref}': gap[f'{y}_text']})
            off = row['params'] / base[0]['params'] - 1
            if ref == 'gpt' and abs(off) > MATCH_TOLERANCE:  # not matched: the table says so
                row['params_text'] += f" ({off:+.0%} vs gpt: not matched)"
        # 'train s / run s': training steps' seconds, and the run's clock from start to its last
        # evaluation (a branch's: with its constant-lr run's); older records kept only the first
        run_s = [x['elapsed_s'] for x in row['runs'] if x.get('elapsed_s')]
        row['time'] = (f"{row['train_s']:.0f} / {sum(run_s) / len(run_s):.0f}"
                       if len(run_s) == len(row['runs']) else f"{row['train_s']:.0f}")
    return sorted(rows, key=lambda r: (r['budget'], r['optimizer'], r['schedule'], r['size'],
                                       arch_key(r['config']), r['label']))


def name_apart(rows):
    """Rows a table would show alike (config, size, budget, optimizer, schedule) but whose settings
    differ (a recipe value, device, val set...) are labelled by what differs: 'gpt (device=cpu)'."""
    for rs in groups(rows, 'config', 'size', 'budget', 'optimizer', 'schedule').values():
        if len(rs) > 1:
            settings = [json.loads(r['setting']) for r in rs]
            fields = differing(settings)
            few = fields[:3] if len({key_id({k: s.get(k) for k in fields[:3]})
                                     for s in settings}) == len(rs) else fields  # each its own
            more = ' ...' if len(fields) > len(few) else ''
            for r, s in zip(rs, settings):
                r['label'] = f"{r['config']} ({shown(s, few)}{more})"


def shown(s, fields):
    """`fields` of setting `s` as a label shows them: 'device=cpu, dropout=0.1'."""
    return ', '.join(f"{k}={s.get(k, DEFAULTS.get(k))}" if s.get(k, DEFAULTS.get(k)) is not None
                     else f"{k} unrecorded" for k in fields)


SUMMARY_COLUMNS = [
    ('label', 'config', '{}'), ('size', 'size', '{}'), ('optimizer', 'opt', '{}'),
    ('budget', 'budget', '{}'), ('params_text', 'params', '{}'), ('lr_text', 'best lr', '{}'),
    ('val_pm', 'val loss ({unit}), mean ± sd over seeds', '{}'),
    ('bpb_pm', 'val bits per byte', '{}'),
    ('vs_gpt', 'vs gpt ({unit}): paired gap ± 95% CI', '{}'),
    ('vs_llama', 'vs llama ({unit}): paired gap ± 95% CI', '{}'),
    ('tokens', 'tokens', '{:,.0f}'), ('flops', 'FLOPs', '{:.3g}'),
    ('time', 'train s / run s', '{}'), ('grid', 'mean val loss per lr', '{}'),
    ('hellaswag_pm', 'HellaSwag acc_norm, mean ± sd', '{}'),  # where the records have it
]
SCALING_COLUMNS = [
    ('label', 'config', '{}'), ('size', 'size', '{}'), ('params', 'params', '{:,}'),
    ('budget', 'budget', '{}'), ('lr_text', 'best lr', '{}'), ('flops', 'training FLOPs', '{:.3g}'),
    ('val_pm', 'val loss ({unit}), mean ± sd over seeds', '{}'),
    ('bpb_pm', 'val bits per byte', '{}'), ('multiplier', 'compute multiplier vs gpt', '{}'),
]


def unit(rs, columns=None):
    """The loss unit of rows (or columns' headers in it): nats/byte on a byte-level corpus."""
    u = ' or '.join(sorted({r['unit'] for r in rs}))
    return u if columns is None else [(k, h.format(unit=u), f) for k, h, f in columns]


def table(rows):
    """A markdown table of rows compared on one setting: no column whose cells are all empty; one
    that repeats a value in every row (size, optimizer, budget) is named above the table instead."""
    columns, same = [], []
    for key, header, fmt in unit(rows, SUMMARY_COLUMNS):
        cells = {fmt.format(r[key]) if r.get(key) is not None else None for r in rows}
        if key in ('size', 'optimizer', 'budget') and len(cells) == 1 and cells != {None}:
            same += cells
        elif cells != {None}:
            columns.append((key, header, fmt))
    below = [line for line in (eval_noise_line(rows, ''), cards_line(rows)) if line]
    return ((f"({', '.join(same)} in every row)\n\n" if same else '')
            + '\n\n'.join([markdown_table(rows, columns), *below]))


def scaling_rows(rows):
    """Per (config, size, budget) of one setting (less shape and budget): mean FLOPs and loss, and
    the compute multiplier against gpt's frontier, or a bound (bound_text): an lr is tuned where
    its grid had the best inside (gpt's at both ends of the stretch read, or its lowest point)."""
    out = []
    for _, rs in groups(rows, 'transfer').items():
        ref = [r for r in rs if r['config'] == 'gpt']
        points = [(r['flops'], r['val']) for r in ref]
        front = frontier(points)
        tuned = {(r['flops'], r['val']) for r in ref if r['tuned']}
        for r in rs:
            m, why, used = (compute_multiplier(points, r['flops'], r['val']) if len(ref) >= 2
                            else (None, 'no gpt curve', ()))
            on_front = r['config'] == 'gpt' and (r['flops'], r['val']) in front
            text = bound_text(m, why, on_front or all(p in tuned for p in used),
                              on_front or r['tuned'])
            off = r['config'] == 'gpt' and not on_front
            out.append({**r, 'multiplier': text + (" (off gpt's frontier)" if off else '')})
    return sorted(out, key=lambda r: (arch_key(r['config']), r['flops']))


def plot_curves(ax, xs, curves, label):
    """A mean curve over seeds, a band of its 95% t interval (3+ curves: two seeds' t interval, with
    one degree of freedom, would swamp the curves); one evaluation, a dot."""
    n = min(len(c) for c in curves)
    points = [interval([c[i] for c in curves]) for i in range(n)]
    line, = ax.plot(xs[:n], [m for m, _, _ in points], marker='o' if n < 3 else None, ms=4,
                    label=label)
    if len(curves) >= BAND_SEEDS:
        ax.fill_between(xs[:n], [m - h for m, h, _ in points], [m + h for m, h, _ in points],
                        color=line.get_color(), alpha=0.2)


BAND_SEEDS = 3  # the fewest seeds a plot draws a 95% t band for


def n_text(ns, spread='', least=2):
    """'n = 3 seeds' or 'n = 1-3 seeds' for a plot's title, and `spread` where a point has `least`
    seeds or more (a band: BAND_SEEDS), else where one has 2, that no band is drawn."""
    lo, hi = min(ns), max(ns)
    return (f"n = {lo} seed{'s' * (lo > 1)}" if lo == hi else f"n = {lo}-{hi} seeds") + (
        spread if hi >= least else f"; no band under {least} seeds" if hi > 1 else '')


def plot_sweep(rows, png, title):
    """Val loss against tokens and against FLOPs: the seeds' mean at the best lr, its 95% interval
    as a band. The evaluation at step 0 (the untrained model) is left out of the curve."""
    if not (plt := pyplot()):
        return False
    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    for row in rows:
        curves = [r['curve'][1:] or r['curve'] for r in row['runs']]
        band = n_text([row['n']], '; band: 95% CI', BAND_SEEDS)
        label = f"{row['label']} (lr {row['lr']:g}, {band})"
        for ax, col in zip(axes, (1, 2)):
            plot_curves(ax, [p[col] or 0 for p in curves[0]], [[p[4] for p in c] for c in curves],
                        label)
    suptitle(fig, f"{title} ({n_text([r['n'] for r in rows])})")
    return save_png(fig, png, axes, ('tokens', 'training FLOPs'),
                    f'val loss, {unit(rows)} (mean over seeds)')


def plot_scaling(rows, png, title):
    """Final val loss against training FLOPs (log scale), a line per architecture, ± sd."""
    if not (plt := pyplot()):
        return False
    fig, ax = plt.subplots(figsize=(8, 5.5))
    tab20 = plt.get_cmap('tab20').colors
    colors = tab20[::2] + tab20[1::2]  # its dark colours, then the light: 11 configs stay apart
    names = sorted({r['label'] for r in rows}, key=arch_key)
    sizes = sorted({r['size'] for r in rows}, key=lambda s: [int(v) for v in s.split('x')])
    for (name, size), rs in sorted(groups(rows, 'label', 'size').items(),
                                   key=lambda kv: arch_key(kv[0][0])):
        rs = sorted(rs, key=lambda r: r['flops'])  # one line per config and size: its budgets
        i = sizes.index(size)
        ax.errorbar([r['flops'] for r in rs], [r['val'] for r in rs], yerr=[r['std'] for r in rs],
                    color=colors[names.index(name) % len(colors)], capsize=3,
                    marker='osD^v<>'[i % 7], linestyle='-:--'[i % 3] if len(sizes) > 1 else '-',
                    label=name + (f" {size}" if len(sizes) > 1 else ''),
                    linewidth=2.5 if name == 'gpt' else 1.2)
    ax.set_xscale('log')
    suptitle(fig, f"{title} ({n_text([r['n'] for r in rows], '; bars: sd')})")
    return save_png(fig, png, [ax], ['training FLOPs (GPT.flops_per_token x tokens)'],
                    f'final val loss ({unit(rows)})')


# -----------------------------------------------------------------------------
# the regime view: gaps across budgets

def regime_groups(rows):
    """{setting less architecture and budget: its rows (view_rows)}, of those at 2+ budgets."""
    return views(groups(rows, 'regime'), 'budget_value')


def tokens_per_param(rs):
    """{budget_value: gpt's training tokens per gpt parameter there, where gpt ran (a budget of
    FLOPs gives each config its own tokens), else the rows'}."""
    params, out = next((r['params'] for r in rs if r['config'] == 'gpt'), rs[0]['params']), {}
    for (v,), g in groups(rs, 'budget_value').items():
        g = [r for r in g if r['config'] == 'gpt'] or g
        out[v] = mean_std([r['tokens'] for r in g])[0] / params
    return out


def per_param(x):
    """Tokens per parameter as a column names it: 20.6; a toy run's 0.012 keeps its digits."""
    return f"{x:.1f}" if x >= 0.095 else f"{x:.2g}"


def eval_noise_line(rs, suffix):
    """A line under a gap table: the largest val-sample standard error of its gaps, where known."""
    ses = [r[f'eval_se{suffix}'] for r in rs if r.get(f'eval_se{suffix}') is not None]
    own = any("each run's own seed" in (r.get('val_set') or '') for r in rs)  # eval_seed -1
    why = ("each run's val batches are drawn from its own seed, so it is in the intervals too"
           if own else "one val set scores every run, so it is shared by the seeds and not in the "
           "intervals")
    return (f"Val-sample noise of these gaps (their s.e. over the val batches; {why}): at most "
            f"{max(ses):.4f}." if ses else '')


def cards_line(rs):
    """A line under a view whose runs come from more than one card: a gap across two is theirs too."""
    cards = [card(x) or 'unnamed (older records)' for r in rs for x in r['runs']]
    return ("Runs from more than one machine: " + ', '.join(
        f"{c} ({cards.count(c)} run{'s' * (cards.count(c) > 1)})" for c in sorted(set(cards)))
        + "; a gap between two of them is also the machines'." if len(set(cards)) > 1 else '')


def ends_table(rs):
    """Markdown: each config's gap to gpt and to llama at the smallest and the largest budget of a
    regime group (paired by seed, ± 95% t interval, n), its best lr at the largest; by loss."""
    tpp = tokens_per_param(rs)
    ends, refs = (min(tpp), max(tpp)), references(rs)
    cell = {(r['label'], r['budget_value']): r for r in rs}
    top = {r['label']: r for r in rs if r['budget_value'] == ends[1]}
    lines = [([n, '–' if n not in top else f"{top[n]['lr']:g}" + (
                top[n]['edge_text'] or ('' if top[n]['grid'] else ' (no grid: the only lr run)'))],
              [(cell.get((n, v)), ref) for ref in refs for v in ends])
             for n in sorted({r['label'] for r in rs},
                             key=lambda n: (top[n]['val'] if n in top else math.inf, n))]
    return view_table(lines, ['config', f"best lr at {per_param(tpp[ends[1]])}"], [
        f"vs {ref} at {per_param(tpp[v])} ({unit(rs)})" for ref in refs for v in ends],
        lambda pair: vs(*pair))

def regime_tables(rs):
    """Markdown tables of one regime group, configs in the order of the last budget: each one's val
    loss and rank at every budget; its gap to each reference (paired by seed) at every budget."""
    tpp = tokens_per_param(rs)
    budgets = sorted(tpp)
    cell = {(r['label'], r['budget_value']): r for r in rs}
    config_of = {r['label']: r['config'] for r in rs}
    names = [r['label'] for r in sorted(rs, key=lambda r: r['val'])
             if r['budget_value'] == budgets[-1]]
    names += sorted(set(config_of) - set(names), key=arch_key)
    rank = {(r['label'], v): i for (v,), g in groups(rs, 'budget_value').items()
            for i, r in enumerate(sorted(g, key=lambda r: r['val']), 1)}
    head = [f"{per_param(tpp[v])} ({v:g})" for v in budgets]
    lines = [([n], [cell.get((n, v)) for v in budgets]) for n in names]
    out = [f"Val loss ({unit(rs)}) at each budget: rank, mean ± sd over seeds, best lr. Columns: "
           f"tokens per parameter ({rs[0]['kind']})", '', view_table(
               lines, ['config'], head, lambda r: f"#{rank[r['label'], r['budget_value']]} "
               f"{r['val_pm']}, lr {r['lr']:g}{r['edge_text']}")]
    for ref in references(rs):
        noise = eval_noise_line(rs, gap_of(ref)[3:])
        out += ['', f"Gap to {ref} ({unit(rs)}; below 0: better than {ref}), paired by seed, "
                    "± its 95% t interval; (spans 0): the interval cannot tell the sign", '',
                view_table([(n, got) for n, got in lines if config_of[n[0]] != ref], ['config'],
                           head, lambda r: vs(r, ref))] + (['', noise] if noise else [])
    return '\n'.join(out + ['', cards_line(rs)]).rstrip()


def flops_gap_of(ref):
    """The field of a row's gap to `ref` at equal training FLOPs: 'flops_gap', 'flops_gap_llama'."""
    return 'flops_' + gap_of(ref)


def add_flops_gaps(rs):
    """Each row of rs gets its gap to each reference at equal training FLOPs (flops_gap_of's
    gap_fields): the reference's loss at the row's FLOPs, read from its rows of the same shape
    (at_flops: never beyond its budgets), paired by seed; a row of no recorded FLOPs gets none."""
    for ref in references(rs):
        y = flops_gap_of(ref)
        for r in rs:
            theirs = [x for x in rs if x['label'] == ref and x.get('shape') == r.get('shape')]
            at = (at_flops(theirs, r['flops']) if r['label'] != ref else None) or {}
            by_seed = {x['seed']: x['val_loss'] - at[x['seed']]
                       for x in r['runs'] if x['seed'] in at}
            if by_seed:
                r.update(gap_fields(y, by_seed))
    return rs


def flops_ratios(rs, ref):
    """{(label, shape): the mean over budgets of its training FLOPs against ref's there}."""
    cell = {(r['label'], r.get('shape'), r['budget_value']): r for r in rs}
    ratio = {}
    for (n, s, v), r in cell.items():
        if (ref, s, v) in cell and r['flops'] > 0 and cell[ref, s, v]['flops'] > 0:
            ratio.setdefault((n, s), []).append(r['flops'] / cell[ref, s, v]['flops'])
    return {k: f"{sum(x) / len(x):.2f}x" for k, x in ratio.items()}


def flops_text(ref):
    return lambda r: r.get(f'{flops_gap_of(ref)}_text', '–')


def flops_tables(rs):
    """Markdown, a table per reference: each config's gap to it at equal training FLOPs at each of
    its budgets (add_flops_gaps), paired by seed, ± 95% t interval, and its FLOPs per token against
    the reference's (a step's time is bench.py's: runs that shared a machine do not tell it)."""
    tpp = tokens_per_param(rs)
    budgets, config_of = sorted(tpp), {r['label']: r['config'] for r in rs}
    cell = {(r['label'], r['budget_value']): r for r in rs}
    out, known = [], any(r['flops'] > 0 for r in rs) and add_flops_gaps(rs)  # (rows without: –)
    for ref in references(rs) if known else ():
        ratio = flops_ratios(rs, ref)
        lines = [([n, ratio.get((n, None), '–')], [cell.get((n, v)) for v in budgets])
                 for n in by_config(config_of) if config_of[n] != ref]
        out += ['', f"Gap to {ref} ({unit(rs)}) at equal training FLOPs: {ref}'s loss read at the "
                    f"config's FLOPs at each budget, linear in log FLOPs between {ref}'s budgets "
                    "(– outside them), paired by seed, ± 95% t interval; FLOPs: per token, against "
                    f"{ref}'s", '',
                view_table(lines, ['config', f'FLOPs vs {ref}'],
                           [f"{per_param(tpp[v])} ({v:g})" for v in budgets], flops_text(ref))] \
            if lines else []
    return '\n'.join(out).strip()


def plot_regime(rs, png, title):
    """Each config's gap to each reference (a panel each; with neither, val loss) against tokens
    per parameter: the mean paired gap, a band of its 95% t interval, zero inside the frame."""
    if not (plt := pyplot()):
        return False
    refs, tpp = references(rs) or [None], tokens_per_param(rs)
    fig, axes = plt.subplots(1, len(refs), figsize=(7 * len(refs), 5.5), squeeze=False)
    names = sorted({r['label'] for r in rs}, key=arch_key)  # one colour per config in every panel
    for ax, ref in zip(axes[0], refs):
        y = 'val' if ref is None else gap_of(ref)
        lows, highs = [0.0], [0.0]
        for i, name in enumerate(names):
            g = sorted((r for r in rs if r['label'] == name and y in r),
                       key=lambda r: r['budget_value'])
            if not g:
                continue
            xs = [tpp[r['budget_value']] for r in g]
            ax.plot(xs, [r[y] for r in g], marker='o', ms=4, label=name, color=f"C{i % 10}")
            # a band where the seeds (a gap's: its pairs) allow one; the frame holds what is drawn
            band = [r['n' if ref is None else f'{y}_n'] >= BAND_SEEDS for r in g]
            half = [(interval(r['values'])[1] if ref is None else r[f'{y}_half']) if b else 0
                    for r, b in zip(g, band)]
            lo, hi = ([r[y] + sign * (h or 0) for r, h in zip(g, half)] for sign in (-1, 1))
            ax.fill_between(xs, lo, hi, where=band, color=f"C{i % 10}", alpha=0.15)
            lows, highs = lows + lo, highs + hi
        if ref is not None:
            ax.axhline(0, color='black', linewidth=1)
            pad = 0.08 * (max(highs) - min(lows) or 1)
            ax.set_ylim(min(lows) - pad, max(highs) + pad)  # zero inside the frame, never on it
        ax.set_xscale('log')
        ax.set_xticks(sorted(tpp.values()), [per_param(t) for t in sorted(tpp.values())])
        ax.minorticks_off()
        ax.set_title("val loss (no gpt or llama runs to compare with)" if ref is None else
                     f"gap to {ref} (below 0: better than {ref})", fontsize=10)
    seeds = n_text([r['n'] for r in rs], '; band: 95% CI where 3+ seeds pair', BAND_SEEDS)
    suptitle(fig, f"{title} ({seeds})")
    return save_png(fig, png, axes[0], ['training tokens per parameter (the budgets)'] * len(refs),
                    f'val loss ({unit(rs)})' if refs == [None]
                    else f'val loss gap ({unit(rs)}), paired by seed')


# -----------------------------------------------------------------------------
# the schedule view: one gap under two schedules

SCHEDULE = ('lr_schedule', 'cooldown_frac', 'decay_lr', 'warmup_iters')


def schedule_groups(rows):
    """{setting less architecture and schedule (not budget): its rows}, of those at 2+ schedules."""
    def unscheduled(first):  # (a row's first run's setting)
        return key_id(setting(first, compared(first) + SCHEDULE))
    return views(groups([dict(r, unscheduled=unscheduled(r['runs'][0])) for r in rows],
                        'unscheduled'), 'schedule')


def schedule_tables(rs):
    """Markdown: each config's val loss under each schedule (at its own best lr); per reference, its
    gap under each and what the gap does from the first to each other (change_marks, paired)."""
    scheds = sorted({r['schedule'] for r in rs}, key=lambda s: (s != 'wsd', s))
    cell = {(r['label'], r['schedule']): r for r in rs}
    config_of = {r['label']: r['config'] for r in rs}
    lines = [([n], [cell.get((n, s)) for s in scheds]) for n in by_config(config_of)]
    lines = [(n, got) for n, got in lines if sum(r is not None for r in got) > 1]  # under 2+
    if not lines:
        return ''
    out = [view_table(lines, ['config'], [f"{s}: best lr, val loss ({unit(rs)})" for s in scheds],
                      lambda r: f"{r['lr']:g}{r['edge_text']}, {r['val_pm']}")]
    for ref in references(rs):
        mine = [(n, got) for n, got in lines if config_of[n[0]] != ref]
        if mine:
            out += ['', view_table(mine, [f"vs {ref} ({unit(rs)})"], scheds, lambda r: vs(r, ref),
                                   gap_of(ref), paired=True)]
    return '\n'.join(out + ['', cards_line(rs)]).rstrip()


# -----------------------------------------------------------------------------
# the transfer view: one gap at several shapes

def transfer_groups(rows):
    """{setting less architecture, budget, shape and CONTEXT: its rows (view_rows), with their
    `shape` and `shape_words` (what else comes with it)}, of those at 2+ shapes."""
    return views({k: [dict(r, shape=shape_apart(r, rs), shape_words=context_words(r, rs))
                      for r in rs] for k, rs in groups(rows, 'transfer').items()},
                 'shape', 'budget_value')


def shape_apart(r, rs):
    """r's size, and what tells r's setting from others at that size: a corpus folder's name (path)
    where that does, else each CONTEXT field that differs there (the data by its fingerprint)."""
    at = {key_id(x['shape_context']): x for x in rs if x['size'] == r['size']}.values()
    fields = differing([x['shape_context'] for x in at])
    for name in (folder_name, lambda x: os.path.normpath(x['data_dir'])):
        if fields == ['data'] and len({name(x) for x in at}) == len(at):
            return f"{r['size']} ({name(r)})"
    c = {**{f: DEFAULTS.get(f) for f in CONTEXT}, **r['shape_context']}
    return r['size'] + (f" ({', '.join(f'{f}={c[f]}' for f in fields)})" if fields else '')


def views(by, *axis):
    """{k: view_rows(rs, *axis)} of the groups `by` whose rows span 2+ values of axis[0]."""
    return {k: view_rows(rs, *axis) for k, rs in by.items() if len({r[axis[0]] for r in rs}) > 1}


def view_rows(rs, *axis):
    """rs, copied, each labelled by its config and the ARCH settings in which it differs from the
    view's others of that config; of rows of one label at one point of `axis` (two warmups at a
    budget), the one of most seeds, then lowest loss, is kept, and that is said."""
    settings = [json.loads(r['setting']) for r in rs]
    fields = {c: [k for k in differing([s for x, s in zip(rs, settings) if x['config'] == c])
                  if k in ARCH] for c in {r['config'] for r in rs}}
    rs = [dict(r, label=r['config'] + (f" ({shown(s, fields[r['config']])})"
                                        if fields[r['config']] else ''))
          for r, s in zip(rs, settings)]
    by_cell = groups(rs, 'label', *axis)
    for cell, same in by_cell.items():
        if len(same) > 1:
            fields = differing([json.loads(r['setting']) for r in same])
            say_once(f"{len(same)} rows of {cell[0]} at {', '.join(map(str, cell[1:]))} differ in "
                     f"{', '.join(fields)}: a view shows one, the one with the most seeds")
    keep = {id(min(same, key=lambda r: (-r['n'], r['val']))) for same in by_cell.values()}
    return [r for r in rs if id(r) in keep]


def folder_name(r):
    return os.path.basename(os.path.normpath(r['data_dir']))


def context_words(r, rs):
    """What a row's shape comes with, in words, for the CONTEXT fields in which shapes differ."""
    fields = differing([x['shape_context'] for x in rs])
    c = {**{f: DEFAULTS[f] for f in CONTEXT if f in DEFAULTS}, **r['shape_context']}
    words = [folder_name(r) if 'data' in fields else None,
             f"batch {c['batch_size']} x {c['block_size']}"
             if {'batch_size', 'block_size'} & set(fields) else None,
             f"{c['device']} {c['dtype']}" if {'device', 'dtype'} & set(fields) else None]
    words += [f"{f}={c[f]}" if c[f] is not None else f"{f} unrecorded" for f in fields
              if f in c and f not in ('data', 'batch_size', 'block_size', 'device', 'dtype')]
    return ', '.join(w for w in words if w)


def matched_budgets(rs):
    """([(tokens per parameter, {size: budget_value})] that 2+ shapes share, the sizes smallest
    first): each budget of the smallest, and the others' nearest within a factor 1.25."""
    by_size = {shape: tokens_per_param(g) for (shape,), g in groups(rs, 'shape').items()}
    sizes = sorted(by_size, key=lambda s: (min(r['params'] for r in rs if r['shape'] == s), s))
    out = []
    for v, t in sorted(by_size[sizes[0]].items(), key=lambda kv: kv[1]):
        at = {sizes[0]: v}
        for size in sizes[1:]:
            near = min(by_size[size].items(), key=lambda kv: abs(math.log(kv[1] / t)))
            if abs(math.log(near[1] / t)) <= math.log(1.25):
                at[size] = near[0]
        if len(at) > 1:
            out.append((t, at))
    return out, sizes


def transfer_tables(rs):
    """Markdown, a table per reference: each config's gap at each shape at matching tokens per
    parameter, and what it does from the smallest shape to each larger one (change_marks); the same
    at equal training FLOPs (add_flops_gaps, each shape its own); then the cells read, untuned."""
    points, sizes = matched_budgets(rs)
    cell = {(r['label'], r['shape'], r['budget_value']): r for r in rs}
    config_of = {r['label']: r['config'] for r in rs}
    lines = [([n, f"{t:.1f}"], [cell.get((n, s, at[s])) if s in at else None for s in sizes])
             for n in by_config(config_of) for t, at in points]
    out, params = [], {s: min(r['params'] for r in rs if r['shape'] == s) for s in sizes}
    other = 'larger' if all(params[s] > params[sizes[0]] for s in sizes[1:]) else 'other'
    add_flops_gaps(rs)
    read = set()  # (a row's label, or the reference it is read against; tokens per parameter)
    for at_flops_too, ref in [(f, ref) for f in (False, True) for ref in references(rs)]:
        y = flops_gap_of(ref) if at_flops_too else gap_of(ref)
        ratio = flops_ratios(rs, ref)
        first = ['config', 'tokens/param'] + [f'FLOPs vs {ref}'] * at_flops_too
        mine = [([*lead, ' / '.join(ratio.get((lead[0], s), '–') for s in sizes)]
                 if at_flops_too else lead, got) for lead, got in lines
                if config_of[lead[0]] != ref and sum(1 for r in got if r and y in r) >= 2]
        read |= {(x, lead[1]) for lead, _ in mine for x in (lead[0], ref)}
        how = (f"at equal training FLOPs at each shape, at matching tokens per parameter ({ref}'s "
               f"loss read at the config's FLOPs, linear in log FLOPs between {ref}'s budgets at "
               f"that shape, – outside them; FLOPs: per token, against {ref}'s, at each shape; "
               if at_flops_too else "at each shape at matching tokens per parameter (")
        if mine:
            out += ['', f"Gap to {ref} ({unit(rs)}) {how}paired by seed, ± 95% t interval), and "
                        f"what it does from {sizes[0]} to each {other} shape", '',
                    view_table(mine, first, sizes,
                               flops_text(ref) if at_flops_too else lambda r: vs(r, ref), y)]
    words = {r['shape']: r['shape_words'] for r in rs if r['shape_words']}
    if out and words:
        out += ['', 'The shapes differ in more than size: '
                + '; '.join(f"{s}: {words[s]}" for s in sizes if s in words)
                + '. A change between them is the change of all of it.']
    loose = {}  # the cells of the rows read whose lr is not tuned (of 2 lrs, the best is an edge)
    for (n, t), got in lines:
        for s, r in zip(sizes, got):
            if r and not r['tuned'] and {(n, t), (config_of[n], t)} & read:
                why = f"{r['edge']} of grid" if r['edge'] else 'one lr'
                loose.setdefault((n, s, why), []).append(t)
    if out and loose:
        out += ['', "Not tuned (the best lr at its grid's edge, or one lr; --extend_lr extends a "
                "grid), so a gap there may move: " + '; '.join(
                    f"{n} at {s} ({why}) at {', '.join(ts)}" for (n, s, why), ts in loose.items())]
    return '\n'.join(out + ['', cards_line(rs)] if out else out).strip()


# -----------------------------------------------------------------------------
# the report of a sweep

def sweep_report(sweep, results_path, png, only=None):
    """Tables and plots of the results file (`only`: the records whose keys are in it, a sweep's
    own), one table per question: the regime view (and the table at its largest budget) of a setting
    at several budgets, else its table; the schedule, transfer and scaling views."""
    records = [r for r in read_many(results_path)  # --results=a,b: both
               if only is None or run_id(r['key']) in only]
    if not records:
        there = 'no finished runs in' if os.path.exists(results_path) else 'no results file'
        raise UsageError(f"{there} {results_path}; run a sweep first: python sweep.py --quick (toy "
                         "runs, a minute), or python sweep.py --configs=gpt,llama (README)")
    rows = summary_rows(records)
    if sweep.quick:
        print("note: --quick checks the machinery: toy runs like its own resolve no gap and tune "
              "no lr (intervals from 2 seeds are wide); compare with a real sweep (README)",
              file=sys.stderr)
    if sweep.json:
        print(json.dumps([{k: v for k, v in r.items() if k != 'runs'} for r in rows], indent=1))
    said, plots, names = [], [], []  # printed and drawn at the end
    settings = {r['context']: r for r in rows}  # (its key: the setting less ARCH)
    say = (lambda *a: None) if sweep.json else said.append
    # a report on a committed results file (results/) writes nothing into the repository unless
    # --png says where (results/NAME.png to redraw the committed plots); any other: plots beside it
    results = os.path.join(HERE, 'results', '')
    committed = not sweep.png and any(os.path.abspath(p).startswith(results)
                                      for p in results_path.split(','))

    def plot(name, draw, rs, title):
        """draw(rs, name, title); a name another plot has gets the data folder's name in it."""
        if name in names:
            name = name.replace('.png', f"-{folder_name(rs[0])}.png")
        stem, n = name[:-len('.png')], 2
        while name in names:
            name, n = f"{stem}-{n}.png", n + 1
        names.append(name)
        if not committed:
            plots.append((draw, rs, name, title))

    regimes = regime_groups(rows)
    for rs in regimes.values():  # does the ranking hold as training grows?
        top = max(r['budget_value'] for r in rs)
        span = f"{rs[0]['kind']} from {min(r['budget_value'] for r in rs):g} to {top:g}"
        say(f"\n### {heading(settings, rs[0], budget=span)}\n\nGaps at the smallest and the "
            "largest budget (tokens per parameter), paired by seed, ± 95% t interval:\n\n"
            f"{ends_table(rs)}\n\n{regime_tables(rs)}\n\n{flops_tables(rs)}\n\n"
            f"At {rs[0]['kind']}={top:g}:\n\n"
            + table([r for r in rs if r['budget_value'] == top]))
        plot(png.replace('.png', f"-{rs[0]['size']}-{rs[0]['schedule']}"
                                 f"{plot_suffix(settings, rs[0])}-regime.png"), plot_regime, rs,
             f"{heading_words(rs[0], budget=span)}: best lr of each grid at every budget")
    in_regime = {r['context'] for rs in regimes.values() for r in rs}
    alone = [rs for (c,), rs in groups(rows, 'context').items() if c not in in_regime]
    for rs in alone:  # a table per setting: configs on it
        say(f"\n### {heading(settings, rs[0])}\n\n{table(rs)}")
        plot(png if len(alone) == 1 else png.replace(
            '.png', f"-{rs[0]['size']}-{rs[0]['budget'].replace('=', '')}-{rs[0]['optimizer']}"
                    f"{plot_suffix(settings, rs[0])}.png"), plot_sweep, rs, heading_words(rs[0]))
    for rs in schedule_groups(rows).values():  # does a gap under one schedule hold under another?
        where = heading_words(rs[0]).replace(f", {rs[0]['schedule']} schedule", '')
        if text := schedule_tables(rs):
            say(f"\n### schedules {', '.join(sorted({r['schedule'] for r in rs}))} compared: "
                f"{where}\n\n{text}")
    for rs in transfer_groups(rows).values():  # does a gap at one shape hold at another?
        if text := transfer_tables(rs):  # (the shapes smallest first)
            say(f"\n### transfer across shapes {', '.join(matched_budgets(rs)[1])}: "
                f"{rs[0]['optimizer']}, {rs[0]['schedule']} schedule\n\n{text}")
    for (_,), rs in groups(rows, 'scaling').items():  # across sizes and budgets, against gpt
        rs = view_rows(rs, 'size', 'budget_value')  # (labelled within the view: one per config)
        points = {(r['size'], r['budget_value']) for r in rs}
        if len(points) > 1 and any(r['config'] == 'gpt' for r in rs):
            say(f"\n### scaling: {heading(settings, rs[0], size=False, budget=False)} (gpt's "
                "frontier: its best point at any size and budget)\n\n"
                + markdown_table(scaling_rows(rs), unit(rs, SCALING_COLUMNS)))
            schedule = '' if rs[0]['schedule'] == 'cosine' else '-' + rs[0]['schedule']
            plot(png.replace('.png', f"-{rs[0]['kind']}-{rs[0]['optimizer']}{schedule}"
                                     f"{plot_suffix(settings, rs[0])}-scaling.png"), plot_scaling,
                 rs, f"{heading_words(rs[0], size=False, budget=False)}: final val loss against "
                 "training FLOPs")
    if committed and names:
        what = 'are committed results files' if ',' in results_path else 'is a committed file'
        print(f"note: {len(names)} plot(s) not drawn: {results_path.replace(',', ', ')} {what}, "
              "and a report writes nothing into the repository unless told where: --png=somewhere/"
              f"name.png (or --png={os.path.splitext(results_path.split(',')[0])[0]}.png to redraw "
              "the committed plots)", file=sys.stderr)
    for _, _, name, _ in plots:  # every output path checked before anything is printed or drawn
        regular_file(name, '--png', output=True)
    if said:
        print('\n'.join(said))
    for draw, rs, name, title in plots:
        if draw(rs, name, title):
            print(f"plot: {name}", file=sys.stderr)
    return rows


# a table's heading: its corpus, size, budget, optimizer, schedule, val set, and any setting in
# which it differs from another setting of the same words (`settings`: {context: row}, every row's)

def heading_words(r, size=True, budget=True):
    """budget: True (the row's), False (none) or words (a span of budgets)."""
    budget = r['budget'] if budget is True else budget
    return ', '.join(p for p in (r['corpus'], size and f"size {r['size']}", budget,
                                 r['optimizer'], f"{r['schedule']} schedule") if p)


def extra(settings, r, size=True, budget=True):
    """{setting: value} of r's in which it differs from another setting of the same words."""
    drop = (() if size else SIZE) + (() if budget is True else BUDGET)
    alike = [{k: v for k, v in json.loads(c).items() if k not in drop}
             for c, x in settings.items()
             if heading_words(x, size, budget) == heading_words(r, size, budget)]
    mine = json.loads(r['context'])
    return {k: mine.get(k, DEFAULTS.get(k, '–')) for k in differing(alike)}


def heading(settings, r, size=True, budget=True):
    more = ''.join(f", {k}={v}" for k, v in extra(settings, r, size, budget).items())
    return f"{heading_words(r, size, budget)}{more}; val: {r['val_set'] or 'as each run evaluated'}"


def plot_suffix(settings, r):  # the differing settings in a plot's name
    return ''.join(f"-{k}{v}" for k, v in list(extra(settings, r, False, False).items())[:2])
