"""
The numbers in the prose of README.md, RESULTS.md and GUIDE.md, and the marks README and RESULTS report
(what a gap does across shapes or schedules: MARK), each computed from the committed records
(or read from the committed log or code that backs it), never copied from a rounded cell. A claim is a
phrase of a document with its numbers left as fields; `claims()` renders each from the records, and
tests/test_sweep.py checks that every rendered phrase is in its document, so a number put back wrong
(or a record changed under it) fails there; that `untested()` finds no number in any document's prose,
in figures or in words ('a fifth', 'twice', 'several times': WORD), that no claim holds; and that
`unguarded()` finds none whose change would leave every claim's phrase in place. `python
tests/doc_claims.py` lists all three.
"""
import contextlib
import functools
import inspect
import json
import math
import os
import re
import sys

import numpy as np

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repository
sys.path.insert(0, HERE)
import report  # noqa: E402
import stats  # noqa: E402

SHAPES = 'results/shapes_stdlib.jsonl,results/h200/shapes_site.jsonl'
# a claim whose condition the records no longer meet: a phrase no document holds, so it fails
CHANGED = '(the records no longer support this sentence)'
CI = ('results/ci_2026-11-29.txt', '2026-11-29')  # the CI log the docs quote, and its date


def source(path):
    """A committed file's text (relative to the repository)."""
    return open(os.path.join(HERE, path), encoding='utf-8').read()


def records(paths=SHAPES, kind='sweep'):
    """The records of these results files (relative to the repository, comma-separated)."""
    if kind != 'sweep':
        return stats.read_results(os.path.join(HERE, paths), kind)
    return stats.read_many(','.join(os.path.join(HERE, p) for p in paths.split(',')))


def flags(command):
    """{'--key': 'value'} of a record's train.py or probe.py command."""
    return dict(f.split('=', 1) for f in command.split() if f.startswith('--'))


def lr(x):
    """An lr as the prose writes it: 4e-3, 1.6e-2."""
    return f"{x:.1e}".replace('.0e', 'e').replace('e-0', 'e-')


@functools.lru_cache(maxsize=None)
def rows(paths=SHAPES):
    """The report's rows of these results files (relative to the repository), full precision."""
    return report.summary_rows(records(paths))


def row(config, size, tpp, schedule='wsd', paths=SHAPES):
    """The row of `config` at `size` whose budget is `tpp` tokens per parameter (the nearest, within
    10%), under `schedule`."""
    rs = [r for r in rows(paths) if r['size'] == size and r['schedule'] == schedule]
    per = report.tokens_per_param(rs)
    found = [r for r in rs if r['config'] == config and abs(per[r['budget_value']] / tpp - 1) < 0.1]
    assert len(found) == 1, (config, size, tpp, schedule, len(found))
    return found[0]


def gap(config, ref, size, tpp, schedule='wsd', paths=SHAPES):
    """(mean, half-width or None, n) of config - ref at that shape and budget, paired by seed."""
    r = row(config, size, tpp, schedule, paths)
    y = report.gap_of(ref)
    return r[y], r[f'{y}_half'], r[f'{y}_n']


def flops_cell(config, ref, size, tpp):
    """config - ref at equal training FLOPs (the report's equal-FLOPs tables), as a row holds a gap
    for stats.change_marks ('g', 'g_half', 'g_by_seed'; and 'n'): config at that budget, ref's loss
    read at config's FLOPs there; None outside ref's budgets."""
    r = row(config, size, tpp)
    at = stats.at_flops([x for x in rows() if x['size'] == size and x['schedule'] == 'wsd'
                          and x['config'] == ref], r['flops'])
    if at is None:  # (outside ref's budgets)
        return None
    by_seed = {x['seed']: x['val_loss'] - at[x['seed']] for x in r['runs'] if x['seed'] in at}
    mean, half, n = stats.interval(list(by_seed.values()))
    return {'g': mean, 'g_half': half, 'g_by_seed': by_seed, 'n': n}


def flops_gap(config, ref, size, tpp):
    """(mean, half-width or None, n) of flops_cell."""
    c = flops_cell(config, ref, size, tpp)
    return c['g'], c['g_half'], c['n']


def flops_ratio(config, ref, size):
    """config's training FLOPs per token against ref's at one shape, the mean over the budgets."""
    ours = {r['budget_value']: r['flops'] for r in rows() if r['size'] == size and r['schedule']
            == 'wsd' and r['config'] == config}
    theirs = {r['budget_value']: r['flops'] for r in rows() if r['size'] == size and r['schedule']
              == 'wsd' and r['config'] == ref}
    both = [ours[v] / theirs[v] for v in ours if v in theirs]
    return sum(both) / len(both)


def mark(config, ref, a, b, flops=False, schedule=False):
    """What config - ref does from a to b as the view's cell writes it, less its Δ: 'holds',
    'halves (unresolved)' (stats.change_marks). The transfer view: a and b are (shape, tokens per
    parameter), at equal tokens or (flops) at equal FLOPs; the schedule view (schedule): a and b are
    (shape, tokens per parameter, schedule), paired by seed."""
    cells = [flops_cell(config, ref, *x) if flops else row(config, *x) for x in (a, b)]
    return stats.change_marks(cells, 'g' if flops else report.gap_of(ref), schedule)[0].split(';')[0]


def study_configs():
    """The configs of the 3x96 study under WSD, in the report's order: the ones 4x128 repeats."""
    return sorted({r['config'] for r in rows() if r['size'] == '3x96' and r['schedule'] == 'wsd'}, key=stats.arch_key)


def tuned_at(size, top_seeds=True):
    """Whether every study config's best lr at every budget of size lies inside a grid of 3 or more, and
    (top_seeds) has 3 seeds at the largest budget."""
    ts, cs = tpps(size), study_configs()
    return all(not row(c, size, t)['edge'] and len(grid(c, size, t)[2]) >= 3 for c in cs for t in ts) and (
        not top_seeds or all(len(row(c, size, ts[-1])['runs']) == 3 for c in cs))


def num(v, digits, sign=False):
    """A number as the prose writes it: `digits` decimals, a typographic minus, + when `sign`."""
    text = f"{v:+.{digits}f}" if sign else f"{abs(v):.{digits}f}" if v >= 0 else f"{v:.{digits}f}"
    return text.replace('-', '−')


def pm(config, ref, size, tpp, digits=2, sign=True, flops=False, **kw):
    """'−0.45 ± 0.04': a gap ± its 95% half-width (at equal FLOPs: flops); '−0.18 (one seed)' where one seed ran."""
    mean, half = (flops_gap(config, ref, size, tpp) if flops else gap(config, ref, size, tpp, **kw))[:2]
    return f"{num(mean, digits, sign)} " + ("(one seed)" if half is None else f"± {num(half, digits)}")


def spans(config, ref, size, tpp, flops=False):
    """Whether the gap's interval holds 0 (or one seed ran: its sign is not told either)."""
    mean, half = (flops_gap if flops else gap)(config, ref, size, tpp)[:2]
    return half is None or stats.holds_zero(mean, half)


def at10(config, ref, flops=False):
    """What config - ref does from 3x96 to 4x128 at 10 tokens per parameter (10.3 against 10.1): the
    mark README's short list gives each conclusion."""
    return mark(config, ref, ('3x96', 10.3), ('4x128', 10.1), flops)


def one(config, ref, size, tpp, digits=2, sign=True, **kw):
    """'−0.57': a gap of one seed."""
    return num(gap(config, ref, size, tpp, **kw)[0], digits, sign)


@functools.lru_cache(maxsize=None)
def claims():
    """(document, phrase) for every number the prose states (computed once: the committed files do not
    change under a test run)."""
    g = functools.partial
    L, G, LM = g(pm, 'llama', 'gpt'), g(one, 'llama', 'gpt'), g(mark, 'llama', 'gpt')
    M, MO = g(pm, 'gmlp', 'gpt'), g(one, 'gmlp', 'gpt')
    ML, MLO = g(pm, 'gmlp', 'llama'), g(one, 'gmlp', 'llama')
    grow = stats.contrast(row('llama', '3x96', 1.3), row('llama', '4x128', 1.3), report.gap_of('gpt'),
                           1, 1, False)
    late = [gap('llama', 'gpt', s, 10)[:2] for s in ('3x96', '4x128', '5x288')]
    early = [gap('llama', 'gpt', s, 1.3 if s != '5x288' else 1.2)[:2] for s in ('3x96', '4x128', '5x288')]
    ratio_96 = early[0][0] / late[0][0]
    ratio_128 = early[1][0] / late[1][0]
    floor_128 = (abs(early[1][0]) - early[1][1]) / (abs(late[1][0]) + late[1][1])
    ratio_288 = early[2][0] / late[2][0]
    cos, wsd = (gap('llama', 'gpt', '3x96', 20.6, s) for s in ('cosine', 'wsd'))
    sched = stats.contrast(row('llama', '3x96', 20.6, 'wsd'), row('llama', '3x96', 20.6, 'cosine'),
                            report.gap_of('gpt'), 1, 1, True)
    final = {s: gap('llama', 'gpt', s, t)[:2] for s, t in (('3x96', 20.6), ('4x128', 10.1), ('5x288', 20))}
    told = [s for s, (m, h) in final.items() if h is not None and not stats.holds_zero(m, h)]
    read_96 = []  # gMLP - gpt at equal FLOPs at each 3x96 budget where gpt's budgets bracket it
    for x in (1.3, 2.6, 5.2, 10.3, 20.6):
        with contextlib.suppress(TypeError):  # at_flops: None outside gpt's budgets
            read_96.append(flops_gap('gmlp', 'gpt', '3x96', x))
    late_ml = {mark('gmlp', 'llama', ('3x96', a), ('5x288', b)) for a, b in ((5.2, 5), (10.3, 10), (20.6, 20))}
    sched_mark = mark('llama', 'gpt', ('3x96', 20.6, 'wsd'), ('3x96', 20.6, 'cosine'), schedule=True)
    seven = study_configs()
    cpu = {'3x96': tpps('3x96'), '4x128': tpps('4x128')}
    at_ten = {('3x96', 10.3), ('4x128', 10.1)}

    def sp(config, ref, size, tpp, flops=False):  # ' (spans 0)' where an interval holds 0
        half = (flops_gap if flops else gap)(config, ref, size, tpp)[1]
        return ' (spans 0)' if half is not None and spans(config, ref, size, tpp, flops) else ''
    gm = {s: [gap('gmlp', 'gpt', s, t)[0] for t in ts] for s, ts in cpu.items()}
    rope = [gap('gpt_rope', 'gpt', s, 1.3)[:2] for s in cpu]
    lost = [not spans(c, ref, '3x96', 10.3, f) and spans(c, ref, '4x128', 10.1, f) for c, ref, f in (
        ('gmlp', 'gpt', False), ('gmlp', 'gpt', True), ('gmlp', 'llama', True), ('llama', 'gpt', False),
        ('gpt_rope', 'gpt', False), ('primer_ez', 'gpt', False), ('llama_primer', 'llama', False),
        ('swiglu', 'gpt', False))]
    base = {(s, t): {c: -gap(c, ref, s, t)[0] for c, ref in (
        ('primer_ez', 'gpt'), ('llama_primer', 'llama'), ('llama', 'gpt'), ('swiglu', 'gpt'), ('gpt_rope', 'gpt'),
        ('gmlp', 'gpt'))} for s, t in (('3x96', 20.6), ('4x128', 10.1))}
    first_behind = [next((t for t, m in zip(tpps(s), [gap('gmlp', 'gpt', s, t)[0] for t in tpps(s)]) if m > 0), None)
                    for s in ('3x96', '4x128', '5x288')]
    shrink = all(abs(gap('llama', 'gpt', s, tpps(s)[0])[0]) > abs(gap('llama', 'gpt', s, tpps(s)[-1])[0])
                 for s in ('3x96', '4x128', '5x288'))
    ml_told = all(not spans('gmlp', 'llama', '3x96', t) and gap('gmlp', 'llama', '3x96', t)[0] > 0 for t in cpu['3x96'])
    ml_means = all(gap('gmlp', 'llama', '4x128', t)[0] > 0 for t in cpu['4x128'])
    readme = [
        "from 3×96 to 4×128 at 10 tokens per parameter (the transfer view's mark, from three seeds at each shape "
        "unless a line says one seed). The first three lines are those where a late gap resolved at 3×96 is not "
        "resolved at 4×128:" if all(len(row(c, s, t)['runs']) == 3 for c in seven for s, t in at_ten)
        and lost == [True] * 5 + [False] * 3 else CHANGED,
        # the short list
        f"1. gMLP beats GPT-2's block early and trails it late, and at 4×128, by the means, it turns sooner: at 10 "
        f"tokens per parameter gMLP − gpt is {M('3x96', 10.3)} at 3×96 (it trails from 20.6 on: {M('3x96', 20.6, 3)}) "
        f"and {M('4x128', 10.1)} at 4×128{sp('gmlp', 'gpt', '4x128', 10.1)}, `{at10('gmlp', 'gpt')}`. At equal "
        f"training FLOPs ({flops_ratio('gmlp', 'gpt', '3x96'):.2f}× gpt's per token at 3×96, "
        f"{flops_ratio('gmlp', 'gpt', '4x128'):.2f}× at 4×128) it is {pm('gmlp', 'gpt', '3x96', 10.3, 3, flops=True)} and "
        f"{pm('gmlp', 'gpt', '4x128', 10.1, 3, flops=True)}{sp('gmlp', 'gpt', '4x128', 10.1, True)}: `{at10('gmlp', 'gpt', True)}`"
        if gm['3x96'][0] < 0 < gm['3x96'][-1] and gm['4x128'][0] < 0 <= gm['4x128'][-1] and gm['3x96'][-2] < 0
        else CHANGED,
        "2. gMLP trails LLaMA's block at every training length at 3×96 (and at 4×128 by the means); **at equal FLOPs "
        "it leads llama at 5.2 and 10.3 tokens per parameter at 3×96** (" + ', '.join(
            f"{num(-flops_gap('gmlp', 'llama', '3x96', x)[0], 3)} ± {num(flops_gap('gmlp', 'llama', '3x96', x)[1], 3)}"
            for x in (5.2, 10.3)) + f") and is {pm('gmlp', 'llama', '4x128', 10.1, 3, flops=True)} at 10.1 at 4×128: "
        f"`{at10('gmlp', 'llama', True)}`."
        if ml_told and ml_means
        and all(flops_gap('gmlp', 'llama', '3x96', x)[0] + flops_gap('gmlp', 'llama', '3x96', x)[1] < 0
                for x in (5.2, 10.3)) else CHANGED,
        "3. LLaMA's block beats GPT-2's early in training at all three shapes (3×96 → 4×128 at 1.3: "
        f"`{LM(('3x96', 1.3), ('4x128', 1.3))}`); late, resolved at the "
        + ("smallest only" if told == ['3x96'] and all(m < 0 for m, _ in final.values()) else f"shapes {told}")
        + f" (at 10: `{at10('llama', 'gpt')}`). gpt_rope (rotary positions alone) leads gpt early at both CPU "
        f"shapes; at 10, `{at10('gpt_rope', 'gpt')}`."
        if all(m < 0 and (h is None or not stats.holds_zero(m, h)) for m, h in early) and all(m < 0 for m, _ in rope)
        else CHANGED,
        "4. That early lead shrinks as training goes on, at every shape: an early gap is not a late one."
        if shrink else CHANGED,
        "5. Primer EZ's changes give the largest late gains at both CPU shapes (" + ', '.join(
            f"{num(min(b['primer_ez'], b['llama_primer']), 2)}-{num(max(b['primer_ez'], b['llama_primer']), 2)}"
            + (" over their base block" if s == '3x96' else '') + f" at {t:g} at {s.replace('x', '×')}"
            for (s, t), b in base.items())
        + f"); at 10, primer_ez − gpt `{at10('primer_ez', 'gpt')}` and llama_primer − llama "
        f"`{at10('llama_primer', 'llama')}`."
        if all(min(b['primer_ez'], b['llama_primer']) > max(v for c, v in b.items() if 'primer' not in c)
               for b in base.values()) else CHANGED,
        f"6. SwiGLU against GPT-2's FFN: no gap resolved at any length or CPU shape "
        f"(`{at10('swiglu', 'gpt')}`)." if all(spans('swiglu', 'gpt', s, t) for s, ts in cpu.items() for t in ts)
        else CHANGED,
        f"7. The schedule can change a gap: llama − gpt grows by {num(-sched[0], 3)} ± {num(sched[1], 3)} "
        "under cosine (paired by seed, one pair of configs, 3×96; not measured at 4×128)."
        if not [r for r in rows() if r['size'] == '4x128' and r['schedule'] == 'cosine'] else CHANGED,
        # the shapes
        "each with a learning-rate grid at seed 1 (every budget's best inside it) and three seeds at each "
        f"budget's best, {cpu['3x96'][0]:g} to {cpu['3x96'][-1]:g} tokens per parameter"
        if tuned_at('3x96', False) and all(len(row(c, '3x96', t)['runs']) == 3 for c in seven for t in cpu['3x96'])
        else CHANGED,
        f"a grid at seed 1 likewise and three seeds at the best at {cpu['4x128'][-1]:g} tokens per parameter, "
        f"{cpu['4x128'][0]:g} to {cpu['4x128'][-1]:g}."
        if tuned_at('4x128') else CHANGED,
        "**gMLP against gpt: ahead early, behind late; at the larger shapes it crosses sooner (by the means).**"
        if None not in first_behind and first_behind[0] > first_behind[1] > first_behind[2] else CHANGED,
        "**Primer EZ's changes: the largest late gains at both CPU shapes; primer_ez's smaller at 4×128**"
        if at10('primer_ez', 'gpt') == 'halves' else CHANGED,
        f"against llama its late gap is not resolved ({pm('gmlp', 'llama', '3x96', 20.6, 3, flops=True)} at 20.6)"
        if spans('gmlp', 'llama', '3x96', 20.6, True) else CHANGED,
        f"3×96 → 4×128 `{at10('llama', 'gpt')}`, resolved (2 × later − first excludes 0, though the later sign is "
        "not told)" if at10('llama', 'gpt') == 'halves' and spans('llama', 'gpt', '4x128', 10.1) else CHANGED,
        # what the records support
        f"At the smallest budget: {L('3x96', 1.3)} (3×96, 1.3 tokens per parameter, 3 seeds), "
        f"{L('4x128', 1.3)} (4×128, 1.3, 3 seeds) and {G('5x288', 1.2)} (5×288, 1.2, one seed)",
        f"3×96 → 4×128 `{LM(('3x96', 1.3), ('4x128', 1.3))}` (it grows by {num(-grow[0], 2)} ± "
        f"{num(grow[1], 2)}), 3×96 → 5×288 `{LM(('3x96', 1.3), ('5x288', 1.2))}` (one seed there)",
        f"({L('3x96', 2.6)} at 2.6)",
        f"at 5 tokens per parameter {L('3x96', 5.2)}, {L('4x128', 5.1)} and {G('5x288', 5)} (one seed) (3×96 → "
        f"4×128 `{LM(('3x96', 5.2), ('4x128', 5.1))}`",
        f"at 10, {L('3x96', 10.3)} at 3×96, **{L('4x128', 10.1, 3)} at 4×128{sp('llama', 'gpt', '4x128', 10.1)}** "
        f"and {G('5x288', 10, 3)} at 5×288 (one seed): 3×96 → 4×128 `{LM(('3x96', 10.3), ('4x128', 10.1))}`",
        f"llama leads by **{num(-gap('llama', 'gpt', '3x96', 20.6)[0], 3)} ± "
        f"{num(gap('llama', 'gpt', '3x96', 20.6)[1], 3)}** (3 seeds); at 5×288, 20 tokens per "
        f"parameter, by {num(-gap('llama', 'gpt', '5x288', 20)[0], 3)} (one seed)",
        f"gpt_rope (rotary positions in GPT-2's block) − gpt is {pm('gpt_rope', 'gpt', '3x96', 10.3)} at 10.3 (3×96) "
        f"and {pm('gpt_rope', 'gpt', '4x128', 10.1)} at 10.1 (4×128): `{at10('gpt_rope', 'gpt')}`",
        f"gMLP leads gpt by {num(-gap('gmlp', 'gpt', '3x96', 5.2)[0], 2)} ± "
        f"{num(gap('gmlp', 'gpt', '3x96', 5.2)[1], 2)} at 5.2 tokens per parameter and "
        f"{num(-gap('gmlp', 'gpt', '3x96', 10.3)[0], 2)} ± {num(gap('gmlp', 'gpt', '3x96', 10.3)[1], 2)} "
        "at 10.3",
        f"trails it by **{M('3x96', 20.6, 3, False)} at 20.6**",
        f"At 4×128 gMLP − gpt is {M('4x128', 1.3)} at 1.3, {M('4x128', 5.0)} at 5.0 and {M('4x128', 10.1, 3)} at "
        f"10.1: 3×96 → 4×128 `{at10('gmlp', 'gpt')}`",
        f"it leads at 1.2 and 2.5 ({MO('5x288', 1.2)}, {MO('5x288', 2.5)}) and already trails at 5 "
        f"({MO('5x288', 5, 3)}), 10 ({MO('5x288', 10, 3)}",
        f"and 20 ({MO('5x288', 20, 3)})",
        "gMLP trails llama at every budget at 3×96 (and at 4×128 by the means)" if ml_told and ml_means else CHANGED,
        f"as much at 5×288 at its three largest budgets: {ML('3x96', 5.2, 3, False)}, {ML('3x96', 10.3, 3, False)} and "
        f"{ML('3x96', 20.6, 3, False)} at 5.2, 10.3 and 20.6 at 3×96",
        f"at 4×128, {ML('4x128', 10.1, 3, False)} at 10.1",
        f"{MLO('5x288', 5, 3, False)}, {MLO('5x288', 10, 3, False)} and {MLO('5x288', 20, 3, False)} "
        "at 5×288 (one seed" + ("; `{}`)".format(*late_ml) if len(late_ml) == 1 else CHANGED),
        f"the schedule view marks it `{sched_mark}`: one seed's ratio",
        f"llama − gpt is {num(wsd[0], 3)} ± {num(wsd[1], 3)} under WSD and {num(cos[0], 3)} ± "
        f"{num(cos[1], 3)} under cosine",
        f"the gap grows by **{num(-sched[0], 3)} ± {num(sched[1], 3)}** (paired by seed",
        f"at 20.6 tokens per parameter primer_ez leads gpt by **"
        f"{num(-gap('primer_ez', 'gpt', '3x96', 20.6)[0], 3)} ± {num(gap('primer_ez', 'gpt', '3x96', 20.6)[1], 3)}**, "
        f"llama_primer leads llama by **{num(-gap('llama_primer', 'llama', '3x96', 20.6)[0], 3)} ± "
        f"{num(gap('llama_primer', 'llama', '3x96', 20.6)[1], 3)}** (and gpt by "
        f"{num(-gap('llama_primer', 'gpt', '3x96', 20.6)[0], 3)} ± {num(gap('llama_primer', 'gpt', '3x96', 20.6)[1], 3)})",
        f"At 10: primer_ez − gpt {pm('primer_ez', 'gpt', '3x96', 10.3)} at 3×96 and "
        f"{pm('primer_ez', 'gpt', '4x128', 10.1)} at 4×128 (`{at10('primer_ez', 'gpt')}`), llama_primer − llama "
        f"{pm('llama_primer', 'llama', '3x96', 10.3)} and {pm('llama_primer', 'llama', '4x128', 10.1)} "
        f"(`{at10('llama_primer', 'llama')}`)",
        f"swiglu − gpt is not resolved at any budget at either shape ({pm('swiglu', 'gpt', '3x96', 20.6, 3)} at "
        f"20.6 at 3×96, {pm('swiglu', 'gpt', '4x128', 10.1, 3)} at 10.1 at 4×128"
        if all(spans('swiglu', 'gpt', s, t) for s, ts in cpu.items() for t in ts) else CHANGED,
        f"swiglu trails llama at 3×96 ({pm('swiglu', 'llama', '3x96', 20.6, 3)} at 20.6)"
        if gap('swiglu', 'llama', '3x96', 20.6)[0] > 0 and not spans('swiglu', 'llama', '3x96', 20.6) else CHANGED,
        f"at every shape llama − gpt at 1.2–1.3 tokens per parameter ({num(-early[0][0], 2)}–"
        f"{num(-early[2][0], 2)}) is larger than at 10 ({num(-late[2][0], 2)}–{num(-late[0][0], 2)}): "
        f"{ratio_96:.1f} times at 3×96, {ratio_128:.0f} at 4×128 by the means (at least "
        f"{floor_128:.1f} within the intervals) and {ratio_288:.0f} at 5×288 (one seed)",
        f"At 4×128 it spends {flops_ratio('gmlp', 'gpt', '4x128'):.2f}× gpt's FLOPs, and its gap at equal FLOPs at "
        f"10.1 is {pm('gmlp', 'gpt', '4x128', 10.1, 3, flops=True)} to gpt and "
        f"{pm('gmlp', 'llama', '4x128', 10.1, 3, flops=True)} to llama",
    ]
    gpt_edge = sorted(report.tokens_per_param([r for r in rows() if r['size'] == '5x288'])[r['budget_value']]
                      for r in rows() if r['size'] == '5x288' and r['config'] == 'gpt' and r['edge'] == 'bottom')
    readme.append(f"gpt's best lr there is its grid's lowest (2e-3) at {gpt_edge[0]:.0f} and "
                  f"{gpt_edge[1]:.0f} tokens per parameter")
    noise = [max(r[k] for r in rows() if r['size'] == size for k in ('eval_se', 'eval_se_llama')
                 if r.get(k) is not None) for size in ('3x96', '4x128', '5x288')]
    readme.append(f"at most {noise[0]:.4f} at 3×96, {noise[1]:.4f} at 4×128 and {noise[2]:.4f} at "
                  "5×288, the reports' noise lines")
    params = {s: row('gpt', s, 10 if s == '5x288' else 10.3 if s == '3x96' else 10.1)['params']
              for s in ('3x96', '4x128', '5x288')}
    readme += [f"**3 layers × 96** ({params['3x96'] / 1e6:.2f}M parameters",
               f"**4 layers × 128** ({params['4x128'] / 1e6:.2f}M parameters",
               f"**5 layers × 288** ({params['5x288'] / 1e6:.1f}M parameters"]
    ends = {c: row(c, '3x96', 20.6, 'cosine')['val'] - row(c, '3x96', 20.6, 'wsd')['val']
            for c in ('gpt', 'llama')}
    readme.append(f"gpt ends {ends['gpt']:.3f} worse under cosine than under WSD, llama "
                  f"{ends['llama']:.3f} worse")
    y = report.gap_of('gpt')
    by = [row('llama', '3x96', 20.6, s)[f'{y}_by_seed'] for s in ('cosine', 'wsd')]
    readme.append(f"one seed's ratio is {min(by[0][k] / by[1][k] for k in by[0]):.1f}")
    email = records('results/example_email.jsonl')
    readme.append(f"about {sum(r['wall_s'] for r in email) / 2 / 60:.0f} minutes on a 2-core CPU: its "
                  f"{['', 'one', 'two', 'three', 'four', 'five', 'six'][len(email)]} runs' wall seconds, "
                  "two at a time")
    readme += [f"there gMLP spends {flops_ratio('gmlp', 'gpt', '3x96'):.2f}× gpt's FLOPs per token, and against "
               "gpt's loss at the same FLOPs it leads at every budget read"
               if all(stats.holds_zero(*g[:2]) is False and g[0] < 0 for g in read_96) else CHANGED,
               f"At 5×288, spending {flops_ratio('gmlp', 'gpt', '5x288'):.2f}× gpt's FLOPs"]
    ms = step_ms()
    order = ('swiglu', 'gmlp', 'gpt_rope', 'primer_ez', 'llama', 'llama_primer')
    readme += [', '.join(f"{c} {ms[c] / ms['gpt']:.2f}×" for c in order) + ", where their FLOPs per "
               "token are " + ', '.join(f"{flops_ratio(c, 'gpt', '3x96'):.2f}×" for c in order[:-1])
               + f" and {flops_ratio(order[-1], 'gpt', '3x96'):.2f}×"]
    h100 = {(r['impl'], r['batch_size']): r for r in map(json.loads, open(
        os.path.join(HERE, 'results', 'h100', 'side_by_side124.jsonl'), encoding='utf-8'))}
    h200 = {'compile=True' in r['setup']: r['ours_over_reference'] for r in map(json.loads, open(
        os.path.join(HERE, 'results', 'h200', 'side_by_side124.jsonl'), encoding='utf-8'))}
    readme.append(f"on an H100 {h100['ours', 32]['tokens_per_s']:,.0f} against "
                  f"{h100['nanogpt', 32]['tokens_per_s']:,.0f} tokens/s at batch 32 "
                  f"({h100['ours', 32]['mfu']:.0%} MFU), on an H200 {h200[True]:.3f}× nanoGPT's with "
                  f"`--compile` and {h200[False]:.3f}× without")
    ex = rows('results/example_email.jsonl')
    email_gap, tpp = [r for r in ex if r['config'] == 'llama'][0]['gap'], ex[0]['tokens'] / ex[0]['params']
    budgets = [r['budget_value'] for r in rows() if r['size'] == '3x96' and r['schedule'] == 'wsd']
    readme.append(f"**This example is early training** ({tpp:.1f} tokens per parameter): a gap there says "
                  f"which block *starts* faster; llama's {-email_gap:.2f} is the kind of gap that shrank to a "
                  f"fraction of itself in our study when training ran {max(budgets) // min(budgets)}× longer")
    sc = {(r['config'], r['size']): r['val'] for r in rows('results/h100/scaling_shakespeare.jsonl')}
    ez = [sc['gpt', s] - sc['primer_ez', s] for s in ('4x128', '8x512')]
    readme.append(f"its gain over gpt fell from {ez[0]:.3f} at 0.8M parameters to {ez[1]:.3f} at 25.3M")
    scaling = flags(records('results/h100/scaling_shakespeare.jsonl')[0]['command'])
    grid_n = len({r['lr'] for r in records('results/h100/scaling_shakespeare.jsonl')
                  if r['config'] == 'gpt' and r['size'] == '4x128'})
    cpu = [r for r in rows('results/sweep_shakespeare.jsonl') if r['config'] == 'primer_ez' and r['size'] == '4x128'
           and r['budget'] == 'max_iters=2000' and r['optimizer'] == 'adamw'][0]
    readme.append(f"(RESULTS.md §4: block {scaling['--block_size']}, {int(scaling['--max_tokens']) / 1e6:.1f}M tokens, "
                  f"each config's best of {grid_n} lrs); §3's run of that corpus at 0.8M (block "
                  f"{records('results/sweep_shakespeare.jsonl')[0]['block_size']}, {cpu['tokens'] / 1e6:.1f}M tokens, "
                  f"tuned, {len(cpu['seeds'])} seeds) gives {-cpu['gap']:.3f} ± {cpu['gap_half']:.3f}: a gap's size "
                  "belongs to its recipe")
    loop = loop_vs_nanogpt()
    readme.append(f"our `train.py` takes {loop['ratio']:.2f}× nanoGPT's per iteration on 2 CPU cores at "
                  f"4×128 (the median over the iterations of {loop['rounds']} alternating rounds")
    ci = {k: re.search(rf'ci: {k} (\d+)s', source(CI[0])).group(1)
          for k in ('ok in', 'set up in', 'tests done at', 'the quick start took', r'sweep.py --quick took')}
    readme += [f"`.ci/run` took {ci['ok in']} s on a fresh clone, 2 cores, {CI[1]} (set-up, tests, quick "
               f"start: `{CI[0]}`)",
               f"{ci['the quick start took']} s end to end on an idle 2-core CPU, packages installed (CI's "
               f"fresh clone, {CI[1]}: `{CI[0]}`)",
               f"the same table and plot, {ci[r'sweep.py --quick took']} s in a CI run's fresh clone"]
    busy = {int(t): [] for t in ('1', '2')}
    for t, ms in re.findall(r'threads (\d), round \d, load at start [\d.]+: median ([\d.]+) ms/iter',
                            source('results/busy_threads_2026-11-29.txt')):
        busy[int(t)].append(float(ms) / 1000)
    loads = [float(x) for x in re.findall(r'load at start ([\d.]+)', source('results/busy_threads_2026-11-29.txt'))]
    one_thread = json.loads(source('results/quick_start_1thread_2026-11-29.txt').strip().splitlines()[-1])['val_loss']
    readme += [f"(load about {round(sum(loads) / len(loads))}), a quick-start step took {min(busy[2]):.2f}–"
               f"{max(busy[2]):.2f} s at two threads and {min(busy[1]):.2f}–{max(busy[1]):.2f} s at one",
               f"(the quick start ends at {one_thread:.4f} on one thread too:"]
    tests_s = int(ci['tests done at']) - int(ci['set up in'])
    guide = [f"took {ci['ok in']} s on a fresh clone on a 2-core machine like CI's ({ci['set up in']} s set-up, "
             f"{tests_s} s of tests, {ci['the quick start took']} s of quick start, {ci[r'sweep.py --quick took']} s"
             " of `sweep.py --quick`"]
    return ([('README.md', p) for p in readme + readme_setup()] + [('GUIDE.md', p) for p in guide + guide_claims()]
            + [('RESULTS.md', p) for p in results() + results_1a() + results_1b() + results_1c()
                                               + results_2_3() + results_4() + results_5() + results_6_7()]
            + words())


def tpps(size, schedule='wsd'):
    """The tokens per parameter of a shape's budgets, smallest first, as the tables print them."""
    rs = [r for r in rows() if r['size'] == size and r['schedule'] == schedule]
    return [float(report.per_param(t)) for t in sorted(report.tokens_per_param(rs).values())]


def grid(config, size, tpp):
    """(best lr, its number of seeds, the lrs tried on seed 1) of config at that shape and budget."""
    r = row(config, size, tpp)
    tried = sorted({x['lr'] for x in records() if x['config'] == config and x['size'] == size and x['schedule'] == 'wsd'
                    and x['budget_value'] == r['budget_value'] and x['seed'] == 1})
    return lr(r['lr']), len(r['runs']), [lr(x) for x in tried]


def readme_setup():
    """README's phrases that state a setting, a size or a count: each from the records or the code."""
    tol = report.MATCH_TOLERANCE
    quick = source('configs/quick.py')
    mb = pydoc_mb()
    ci_loss = re.search(r"quick start's val loss ([\d.]+) is README's", source(CI[0])).group(1)
    top, early, late = tpps('3x96')[-1], min(tpps(s)[0] for s in ('3x96', '4x128', '5x288')), \
        [tpps(s)[-1] for s in ('3x96', '4x128', '5x288')]
    seeds288 = sorted({r['seed'] for r in records('results/h200/shapes_site.jsonl')})
    batch = {s: {(r['batch_size'], r['block_size']) for r in records() if r['size'] == s} for s in ('3x96', '5x288')}
    assert all(len(b) == 1 for b in batch.values()), batch
    (b96, t96), (b288, t288) = batch['3x96'].pop(), batch['5x288'].pop()
    flips, fflips = ([b for a, b in zip(tpps('3x96'), tpps('5x288'))
                      if mark('gmlp', 'gpt', ('3x96', a), ('5x288', b), flops) == 'flips (unresolved)']
                     for flops in (False, True))
    g_best = [grid('gmlp', '3x96', t) for t in tpps('3x96')]
    settled = next(i for i in range(len(g_best)) if all(x[0] == g_best[-1][0] for x in g_best[i:]))
    sched_n = {gap('llama', 'gpt', '3x96', top, s)[2] for s in ('wsd', 'cosine')}
    probe = {(r['width'], r['T'], r['N']) for r in records('results/probe.jsonl', 'probe')}
    email = records('results/example_email.jsonl')
    import sweep
    q = sweep.QUICK
    header, iters = re.search(r'# parameters: ([0-9.]+M)', quick).group(1), int(re.search(r'max_iters = (\d+)', quick).group(1))
    chars = re.search(r'max_new_tokens: int = (\d+)', source('sample.py')).group(1)
    seconds = float(re.search(r"DEADLINE_S., ([0-9.]+)", source('results/gpu_mfu.py')).group(1))
    first = max(tpps(s)[0] for s in ('3x96', '4x128', '5x288'))
    return [f"within {tol:.0%} or a one-line error", f"more than {tol:.0%} from gpt's parameters",
            f"within {tol:.0%} of gpt's, a shrunken run",
            f"`pydoc_data.topics`, {mb} MB in Python 3.11, char-level",
            f"trains a {header}-parameter GPT on it for {iters:,} iterations", f"streams {chars} characters",
            f"Final val loss {ci_loss} on 2 CPU cores",
            f"**early** is a shape's fewest tokens per parameter ({early:g}–{first:g}), "
            f"**late** its most ({min(late):.0f}–{max(late):g})",
            f"batch {b96} × {t96}, on the 2-core CPU",
            f"batch {b288} × {t288}, bf16, compiled",
            f"a learning-rate grid at seed {seeds288[0]} only, {tpps('5x288')[0]:g} to {tpps('5x288')[-1]:g} tokens "
            f"per parameter (seeds 2 and 3 wait" if seeds288 == [1] else CHANGED,
            f"At 3×96's top budget, {top:g} tokens per parameter, llama leads by",
            f"At 3×96 ({g_best[-1][1]} seeds at lr {g_best[-1][0]}, the best of {', '.join(g_best[-1][2][:-1])} and "
            f"{g_best[-1][2][-1]} from {tpps('3x96')[settled]:g} tokens per parameter on)",
            f"marks the gap at {' and '.join(f'{t:g}' for t in flips)} `flips (unresolved)`",
            f"it trails at {' and '.join(f'{t:g}' for t in fflips)} tokens per parameter at equal FLOPs too "
            "(one seed), marked there `flips (unresolved)`" if all(
                flops_gap('gmlp', 'gpt', '5x288', x)[0] > 0 for x in (5, 10)) else CHANGED,
            f"(3×96, {top:g} tokens per parameter, gpt and llama each at its own best lr under each schedule, "
            f"{sched_n.pop()} seeds;" if len(sched_n) == 1 else CHANGED,
            "one cell: width {}, T = {}, N = {};".format(*probe.pop()) if len(probe) == 1 else CHANGED,
            f"two blocks, {len({r['seed'] for r in email})} seeds" if len({r['config'] for r in email}) == 2 else CHANGED,
            f"Its table ({email[0]['size']}, adamw, max_iters={email[0]['budget_value']} in every row",
            f"gmlp at a toy size, {q['seeds']} seeds × {len(q['learning_rate'])} lrs",
            f"and every block with the best, by a deadline (`DEADLINE_S`, {seconds:.0f} s)"]


def bench_rows(path):
    """{config: its row's cells} of a committed bench.py table."""
    lines = [line for line in source(path).splitlines() if re.match(r'\| [a-z]', line)]
    return {cells[0]: cells[1:] for cells in (line.strip('| ').split(' | ') for line in lines)
            if cells[0] != 'config'}


def step_ms(path='results/bench_3x96_2026-11-28.txt'):
    """{config: ms per training step} of the committed bench.py table at the 3x96 shape."""
    return {c: float(cells[1]) for c, cells in bench_rows(path).items()}


def loop_vs_nanogpt(path='results/loop_vs_nanogpt_2026-11-29.txt'):
    """The last run in the committed log of results/loop_vs_nanogpt.sh: each loop's median ms per
    iteration, their ratio and its rounds."""
    runs = re.findall(r"nanoGPT: median ([\d.]+) ms/iter.*\nours: median ([\d.]+) ms/iter .*per round: ([^)]*)\)",
                      source(path))
    nano, ours, per = runs[-1]
    med = {'nanoGPT': float(nano), 'ours': float(ours)}
    rounds = len(per.split(','))
    return dict(med, ratio=med['ours'] / med['nanoGPT'], rounds=rounds)


def lr_gap(config, size, budget, low, high, paths=SHAPES):
    """How much lr `low`'s mean val loss is ahead of `high`'s (a positive number: low is better)."""
    return mean_val(config, size, budget, high, paths=paths)[0] - mean_val(config, size, budget, low, paths=paths)[0]


def results():
    """The phrases of RESULTS.md §1, §4 and §6 whose numbers come from records or committed logs."""
    out = [f"grid's edge, {lr_gap('gpt', '5x288', 1560, 2e-3, 4e-3):.4f} ahead of 4e-3 on one seed",
           f"4e-3 ({lr_gap('gpt', '5x288', 3125, 4e-3, 2e-3):.4f} ahead of 2e-3)",
           f"(2e-3 within {abs(lr_gap('llama', '3x96', 1920, 2e-3, 4e-3)):.4f} of it there, 3 seeds each)"]
    # the first 5x288 study's log: a grid ends when its extension starts, which the stop ends
    log = source('results/h200/study_2026-11-26_h100.txt')
    ends = {}
    for name in ('gpt', 'llama'):
        stop = int(re.search(rf"\[(\d+)s\] {name}_wsd: sweep.py exited 130", log).group(1))
        part = log.split(f"== {name}_wsd.log")[1]
        ends[name] = stop - 60 * float(re.search(r"stopped: .* in ([\d.]+) min", part).group(1))
    out.append(f"gpt's and llama's grids ended whole at about {5 * round(ends['gpt'] / 5)} and "
               f"{5 * round(ends['llama'] / 5)} s")
    # the levers bench on one H100: 8 compiled runs against 8 eager ones, iterations per second
    lev = source('results/h100/levers_2026-11-26.txt')
    its = {k: float(re.search(rf"{k}\s+x 8: 8 processes,\s+([\d.]+) iterations/s", lev).group(1))
           for k in ('eager', 'compiled')}
    out.append(f"8 compiled runs do {its['compiled'] / its['eager']:.1f}× the iterations per second of "
               f"8 eager ones ({its['compiled']:.0f} against {its['eager']:.0f})")
    per = {}
    for line in source('results/h100/levers_2026-11-26.jsonl').splitlines():
        r = json.loads(line)
        per.setdefault(r['n'], {}).setdefault(r['lever'], []).append(1000 / r['ms_per_iter'])
    gain = {n: sum(v['compiled']) / sum(v['eager']) for n, v in per.items() if {'compiled', 'eager'} <= set(v)}
    out.append(f"the compiled runs ({min(gain.values()):.1f}–{max(gain.values()):.1f}× the iterations per second of "
               f"eager ones, {min(gain)} to {max(gain)} runs sharing a GPU: §4)")
    # §4's scaling table on Tiny Shakespeare: each config's best val loss and lr at each size
    sc = {(r['config'], r['size']): r for r in rows('results/h100/scaling_shakespeare.jsonl')}
    sizes = ('4x128', '6x384', '8x512')
    for c in ('gpt', 'llama', 'primer_ez', 'gmlp', 'amlp'):
        out.append(f"| {c} | " + ' | '.join(f"{sc[c, s]['val']:.3f} ({sc[c, s]['lr']:.0e})".replace('e-0', 'e-')
                                             for s in sizes) + ' |')
    gains = {c: ', '.join(f"{sc['gpt', s]['val'] - sc[c, s]['val']:.3f}" for s in sizes)
             for c in ('llama', 'gmlp', 'amlp')}
    out.append(f"llama {gains['llama']}; gMLP {gains['gmlp']}; aMLP {gains['amlp']}")
    ez = [sc['gpt', s]['val'] - sc['primer_ez', s]['val'] for s in sizes]
    out.append(f"gains {ez[0]:.3f} at 0.8M, {ez[1]:.3f} at 10.7M and {ez[2]:.3f} at 25.3M")
    speedup = [float(c[7].replace(',', '')) / float(c[8].replace(',', ''))
               for c in bench_rows('results/bench_4x128_2026-11-28.txt').values()]
    out.append(f"the cache decodes {min(speedup):.1f}–{max(speedup):.1f}× faster than without it")
    loop = loop_vs_nanogpt()
    out.append(f"took **{loop['ratio']:.2f}×** nanoGPT's per iteration over {loop['rounds']} rounds "
               f"({loop['ours']:.2f} against {loop['nanoGPT']:.2f} ms")
    out.append(f"Xeon VM: `results/loop_vs_nanogpt_2026-11-28.txt`, "
               f"{loop_vs_nanogpt('results/loop_vs_nanogpt_2026-11-28.txt')['ratio']:.2f}×)")
    return out


def mean_val(config, size, budget, at, schedule='wsd', paths=SHAPES):
    """(mean val loss, seeds) of config's runs at lr `at` on that budget."""
    vals = [r['val_loss'] for r in records(paths) if r['config'] == config and r['size'] == size
            and r['schedule'] == schedule and r['budget_value'] == budget and r['lr'] == at]
    return sum(vals) / len(vals), len(vals)


def below_top(size='3x96'):
    """Where seed 1 picks another lr below the top budget than at it and no other seed ran:
    'primer_ez's 8e-3 up to 10.3, ...'."""
    ts = tpps(size)
    out = []
    for c in sorted({r['config'] for r in rows() if r['size'] == size and r['schedule'] == 'wsd'},
                    key=stats.arch_key):
        best = row(c, size, ts[-1])['lr']
        other = [t for t in ts[:-1] if row(c, size, t)['lr'] != best and len(row(c, size, t)['runs']) == 1]
        if other:
            where = (f"up to {other[-1]:g}" if other == ts[:len(other)] and len(other) > 2
                     else 'at ' + ' and '.join(f"{t:g}" for t in other))
            out.append(f"{c}'s {lr(row(c, size, other[0])['lr'])} {where}")
    return ', '.join(out)


def what_ran(size_order=('3x96', '4x128')):
    """§1a's list: each config's lrs and seeds at the largest budget of each shape and schedule."""
    out = []
    rs = [r for r in records('results/shapes_stdlib.jsonl')]
    for size in size_order:
        for sched in ('cosine', 'wsd'):
            mine = [r for r in rs if r['size'] == size and r['schedule'] == sched]
            if not mine:
                continue
            top = max(r['budget_value'] for r in mine)
            for c in sorted({r['config'] for r in mine}):
                at = [r for r in mine if r['config'] == c and r['budget_value'] == top]
                lrs = sorted({r['lr'] for r in at})
                out.append(f"{c} at {size}, {sched}: " + ', '.join(
                    f"lr {x:g} ({stats.seeds_text(sorted(r['seed'] for r in at if r['lr'] == x))})" for x in lrs))
    return '; '.join(out)


def results_1a():
    """RESULTS.md §1a's phrases: its setup, what ran, and what it shows."""
    top = tpps('3x96')[-1]
    rs = records('results/shapes_stdlib.jsonl')
    v96 = [r for r in rs if r['size'] == '3x96']
    flag = flags(v96[0]['command'])
    budgets = sorted({r['budget_value'] for r in v96})
    nb = int(v96[0]['val_set'].split()[0])
    tol = report.MATCH_TOLERANCE
    params = {s: {r['config']: r['params'] for r in rs if r['size'] == s} for s in ('3x96', '4x128')}
    assert all(abs(p / ps['gpt'] - 1) <= tol for ps in params.values() for p in ps.values())
    cool = float(re.search(r'cooldown_frac: float = ([\d.]+)', source('train.py')).group(1))
    b128 = sorted({r['budget_value'] for r in rs if r['size'] == '4x128'})
    seven = study_configs()
    t128 = tpps('4x128')
    whole128 = tuned_at('4x128')
    halved = all(row(c, '4x128', 10.1)['lr'] * 2 == row(c, '3x96', 10.3)['lr'] for c in seven)
    noise = max(r[k] for r in rows() if r['size'] in ('3x96', '4x128') for k in ('eval_se', 'eval_se_llama')
                if r.get(k) is not None)
    first = records('results/regime_stdlib.jsonl')
    nb_first = int(first[0]['val_set'].split()[0])
    mach = {r['machine'] for r in rs}
    assert len(mach) == 1, mach
    torch_v = re.search(r'torch (\S+)', mach.pop()).group(1)
    R = 'results/regime_stdlib.jsonl'
    cpython = re.search(r'cpython ([\d.]+)', v96[0]['corpus']).group(1)
    ez, sw, gm = grid('primer_ez', '3x96', top), grid('swiglu', '3x96', top), grid('gmlp', '3x96', top)
    lo = {c: [row(c, '3x96', t) for t in tpps('3x96')[:-1]] for c in ('primer_ez', 'swiglu')}
    pez = [gap('primer_ez', 'llama', '3x96', t)[:2] for t in tpps('3x96')]
    lead = [t for t, (m, h) in zip(tpps('3x96'), pez) if m < 0 and not stats.holds_zero(m, h)]
    ends = {c: (row(c, '3x96', top, 'cosine'), row(c, '3x96', top, 'wsd')) for c in ('gpt', 'llama')}
    y = report.gap_of('gpt')
    by = [row('llama', '3x96', top, s)[f'{y}_by_seed'] for s in ('cosine', 'wsd')]
    ratios = sorted((by[0][k] / by[1][k] for k in by[0]), reverse=True)
    sched = stats.contrast(row('llama', '3x96', top, 'wsd'), row('llama', '3x96', top, 'cosine'), y, 1, 1, True)
    cos, wsd = (gap('llama', 'gpt', '3x96', top, s) for s in ('cosine', 'wsd'))
    lg = {x: mean_val('llama', '3x96', 3840, x) for x in (1e-3, 2e-3, 4e-3)}
    s1 = {x: [r['val_loss'] for r in rs if r['config'] == 'llama' and r['size'] == '3x96' and r['schedule'] == 'wsd'
              and r['budget_value'] == 3840 and r['lr'] == x and r['seed'] == 1][0] for x in (1e-3, 2e-3, 4e-3)}
    return [
        f"({stats.t_quantile(0.975, 1):.2f} standard errors for two seeds, {stats.t_quantile(0.975, 2):.2f} for three)",
        f"with two seeds that is a {2 * math.atan(2) / math.pi:.0%} interval, not {stats.CONFIDENCE:.0%}",
        f"{nb} batches of {v96[0]['batch_size']} × {v96[0]['block_size']} bytes",
        f"CPython {cpython}'s standard library, byte-level), "
        f"context {v96[0]['block_size']}, batch {v96[0]['batch_size']} × {v96[0]['block_size']}",
        f"(heads of {96 // int(flag['--n_head'])}, {params['3x96']['gpt'] / 1e3:.0f}k parameters, every config "
        f"matched to gpt's within {tol:.0%})",
        f"budgets {', '.join(f'{b:,}' for b in budgets[:-1])} and {budgets[-1]:,} iterations = **{tpps('3x96')[0]:g} "
        f"to {top:g} tokens per parameter**",
        f"(warmup {flag['--warmup_iters']}, constant, a 1 − √ cooldown to lr/"
        f"{float(flag['--learning_rate']) / float(flag['--min_lr']):.0f} over the last "
        f"{ {0.2: 'fifth', 0.25: 'quarter'}[cool] };",
        f"**4 layers × 128** ({params['4x128']['gpt'] / 1e3:.0f}k parameters, budgets {b128[0]:,} to {b128[-1]:,} = "
        f"{t128[0]:g} to {t128[-1]:g} tokens per parameter): the same seven configs, a grid at seed 1 around each "
        f"one's 3×96 best, extended while a best sat at its edge, and seeds 1-3 at each config's best at {t128[-1]:g}"
        if whole128 and len(seven) == 7 else CHANGED,
        f"over the {nb} val batches a gap between two configs has a standard error of at most {noise:.4f}",
        f"at {nb_first} batches (the first study's) it is about twice that, {noise * math.sqrt(nb / nb_first):.3f}",
        f"A val loss's own standard error over its batches is about "
        f"{sum(r['val_se'] for r in v96) / len(v96):.3f}",
        f"**What ran** ({len(rs)} records, the 2-core x86-64 VM, torch {torch_v}, float32",
        f"at the largest budget of each: {what_ran()}.",
        f"at 4×128, seeds 2 and 3 at the lrs that seed 1 picks below {t128[-1]:g} where they differ from the best at "
        f"{t128[-1]:g} ({below_top('4x128')})" if not below_top('3x96') else CHANGED,
        f"**At 4×128** (the same seven configs and val set; seeds 1-3 at each config's best lr at {t128[-1]:g}"
        if whole128 else CHANGED,
        f"(3×96, {budgets[-1]:,} iterations = {top:g} tokens per parameter, each config",
        # what it shows
        f"(3×96: lr grid {', '.join(ez[2])} at seed 1, best {ez[0]} at {top:g} for both, inside the grid; "
        f"{ez[1]} seeds there): at {top:g} tokens per parameter primer_ez leads gpt by "
        f"**{num(-gap('primer_ez', 'gpt', '3x96', top)[0], 3)} ± {num(gap('primer_ez', 'gpt', '3x96', top)[1], 3)}** "
        f"and llama by {num(-gap('primer_ez', 'llama', '3x96', top)[0], 3)} ± "
        f"{num(gap('primer_ez', 'llama', '3x96', top)[1], 3)}; llama_primer leads llama by "
        f"**{num(-gap('llama_primer', 'llama', '3x96', top)[0], 3)} ± {num(gap('llama_primer', 'llama', '3x96', top)[1], 3)}** "
        f"and gpt by {num(-gap('llama_primer', 'gpt', '3x96', top)[0], 3)} ± "
        f"{num(gap('llama_primer', 'gpt', '3x96', top)[1], 3)}.",
        f"Below {top:g}, at its best lr there, primer_ez − llama is "
        + ', '.join(f"{pm('primer_ez', 'llama', '3x96', t, 3)} at {t:g}" for t in tpps('3x96')[:-1])
        + f": its lead over llama is resolved from {lead[0]:g} on." if lead == tpps('3x96')[-len(lead):] else CHANGED,
        f"At 4×128, at {t128[-1]:g}: primer_ez − gpt {pm('primer_ez', 'gpt', '4x128', 10.1, 3)}, llama_primer − llama "
        f"{pm('llama_primer', 'llama', '4x128', 10.1, 3)}; from 3×96's 10.3, `{at10('primer_ez', 'gpt')}` and "
        f"`{at10('llama_primer', 'llama')}` (§1c)",
        f"From {tpps('3x96')[0]:g} to {top:g} primer_ez's lead over gpt goes from "
        f"{num(-lo['primer_ez'][0]['gap'], 2)} to {num(-gap('primer_ez', 'gpt', '3x96', top)[0], 2)}, llama_primer's "
        f"from {num(-gap('llama_primer', 'gpt', '3x96', 1.3)[0], 2)} to {num(-gap('llama_primer', 'gpt', '3x96', top)[0], 2)}, "
        f"llama's from {num(-gap('llama', 'gpt', '3x96', 1.3)[0], 2)} to {num(-gap('llama', 'gpt', '3x96', top)[0], 3)}",
        f"The first study's two seeds on their own val sets gave {pm('primer_ez', 'gpt', '3x96', 20.6, paths=R)} "
        f"and {pm('llama_primer', 'llama', '3x96', 20.6, paths=R)}",
        f"(3×96: lr grid {', '.join(sw[2])} at seed 1, best {sw[0]} at {top:g}, inside the grid; {sw[1]} seeds "
        f"at each budget's best): swiglu − gpt is not resolved at any budget at either shape "
        f"({pm('swiglu', 'gpt', '3x96', top, 3)} at {top:g}; below it the intervals span 0 too, "
        + ', '.join(f"± {num(gap('swiglu', 'gpt', '3x96', t)[1], 3)}" for t in tpps('3x96')[:-1])
        + f"; at 4×128 {pm('swiglu', 'gpt', '4x128', 10.1, 3)} at {t128[-1]:g})"
        if all(spans('swiglu', 'gpt', s_, t) for s_ in ('3x96', '4x128') for t in tpps(s_)) else CHANGED,
        f"behind llama by {num(gap('swiglu', 'llama', '3x96', top)[0], 3)} ± {num(gap('swiglu', 'llama', '3x96', top)[1], 3)} "
        f"at {top:g} (first study: {pm('swiglu', 'llama', '3x96', 20.6, paths=R)})",
        "At 4×128 llama − gpt is " + ', '.join(f"{pm('llama', 'gpt', '4x128', t)} at {t:g}" for t in t128[:-1])
        + f" and {pm('llama', 'gpt', '4x128', t128[-1], 3)} at {t128[-1]:g} tokens per parameter"
        + (", an interval that spans 0" if spans('llama', 'gpt', '4x128', t128[-1]) else ''),
        f"llama leads gpt at every budget; at {top:g} tokens per parameter by "
        f"**{num(-gap('llama', 'gpt', '3x96', top)[0], 3)} ± {num(gap('llama', 'gpt', '3x96', top)[1], 3)} "
        f"({gap('llama', 'gpt', '3x96', top)[2]} seeds)**, a resolved gap a ninth of the one at 1.3 "
        f"({pm('llama', 'gpt', '3x96', 1.3, sign=False).replace('−', '')})"
        if 8.5 < gap('llama', 'gpt', '3x96', 1.3)[0] / gap('llama', 'gpt', '3x96', top)[0] < 9.5 else CHANGED,
        f"The first study's two seeds on their own val sets gave the same "
        f"{num(-gap('llama', 'gpt', '3x96', 20.6, paths=R)[0], 2)}, with an interval "
        f"(± {num(gap('llama', 'gpt', '3x96', 20.6, paths=R)[1], 2)}) that held 0",
        f"(lr grid {', '.join(gm[2])} at seed 1; {gm[0]} best at {top:g} for both, inside the grid; seeds 1-3 there",
        f"at {top:g} gMLP is behind llama by {pm('gmlp', 'llama', '3x96', top, 4)} and behind gpt by "
        f"{pm('gmlp', 'gpt', '3x96', top, 4)}, having led gpt by {pm('gmlp', 'gpt', '3x96', 5.2, sign=False).replace('−', '')} "
        f"at 5.2 and {pm('gmlp', 'gpt', '3x96', 10.3, sign=False).replace('−', '')} at 10.3",
        f"gpt_rope's gaps at {top:g} span 0 ({pm('gpt_rope', 'gpt', '3x96', top, 4)} to gpt)",
        f"At 4×128 at {t128[-1]:g}: gMLP − gpt {pm('gmlp', 'gpt', '4x128', 10.1, 3)}, gMLP − llama "
        f"{pm('gmlp', 'llama', '4x128', 10.1, 3)}, gpt_rope − gpt {pm('gpt_rope', 'gpt', '4x128', 10.1, 3)}",
        f"gpt ends {ends['gpt'][0]['val'] - ends['gpt'][1]['val']:.3f} worse under cosine than under WSD at its own best "
        f"lr ({ends['gpt'][0]['val']:.4f} against {ends['gpt'][1]['val']:.4f}), llama "
        f"{ends['llama'][0]['val'] - ends['llama'][1]['val']:.3f} worse ({ends['llama'][0]['val']:.4f} against "
        f"{ends['llama'][1]['val']:.4f}); llama − gpt is {num(wsd[0], 3)} ± {num(wsd[1], 3)} under WSD and "
        f"{num(cos[0], 3)} ± {num(cos[1], 3)} under cosine",
        f"seed it grows by {num(-sched[0], 3)} ± {num(sched[1], 3)} under cosine",
        f"the means' doubling ({cos[0] / wsd[0]:.1f}×) is not: one seed's ratio is {ratios[-1]:.1f} "
        f"({ratios[0]:.1f} and {ratios[1]:.1f} the others), and the view marks it "
        f"`{mark('llama', 'gpt', ('3x96', top, 'wsd'), ('3x96', top, 'cosine'), schedule=True)}`",
        "under cosine; gpt's, primer_ez's, llama_primer's and swiglu's {}, gpt_rope's and gMLP's {}, each inside "
        "its grid".format(*sorted({lr(row(c, '3x96', top)['lr']) for c in ('gpt', 'primer_ez', 'llama_primer', 'swiglu')}),
                          *sorted({lr(row(c, '3x96', top)['lr']) for c in ('gpt_rope', 'gmlp')}))
        if all(not row(c, '3x96', top)['edge'] for c in ('gpt', 'primer_ez', 'llama_primer', 'swiglu', 'gpt_rope', 'gmlp'))
        else CHANGED,
        f"llama's best at {top:g} is 2e-3 under WSD (4e-3 {s1[4e-3] - s1[2e-3]:.3f} behind it on seed 1, 1e-3 "
        f"{s1[1e-3] - s1[2e-3]:.3f} behind) and {lr(row('llama', '3x96', top, 'cosine')['lr'])} under cosine"
        if min(lg, key=lambda x: lg[x][0]) == 2e-3 else CHANGED,
        f"At 4×128 every config's best lr at {t128[-1]:g} (seed 1's pick) is half its best at 10.3 at 3×96: "
        + ', '.join(f"{c} {lr(row(c, '4x128', t128[-1])['lr'])}" for c in seven) if halved else CHANGED,
        "No lr move from 3×96 to 5×288 is resolved (at 4×128 every config's best at seed 1 is half its 3×96 one: "
        "§1a)" if halved else CHANGED,
    ]


def results_1b(R='results/regime_stdlib.jsonl'):
    """RESULTS.md §1b's phrases: the first study, each seed on its own val batches."""
    rs = records(R)
    budgets = sorted({r['budget_value'] for r in rs if r['size'] == '3x96'})
    said = [('primer_ez', 'gpt'), ('llama_primer', 'gpt'), ('llama_primer', 'llama'), ('swiglu', 'llama'),
            ('reglu', 'llama'), ('gmlp', 'llama')]
    told = {(c, ref) for c in {r['config'] for r in rs} for ref in ('gpt', 'llama') if c != ref
            and not stats.holds_zero(*gap(c, ref, '3x96', 20.6, paths=R)[:2])}
    told -= {('gpt', 'llama'), ('llama', 'gpt')} if stats.holds_zero(*gap('llama', 'gpt', '3x96', 20.6, paths=R)[:2]) \
        else set()
    told = {(c, ref) for c, ref in told if (ref, c) not in said}  # a gap and its mirror are one
    P = functools.partial(pm, size='3x96', tpp=20.6, paths=R)
    return [
        f"({int(rs[0]['val_set'].split()[0])} batches drawn from the run's seed",
        f"bracketing each best at {budgets[0]} and {budgets[-1]:,} iterations, **two seeds** at each best lr at "
        f"{budgets[-1]:,}",
        f"{len(rs)} records, 2026-11-25",
        f"at 20.6 tokens per parameter primer_ez ahead of gpt ({P('primer_ez', 'gpt')}), llama_primer ahead of gpt "
        f"({P('llama_primer', 'gpt')}) and of llama ({P('llama_primer', 'llama')}), and swiglu, reglu and gMLP behind "
        f"llama ({P('swiglu', 'llama')}, {P('reglu', 'llama')}, {P('gmlp', 'llama')}); at 1.3, llama ahead of gpt "
        f"({pm('llama', 'gpt', '3x96', 1.3, paths=R)}). Every other gap at 20.6 spans 0"
        if told == set(said) else CHANGED,
        f"at the 4×128 pilot its gap to llama goes from {one('llama_primer', 'llama', '4x128', 5.0, paths=R)} at "
        f"5.0 to {one('llama_primer', 'llama', '4x128', 10.1, paths=R)} at 10.1 tokens per parameter (one seed)",
    ]


def eager_vs_compiled():
    """The 5x288 grids run eager (one H200) and compiled (one H100): {(config, lr, seed, budget):
    compiled - eager val loss}, and each side's best lr and loss per (config, budget)."""
    key = lambda r: (r['config'], r['lr'], r['seed'], r['budget_value'])  # noqa: E731
    eager = {key(r): r['val_loss'] for r in records('results/h200/shapes_site_eager.jsonl')}
    comp = {key(r): r['val_loss'] for r in records('results/h200/shapes_site.jsonl')
            if r['schedule'] == 'wsd' and key(r) in eager}
    best = {}
    for side, vals in (('eager', eager), ('compiled', comp)):
        for (c, x, _, b), v in vals.items():
            if (c, x, 1, b) in comp and ((side, c, b) not in best or v < best[side, c, b][1]):
                best[side, c, b] = (x, v)
    return {k: comp[k] - eager[k] for k in comp}, best


def results_1c():
    """RESULTS.md §1c's phrases: the 5x288 study's setup, what ran, compiled against eager."""
    rs = records('results/h200/shapes_site.jsonl')
    meta = json.loads(source('results/h200/shapes_site_meta.json'))
    flag = flags(rs[0]['command'])
    tol = report.MATCH_TOLERANCE
    params = {r['config']: r['params'] for r in rs}
    assert all(abs(p / params['gpt'] - 1) <= tol for p in params.values())
    budgets = sorted({r['budget_value'] for r in rs})
    nb = int(rs[0]['val_set'].split()[0])
    noise = max(r[k] for r in rows() if r['size'] == '5x288' for k in ('eval_se', 'eval_se_llama')
                if r.get(k) is not None)
    wsd = [r for r in rs if r['schedule'] == 'wsd']
    lrs = {c: sorted({r['lr'] for r in wsd if r['config'] == c and sum(
        x['lr'] == r['lr'] for x in wsd if x['config'] == c) == len(budgets)}) for c in ('gpt', 'llama', 'gmlp')}
    ext = sorted((r['config'], r['lr'], r['budget_value']) for r in wsd if r['lr'] not in lrs[r['config']])
    d, best = eager_vs_compiled()
    eager = 'results/h200/shapes_site_eager.jsonl'
    ab = sorted(abs(v) for v in d.values())
    med = (ab[len(ab) // 2] + ab[(len(ab) - 1) // 2]) / 2
    worst = sorted(d.items(), key=lambda kv: -abs(kv[1]))[:2]
    picks = {(c, b) for (_, c, b) in best}
    differ = [(c, b) for c, b in sorted(picks) if best['eager', c, b][0] != best['compiled', c, b][0]]
    agree = [abs(best['eager', c, b][1] - best['compiled', c, b][1]) for c, b in picks if (c, b) not in differ]
    (c0, b0), = differ
    return [
        f"(heads of {288 // int(flag['--n_head'])}; gpt {params['gpt']:,} parameters, llama and gMLP matched within {tol:.0%})",
        f"on **{meta['source']['bytes'] / 1e6:.0f} MB of Python**",
        f"({meta['source']['documents']:,} documents, hashed split {100 - 100 * meta['split']['val_fraction']:.0f}/"
        f"{100 * meta['split']['val_fraction']:.0f}",
        f"context {rs[0]['block_size']}, batch {rs[0]['batch_size']} × {rs[0]['block_size']}, bf16 autocast",
        f"branches at {', '.join(f'{b:,}' for b in budgets[:-1])} and {budgets[-1]:,} iterations "
        f"(**{tpps('5x288')[0]:g} to {tpps('5x288')[-1]:g} tokens per parameter**), warmup {flag['--warmup_iters']}",
        f"{nb} batches of {rs[0]['batch_size']} × {rs[0]['block_size']} bytes = "
        f"{nb * rs[0]['batch_size'] * rs[0]['block_size'] / 1e3:.0f}k bytes; a gap's val-sample noise at most {noise:.4f}",
        "a WSD lr grid at seed 1 (gpt {}; llama {}; gMLP {}".format(
            *(', '.join(lr(x) for x in lrs[c]) for c in ('gpt', 'llama', 'gmlp'))),
        f"then gpt and llama under cosine at {budgets[-1]:,} iterations",
        "NVIDIA H100 80GB HBM3, torch {} (each record's `machine`)".format(*{
            re.search(r'torch (\S+)', r['machine']).group(1) for r in wsd if r['machine'].startswith('NVIDIA H100 80GB HBM3')}),
        f"**What ran**: the three grids to {tpps('5x288')[-1]:g} tokens per parameter",
        "gpt's best at {:g} tokens per parameter at 5×288 is {}, the grid's edge".format(
            tpps('5x288')[3], lr(row('gpt', '5x288', 10)['lr'])) if row('gpt', '5x288', 10)['edge'] else CHANGED,
        "and at {:g} it is {}".format(tpps('5x288')[-1], lr(row('gpt', '5x288', 20)['lr'])),
        "as at 3×96; llama's {} at 5×288 and {} at 3×96 at 10".format(
            lr(row('llama', '5x288', 10)['lr']), lr(row('llama', '3x96', 10.3)['lr'])),
        "{} at both at 20; gMLP's {} at 5×288 (bracketed) against {} at 3×96 (the best of {} and {})".format(
            lr(row('llama', '5x288', 20)['lr']), lr(row('gmlp', '5x288', 20)['lr']), lr(row('gmlp', '3x96', 20.6)['lr']),
            ', '.join(grid('gmlp', '3x96', 20.6)[2][:-1]), grid('gmlp', '3x96', 20.6)[2][-1])
        if row('llama', '5x288', 20)['lr'] == row('llama', '3x96', 20.6)['lr'] and not row('gmlp', '5x288', 20)['edge']
        else CHANGED,
        "gpt under cosine (eager) against WSD (compiled) at {:g} tokens per parameter, seed 1, each at its best "
        "lr: {:.4f} against {:.4f}, {:.4f} worse under cosine (at 3×96: {:.3f} worse, {} seeds)".format(
            tpps('5x288')[-1], row('gpt', '5x288', 20, 'cosine')['val'], row('gpt', '5x288', 20)['val'],
            row('gpt', '5x288', 20, 'cosine')['val'] - row('gpt', '5x288', 20)['val'],
            row('gpt', '3x96', 20.6, 'cosine')['val'] - row('gpt', '3x96', 20.6)['val'],
            len(row('gpt', '3x96', 20.6, 'cosine')['runs'])),
        f"**At {tpps('5x288')[-1]:g} tokens per parameter** ({budgets[-1]:,} iterations;",
        f"**Under cosine at {budgets[-1]:,} iterations**",
        f"ran the same three grids to {max(report.tokens_per_param(rows(eager)).values()):.0f} tokens per parameter "
        f"without `--compile`; those {len(records(eager))} records",
        "were stopped at the deadline with {} run done ({})".format(
            ['no', 'one', 'two'][len(ext)], ', '.join(f"{c} {lr(x)} at {b}" for c, x, b in ext)),
        f"over the {len(d)} pairs — two cards as well as compile, so each Δ is both's: median |Δ| {med:.3f}, "
        f"{sum(a <= 0.01 for a in ab)} within 0.01, mean {num(sum(d.values()) / len(d), 3)}; the largest at "
        f"{worst[0][0][0]} {lr(worst[0][0][1])}: {num(worst[0][1], 3)} at {worst[0][0][3]} iterations, "
        f"{num(worst[1][1], 3, True)} at {worst[1][0][3]}" if worst[0][0][:2] == worst[1][0][:2] else CHANGED,
        f"Each grid picks the same best lr either way, but at {c0}'s {b0} (eager {lr(best['eager', c0, b0][0])} "
        f"{best['eager', c0, b0][1]:.4f}; compiled {lr(best['compiled', c0, b0][0])} {best['compiled', c0, b0][1]:.4f}, "
        f"its {lr(best['eager', c0, b0][0])} {d[c0, best['eager', c0, b0][0], 1, b0] + best['eager', c0, b0][1]:.4f}), "
        f"and the best losses agree within {max(agree):.3f} but there "
        f"({abs(best['eager', c0, b0][1] - best['compiled', c0, b0][1]):.3f})",
    ]


def results_2_3():
    """RESULTS.md §2's and §3's phrases: the earlier studies' budgets and recipes."""
    st, sh = records('results/sweep_stdlib.jsonl'), records('results/sweep_shakespeare.jsonl')
    its = {s: {r['budget_value'] for r in st if r['size'] == s and r['budget'] == 'max_iters'} for s in ('3x96', '4x96')}
    flops = {r['budget_value'] for r in st if r['size'] == '4x128' and r['budget'] == 'max_flops'}
    shake = {(r['block_size'], r['batch_size'], r['budget_value']) for r in sh if r['size'] == '4x128'
             and r['budget'] == 'max_iters'}
    flag = flags(sh[0]['command'])
    (block, batch, iters), = shake
    return [f"**3×96 ({its['3x96'].pop()} iterations) and 4×96 ({its['4x96'].pop()})**, two seeds at the best lr",
            f"(gpt's {flops.pop():.3g} at 4×128;".replace('e+', 'e'),
            f"(4×128, block {block}, batch {batch}, {iters:,} iterations, cosine to lr/"
            f"{float(flag['--learning_rate']) / float(flag['--min_lr']):.0f})",
            f"**At equal training FLOPs** (gpt's {iters:,} iterations; one seed)"]


def json_objects(path):
    """Every JSON object in a committed file (one per line, or pretty-printed one after another)."""
    text, dec, out, i = source(path), json.JSONDecoder(), [], 0
    while text[i:].strip():
        i = len(text) - len(text[i:].lstrip())
        obj, n = dec.raw_decode(text[i:])
        out.append(obj)
        i += n
    return out


def results_4():
    """RESULTS.md §4's table rows and figures, each from its raw file under results/h100, h200."""
    out = []
    for r in json_objects('results/h200/side_by_side124.jsonl'):
        ours, ref = r['rows']
        out.append(f"| {'`--compile`' if 'compile=True' in r['setup'] else 'eager'} | {ours['tokens_per_s']:,.0f} "
                   f"({ours['mfu']:.1%}) | {ref['tokens_per_s']:,.0f} ({ref['mfu']:.1%}) | {r['ours_over_reference']:.3f} |")
    sbs = {(r['impl'], r['batch_size']): r for r in json_objects('results/h100/side_by_side124.jsonl')}
    for b in (16, 32):
        n, o = sbs['nanogpt', b], sbs['ours', b]
        out.append(f"| {b} | {n['tokens_per_s']:,.0f} ({n['mfu']:.1%}) | {o['tokens_per_s']:,.0f} ({o['mfu']:.1%}) | "
                   f"{o['tokens_per_s'] / n['tokens_per_s']:.2f} | {max(n['peak_mem_mb'], o['peak_mem_mb']) / 1024:.1f} |")
    out.append(f"batch 32 gave +{sbs['ours', 32]['tokens_per_s'] / sbs['ours', 16]['tokens_per_s'] - 1:.0%} over 16")
    speed = {x['config']: x for r in json_objects('results/h100/speed124_compile.jsonl') for x in r['rows']}
    for c, x in speed.items():
        out.append(f"| {c} | {x['params'] / 1e6:.1f}M | {x['ms_per_iter']:.1f} ({x['ms_range']}) | "
                   f"{x['tokens_per_s']:,.0f} | {x['flops_per_token'] / 1e6:.0f}M | {x['mfu']:.1%} | "
                   f"{x['peak_mem_mb'] / 1024:.1f} |")
    cost = {c: speed[c]['ms_per_iter'] / speed['gpt']['ms_per_iter'] - 1 for c in speed}
    out.append("the H100's dense bf16 peak ({} TFLOP/s)".format(
        re.search(r"\(r'H100', (\d+),", source('guards.py')).group(1)))
    out.append(f"llama +{cost['llama']:.0%}, gMLP +{cost['gmlp']:.0%}, Primer EZ +{cost['primer_ez']:.0%}, aMLP "
               f"+{cost['amlp']:.0%} a step" if max(abs(cost[c]) for c in ('swiglu', 'geglu', 'reglu')) < 0.02 else CHANGED)
    b32 = [x for r in json_objects('results/h100/speed124_b32.jsonl') for x in r['rows']]
    for x in b32:
        out.append(f"| {x['config']} | {x['ms_per_iter']:.1f} | {x['tokens_per_s']:,.0f} | {x['mfu']:.1%} | "
                   f"{x['peak_mem_mb'] / 1024:.1f} | {x['tokens_per_s'] / b32[0]['tokens_per_s']:.2f} |")
    comp = {x['config']: x for r in json_objects('results/h100/decode124_b1_500_compiled.jsonl') for x in r['rows']}
    for r in json_objects('results/h100/decode124_b1_500.jsonl'):
        for x in r['rows']:
            c = comp.get(x['config'], {}).get('decode_tok_s_compiled')
            out.append(f"| {x['config']} | {x['decode_tok_s_cached']:.0f} | {x['decode_tok_s_uncached']:.0f} | "
                       f"{x['decode_tok_s_captured']:.0f} | {f'{c:.0f}' if c else '–'} |")
    step = [json.loads(line) for line in source('results/h100/decode_overhead_2026-11-26.txt').splitlines()
            if line.startswith('{"weights"')]
    out += [f"| float32 weights, bf16 autocast (what `sample.py` does) | {step[0]['tok_s_stream']:.0f} tok/s | "
            f"{step[2]['tok_s_stream']:.0f} tok/s |",
            f"| weights cast to bf16 once | {step[1]['tok_s_stream']:.0f} | {step[3]['tok_s_stream']:,.0f} |",
            f"| the model compiled (`sample.py --compile`) | {comp['gpt']['decode_tok_s_compiled']:.0f} (the table "
            f"above) | **{step[4]['tok_s_stream']:,.0f}** |"]
    lev = {}
    for line in source('results/h100/levers_2026-11-26.jsonl').splitlines():
        r = json.loads(line)
        lev.setdefault((r['lever'], r['n']), []).append(1000 / r['ms_per_iter'])
    for n in sorted({n for _, n in lev}):
        if ('eager', n) in lev and n != 2:
            c = lev.get(('compiled', n))
            out.append(f"| {n} | {sum(lev['eager', n]):.0f} | {f'{sum(c):.0f}' if c else '–'} |")
    rk = rows('results/h100/ranking_site.jsonl')
    out.append(f"seed 1, bf16, {len(records('results/h100/ranking_site.jsonl'))} runs before the device time ended")
    budgets = sorted({r['budget_value'] for r in rk})
    for c in sorted({r['config'] for r in rk}, key=stats.arch_key):
        cells = {r['budget_value']: r for r in rk if r['config'] == c}
        out.append(f"| {c} | " + ' | '.join(
            '–' if b not in cells else f"{cells[b]['val']:.4f}" if c == 'gpt' else num(cells[b]['gap'], 4, True)
            for b in budgets) + ' |')
    sc = records('results/h100/scaling_shakespeare.jsonl')
    gpt = {r['size']: r for r in sc if r['config'] == 'gpt'}
    out.append("(4×128, 6×384, 8×512, heads of 32; {} parameters, matched), Tiny Shakespeare char-level, block {}, "
               "batch {}, {:.2f}M tokens".format(', '.join(f"{gpt[s]['params'] / 1e6:.1f}M" for s in ('4x128', '6x384', '8x512')),
                                                 gpt['4x128']['block_size'], gpt['4x128']['batch_size'],
                                                 gpt['4x128']['budget_value'] / 1e6))
    out.append(f"one seed; {len(sc)} runs")
    val = {(r['config'], r['size']): r['val'] for r in rows('results/h100/scaling_shakespeare.jsonl')}
    val = {(r['config'], r['size']): r['val'] for r in rows('results/h100/scaling_shakespeare.jsonl')}
    sizes = ('4x128', '6x384', '8x512')
    order = sorted(('gpt', 'llama', 'primer_ez', 'gmlp', 'amlp'), key=lambda c: val[c, '8x512'])
    out.append(f"gMLP and aMLP are the lowest at {gpt['6x384']['params'] / 1e6:.1f}M and {gpt['8x512']['params'] / 1e6:.1f}M, "
               "llama next" if set(order[:2]) == {'gmlp', 'amlp'} and order[2] == 'llama' else CHANGED)
    out.append(f"every curve flattens from {gpt['6x384']['params'] / 1e6:.1f}M to {gpt['8x512']['params'] / 1e6:.1f}M parameters"
               if all(abs(val[c, sizes[2]] - val[c, sizes[1]]) < abs(val[c, sizes[1]] - val[c, sizes[0]]) / 3
                      for c in order) else CHANGED)
    f = flags(sc[0]['command'])
    out.append(f"cosine to lr/{float(f['--learning_rate']) / float(f['--min_lr']):.0f}, no dropout, bf16 eager")
    out.append("| config | " + ' | '.join(report.per_param(t) for t in sorted(report.tokens_per_param(rk).values()))
               + " tokens/param |")
    h200 = json_objects('results/h200/side_by_side124.jsonl')[0]['command']
    out.append("block {}, vocabulary {}, bf16".format(re.search(r'--block_size=(\d+)', h200).group(1),
                                                   re.search(r'--vocab_size=(\d+)', h200).group(1)))
    out.append(f"At batch {round(b32[0]['tokens_per_s'] * b32[0]['ms_per_iter'] / 1000 / 1024)} (")
    d0 = json_objects('results/h100/decode124_b1_500.jsonl')[0]['rows'][0]
    out.append(f"**Decoding at batch {round(d0['tokens_per_s'] * d0['ms_per_iter'] / 1000 / 1024)}** (the H100")
    out.append("| val loss (best lr) | " + ' | '.join(f"{s.replace('x', '×')} ({gpt[s]['params'] / 1e6:.1f}M)"
                                                    for s in ('4x128', '6x384', '8x512')) + ' |')
    low = sorted(val[c, '4x128'] for c in ('gmlp', 'amlp'))
    out.append(f"at 0.8M llama is lowest, {low[0] - val['llama', '4x128']:.3f}–{low[1] - val['llama', '4x128']:.3f} "
               "below them" if val['llama', '4x128'] < low[0] else CHANGED)
    return out


def results_5():
    """RESULTS.md §5's phrases: the probe's design from probe.py, its tables and readings from
    results/probe.jsonl and results/probe_rope.jsonl."""
    import probe
    cfg = probe.ProbeConfig()
    recs, rope = records('results/probe.jsonl', 'probe'), records('results/probe_rope.jsonl', 'probe')
    curve = {(r['config'], r['lr']): r['curve'] for r in recs}
    by = {(r['config'], r['lr']): r for r in recs}
    budget = probe.law_steps(cfg, 64)
    assert {r['steps'] for r in recs} == {budget}
    out = probe.probe_table(recs).splitlines()[2:]
    half = cfg.vocab_size // 2
    out += [f"drawn from {half - 1} tokens, values from {cfg.vocab_size - half} others (vocabulary {cfg.vocab_size})",
            f"the {half - 1} × {cfg.vocab_size - half} possible pairs are far more than a {cfg.n_layer}-layer, "
            f"width-{cfg.widths[0]} model could store",
            f"the held-out set of {cfg.eval_seqs} sequences is fixed",
            f"({cfg.n_layer} layers, width d, heads of {cfg.head_size}",
            f"**Zoology's training recipe**: batch {cfg.batch_size} sequences, AdamW with weight decay {cfg.weight_decay:g}",
            f"linear warmup over {cfg.warmup_frac:.0%} of the steps then cosine to lr/10",
            "the learning rates {} tried in turn until one solves".format(', '.join(cfg.learning_rate)),
            "Zoology reports the best of `logspace(-4, -2, 4)`, which `--full` uses), early stop at "
            f"{cfg.stop_acc:g} held-out accuracy",
            f"at batch {cfg.batch_size}, T = 64 is **{budget:,} steps** ({budget * cfg.batch_size / 1e6:.1f}M sequences)"]
    for r in sorted(recs, key=lambda r: (r['solved_at'] is None, -r['acc'] if r['solved_at'] else 0)):
        last = r['curve'][-1]
        dist = ' / '.join(f"{a:.2f}" for *_, a, _ in r['acc_by_distance'])
        out.append(f"| {r['config']} | {r['lr']:g} | {r['params'] / 1e3:.0f}k | {r['acc']:.3f} | "
                   f"{r['steps_run']:,} ({'solved' if r['solved_at'] else 'budget'}) | {last[2]:.3f} | {dist} | "
                   f"{r['seconds'] / 60:.1f} min | {r['cpu_seconds'] / 60:.1f} min | "
                   f"{r['machine'].split(', ')[-1].split()[0]} |")  # its '2 thread(s)'
    g, ez = curve['gpt', 0.003], by['primer_ez', 0.003]
    at = {step: acc for step, acc, _ in g}
    first = next(step for step, acc, _ in g if acc > 0.5)
    before = first - by['gpt', 0.003]['eval_interval']  # the evaluation before it
    out.append(f"solves T = 64, N = 4 at width 64: {at[before]:.2f} (= 1/N) at {before} steps, "
               f"{at[first]:.2f} at {first}, {at[by['gpt', 0.003]['solved_at']]:.2f} at "
               f"{by['gpt', 0.003]['solved_at']:,} steps ({by['gpt', 0.003]['solved_at'] * cfg.batch_size / 1e3:.0f}k "
               f"sequences), {by['gpt', 0.003]['solved_at'] / budget:.0%} of the emergence law's budget")
    out.append("(" + ', '.join(f"{a:.2f}" for *_, a, _ in by['gpt', 0.003]['acc_by_distance'])
               + " by quarter of the distance range)")
    out.append(f"Primer EZ's mixer solves the cell in {ez['solved_at']} steps, about a third of GPT-2 attention's "
               f"{by['gpt', 0.003]['solved_at']:,}" if 0.28 < ez['solved_at'] / by['gpt', 0.003]['solved_at'] < 0.4
               else CHANGED)
    gm, am = by['gmlp', 0.003], by['amlp', 0.003]
    loss = {c: curve[c, 0.003][-1][2] for c in ('gmlp', 'amlp', 'gpt_rope', 'llama')}
    out.append(f"**gMLP and aMLP stay at 1/N**: {gm['acc']:.3f} and {am['acc']:.3f} after the whole budget "
               f"({budget:,} steps, {budget * cfg.batch_size / 1e6:.1f}M sequences: "
               f"{budget / by['gpt', 0.003]['solved_at']:.1f}× what GPT-2 attention needed), held-out loss "
               f"{loss['gmlp']:.2f} and {loss['amlp']:.2f}, about ln 4 = {math.log(4):.2f}")
    out.append(f"with {gm['params'] / 1e3:.0f}k and {am['params'] / 1e3:.0f}k parameters against attention's "
               f"{by['gpt', 0.003]['params'] / 1e3:.0f}k")
    out.append(f"end at {min(by['gpt_rope', 0.003]['acc'], by['llama', 0.003]['acc']):.2f} after the whole budget at lr "
               f"3e-3, their loss ({loss['gpt_rope']:.2f}, {loss['llama']:.2f}) above even ln 4 = {math.log(4):.2f}. "
               f"At lr 1e-2 and 1e-3, gpt_rope ends at {by['gpt_rope', 0.01]['acc']:.3f} and "
               f"{by['gpt_rope', 0.001]['acc']:.3f}")
    out.append("Zoology's grid, `--full`, is {}".format(', '.join(probe.FULL['learning_rate'][:-1]) + ' and '
                                                        + probe.FULL['learning_rate'][-1]))
    unsolved = [r for r in recs if not r['solved_at']]
    out.append(f"an unsolved cell costs {min(r['cpu_seconds'] for r in unsolved) / 60:.0f}–"
               f"{max(r['cpu_seconds'] for r in unsolved) / 60:.0f} CPU-minutes per learning rate "
               f"({min(r['seconds'] for r in unsolved) / 60:.0f}–{max(r['seconds'] for r in unsolved) / 60:.0f} "
               "minutes of wall time beside other runs)")
    out.append("the other cells of Zoology's grid (T = {}, N = {} and {}, d = {};".format(
        probe.FULL['seq_lens'][1], *probe.FULL['pairs'][1:], probe.FULL['widths'][1]))
    b64 = probe.law_steps(probe.ProbeConfig(batch_size=64), 64)
    out.append(f"Batch 64 (the law's budget is then {b64:,} steps)")
    out.append(f"({sum(r['cpu_seconds'] for r in rope) / 60:.0f} CPU-minutes in all)")
    label = {'gpt': '(gpt: learned positions, no biases)', 'gpt_rope': 'nothing (rotary, no biases)',
             'gpt_rope --bias=True': '`--bias=True`', 'gpt_rope --attn=mdha': '`--attn=mdha` (causal conv, kernel 3)',
             'gpt_rope --pos_emb=none': '`--pos_emb=none` (NoPE)'}
    for r in rope:
        c = r['curve']
        above = next((step for step, acc, _ in c if acc > 0.5), None)
        four = r['steps'] > b64
        name = label[r['config']].split(' (')[0] if four and r['config'] != 'gpt' else label[r['config']]
        solved = f"{r['solved_at']:,}" if r['solved_at'] else '–'
        out.append(f"| {name} | {r['steps']:,}{' (4×)' if four else ''} | {r['acc']:.3f} | "
                   f"{solved} | {f'{above:,}' if above else '–'} | "
                   f"{r['cpu_seconds'] / 60:.1f} |")
    rr = {(r['config'], r['steps'] > b64): r for r in rope}
    nope4, rope4 = rr['gpt_rope --pos_emb=none', True], rr['gpt_rope', True]
    c4 = nope4['curve']
    rise = next(step for step, acc, _ in c4 if acc > 0.5)
    warm = cfg.warmup_frac * nope4['steps']
    out += [f"at its budget and at 4× it ({rope4['steps'] / 1e3:.0f}k steps, {rope4['steps'] * 64 / 1e6:.0f}M sequences, "
            f"loss {rope4['curve'][-1][2]:.2f})",
            f"it solves the cell in {rr['gpt_rope --bias=True', False]['solved_at']:,} steps; given local context (a "
            f"causal convolution), in {rr['gpt_rope --attn=mdha', False]['solved_at']:,}, faster than learned "
            f"positions ({rr['gpt', False]['solved_at']:,})",
            f"(at 4×: above 0.5 from step {rise:,}, 0.99 at {nope4['solved_at']:,})",
            f"bias-free too and ends at chance at the cell's budget ({by['llama', 0.003]['acc']:.3f} at batch "
            f"{cfg.batch_size}, lr 3e-3, above",
            f"(lr {3e-3 * min(1, rise / warm):.1e} at step {rise:,}, when it rose)".replace('e-03', 'e-3')]
    x, y = probe.mqar_batch(np.random.default_rng(0), batch=8, T=16, n_pairs=2, vocab=32)
    fill = {int(v) for v in x[:, 4:][y[:, 4:] < 0]} - set(range(1, 32))
    lrs = {r['lr'] for r in recs if r['config'] != 'gpt_rope'}
    s3 = lr(lrs.pop()) if len(lrs) == 1 else CHANGED
    ratio = {round(r['steps'] / b64) for r in rope}
    gaps = [row('gpt_rope', '3x96', t)['gap'] for t in tpps('3x96')[:-1]]
    law = re.search(r'10 \*\* ([0-9.]+)', inspect.getsource(probe.law_steps)).group(1)
    torch_v = re.search(r'torch (\S+),', recs[0]['machine']).group(1)
    out += [f"order at random positions among filler tokens ({fill.pop()}):",
            f"(the other targets are {int(y.min())}, `ignore_index`)",
            f"recall appears after about 10^{law} · √(batch × T) training tokens",
            f"(accuracy and loss every {cfg.eval_interval} steps", f"(accuracy read every {cfg.eval_interval} steps)",
            "the default cell (mixer view, d = {}, T = {}, N = {}, batch {}, the law's budget), at lr {} (gpt_rope "
            "also at {} and {}), seed {}".format(*{(r['width'], r['T'], r['N'], r['batch']) for r in recs}.pop(), s3,
                                                  *map(lr, sorted((r['lr'] for r in recs if r['config'] == 'gpt_rope'
                                                                   and lr(r['lr']) != s3), reverse=True)),
                                                  *{r['seed'] for r in recs}),
            f"x86-64 CPU VM, torch {torch_v}, float32",
            probe.probe_table(recs).splitlines()[0],
            f"One seed and lr {s3} for every claim of this list" if len({r['seed'] for r in recs}) == 1 else CHANGED,
            f"llama was run at {', '.join(lr(r['lr']) for r in recs if r['config'] == 'llama')} only",
            f"ahead of gpt below {tpps('3x96')[-1]:g} tokens per parameter on seed 1" if all(x < 0 for x in gaps) else CHANGED,
            f"lr {s3} for every config but gpt_rope",
            "The default command tries {1} and then {2} for a cell {0} leaves unsolved".format(*cfg.learning_rate),
            f"cell's budget and at {max(ratio)}× it", f"lr 3e-3, seed {rope[0]['seed']}, one thread each",
            f"| steps to {cfg.stop_acc:g} | first step above 0.5 |"]
    return out


def results_6_7():
    """RESULTS.md §6's and §7's phrases: the loop and bench logs' settings, the example's record."""
    sh = source('results/loop_vs_nanogpt.sh')
    flag = {k: re.search(rf'--{k}=(\S+)', sh).group(1) for k in ('block_size', 'batch_size', 'n_layer', 'n_embd')}
    log = source('results/loop_vs_nanogpt_2026-11-29.txt')
    rounds = re.search(r'## (\d+) iterations, (\d+) alternating rounds', log)
    start = re.search(r"int\(it\.rstrip\(':'\)\) >= (\d+)", sh).group(1)
    bench = source('results/bench_4x128_2026-11-28.txt')
    shape = re.search(r'\((\d+)x(\d+), block (\d+), batch (\d+)\)', bench)
    tokens = re.search(r'--decode_tokens=(\d+)', bench).group(1)
    unstable = float(re.search(r'UNSTABLE = ([\d.]+)', source('bench.py')).group(1))
    email = records('results/example_email.jsonl')
    torch_log = re.search(r'torch (\S+),', log).group(1)
    torch_email = re.search(r'torch (\S+)', email[0]['machine']).group(1)
    return [f"gpt at {flag['n_layer']}×{flag['n_embd']}, block {flag['block_size']}, batch {flag['batch_size']}, "
            f"float32, no compile, a log line every iteration, medians from iteration {start}, rounds of "
            f"{rounds.group(1)} iterations alternating the two loops",
            f"torch {torch_log}, idle",
            f"({shape.group(1)}×{shape.group(2)}, block {shape.group(3)}, batch {shape.group(4)}) on both cores, with "
            f"decoding {tokens} tokens from a 1-token prompt",
            f"when its timings spread more than {unstable:.0%}",
            f"(torch {torch_email}, 2026-11-26",
            f"max_iters={email[0]['budget_value']}, adamw, cosine schedule; val: {email[0]['val_set']}"]


# -----------------------------------------------------------------------------
# GUIDE.md: every number in its prose, from the code, the configs, the records and the committed logs

FRACTION = {2: 'half', 3: 'a third', 4: 'a quarter', 5: 'a fifth', 8: 'an eighth', 10: 'a tenth'}
WORDS = {1: 'one', 2: 'two', 3: 'three', 4: 'four', 5: 'five', 6: 'six', 8: 'eight', 10: 'ten'}


def fraction(x):
    """0.2 as the prose writes it, 'a fifth'; a share it has no word for fails the claim."""
    n = round(1 / x)
    return FRACTION[n] if abs(x * n - 1) < 1e-9 and n in FRACTION else CHANGED


def config_file(*names):
    """The keys that configs/NAME.py files set, applied in order (as train.py applies them)."""
    import configurator
    out = {}
    for name in names:
        out.update(configurator.exec_config_file(os.path.join(HERE, 'configs', f'{name}.py')))
    return out


def gpt_config(*names, **kw):
    """The GPTConfig that configs/NAME.py files (and keys `kw`) give."""
    import dataclasses
    from model import GPTConfig
    fields = {f.name for f in dataclasses.fields(GPTConfig)}
    return GPTConfig(**{k: v for k, v in {**config_file(*names), **kw}.items() if k in fields})


def exits():
    """The exit statuses the scripts use: a user's mistake, Ctrl-C, SIGTERM, Ctrl-C at import."""
    import signal
    run_main = source('configurator.py').split('def run_main', 1)[1]
    usage = int(re.search(r'except UsageError as e:\n.*\n\s+sys\.exit\((\d+)\)', run_main).group(1))
    base = int(re.search(r'return (\d+) \+ \(self\.received', source('guards.py')).group(1))
    startup = int(re.search(r'os\._exit\((\d+)\)', source('train.py')).group(1))
    return dict(usage=usage, sigint=base + signal.SIGINT, sigterm=base + signal.SIGTERM, startup=startup)


def pydoc_mb():
    """The quick start's corpus in MB as README and GUIDE give it (Python 3.11's manual)."""
    from prepare import pydoc_corpus
    if sys.version_info[:2] != (3, 11):  # another Python ships another manual: the docs give 3.11's
        return re.search(r'`pydoc_data.topics`, ([\d.]+) MB in Python 3.11', source('README.md')).group(1)
    return f"{sum(d.size for d in pydoc_corpus()[0]) / 1e6:.2f}"


def stdlib_words():
    """'1,758 files and 31.5 MB on CPython 3.11.7, 28× Tiny Shakespeare': the corpus the CPU records
    name (its sha256), counted here where this Python's library is that corpus."""
    import prepare
    recorded = {r['corpus'] for r in records('results/shapes_stdlib.jsonl')}
    assert len(recorded) == 1, recorded
    version, sha = re.search(r'cpython ([\d.]+), sha256 (\w+)', recorded.pop()).groups()
    docs, src = prepare.stdlib_corpus()
    if not src['sha256'].startswith(sha):  # another Python's library: the docs describe the records'
        return re.search(r'[\d,]+ files and [\d.]+ MB on CPython [\d.]+, \d+× Tiny', source('GUIDE.md')).group()
    return (f"{src['files']:,} files and {src['bytes'] / 1e6:.1f} MB on CPython {version}, "
            f"{src['bytes'] / prepare.SHAKESPEARE_BYTES:.0f}× Tiny")


def prepare_log(path='results/prepare_bpe_100mb_2026-11-29.txt'):
    """The committed log of prepare.py on a 100 MB file: its copies of Tiny Shakespeare, tokens,
    peak RSS (bytes), wall and CPU seconds."""
    log = source(path)
    copies = int(re.search(r'Tiny Shakespeare \(([\d,]+) bytes.*\) (\d+) times', log).group(2))
    tokens = sum(int(x.replace(',', '')) for x in re.search(r'wrote ([\d,]+) train \+ ([\d,]+) val tokens',
                                                               log).groups())
    rss = int(re.search(r'Maximum resident set size \(kbytes\): (\d+)', log).group(1)) * 1024
    m, s = re.search(r'Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\d+):([\d.]+)', log).groups()
    cpu = sum(float(re.search(rf'{k} time \(seconds\): ([\d.]+)', log).group(1)) for k in ('User', 'System'))
    return dict(copies=copies, tokens=tokens, rss=rss, wall=60 * int(m) + float(s), cpu=cpu)


def mark_tests():
    """{mark: its tests as the prose writes them, '2b − a and 2b + a'}, read from stats.change_marks."""
    code = inspect.getsource(stats.change_marks)
    keys = [tuple(map(int, k.split(','))) for k in re.findall(r'\((-?\d+, -?\d+)\)', code.split('tests = ')[1]
                                                                .split('\n')[1])]
    name = {k: (f"{k[1]}b" if k[1] != 1 else 'b') + (' − ' if k[0] > 0 else ' + ')
            + (f"{abs(k[0])}a" if abs(k[0]) != 1 else 'a') for k in keys}
    halving, doubling = re.search(r'halving, doubling = (tests\[.*?\] and tests\[.*?\]), (tests\[.*?\] and '
                                  r'tests\[.*?\])', code).groups()
    holds = re.search(r"'holds': signs and (.*?)\}", code).group(1)
    words = lambda expr: ' and '.join(name[tuple(map(int, k.split(', ')))]  # noqa: E731
                                      for k in re.findall(r'tests\[(-?\d+, -?\d+)\]', expr))
    return {'halves': words(halving), 'doubles': words(doubling), 'holds': words(holds)}


def guide_claims():
    """GUIDE.md's phrases whose numbers come from the code, the configs, the records or the logs."""
    import dataclasses
    import configurator
    import dataset
    import fineweb
    import guards
    import model
    import prepare
    import probe
    import sweep
    import train
    import test_model
    out = []
    # §1: where model.py's blocks end
    line = source('model.py').split('\nclass GPT(')[0].count('\n') + 2
    out.append(f"(the blocks end before line {math.ceil(line / 50) * 50})")
    # §2: the shared recipe, and the run it trains against its study's records
    rc = config_file('_recipe')
    out.append(f"a {rc['block_size']}-byte context, {rc['n_layer']} layers, {rc['n_head']} heads, {rc['n_embd']} wide, "
               f"{rc['max_iters']} iterations of {rc['batch_size']} × {rc['block_size']} bytes "
               f"({rc['max_iters'] * rc['batch_size'] * rc['block_size'] / 1e6:.2f}M bytes), cosine to lr/"
               f"{rc['learning_rate'] / rc['min_lr']:.0f}, warmup {rc['warmup_iters']}, dropout {rc['dropout']:g}")
    gm = config_file('gmlp')
    ran = sorted({r['seed'] for r in records('results/sweep_stdlib.jsonl') if r['config'] == 'gmlp'
                  and r['size'] == f"{rc['n_layer']}x{rc['n_embd']}" and r['budget_value'] == rc['max_iters']
                  and r['lr'] == gm['learning_rate']})
    out.append(f"(seed {train.TrainConfig.seed} rather than the table's seeds {ran[0]}–{ran[-1]})"
               if ran == list(range(ran[0], ran[-1] + 1)) else CHANGED)
    mw = inspect.getsource(model._closest_width)
    ms = re.search(r'for m in \(([\d, ]+)\)', mw).group(1).split(', ')
    within = float(re.search(r'if err <= ([\d.]+)', mw).group(1))
    out.append(f"rounded to the coarsest multiple of {ms[0]}…{ms[-2]} (or {ms[-1]}) that stays within {within:.1%}")
    tol = model.MATCH_TOLERANCE
    out.append(f"where no width brings a block within {tol:.0%} of gpt's count (`MATCH_TOLERANCE`)")
    try:
        model.matched_width(dataclasses.replace(gpt_config('gmlp', vocab_size=256), n_layer=2, n_head=2, n_embd=64,
                                                block_size=256))
        out.append(CHANGED)
    except ValueError as e:
        out.append(f"e.g. `{e}`")
    out.append(f"and sweep tables mark any row more than {report.MATCH_TOLERANCE:.0%} from gpt's count")
    count = {c: model.count_params(gpt_config(c, vocab_size=256)) for c in
             ('gpt', 'gpt_rope', 'llama', 'llama_gelu', 'llama_primer', 'primer_ez', 'swiglu', 'geglu', 'reglu',
              'gmlp', 'amlp')}
    width = {c: model.ffn_width(g) if g.block == 'transformer' else model.gmlp_width(g)
             for c, g in ((c, gpt_config(c, vocab_size=256)) for c in count)}
    assert count['swiglu'] == count['geglu'] == count['reglu'] and width['swiglu'] == width['geglu'] == width['reglu']
    g = gpt_config('gpt', vocab_size=256)
    out.append(f"At the shipped shape (vocab {g.vocab_size}, block {g.block_size}): gpt {count['gpt']:,}; gpt_rope "
               f"{count['gpt_rope']:,} (MLP hidden {width['gpt_rope']} in place of the "
               f"{g.block_size * g.n_embd / 1e3:.0f}k-parameter position table); llama {count['llama']:,} (SwiGLU hidden "
               f"{width['llama']}); llama_gelu {count['llama_gelu']:,} ({width['llama_gelu']}); llama_primer "
               f"{count['llama_primer']:,} ({width['llama_primer']}); primer_ez {count['primer_ez']:,} "
               f"({width['primer_ez']}); swiglu/geglu/reglu {count['swiglu']:,} ({width['swiglu']}); gmlp "
               f"{count['gmlp']:,} (d_ffn {width['gmlp']}); amlp {count['amlp']:,} (d_ffn {width['amlp']}) — all "
               f"within {max(abs(n / count['gpt'] - 1) for n in count.values()):.1%}"
               if max(abs(n / count['gpt'] - 1) for n in count.values()) <= 0.005 else CHANGED)
    checked = float(re.search(r'abs\(n / target - 1\) < ([\d.]+)', inspect.getsource(
        test_model.test_match_params_lands_within_one_percent_of_gpt)).group(1))
    out.append(f"and a test checks {checked:.0%} for every architecture at {WORDS[len(test_model.SIZES)]} sizes")
    out.append(f"at block {g.block_size} they are {g.block_size ** 2:,} parameters per gMLP layer")
    sizes = sweep.QUICK['sizes']
    block = re.search(r'--block_size=(\d+)', ' '.join(sweep.QUICK_TRAIN)).group(1)
    out.append(f"(at 2×64 it cannot match: the error above; the studies' sizes start at 3×96, and `sweep.py "
               f"--quick` runs {' and '.join(s.replace('x', '×') for s in sizes)} at a {block}-byte context)")
    conv = inspect.getsource(model.CausalDepthwiseConv)
    now, before = re.search(r'w\[\.\.\., kernel - 1\] = ([\d.]+)', conv).group(1), \
        re.search(r'torch\.full\(\(3, per, kernel\), ([\d.]+) / kernel\)', conv).group(1)
    out.append(f"{now} on the current position and {before}/K on each earlier one")
    eps = re.search(r'nn\.RMSNorm\(dim, eps=([\de.-]+)\)', source('model.py')).group(1)
    out.append(f"RMSNorm is torch's `nn.RMSNorm` (eps {eps}, no bias)")
    out.append("`torch.optim.Muon`, torch ≥ {};".format(
        re.search(r'torch >= ([\d.]+)', inspect.getsource(model.check_optimizer)).group(1)))
    from fractions import Fraction
    C = 96
    plain = model.ffn_width(model.GPTConfig(n_embd=C, n_head=3))
    gated = model.ffn_width(model.GPTConfig(n_embd=C, n_head=3, ffn='swiglu', ffn_multiple_of=1))
    d = model.gmlp_width(model.GPTConfig(n_embd=C, n_head=3, block='gmlp', pos_emb='none'))
    default = {f.name: f.default for f in dataclasses.fields(model.GPTConfig)}
    out.append(f"FFN hidden width; {default['ffn_hidden']} = {plain // C}·n_embd, or for gated FFNs "
               f"{Fraction(gated, plain)} of that rounded to `ffn_multiple_of`")
    out.append(f"(split in two by the SGU); {default['gmlp_d_ffn']} = {d // C}·n_embd as in the paper")
    # §3
    arch = {config_file(c).get('gradient_accumulation_steps') for c in count}
    (A,) = arch
    out.append(f"(the architecture configs' A is {A}, from `_recipe.py`: under `--nproc_per_node=8` their "
               f"iteration holds {8 * math.ceil(A / 8)} micro-batches)" if A == rc['gradient_accumulation_steps']
               else CHANGED)
    import test_train
    ddp = inspect.getsource(test_train.test_two_ddp_processes_equal_one_with_twice_the_accumulation)
    out.append("a test checks {} in loss".format(re.search(r'< ([\de.-]+), it', ddp).group(1)))
    cool = train.TrainConfig.cooldown_frac
    out.append(f"the last `cooldown_frac` ({cool:g}) of `lr_decay_iters`, then down to `min_lr` there along 1 − √x"
               if 'math.sqrt' in inspect.getsource(train.TrainConfig.lr_at) else CHANGED)
    cfg = configurator.parse_config(train.TrainConfig, ['--max_iters=2000'])
    state = train.RunState(iter_num=249)
    shown = train.progress_line({'loss': 2.07, 'lr': 9.6e-4, 'tokens_per_s': 21300, 'mfu': None}, 0.0361, cfg, state,
                                train.budget_end(cfg, state, 1, 1.0))
    out.append(f"e.g. `{shown}` after {state.iter_num + 1} steps (the log row of that step has `iter: "
               f"{state.iter_num}`: log rows count from 0, as nanoGPT's)")
    straight = inspect.getsource(test_train.test_resume_equals_straight_through_bitwise)
    total, first = (int(x) for x in re.findall(r"--max_iters=(\d+)", straight))
    out.append(f"({first} + {total - first} iterations equals {total} straight, bitwise on CPU float32")
    ex = exits()
    out += [f"saves a checkpoint that resumes exactly, and exits {ex['sigint']}; a second Ctrl-C aborts",
            f"is a Ctrl-C (exit {ex['sigint']}, the previous checkpoint kept)",
            f"`ddp_timeout_s` (default {train.TrainConfig.ddp_timeout_s:g} s)",
            f"`error: ...` (exit {ex['usage']} from the worker)",
            f"the exit status is ours: {ex['usage']} for bad input, {ex['sigint']} after Ctrl-C.)"]
    # §4
    out.append("`temperature` ({} = greedy)".format(
        re.search(r'; (\d+) = greedy', source('sample.py')).group(1)))
    batches = re.search(r"parametrize\('B', \[(\d+), (\d+)\]\)\ndef test_fixed_shape_steps_compile_once",
                        source('test_model.py')).groups()
    out.append(f"(a test makes a recompile an error at batch {batches[0]} and {batches[1]})")
    # §5
    out.append(f"(Python's reference manual, {pydoc_mb()} MB in Python 3.11, char-level)")
    out.append(stdlib_words())
    out.append(f"Byte-level by default (vocabulary {dataset.ByteTokenizer().vocab_size}: any text")
    cut = int(re.search(r'off \+ \(1 << (\d+)\)', inspect.getsource(prepare.plan_split)).group(1))
    mb = (1 << cut) / 2 ** 20
    out.append(f"or a character boundary when no newline lies within {mb:.0f} MB")
    out.append("(GPT-2 pattern, `<|endoftext|>` = {},".format(
        re.search(r'GPT-2.s (\d+)', inspect.getsource(dataset.tiktoken_from_file)).group(1)))
    pc = prepare.PrepareConfig()
    header, wide = (np.frombuffer(dataset.shard_header(1, d), dtype=np.int32) for d in (np.uint16, np.uint32))
    out.append(f"(`--shard_tokens`, default {pc.shard_tokens / 1e6:.0f}M, at least {prepare.MIN_SHARD_TOKENS:,}), "
               f"each a {len(header)} × int32 header — `[0]` = {dataset.MAGIC} (magic), `[1]` = "
               f"version: **{header[1]} = uint16 tokens** (llm.c / modded-nanogpt FineWeb format) or "
               f"**{wide[1]} = uint32 tokens** (vocabularies over "
               f"{np.iinfo(np.uint16).max:,}), `[2]` = token count"
               if header.nbytes == dataset.HEADER_BYTES and header[2] == wide[2] == 1 else CHANGED)
    per = int(re.search(r"(\d+)M tokens a shard", fineweb.DESCRIPTION).group(1)) * 10 ** 6
    out.append(f"({per / 1e6:.0f}M GPT-2 tokens, {per * np.dtype(np.uint16).itemsize / 1e6:.0f} MB each; "
               f"1..{fineweb.SHARDS}, default {fineweb.FinewebConfig.train_shards})")
    vocab = int(re.search(r'held\.max\(\) >= (\d+)', source('fineweb.py')).group(1))
    out.append(f"token count against its size, ids below {vocab:,})")
    out.append(f"comes from the config (default {model.GPTConfig.vocab_size})")
    log = prepare_log()
    out.append(f"({prepare.SHAKESPEARE_BYTES * log['copies']:,} bytes: Tiny Shakespeare {log['copies']} times) "
               f"wrote {log['tokens'] / 1e6:.1f}M tokens with a peak RSS of **{log['rss'] / 1e6:.1f} MB**")
    out.append(f"its {log['wall']:.1f} s of wall time, {log['cpu']:.1f} s of CPU time, is no speed figure). Text is "
               f"streamed in ~{prepare.PIECE_BYTES / 2 ** 20:.0f} MB pieces")
    # §6
    ci = re.search(r'ci: sweep.py --quick took (\d+)s', source(CI[0])).group(1)
    out.append(f"# the machinery: {ci} s in CI's fresh clone")
    warm = int(re.search(r'warmup_iters > iters // (\d+)', source('sweep.py')).group(1))
    grid = float(re.search(r"--min_lr=\{lr / (\d+)\}", source('sweep.py')).group(1))
    share = float(re.search(r'if worst\[0\] > ([\d.]+)', source('sweep.py')).group(1))
    out.append(f"(`eval_interval`: {sweep.EVALS} evaluations a run; `warmup_iters`: at most {1 / warm:.0%} of a short "
               f"cosine budget; `min_lr` = lr/{grid:.0f} on a grid) and says so before the runs start, with the share "
               f"of each run that evaluation will take when it is over {fraction(share)}")
    out.append(f"record and prints one line with what finished and the command that continues; exit {ex['sigint']} "
               f"({ex['sigterm']})")
    out.append(f"(train.py's setting, default {train.TrainConfig.eval_seed})")
    steps = re.search(r'step = ([\d.]+) if best == lrs\[-1\] else ([\d.]+) if best == lrs\[0\]',
                      inspect.getsource(sweep.beyond_the_edges)).groups()
    out.append(f"(`min_lr` = lr/{grid:.0f} unless given)")
    out.append("`--extend_lr` runs {} ({}) the best lr wherever it is the grid's largest (smallest)".format(
        *{('2.0', '0.5'): ('twice', 'half')}.get(steps, (CHANGED, CHANGED))))
    out.append("the tiny attention, ×{} for forward + backward)".format(
        re.search(r'return (\d+) \* forward', inspect.getsource(model.count_flops)).group(1)))
    out.append(f"cooldown (its last {fraction(cool).split()[-1]})")
    out.append(f"- **Evaluations**: {sweep.EVALS} per run, spread over its budget")
    out.append(f"the parameters (marked where more than {report.MATCH_TOLERANCE:.0%} from gpt's)")
    out.append(f"({stats.t_quantile(0.975, 1):.2f} standard errors for two seeds, {stats.t_quantile(0.975, 2):.2f} for "
               f"three, {stats.t_quantile(0.975, 9):.2f} for ten)")
    out.append(f"where a gap pairs {report.BAND_SEEDS}+ seeds")
    near = re.search(r'math\.log\(([\d.]+)\)', inspect.getsource(report.matched_budgets)).group(1)
    out.append(f"(budgets within {near}× of each other)")
    mt = mark_tests()
    out.append(f"`halves`, {mt['halves']}; `doubles`, {mt['doubles']}; `holds`, both signs, {mt['holds']}")
    # §7
    endings = int(re.search(r'len\(endings\) == (\d+)', source('hellaswag.py')).group(1))
    out.append(f"Each item is a context and {endings} endings")
    out.append(f"(`--batch_size` items × {endings} endings a forward pass)")
    import test_hellaswag
    rigged = float(re.search(r"r\['acc'\] == ([\d.]+) and", inspect.getsource(
        test_hellaswag.test_a_model_that_learnt_the_right_endings_scores_every_rigged_item)).group(1))
    chance = float(re.search(r"abs\(r\['acc'\] - ([\d.]+)\)", inspect.getsource(
        test_hellaswag.test_random_items_score_near_chance)).group(1))
    nproc = re.search(r"'--nproc_per_node=(\d+)'", inspect.getsource(test_train.torchrun)).group(1)
    out.append(f"scores {rigged:.0%} on rigged items, random items score near {chance:.0%}, {nproc} processes score "
               "as one" if chance == 1 / endings else CHANGED)
    # §8: the 124M recipe, and its time from our FLOPs count and the H100's measured MFU
    fw = config_file('_fineweb124m')
    big = {c: gpt_config(c, '_fineweb124m') for c in count}
    n124 = {c: model.count_params(g) for c, g in big.items()}
    fl = {c: model.count_flops(g) for c, g in big.items()}
    tok_iter = fw['batch_size'] * fw['block_size'] * fw['gradient_accumulation_steps']
    tokens = tok_iter * fw['max_iters']
    out.append(f"({fw['n_layer']} × {fw['n_embd']}, block {fw['block_size']}, vocabulary {fw['vocab_size']}, every "
               f"config matched to gpt's {n124['gpt'] / 1e6:.1f}M parameters within "
               f"{math.ceil(1000 * max(abs(n / n124['gpt'] - 1) for n in n124.values())) / 10:.1f}%): {tok_iter:,} "
               f"tokens an iteration ({fw['batch_size']} sequences × {fw['gradient_accumulation_steps']} accumulation "
               f"steps on one GPU; torchrun divides the {fw['gradient_accumulation_steps']} among the GPUs), "
               f"{fw['max_iters']:,} iterations = {tokens / 1e9:.1f}B tokens = {tokens / n124['gpt']:.0f} tokens per "
               f"parameter (Chinchilla)")
    out.append(f"AdamW lr {lr(fw['learning_rate'])} (warmup {fw['warmup_iters']}, cosine to {lr(fw['min_lr'])}), "
               f"weight decay {fw['weight_decay']:g}, β2 {fw['beta2']:g}, bf16 autocast")
    out.append(f"an evaluation every {fw['eval_interval']} iterations on "
               f"{fw['eval_iters'] * fw['batch_size'] * fw['block_size']:,} val tokens")
    mfu = {}
    for path in ('results/h100/speed124_compile.jsonl', 'results/h100/speed124_b32.jsonl'):
        for r in json_objects(path):
            for x in r['rows']:
                mfu[x['config']] = max(mfu.get(x['config'], 0), x['mfu'])
                assert x['flops_per_token'] == fl[x['config']], x['config']  # the records' count is ours
    b32 = [x['config'] for r in json_objects('results/h100/speed124_b32.jsonl') for x in r['rows']]
    peak = dict((p, v) for p, v, _ in guards.PEAK_TFLOPS)['H100']
    hours = {c: tokens * fl[c] / (peak * 1e12 * m) / 3600 for c, m in mfu.items()}
    others = [c for c in mfu if c != 'gpt']
    gpus = 8
    out.append(f"FLOPs count ({min(fl.values()) / 1e6:.0f}–{max(fl.values()) / 1e6:.0f} MFLOPs a token) and the MFU "
               f"measured on an H100 (RESULTS.md §4, each block at the larger batch it ran: {mfu['gpt']:.1%} for gpt "
               f"at batch 32, {100 * min(mfu[c] for c in others):.1f}–{max(mfu[c] for c in others):.1%} for the others): "
               f"{tokens / 1e9:.1f}B × {fl['gpt'] / 1e6:.0f}M / ({peak} TFLOP/s × {mfu['gpt']:.3f}) = **"
               f"{hours['gpt']:.1f} hours** for gpt, {min(hours[c] for c in others):.1f}–"
               f"{max(hours[c] for c in others):.1f} hours for the others; on {gpus} H100s about "
               f"{fraction(1 / gpus)} of that each ({min(hours.values()) * 60 / gpus:.0f}–"
               f"{max(hours.values()) * 60 / gpus:.0f} minutes, if the per-GPU MFU holds)"
               if 'gpt' in b32 and set(mfu) <= set(fl) else CHANGED)
    rk = records('results/h100/ranking_site.jsonl')
    out.append(f"the ranking at {min(r['params'] for r in rk) / 1e6:.1f}M parameters"
               if round(min(r['params'] for r in rk) / 1e5) == round(max(r['params'] for r in rk) / 1e5) else CHANGED)

    def tflops(name):  # the row peak_flops reads for a device torch names so
        row = next((row for row in guards.PEAK_TFLOPS if re.search(row[0], name)), None)
        return row and row[1:]
    cards = [('H100 SXM, H200', ['NVIDIA H100 80GB HBM3', 'NVIDIA H200']),
             ('H100 NVL, H200 NVL', ['NVIDIA H100 NVL', 'NVIDIA H200 NVL']), ('H100 PCIe', ['NVIDIA H100 PCIe']),
             ('A100 (40 / 80 GB, SXM / PCIe)', ['NVIDIA A100-SXM4-40GB', 'NVIDIA A100-SXM4-80GB',
                                                'NVIDIA A100-PCIE-40GB', 'NVIDIA A100 80GB PCIe']),
             ('L40S', ['NVIDIA L40S']), ('L40', ['NVIDIA L40']), ('L4', ['NVIDIA L4']), ('A10', ['NVIDIA A10']),
             ('RTX 4090', ['NVIDIA GeForce RTX 4090'])]
    for label, names in cards:
        (bf, tf), = {tflops(n) for n in names}
        out.append(f"| {label} | {bf:g} | {tf:g} |")
    ti, plain3090 = tflops('NVIDIA GeForce RTX 3090 Ti'), tflops('NVIDIA GeForce RTX 3090')
    out.append(f"| RTX 3090 Ti / 3090 | {ti[0]:g} / {plain3090[0]:g} | {ti[1]:g} / {plain3090[1]:g} |")
    out.append("Any other GPU (an A10G, a T4, ...) is named once at the start" if tflops('NVIDIA A10G') is None
               and tflops('Tesla T4') is None else CHANGED)
    # §9
    out += [f"is one line, `error: ...`, exit {ex['usage']}, no traceback, nothing written; Ctrl-C while a script "
            f"starts (importing torch) exits {ex['startup']} quietly",
            f"saves and exits {ex['sigint']} ({ex['sigterm']}); a second Ctrl-C aborts (also inside a save: "
            f"{ex['sigint']}, not a disk error)",
            f"any other error on a path is `error: PATH: reason`, exit {ex['usage']};",
            f"`val_fraction` of its bytes within {prepare.SPLIT_TOLERANCE:.0%} (whole files where they can, else the "
            f"tail, said; with no newline within {mb:.0f} MB of the cut, at a character)",
            f"size, at least one token, ids below {vocab:,})"]
    # §10
    out += [f"parameter matching within {checked:.0%} at several sizes",
            "a real {}-process `torchrun` (gloo) equal to 1 process with {}× accumulation".format(
                nproc, re.search(r'--gradient_accumulation_steps=(\d+)', ddp).group(1)),
            f"a {probe.ProbeConfig.n_layer}-layer attention-only model solving an easy setting",
            f"curves of {sweep.EVALS} evaluations",
            f"HellaSwag scoring {rigged:.0%} on rigged items and chance on random ones"]
    return out


def near_fraction(x, within=0.15):
    """A share as the prose writes it in words, 'half', 'a ninth': the nearest 1/n, when x is within
    `within` of it (relative); else a phrase no document holds."""
    n = round(1 / x)
    word = {**FRACTION, 6: 'a sixth', 7: 'a seventh', 9: 'a ninth'}.get(n)
    return word if word and abs(x * n - 1) <= within else CHANGED


def words():
    """(document, phrase) for the numbers README and RESULTS write as words, and the phrases that
    replaced the audit's overstatements with what the records say."""
    top = tpps('3x96')[-1]
    keep = [gap(c, ref, '3x96', top)[0] / gap(c, ref, '3x96', 1.3)[0]
            for c, ref in (('primer_ez', 'gpt'), ('llama_primer', 'gpt'), ('llama', 'gpt'))]
    primer = {near_fraction(k) for k in keep[:2]}
    out = [('RESULTS.md', f"the Primer changes keep about {primer.pop() if len(primer) == 1 else CHANGED} of their "
                          f"early lead, llama {near_fraction(keep[2])}.")]
    # §3: the best lr of each block at 4x128, 2,000 iterations (AdamW)
    sh = [r for r in rows('results/sweep_shakespeare.jsonl') if r['size'] == '4x128'
          and r['budget'] == 'max_iters=2000' and r['optimizer'] == 'adamw']
    best = {r['config']: r['lr'] for r in sh}
    assert len(best) == len(sh), sorted(r['config'] for r in sh)
    by = {}
    for c, x in best.items():
        by.setdefault(x, []).append(c)
    low, high = min(by), max(by)
    shared = [x for x in sorted(by, reverse=True) if len(by[x]) > 1]
    out.append(('RESULTS.md', "the best lr is not one for all blocks, from {} ({}) to {} ({}; {}), so a comparison at "
                              "one lr compares learning rates".format(
                                  lr(low), ', '.join(by[low]), lr(high), ', '.join(by[high]),
                                  ', '.join(f"{' and '.join(by[x])} {lr(x)}" for x in shared))
                if len(by[low]) == len(by[high]) == 1 else CHANGED))
    # §4: the MFU goal, and how often the scaling runs read Tiny Shakespeare's train split
    mfu = [x['mfu'] for path in ('results/h100/speed124_compile.jsonl', 'results/h100/speed124_b32.jsonl')
           for r in json_objects(path) for x in r['rows']]
    mfu += [x['mfu'] for r in json_objects('results/h200/side_by_side124.jsonl') for x in r['rows']]
    mfu += [r['mfu'] for r in json_objects('results/h100/side_by_side124.jsonl')]
    out.append(('RESULTS.md', f"{fraction(0.5).capitalize()} the peak (issue #41's MFU goal at 124M) is not reached"
                if max(mfu) < 0.5 else CHANGED))
    import prepare
    sc = records('results/h100/scaling_shakespeare.jsonl')
    read = {r['tokens'] / (prepare.SHAKESPEARE_BYTES * (1 - prepare.PrepareConfig.val_fraction)) for r in sc}
    out.append(('RESULTS.md', f"its train split read about {min(read):.0f} times over in a run"
                if round(min(read)) == round(max(read)) else CHANGED))
    # §5: the probe's accuracy by distance, in quarters of the range
    bins = {len(r['acc_by_distance']) for r in records('results/probe.jsonl', 'probe')}
    out.append(('RESULTS.md', "by key–query distance, {}s of the range".format(
        fraction(1 / bins.pop()).split()[-1]) if len(bins) == 1 else CHANGED))
    log = prepare_log()
    out.append(('GUIDE.md', f"a {prepare.SHAKESPEARE_BYTES * log['copies'] / 1e6:.0f} MB text file:"))
    return out

# what an audit found stated with no record or log behind it, or overstated: each must stay out
UNBACKED = [('README.md', '10.3 CPU-minutes'), ('RESULTS.md', '10.3 CPU-minutes'), ('README.md', 'over 25 times'),
            ('README.md', 'late only at the smallest'), ('RESULTS.md', '3.9×'),
            ('RESULTS.md', '115 iterations/s'), ('README.md', '0.997× nanoGPT'),
            # the second audit's: no repeated timing, no log, a deadline called a duration, a wrong sum
            ('RESULTS.md', 'a fifth either way'), ('RESULTS.md', 'about a minute'), ('RESULTS.md', 'days on a CPU'),
            ('RESULTS.md', 'full grid days'), ('RESULTS.md', 'to the digit'), ('RESULTS.md', "every block's best lr"),
            ('README.md', 'in 8 minutes'), ('GUIDE.md', 'about 1 s'), ('GUIDE.md', '14.2 MB/s'),
            ('GUIDE.md', '0.0024 apart'), ('GUIDE.md', '1.22×'), ('GUIDE.md', 'a tenth of that'),
            ('GUIDE.md', '36–40%'), ('GUIDE.md', '1.5–1.7 hours'), ('GUIDE.md', 'in about a minute'),
            ('GUIDE.md', "smaller gap's sign")]

# a number no claim holds in a section another change is rewriting from new records (RESULTS.md §1): each
# stays listed, with the audit's finding, until that rewrite removes it; then it must leave this list too
HANDED_OFF = []  # (document, phrase, number, why): a number left for another change to render


def handed_off(doc):
    """(line, number) of each HANDED_OFF number in doc, as untested() gives it; a phrase no longer in
    doc fails, so the list only shrinks."""
    raw, out = source(doc), []
    for d, phrase, number, why in HANDED_OFF:
        if d == doc:
            m = re.search(r'\s+'.join(map(re.escape, phrase.split())), raw)
            assert m, f"{doc} no longer says {phrase!r}: remove it from HANDED_OFF"
            at = m.start() + phrase.index(number.split()[0])
            out.append((raw.count('\n', 0, at) + 1, number))
    return out


DOCS = ('README.md', 'RESULTS.md', 'GUIDE.md')  # every number in their prose is a claim's


def normal(text):
    """Whitespace as one space: a phrase may wrap anywhere in a document."""
    return re.sub(r'\s+', ' ', text)


def missing():
    """(document, what is wrong) for each claim whose phrase is not in its document, and each
    unbacked phrase that is."""
    docs = {d: normal(source(d)) for d in DOCS}
    return ([(doc, f"should say: {phrase}") for doc, phrase in claims()
             if normal(phrase) not in docs[doc]]
            + [(doc, f"says {phrase!r}, which no record backs") for doc, phrase in UNBACKED
               if phrase in docs[doc]])


# what names something rather than states a measurement, blanked before numbers are looked for: the
# report's tables (tests/doc_tables.py draws them), code, links and images, shapes, sections, dates,
# commits, papers, list items, seed labels, issue numbers and the marks' definitions
NAMES = [r'<!-- report.*?<!-- end -->', r'```.*?```', r'`[^`\n]*(?:\n[^`\n]*){0,3}`', r'!\[[^\]]*\]\([^)]*\)',
         r'\]\([^)]*\)', r'\b\d+ ?[×x] ?\d+|\d+ layers\s+(?:of width|×) \d+', r'§\d+[a-z]?',
         r'(?m)^\s*\d+\. |^#+ \d+[a-z]?\.', r'\b20\d\d-\d\d-\d\d(?:/\d\d)?\b|\b(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b',
         r'\b\d{4}\.\d{5}\b', r'GPT-2(?: 124M)?|\b124M\b', r'Python 3\.\d+\+?', r'et al\. \d{4}', r'sec\. [\d.]+',
         r'\|[ab]\|(?:/2)?|2\|[ab]\||\b2[ab]\b|2 × later|\b[nK] ?− ?1\b', r'\(n=\d+\)|1/√|1/N|x86-64|x86_64|offset 1\b|#\d+\b',
         r'\b[1-9]-D\b|UTF-8|\bln 2\b|FineWeb 10B|2:4 sparsity',  # dimensions, an encoding, a constant, names
         r'\b[Tt]he (?:third|fourth|fifth|sixth|seventh|eighth|ninth|tenth)(?= (?!of\b|either\b)[a-z])',  # ordinals
         r'\bseeds \d+(?:-\d+|(?:,? and |, )\d+\b(?! seeds?))*|\bseed \d+\b',
         r'(?:exclude|excludes|include|includes|span|spans|about|below) 0\b']


def names():
    """NAMES, and the two that the records and the code fix: the confidence level of every interval
    (stats.CONFIDENCE) and the CPU machine's core count (the CPU records' machine): a 90% or a
    4-core in the prose is a number no claim holds."""
    level = f"{stats.CONFIDENCE:.0%}"
    cores = {re.search(r'(\d+) cores', r['machine']).group(1) for r in records()
             if r['machine'].startswith('cpu')}
    assert len(cores) == 1, cores
    n = cores.pop()
    return NAMES + [rf'\b{level} (?=t |confidence|interval)', rf'\b{n}-core\b|\b{n} (?:CPU )?cores\b']


NUMBER = re.compile(r'(?<![\w.])[−+-]?\d+(?:,\d{3})*(?:\.\d+)?(?:e[+-]?\d+)?(?:×|%)?')
# a number written as a word is a number too: a share ('a fifth', 'half', 'quarters'), a multiple ('twice',
# 'double', 'several times', 'threefold'); a count of things ('two seeds', 'one line') is not, and the report's
# marks (`halves`, `doubles`, halving, doubling) name what a gap does (README defines them)
WORD = re.compile(r'(?i)\b(?:half|halved|thirds?|quarters?|fifths?|sixths?|sevenths?|eighths?|ninths?|tenths?|'
                  r'hundredths?|thousandths?|twice|thrice|double|doubled|triple|tripled|quadruple|'
                  r'(?:two|three|four|five|ten|several|many)[ -]?fold)\b(?!-width)'
                  r'|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|dozens? of|hundreds? of|thousands? of|'
                  r'several|many|a few|few|some|countless) times\b')

# what a gap does from one shape or schedule to another, as README and RESULTS report it (`halves`, `flips
# (unresolved)`), is read like a number: a claim computes it (mark); a definition (a list item '- `holds`:',
# a list of marks '`holds`, `flips` and `halves`') and GUIDE's marks (it defines them) are none
MARK_WORDS = '(?:holds|halves|flips|doubles)'
MARK = re.compile(rf'`{MARK_WORDS}(?:\s+\(unresolved\))?`')
DEFINITIONS = [rf'(?m)^\s*- `{MARK_WORDS}(?: \(unresolved\))?`:', rf'`{MARK_WORDS}`(?:,? (?:and |or )?`{MARK_WORDS}`)+']
MARKED = ('README.md', 'RESULTS.md')


def blanked(text, patterns):
    """text with every match of `patterns` blanked (its characters spaces, its lines kept)."""
    for pattern in patterns:
        text = re.sub(pattern, lambda m: re.sub(r'\S', ' ', m.group()), text, flags=re.S)
    return text


def prose_numbers(doc, raw):
    """The numbers of doc's prose (`raw`, read as doc), in figures and in words, that name nothing, and
    its marks (MARK): match objects on raw's positions, in order."""
    text, marks = blanked(raw, names()), MARK.finditer(blanked(raw, DEFINITIONS)) if doc in MARKED else ()
    return sorted([*NUMBER.finditer(text), *WORD.finditer(text), *marks], key=lambda m: m.start())


def held_by(doc, raw):
    """{phrase: [(start, end)] of each place doc's text `raw` holds it} for doc's claims."""
    return {phrase: [m.span() for m in re.finditer(r'\s+'.join(map(re.escape, phrase.split())), raw)]
            for d, phrase in claims() if d == doc}


def untested(doc, raw=None):
    """(line, number) for each number in doc's prose (or in `raw`, read as doc), in figures (NUMBER) or
    in words (WORD), that no claim's phrase holds and that names nothing (names()): a number a test
    does not recompute."""
    raw = source(doc) if raw is None else raw
    held = bytearray(len(raw))
    for spans in held_by(doc, raw).values():
        for a, b in spans:
            held[a:b] = b'\1' * (b - a)
    return [(raw.count('\n', 0, m.start()) + 1, m.group()) for m in prose_numbers(doc, raw)
            if not all(held[m.start():m.end()])]


def changed(number):
    """The number with one digit changed (its last), a number word replaced by another, or a mark."""
    if number.startswith('`'):  # a mark: another word
        word = re.match(r'`(\w+)', number).group(1)
        return number.replace(word, 'halves' if word == 'holds' else 'holds', 1)
    digits = [i for i, c in enumerate(number) if c.isdigit()]
    if not digits:
        return 'twice' if number.lower() != 'twice' else 'half'
    i = digits[-1]
    return number[:i] + str((int(number[i]) + 1) % 10) + number[i + 1:]


def unguarded(doc):
    """(line, number) for each number of doc's prose whose change (one digit, or another number word)
    leaves every claim's phrase in the document: a number no test would see changed. A phrase held
    in two places guards neither alone."""
    raw, out = source(doc), []
    spans = held_by(doc, raw)
    for m in prose_numbers(doc, raw):
        a, b = m.span()
        new = raw[:a] + changed(m.group()) + raw[b:]
        covering = [p for p, at in spans.items() if any(s < b and a < e for s, e in at)]

        def still(phrase):  # elsewhere in the document, or made again by the change
            if any(not (s < b and a < e) for s, e in spans[phrase]):
                return True
            around = new[max(0, a - 3 * len(phrase)):b + 3 * len(phrase)]
            return re.search(r'\s+'.join(map(re.escape, phrase.split())), around) is not None
        if not covering or all(still(p) for p in covering):
            out.append((raw.count('\n', 0, a) + 1, m.group()))
    return out


def missing_in(doc, raw):
    """doc's claims whose phrase the text `raw`, read as doc, does not hold."""
    text = normal(raw)
    return [phrase for d, phrase in claims() if d == doc and normal(phrase) not in text]


if __name__ == '__main__':
    for doc, what in missing():
        print(f"{doc}: {what}")
    print(f"{len(claims())} claims, {len(missing())} not in their document")
    for doc in DOCS:
        found = untested(doc)
        print(f"{doc}: {len(found)} numbers in prose that no claim holds"
              + (': ' + ', '.join(f"{n} (line {line})" for line, n in found[:40]) if found else ''))
        for d, phrase, number, why in HANDED_OFF:
            if d == doc:
                print(f"  handed off: {number!r} in {phrase!r}: {why}")
        blind = unguarded(doc)
        print(f"{doc}: {len(blind)} numbers whose change no claim sees"
              + (': ' + ', '.join(f"{n} (line {line})" for line, n in blind[:40]) if blind else ''))
