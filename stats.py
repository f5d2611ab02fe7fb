"""
Results as data: the results files sweeps and the recall probe append to (one JSON record per
finished run, checked field by field as it is read), what setting a record measured (its key less
the seed and the lr grid), and the statistics over seeds (t intervals, paired gaps, the best lr of a
setting, the marks of what a gap does from one setting to another); and the tools' command lines
(their own flags, train.py's passed on, configs by name).
The tables and plots drawn from them are report.py's.
"""
import collections
import dataclasses
import glob
import json
import math
import os
import platform
import re
import sys
import threading
import time

import torch

from configurator import (HERE, UsageError, config_not_found, json_object, nearest,
                          read_jsonl, read_log as read_log_rows, regular_file, write_error)
from dataset import describe_data
from guards import peek, resolve_device
from model import GPTConfig, count_flops, count_params
from train import TrainConfig

# gpt first (the seeds' baseline), then the transformer variants (llama, today's baseline, with its
# own variants), then the gMLP family
ARCH_ORDER = ('gpt', 'gpt_rope', 'llama', 'llama_gelu', 'llama_primer', 'primer_ez', 'swiglu',
              'geglu', 'reglu', 'gmlp', 'amlp')


def arch_key(name):
    """Sort key that lists configs in ARCH_ORDER, any other config after them by name."""
    return (ARCH_ORDER.index(name) if name in ARCH_ORDER else len(ARCH_ORDER), name)


# -----------------------------------------------------------------------------
# the tools' command lines: their own flags, and train.py's passed on to every run

def split_flags(argv, cls, passed_on):
    """(a script's own arguments, the flags it passes on to the dataclass `passed_on`: train.py's);
    a key neither knows is an error naming the nearest."""
    mine = {f.name for f in dataclasses.fields(cls)}
    theirs = {f.name for f in dataclasses.fields(passed_on)}
    own, other = [], []
    for arg in argv:
        key = arg[2:].partition('=')[0] if arg.startswith('--') and arg != '--help' else None
        if key is not None and key not in mine | theirs:
            close = nearest(key, sorted(mine | theirs))
            raise UsageError(f"unknown key {key!r}; " + (f"did you mean {', '.join(close)}?" if close
                                                        else "run with --help to list the keys"))
        (other if key in theirs and key not in mine else own).append(arg)
    return own, other


def numbers(name, texts, kind):
    """A list flag's strings (--widths=64,128) as positive finite numbers of `kind`."""
    try:
        values = [kind(t) for t in texts]
    except ValueError:
        raise UsageError(f"--{name}={','.join(texts)}: give {kind.__name__}s separated by "
                         "commas") from None
    if not values or not all(0 < v < float('inf') for v in values):
        raise UsageError(f"--{name}={','.join(texts)}: give one or more positive numbers")
    return values


def keys_given(argv):
    """The keys of the `--key[=value]` flags in argv: what the user set on the command line."""
    return {a[2:].partition('=')[0] for a in argv if a.startswith('--')}


def config_paths(names):
    """Config files from paths or names (gpt -> configs/gpt.py); none: every architecture's (not
    quick.py, the quick start's)."""
    shipped = {os.path.basename(p)[:-3]: os.path.relpath(p)
               for p in sorted(glob.glob(os.path.join(HERE, 'configs', '[!_]*.py')))}
    for c in names:
        if not (os.path.isfile(c) if c.endswith('.py') else c in shipped):
            raise (config_not_found(c) if c.endswith('.py') else
                   UsageError(f"unknown config {c!r}; " + (
                       f"did you mean {near[0]}? " if (near := nearest(c, list(shipped), n=1)) else "")
                       + f"choose among {', '.join(k for k in shipped if k != 'quick')} or pass a .py "
                       "path"))
    return list(dict.fromkeys(c if c.endswith('.py') else shipped[c] for c in names)) or \
        [p for k, p in shipped.items() if k != 'quick']


# -----------------------------------------------------------------------------
# the results file: one JSON record per finished run

# the fields a record of each kind has: a reader refuses a file of another kind, never misreads it
KINDS = {'sweep': ('config', 'seed', 'lr', 'size', 'budget', 'budget_value', 'optimizer',
                   'data_dir', 'val_loss'),
         'probe': ('config', 'width', 'T', 'N', 'lr', 'acc', 'steps_run')}
SAID = set()  # notes already printed by this process: a file read three times says its notes once


def key_id(key):
    """A record key as one string, the same for equal keys: what says two records are one run."""
    return json.dumps(key, sort_keys=True)


def say_once(note):
    if note not in SAID:
        SAID.add(note)
        print(f"note: {note}", file=sys.stderr)


def finite(v):
    """A number a run can write: not a bool, nan or inf, nor so large that squaring it overflows."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and abs(v) < 1e100


def count(v):
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


# what each field a report reads must hold: a hand-edited record that breaks one is skipped, named
FIELD_CHECKS = {
    'sweep': {'key': lambda v: isinstance(v, dict), 'config': lambda v: isinstance(v, str) and v,
              'seed': lambda v: isinstance(v, int) and not isinstance(v, bool),
              'lr': lambda v: finite(v) and v > 0,
              'size': lambda v: isinstance(v, str) and re.fullmatch(r'\d+x\d+', v),
              'budget': lambda v: isinstance(v, str), 'budget_value': finite,
              'optimizer': lambda v: isinstance(v, str), 'data_dir': lambda v: isinstance(v, str),
              'val_loss': lambda v: finite(v) and v >= 0, 'params': lambda v: finite(v) and v > 0,
              'tokens': lambda v: finite(v) and v > 0,
              **dict.fromkeys(('flops', 'train_s', 'val_bpb', 'wall_s', 'elapsed_s'),
                              lambda v: v is None or finite(v) and v >= 0),
              **dict.fromkeys(('hellaswag_acc_norm', 'hellaswag_acc'),
                              lambda v: v is None or finite(v) and 0 <= v <= 1),
              'schedule': lambda v: v in ('cosine', 'wsd', 'constant'),
              **dict.fromkeys(('corpus', 'val_set', 'machine'), lambda v: isinstance(v, str)),
              'val_batches': lambda v: v is None or (isinstance(v, list) and all(map(finite, v))),
              'curve': lambda v: isinstance(v, list) and all(
                  isinstance(p, list) and len(p) == 5 and finite(p[1]) and finite(p[4])
                  for p in v)},
    'probe': {'key': lambda v: isinstance(v, dict), 'acc': lambda v: finite(v) and 0 <= v <= 1,
              'lr': lambda v: finite(v) and v > 0, **dict.fromkeys(('width', 'T', 'N'), count),
              'steps_run': lambda v: count(v) or v == 0, 'params': count,
              'solved_at': lambda v: v is None or finite(v),
              **dict.fromkeys(('view', 'machine'), lambda v: isinstance(v, str)),
              'curve': lambda v: isinstance(v, list) and all(
                  isinstance(p, list) and len(p) == 3 and all(map(finite, p)) for p in v)},
}


def read_many(paths):
    """The records of results files (comma-separated); a run in two counts once (the first; a line
    says where they differ); a missing one of several is a UsageError."""
    paths = paths.split(',')
    missing = [p for p in paths if not os.path.exists(p)]
    if len(paths) > 1 and missing:
        raise UsageError(f"--results: {missing[0]!r} not found (of {', '.join(paths)})")
    records, seen = [], {}
    for path in paths:
        for r in read_results(path):
            k = run_id(r['key'])
            if k not in seen:
                seen[k] = (path, r)
                records.append(r)
            elif seen[k][1] != r:
                say_once(f"{path} and {seen[k][0]} record one run with different values "
                         f"({r['config']}, seed {r.get('seed')}, lr {r.get('lr')}): "
                         f"{seen[k][0]}'s record is read")
    return records


def read_results(path, kind='sweep'):
    """The records of a results file of `kind` ('sweep' or 'probe'); no file: none. Skipped: a last
    line cut short (read_jsonl's rule; the next append sets it aside); said once and skipped: a
    record with a broken field, a run's second record. Any other line that is not a record is a
    UsageError naming it."""
    if os.path.exists(path):
        regular_file(path, '--results')  # a folder, or /dev/zero and a pipe, which may never end
    try:
        lines = read_jsonl(path)
    except FileNotFoundError:
        return []
    except OSError as e:
        raise UsageError(f"cannot read {path!r} ({e.strerror})") from None
    records, seen, twice = [], {}, []
    for n, r in lines:
        why = ('not JSON' if r is None else f"a {r['kind']} record" if r.get('kind', kind) != kind
               else next((f"it lacks {k!r}" for k in ('key', *KINDS[kind]) if k not in r), None))
        if why:
            raise UsageError(f"{path} line {n} is not a {kind} results record ({why}); pass a "
                             f"results file {kind}.py wrote, or delete that line")
        # a field a report reads, broken (a hand-edited record: NaN, null, a string for a number)
        field = next((k for k, ok in FIELD_CHECKS[kind].items()
                      if (not ok(r[k]) if k in r else k in ('params', 'tokens', 'curve'))), None)
        if not field and r['key'].get('budget_value', r.get('budget_value')) != r.get('budget_value'):
            field = 'budget_value'  # (the key says what ran: a record that contradicts it misleads)
        if field:
            say_once(f"{path} line {n}: its {field!r} is missing or not what {kind}.py writes "
                     f"({json.dumps(r.get(field))[:40]}): the record is skipped")
            continue
        r.setdefault('schedule', 'cosine')  # records from before lr_schedule existed
        if kind == 'sweep' and 'eval_seed' not in r['key']:
            # from before one val set: each run's seed drew its val batches (eval_seed=-1 today)
            r['key']['eval_seed'] = -1
            r.setdefault('val_set', f"{r['key'].get('eval_iters', '?')} x "
                                    f"{r.get('batch_size', '?')} x {r.get('block_size', '?')} "
                                    "tokens of val, each run's own seed")
        k = key_id(r['key'])
        if seen.setdefault(k, n) == n:
            records.append(r)
        else:
            twice.append(f"{n} (as line {seen[k]})")
    if twice:
        say_once(f"{path} records {len(twice)} run(s) twice, lines {', '.join(twice[:5])}"
                 f"{' ...' if len(twice) > 5 else ''}: the first record of each is read")
    return records


def check_writable(path):
    """A UsageError now, before any training, if the results file cannot be appended to later."""
    regular_file(path, '--results', output=True)  # a device or a pipe is not a results file
    folder = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as e:
        raise UsageError(f"cannot create {folder!r} for the results file ({e.strerror}); "
                         "pass --results=...") from None
    why = 'a folder' if os.path.isdir(path) else 'no permission'
    if os.path.isdir(path) or not os.access(path if os.path.exists(path) else folder, os.W_OK):
        raise UsageError(f"cannot write the results file {path!r} ({why}); "
                         "pass --results=a/file.jsonl you can write")


def append_record(path, record, *, kept='the run', lock=threading.Lock()):
    """One line per run in one fsynced write, by one thread at a time (the sweep or probe writing
    the file holds its flock from its start to its end: no other process appends meanwhile), kept
    when a sweep is interrupted (`kept`: where the run's output stays if it cannot be). A last line
    with no newline is cut short (a writer killed mid-line: moved to PATH.partial, said) or whole,
    its newline dropped by a tool (it parses: it gets one)."""
    aside, note = f"{path}.partial", None
    with lock:
        try:
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                size = os.fstat(fd).st_size
                start = os.pread(fd, size, 0).rfind(b'\n') + 1  # the last line's start
                last = os.pread(fd, size - start, start)  # b'' when the file ends in a newline
                if last and json_object(last) is not None:
                    os.write(fd, b'\n')
                elif last:
                    with open(aside, 'ab') as f:
                        f.write(last + b'\n')
                        f.flush()
                        os.fsync(f.fileno())
                    os.ftruncate(fd, start)
                    note = (f"{path} ended in a line cut short ({size - start} bytes, a writer "
                            f"killed mid-line): moved to {aside}")
                os.write(fd, (json.dumps(record) + '\n').encode())
                os.fsync(fd)
            finally:
                os.close(fd)  # and the flock with it
        except OSError as e:
            raise UsageError(f"{write_error(path, e)}; {kept} is kept; rerun the same command to "
                             "record it") from None
    if note:
        print(f"note: {note}", file=sys.stderr)


# -----------------------------------------------------------------------------
# statistics over seeds: t intervals, paired gaps

CONFIDENCE = 0.95  # every interval the reports print
REFERENCES = ('gpt', 'llama')  # the seeds' baseline (the GPT-2 block) and today's


def mean_std(values):
    n = len(values)
    mean = sum(values) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    return mean, std, n


def betainc(a, b, x):
    """The regularized incomplete beta function I_x(a, b), by its continued fraction (Numerical
    Recipes sec. 6.4, modified Lentz), from the side where it converges fast."""
    if x <= 0 or x >= 1:
        return 0.0 if x <= 0 else 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x))
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
    """The p-quantile (p > 0.5) of Student's t with df degrees of freedom, by bisection on
    P(T <= t) = 1 - I_{df/(df+t^2)}(df/2, 1/2) / 2: (0.975, 1) = 12.706, (0.975, 2) = 4.303."""
    lo, hi = 0.0, 1.0
    while 1 - betainc(df / 2, 0.5, df / (df + hi * hi)) / 2 < p:
        hi *= 2
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if 1 - betainc(df / 2, 0.5, df / (df + mid * mid)) / 2 < p else (lo, mid)
    return (lo + hi) / 2


def interval(values):
    """(mean, half-width of its t interval with n - 1 degrees of freedom (one value: None), n)."""
    mean, sd, n = mean_std(values)
    return mean, t_quantile(0.5 + CONFIDENCE / 2, n - 1) * sd / math.sqrt(n) if n > 1 else None, n


def holds_zero(mean, half):
    """True when an interval cannot tell the sign of what it measures (and when it has no width)."""
    return half is None or abs(mean) <= half


def contrast(a, b, y, ka, kb, paired):
    """(mean, 95% half-width or None) of kb * gap_b - ka * gap_a, gaps `y` of rows a and b: `paired`
    (same seeds, init and batches, as under two schedules), a t interval over the common seeds'
    contrasts; else (two shapes: unrelated runs) Welch's. None where a side has one seed."""
    ga, gb = a.get(f'{y}_by_seed') or {}, b.get(f'{y}_by_seed') or {}
    common = sorted(set(ga) & set(gb)) if paired else []
    if common:
        return interval([kb * gb[s] - ka * ga[s] for s in common])[:2]
    mean = kb * b[y] - ka * a[y]
    if len(ga) < 2 or len(gb) < 2:
        return mean, None
    va, vb = (ka * ka * mean_std(list(ga.values()))[1] ** 2 / len(ga),
              kb * kb * mean_std(list(gb.values()))[1] ** 2 / len(gb))
    if va + vb == 0:
        return mean, 0.0
    df = (va + vb) ** 2 / ((va * va / (len(ga) - 1) if va else 0)
                           + (vb * vb / (len(gb) - 1) if vb else 0))
    return mean, t_quantile(0.5 + CONFIDENCE / 2, df) * math.sqrt(va + vb)


def change_marks(cells, y, paired=False, names=()):
    """What gap `y` does from the first of `cells` (rows or None) that has one, a, to each later
    one, b: 'flips' (signs differ), 'halves' (|b| < |a| / 2), 'doubles' (|b| > 2 |a|) or 'holds',
    and the change b - a ± its interval (contrast); '–' where b has none, and under a and the cells
    before it; where a is not the first cell, 'from <its name in `names`>: ' first. A word is
    '(unresolved)' unless every inequality it claims has a test whose interval excludes 0: 'flips',
    both gaps' signs; 'halves', 2b - a and 2b + a (-|a|/2 < b < |a|/2); 'doubles', b - 2a and
    b + 2a; 'holds', both signs, 2b - a and b - 2a. A flip by the means from a
    resolved a to a b whose sign is unknown, |b| < |a|/2 with its halving resolved (a gap that
    collapsed to about zero), is that halving; a b of known sign keeps the flip. `paired`: a and b
    read on the seeds both have (on_shared_seeds)."""
    start = next((i for i, c in enumerate(cells) if c and y in c), len(cells) - 1)
    base, out, since = cells[start], ['–'] * start, f"from {names[start]}: " if start and names else ''
    for b in cells[start + 1:]:
        if not (b and y in b):
            out.append('–')
            continue
        a, b, on = on_shared_seeds(base, b, y) if paired else (base, b, '')
        word = ('flips' if a[y] * b[y] < 0 else 'halves' if abs(b[y]) < abs(a[y]) / 2
                else 'doubles' if abs(b[y]) > 2 * abs(a[y]) else 'holds')
        signs = not (holds_zero(a[y], a[f'{y}_half']) or holds_zero(b[y], b[f'{y}_half']))
        # (ka, kb): the contrast kb * b - ka * a; 2b - a, 2b + a; b - 2a, b + 2a
        tests = {k: not holds_zero(*contrast(a, b, y, *k, paired))
                 for k in ((1, 2), (-1, 2), (2, 1), (-2, 1))}
        halving, doubling = tests[1, 2] and tests[-1, 2], tests[2, 1] and tests[-2, 1]
        # a collapse to about 0: a resolved a, b's sign unknown, the means' |b| < |a|/2 (2b - a and
        # 2b + a apart, resolved)
        a_known = not holds_zero(a[y], a[f'{y}_half'])
        if (word == 'flips' and a_known and holds_zero(b[y], b[f'{y}_half'])
                and abs(b[y]) < abs(a[y]) / 2 and halving):
            word = 'halves'
        resolved = {'flips': signs, 'halves': halving, 'doubles': doubling,
                    'holds': signs and tests[1, 2] and tests[2, 1]}[word]
        delta, half = contrast(a, b, y, 1, 1, paired)
        out.append(since + word + ('' if resolved else ' (unresolved)') + f"; Δ {delta:+.4f}"
                   + (f" ± {half:.4f}" if half is not None else '') + on)
    return out


def on_shared_seeds(a, b, y):
    """Rows a and b of a paired change, each read on the seeds both have (the word, the tests and Δ
    on one set of seeds), and ' on seeds …' where that leaves some out; as they are if none is shared."""
    sa, sb = (r.get(f'{y}_by_seed') or {} for r in (a, b))
    common = sorted(set(sa) & set(sb))
    if not common or set(sa) == set(sb):
        return a, b, ''
    return (*(gap_fields(y, {s: by[s] for s in common}) for by in (sa, sb)),
            f" on {seeds_text(common)}")


def gap_fields(y, by_seed):
    """A row's fields of gap `y` from its {seed: gap}: y, y_half, y_n, y_by_seed, y_text."""
    gap, half, n = interval(list(by_seed.values()))
    return {y: gap, f'{y}_half': half, f'{y}_n': n, f'{y}_by_seed': by_seed,
            f'{y}_text': gap_text(gap, half, n)}


def gap_text(mean, half, n):
    """'-0.0512 ± 0.0210 (n=3)', '… (spans 0)' when the interval does, '+0.0100 (n=1)'."""
    if half is None:
        return f"{mean:+.4f} (n={n})"
    return f"{mean:+.4f} ± {half:.4f} (n={n})" + (' (spans 0)' if holds_zero(mean, half) else '')


def spread_text(mean, std, n):
    """A val loss over seeds: 'mean ± sd (n=3)', or 'mean (n=1)'."""
    return f"{mean:.4f} (n=1)" if n < 2 else f"{mean:.4f} ± {std:.4f} (n={n})"


def paired_gap(row, base, y):
    """Row's runs minus base's, paired by seed (one seed: the same batches, the same val batches): the
    fields of gap `y` (gap_fields) and eval_se<y's suffix>, the val sample's own s.e. of the gap, from
    per-batch val losses (a fixed val set's noise is shared by every seed); None without a pair."""
    theirs = {r['seed']: r for r in base['runs']}
    pairs = [(r, theirs[r['seed']]) for r in row['runs'] if r['seed'] in theirs]
    if not pairs:
        return None
    by_seed = {a['seed']: a['val_loss'] - b['val_loss'] for a, b in pairs}
    eval_se = None
    batches = [(a.get('val_batches'), b.get('val_batches')) for a, b in pairs]
    k = len(batches[0][0]) if batches[0][0] else 0
    if k > 1 and all(p and q and len(p) == len(q) == k for p, q in batches):  # (p, q: not gap y)
        per_batch = [sum(p[i] - q[i] for p, q in batches) / len(batches) for i in range(k)]
        eval_se = mean_std(per_batch)[1] / math.sqrt(k)
    return {**gap_fields(y, by_seed), f'eval_se{y[3:]}': eval_se}


def at_flops(g, flops):
    """{seed: val loss at training FLOPs `flops`} of one config's rows g (its budgets, each at its
    best lr), linear in log FLOPs between its two budgets around `flops`, seed by seed (at a
    budget's own FLOPs, that budget's seeds); None outside them (never extrapolated)."""
    g = sorted(g, key=lambda r: r['flops'])
    for r in g:  # at a budget's own FLOPs: its seeds, not the seeds the pair around it share
        if flops > 0 and math.isclose(r['flops'], flops, rel_tol=1e-9):
            return {x['seed']: x['val_loss'] for x in r['runs']}
    for lo, hi in zip(g, g[1:]):
        if 0 < lo['flops'] <= flops <= hi['flops']:
            span = math.log(hi['flops'] / lo['flops'])
            w = math.log(flops / lo['flops']) / span
            a, b = ({x['seed']: x['val_loss'] for x in r['runs']} for r in (lo, hi))
            return {s: a[s] + w * (b[s] - a[s]) for s in a if s in b}
    return None


def frontier(points):
    """The (FLOPs, loss) points no cheaper point beats: the least loss reachable with at most that
    many FLOPs (a larger run that ends worse than a smaller one, its lr too high, is not)."""
    out = []
    for f, l in sorted(points):
        if not out or l < out[-1][1]:
            out.append((f, l))
    return out


def compute_multiplier(reference, flops, loss):
    """Primer's compute multiplier (arXiv:2109.08668): the FLOPs the reference's frontier needs to
    reach `loss` (linear in log-FLOPs), over `flops`: (multiplier, None, the two points read
    between), or (None, why, the frontier's end it is bounded by) outside its range: no
    extrapolation."""
    pts = frontier(reference)
    for f, l in pts:  # (a frontier point's own loss: also a frontier of one point)
        if l == loss:
            return f / flops, None, ((f, l),)
    for (f0, l0), (f1, l1) in zip(pts, pts[1:]):
        if l1 <= loss <= l0:
            x = math.log(f0) + (loss - l0) * (math.log(f1) - math.log(f0)) / (l1 - l0)
            return math.exp(x) / flops, None, ((f0, l0), (f1, l1))
    if loss < pts[-1][1]:
        return None, f"> {pts[-1][0] / flops:.2f} (below gpt's lowest loss)", (pts[-1],)
    return None, f"< {pts[0][0] / flops:.2f} (above gpt's highest loss)", (pts[0],)


def bound_text(m, why, gpt_ok, own_ok):
    """A compute multiplier as a table gives it (m, why: compute_multiplier's): measured where gpt's
    lr and the config's were tuned (`gpt_ok`, `own_ok`), else a bound in the direction an untuned lr
    could move it (a tuned gpt could only need fewer FLOPs: '≤'; a tuned config could only do better:
    '≥'), none where neither was; beyond gpt's frontier, why's bound where the lr it rests on was tuned
    (gpt's lowest point for '>', the config's for '<')."""
    if m is None:
        ok, whose = (gpt_ok, 'gpt') if why.startswith('>') else (own_ok, 'its')
        return why if ok or why[:1] not in '<>' else f"{why}, no bound: {whose} lr not tuned there"
    return (f"{m:.2f}" if gpt_ok and own_ok else f"≤ {m:.2f} (gpt's lr not tuned there)" if own_ok
            else f"≥ {m:.2f} (its lr not tuned)" if gpt_ok
            else f"{m:.2f}, no bound: neither lr tuned there")


# -----------------------------------------------------------------------------
# what a record measured: its run setting, and the settings a gap, a regime and a transfer compare

# settings whose arrival changed what a run measures: always in a key, so that a record written
# before them (its val batches drawn from the run's seed) never matches a run today
ALWAYS = ('eval_seed',)
DEFAULTS = {f.name: f.default for f in dataclasses.fields(TrainConfig)}
GRID = ('learning_rate', 'min_lr', 'lr')  # a row's lr grid (min_lr / lr stays a setting; 'lr': old)
# a row's seeds; a folder's path (the data is named by its fingerprint, 'data'); when evaluations
# ran, not what they scored
NOT_MEASURED = ('seed', 'data_dir', 'eval_interval')
SHAPE = ('n_layer', 'n_head', 'n_embd')
SIZE = (*SHAPE, 'size')  # (an older record's key names its shape 'size')
BUDGET = ('budget_value', 'max_iters', 'lr_decay_iters', 'max_tokens', 'max_flops', 'max_seconds',
          'warmup_iters')
# what a sweep sets for each config from a budget of FLOPs or seconds: at one such budget the configs
# compared differ in them (at a budget of iterations or tokens they are the setting's)
PER_CONFIG = ('max_iters', 'lr_decay_iters', 'warmup_iters')
PER_CONFIG_BUDGETS = ('max_flops', 'max_seconds')

# what a second shape may also change: its corpus, batch, machine
CONTEXT = ('data', 'batch_size', 'block_size', 'gradient_accumulation_steps', 'device', 'dtype',
           'compile', 'eval_iters', 'eval_seed', 'threads')
ARCH = ('config', *(f.name for f in dataclasses.fields(GPTConfig)
                    if f.name not in (*SHAPE, 'block_size', 'vocab_size', 'dropout')))


def compared(r):
    """What configs compared with record r may differ in: the architecture, and what the sweep sets
    for each config at r's budget (PER_CONFIG, at a budget of FLOPs or seconds)."""
    return ARCH + (PER_CONFIG if r['budget'] in PER_CONFIG_BUDGETS else ())


def run_id(key):
    """A run's key as records are matched by: less settings at train.py's default (but ALWAYS: a
    key from before a setting matches today's run, a changed default does not), and less the data
    folder's path where the data's fingerprint names it (a copy elsewhere is the same data)."""
    return key_id({k: v for k, v in key.items()
                   if (k in ALWAYS or k not in DEFAULTS or DEFAULTS[k] != v)
                   and not (k == 'data_dir' and key.get('data'))})


def setting(r, drop=()):
    """A record's run setting (its records differ in seed and lr alone): its key as run_id reads it,
    less NOT_MEASURED, the lr grid and `drop` (ARCH: what two compared configs differ in; BUDGET,
    SHAPE: what a regime, a transfer view spans)."""
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


def groups(records, *fields):
    out = {}
    for r in records:
        out.setdefault(tuple(r[f] for f in fields), []).append(r)
    return out


# -----------------------------------------------------------------------------
# the best learning rate of a setting

def tuned_lr(records, size, budget):
    """(best lr, the size and (budget kind, value) of the grid it is read from) of one config's records
    of one setting (any seed, lr, size, budget), or None without a grid (2+ lrs at one size and
    budget; a lone run at another lr is none): at `size` where a grid ran there, else at the size
    with the most runs; there at `budget`, else a budget of its kind, else the largest value (of
    any kind)."""
    grids = groups(records, 'size', 'budget', 'budget_value')
    runs = collections.Counter(r['size'] for r in records)
    grids = {k: g for k, g in grids.items() if len({r['lr'] for r in g}) > 1}
    if not grids:
        return None
    at = max(grids, key=lambda k: (k[0] == size, runs[k[0]], k[1:] == budget, k[1] == budget[0],
                                   k[2]))
    return best_lr(grids[at]), at[0], at[1:]


def choose_lr(by_lr):
    """(the lr of {lr: {seed: record}} with the best mean final val loss, the seeds compared on):
    the seeds every grid point has, so that a grid tuned on seed 1 and replicated at its best does
    not let a 1-seed mean beat a 3-seed one (none in common: each lr's own seeds)."""
    common = set.intersection(*(set(seeds) for seeds in by_lr.values()))
    best = min(by_lr, key=lambda lr: mean_std([r['val_loss'] for s, r in by_lr[lr].items()
                                               if s in common or not common])[0])
    return best, sorted(common) if common else sorted(by_lr[best])


def best_lr(records):
    """The lr of `records` (one setting, several lrs) that choose_lr picks."""
    by_lr = {}
    for r in records:
        by_lr.setdefault(r['lr'], {}).setdefault(r['seed'], r)
    return choose_lr(by_lr)[0]


def seeds_text(seeds):
    """[1, 2, 3] -> 'seeds 1-3'; [1] -> 'seed 1'; [1, 3] -> 'seeds 1, 3'."""
    if len(seeds) == 1:
        return f"seed {seeds[0]}"
    run = seeds == list(range(seeds[0], seeds[-1] + 1))
    return f"seeds {seeds[0]}-{seeds[-1]}" if run else "seeds " + ', '.join(map(str, seeds))


# -----------------------------------------------------------------------------
# a sweep's record of a run, from the run's folder

def read_log(run_dir):
    """A run's log.jsonl rows; a row with a non-number where a report reads one is a UsageError."""
    path = os.path.join(run_dir, 'log.jsonl')
    if not os.path.isfile(path):
        raise UsageError(f"{path} not found; is {run_dir!r} a train.py out_dir?")
    rows = read_log_rows(path)
    for row in rows:
        bad = next((k for k in ('loss', 'val_loss', 'train_loss', 'lr', 'tokens', 'train_s',
                                'elapsed_s') if k in row and not finite(row[k])), None)
        if bad:
            raise UsageError(f"{path}: the row of iter {row['iter']} has {bad}={row[bad]!r}, not a "
                             "number train.py writes; delete that row, or the file, and rerun")
    return rows


def model_config(config):
    """The GPTConfig of a run's config (fields added to model.py since take their defaults)."""
    try:
        return GPTConfig(**{f.name: config[f.name] for f in dataclasses.fields(GPTConfig)
                            if f.name in config})
    except (TypeError, ValueError) as e:
        raise UsageError(f"a run's config is not valid for this model.py: {e}") from None


def read_config(run_dir):
    """A run's config.json as a dict, or a one-line UsageError naming what is wrong with it."""
    path = os.path.join(run_dir, 'config.json')
    try:
        with open(path, encoding='utf-8') as f:
            config = json.load(f)
    except (OSError, ValueError) as e:
        raise UsageError(f"{path} cannot be read ({type(e).__name__}); is {run_dir!r} a finished "
                         "train.py out_dir?") from None
    if not isinstance(config, dict):
        raise UsageError(f"{path} holds a JSON {type(config).__name__}, not a train.py config")
    return config


def record_of(plan, wall_s, branched, meta):
    """The results-file record of a finished run, from its log.jsonl and config.json, and `meta`,
    the data its checkpoint says it trained on (the caller checked that the checkpoint is finished,
    its last evaluation done, at the planned iteration)."""
    rows = read_log(plan.run_dir)
    evals = [r for r in rows if 'val_loss' in r]
    last, cfg = rows[-1], read_config(plan.run_dir)
    model = model_config(cfg)
    corpus = describe_data(meta, cfg['data_dir'])  # what it trained on, in a few words
    return {'kind': 'sweep', 'key': plan.key, **plan.fields, **dict(
        val_loss=evals[-1]['val_loss'], best_val=min(r['val_loss'] for r in evals),
        val_bpb=evals[-1].get('val_bpb'), val_se=evals[-1].get('val_se'),
        val_batches=evals[-1].get('val_batches'), corpus=corpus,
        train_loss=evals[-1]['train_loss'], iters=last['iter'], tokens=last['tokens'],
        flops=last.get('flops'), train_s=last.get('train_s'), elapsed_s=last.get('elapsed_s'),
        wall_s=wall_s, params=count_params(model), flops_per_token=count_flops(model),
        n_layer=cfg['n_layer'], n_embd=cfg['n_embd'],
        curve=[[r['iter'], r['tokens'], r.get('flops'), r.get('train_s'), r['val_loss']]
               for r in evals],
        command=' '.join(plan.cmd[1:]).replace(HERE + os.sep, ''),  # (the project's paths: relative)
        branched_from=branched, date=time.strftime('%Y-%m-%d'),
        machine=machine(resolve_device(cfg['device'])))}


def machine(device):
    """A record's `machine`: the card its run used (its name; cpu or mps), the host and torch."""
    card = torch.cuda.get_device_name(device) if device.startswith('cuda') else device
    return f"{card}, {platform.machine()} {os.cpu_count()} cores, torch {torch.__version__}"


def card(record):
    """The card of a record's run, its `machine`'s first part; None in a record older than that."""
    first = (record.get('machine') or '').split(', ')[0]
    return None if not first or re.fullmatch(r'\S+ \d+ cores', first) else first


def run_summary(run_dir):
    rows = read_log(run_dir)
    evals = [r for r in rows if 'val_loss' in r]
    last = rows[-1] if rows else {}
    config = read_config(run_dir) if os.path.isfile(os.path.join(run_dir, 'config.json')) else None
    params = count_params(model_config(config)) if config else None  # rebuilt from its config
    saved = peek(run_dir)  # how far it got: its checkpoint says (a log row comes every log_interval)
    name = os.path.basename(os.path.abspath(run_dir))
    if name == 'prev':  # the run before the one in its parent folder: named by both
        name = os.path.join(os.path.basename(os.path.dirname(os.path.abspath(run_dir))), name)
    return dict(run=name,
                final_val=evals[-1]['val_loss'] if evals else None,
                best_val=min(r['val_loss'] for r in evals) if evals else None,
                iters=saved['iter_num'] if saved else last.get('iter'),
                tokens=saved['tokens_seen'] if saved and saved['tokens_seen'] else last.get('tokens'),
                flops=last.get('flops'),
                seconds=last.get('train_s', last.get('elapsed_s')),
                ms_per_iter=(1000 * last['train_s'] / last['iter'])
                if last.get('train_s') and last.get('iter') else None, params=params)


RUN_COLUMNS = [
    ('run', 'run', '{}'), ('params', 'params', '{:,}'), ('final_val', 'final val loss', '{:.4f}'),
    ('best_val', 'best val loss', '{:.4f}'), ('iters', 'iters', '{:,}'),
    ('tokens', 'tokens', '{:,}'), ('seconds', 'train s', '{:.0f}'),
    ('ms_per_iter', 'ms/iter', '{:.1f}'),
]
