"""
Results as data: the results files that sweeps and the recall probe append to (one JSON record per
finished run), the statistics over seeds, markdown tables, plots, and the one order in which every table
lists the architectures. Every figure in the README is drawn from a results file through these.
"""
import glob
import json
import math
import os
import sys
import threading

from configurator import UsageError, atomic_write

# gpt first (the baseline), then the transformer variants, then the gMLP family
ARCH_ORDER = ('gpt', 'llama', 'primer_ez', 'swiglu', 'geglu', 'reglu', 'gmlp', 'amlp')


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

def read_results(path):
    """The records of a results file (JSON lines); a line cut short by a killed sweep is skipped."""
    records = []
    if os.path.isfile(path):
        with open(path, encoding='utf-8', errors='replace') as f:
            for line in f:
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                if isinstance(r, dict) and 'key' in r:
                    records.append(r)
    return records


def append_record(path, record, lock=threading.Lock()):
    """One line per finished run, flushed and fsynced: an interrupted sweep keeps every finished run."""
    with lock:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, 'a', encoding='utf-8') as f:
            f.write(json.dumps(record) + '\n')
            f.flush()
            os.fsync(f.fileno())



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



def compute_multiplier(reference, flops, loss):
    """
    Primer's compute multiplier: the training FLOPs the reference (gpt) needs to reach `loss`, over
    `flops`, interpolated linearly in log-FLOPs on the reference's (FLOPs, loss) points. Returns
    (multiplier, None), or (None, why) when `loss` lies outside the reference's range: no extrapolation.
    """
    pts = sorted(reference)
    for (f0, l0), (f1, l1) in zip(pts, pts[1:]):
        if min(l0, l1) <= loss <= max(l0, l1) and l0 != l1:
            x = math.log(f0) + (loss - l0) * (math.log(f1) - math.log(f0)) / (l1 - l0)
            return math.exp(x) / flops, None
    lo = min(l for _, l in pts)
    if loss < lo:
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

