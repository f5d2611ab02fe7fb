"""
Results as data: the results files that sweeps and the recall probe append to (one JSON record per
finished run), the statistics over seeds, markdown tables, plots, and the one order in which every
table lists the architectures. Every figure in RESULTS.md is drawn from a results file through
these.
"""
import dataclasses
import glob
import json
import math
import os
import sys
import threading

from configurator import UsageError, atomic_write, write_error
from jobs import locked_append
from model import MATCH_TOLERANCE, GPTConfig
from runtime import TrainConfig

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


def finite(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


# what each field a report reads must hold: a hand-edited record that breaks one is skipped, named
FIELD_CHECKS = {
    'sweep': {'key': lambda v: isinstance(v, dict), 'config': lambda v: isinstance(v, str) and v,
              'seed': lambda v: isinstance(v, int) and not isinstance(v, bool),
              'lr': lambda v: finite(v) and v > 0, 'size': lambda v: isinstance(v, str),
              'budget': lambda v: isinstance(v, str), 'budget_value': finite,
              'optimizer': lambda v: isinstance(v, str), 'data_dir': lambda v: isinstance(v, str),
              'val_loss': finite, 'params': lambda v: finite(v) and v > 0, 'tokens': finite,
              'flops': lambda v: v is None or finite(v), 'train_s': lambda v: v is None or finite(v),
              'val_bpb': lambda v: v is None or finite(v),
              'val_batches': lambda v: v is None or (isinstance(v, list) and all(map(finite, v))),
              'curve': lambda v: isinstance(v, list) and all(
                  isinstance(p, list) and len(p) == 5 and finite(p[1]) and finite(p[4]) for p in v)},
    'probe': {'key': lambda v: isinstance(v, dict), 'acc': finite, 'lr': finite},
}


def bad_field(r, kind):
    """The first field of record `r` a report could not read (missing, or of the wrong type), else None."""
    for name, ok in FIELD_CHECKS[kind].items():
        if name in KINDS[kind] or name in ('key', 'params', 'tokens', 'curve') and kind == 'sweep':
            if name not in r or not ok(r[name]):
                return name
        elif name in r and not ok(r[name]):
            return name
    return None


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


def read_many(paths, kind='sweep'):
    """The records of several results files (a comma-separated string or a list), in order; a run
    recorded in two of them counts once (the first)."""
    records, seen = [], set()
    for path in paths.split(',') if isinstance(paths, str) else paths:
        for r in read_results(path, kind):
            if run_id(r['key']) not in seen:
                seen.add(run_id(r['key']))
                records.append(r)
    return records


def read_results(path, kind='sweep'):
    """The records of a results file (JSON lines, one finished run each) of `kind` ('sweep' or
    'probe'); no file: none. Said once on stderr and skipped: a last line cut short by a killed writer
    (the next append sets it aside), the cut-short part of a record glued to it, and a second record of
    a run already recorded (the first is kept). Any other line that is not such a record is a
    UsageError naming it (a probe file given to sweep.py --report, a file that is not a results file)."""
    if os.path.isdir(path):
        raise UsageError(f"{path} is a folder; --results names a results file (JSON lines)")
    if os.path.exists(path) and not os.path.isfile(path):  # /dev/zero, a pipe: may never end
        raise UsageError(f"{path} is not a regular file (a device, pipe or socket); --results names a "
                         "results file (JSON lines)")
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
        field = bad_field(r, kind)
        if field:  # (a hand-edited record: NaN, null, a string for a number, ...)
            say_once(f"{path} line {n}: its {field!r} is missing or not what {kind}.py writes "
                     f"({json.dumps(r.get(field))[:40]}): the record is skipped")
            continue
        r.setdefault('schedule', 'cosine')  # records from before lr_schedule existed
        if kind == 'sweep' and 'eval_seed' not in r['key']:  # from before one val set: each run's seed drew
            r['key']['eval_seed'] = -1                      # its val batches (eval_seed=-1 today)
            r.setdefault('val_set', f"{r['key'].get('eval_iters', '?')} x {r.get('batch_size', '?')} x "
                                    f"{r.get('block_size', '?')} tokens of val, each run's own seed")
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
# statistics over seeds: means, spreads and t-based 95% intervals

CONFIDENCE = 0.95  # every interval the reports print


def mean_std(values):
    n = len(values)
    mean = sum(values) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    return mean, std, n


def betainc(a, b, x):
    """The regularized incomplete beta function I_x(a, b), by its continued fraction (Numerical Recipes
    sec. 6.4, modified Lentz), from the side where it converges fast."""
    if x <= 0 or x >= 1:
        return 0.0 if x <= 0 else 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x > (a + 1) / (a + b + 2):
        return 1.0 - betainc(b, a, 1 - x)
    tiny, c, d = 1e-300, 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    f = d
    for m in range(1, 300):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            f *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return front * f / a


def t_quantile(p, df):
    """The p-quantile (p > 0.5) of Student's t with df degrees of freedom: the t with
    P(T <= t) = 1 - I_{df/(df+t^2)}(df/2, 1/2) / 2 = p, found by bisection. t_quantile(0.975, 1) = 12.706,
    (0.975, 2) = 4.303, and towards 1.960 as df grows."""
    lo, hi = 0.0, 1.0
    while 1 - betainc(df / 2, 0.5, df / (df + hi * hi)) / 2 < p:
        hi *= 2
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if 1 - betainc(df / 2, 0.5, df / (df + mid * mid)) / 2 < p else (lo, mid)
    return (lo + hi) / 2


def interval(values, confidence=CONFIDENCE):
    """(mean, half-width of its t interval with n - 1 degrees of freedom, n); the half-width is None
    for one value: a spread needs two."""
    mean, sd, n = mean_std(values)
    if n < 2:
        return mean, None, n
    return mean, t_quantile(0.5 + confidence / 2, n - 1) * sd / math.sqrt(n), n


def holds_zero(mean, half):
    """True when an interval cannot tell the sign of what it measures (and when it has no width)."""
    return half is None or abs(mean) <= half


def gap_text(mean, half, n, digits=4):
    """'-0.0512 ± 0.0210 (n=3)', '… (holds 0)' when the interval does, '+0.0100 (n=1)' for one seed."""
    if half is None:
        return f"{mean:+.{digits}f} (n={n})"
    return f"{mean:+.{digits}f} ± {half:.{digits}f} (n={n})" + (' (holds 0)' if holds_zero(mean, half) else '')


def spread_text(mean, std, n):
    """A val loss over seeds: 'mean ± sd (n=3)', or 'mean (n=1)'."""
    return f"{mean:.4f} (n=1)" if n < 2 else f"{mean:.4f} ± {std:.4f} (n={n})"


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


def suptitle(fig, text, width=110):
    """A figure's title, wrapped to lines that fit it."""
    import textwrap
    fig.suptitle(textwrap.fill(text, width), fontsize=10)


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


# -----------------------------------------------------------------------------
# what a record measured: its run setting, and the settings a gap, a regime and a transfer compare

# settings whose arrival changed what a run measures: always in a key, so that a record written before
# them (its val batches drawn from the run's seed) never matches a run today
ALWAYS = ('eval_seed',)
DEFAULTS = {f.name: f.default for f in dataclasses.fields(TrainConfig)}


def run_id(key):
    """A run's key as the string records are matched by: settings at train.py's default value are left
    out (but ALWAYS), so a key written before a setting existed matches the same run today, while a
    changed default (written out in the older key) does not."""
    return key_id({k: v for k, v in key.items() if k in ALWAYS or k not in DEFAULTS or DEFAULTS[k] != v})


GRID = ('learning_rate', 'min_lr', 'lr')  # a row's lr grid (min_lr's fraction of the lr stays a setting; 'lr': older keys)
NOT_MEASURED = ('seed', 'data_dir', 'eval_interval')  # a row's seeds; a folder's path (the data is named by
#                                       its fingerprint, 'data'); when the evaluations ran, not what they scored
SHAPE = ('n_layer', 'n_head', 'n_embd')
BUDGET = ('budget_value', 'max_iters', 'lr_decay_iters', 'max_tokens', 'max_flops', 'max_seconds', 'warmup_iters')
CONTEXT = ('data', 'batch_size', 'block_size', 'gradient_accumulation_steps', 'device', 'dtype', 'compile',
           'eval_iters', 'eval_seed', 'threads')  # what a second shape may also change: its corpus, batch, machine
ARCH = ('config', *(f.name for f in dataclasses.fields(GPTConfig)
                    if f.name not in (*SHAPE, 'block_size', 'vocab_size', 'dropout')))


def setting(r, drop=()):
    """A record's run setting: its key as run_id reads it, less the seed, the lr grid, a data folder's path
    and when evaluations ran, less `drop` (ARCH: what two configs compared on one setting differ in;
    BUDGET: what a regime view spans; SHAPE: what a transfer view spans). Records of one setting differ
    in seed and lr alone: a table row is one setting's best lr over its distinct seeds."""
    key = json.loads(run_id(r['key']))
    if key.get('data') is None:  # written before the data's fingerprint was: its folder names it
        key['data'] = r.get('data_dir')
    lr, low = (r['key'].get(k, DEFAULTS[k]) for k in GRID[:2])
    if isinstance(lr, (int, float)) and isinstance(low, (int, float)) and lr > 0:
        key['min_lr/lr'] = round(low / lr, 6)
    return {k: v for k, v in key.items() if k not in (*NOT_MEASURED, *GRID, *drop)}


def differing(settings):
    """The fields whose values differ among settings (dicts), in a stable order."""
    fields = sorted({k for s in settings for k in s})
    return [k for k in fields if len({json.dumps(s.get(k), sort_keys=True) for s in settings}) > 1]


# -----------------------------------------------------------------------------
# sweeps: the best learning rate, mean ± sd over seeds, the gaps to gpt and llama, scaling

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


def choose_lr(by_lr):
    """(the lr of {lr: {seed: record}} with the best mean final val loss, the seeds it was compared on):
    the seeds every grid point has, so that a grid tuned on seed 1 and replicated at its best does not let
    a 1-seed mean beat a 3-seed one (none in common: each lr's own seeds)."""
    common = set.intersection(*(set(seeds) for seeds in by_lr.values()))
    best = min(by_lr, key=lambda lr: mean_std([r['val_loss'] for s, r in by_lr[lr].items()
                                               if s in common or not common])[0])
    return best, sorted(common) if common else sorted(by_lr[best])


def best_lr(records):
    """The grid point of `records` (one setting, several lrs) with the best mean final val loss, compared on
    the seeds every grid point has."""
    by_lr = {}
    for r in records:
        by_lr.setdefault(r['lr'], {}).setdefault(r['seed'], r)
    return choose_lr(by_lr)[0]


def grid_edge(lrs, best):
    """'top' / 'bottom' when the best lr is the largest / smallest of a grid of 2 or more, else None."""
    if len(lrs) < 2:
        return None
    return 'top' if best == max(lrs) else 'bottom' if best == min(lrs) else None


def seeds_text(seeds):
    """[1, 2, 3] -> 'seeds 1-3'; [1] -> 'seed 1'; [1, 3] -> 'seeds 1, 3'."""
    if len(seeds) == 1:
        return f"seed {seeds[0]}"
    if seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"seeds {seeds[0]}-{seeds[-1]}"
    return "seeds " + ', '.join(map(str, seeds))


REFERENCES = ('gpt', 'llama')  # the seeds' baseline (the GPT-2 block) and today's


def paired_gap(row, base):
    """Row's runs minus base's, paired by seed (at one seed both trained on the same batches, in the same
    order, and are scored on the same val batches): {gap, half: the half-width of its 95% t interval
    (None for one pair), n, text, by_seed: {seed: its gap}, eval_se: the val sample's own standard error
    of the gap, from the per-batch val losses where the records hold them (a fixed val set's noise is
    shared by every seed, so the seeds' spread does not show it)}."""
    theirs = {r['seed']: r for r in base['runs']}
    pairs = [(r, theirs[r['seed']]) for r in row['runs'] if r['seed'] in theirs]
    if not pairs:
        return None
    by_seed = {a['seed']: a['val_loss'] - b['val_loss'] for a, b in pairs}
    gap, half, n = interval(list(by_seed.values()))
    eval_se = None
    batches = [(a.get('val_batches'), b.get('val_batches')) for a, b in pairs]
    if all(x and y and len(x) == len(y) == len(batches[0][0]) for x, y in batches) and len(batches[0][0]) > 1:
        k = len(batches[0][0])
        per_batch = [sum(x[i] - y[i] for x, y in batches) / len(batches) for i in range(k)]
        eval_se = mean_std(per_batch)[1] / math.sqrt(k)
    return dict(gap=gap, half=half, n=n, text=gap_text(gap, half, n), by_seed=by_seed, eval_se=eval_se)


def summary_rows(records):
    """One row per run setting (setting(): the key less seed and lr): the best lr of its grid (marked where
    it is the grid's edge, and which seeds chose it), the val loss there over its distinct seeds (mean ±
    sd, n), in bits per byte, the grid's means, and the gap to each reference (gpt, llama) on the same
    setting but the architecture, paired by seed, with its 95% interval. A second record of one seed of
    one setting (the same run recorded from another folder) is said once and left out, never averaged."""
    cells = {}
    for r in records:
        cells.setdefault(key_id(setting(r)), []).append(r)
    rows = []
    for cell, rs in cells.items():
        by_lr, twice = {}, []
        for r in rs:
            seeds = by_lr.setdefault(r['lr'], {})
            if r['seed'] in seeds:
                twice.append(f"{r['config']} seed {r['seed']} lr {r['lr']:g}")
                continue
            seeds[r['seed']] = r
        if twice:
            say_once(f"{len(twice)} run(s) recorded twice under one setting (the same run from two "
                     f"folders?): {', '.join(twice[:3])}{' ...' if len(twice) > 3 else ''}; the first is read")
        lr, chosen_on = choose_lr(by_lr)
        edge = grid_edge(list(by_lr), lr)
        at = [by_lr[lr][s] for s in sorted(by_lr[lr])]
        first = at[0]
        mean, std, n = mean_std([r['val_loss'] for r in at])
        bpb = [r['val_bpb'] for r in at if r.get('val_bpb') is not None]
        how = (f"the only lr" if len(by_lr) == 1 else f"best of {len(by_lr)} on {seeds_text(chosen_on)}")
        means = {k: mean_std([r['val_loss'] for r in v.values()]) for k, v in by_lr.items()}
        rows.append(dict(
            setting=cell, context=key_id(setting(first, ARCH)), regime=key_id(setting(first, ARCH + BUDGET)),
            scaling=key_id(setting(first, ARCH + BUDGET + SHAPE)),
            transfer=key_id(setting(first, ARCH + BUDGET + SHAPE + CONTEXT)), data=setting(first)['data'],
            shape_context={k: v for k, v in setting(first).items() if k in CONTEXT},
            data_dir=first['data_dir'], corpus=first.get('corpus', first['data_dir']), config=first['config'],
            label=first['config'], size=first['size'], kind=first['budget'],
            budget=f"{first['budget']}={first['budget_value']:g}", budget_value=first['budget_value'],
            optimizer=first['optimizer'], schedule=first['schedule'], val_set=first.get('val_set'),
            lr=lr, edge=edge, tuned=len(by_lr) >= 3 and edge is None, chosen_on=chosen_on,
            lr_text=f"{lr:g} ({how}" + (f"; {edge} of grid: --extend_lr)" if edge else ')'),
            val=mean, std=std, n=n, seeds=sorted(by_lr[lr]), values=[r['val_loss'] for r in at],
            val_pm=spread_text(mean, std, n),
            bpb_pm=spread_text(*mean_std(bpb)) if len(bpb) == n else None,
            grid=' / '.join(f"{k:g}: {means[k][0]:.4f} (n={means[k][2]})" for k in sorted(means))
            if len(means) > 1 else None,
            params=first['params'], params_text=f"{first['params']:,}",
            tokens=mean_std([r['tokens'] for r in at])[0], flops=mean_std([r['flops'] or 0 for r in at])[0],
            train_s=mean_std([r.get('train_s') or 0 for r in at])[0],
            wall_s=mean_std([r.get('wall_s') or 0 for r in at])[0], runs=at,
            hellaswag_pm=spread_text(*mean_std([r['hellaswag_acc_norm'] for r in at]))
            if all('hellaswag_acc_norm' in r for r in at) else None))
    name_apart(rows)
    for row in rows:  # the gaps to each reference on the same setting but the architecture
        for ref in REFERENCES:
            base = [b for b in rows if b['config'] == ref and b['context'] == row['context'] and b is not row]
            gap = paired_gap(row, base[0]) if len(base) == 1 else None
            if gap is None:
                continue
            suffix = '' if ref == 'gpt' else f'_{ref}'
            row[f'gap{suffix}'], row[f'gap{suffix}_half'] = gap['gap'], gap['half']
            row[f'gap{suffix}_by_seed'], row[f'gap{suffix}_n'] = gap['by_seed'], gap['n']
            row[f'vs_{ref}'], row[f'eval_se{suffix}'] = gap['text'], gap['eval_se']
            off = row['params'] / base[0]['params'] - 1
            if ref == 'gpt' and abs(off) > MATCH_TOLERANCE:  # not matched: the table says so
                row['params_text'] += f" ({off:+.0%} vs gpt: not matched)"
    return sorted(rows, key=lambda r: (r['budget'], r['optimizer'], r['schedule'], r['size'],
                                       arch_key(r['config']), r['label']))


def name_apart(rows):
    """Rows that a table would show alike (config, size, budget, optimizer, schedule) but whose settings
    differ (another recipe value, device, val set, ...) are labelled by what differs: 'gpt (device=cpu)'."""
    for _, rs in groups(rows, 'config', 'size', 'budget', 'optimizer', 'schedule').items():
        if len(rs) > 1:
            settings = [json.loads(r['setting']) for r in rs]
            fields = differing(settings)
            for r, s in zip(rs, settings):
                shown = ', '.join(f"{k}={s.get(k, DEFAULTS.get(k, '–'))}" for k in fields[:3]) + (
                    ' ...' if len(fields) > 3 else '')
                r['label'] = f"{r['config']} ({shown})"


SUMMARY_COLUMNS = [
    ('label', 'config', '{}'), ('size', 'size', '{}'), ('optimizer', 'opt', '{}'), ('budget', 'budget', '{}'),
    ('params_text', 'params', '{}'), ('lr_text', 'best lr', '{}'),
    ('val_pm', 'val loss, mean ± sd over seeds', '{}'), ('bpb_pm', 'val bits per byte', '{}'),
    ('vs_gpt', 'vs gpt: paired gap ± 95% CI', '{}'), ('vs_llama', 'vs llama: paired gap ± 95% CI', '{}'),
    ('tokens', 'tokens', '{:,.0f}'), ('flops', 'FLOPs', '{:.3g}'), ('time', 'train s / run s', '{}'),
    ('grid', 'mean val loss per lr', '{}'),
]
HELLASWAG_COLUMN = ('hellaswag_pm', 'HellaSwag acc_norm, mean ± sd', '{}')  # where the records have it
SCALING_COLUMNS = [
    ('label', 'config', '{}'), ('size', 'size', '{}'), ('params', 'params', '{:,}'), ('budget', 'budget', '{}'),
    ('lr_text', 'best lr', '{}'), ('flops', 'training FLOPs', '{:.3g}'),
    ('val_pm', 'val loss, mean ± sd over seeds', '{}'), ('bpb_pm', 'val bits per byte', '{}'),
    ('multiplier', 'compute multiplier vs gpt', '{}'),
]


def table_columns(rows, columns):
    """The columns worth printing for these rows: none whose every cell is empty ('–'), none that repeats
    one value in every row (the heading says it: size, optimizer, budget); and the value of each of the
    latter as 'header value' pairs for the heading."""
    keep, same = [], []
    for col in columns:
        key, header, fmt = col
        cells = {fmt.format(r[key]) if r.get(key) is not None else None for r in rows}
        if cells == {None}:
            continue
        if key in ('size', 'optimizer', 'budget') and len(cells) == 1:
            same.append(next(iter(cells)))
            continue
        keep.append(col)
    return keep, same


def with_time(rows):
    """Each row's 'train s / run s' cell: the seconds in training steps, and the run's own clock from its
    start to its last evaluation (a branch's includes its constant-lr run's): the rest went to
    evaluations and start-up. Records from before the run's clock was kept show training seconds alone."""
    for r in rows:
        run_s = [x['elapsed_s'] for x in r['runs'] if x.get('elapsed_s')]
        r['time'] = (f"{r['train_s']:.0f} / {sum(run_s) / len(run_s):.0f}" if len(run_s) == len(r['runs'])
                     else f"{r['train_s']:.0f}")
    return rows


def scaling_rows(rows):
    """Per (config, size, budget) of one setting (less shape and budget): mean FLOPs and loss, and the
    compute multiplier against gpt's frontier. A multiplier read on a stretch of gpt's frontier whose
    ends did not both have an lr grid with the best inside is an upper bound ('≤'): a tuned gpt there
    could only be lower, and then need fewer FLOPs."""
    out = []
    for _, rs in groups(rows, 'transfer').items():
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
    """A mean curve over seeds with a band of its 95% t interval (2 or more curves); a run of one
    evaluation is a marker."""
    n = min(len(c) for c in curves)
    points = [interval([c[i] for c in curves]) for i in range(n)]
    line, = ax.plot(xs[:n], [m for m, _, _ in points], marker='o' if n < 3 else None, ms=4, label=label)
    if len(curves) > 1:
        ax.fill_between(xs[:n], [m - h for m, h, _ in points], [m + h for m, h, _ in points],
                        color=line.get_color(), alpha=0.2)


def n_text(ns):
    """'n = 3 seeds' or 'n = 1-3 seeds' for a plot's title."""
    lo, hi = min(ns), max(ns)
    return f"n = {lo} seed{'s' * (lo > 1)}" if lo == hi else f"n = {lo}-{hi} seeds"


def plot_sweep(rows, png, title=None):
    """Val loss against tokens and against FLOPs: the seeds' mean at the best lr, its 95% interval as a
    band. The evaluation at step 0 (the untrained model) is left out of the curve."""
    plt = pyplot()
    if plt is None:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    for row in rows:
        curves = [r['curve'][1:] or r['curve'] for r in row['runs']]
        for ax, col in zip(axes, (1, 2)):
            plot_curves(ax, [p[col] or 0 for p in curves[0]], [[p[4] for p in c] for c in curves],
                        f"{row['label']} (lr {row['lr']:g}, n={row['n']})")
    suptitle(fig, f"{title or 'val loss'} ({n_text([r['n'] for r in rows])})")
    return save_png(fig, png, axes, ('tokens', 'training FLOPs'), 'val loss (mean over seeds; band: 95% CI)')


def plot_scaling(rows, png, title=None):
    """Final val loss against training FLOPs (log scale), one line per architecture, ± sd over seeds."""
    plt = pyplot()
    if plt is None:
        return False
    fig, ax = plt.subplots(figsize=(8, 5.5))
    colors = plt.get_cmap('tab20').colors[::2] + plt.get_cmap('tab20').colors[1::2]  # 20 apart: 11 configs
    names = sorted({r['label'] for r in rows}, key=arch_key)
    sizes = sorted({r['size'] for r in rows}, key=lambda s: [int(v) for v in s.split('x')])
    for (name, size), rs in sorted(groups(rows, 'label', 'size').items(), key=lambda kv: arch_key(kv[0][0])):
        rs = sorted(rs, key=lambda r: r['flops'])  # one line per config and size: a size's budgets
        ax.errorbar([r['flops'] for r in rs], [r['val'] for r in rs], yerr=[r['std'] for r in rs],
                    marker='osD^v<>'[sizes.index(size) % 7], capsize=3, color=colors[names.index(name) % len(colors)],
                    linestyle='-:--'[sizes.index(size) % 3] if len(sizes) > 1 else '-',
                    label=name + (f" {size}" if len(sizes) > 1 else ''), linewidth=2.5 if name == 'gpt' else 1.2)
    ax.set_xscale('log')
    suptitle(fig, f"{title or 'final val loss against training FLOPs'} ({n_text([r['n'] for r in rows])}; bars: sd)")
    return save_png(fig, png, [ax], ['training FLOPs (GPT.flops_per_token x tokens)'], 'final val loss')


# -----------------------------------------------------------------------------
# the regime view: at one size, how each gap moves as training grows

def regime_groups(rows):
    """{setting less architecture and budget: rows} for every such setting trained at 2 or more budgets:
    the budgets along which a ranking can hold or not."""
    out = groups(rows, 'regime')
    return {k: rs for k, rs in out.items() if len({r['budget_value'] for r in rs}) > 1}


def tokens_per_param(rs):
    """{budget_value: training tokens per gpt parameter there} (each config's own count is within 1%)."""
    params = next((r['params'] for r in rs if r['config'] == 'gpt'), rs[0]['params'])
    return {v: mean_std([r['tokens'] for r in g])[0] / params for (v,), g in groups(rs, 'budget_value').items()}


def eval_noise_line(rs, suffix):
    """A line under a gap table: the largest val-sample standard error of its gaps, where known."""
    ses = [r[f'eval_se{suffix}'] for r in rs if r.get(f'eval_se{suffix}') is not None]
    return ([f"Val-sample noise of these gaps (their s.e. over the val batches; one val set scores every "
             f"run, so it is shared by the seeds and not in the intervals): at most {max(ses):.4f}."]
            if ses else [])


def ends_table(rs):
    """Markdown: each config's gap to gpt and to llama at the smallest and the largest budget of a regime
    group, paired by seed, ± 95% t interval (n), and its best lr at the largest (README's table is this
    table, and test_docs.py checks that it is). Configs in the order of their gap to gpt at the largest."""
    tpp = tokens_per_param(rs)
    lo, hi = min(tpp), max(tpp)
    cell = {(r['label'], r['budget_value']): r for r in rs}
    refs = [ref for ref in REFERENCES if any(r['config'] == ref for r in rs)]
    names = sorted({r['label'] for r in rs}, key=lambda n: (
        cell[n, hi]['val'] if (n, hi) in cell else math.inf, n))
    head = ['config', f"best lr at {tpp[hi]:.1f}"] + [f"vs {ref} at {tpp[v]:.1f}" for ref in refs for v in (lo, hi)]
    out = ['| ' + ' | '.join(head) + ' |', '|---|' + '---:|' * (len(head) - 1)]
    for n in names:
        top = cell.get((n, hi))
        cells = [n, f"{top['lr']:g}" + (f" ({top['edge']} of grid)" if top['edge'] else
                                         ' (no grid: the only lr run)' if not top['grid'] else '') if top else '–']
        for ref in refs:
            for v in (lo, hi):
                r = cell.get((n, v))
                cells.append(r.get(f"vs_{ref}", '–') if r else '–')
        out.append('| ' + ' | '.join(cells) + ' |')
    return '\n'.join(out)


def regime_tables(rs):
    """Markdown tables of one regime group, one per question: each config's val loss and rank at every
    budget; its gap to each reference (paired by seed, 95% t interval) at every budget. Configs in the
    order of the last budget."""
    tpp = tokens_per_param(rs)
    budgets = sorted(tpp)
    cell = {(r['label'], r['budget_value']): r for r in rs}
    config_of = {r['label']: r['config'] for r in rs}
    last = sorted((r for r in rs if r['budget_value'] == budgets[-1]), key=lambda r: r['val'])
    names = [r['label'] for r in last] + sorted({r['label'] for r in rs} - {r['label'] for r in last},
                                                key=arch_key)
    rank = {}
    for v in budgets:
        for i, r in enumerate(sorted((r for r in rs if r['budget_value'] == v), key=lambda r: r['val']), 1):
            rank[r['label'], v] = i
    head = [f"{tpp[v]:.1f} ({v:g})" for v in budgets]
    out = [f"Val loss (nats/byte) at each budget: rank, mean ± sd over seeds, best lr. Columns: tokens per "
           f"parameter ({rs[0]['kind']})",
           '', '| config | ' + ' | '.join(head) + ' |', '|---|' + '---:|' * len(budgets)]
    for name in names:
        out.append(f"| {name} | " + ' | '.join(
            f"#{rank[name, v]} {cell[name, v]['val_pm']}, lr {cell[name, v]['lr']:g}"
            + (f" ({cell[name, v]['edge']} of grid)" if cell[name, v]['edge'] else '')
            if (name, v) in cell else '–' for v in budgets) + ' |')
    for ref in REFERENCES:
        if not any(r['config'] == ref for r in rs):
            continue
        suffix = '' if ref == 'gpt' else f'_{ref}'
        out += ['', f"Gap to {ref} (nats/byte; below 0: better than {ref}), paired by seed, ± its 95% t interval; "
                    "(holds 0): the interval cannot tell the sign", '',
                '| config | ' + ' | '.join(head) + ' |', '|---|' + '---:|' * len(budgets)]
        for name in (n for n in names if config_of[n] != ref):
            out.append(f"| {name} | " + ' | '.join(
                cell[name, v].get(f'vs_{ref}', '–') if (name, v) in cell else '–' for v in budgets) + ' |')
        noise = eval_noise_line(rs, suffix)
        out += [''] + noise if noise else []
    return '\n'.join(out).rstrip()


def plot_regime(rs, png, title):
    """Each config's gap to each reference (one panel each) against tokens per parameter (log axis, a
    tick at every budget): one line per config through the mean paired gap, a band of its 95% t interval
    where there are 2 or more seeds, a zero line inside the frame. With neither reference in `rs` (a
    sweep of other configs alone), one panel of each config's val loss, its band the same interval."""
    plt = pyplot()
    if plt is None:
        return False
    refs = [ref for ref in REFERENCES if any(r['config'] == ref for r in rs)] or [None]
    tpp = tokens_per_param(rs)
    fig, axes = plt.subplots(1, len(refs), figsize=(7 * len(refs), 5.5), squeeze=False)
    names = sorted({r['label'] for r in rs}, key=lambda n: arch_key(n) + (n,))
    color = {n: f"C{i % 10}" for i, n in enumerate(names)}  # one colour per config in every panel
    for ax, ref in zip(axes[0], refs):
        y = 'val' if ref is None else 'gap' if ref == 'gpt' else f'gap_{ref}'
        lows, highs = [0.0], [0.0]
        for (name,), g in sorted(groups(rs, 'label').items(), key=lambda kv: arch_key(kv[0][0])):
            g = sorted((r for r in g if y in r), key=lambda r: r['budget_value'])
            if not g:
                continue
            xs = [tpp[r['budget_value']] for r in g]
            line, = ax.plot(xs, [r[y] for r in g], marker='o', ms=4, label=name, color=color[name])
            half = [(interval(r['values'])[1] if ref is None else r[f'{y}_half']) for r in g]
            lo = [r[y] - (h or 0) for r, h in zip(g, half)]
            hi = [r[y] + (h or 0) for r, h in zip(g, half)]
            ax.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.15)
            lows += lo
            highs += hi
        if ref is not None:
            ax.axhline(0, color='black', linewidth=1)
            pad = 0.08 * (max(highs) - min(lows) or 1)
            ax.set_ylim(min(lows) - pad, max(highs) + pad)  # zero inside the frame, never on it
        ax.set_xscale('log')
        ticks = sorted(tpp.values())
        ax.set_xticks(ticks, [f"{t:.3g}" for t in ticks])
        ax.minorticks_off()
        ax.set_title("val loss (no gpt or llama runs to compare with)" if ref is None else
                     f"gap to {ref} (below 0: better than {ref})", fontsize=10)
    suptitle(fig, f"{title} ({n_text([r['n'] for r in rs])}; band: 95% CI)")
    return save_png(fig, png, axes[0], ['training tokens per parameter (the budgets)'] * len(refs),
                    'val loss (nats/byte)' if refs == [None] else 'val loss gap (nats/byte), paired by seed')


# -----------------------------------------------------------------------------
# the schedule as a confound: does a gap seen under one schedule hold under another?

SCHEDULE = ('lr_schedule', 'cooldown_frac', 'decay_lr', 'warmup_iters')


def schedule_groups(rows):
    """{setting less architecture and schedule: rows} for every such setting trained under 2 or more
    schedules (at one budget: the budget is part of the setting)."""
    for r in rows:
        r.setdefault('unscheduled', key_id(setting(r['runs'][0], ARCH + SCHEDULE)))
    out = groups(rows, 'unscheduled')
    return {k: rs for k, rs in out.items() if len({r['schedule'] for r in rs}) > 1}


def schedule_tables(rs):
    """Markdown, one table per reference: each config's val loss and gap under each schedule (each at its
    own best lr), and what the gap does from the first schedule to each other one (holds / flips /
    halves / doubles and the change, paired by seed: change_marks)."""
    scheds = sorted({r['schedule'] for r in rs}, key=lambda s: (s != 'wsd', s))
    cell = {(r['label'], r['schedule']): r for r in rs}
    config_of = {r['label']: r['config'] for r in rs}
    names = sorted((n for n in config_of if sum((n, s) in cell for s in scheds) > 1),  # under 2 or more
                   key=lambda n: arch_key(config_of[n]) + (n,))
    if not names:
        return ''
    out = ['| config | ' + ' | '.join(f"{s}: best lr, val loss" for s in scheds) + ' |',
           '|---|' + '---:|' * len(scheds)]
    for n in names:
        out.append(f"| {n} | " + ' | '.join(f"{cell[n, s]['lr']:g}, {cell[n, s]['val_pm']}" if (n, s) in cell else '–'
                                            for s in scheds) + ' |')
    for ref in REFERENCES:
        if not any(r['config'] == ref for r in rs):
            continue
        y = 'gap' if ref == 'gpt' else f'gap_{ref}'
        head = ['', '| vs ' + ref + ' | ' + ' | '.join(scheds) + ' | ' +
                ' | '.join(f"{scheds[0]} → {s}" for s in scheds[1:]) + ' |',
                '|---|' + '---:|' * len(scheds) + '---|' * (len(scheds) - 1)]
        body = []
        for n in (n for n in names if config_of[n] != ref):
            got = [cell.get((n, s)) for s in scheds]
            texts = [g.get(f'vs_{ref}', '–') if g else '–' for g in got]
            marks = change_marks(got, y, paired=True)
            body.append(f"| {n} | " + ' | '.join(texts) + ' | ' + ' | '.join(marks) + ' |')
        out += head + body if body else []
    return '\n'.join(out)


# -----------------------------------------------------------------------------
# the transfer view: does a gap seen at one shape hold at another?

def transfer_groups(rows):
    """{setting less architecture, budget, shape and what came with the shape (CONTEXT: corpus, batch,
    machine): rows, each with its `shape` (the size; with the corpus folder where two shapes share a size)
    and `shape_words` (what else its shape differs in)} for every such setting trained at 2 or more shapes."""
    out = {}
    for k, rs in groups(rows, 'transfer').items():
        apart = differing([r['shape_context'] for r in rs])
        one_each = all(len({json.dumps(r['shape_context'], sort_keys=True) for r in rs if r['size'] == size}) == 1
                       for size in {r['size'] for r in rs})
        rs = [dict(r, shape=r['size'] if one_each else f"{r['size']} ({os.path.basename(os.path.normpath(r['data_dir']))})",
                   shape_words=context_words(r, apart), label=arch_label(r, rs)) for r in rs]
        if len({r['shape'] for r in rs}) > 1:
            out[k] = rs
    return out


def arch_label(r, rs):
    """r's name in a view across shapes: its config, and the architecture settings in which it differs
    from rows of the same config in `rs` (a table's label may name a corpus or device: here those are the
    shape's)."""
    mine = [json.loads(x['setting']) for x in rs if x['config'] == r['config']]
    fields = [k for k in differing(mine) if k in ARCH]
    s = json.loads(r['setting'])
    return r['config'] + (f" ({', '.join(f'{k}={s.get(k, DEFAULTS.get(k, chr(8211)))}' for k in fields)})" if fields else '')


def context_words(r, fields):
    """What a row's shape comes with, in words, for the CONTEXT `fields` in which shapes differ."""
    c = {**{f: DEFAULTS[f] for f in CONTEXT if f in DEFAULTS}, **r['shape_context']}
    words = [os.path.basename(os.path.normpath(r['data_dir'])) if 'data' in fields else None,
             f"batch {c['batch_size']} x {c['block_size']}" if {'batch_size', 'block_size'} & set(fields) else None,
             f"{c['device']} {c['dtype']}" if {'device', 'dtype'} & set(fields) else None]
    words += [f"{f}={c[f]}" for f in fields if f in c and f not in ('data', 'batch_size', 'block_size', 'device', 'dtype')]
    return ', '.join(w for w in words if w)


def contrast(a, b, y, ka, kb, paired):
    """(mean, half-width of its 95% interval or None) of kb * gap_b - ka * gap_a, gaps `y` of rows a and b.
    `paired` (two settings run on the same seeds: the same init and batches, as under two schedules):
    from the per-seed contrasts over the seeds both have, t with n - 1 degrees of freedom. Otherwise (two
    shapes: their seeds are unrelated runs): Welch's interval from each side's mean and spread. None for
    the half-width where a side has one seed (or, paired, fewer than 2 seeds in common)."""
    ga, gb = a.get(f'{y}_by_seed') or {}, b.get(f'{y}_by_seed') or {}
    if paired:
        common = sorted(set(ga) & set(gb))
        if common:
            mean, half, _ = interval([kb * gb[s] - ka * ga[s] for s in common])
            return mean, half
    mean = kb * b[y] - ka * a[y]
    if len(ga) < 2 or len(gb) < 2:
        return mean, None
    va, vb = (ka * ka * mean_std(list(ga.values()))[1] ** 2 / len(ga),
              kb * kb * mean_std(list(gb.values()))[1] ** 2 / len(gb))
    if va + vb == 0:
        return mean, 0.0
    df = (va + vb) ** 2 / ((va * va / (len(ga) - 1) if va else 0) + (vb * vb / (len(gb) - 1) if vb else 0))
    return mean, t_quantile(0.5 + CONFIDENCE / 2, df) * math.sqrt(va + vb)


def change_marks(cells, y, paired=False):
    """What gap `y` does from the first of `cells` (rows, or None where there is none) to each later one:
    transfer_mark's word and the change (later gap - first, ± its 95% interval: contrast()), '–' where
    either has no such gap. A word is '(unresolved)' unless both gaps' intervals tell their signs and, for
    'halves' and 'doubles', the interval of the ratio's test excludes 0 (2 * later - first for halves,
    later - 2 * first for doubles): a doubling seen in the means alone is not called one."""
    a, out = cells[0], []
    for b in cells[1:]:
        if not (a and b and y in a and y in b):
            out.append('–')
            continue
        word = transfer_mark(a[y], b[y])
        resolved = not (holds_zero(a[y], a[f'{y}_half']) or holds_zero(b[y], b[f'{y}_half']))
        if resolved and word in ('halves', 'doubles'):
            resolved = not holds_zero(*(contrast(a, b, y, 1, 2, paired) if word == 'halves' else
                                        contrast(a, b, y, 2, 1, paired)))
        delta, half = contrast(a, b, y, 1, 1, paired)
        out.append(word + ('' if resolved else ' (unresolved)') + f"; Δ {delta:+.4f}"
                   + (f" ± {half:.4f}" if half is not None else ''))
    return out


def transfer_mark(a, b):
    """How gap `b` (a larger shape) relates to gap `a`: 'flips' (the means' signs differ), 'halves' (|b| <
    |a| / 2), 'doubles' (|b| > 2 |a|), else 'holds'."""
    if a * b < 0:
        return 'flips'
    if abs(b) < abs(a) / 2:
        return 'halves'
    return 'doubles' if abs(b) > 2 * abs(a) else 'holds'


def matched_budgets(rs, tolerance=1.25):
    """[(tokens per parameter, {size: budget_value})]: at each budget of the smallest shape, the budget of
    each other shape at the nearest tokens per parameter within a factor `tolerance`; only points that
    2 or more shapes share."""
    by_size = {shape: tokens_per_param(g) for (shape,), g in groups(rs, 'shape').items()}
    sizes = sorted(by_size, key=lambda s: (min(r['params'] for r in rs if r['shape'] == s), s))
    out = []
    for v, t in sorted(by_size[sizes[0]].items(), key=lambda kv: kv[1]):
        at = {sizes[0]: v}
        for size in sizes[1:]:
            near = min(by_size[size].items(), key=lambda kv: abs(math.log(kv[1] / t)))
            if abs(math.log(near[1] / t)) <= math.log(tolerance):
                at[size] = near[0]
        if len(at) > 1:
            out.append((t, at))
    return out, sizes


def transfer_tables(rs):
    """Markdown, one table per reference: each config's gap at each shape at matching tokens per parameter
    (paired by seed, ± 95% t interval), and how it changes from the smallest shape to each larger one:
    flips / halves / doubles / holds and the change with Welch's interval (change_marks)."""
    points, sizes = matched_budgets(rs)
    if not points:
        return ''
    cell = {(r['label'], r['shape'], r['budget_value']): r for r in rs}
    config_of = {r['label']: r['config'] for r in rs}
    names = sorted(config_of, key=lambda n: arch_key(config_of[n]) + (n,))
    out = []
    for ref in REFERENCES:
        if not any(r['config'] == ref for r in rs):
            continue
        y = 'gap' if ref == 'gpt' else f'gap_{ref}'
        head = ['', f"Gap to {ref} at each shape at matching tokens per parameter (paired by seed, ± 95% t "
                    f"interval), and what it does from {sizes[0]} to each larger shape", '',
                '| config | tokens/param | ' + ' | '.join(sizes) + ' | ' +
                ' | '.join(f"{sizes[0]} → {s}" for s in sizes[1:]) + ' |',
                '|---|---:|' + '---:|' * len(sizes) + '---|' * (len(sizes) - 1)]
        body = []
        for name in (n for n in names if config_of[n] != ref):
            for t, at in points:
                got = {s: cell.get((name, s, v)) for s, v in at.items()}
                if sum(1 for r in got.values() if r is not None and y in r) < 2:
                    continue
                texts = [got[s][f'vs_{ref}'] if got.get(s) is not None and y in got[s] else '–' for s in sizes]
                marks = change_marks([got.get(s) for s in sizes], y)
                body.append(f"| {name} | {t:.1f} | " + ' | '.join(texts) + ' | ' + ' | '.join(marks) + ' |')
        out += head + body if body else []
    words = {r['shape']: r['shape_words'] for r in rs if r['shape_words']}
    if out and words:
        out += ['', 'The shapes differ in more than size: ' + '; '.join(f"{s}: {words[s]}" for s in sizes if s in words)
                + '. A change between them is the change of all of it.']
    return '\n'.join(out).strip()



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
