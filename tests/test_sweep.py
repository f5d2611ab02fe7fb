"""
sweep.py's records a user can trust: the key is the resolved run, a run folder belongs to one sweep
from its start to its record, only finished runs are recorded, a file shared with a killed writer
stays readable, Ctrl-C stops the sweep and its runs, and warmup-stable-decay branches equal straight
runs. Tiny shapes on a corpus each test writes.
"""
import dataclasses
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch

import dataset
import guards
import sweep
from configurator import UsageError
from conftest import as_script
import report
import stats

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repository
TINY = ['--n_layer=1', '--n_embd=32', '--n_head=2', '--block_size=16', '--batch_size=4', '--eval_iters=2',
        '--warmup_iters=2', '--device=cpu']


def cli(*args, timeout=300):
    return subprocess.run([sys.executable, 'sweep.py', *args], cwd=HERE, capture_output=True, text=True,
                          timeout=timeout)


def refusal(*args):
    """The one line sweep.py prints for `args`, refused before anything starts (run in this process)."""
    code, out, err = as_script('sweep.py', list(args), HERE)
    assert code == 2 and out == '' and err.count('\n') == 1 and err.startswith('error: '), (code, out, err)
    return err


def sweep_args(tiny_data, tmp_path, *more):
    return ['--configs=gpt', *TINY, f'--data_dir={tiny_data}', f'--results={tmp_path / "r.jsonl"}',
            f'--out_prefix={tmp_path / "runs"}', *more]


def plan(tmp_path, overrides=(), configs_dir=None, **sweep_kw):
    cfg = sweep.SweepConfig(out_prefix=str(tmp_path / 'runs'), **sweep_kw)
    path = os.path.join(configs_dir or os.path.join(HERE, 'configs'), 'gpt.py')
    return sweep.plan_run(path, cfg, list(overrides), seed=1, lr=1e-3, size=None)


# -----------------------------------------------------------------------------
# the key is the resolved run

def test_the_key_follows_every_setting_the_recipe_resolves_to(tmp_path):
    """Editing configs/_recipe.py (which the architecture configs import) changes the key of every run
    it reaches; settings that cannot change the outcome do not; a setting written out at train.py's
    default, or one that did not exist when a record was written, matches."""
    copy = tmp_path / 'configs'
    shutil.copytree(os.path.join(HERE, 'configs'), copy)
    base = plan(tmp_path, configs_dir=copy)
    recipe = (copy / '_recipe.py').read_text()
    for edit in ('gradient_accumulation_steps = 2', 'weight_decay = 0.0', 'dropout = 0.1', 'beta2 = 0.95',
                 'grad_clip = 0.5'):
        name = edit.split(' = ')[0]
        (copy / '_recipe.py').write_text(recipe + f"\n{edit}\n")
        edited = plan(tmp_path, configs_dir=copy)
        assert stats.run_id(edited.key) != stats.run_id(base.key), edit
        assert edited.run_dir != base.run_dir and edited.key[name] != base.key[name]
    (copy / '_recipe.py').write_text(recipe)
    assert stats.run_id(plan(tmp_path, configs_dir=copy).key) == stats.run_id(base.key)  # stable
    for no_effect in (['--log_interval=7'], ['--out_dir=elsewhere'], ['--always_save_checkpoint=False']):
        assert stats.run_id(plan(tmp_path, no_effect, configs_dir=copy).key) == stats.run_id(base.key)
    assert set(sweep.NO_EFFECT) < set(stats.DEFAULTS)  # each a train.py setting, by name
    # a record written before a setting existed (no such key) matches when the setting is at its default
    older = {k: v for k, v in base.key.items() if k != 'cooldown_frac'}
    assert stats.run_id(older) == stats.run_id(base.key)
    assert stats.run_id({**older, 'cooldown_frac': 0.5}) != stats.run_id(base.key)


def test_the_key_names_the_data_not_the_folder_it_was_prepared_into(tiny_data, tmp_path):
    """Two folders prepared from one text share a fingerprint; another text with the same tokenizer
    does not, so its runs are not mistaken for this one's."""
    import prepare
    from dataset import fingerprint, read_meta
    same = tmp_path / 'same'
    corpus = os.path.join(os.path.dirname(tiny_data), 'corpus.txt')
    prepare.main([f'--input={corpus}', f'--out_dir={same}'])
    assert fingerprint(read_meta(str(same))) == fingerprint(read_meta(tiny_data))
    other = tmp_path / 'other.txt'
    other.write_text(open(corpus).read().replace('cat', 'cow'))
    prepare.main([f'--input={other}', f'--out_dir={tmp_path / "o"}'])
    assert fingerprint(read_meta(str(tmp_path / 'o'))) != fingerprint(read_meta(tiny_data))
    a = plan(tmp_path, [f'--data_dir={tiny_data}'])
    b = plan(tmp_path, [f'--data_dir={tiny_data}'])
    assert a.key['data'] == fingerprint(read_meta(tiny_data)) and a.key == b.key
    copy = plan(tmp_path, [f'--data_dir={same}'])  # the same data in another folder: the same run
    other = plan(tmp_path, [f'--data_dir={tmp_path / "o"}'])
    assert stats.run_id(copy.key) == stats.run_id(a.key) != stats.run_id(other.key)
    assert copy.key['data_dir'] != a.key['data_dir'] and copy.run_dir == a.run_dir


# -----------------------------------------------------------------------------
# the results file: duplicates, a killed writer, lines that are not records

def record(config, seed, val, *, lr=1e-3, budget=10, size='1x32', **settings):
    """A sweep record as sweep.py writes one: its key is the resolved run (here its few settings that
    matter to a report, `settings` more of them)."""
    n_layer, n_embd = (int(v) for v in size.split('x'))
    key = dict(config=config, seed=seed, learning_rate=lr, min_lr=lr / 10, budget='max_iters', budget_value=budget,
               max_iters=budget, n_layer=n_layer, n_embd=n_embd, **{'data': 'fp', 'eval_seed': 0, **settings})
    return dict(kind='sweep', key=key, config=config, size=size, seed=seed, lr=lr, optimizer='adamw',
                budget='max_iters', budget_value=budget, data_dir='d', val_loss=val, params=100 * n_embd,
                tokens=10 * budget * n_embd, flops=1.0 * budget, train_s=1.0, schedule='wsd',
                curve=[[0, 0, 0.0, 0.0, val + 1], [budget, 10 * budget, 1.0, 1.0, val]])


def test_the_regime_view_ranks_each_budget_and_pairs_the_gaps_to_both_baselines(tmp_path, monkeypatch):
    """Several budgets at one size: a rank, loss and best lr per budget, the gaps to gpt and to llama
    paired by seed at every budget with their 95% t intervals, a '-' where a config has no run, and the
    gap plot."""
    recs = []
    losses = {  # (config, budget): {lr: per-seed losses}; x overtakes llama at the long budget
        ('gpt', 100): {1e-3: [3.0, 3.2], 2e-3: [2.9, 3.1]}, ('gpt', 1600): {2e-3: [2.0, 2.2]},
        ('llama', 100): {1e-3: [2.5, 2.7]}, ('llama', 1600): {1e-3: [1.9, 2.1]},
        ('x', 100): {1e-3: [2.6, 2.9]}, ('x', 1600): {1e-3: [1.7, 2.0]}, ('y', 100): {1e-3: [2.8, 3.0]}}
    for (name, budget), by_lr in losses.items():
        for lr, vals in by_lr.items():
            for seed, v in enumerate(vals, 1):
                recs.append({**record(name, seed, v, lr=lr, budget=budget), 'tokens': 1000 * budget, 'params': 100})
    rows = report.summary_rows(recs)
    groups = report.regime_groups(rows)
    assert len(groups) == 1
    rs = next(iter(groups.values()))
    text = report.regime_tables(rs)
    assert '| config | 1000.0 (100) | 16000.0 (1600) |' in text  # tokens per gpt parameter (100)
    first = text.split('Gap to gpt')[0]
    assert '| x | #2 2.7500 ± 0.2121 (n=2), lr 0.001 | #1 1.8500 ± 0.2121 (n=2), lr 0.001 |' in first
    assert '| gpt | #4 3.0000 ± 0.1414 (n=2), lr 0.002 (top of grid) | #3 2.1000' in first  # its grid's edge
    assert '| y | #3 2.9000 ± 0.1414 (n=2), lr 0.001 | – |' in first
    to_gpt, to_llama = text.split('Gap to gpt')[1].split('Gap to llama')
    # (2.6-2.9, 2.9-3.1): -0.25 ± 12.706 x 0.05; (1.7-2.0, 2.0-2.2) alike
    assert '| x | -0.2500 ± 0.6353 (n=2) (spans 0) | -0.2500 ± 0.6353 (n=2) (spans 0) |' in to_gpt
    assert '| x | +0.1500 ± 0.6353 (n=2) (spans 0) | -0.1500 ± 0.6353 (n=2) (spans 0) |' in to_llama
    assert '| gpt |' in to_llama and '| gpt |' not in to_gpt
    ends = {l.split(' | ')[0][2:]: l.split(' | ')[1] for l in report.ends_table(rs).splitlines()[2:]}
    # x ran one lr (no grid): said so; y has no run at the largest budget
    assert ends['x'] == '0.001 (no grid: the only lr run)' and ends['y'] == '–'
    if report.pyplot() is not None:
        png = str(tmp_path / 'regime.png')
        assert report.plot_regime(rs, png, 'title') and os.path.getsize(png) > 10_000
    if report.pyplot() is not None:  # a config is one colour in both panels (gpt and llama each appear in one)
        seen = []
        real = report.save_png
        monkeypatch.setattr(report, 'save_png', lambda fig, png, axes=(), *a: seen.append(
            [{l.get_label(): l.get_color() for l in ax.get_lines() if not l.get_label().startswith('_')}
             for ax in axes]) or real(fig, png, axes, *a))
        report.plot_regime(rs, str(tmp_path / 'colours.png'), 'title')
        to_gpt_colours, to_llama_colours = seen[0]
        assert to_gpt_colours['x'] == to_llama_colours['x'] and to_gpt_colours['y'] == to_llama_colours['y']
        assert len(set(to_gpt_colours.values()) | set(to_llama_colours.values())) == 4  # gpt, llama, x, y
        monkeypatch.setattr(report, 'save_png', real)
    # a sweep of one other config alone over the budgets (its report shows its own runs): no gap to
    # draw, its loss instead
    alone = next(iter(report.regime_groups(report.summary_rows([r for r in recs if r['config'] == 'x'])).values()))
    assert 'Gap to' not in report.regime_tables(alone)
    if report.pyplot() is not None:
        png = str(tmp_path / 'alone.png')
        assert report.plot_regime(alone, png, 'title') and os.path.getsize(png) > 10_000


def test_the_equal_flops_table_reads_the_reference_between_its_budgets_and_never_beyond():
    """At equal training FLOPs: at each budget of a config, the reference's loss read at the config's
    FLOPs (linear in log FLOPs between the reference's two budgets around it, seed by seed), the gap
    paired by seed; a config whose FLOPs fall outside the reference's budgets gets '-' there (no
    extrapolation); the FLOPs column is the config's per token against the reference's."""
    recs = []
    for budget, gpt, cheap in ((100, (3.0, 3.2), (2.9, 3.0)), (400, (2.0, 2.4), (2.5, 2.6)),
                               (1600, (1.5, 1.7), (1.9, 2.0))):
        for seed in (1, 2):
            recs.append({**record('gpt', seed, gpt[seed - 1], budget=budget), 'flops': 4.0 * budget})
            # x costs a quarter of gpt's FLOPs per token: its budget b spends gpt's b/4 budget's
            recs.append({**record('x', seed, cheap[seed - 1], budget=budget), 'flops': 1.0 * budget})
    rs = next(iter(report.regime_groups(report.summary_rows(recs)).values()))
    line = next(l for l in report.flops_tables(rs).splitlines() if l.startswith('| x |'))
    cells = line.strip('| ').split(' | ')
    assert cells[1] == '0.25x'
    # budget 100: 100 FLOPs, below gpt's cheapest (400): none; 400: gpt's own 100 budget exactly
    # (x 2.5, 2.6 against 3.0, 3.2); 1600 = gpt's 400 budget (1.9, 2.0 against 2.0, 2.4)
    assert cells[2] == '–'
    assert cells[3] == '-0.5500 ± 0.6353 (n=2) (spans 0)'
    assert cells[4] == '-0.2500 ± 1.9059 (n=2) (spans 0)'
    # between budgets: half-way in log FLOPs between 400 and 1600 (800) is the mean of the two
    g = [r for r in rs if r['config'] == 'gpt']
    assert stats.at_flops(g, 800.0) == pytest.approx({1: 2.5, 2: 2.8})
    assert stats.at_flops(g, 6401.0) is None and stats.at_flops(g, 399.0) is None


def test_equal_flops_at_a_budgets_own_flops_reads_its_seeds_and_a_row_without_flops_is_only_itself_unread():
    """At a budget's own FLOPs the reference's loss is that budget's, over all its seeds (gpt tuned at 400
    with seeds 1-3, its neighbours on seed 1 only): not the seeds the two budgets around it share. A row
    without recorded FLOPs (an older run) gets '–', and the other rows keep their equal-FLOPs gaps."""
    recs = [{**record('gpt', s, 3.0 + s / 10, budget=100), 'flops': 100.0} for s in (1,)]
    recs += [{**record('gpt', s, 2.0 + s / 10, budget=400), 'flops': 400.0} for s in (1, 2, 3)]
    recs += [{**record('gpt', s, 1.5, budget=1600), 'flops': 1600.0} for s in (1,)]
    recs += [{**record('x', s, 1.9 + s / 10 - s * s / 100, budget=400), 'flops': 400.0} for s in (1, 2, 3)]
    recs += [{**record('y', s, 2.0, budget=b), 'flops': None} for s in (1, 2) for b in (100, 400)]
    g = [r for r in report.summary_rows(recs) if r['config'] == 'gpt']
    assert stats.at_flops(g, 400.0) == pytest.approx({1: 2.1, 2: 2.2, 3: 2.3})
    assert stats.at_flops(g, 0) is None  # unknown FLOPs: no reading
    rs = next(iter(report.regime_groups(report.summary_rows(recs)).values()))
    text = report.flops_tables(rs)
    x = next(l for l in text.splitlines() if l.startswith('| x |')).strip('| ').split(' | ')
    # x - gpt at 400, seed by seed: 1.99 - 2.1, 2.06 - 2.2, 2.11 - 2.3: three seeds, not seed 1's alone
    assert x[1] == '1.00x' and x[3].startswith('-0.1467 ± ') and x[3].endswith('(n=3)'), x
    y = next(l for l in text.splitlines() if l.startswith('| y |')).strip('| ').split(' | ')
    assert y[1:] == ['–', '–', '–', '–'], y


def test_a_budget_of_flops_compares_configs_that_ran_their_own_iterations():
    """Under --max_flops each config runs its own max_iters (and lr_decay_iters, warmup): the configs at one
    FLOPs budget are one setting, paired by seed, and the budget's tokens per parameter are gpt's; at a
    budget of iterations a setting that differs in warmup_iters (an ablation) stays a setting of its own."""
    def at(config, seed, val, iters, **kw):
        r = record(config, seed, val, budget=1000, **kw)
        return {**r, 'budget': 'max_flops', 'tokens': 10 * iters * 32,
                'key': {**r['key'], 'budget': 'max_flops', 'max_flops': 1000, 'max_iters': iters,
                        'lr_decay_iters': iters, 'warmup_iters': iters // 10}}
    recs = [at('gpt', s, 3.0 + s / 10, 100) for s in (1, 2)] + [at('x', s, 2.9 + s / 10, 150) for s in (1, 2)]
    recs += [{**r, 'budget_value': 2000, 'key': {**r['key'], 'budget_value': 2000, 'max_flops': 2000}}
             for r in recs]
    rows = report.summary_rows(recs)
    assert all(r.get('vs_gpt', '').startswith('-0.1000 ± 0.0000 (n=2)') for r in rows if r['config'] == 'x')
    assert report.tokens_per_param(rows) == {1000: 100 * 10 * 32 / 3200, 2000: 100 * 10 * 32 / 3200}
    ablation = [record(c, 1, 3.0, budget=100, warmup_iters=w) for c in ('gpt', 'x') for w in (5, 50)]
    assert all('vs_gpt' in r for r in report.summary_rows(ablation) if r['config'] == 'x')


def test_the_regime_plot_draws_a_gaps_band_only_where_three_pairs_stand_behind_it(monkeypatch):
    """A config with three seeds of which two pair with gpt's: no band around its gap to gpt (a 2-pair
    t interval is 12.7 sds wide), a band around its gap to llama, with which all three pair."""
    if report.pyplot() is None:
        pytest.skip('no matplotlib')
    recs = [record(c, s, v + (s if c == 'gpt' else s * s) / 50 + b / 1e4, budget=b) for b in (100, 200)
            for c, v, seeds in (('gpt', 3.0, (1, 2, 3)), ('llama', 2.8, (1, 2, 4)), ('x', 2.9, (1, 2, 4)))
            for s in seeds]
    rs = next(iter(report.regime_groups(report.summary_rows(recs)).values()))
    drawn = {}
    monkeypatch.setattr(report, 'save_png', lambda fig, png, axes, *a: drawn.update(axes=list(axes)))
    report.plot_regime(rs, 'unused.png', 'title')
    to_gpt, to_llama = drawn['axes']
    band = {ax: [c for c in ax.collections if len(c.get_paths())] for ax in (to_gpt, to_llama)}
    assert len(band[to_gpt]) == 0 and len(band[to_llama]) == 1  # x against llama (seeds 1, 2, 4): a band
    # the frame holds what is drawn: the points and 0, with 8% to spare, not the undrawn 2-pair intervals
    gaps = [r['gap'] for r in rs if 'gap' in r] + [0.0]
    spare = 0.08 * (max(gaps) - min(gaps))
    assert to_gpt.get_ylim() == pytest.approx((min(gaps) - spare, max(gaps) + spare))


def test_t_quantiles_and_intervals_have_their_known_values():
    """Student's t: 12.706 at 1 degree of freedom, 4.303 at 2, 2.262 at 9, 1.960 in the limit; the 99%
    point at 1 is 63.657. An interval is mean ± t x sd / sqrt(n); one value has none."""
    for df, t in ((1, 12.7062), (2, 4.3027), (3, 3.1824), (9, 2.2622), (30, 2.0423), (10 ** 6, 1.9600)):
        assert stats.t_quantile(0.975, df) == pytest.approx(t, abs=1e-4)
    assert stats.t_quantile(0.995, 1) == pytest.approx(63.6567, abs=1e-3)
    mean, half, n = stats.interval([1.0, 2.0, 3.0])  # sd 1: 4.3027 / sqrt(3)
    assert (mean, n) == (2.0, 3) and half == pytest.approx(4.3027 / 3 ** 0.5, abs=1e-4)
    assert stats.interval([5.0]) == (5.0, None, 1)
    assert stats.gap_text(-0.1, 0.05, 3) == '-0.1000 ± 0.0500 (n=3)'
    assert stats.gap_text(-0.05, 0.05, 3) == '-0.0500 ± 0.0500 (n=3) (spans 0)'  # 0 on its edge: held
    assert stats.gap_text(0.01, None, 1) == '+0.0100 (n=1)'


def test_a_gap_is_paired_by_seed_with_its_t_interval_and_its_val_sample_noise():
    """Three seeds, gaps -0.10, -0.12, -0.08: -0.1000 ± 4.3027 x 0.02 / sqrt(3) = 0.0497, resolved; a seed
    that only one config has is not paired. The val sample's noise of the gap comes from the per-batch
    val losses: per-batch gaps (averaged over seeds) -0.1, -0.1, -0.1, -0.1 + d: known s.e."""
    recs = []
    for seed, (g, x) in enumerate(((2.0, 1.90), (2.1, 1.98), (2.2, 2.12)), 1):
        recs += [{**record('gpt', seed, g), 'val_batches': [g] * 4},
                 {**record('x', seed, x), 'val_batches': [x, x, x, x + 0.04]}]
    recs.append(record('gpt', 4, 2.5))  # unpaired
    x = next(r for r in report.summary_rows(recs) if r['config'] == 'x')
    assert x['gap'] == pytest.approx(-0.10) and x['gap_n'] == 3
    assert x['gap_half'] == pytest.approx(4.3027 * 0.02 / 3 ** 0.5, abs=1e-5)
    assert x['vs_gpt'] == '-0.1000 ± 0.0497 (n=3)'
    # per-batch gaps, seeds averaged: [d, d, d, d + 0.04] -> sd 0.02, s.e. over 4 batches 0.01
    assert x['eval_se'] == pytest.approx(0.01)


def test_a_plot_of_a_run_with_a_hand_edited_log_is_one_line(tmp_path):
    run = tmp_path / 'out-a'
    run.mkdir()
    (run / 'log.jsonl').write_text('{"iter": 0, "loss": 3.0, "val_loss": 3.1}\n{"iter": 5, "val_loss": "2.0"}\n')
    (run / 'config.json').write_text('{"n_layer": 1}')
    assert "the row of iter 5 has val_loss='2.0', not a number train.py writes" in refusal('--plot', str(run))


def test_a_plotted_runs_progress_is_its_checkpoints_and_a_prev_run_is_named_with_its_folder(tmp_path):
    """A run stopped at iter 10 whose log's last row is iter 0 (a row comes every log_interval) shows 10
    iterations, as its checkpoint says; the run in out-b/prev/ is `out-b/prev`, not `prev`."""
    run = tmp_path / 'out-b' / 'prev'
    run.mkdir(parents=True)
    (run / 'log.jsonl').write_text('{"iter": 0, "loss": 3.0, "val_loss": 3.1, "tokens": 0}\n')
    torch.save({'iter_num': 10, 'tokens_seen': 640, 'finished': False}, run / 'ckpt.pt')
    row = stats.run_summary(str(run))
    assert (row['run'], row['iters'], row['tokens']) == (os.path.join('out-b', 'prev'), 10, 640)
    (run / 'ckpt.pt').unlink()  # no checkpoint: the log's last row is all there is
    assert stats.run_summary(str(run))['iters'] == 0


def test_the_noise_line_says_whose_val_set_scored_the_runs():
    """One val set (eval_seed >= 0): the val-sample noise is shared by the seeds, not in the intervals;
    with eval_seed=-1 each run's own seed drew its val batches, so it is in the intervals."""
    def rows(**key):
        recs = []
        for seed, (g, x) in enumerate(((2.0, 1.90), (2.1, 1.98)), 1):
            val = "each run's own seed" if key else 'eval_seed 0'
            recs += [{**record('gpt', seed, g, **key), 'val_batches': [g] * 4, 'val_set': val},
                     {**record('x', seed, x, **key), 'val_batches': [x, x, x, x + 0.04], 'val_set': val}]
        return report.summary_rows(recs)
    assert 'one val set scores every run, so it is shared' in report.eval_noise_line(rows(), '')
    own = report.eval_noise_line(rows(eval_seed=-1), '')
    assert "drawn from its own seed, so it is in the intervals too" in own and 'one val set' not in own


def test_a_row_is_one_setting_over_distinct_seeds(capsys):
    """Records that differ in a recipe value, the device or a HellaSwag score are not seeds of one row:
    each is its own row, named by what differs; n counts distinct seeds; a second record of one seed
    of one setting (the same run from another folder) is said and not averaged."""
    recs = [record('gpt', 1, 3.80, weight_decay=w) for w in (0.0, 0.2)]  # two recipes, both seed 1
    recs += [record('gpt', 1, 3.70, device='cpu'), record('gpt', 1, 3.75, device='mps')]
    recs += [{**record('gpt', 2, 3.6, hellaswag={'items': 'ab', 'limit': 0}), 'hellaswag_acc_norm': 0.3},
             record('gpt', 2, 3.65)]
    rows = report.summary_rows(recs)
    assert all(r['n'] == 1 for r in rows) and len(rows) == 6
    labels = sorted(r['label'] for r in rows)
    assert len(set(labels)) == 6  # every row named apart
    assert any('weight_decay=0.0' in lab for lab in labels) and any('weight_decay=0.2' in lab for lab in labels)
    assert any('device=cpu' in lab for lab in labels) and any('hellaswag=' in lab for lab in labels)
    assert any('device=auto' in lab for lab in labels)  # a setting a record leaves at its default is named by it
    same = [record('gpt', 1, 3.80), {**record('gpt', 1, 3.90), 'data_dir': 'elsewhere'},
            record('gpt', 2, 3.70)]
    capsys.readouterr()
    rows = report.summary_rows(same)
    assert len(rows) == 1 and rows[0]['n'] == 2 and rows[0]['val'] == pytest.approx(3.75)
    assert 'recorded twice' in capsys.readouterr().err
    # two corpora prepared into one folder: their fingerprints differ, so do their rows
    rows = report.summary_rows([record('gpt', 1, 3.8), {**record('gpt', 2, 3.7), 'key': {
        **record('gpt', 2, 3.7)['key'], 'data': 'other'}}])
    assert len(rows) == 2 and all(r['n'] == 1 for r in rows)


def test_records_scored_on_another_val_set_are_never_averaged_with_one_val_set(tmp_path):
    """A record from before eval_seed (each run's seed drew its val batches) is read as eval_seed=-1: its
    own row, never a seed of today's; and its key never matches a run planned today."""
    old = record('gpt', 2, 3.0)
    del old['key']['eval_seed']
    path = str(tmp_path / 'r.jsonl')
    for r in (record('gpt', 1, 2.9), old):
        stats.append_record(path, r)
    recs = stats.read_results(path)
    assert recs[1]['key']['eval_seed'] == -1 and "each run's own seed" in recs[1]['val_set']
    rows = report.summary_rows(recs)
    assert len(rows) == 2 and {r['n'] for r in rows} == {1}
    assert sorted(r['label'] for r in rows) == ['gpt (eval_seed=-1)', 'gpt (eval_seed=0)']
    today = plan(tmp_path)
    assert today.key['eval_seed'] == 0 and '"eval_seed": 0' in stats.run_id(today.key)
    assert stats.run_id({k: v for k, v in today.key.items() if k != 'eval_seed'}) != stats.run_id(today.key)


def test_the_transfer_view_marks_gaps_that_flip_halve_or_double_between_shapes():
    """Two shapes, budgets at matching tokens per parameter (1.25x apart at most): each config's gap at
    each shape and its change: holds, flips, halves, doubles; '(unresolved)' where an interval spans 0."""
    recs = []
    small = {'gpt': (3.0, 3.1, 3.2), 'a': (2.8, 2.9, 3.0), 'b': (2.9, 3.0, 3.1), 'c': (2.95, 3.05, 3.15),
             'd': (2.9, 3.15, 3.1)}
    large = {'gpt': (2.5, 2.6, 2.7), 'a': (2.3, 2.4, 2.5), 'b': (2.6, 2.7, 2.8), 'c': (2.48, 2.58, 2.68),
             'd': (2.3, 2.4, 2.5)}
    for size, losses, budget in (('1x32', small, 100), ('2x64', large, 200)):
        for name, vals in losses.items():
            for seed, v in enumerate(vals, 1):
                # tokens per parameter: 10 x budget x width / (100 x width) = budget / 10: 10 and 20
                recs.append(record(name, seed, v, budget=budget, size=size))
                recs.append({**record(name, seed, v + 0.5, budget=budget * 2, size=size)})
    rows = report.summary_rows(recs)
    groups = report.transfer_groups(rows)
    assert len(groups) == 1
    text = report.transfer_tables(next(iter(groups.values())))
    line = {(l.split(' | ')[0][2:], l.split(' | ')[1]): l for l in text.split('Gap to llama')[0].splitlines()
            if l.startswith('| ') and not l.startswith('| config')}
    # tokens per parameter are budget / 10: the small shape's 10 and 20, the large one's 20 and 40; only
    # 20 is within 1.25x at both
    assert ('a', '20.0') in line and ('a', '10.0') not in line and ('a', '40.0') not in line
    # each mark with the change (larger shape's gap - smaller's) and its Welch interval
    assert line['a', '20.0'].endswith('| holds; Δ +0.0000 ± 0.0000 |')     # -0.2 at both
    assert line['b', '20.0'].endswith('| flips; Δ +0.2000 ± 0.0000 |')     # -0.1, then +0.1
    assert line['c', '20.0'].endswith('| halves; Δ +0.0300 ± 0.0000 |')    # -0.05, then -0.02
    # d: (-0.1, +0.05, -0.1) spans 0 at the small shape (-0.05, sd 0.0866, ± 4.303 x 0.05 = 0.2151), then
    # -0.2 with no spread: doubles, unresolved; Welch's df is 2 here, its half-width the small side's
    assert line['d', '20.0'].endswith('| doubles (unresolved); Δ -0.1500 ± 0.2151 |')
def test_the_transfer_view_at_equal_flops_reads_each_shape_against_its_own_reference():
    """At equal training FLOPs each shape's gap is read against the reference's runs at that shape
    (its loss at the config's FLOPs, never beyond its budgets), marked from shape to shape like the
    equal-tokens gap, with the config's FLOPs per token against the reference's at each shape: a block
    cheaper than gpt at one shape and dearer at the other turns a held gap into a flip."""
    gpt = {'1x32': (3.0, 2.5, 2.0), '2x64': (2.8, 2.3, 1.8)}
    x = {'1x32': (2.9, 2.6, 2.3), '2x64': (2.6, 2.45, 2.0)}
    per_token = {'1x32': 2.0, '2x64': 8.0}  # x's FLOPs per budget unit; gpt's is 4.0 at both
    recs = [{**record(name, seed, losses[size][i] + 0.1 * (seed - 1), budget=budget, size=size),
             'flops': (4.0 if name == 'gpt' else per_token[size]) * budget}
            for name, losses in (('gpt', gpt), ('x', x)) for size in gpt
            for i, budget in enumerate((100, 200, 400)) for seed in (1, 2, 3)]
    group, = report.transfer_groups(report.summary_rows(recs)).values()
    tokens, flops = report.transfer_tables(group).split('at equal training FLOPs')[:2]
    # equal tokens at 20 tokens per parameter: +0.10 (2.6 - 2.5), then +0.15 (2.45 - 2.3)
    assert '| x | 20.0 | +0.1000 ± 0.0000 (n=3) | +0.1500 ± 0.0000 (n=3) | holds; Δ +0.0500 ± 0.0000 |' in tokens
    # equal FLOPs: at 1x32 x's budget 200 spends gpt's budget 100 (2.6 - 3.0); at 2x64, gpt's 400 (2.45 - 1.8)
    assert ('| x | 20.0 | 0.50x / 2.00x | -0.4000 ± 0.0000 (n=3) | +0.6500 ± 0.0000 (n=3) | flips; '
            'Δ +1.0500 ± 0.0000 |') in flops
    # 10 (1x32: fewer FLOPs than gpt's smallest run) and 40 (2x64: more than its largest) have one shape
    assert '| x | 10.0 |' not in flops and '| x | 40.0 |' not in flops
    # older records of one shape, no FLOPs recorded: the equal-tokens view stays, no equal-FLOPs one
    older = [{**r, 'flops': 0} if r['size'] == '1x32' else r for r in recs]
    group, = report.transfer_groups(report.summary_rows(older)).values()
    text = report.transfer_tables(group)
    assert '| x | 20.0 | +0.1000 ± 0.0000 (n=3) |' in text and 'at equal training FLOPs' not in text


def shape_records(size, data, budget, losses, **settings):
    """A shape's records (seeds 1..3 of each config at one budget), its corpus named by `data`."""
    return [{**record(name, seed, v, budget=budget, size=size, **{**settings, 'data': data}), 'data_dir': data}
            for name, vals in losses.items() for seed, v in enumerate(vals, 1)]


def test_the_transfer_view_spans_shapes_that_also_change_corpus_batch_and_machine(tmp_path, capsys):
    """A second shape studied elsewhere (another corpus, batch and device, in its own results file):
    --report --results=a,b reads both, the transfer view pairs the shapes and says what else differs;
    two corpora at one size are two shapes named by their folders; a sweep that trains writes one file."""
    small, large = [], []
    for budget, worse in ((200, 0.0), (100, 0.5)):
        small += shape_records('1x32', 'stdlib', budget, {'gpt': (3.0, 3.1, 3.2), 'x': (2.8, 2.9, 3.0)},
                               batch_size=8, device='cpu')
        large += shape_records('2x64', 'site', budget, {'gpt': (2.5, 2.6, 2.7), 'x': (2.6, 2.7, 2.8)},
                               batch_size=128, device='cuda', dtype='bfloat16')
    a, b = tmp_path / 'a.jsonl', tmp_path / 'b.jsonl'
    a.write_text(''.join(json.dumps(r) + '\n' for r in small))
    b.write_text(''.join(json.dumps(r) + '\n' for r in large + small[:1]))  # one run in both: read once
    sweep.main(['--report', f'--results={a},{b}', f'--png={tmp_path / "p.png"}'])
    out = capsys.readouterr().out
    assert '### transfer across shapes 1x32, 2x64' in out
    assert '| x | 20.0 | -0.2000 ± 0.0000 (n=3) | +0.1000 ± 0.0000 (n=3) | flips; Δ +0.3000 ± 0.0000 |' in out
    assert ('The shapes differ in more than size: 1x32: stdlib, batch 8 x' in out and
            '2x64: site, batch 128 x' in out and 'cuda bfloat16' in out)
    assert out.count('### scaling') == 2  # loss against FLOPs is one corpus's: a plot each, not drawn over
    assert len(set(tmp_path.glob('p*scaling*.png'))) == 2
    other = shape_records('1x32', 'site', 200, {'gpt': (2.9, 3.0, 3.1), 'x': (2.85, 2.95, 3.05)}, batch_size=8,
                          device='cpu')
    group, = report.transfer_groups(report.summary_rows(small + other)).values()
    assert {r['shape'] for r in group} == {'1x32 (stdlib)', '1x32 (site)'}
    # the rows a table names apart by their corpus ('x (data=site)') are one config across the shapes here
    text = report.transfer_tables(group)
    assert '| x | 20.0 | -0.0500 ± 0.0000 (n=3) | -0.2000 ± 0.0000 (n=3) | doubles; Δ -0.1500 ± 0.0000 |' in text
    # the same size on another corpus is another shape, not a larger one
    assert 'what it does from 1x32 (site) to each other shape' in text and 'larger shape' not in text
    group, = report.transfer_groups(report.summary_rows(small + large)).values()
    assert 'what it does from 1x32 to each larger shape' in report.transfer_tables(group)
    assert 'read together by --report only' in refusal('--configs=gpt', f'--results={a},{b}', '--max_iters=2')


def test_a_view_with_no_rows_prints_no_table():
    """A schedule or transfer view where no config has a gap at both (gpt alone under cosine) prints
    nothing, not a table of headings."""
    recs = [{**r, 'schedule': s} for s, vals in (('wsd', {'gpt': (2.0, 2.1), 'x': (1.9, 2.0)}),
                                                  ('cosine', {'gpt': (2.1, 2.2)}))
            for name, losses in vals.items() for seed, v in enumerate(losses, 1)
            for r in [record(name, seed, v, budget=100, lr_schedule=s)]]
    for g in report.schedule_groups(report.summary_rows(recs)).values():
        text = report.schedule_tables(g)
        assert '| gpt | 0.001, 2.0500' in text and '| vs gpt |' not in text and '| vs llama |' not in text
    # every config another architecture under cosine (bias=False): a view pairs nothing, and says no table
    apart = [{**r, 'key': {**r['key'], 'bias': False}} if r['schedule'] == 'cosine' else r for r in recs]
    for g in report.schedule_groups(report.summary_rows(apart)).values():
        assert report.schedule_tables(g) == ''
    lone = shape_records('1x32', 'fp', 200, {'gpt': (3.0, 3.1), 'x': (2.9, 3.0)}) + \
        shape_records('2x64', 'fp', 200, {'gpt': (2.5, 2.6)})
    for g in report.transfer_groups(report.summary_rows(lone)).values():
        assert report.transfer_tables(g) == ''


def test_several_results_files_never_resolve_a_difference_or_a_missing_file_in_silence(tmp_path, capsys):
    """--report --results=a,b: a run in both with different values is read once and said; a file of the
    list that is not there is one line, not left out."""
    a, b = str(tmp_path / 'a.jsonl'), str(tmp_path / 'b.jsonl')
    stats.append_record(a, record('gpt', 1, 2.0))
    stats.append_record(b, record('gpt', 1, 2.5))  # the same run, another val loss
    stats.append_record(b, record('gpt', 2, 2.1))
    assert [(r['seed'], r['val_loss']) for r in stats.read_many(f"{a},{b}")] == [(1, 2.0), (2, 2.1)]
    assert f"{b} and {a} record one run with different values (gpt, seed 1" in capsys.readouterr().err
    with pytest.raises(UsageError, match=r"--results: '.*nope.jsonl' not found \(of "):
        stats.read_many(f"{a},{tmp_path / 'nope.jsonl'}")


def test_a_whole_last_record_without_its_newline_stays_at_the_next_append(tmp_path, capsys):
    """A tool that drops a file's final newline leaves a whole record: the next append gives it its
    newline and keeps it; only a line that does not parse is a cut-short line."""
    path = str(tmp_path / 'r.jsonl')
    stats.append_record(path, record('gpt', 1, 2.0))
    with open(path, 'rb') as f:
        text = f.read()
    with open(path, 'wb') as f:
        f.write(text.rstrip(b'\n'))
    stats.append_record(path, record('gpt', 2, 2.1))
    assert 'moved' not in capsys.readouterr().err and not os.path.exists(path + '.partial')
    assert [r['seed'] for r in stats.read_results(path)] == [1, 2]


def test_a_cut_short_last_line_is_set_aside_before_the_next_append(tmp_path, capsys):
    path = str(tmp_path / 'r.jsonl')
    stats.append_record(path, record('gpt', 1, 2.0))
    whole = open(path, 'rb').read()
    with open(path, 'ab') as f:
        f.write(json.dumps(record('gpt', 2, 2.1)).encode()[:40])  # a writer killed mid-line
    assert [r['seed'] for r in stats.read_results(path)] == [1]  # (read_jsonl's rule: a last line cut short)
    stats.append_record(path, record('gpt', 3, 2.2))
    err = capsys.readouterr().err
    assert f"moved to {path}.partial" in err
    assert [r['seed'] for r in stats.read_results(path)] == [1, 3]  # the next record is whole, not glued
    assert open(path, 'rb').read().startswith(whole) and open(path, 'rb').read().endswith(b'\n')
    assert open(path + '.partial', 'rb').read() == json.dumps(record('gpt', 2, 2.1)).encode()[:40] + b'\n'
    stats.append_record(path, record('gpt', 4, 2.3))  # a whole file: nothing set aside
    assert [r['seed'] for r in stats.read_results(path)] == [1, 3, 4] and 'moved' not in capsys.readouterr().err


def test_a_line_that_is_not_a_whole_record_is_named(tmp_path):
    """A cut-short record glued to a whole one (what appends did before they set cut-short lines aside)
    is not JSON: like any line before the last that is not a record, an error naming it."""
    path = tmp_path / 'r.jsonl'
    path.write_bytes(json.dumps(record('gpt', 1, 2.0)).encode()[:30] + json.dumps(record('gpt', 2, 2.1)).encode()
                     + b'\n' + json.dumps(record('gpt', 3, 2.2)).encode() + b'\n')
    with pytest.raises(UsageError, match=r"line 1 is not a sweep results record \(not JSON\)"):
        stats.read_results(str(path))
    path.write_text('{"kind": "sweep", "oops": 1}\n')  # not a record at all: still an error
    with pytest.raises(UsageError, match="line 1 is not a sweep results record .it lacks 'key'"):
        stats.read_results(str(path))
    for field in ('val_loss', 'config', 'seed'):  # a record lacking a field a report needs: named
        path.write_text(json.dumps({k: v for k, v in record('gpt', 1, 2.0).items() if k != field}) + '\n')
        with pytest.raises(UsageError, match=f"line 1 is not a sweep results record .it lacks '{field}'"):
            stats.read_results(str(path))


def test_two_records_of_one_run_are_read_once_and_said(tmp_path, capsys):
    path = str(tmp_path / 'r.jsonl')
    for seed, val in ((1, 2.0), (2, 2.1), (1, 2.5)):
        stats.append_record(path, record('gpt', seed, val))
    got = stats.read_results(path)
    assert [(r['seed'], r['val_loss']) for r in got] == [(1, 2.0), (2, 2.1)]
    assert 'records 1 run(s) twice, lines 3 (as line 1)' in capsys.readouterr().err


# -----------------------------------------------------------------------------
# one results file, one sweep at a time; finished runs only

def test_a_run_that_did_not_finish_its_budget_is_not_recorded(tiny_data, tmp_path, capsys):
    """The record comes from the checkpoint's own state: a run that stops short of its planned
    iterations (here a config that stops it by tokens first) is a failure, not a record."""
    cfg = sweep.SweepConfig(out_prefix=str(tmp_path / 'runs'), max_iters=['8'])
    p = sweep.plan_run(os.path.join(HERE, 'configs', 'gpt.py'), cfg,
                       [*TINY, f'--data_dir={tiny_data}', '--eval_interval=4'], seed=1, lr=1e-3, size=None)
    p.cmd.append('--max_tokens=128')  # 2 iterations of 4 x 16
    with guards.Signals('', forward=True) as stopper:
        runs = sweep.Sweep(cfg, str(tmp_path / 'r.jsonl'), stopper)
        assert runs.run(p) is None
    assert runs.failed and not os.path.exists(tmp_path / 'r.jsonl')
    assert 'ended at iter 2 without finishing its 8 iterations; not recorded' in capsys.readouterr().err


def test_a_corpus_prepared_anew_during_a_sweep_is_not_recorded_under_the_old_data(tmp_path, capsys):
    """The sweep plans a run on data A (its key holds A's fingerprint); the folder is prepared anew (data B)
    before the run trains: the run trained on B is not recorded under A's key, and the sweep says why. A
    record names the data its checkpoint trained on."""
    import prepare
    corpus = tmp_path / 'corpus.txt'
    corpus.write_text('the cat sat on the mat. ' * 400)
    data = tmp_path / 'data'
    prepare.main([f'--input={corpus}', f'--out_dir={data}'])
    cfg = sweep.SweepConfig(out_prefix=str(tmp_path / 'runs'), max_iters=['4'])
    plans = [sweep.plan_run(os.path.join(HERE, 'configs', 'gpt.py'), cfg, [*TINY, f'--data_dir={data}'],
                            seed=s, lr=1e-3, size=None) for s in (1, 2)]
    results = str(tmp_path / 'r.jsonl')
    with guards.Signals('', forward=True) as stopper:
        runs = sweep.Sweep(cfg, results, stopper)
        assert runs.run(plans[0]) is not None  # trained on A: recorded under A
        corpus.write_text('a dog ran under a log. ' * 400)
        prepare.main([f'--input={corpus}', f'--out_dir={data}'])  # B, between two runs of the sweep
        assert runs.run(plans[1]) is None
    recs = stats.read_results(results)
    assert len(recs) == 1 and recs[0]['seed'] == 1 and runs.failed == [plans[1]]
    assert 'was prepared anew during the sweep; not recorded: rerun the sweep' in capsys.readouterr().err


def test_a_failed_run_is_said_by_its_own_error_line_and_the_command_that_reruns_it(tmp_path):
    cmd = [sys.executable, os.path.join(HERE, 'train.py'), '--no_such_key=1']
    with guards.Signals('', forward=True) as stopper:
        runs = sweep.Sweep(sweep.SweepConfig(out_prefix=str(tmp_path / 'runs')), str(tmp_path / 'r.jsonl'), stopper)
        ok, why = runs.train(cmd, resume=False)
    assert not ok
    assert why.splitlines() == ["exit 2: error: unknown key 'no_such_key'; run with --help to list the keys",
                                '  rerun: ' + ' '.join(cmd)]


def test_advice_a_sweep_cannot_take_is_said_as_a_sweep_can(tmp_path):
    """train.py's --new_data=True advice cannot be followed inside a sweep: the sweep says what can."""
    fake = tmp_path / 'train_fake.py'
    fake.write_text('import sys\nprint("error: d holds other data, but out/ckpt.pt was trained on x; resume on '
                    'that data, or pass --new_data=True to go on", file=sys.stderr)\nsys.exit(2)\n')
    cmd = [sys.executable, str(fake), f'--out_dir={tmp_path / "run"}']
    with guards.Signals('', forward=True) as stopper:
        runs = sweep.Sweep(sweep.SweepConfig(out_prefix=str(tmp_path / 'runs')), str(tmp_path / 'r.jsonl'), stopper)
        ok, why = runs.train(cmd, resume=True)
    assert not ok and '--new_data' not in why
    assert why == (f"exit 2: the data in its data_dir changed under this run's checkpoint in {tmp_path / 'run'}; "
                   "prepare the data it was trained on, or rerun the sweep to train it anew on this data (a scratch "
                   "start: the run there goes to prev/ by train.py's rule)")


def test_threads_set_a_cpu_runs_thread_count_and_its_key(tmp_path, monkeypatch):
    """--threads=N gives each CPU run N threads whatever --jobs is (a grid at 3 jobs and its seeds at 1 stay
    one setting); 0 splits the cores between the jobs; the count is in the key (a CPU run's sums follow it)."""
    monkeypatch.setattr(sweep, 'cores', lambda: 4)
    assert plan(tmp_path, jobs=3, threads=1).key['threads'] == plan(tmp_path, jobs=1, threads=1).key['threads'] == 1
    assert plan(tmp_path, jobs=2).key['threads'] == 2 and plan(tmp_path, jobs=1).key['threads'] == 4
    assert 'threads must not be negative' in refusal('--threads=-1', '--configs=gpt')


def test_a_recipe_or_flag_that_asks_init_from_is_one_line(tmp_path):
    """A sweep starts and resumes its runs itself: init_from from a flag or a recipe is refused up front, not
    in every run with advice the sweep cannot follow."""
    with pytest.raises(UsageError, match=r"gpt: init_from='resume': a sweep starts each run itself"):
        plan(tmp_path, ['--init_from=resume'])
    recipe = tmp_path / 'recipe.py'
    recipe.write_text("init_from = 'resume'\n")
    with pytest.raises(UsageError, match="leave init_from out"):
        plan(tmp_path, recipe=str(recipe))


def test_two_sweeps_on_one_file_take_turns_and_record_each_run_once_and_whole(tiny_data, tmp_path):
    """One lock per results file: a second sweep on it waits (said) for the first to end, then finds
    recorded what the first trained and trains nothing again; a stop while it waits leaves nothing."""
    args = sweep_args(tiny_data, tmp_path, '--seeds=2', '--learning_rate=1e-3,2e-3', '--max_iters=12',
                      '--eval_interval=4', '--jobs=2')
    first = subprocess.Popen([sys.executable, 'sweep.py', *args], cwd=HERE, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    while not (tmp_path / '.r.jsonl.lock').exists():  # its lock taken
        time.sleep(0.05)
    second = subprocess.Popen([sys.executable, 'sweep.py', *args], cwd=HERE, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    errs = [p.communicate(timeout=300)[1] for p in (first, second)]
    assert first.returncode == second.returncode == 0, errs
    recs = stats.read_results(str(tmp_path / 'r.jsonl'))
    assert len(recs) == 4 and len({stats.run_id(r['key']) for r in recs}) == 4
    assert all(r['iters'] == 12 and r['curve'][-1][0] == 12 for r in recs)
    assert all(r['command'].startswith('train.py configs/') for r in recs)  # the project's paths, relative
    assert f"another sweep is writing {tmp_path / 'r.jsonl'}; waiting" in errs[1], errs[1]
    assert '0 runs to do (4 already in' in errs[1] and 'twice' not in ''.join(errs), errs[1][-3000:]


# -----------------------------------------------------------------------------
# Ctrl-C, and what comes back after it

@pytest.mark.parametrize('how', ['parent', 'group'])
def test_ctrl_c_stops_the_sweep_its_runs_save_and_a_rerun_continues(tiny_data, tmp_path, how):
    args = sweep_args(tiny_data, tmp_path, '--seeds=3', '--max_iters=400', '--eval_interval=100', '--jobs=2',
                      '--learning_rate=1e-3')
    proc = subprocess.Popen([sys.executable, 'sweep.py', *args], cwd=HERE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.time() + 120  # both runs in their loops (a step row each), far from their end: a
    while time.time() < deadline and sum(  # fixed wait lets a fast machine finish them first
            len(open(p).read().splitlines()) >= 2 for p in (tmp_path / 'runs').glob('*/log.jsonl')) < 2:
        time.sleep(0.05)
    (os.kill if how == 'parent' else os.killpg)(proc.pid, signal.SIGINT)
    err = proc.communicate(timeout=120)[1]
    assert proc.returncode == 130, err
    assert 'stopping: 2 running train.py runs save their checkpoints' in err and 'continue with: python sweep.py' in err
    time.sleep(0.5)
    alive = subprocess.run(['pgrep', '-f', str(tmp_path / 'runs')], capture_output=True, text=True).stdout
    assert alive == ''  # no train.py left behind
    saved = list((tmp_path / 'runs').glob('*/ckpt.pt'))
    assert saved  # each stopped run saved where it stood, and the stop line counts those files
    assert f" not finished (their progress kept in {len(saved)} checkpoint(s))" in err
    if how == 'parent':  # what comes back after the stop: once (the group's), a stop is a stop
        return
    again = cli(*sweep_args(tiny_data, tmp_path, '--seeds=3', '--max_iters=400', '--eval_interval=100',
                            '--jobs=2', '--learning_rate=1e-3'))
    assert again.returncode == 0, again.stderr
    recs = stats.read_results(str(tmp_path / 'r.jsonl'))
    assert sorted(r['seed'] for r in recs) == [1, 2, 3] and all(r['iters'] == 400 for r in recs)
    # each stopped run resumed where it stood (exact resume: test_train.py): a scratch start would have
    # put it in prev/
    assert not [p for p in saved if (p.parent / 'prev').exists()]


# -----------------------------------------------------------------------------
# warmup-stable-decay: branches equal straight runs

def test_wsd_branches_equal_straight_runs_and_share_one_constant_lr_run(tiny_data, tmp_path):
    args = sweep_args(tiny_data, tmp_path, '--lr_schedule=wsd', '--max_iters=10,20', '--eval_interval=10',
                      '--learning_rate=2e-3', '--jobs=1')
    r = cli(*args)
    assert r.returncode == 0, r.stderr
    assert '2 runs to do (1 constant-lr runs branched into cooldowns)' in r.stderr
    recs = sorted(stats.read_results(str(tmp_path / 'r.jsonl')), key=lambda r: r['budget_value'])
    assert [r['iters'] for r in recs] == [10, 20]
    assert [r['branched_from'].split(' at iter ')[1] for r in recs] == ['8', '16']  # a fifth: cooldown
    trunks = list((tmp_path / 'runs').glob('*-wsd-trunk-*'))
    assert len(trunks) == 1
    for rec in recs[-1:]:  # the straight run a record's command names gives the same loss, bit for bit: the
        # longer budget's (its trunk stopped at 8 for the first branch, resumed to 16, then its cooldown)
        cmd = [a for a in rec['command'].split() if not a.startswith('--out_dir=')]
        out = tmp_path / f"straight{rec['iters']}"
        p = subprocess.run([sys.executable, *cmd, f'--out_dir={out}'], cwd=HERE, capture_output=True, text=True,
                           timeout=120, env={**os.environ, 'OMP_NUM_THREADS': str(rec['key']['threads'])})
        assert p.returncode == 0, p.stderr
        rows = [json.loads(line) for line in open(out / 'log.jsonl')]
        assert [r['val_loss'] for r in rows if 'val_loss' in r][-1] == rec['val_loss']
    again = cli(*args)
    assert again.returncode == 0 and '0 runs to do' in again.stderr


# -----------------------------------------------------------------------------
# a sweep that cannot mislead: matched parameters, curves, edges, its own runs

def test_a_match_that_cannot_come_within_one_percent_is_an_error_saying_which_way_to_go():
    """gMLP at 2x64 with a 256-byte context: its 256 x 256 spatial weights per layer outweigh the GPT-2
    block it is matched to (+13%); the error says so and which way a shape matches (wider, shorter)."""
    from model import GPTConfig, count_params, matched_width
    cfg = GPTConfig(n_layer=2, n_embd=64, n_head=2, block_size=256, vocab_size=256, block='gmlp', pos_emb='none',
                    match_params='gpt', bias=False)
    with pytest.raises(ValueError, match=r"gmlp cannot come within 1% of the GPT-2 block's 131,392 parameters at "
                                         r"n_layer=2, n_embd=64, block_size=256 \(closest: 148,546, \+13%\); a wider "
                                         r"n_embd or a shorter block_size comes closer, or set match_params=''"):
        matched_width(cfg)
    for shape in (dict(n_embd=96, n_head=3), dict(block_size=128)):  # wider, or shorter: they match
        ok = GPTConfig(**{**vars(cfg), **shape})
        gpt = GPTConfig(**{**vars(ok), 'block': 'transformer', 'pos_emb': 'learned', 'match_params': ''})
        assert abs(count_params(ok) / count_params(gpt) - 1) <= 0.01


def test_a_sweep_at_a_shape_a_config_cannot_match_is_one_line(tiny_data, tmp_path):
    said = refusal('--configs=gpt,gmlp', '--n_layer=2', '--n_embd=64', '--n_head=2', '--block_size=256',
                   f'--data_dir={tiny_data}', '--max_iters=2', f'--results={tmp_path / "r.jsonl"}')
    assert said.startswith("error: gmlp: match_params='gpt': gmlp cannot come within 1%")
    assert not (tmp_path / 'r.jsonl').exists()


def test_tables_mark_a_config_whose_parameters_are_not_matched(tmp_path, capsys):
    path = str(tmp_path / 'r.jsonl')
    for config, params in (('gpt', 1000), ('wide', 1300), ('near', 1005)):
        stats.append_record(path, {**record(config, 1, 2.0), 'params': params})
    report.sweep_report(sweep.SweepConfig(), path, str(tmp_path / 'p.png'))
    out = capsys.readouterr().out
    assert '| wide | 1,300 (+30% vs gpt: not matched) |' in out
    assert '| near | 1,005 |' in out


def test_a_best_lr_at_the_edge_of_its_grid_is_flagged_with_the_flag_that_extends_it(tmp_path, capsys):
    path = str(tmp_path / 'r.jsonl')
    for lr, val in ((1e-3, 2.0), (2e-3, 1.9), (4e-3, 1.8)):  # still falling at the largest lr
        stats.append_record(path, record('gpt', 1, val, lr=lr))
    rows = report.sweep_report(sweep.SweepConfig(), path, str(tmp_path / 'p.png'))
    assert rows[0]['edge'] == 'top' and not rows[0]['tuned']
    assert '| 0.004 (best of 3 on seed 1; top of grid: --extend_lr) |' in capsys.readouterr().out


@pytest.mark.parametrize('best, added', [(8e-3, [8e-3, 1.6e-2]), (2.5e-4, [5e-4, 2.5e-4, 1.25e-4]),
                                         (2e-3, [])])
def test_extend_lr_goes_beyond_the_grids_edge_until_the_best_lr_is_inside(tmp_path, capsys, monkeypatch,
                                                                         best, added):
    """--extend_lr: while a best lr is the largest (smallest) tried, the same seeds at twice (half) it,
    each extension said with what it runs; a best inside the grid adds nothing. The runs are faked:
    val loss a parabola in log2 lr with its minimum at `best`."""
    def fake_run_all(sw, plans, results_path, stopper):
        for p in plans:
            f = p.fields
            loss = 2.0 + 0.01 * math.log2(f['lr'] / best) ** 2
            stats.append_record(results_path, {**record('gpt', f['seed'], loss, lr=f['lr'],
                                                        budget=f['budget_value']), 'key': p.key})
        return True
    monkeypatch.setattr(sweep, 'run_all', fake_run_all)
    cfg = sweep.SweepConfig(out_prefix=str(tmp_path / 'runs'), extend_lr=True)
    grid = [sweep.plan_run(os.path.join(HERE, 'configs', 'gpt.py'), cfg, [], seed=1, lr=lr, size=None)
            for lr in (1e-3, 2e-3, 4e-3)]
    ok, plans = sweep.run_planned(cfg, grid, [], str(tmp_path / 'r.jsonl'), None)
    assert ok and [p.fields['lr'] for p in plans[3:]] == pytest.approx(added)
    said = [l for l in capsys.readouterr().err.splitlines() if l.startswith('extending the lr grid')]
    assert len(said) == len(added)
    for line, lr in zip(said, added):
        assert re.fullmatch(rf"extending the lr grid: 1 run\(s\) whose best lr is the grid's edge: gpt \S+ at "
                            rf"lr {lr:g} \(max_iters=\d+\)", line), line


def test_an_extended_grid_is_the_sweeps_report_on_a_rerun_and_a_failed_run_ends_no_other_extension(
        tiny_data, tmp_path, capsys, monkeypatch):
    """--extend_lr: a run that fails (llama's 8e-3 diverges) ends no other config's extension (gpt's goes on
    to 3.2e-2); a rerun, which trains nothing new, reports the grid as extended (gpt's best 0.016 of 6
    lrs), not the grid its command names. The runs are faked: val loss a parabola in log2 lr."""
    def fake_run_all(sw, plans, results_path, stopper):
        done = {stats.run_id(r['key']) for r in stats.read_results(results_path)}
        ok = True
        for p in plans:
            f = p.fields
            if f['config'] == 'llama' and f['lr'] > 5e-3:
                ok = False  # diverged: a failed run, not recorded
            elif stats.run_id(p.key) not in done:
                loss = 2.0 + 0.01 * math.log2(f['lr'] / (1.6e-2 if f['config'] == 'gpt' else 4e-3)) ** 2
                stats.append_record(results_path, {**record(f['config'], f['seed'], loss, lr=f['lr'],
                                                            budget=f['budget_value']), 'key': p.key})
        return ok
    monkeypatch.setattr(sweep, 'run_all', fake_run_all)
    args = [*sweep_args(tiny_data, tmp_path, '--learning_rate=1e-3,2e-3,4e-3', '--extend_lr', '--max_iters=10'),
            '--configs=llama']  # (a repeated list flag appends: gpt and llama)
    for _ in range(2):  # the sweep, then its rerun
        with pytest.raises(UsageError, match='some runs failed'):
            sweep.main(args)
        lrs = sorted(r['lr'] for r in stats.read_results(str(tmp_path / 'r.jsonl')) if r['config'] == 'gpt')
        assert lrs == pytest.approx([1e-3, 2e-3, 4e-3, 8e-3, 1.6e-2, 3.2e-2])
        assert '| gpt | ' in (out := capsys.readouterr().out) and '| 0.016 (best of 6 on seed 1) |' in out, out


def test_a_tuned_sweep_waiting_for_another_on_its_results_file_plans_from_what_that_one_recorded(
        tiny_data, tmp_path, capsys, monkeypatch):
    """A sweep with --learning_rate=tuned that waits for another sweep writing the same results file (its
    lr grid) plans once it holds the file: its lr is that grid's best, not an error or a stale pick. The
    runs are faked; the other sweep runs while this one asks for the file."""
    def fake_run_all(sw, plans, results_path, stopper):
        for p in plans:
            loss = 2.0 + 0.01 * math.log2(p.fields['lr'] / 4e-3) ** 2
            stats.append_record(results_path, {**record('gpt', 1, loss, lr=p.fields['lr'],
                                                        budget=p.fields['budget_value']), 'key': p.key})
        return True
    hold, waited = sweep.hold, []

    def held_by_another_sweep_meanwhile(path, **kw):
        if not waited:  # (the other sweep holds it, runs its grid, gives it back)
            waited.append(path)
            sweep.main(sweep_args(tiny_data, tmp_path, '--learning_rate=1e-3,4e-3,1.6e-2'))
        return hold(path, **kw)
    monkeypatch.setattr(sweep, 'run_all', fake_run_all)
    monkeypatch.setattr(sweep, 'hold', held_by_another_sweep_meanwhile)
    sweep.main(sweep_args(tiny_data, tmp_path, '--learning_rate=tuned'))
    assert waited and '--learning_rate=tuned is 0.004, the best of this setting' in capsys.readouterr().err


def test_a_sweep_draws_curves_of_eight_points_and_reports_only_its_own_runs(tiny_data, tmp_path):
    results = tmp_path / 'r.jsonl'
    stats.append_record(str(results), {**record('amlp', 7, 9.9), 'data_dir': 'another', 'key': {'other': 1}})
    r = cli(*sweep_args(tiny_data, tmp_path, '--max_iters=40', '--learning_rate=2e-3'))
    assert r.returncode == 0, r.stderr
    rec = next(x for x in stats.read_results(str(results)) if x['config'] == 'gpt')
    assert [p[0] for p in rec['curve']] == [0, 5, 10, 15, 20, 25, 30, 35, 40]  # every 40 // 8 iterations
    assert '| gpt |' in r.stdout and 'amlp' not in r.stdout  # this sweep's runs only
    assert 'amlp' in cli('--report', f'--results={results}').stdout  # --report: the whole file
    given = plan(tmp_path, ['--max_iters=40', '--eval_interval=20'])  # given: as given
    assert given.key['eval_interval'] == 20 and '--eval_interval=20' in given.cmd and 'eval_interval' not in given.derived


def test_a_recipe_file_and_hellaswag_scores_go_into_every_record(tiny_data, tmp_path):
    """--recipe applies a config file after each architecture's (its keys win, the block stays); with
    --hellaswag each finished run is scored by hellaswag.py and the tables gain a column."""
    recipe = tmp_path / 'recipe.py'
    recipe.write_text("n_layer = 1\nn_embd = 32\nn_head = 2\nblock_size = 16\nbatch_size = 4\nlearning_rate = 2e-3\n")
    items = tmp_path / 'items.jsonl'
    items.write_text(''.join(json.dumps({'ctx': 'the cat', 'endings': ['sat', 'ran', 'dog', 'red'], 'label': i % 4})
                             + '\n' for i in range(8)))
    r = cli('--configs=gmlp', f'--recipe={recipe}', f'--hellaswag={items}', '--max_iters=4', '--eval_iters=1',
            '--device=cpu', f'--data_dir={tiny_data}', f'--results={tmp_path / "r.jsonl"}',
            f'--out_prefix={tmp_path / "runs"}')
    assert r.returncode == 0, r.stderr
    recs = stats.read_results(str(tmp_path / 'r.jsonl'))
    assert [x['config'] for x in recs] == ['gmlp']  # (the recipe's keys win, the block stays)
    assert all(x['n_layer'] == 1 and x['n_embd'] == 32 and x['lr'] == 2e-3 and x['hellaswag_n'] == 8 for x in recs)
    assert recs[0]['key']['block'] == 'gmlp'
    assert all(stats.card(x) == 'cpu' for x in recs)  # the machine a record came from names its card
    assert 'HellaSwag acc_norm' in r.stdout
    assert "--recipe 'nope.py' not found" in refusal('--configs=gpt', '--recipe=nope.py', f'--data_dir={tiny_data}')


# -----------------------------------------------------------------------------
# the sweep respects what it is given, and checks what it can before any run trains

def test_settings_given_or_set_by_the_recipe_are_the_ones_trained_and_derived_ones_are_said(tmp_path, tiny_data):
    """--warmup_iters and --eval_interval given (or set by --recipe) reach train.py alone, never followed
    by the sweep's own value; a value the sweep derives is announced before the runs."""
    given = plan(tmp_path, ['--warmup_iters=100', f'--data_dir={tiny_data}'], max_iters=['200'])
    assert given.cmd.count('--warmup_iters=100') == 1 and not any(
        a.startswith('--warmup_iters=') and a != '--warmup_iters=100' for a in given.cmd)
    assert given.key['warmup_iters'] == 100 and 'warmup_iters' not in given.derived
    derived = plan(tmp_path, [f'--data_dir={tiny_data}'], max_iters=['200'])
    assert derived.key['warmup_iters'] == 20 and derived.derived == {'warmup_iters': 20, 'eval_interval': 25}
    recipe = tmp_path / 'recipe.py'
    recipe.write_text("warmup_iters = 70\neval_interval = 40\n")
    by_recipe = plan(tmp_path, [f'--data_dir={tiny_data}'], max_iters=['200'], recipe=str(recipe))
    assert (by_recipe.key['warmup_iters'], by_recipe.key['eval_interval']) == (70, 40) and not by_recipe.derived
    with pytest.raises(UsageError, match='lr_decay_iters=300: a sweep ends each run'):
        plan(tmp_path, ['--lr_decay_iters=300', f'--data_dir={tiny_data}'], max_iters=['200'])
    kept = plan(tmp_path, ['--min_lr=0', f'--data_dir={tiny_data}'])  # a grid keeps a min_lr given
    assert kept.key['min_lr'] == 0.0
    r = cli(*sweep_args(tiny_data, tmp_path, '--max_iters=40'))
    assert r.returncode == 0, r.stderr
    assert 'note: the sweep sets eval_interval (8 evaluations a run): 5 at 40' in r.stderr
    assert 'note: the sweep sets warmup_iters' not in r.stderr  # (given: --warmup_iters=2)


def test_what_every_run_needs_is_checked_once_before_the_first_trains(tmp_path, tiny_data):
    """Missing data, a malformed HellaSwag file, a negative limit, a recipe that changes a block: one line,
    exit 2, no run started (no run folder made)."""
    runs = tmp_path / 'runs'
    common = ['--configs=gpt,llama', '--max_iters=4', f'--results={tmp_path / "r.jsonl"}', f'--out_prefix={runs}']
    r = cli(*common, f'--data_dir={tmp_path / "nowhere"}')  # one as the user sees it: one line, exit 2
    assert r.returncode == 2 and r.stderr.count('\n') == 1 and 'not found; write it with prepare.py (python prepare.py --help)' in r.stderr
    items = tmp_path / 'items.jsonl'
    for bad in ({'ctx': 'a', 'endings': 'abcd', 'label': 0}, {'ctx': 'a', 'endings': ['w', 'x', 'y', 'z'], 'label': 2.7},
                {'ctx': 'a', 'endings': ['w', 'x', 'y', 'z'], 'label': 4}):
        items.write_text(json.dumps(bad) + '\n')
        assert 'line 1 is not a HellaSwag item' in refusal(*common, f'--data_dir={tiny_data}', f'--hellaswag={items}')
    assert 'hellaswag_limit must not be negative' in refusal(*common, f'--data_dir={tiny_data}', '--hellaswag_limit=-1')
    assert "changes gpt's architecture" in refusal(*common, f'--data_dir={tiny_data}', f'--recipe={HERE}/configs/llama.py')
    assert not runs.exists()


def test_special_files_are_refused_in_one_line_not_read(tmp_path, tiny_data):
    """A results file, recipe or HellaSwag file that is a device or a pipe is one line, never read (it
    could never end)."""
    fifo = tmp_path / 'pipe'
    os.mkfifo(fifo)
    for flag in ('results', 'recipe', 'hellaswag'):
        for path in ('/dev/null', str(fifo)):  # (a device: /dev/zero's read would never end, nor be stopped)
            said = refusal('--configs=gpt', f'--{flag}={path}', f'--data_dir={tiny_data}', '--report')
            assert 'is not a regular file' in said, (flag, path, said)


def test_report_skips_a_hand_edited_record_it_cannot_read_and_never_picks_nan(tmp_path, capsys):
    """One-field edits (null, NaN, a string for a number, a missing field) are skipped with a line naming
    them, never a traceback; the best lr is a finite loss."""
    path = tmp_path / 'r.jsonl'
    good = [record('gpt', 1, 2.0, lr=1e-3), record('gpt', 1, 2.1, lr=2e-3)]
    edits = [('val_loss', None), ('val_loss', float('nan')), ('val_loss', '2.0'), ('seed', 'one'), ('lr', -1),
             ('params', None), ('curve', [[1, 2]]), ('budget_value', None), ('key', []),
             # every field a report reads, checked where it is read: a loss is not negative, tokens not 0
             ('val_loss', -0.5), ('tokens', 0), ('tokens', -64), ('wall_s', 'long'), ('elapsed_s', -1.0),
             ('hellaswag_acc_norm', 1.5), ('hellaswag_acc', 'x'), ('schedule', 'linear'), ('corpus', 3),
             # a number too large to square, a size that is not LAYERSxWIDTH, a val set that is not words,
             # a budget the key (what ran) contradicts
             ('val_loss', 1e308), ('size', '3y96'), ('val_set', 3), ('budget_value', 20), ('machine', 7)]
    lines = [json.dumps(r) for r in good]
    for field, value in edits:
        lines.append(json.dumps({**record('gpt', 1, 1.0, lr=4e-3), field: value}))
    lines.append(json.dumps({k: v for k, v in record('gpt', 1, 1.0, lr=8e-3).items() if k != 'tokens'}))
    path.write_text('\n'.join(lines) + '\n')
    rows = report.sweep_report(sweep.SweepConfig(), str(path), str(tmp_path / 'p.png'))
    assert len(rows) == 1 and rows[0]['lr'] == 1e-3 and rows[0]['val'] == 2.0
    err = capsys.readouterr().err
    assert err.count('is missing or not what sweep.py writes') == len(edits) + 1


def test_a_sweep_killed_by_sigkill_stops_its_runs_too(tmp_path, tiny_data):
    """SIGKILL cannot be caught by the sweep, but its train.py runs get SIGTERM (Linux's parent-death
    signal), save and stop: none trains on alone."""
    if not sys.platform.startswith('linux'):
        pytest.skip('the parent-death signal is Linux only')
    proc = subprocess.Popen([sys.executable, 'sweep.py', *sweep_args(tiny_data, tmp_path, '--max_iters=100000',
                                                                     '--eval_interval=50000')],
                            cwd=HERE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    runs = tmp_path / 'runs'
    deadline = time.time() + 120
    def trained():  # two log rows of training steps: the run is well past its start
        return any(p.read_text().count('"loss"') >= 2 for p in runs.glob('*/log.jsonl'))
    while time.time() < deadline and not trained():
        time.sleep(0.5)
    assert trained(), 'the run did not start'
    child = subprocess.run(['pgrep', '-f', f'out_dir={runs}'], capture_output=True, text=True).stdout.split()
    assert child
    proc.kill()
    proc.wait()
    deadline = time.time() + 120
    while time.time() < deadline and subprocess.run(['pgrep', '-f', f'out_dir={runs}'], capture_output=True).returncode == 0:
        time.sleep(0.5)
    assert subprocess.run(['pgrep', '-f', f'out_dir={runs}'], capture_output=True).returncode == 1, 'train.py runs on'
    assert list(runs.glob('*/ckpt.pt'))  # it saved as it stopped


def test_quick_right_after_the_quick_start_prepares_the_corpus_it_needs(tmp_path):
    """In a folder with no data/stdlib_byte, --quick makes it (from this Python's standard library,
    offline) and runs, instead of failing every run on the missing data."""
    r = subprocess.run([sys.executable, os.path.join(HERE, 'sweep.py'), '--quick', '--configs=gpt', '--seeds=1',
                        '--learning_rate=2e-3', '--max_iters=2', '--eval_iters=1'], cwd=tmp_path,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert '--quick: preparing data/stdlib_byte' in r.stderr and (tmp_path / 'data/stdlib_byte/meta.json').exists()
    assert len(stats.read_results(str(tmp_path / 'out-sweep' / 'results.jsonl'))) == 1
    # a budget of another kind replaces quick's 100 iterations (not 'give one budget'); a budget at or
    # below a warmup kept at every budget (under wsd, the config's) says both ways out
    quick = [sys.executable, os.path.join(HERE, 'sweep.py'), '--quick', '--configs=gpt', '--seeds=1',
             '--learning_rate=2e-3', '--eval_iters=1']
    r = subprocess.run([*quick, '--max_tokens=512'], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert [x['budget'] for x in stats.read_results(str(tmp_path / 'out-sweep' / 'results.jsonl'))] == \
        ['max_iters', 'max_tokens']
    r = subprocess.run([*quick, '--lr_schedule=wsd', '--max_iters=40,80'], cwd=tmp_path, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 2 and r.stderr.endswith(  # wsd at 40: its cooldown (a fifth) starts at 32
        "give --warmup_iters=32 or less, or budgets of 62 iterations or more\n"), r.stderr
    # a budget left at its default (0) is no budget given: quick's 100 iterations stay
    r = subprocess.run([*quick, '--max_seconds=0'], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    last = stats.read_results(str(tmp_path / 'out-sweep' / 'results.jsonl'))[-1]
    assert (last['budget'], last['budget_value']) == ('max_iters', 100)


def test_a_report_on_a_committed_results_file_writes_no_new_file_there(tmp_path):
    """--report on a file in the repository's results/ writes nothing there (no new plot, no committed one
    rewritten) and says how to draw them; --png puts them all where it says."""
    committed = os.path.join(HERE, 'results', 'sweep_shakespeare.jsonl')
    folder = os.path.join(HERE, 'results')
    before = {n: os.path.getmtime(os.path.join(folder, n)) for n in os.listdir(folder)}
    r = cli('--report', f'--results={committed}')
    assert r.returncode == 0, r.stderr
    assert {n: os.path.getmtime(os.path.join(folder, n)) for n in os.listdir(folder)} == before
    assert 'plot(s) not drawn' in r.stderr and '--png=' in r.stderr
    r = cli('--report', f'--results={committed}', f'--png={tmp_path / "p.png"}')
    assert r.returncode == 0 and len(list(tmp_path.glob('p*.png'))) >= 1


def test_the_docs_tables_are_the_reports_of_the_committed_records():
    """Every table README.md and RESULTS.md mark as drawn from results files (`<!-- report FILES
    "WORDS" P-Q -->` ... `<!-- end -->`, tests/doc_tables.py) is what `sweep.py --report` prints from
    those files today: a committed record changed, or a table edited by hand, fails here (`python
    tests/doc_tables.py --write` redraws them). RESULTS.md's section 1 is drawn whole: no table there
    stands outside a block."""
    import doc_tables
    for doc in doc_tables.DOCS:
        found = doc_tables.blocks(doc)
        assert found, f"{doc} has no table marked as drawn from a results file"
        for paths, words, first, last, text in found:
            want = doc_tables.expected(paths, words, first, last)
            assert text.strip('\n') == want, (f"{doc}'s table from {paths} ({words}, paragraphs "
                                              f"{first}-{last}) is not its report: python tests/doc_tables.py --write")
    results = open(os.path.join(HERE, 'RESULTS.md'), encoding='utf-8').read()
    section1 = results[results.index('\n## 1. '):results.index('\n## 2. ')]
    outside = re.sub(r'<!-- report .*?<!-- end -->', '', section1, flags=re.S)
    tables = [line for line in outside.splitlines() if line.startswith('| config')]
    assert not tables, f"RESULTS.md section 1 has tables outside a report block: {tables}"


def test_the_schedule_view_compares_each_gap_under_each_schedule():
    """Records of one setting under wsd and cosine (each config at its own lr): each config's loss under
    each, and its gap to gpt under each with what it does (holds, halves...)."""
    recs = []
    for sched, vals in (('wsd', {'gpt': (2.0, 2.1, 2.2), 'x': (1.8, 1.9, 2.0)}),
                        ('cosine', {'gpt': (2.1, 2.2, 2.3), 'x': (2.05, 2.15, 2.25)})):
        for name, losses in vals.items():
            for seed, v in enumerate(losses, 1):
                r = record(name, seed, v, budget=100, lr_schedule=sched)
                recs.append({**r, 'schedule': sched})
    groups = report.schedule_groups(report.summary_rows(recs))
    assert len(groups) == 1
    text = report.schedule_tables(next(iter(groups.values())))
    assert '| x | 0.001, 1.9000 ± 0.1000 (n=3) | 0.001, 2.1500 ± 0.1000 (n=3) |' in text
    assert '| x | -0.2000 ± 0.0000 (n=3) | -0.0500 ± 0.0000 (n=3) | halves; Δ +0.1500 ± 0.0000 |' in text
    # x's lr grid under cosine (1e-3 above, with 2e-3 and 4e-3 on seed 1) whose best is its largest: the
    # cell says so, as the regime view's do
    grid = [{**record('x', 1, v, lr=lr, budget=100, lr_schedule='cosine'), 'schedule': 'cosine'}
            for lr, v in ((2e-3, 2.1), (4e-3, 2.0))]
    group, = report.schedule_groups(report.summary_rows(recs + grid)).values()
    assert '| x | 0.001, 1.9000 ± 0.1000 (n=3) | 0.004 (top of grid), 2.0000 (n=1) |' in report.schedule_tables(group)


def test_a_schedule_mark_reads_both_gaps_on_the_seeds_both_schedules_share():
    """Seeds 1-6 under wsd, 1-3 under cosine: the mark's word, its tests and its Δ are read on seeds 1-3
    (where the gap goes from -0.02 to -0.10: a resolved doubling), not the word from six seeds' mean
    (-0.06: 'holds') with tests on three, and the cell says on which seeds."""
    wsd = {'gpt': [2.0] * 6, 'x': [1.98, 1.979, 1.981, 1.9, 1.9, 1.9]}
    cosine = {'gpt': [2.1] * 3, 'x': [2.0, 1.99, 2.01]}
    recs = [{**record(n, seed, v, budget=100, lr_schedule=sched), 'schedule': sched}
            for sched, vals in (('wsd', wsd), ('cosine', cosine)) for n, losses in vals.items()
            for seed, v in enumerate(losses, 1)]
    group, = report.schedule_groups(report.summary_rows(recs)).values()
    line = next(l for l in report.schedule_tables(group).split('Gap to llama')[0].splitlines()
                if l.startswith('| x | -0.0'))
    assert line.endswith('| doubles; Δ -0.0800 ± 0.0224 on seeds 1-3 |'), line  # 4.303 x 0.009 / sqrt 3
    # under a budget of FLOPs each config ran its own max_iters: still one setting, one view with its gaps
    flops = [{**r, 'budget': 'max_flops', 'key': {**r['key'], 'budget': 'max_flops', 'max_flops': 100,
                                                  'max_iters': 100 + 7 * (r['config'] == 'x')}} for r in recs]
    group, = report.schedule_groups(report.summary_rows(flops)).values()
    assert '| x | -0.0600 ± ' in report.schedule_tables(group)


def test_a_scaling_view_names_each_config_once_though_the_file_holds_another_corpus(tmp_path, capsys):
    """A second corpus in the file at one size names that size's rows apart in the sweep's tables
    ('gpt (data=a)'); inside each corpus's scaling view a config is one label at every size (one line
    in its plot), not 'gpt (data=a)' at one size and 'gpt' at another."""
    recs = [{**record(c, 1, 3.0 - 0.1 * i - 0.05 * (c == 'x'), size=size, data='a'), 'flops': 10.0 ** (i + 1)}
            for i, size in enumerate(('1x32', '2x64')) for c in ('gpt', 'x')]
    recs += [{**record('gpt', 1, 2.9, size='1x32', data='b'), 'flops': 10.0}]
    (tmp_path / 'r.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in recs))
    sweep.main(['--report', f'--results={tmp_path / "r.jsonl"}', f'--png={tmp_path / "p.png"}'])
    scaling = capsys.readouterr().out.split('### scaling')[1]
    assert {l.split(' | ')[0][2:] for l in scaling.splitlines() if l.startswith('| ') and '---' not in l} == \
        {'config', 'gpt', 'x'}, scaling


def test_an_older_records_size_in_its_key_is_a_shape_the_scaling_view_spans():
    """Records from before the key named n_layer and n_embd name the shape 'size' in their key: they are
    one setting at several sizes (a scaling view, its heading not naming one size), not a table per size."""
    old = [{**r, 'key': {**{k: v for k, v in r['key'].items() if k not in ('n_layer', 'n_embd')},
                         'size': r['size']}}
           for size in ('1x32', '2x64') for c in ('gpt', 'x') for r in [record(c, 1, 2.0, size=size)]]
    rows = report.summary_rows(old)
    assert len({r['scaling'] for r in rows}) == 1
    assert 'size=' not in report.heading({r['context']: r for r in rows}, rows[0], size=False, budget=False)


def test_a_doubling_or_halving_is_called_only_where_its_interval_resolves_it():
    """'doubles' and 'halves' are read off the means; the mark is resolved only where the interval of its
    ratio test excludes 0 (later - 2 x first for doubles, 2 x later - first for halves), paired by seed
    across schedules (the same seeds: the same init and batches), Welch's across shapes (unrelated runs).
    Each mark gives the change (later gap - first) with its interval. Known answers by hand."""
    # per-seed gaps to gpt: x -0.10, -0.12, -0.08 (wsd) -> -0.30, -0.20, -0.16 (cosine): means -0.10 ->
    # -0.22, more than double, but seed 3 is 2.0x and seed 2 1.7x: later - 2 x first per seed -0.10, +0.04,
    # 0.00 (mean -0.02, sd 0.0721, ± 4.303 x 0.0416 = 0.179): unresolved. The change per seed -0.20,
    # -0.08, -0.08: -0.12, sd 0.0693, ± 4.303 x 0.04 = 0.1721. y: -0.10, -0.11, -0.09 -> -0.30, -0.32,
    # -0.28: exactly double on every seed (later - 2 x first: -0.10 each, no spread): resolved; change
    # -0.20, -0.21, -0.19: ± 4.303 x 0.01 / sqrt(3) = 0.0248.
    # h: -0.10 -> -0.06 (|later| above half of first: 'holds' by the means), both signs resolved, but
    # 2 x later - first per seed -0.02, +0.02, -0.06 (mean -0.02, sd 0.04, ± 0.0994) spans 0: a halving is
    # left, so the hold is unresolved. s: -0.20 -> -0.02 with the later sign not told (sd 0.02, ± 0.0497),
    # but 2 x later - first per seed +0.16, +0.21, +0.11 (mean 0.16, sd 0.05, ± 0.1242) excludes 0: it
    # halves, resolved. k: -0.10 -> -0.15, 2 x later - first -0.20, -0.23, -0.17 and later - 2 x first
    # +0.05 each: a resolved hold.
    gaps = {'wsd': {'x': (-0.10, -0.12, -0.08), 'y': (-0.10, -0.11, -0.09), 'h': (-0.10, -0.12, -0.08),
                    's': (-0.20, -0.21, -0.19), 'k': (-0.10, -0.11, -0.09)},
            'cosine': {'x': (-0.30, -0.20, -0.16), 'y': (-0.30, -0.32, -0.28), 'h': (-0.06, -0.05, -0.07),
                       's': (-0.02, 0.00, -0.04), 'k': (-0.15, -0.17, -0.13)}}
    recs = []
    for sched, base in (('wsd', (2.0, 2.1, 2.2)), ('cosine', (2.1, 2.2, 2.3))):
        for seed, v in enumerate(base, 1):
            recs.append({**record('gpt', seed, v, budget=100, lr_schedule=sched), 'schedule': sched})
            for name in gaps[sched]:
                g = gaps[sched][name][seed - 1]
                recs.append({**record(name, seed, v + g, budget=100, lr_schedule=sched), 'schedule': sched})
    group, = report.schedule_groups(report.summary_rows(recs)).values()
    text = report.schedule_tables(group)
    assert '| x | -0.1000 ± 0.0497 (n=3) | -0.2200 ± 0.1791 (n=3) | doubles (unresolved); Δ -0.1200 ± 0.1721 |' in text
    assert '| y | -0.1000 ± 0.0248 (n=3) | -0.3000 ± 0.0497 (n=3) | doubles; Δ -0.2000 ± 0.0248 |' in text
    assert '| h | -0.1000 ± 0.0497 (n=3) | -0.0600 ± 0.0248 (n=3) | holds (unresolved); Δ +0.0400 ± 0.0745 |' in text
    assert '| s | -0.2000 ± 0.0248 (n=3) | -0.0200 ± 0.0497 (n=3) (spans 0) | halves; Δ +0.1800 ± 0.0745 |' in text
    assert '| k | -0.1000 ± 0.0248 (n=3) | -0.1500 ± 0.0497 (n=3) | holds; Δ -0.0500 ± 0.0248 |' in text
    # across shapes the same gaps are unrelated runs: Welch's interval. x's change: -0.12, its s.e.
    # sqrt(0.02^2/3 + 0.0721^2/3) = 0.0432 on df 2.306: ± 0.1642; its doubling's test (df 3.124) spans 0
    small = shape_records('1x32', 'fp', 200, {'gpt': (3.0, 3.1, 3.2), 'x': (2.90, 2.98, 3.12), 'y': (2.90, 2.99, 3.11)})
    large = shape_records('2x64', 'fp', 200, {'gpt': (2.5, 2.6, 2.7), 'x': (2.20, 2.40, 2.54), 'y': (2.20, 2.28, 2.42)})
    group, = report.transfer_groups(report.summary_rows(small + large)).values()
    text = report.transfer_tables(group)
    assert '| x | 20.0 | -0.1000 ± 0.0497 (n=3) | -0.2200 ± 0.1791 (n=3) | doubles (unresolved); Δ -0.1200 ± 0.1642 |' in text
    line = next(l for l in text.splitlines() if l.startswith('| y | 20.0 |'))
    assert line.split(' | ')[-1].startswith('doubles; Δ -0.2000 ± ')  # -0.30 ± 0.0497 against 2 x -0.10 ± 0.0248


def test_a_tuned_lr_comes_from_a_grid_of_the_same_setting_and_says_so(tmp_path, capsys):
    """--learning_rate=tuned takes the best lr of the results file's grid of this config in this
    sweep's whole setting (any seed, lr, budget; this size first); a grid run with another recipe value
    or batch size does not tune it, and no grid of the setting is a one-line error."""
    cfg = sweep.SweepConfig(out_prefix=str(tmp_path / 'runs'), learning_rate=['tuned'], max_iters=['10'])
    path, flags = os.path.join(HERE, 'configs', 'gpt.py'), [*TINY, f'--data_dir={tmp_path / "d"}']
    first = sweep.plan_run(path, cfg, flags, seed=1, lr=0, size=None)

    def grid(losses, **changed):  # {lr: loss} over seeds 1 and 2, in `first`'s setting but `changed`
        return [{**record('gpt', seed, loss + seed / 100, lr=lr, size=first.fields['size']),
                 'data_dir': first.fields['data_dir'], 'schedule': first.fields['schedule'],
                 'key': {**first.key, 'seed': seed, 'learning_rate': lr, 'min_lr': lr / 10, **changed}}
                for lr, loss in losses.items() for seed in (1, 2)]
    other = grid({4e-3: 1.0, 1e-3: 3.0}, weight_decay=0.5) + grid({4e-3: 1.0}, batch_size=64)
    with pytest.raises(UsageError, match=r"^--learning_rate=tuned: the results file has no finished runs of gpt with "
                                         r"this sweep's setting to tune from \(those it has differ in batch_size, "
                                         r"weight_decay\); run an lr grid first \(--learning_rate=5e-4,1e-3,2e-3\), "
                                         r"or pass the setting of the runs to tune from$"):
        sweep.learning_rates(cfg, other, first)
    # a grid that ran at another thread count (another --jobs): the refusal says threads is the difference
    threads = grid({4e-3: 1.0, 1e-3: 3.0}, threads=first.key['threads'] + 1)
    with pytest.raises(UsageError, match=r"\(those it has differ in threads\); run an lr grid first"):
        sweep.learning_rates(cfg, threads, first)
    for none in ([], record('llama', 1, 2.0)):  # no record of gpt at all (an empty file, other configs)
        with pytest.raises(UsageError, match=r"no finished runs of gpt with this sweep's setting to tune from; run"):
            sweep.learning_rates(cfg, none and [none], first)
    same = grid({5e-4: 2.5, 1e-3: 2.0, 2e-3: 2.2})
    assert sweep.learning_rates(cfg, other + same, first) == [1e-3]
    # an lr given twice is one lr of the grid: planned once, counted once
    twice = dataclasses.replace(cfg, learning_rate=['1e-3', '2e-3', '0.001'])
    assert sweep.learning_rates(twice, [], first) == [1e-3, 2e-3]
    assert sweep.learning_rates(dataclasses.replace(cfg, learning_rate=[], lr_scale=['1', '2', '1.0']), [],
                                first) == [first.fields['lr'], 2 * first.fields['lr']]
    assert (f"--learning_rate=tuned is 0.001, the best of this setting's lr grid at {first.fields['size']}, "
            "max_iters=10\n") in capsys.readouterr().err
    # a lone run at the sweep's budget (another lr, seed 3) is no grid: the grid at another budget tunes it
    lone = [{**r, 'budget_value': 20, 'key': {**r['key'], 'budget_value': 20, 'max_iters': 20, 'seed': 3}}
            for r in grid({4e-3: 0.5}) if r['seed'] == 1]
    assert sweep.learning_rates(dataclasses.replace(cfg, max_iters=['20']), same + lone, first) == [1e-3]


def test_a_tuned_lr_matches_a_warmup_kept_at_every_budget(tmp_path):
    """A warmup the sweep derives from each budget is the budget's, so a grid at any warmup tunes it; one
    kept at every budget (the user's, the recipe's, or under wsd the config's) is the setting's: only a
    grid run at that warmup tunes it, else the refusal names warmup_iters."""
    cfg = sweep.SweepConfig(out_prefix=str(tmp_path / 'runs'), learning_rate=['tuned'], max_iters=['10'])
    flags = [f for f in TINY if not f.startswith('--warmup_iters')] + [f'--data_dir={tmp_path / "d"}']
    path = os.path.join(HERE, 'configs', 'gpt.py')

    def grid(first, losses, warmup):  # {lr: loss} on seed 1 in `first`'s setting at this warmup
        return [{**record('gpt', 1, loss, lr=lr, size=first.fields['size']),
                 'data_dir': first.fields['data_dir'], 'schedule': first.fields['schedule'],
                 'key': {**first.key, 'learning_rate': lr, 'min_lr': lr / 10, 'warmup_iters': warmup}}
                for lr, loss in losses.items()]
    derived = sweep.plan_run(path, cfg, flags, seed=1, lr=0, size=None)
    assert not derived.warmup_kept
    other = grid(derived, {1e-3: 2.0, 2e-3: 2.5}, warmup=7)  # another warmup than this sweep's
    assert sweep.learning_rates(cfg, other, derived) == [1e-3]
    recipe = tmp_path / 'recipe.py'
    recipe.write_text('warmup_iters = 3\n')
    given = [(cfg, [*flags, '--warmup_iters=3']), (dataclasses.replace(cfg, recipe=str(recipe)), flags)]
    for c, f in given:  # by the user, or by the recipe
        mine = sweep.plan_run(path, c, f, seed=1, lr=0, size=None)
        with pytest.raises(UsageError, match=r"\(those it has differ in warmup_iters\); run an lr grid first"):
            sweep.learning_rates(c, other, mine)
        assert sweep.learning_rates(c, other + grid(mine, {1e-3: 2.2, 2e-3: 2.1}, warmup=3), mine) == [2e-3]
    # under wsd the config's warmup is kept at every budget (the runs share their start): the setting's too
    longer = dataclasses.replace(cfg, max_iters=['100'])
    wsd = sweep.plan_run(path, longer, [*flags, '--lr_schedule=wsd'], seed=1, lr=0, size=None)
    assert wsd.warmup_kept and 'warmup_iters' not in wsd.derived
    with pytest.raises(UsageError, match=r"\(those it has differ in .*warmup_iters"):
        sweep.learning_rates(longer, grid(wsd, {1e-3: 2.0, 2e-3: 2.5}, warmup=wsd.key['warmup_iters'] + 1), wsd)


def test_a_tuned_lr_is_read_from_a_grid_at_this_size_first_then_at_the_sweeps_budget():
    """stats.tuned_lr, of one config's records of one setting: a grid is 2+ lrs at one size and budget; this
    size's grid at any budget comes before another size's at the sweep's budget; at a size, the sweep's
    budget, then one of its kind (max_tokens, max_flops: any optimizer), then the largest; another size:
    the one with the most runs."""
    def grid(size, kind, value, best, lrs=(1e-3, 2e-3, 4e-3)):
        return [{**record('gpt', 1, 2.0 + abs(math.log2(lr / best)), lr=lr, size=size), 'budget': kind,
                 'budget_value': value} for lr in lrs]
    here = grid('1x32', 'max_iters', 10, 1e-3)
    assert stats.tuned_lr(here + grid('2x64', 'max_iters', 20, 4e-3), '1x32', ('max_iters', 20)) == \
        (1e-3, '1x32', ('max_iters', 10))
    assert stats.tuned_lr(here + grid('1x32', 'max_iters', 5, 2e-3), '1x32', ('max_iters', 5))[0] == 2e-3
    assert stats.tuned_lr(here + grid('1x32', 'max_iters', 5, 2e-3), '1x32', ('max_iters', 7))[0] == 1e-3
    tokens = grid('1x32', 'max_tokens', 4, 4e-3)  # (a budget of tokens: a value not comparable to iters)
    assert stats.tuned_lr(here + tokens, '1x32', ('max_tokens', 9)) == (4e-3, '1x32', ('max_tokens', 4))
    assert stats.tuned_lr(here + tokens, '1x32', ('max_flops', 1e9))[0] == 1e-3  # the largest value
    elsewhere = grid('2x64', 'max_iters', 20, 4e-3) + grid('4x64', 'max_iters', 20, 2e-3, lrs=(1e-3, 2e-3, 4e-3, 8e-3))
    assert stats.tuned_lr(elsewhere, '1x32', ('max_iters', 20))[:2] == (2e-3, '4x64')
    assert stats.tuned_lr(grid('1x32', 'max_iters', 10, 1e-3, lrs=(1e-3,)), '1x32', ('max_iters', 10)) is None


def test_a_stray_record_of_another_setting_neither_splits_nor_removes_a_config_in_a_view(capsys):
    """The regime and schedule views pair rows by their whole setting, not by a table's label: a record of
    gpt on another device at one budget (or under one schedule) is another setting, named apart in its own
    table, and gpt stays one row, present at every budget (schedule) of the view."""
    recs = [record(name, seed, v + seed / 10, budget=b) for name, v in (('gpt', 3.0), ('x', 2.8))
            for b in (100, 1600) for seed in (1, 2)]
    stray = record('gpt', 1, 9.0, budget=100, device='cuda')
    rows = report.summary_rows(recs + [stray])
    assert {r['label'] for r in rows if r['budget_value'] == 100} == {'gpt (device=auto)', 'gpt (device=cuda)', 'x'}
    group, = report.regime_groups(rows).values()
    text = report.regime_tables(group)
    assert re.search(r'\| gpt \| #2 3\.1500 .* \| #2 3\.1500 ', text), text
    assert '| x | -0.2000 ± 0.0000 (n=2) | -0.2000 ± 0.0000 (n=2) |' in text and 'cuda' not in text
    assert '| x | 0.001 (no grid: the only lr run) | -0.2000 ± 0.0000 (n=2) | -0.2000 ± 0.0000 (n=2) |' in \
        report.ends_table(group)
    recs = [{**record(name, seed, v + seed / 10, budget=100, lr_schedule=sched), 'schedule': sched}
            for name, v in (('gpt', 3.0), ('x', 2.8)) for sched in ('wsd', 'cosine') for seed in (1, 2)]
    stray = {**record('gpt', 1, 9.0, budget=100, lr_schedule='cosine', device='cuda'), 'schedule': 'cosine'}
    group, = report.schedule_groups(report.summary_rows(recs + [stray])).values()
    text = report.schedule_tables(group)
    assert '| gpt | 0.001, 3.1500 ± 0.0707 (n=2) | 0.001, 3.1500 ± 0.0707 (n=2) |' in text, text
    assert '| x | -0.2000 ± 0.0000 (n=2) | -0.2000 ± 0.0000 (n=2) | holds; Δ +0.0000 ± 0.0000 |' in text


def test_the_transfer_view_keeps_every_setting_at_a_size_and_names_each():
    """Two settings at one size (another val set, another corpus in a folder of the same name) are two
    shapes of the transfer view, each named by what differs: none overwrites the other."""
    small = shape_records('1x32', 'fp', 200, {'gpt': (3.0, 3.1), 'x': (2.8, 2.9)})
    large = shape_records('2x64', 'fp', 200, {'gpt': (2.5, 2.6), 'x': (2.4, 2.5)})
    other_val = shape_records('1x32', 'fp', 200, {'gpt': (3.0, 3.1), 'x': (2.95, 3.05)}, eval_iters=50)
    group, = report.transfer_groups(report.summary_rows(small + large + other_val)).values()
    assert {r['shape'] for r in group} == {'1x32 (eval_iters=200)', '1x32 (eval_iters=50)', '2x64'}
    text = report.transfer_tables(group)
    assert '-0.2000 ± 0.0000 (n=2)' in text and '-0.0500 ± 0.0000 (n=2)' in text
    same_name = [{**r, 'data_dir': 'b/fp'} for r in shape_records('1x32', 'fp2', 200, {'gpt': (3.0, 3.1),
                                                                                        'x': (2.9, 3.0)})]
    small = [{**r, 'data_dir': 'a/fp'} for r in small]
    group, = report.transfer_groups(report.summary_rows(small + large + same_name)).values()
    assert {r['shape'] for r in group} == {'1x32 (a/fp)', '1x32 (b/fp)', '2x64'}


def test_a_transfer_mark_reads_from_the_first_shape_where_the_row_has_a_gap():
    """A config without a gap at the smallest shape (the reference did not run there, or the config ran
    on one of two val sets at that size only) is still marked, from its first shape that has one, and
    the cell says from where: no row of 2+ gaps is left without a mark."""
    small = shape_records('1x32', 'fp', 200, {'gpt': (3.0, 3.1), 'x': (2.8, 2.9)})
    mid = shape_records('2x64', 'fp', 200, {'gpt': (2.5, 2.6), 'x': (2.45, 2.55), 'y': (2.3, 2.4)})
    large = shape_records('3x96', 'fp', 200, {'gpt': (2.0, 2.1), 'x': (1.98, 2.08), 'y': (1.7, 1.8)})
    group, = report.transfer_groups(report.summary_rows(small + mid + large)).values()
    to_gpt = report.transfer_tables(group).split('Gap to llama')[0]
    # x: -0.2, -0.05, -0.02 from 1x32; y: -0.2 at 2x64, -0.3 at 3x96, marked from 2x64
    assert ('| x | 20.0 | -0.2000 ± 0.0000 (n=2) | -0.0500 ± 0.0000 (n=2) | -0.0200 ± 0.0000 (n=2) | '
            'halves; Δ +0.1500 ± 0.0000 | halves; Δ +0.1800 ± 0.0000 |') in to_gpt
    assert ('| y | 20.0 | – | -0.2000 ± 0.0000 (n=2) | -0.3000 ± 0.0000 (n=2) | – | '
            'from 2x64: holds; Δ -0.1000 ± 0.0000 |') in to_gpt
    # two val sets at the smallest size: the one holding fewer configs sorts first, x is marked from the other
    other_val = shape_records('1x32', 'fp', 200, {'gpt': (3.0, 3.1)}, eval_iters=100)
    group, = report.transfer_groups(report.summary_rows(other_val + small + large)).values()
    text = report.transfer_tables(group).split('at equal training FLOPs')[0]
    assert 'what it does from 1x32 (eval_iters=100) to each other shape' in text
    line, = [l for l in text.splitlines() if l.startswith('| x |')]
    assert line.endswith('| – | from 1x32 (eval_iters=200): halves; Δ +0.1800 ± 0.0000 |'), line


def test_the_transfer_view_names_the_cells_whose_lr_is_not_tuned():
    """A gap whose lr was not tuned (its best at the grid's edge, or one lr) may move once it is: the
    transfer view names each such cell (config, shape, why, tokens per parameter), the reference's too,
    and none where every best lr lies inside a grid of 3."""
    def at(size, lrs, losses, budget=200):  # each lr's seed-1 losses: the best lr is the lowest loss
        return [{**r, 'data_dir': 'fp'} for lr, ls in zip(lrs, losses) for name, v in ls.items()
                for r in [record(name, 1, v, lr=lr, budget=budget, size=size)]]
    grid = (1e-3, 2e-3, 4e-3)
    small = at('1x32', grid, [{'gpt': 3.1, 'x': 2.9}, {'gpt': 3.0, 'x': 2.85}, {'gpt': 3.2, 'x': 2.8}])
    large = at('2x64', grid, [{'gpt': 2.6}, {'gpt': 2.5}, {'gpt': 2.7}]) + at('2x64', (2e-3,), [{'x': 2.4}])
    alone = at('1x32', (2e-3,), [{'z': 2.5}])  # at one shape, in no table: not named
    # at two shapes, but at 2x64 only seed 2, which gpt did not run: one gap, in no table, not named
    unpaired = at('1x32', (2e-3,), [{'w': 2.5}]) + [{**record('w', 2, 2.4, lr=2e-3, budget=200, size='2x64'),
                                                     'data_dir': 'fp'}]
    group, = report.transfer_groups(report.summary_rows(small + large + alone + unpaired)).values()
    text = report.transfer_tables(group)
    assert '| x | 20.0 | -0.2000 (n=1) | -0.1000 (n=1) | holds (unresolved); Δ +0.1000 |' in text
    note, = [l for l in text.splitlines() if l.startswith('Not tuned')]
    assert note.split('so a gap there may move: ')[1] == 'x at 1x32 (top of grid) at 20.0; x at 2x64 (one lr) at 20.0'
    low = at('2x64', (5e-4,), [{'gpt': 2.45}])  # gpt's best at 2x64 now its grid's lowest
    text = report.transfer_tables(next(iter(report.transfer_groups(report.summary_rows(
        small + large + low + at('1x32', (8e-3,), [{'x': 2.9}]))).values())))
    assert 'gpt at 2x64 (bottom of grid) at 20.0' in text and 'x at 1x32' not in text
    inside = at('2x64', (1e-3, 4e-3), [{'x': 2.45}, {'x': 2.5}])
    text = report.transfer_tables(next(iter(report.transfer_groups(report.summary_rows(
        small + large + inside + at('1x32', (8e-3,), [{'x': 2.9}]))).values())))
    assert 'Not tuned' not in text


@pytest.mark.parametrize('kind', ['max_tokens', 'max_flops'])
def test_a_shape_budgeted_in_tokens_joins_one_budgeted_in_iterations(kind):
    """The transfer view matches shapes by tokens per parameter: a shape whose runs were budgeted in
    max_tokens is read with one budgeted in max_iters; one budgeted in FLOPs (where the configs' tokens
    differ at one budget) is a view of its own."""
    small = shape_records('1x32', 'fp', 200, {'gpt': (3.0, 3.1), 'x': (2.8, 2.9)})
    large = [{**r, 'budget': kind, 'budget_value': 10 * r['tokens'],
              'key': {**{k: v for k, v in r['key'].items() if k != 'max_iters'}, 'budget': kind,
                      'budget_value': 10 * r['tokens'], kind: 10 * r['tokens']}}
             for r in shape_records('2x64', 'fp', 200, {'gpt': (2.5, 2.6), 'x': (2.4, 2.5)})]
    groups = report.transfer_groups(report.summary_rows(small + large))
    assert len(groups) == (kind == 'max_tokens')
    if groups:
        group, = groups.values()
        assert '| x | 20.0 | -0.2000 ± 0.0000 (n=2) | -0.1000 ± 0.0000 (n=2) | holds (unresolved); Δ +0.1000' \
            in report.transfer_tables(group)


def test_a_rows_flops_are_the_mean_of_the_runs_that_record_them():
    """A record without FLOPs (an older train.py's) among its seeds counts as unknown, not as 0 FLOPs:
    the row's FLOPs are its other runs' (a run's FLOPs do not depend on its seed)."""
    recs = [record('gpt', s, 3.0, budget=100) for s in (1, 2, 3)]
    recs[0] = {**recs[0], 'flops': None}
    row, = report.summary_rows(recs)
    assert row['flops'] == 100.0
    row, = report.summary_rows([{**r, 'flops': None} for r in recs])
    assert row['flops'] == 0  # none recorded: unknown (no equal-FLOPs reading)


def test_rows_a_table_would_show_alike_get_labels_of_their_own():
    """Three settings of one config at one size and budget, two of them differing only in their fourth
    differing setting: every label is its own (all the fields where three do not tell them apart)."""
    base = dict(beta2=0.99, dropout=0.0, grad_clip=1.0, weight_decay=0.1)
    rows = report.summary_rows([record('gpt', 1, 2.0, **base), record('gpt', 1, 2.1, **{**base, 'weight_decay': 0.2}),
                                record('gpt', 1, 2.2, beta2=0.95, dropout=0.1, grad_clip=0.5, weight_decay=0.1)])
    labels = [r['label'] for r in rows]
    assert len(set(labels)) == 3 and all('weight_decay=' in l for l in labels), labels


def test_plots_that_would_share_a_name_are_numbered(tmp_path, capsys):
    """Four corpora in folders of one name at one size: four tables, four plots, none drawn over
    another and no name grown by repeated suffixes."""
    recs = [{**record(name, seed, 2.0 + seed / 10, data=d[0]), 'data_dir': d}
            for d in ('a/txt', 'b/txt', 'c/txt', 'd/txt') for name in ('gpt', 'x') for seed in (1, 2)]
    (tmp_path / 'r.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in recs))
    sweep.main(['--report', f'--results={tmp_path / "r.jsonl"}', f'--png={tmp_path / "p.png"}'])
    names = [l.split('plot: ')[1] for l in capsys.readouterr().err.splitlines() if l.startswith('plot: ')]
    if names:  # (matplotlib installed)
        assert len(set(names)) == 4 and not any('-2-2' in n for n in names), names


def test_a_quick_report_says_its_toy_runs_resolve_nothing(tmp_path, capsys):
    path = tmp_path / 'r.jsonl'
    path.write_text(''.join(json.dumps(record(c, s, 2.0 + s / 10)) + '\n' for c in ('gpt', 'x') for s in (1, 2)))
    report.sweep_report(sweep.SweepConfig(quick=True), str(path), str(tmp_path / 'p.png'))
    assert capsys.readouterr().err.count('--quick checks the machinery: toy runs like its own resolve no gap') == 1
    report.sweep_report(sweep.SweepConfig(), str(path), str(tmp_path / 'p.png'))
    assert '--quick' not in capsys.readouterr().err


def test_a_hold_that_may_have_halved_is_unresolved_across_shapes():
    """The audit's case: llama - gpt at 2.6 tokens per parameter, 3x96 -> 4x128, -0.5371 ± 0.0302 then
    -0.3384 ± 0.0781 (3 seeds each): both signs resolved and |later| above half, but 2 x later - first is
    -0.1397 with Welch's interval ± 0.149 (by hand: s.e. sqrt(4 x 0.03144^2 / 3 + 0.01216^2 / 3) = 0.0370,
    df 2.3): a halving is not ruled out, so the hold is unresolved."""
    def row(mean, sd):
        by_seed = {1: mean - sd, 2: mean, 3: mean + sd}  # sd exactly `sd`
        return {'gap': mean, 'gap_half': stats.interval(list(by_seed.values()))[1], 'gap_by_seed': by_seed}
    a, b = row(-0.5371, 0.01216), row(-0.3384, 0.03144)
    mean, half = stats.contrast(a, b, 'gap', 1, 2, paired=False)
    assert mean == pytest.approx(-0.1397) and half == pytest.approx(0.149, abs=0.002)
    mark, = stats.change_marks([a, b], 'gap')
    assert mark.startswith('holds (unresolved); Δ +0.1987 ± ')
    mark, = stats.change_marks([a, row(-0.45, 0.005)], 'gap')  # neither a halving nor a doubling left
    assert mark.startswith('holds; Δ +0.0871 ± ')


def test_a_plot_title_carries_no_hash():
    """A plot's title names the corpus in words; its hash (which a table keeps) is left out."""
    class Fig:
        def suptitle(self, text, fontsize):
            self.text = text
    fig = Fig()
    report.suptitle(fig, 'stdlib (cpython 3.11.7, sha256 b2b8c56a8024) in data/stdlib_byte, size 3x96')
    assert fig.text == 'stdlib (cpython 3.11.7) in data/stdlib_byte, size 3x96'
    report.suptitle(fig, 'text (sha256 b2b8c56a8024) in data/x')
    assert fig.text == 'text in data/x'


def test_two_studies_with_one_out_the_second_is_refused(tmp_path):
    """results/h200/study_5x288.sh: a second study with the OUT of a running one would wipe its work
    folder and log, and the first's deadline would stop it: it is refused in one line, before anything."""
    import fcntl
    out = tmp_path / 'study'
    out.mkdir()
    with open(out / '.study.lock', 'a') as held:  # the first study, running
        fcntl.flock(held, fcntl.LOCK_EX)
        r = subprocess.run(['bash', os.path.join(HERE, 'results', 'h200', 'study_5x288.sh')], cwd=HERE,
                           env={**os.environ, 'OUT': str(out), 'PY': 'false'}, capture_output=True, text=True,
                           timeout=60)
    assert r.returncode == 2 and r.stderr == f"error: another study is running with OUT={out}; wait for it, or " \
                                              "pass another OUT\n", r.stderr
    assert sorted(os.listdir(out)) == ['.study.lock']  # nothing of the first's touched, nothing started


def test_a_study_on_a_corpus_its_records_were_not_trained_on_stops_unless_asked(tmp_path):
    """results/h200/study_5x288.sh prepares the machine's own files: on another image that is other
    text, and the study would silently start over on it. Its records' data fingerprint differs: one
    line in its log and on stderr, exit 2, before any run or record; NEW_DATA=1 starts it on purpose;
    records of the same corpus continue."""
    study = os.path.join(HERE, 'results', 'h200', 'study_5x288.sh')
    prior = tmp_path / 'prior.jsonl'
    stats.append_record(str(prior), record('gpt', 1, 2.0, data='beefbeefbeef'))
    data = tmp_path / 'rehearsal'

    def run(out, **env):
        return subprocess.run(['bash', study], cwd=HERE, capture_output=True, text=True, timeout=300,
                              env={**os.environ, 'OUT': str(out), 'SMALL': '1', 'DATA': str(data),
                                   'PRIOR': str(prior), 'DEADLINE_S': '0', 'PY': sys.executable, **env})
    r = run(tmp_path / 'a')
    fp = dataset.fingerprint(dataset.read_meta(str(data)))
    line = (f"error: the corpus prepared in {data} (data {fp}) is not the one the records of {prior} were "
            "trained on (beefbeefbeef); this machine's files differ: NEW_DATA=1 starts a study on this "
            "corpus (its records kept apart by the fingerprint)\n")
    assert r.returncode == 2 and r.stderr == line, r.stderr
    assert (tmp_path / 'a' / 'study.log').read_text() == line
    assert not (tmp_path / 'a' / 'shapes_site.jsonl').exists()  # nothing continued, nothing run

    r = run(tmp_path / 'b', NEW_DATA='1')
    assert r.returncode == 0, r.stderr
    assert len(stats.read_results(str(tmp_path / 'b' / 'shapes_site.jsonl'))) == 1  # the records kept

    stats.append_record(str(prior), record('gpt', 2, 2.0, data=fp))  # records of this very corpus
    r = run(tmp_path / 'c')
    assert r.returncode == 0 and 'error' not in r.stderr, r.stderr


def test_a_record_names_its_card_and_a_view_of_runs_from_two_cards_says_so(monkeypatch):
    """A record's `machine` begins with the card its run used (cpu without one); a table whose runs
    come from two cards (or from one and records too old to name theirs) says so under it: a gap
    across them is the cards' too. Runs of one card: no such line."""
    assert stats.machine('cpu').startswith('cpu, ')
    monkeypatch.setattr(torch.cuda, 'get_device_name', lambda device: f'NVIDIA H200 ({device})')
    assert stats.machine('cuda:1').startswith('NVIDIA H200 (cuda:1), ')
    for old in ('x86_64 16 cores, torch 2.11.0+cu130', 'x86_64 2 cores, torch 2.13.0, 1 thread(s)', None):
        assert stats.card({'machine': old}) is None  # from before records named the card
    host = ', x86_64 16 cores, torch 2.11.0+cu130'

    def rows(cards):
        return report.summary_rows([dict(record(c, s, 2.0 + s / 100 + (c == 'llama')), machine=m + host)
                                    for (c, s), m in cards.items()])
    two = rows({('gpt', 1): 'NVIDIA H100 80GB HBM3', ('gpt', 2): 'NVIDIA H100 80GB HBM3',
                ('llama', 1): 'NVIDIA H200', ('llama', 2): 'NVIDIA H200'})
    assert ("Runs from more than one machine: NVIDIA H100 80GB HBM3 (2 runs), NVIDIA H200 (2 runs); a gap "
            "between two of them is also the machines'.") in report.table(two)
    mixed = rows({('gpt', 1): 'NVIDIA H200', ('gpt', 2): 'NVIDIA H200', ('llama', 1): 'NVIDIA H200',
                  ('llama', 2): 'x86_64 16 cores'})
    assert "NVIDIA H200 (3 runs), unnamed (older records) (1 run)" in report.table(mixed)
    one = rows({(c, s): 'NVIDIA H200' for c in ('gpt', 'llama') for s in (1, 2)})
    assert 'more than one machine' not in report.table(one)


def test_a_plot_draws_a_t_band_from_three_seeds_and_says_so_below(monkeypatch):
    """Two seeds' t interval has one degree of freedom (12.7 x the s.e.): it would swamp the curves. A
    band is drawn from three seeds on, and the legend of a curve of two says it has none."""
    assert report.n_text([2], '; band: 95% CI', report.BAND_SEEDS) == 'n = 2 seeds; no band under 3 seeds'
    assert report.n_text([3], '; band: 95% CI', report.BAND_SEEDS) == 'n = 3 seeds; band: 95% CI'
    assert report.n_text([1], '; band: 95% CI', report.BAND_SEEDS) == 'n = 1 seed'
    assert report.n_text([2], '; bars: sd') == 'n = 2 seeds; bars: sd'
    plt = report.pyplot()
    if plt is None:
        pytest.skip('no matplotlib')
    for seeds, bands in ((2, 0), (3, 1)):
        fig, ax = plt.subplots()
        report.plot_curves(ax, [0, 1, 2], [[3.0 + s / 10, 2.5, 2.0 - s / 10] for s in range(seeds)], 'x')
        assert len(ax.collections) == bands, seeds
        plt.close(fig)


def test_a_mark_tests_every_inequality_it_claims():
    """'halves' claims -|a|/2 < b < |a|/2: with paired seeds both 2b - a and 2b + a must exclude 0, not
    one of them (a synthetic case where only 2b - a is resolved, and neither gap's sign is known, is
    unresolved); a gap that collapses to about zero is a resolved halving, not an unresolved flip."""
    def row(by_seed):
        mean, half, _ = stats.interval(list(by_seed))
        return {'vs_gpt': mean, 'vs_gpt_half': half, 'vs_gpt_by_seed': dict(enumerate(by_seed, 1))}
    a = [0.5, 0.1, 0.3]  # mean 0.3, its sign not resolved over three seeds
    b = [v / 2 - 0.05 for v in a]  # 2b - a = -0.1 at every seed; 2b + a spreads with a
    mark, = stats.change_marks([row(a), row(b)], 'vs_gpt', paired=True)
    assert mark.startswith('halves (unresolved)'), mark
    a, b = [0.30, 0.32, 0.31], [-0.01, 0.005, -0.004]  # resolved, then about zero (its sign unknown)
    mark, = stats.change_marks([row(a), row(b)], 'vs_gpt', paired=True)
    assert mark.startswith('halves; ') and '(unresolved)' not in mark, mark
    a, b = [0.10, 0.11, 0.12], [0.40, 0.43, 0.45]  # a doubling, every inequality resolved
    assert stats.change_marks([row(a), row(b)], 'vs_gpt', paired=True)[0].startswith('doubles; ')


@pytest.mark.parametrize('paired', [True, False])
def test_a_flip_is_relabelled_a_halving_only_as_the_definition_allows(paired):
    """A flip is called a resolved halving only from a resolved a, to a b whose means hold |b| < |a|/2
    (2b - a and 2b + a resolved on opposite sides of 0): a = -0.04 ± 0.29 to b = +0.50 ± 0.05 has 2b - a and
    2b + a both resolved, on one side: a flip, unresolved; a collapse from an unresolved a is no resolved
    halving either."""
    def row(by_seed):
        mean, half, _ = stats.interval(list(by_seed))
        return {'vs_gpt': mean, 'vs_gpt_half': half, 'vs_gpt_by_seed': dict(enumerate(by_seed, 1))}
    a, b = [-0.10, -0.06, 0.04], [0.48, 0.50, 0.52]  # a = -0.04 ± 0.29 (its sign unknown), b = +0.50 ± 0.05
    mark, = stats.change_marks([row(a), row(b)], 'vs_gpt', paired=paired)
    assert mark.startswith('flips (unresolved); '), mark
    a, b = [0.05, 0.35, -0.10], [0.005, -0.004, 0.001]  # a unresolved, b about zero
    mark, = stats.change_marks([row(a), row(b)], 'vs_gpt', paired=paired)
    assert '(unresolved)' in mark, mark
    # a resolved lead turned into a resolved deficit a quarter its size: both signs known, a flip (the
    # halving's tests pass too, but a gap of known sign that changed sign is not 'about zero')
    a, b = [-0.40, -0.42, -0.38], [0.10, 0.11, 0.09]
    mark, = stats.change_marks([row(a), row(b)], 'vs_gpt', paired=paired)
    assert mark.startswith('flips; '), mark


def test_every_number_in_the_conclusions_prose_is_computed_from_the_records():
    """README's, RESULTS.md's and GUIDE.md's prose state numbers computed from the committed records, logs
    or code (tests/doc_claims.py), never copied from a rounded cell; a figure no record backs stays out."""
    import doc_claims
    wrong = doc_claims.missing()
    assert not wrong, '\n'.join(f"{doc}: {what}" for doc, what in wrong)


def test_changing_any_number_in_readme_results_or_guide_prose_fails_a_claim():
    """Every number in README's, RESULTS.md's and GUIDE.md's prose outside the report's tables, in figures
    or in words (a share, 'a fifth', 'half'; a multiple, 'twice', 'several times'), is a claim rendered from
    the records, a committed log or the code (tests/doc_claims.py), or names something (a shape, a
    section, a date, a seed, a list item): none is typed in untested, and changing any one of them (a
    digit, or the word) takes a claim's phrase out of its document, so the claims test fails (a phrase
    held in two places guards neither). The numbers of a section another change is rewriting are listed
    with the audit's finding (doc_claims.HANDED_OFF), and only those."""
    import random
    import doc_claims
    for doc in doc_claims.DOCS:
        left = doc_claims.handed_off(doc)
        assert doc_claims.untested(doc) == left, doc
        assert doc_claims.unguarded(doc) == left, doc
        raw = doc_claims.source(doc)  # end to end: numbers drawn at random, each changed, fail a claim
        held = [m for m in doc_claims.prose_numbers(doc, raw) if (raw.count('\n', 0, m.start()) + 1, m.group())
                not in left]
        for m in random.Random(doc).sample(held, 8):
            said = raw[:m.start()] + doc_claims.changed(m.group()) + raw[m.end():]
            assert doc_claims.missing_in(doc, said), (doc, m.group(), raw.count('\n', 0, m.start()) + 1)
    readme = doc_claims.source('README.md')
    said = readme + '\nThe study took 42 s on an H100, 3×96 (§4, 2026-11-28).\n'
    assert doc_claims.untested('README.md', said) == [(said.count('\n'), '42')]  # a number typed in
    level = readme.replace('**95% interval**', '**90% interval**')  # a name the records fix, changed
    assert [n for _, n in doc_claims.untested('README.md', level)] == ['90%']
    guide = doc_claims.source('GUIDE.md')  # numbers in words typed in; an ordinal that names is no number
    said = guide + '\nA sweep takes a fifth of the time, twice as fast, read several times over: the third shape.\n'
    assert [n for _, n in doc_claims.untested('GUIDE.md', said)] == ['fifth', 'twice', 'several times']
    m = re.search(r'about\s+an\s+eighth(?=\s+of\s+that)', guide)  # a word the claims render, changed back
    assert doc_claims.missing_in('GUIDE.md', guide[:m.start()] + 'about a tenth' + guide[m.end():])
    # a mark (what a gap does across shapes or schedules) is read like a number: one typed in is untested,
    # each one the prose holds is computed (changed, it fails a claim); its definitions are none
    said = readme + '\nAt 4×128 the gap `halves (unresolved)`: one seed.\n- `holds`: the same sign.\n`holds` or `flips`.\n'
    assert doc_claims.untested('README.md', said) == [(said.count('\n') - 2, '`halves (unresolved)`')]
    marks = [m for m in doc_claims.prose_numbers('README.md', readme) if m.group().startswith('`')]
    assert len(marks) >= 8
    for m in marks:
        said = readme[:m.start()] + doc_claims.changed(m.group()) + readme[m.end():]
        assert doc_claims.missing_in('README.md', said), m.group()


def test_a_toy_budget_keeps_its_digits_and_a_setting_an_old_record_lacks_is_unrecorded():
    """A rehearsal's budgets are 0.012 tokens per parameter, not '0.0'; a setting that a record from
    before it lacks is 'unrecorded' in a label, not '=None'."""
    assert [report.per_param(x) for x in (20.6, 1.25, 0.0123)] == ['20.6', '1.2', '0.012']
    assert report.shown({'device': 'cpu'}, ['device', 'threads']) == 'device=cpu, threads unrecorded'


def test_the_regime_plot_bands_each_stretch_where_seeds_allow_and_ticks_as_tables_do(monkeypatch):
    """A config with 3 seeds at some budgets and 1 at another gets its band over the 3-seed stretch
    (not none at all, which said nothing); the budgets' ticks read as the tables' columns (1.2, not
    1.25)."""
    plt = report.pyplot()
    if plt is None:
        pytest.skip('no matplotlib')
    recs = [{**record(c, s, 3.0 - b / 1000 + (c == 'x') * 0.1 + s / 100, budget=b), 'tokens': 125 * b,
             'params': 100}
            for c in ('gpt', 'x') for b in (1, 2, 4) for s in ((1,) if b == 1 else (1, 2, 3))]
    rs = next(iter(report.regime_groups(report.summary_rows(recs)).values()))
    seen = []
    monkeypatch.setattr(report, 'save_png', lambda fig, png, axes=(), *a: seen.extend(axes) or True)
    report.plot_regime(rs, 'unused.png', 'title')
    ax = seen[0]
    bands = [c for c in ax.collections if any(len(p.vertices) for p in c.get_paths())]
    assert len(bands) == 1  # x's, over budgets 2 and 4 (n=3), none at budget 1 (n=1)
    xs = [v[0] for p in bands[0].get_paths() for v in p.vertices]
    assert min(xs) == pytest.approx(2.5) and max(xs) == pytest.approx(5.0)
    assert [t.get_text() for t in ax.get_xticklabels()] == ['1.2', '2.5', '5.0']
    plt.close('all')


# -----------------------------------------------------------------------------
# a sweep never writes, moves or removes a run folder another process holds, nor a run it did not plan

def tiny_plan(tiny_data, tmp_path, iters=4, *more):
    cfg = sweep.SweepConfig(out_prefix=str(tmp_path / 'runs'), max_iters=[str(iters)])
    return cfg, sweep.plan_run(os.path.join(HERE, 'configs', 'gpt.py'), cfg,
                               [*TINY, f'--data_dir={tiny_data}', '--eval_interval=4', *more], seed=1, lr=1e-3,
                               size=None)


def tree(folder):
    return {os.path.join(r, n): open(os.path.join(r, n), 'rb').read() for r, _, ns in os.walk(folder) for n in ns}


@pytest.mark.parametrize('held', ['run folder', 'constant-lr run'])
def test_a_run_folder_another_process_holds_is_not_started_and_left_as_it_is(tiny_data, tmp_path, capsys, held):
    """A run started by hand in a stopped sweep's run folder (or another sweep's run there, or in the
    constant-lr run its branch copies): the sweep neither writes, moves nor removes what that process holds;
    it says the run was not started and that a rerun trains it, and a rerun does."""
    from test_faults import holder
    cfg, p = (tiny_plan(tiny_data, tmp_path) if held == 'run folder' else
              tiny_plan(tiny_data, tmp_path, 8, '--lr_schedule=wsd', '--warmup_iters=1'))
    folder = p.trunk if held == 'constant-lr run' else p.run_dir
    os.makedirs(folder)
    with open(os.path.join(folder, 'notes.txt'), 'w') as f:
        f.write("the hand run's")
    hand = holder(folder)
    before = tree(tmp_path / 'runs')
    try:
        with guards.Signals('', forward=True) as stopper:
            runs = sweep.Sweep(cfg, str(tmp_path / 'r.jsonl'), stopper)
            assert runs.run(p) is None
        assert runs.failed == [p] and tree(tmp_path / 'runs') == before
        assert re.search(rf"not started: {re.escape(folder)} is in use: another process .*; a rerun of this sweep "
                         r"trains it", capsys.readouterr().err)
    finally:
        hand.kill()
        hand.wait()
    with guards.Signals('', forward=True) as stopper:
        assert sweep.Sweep(cfg, str(tmp_path / 'r.jsonl'), stopper).run(p) is not None
    with open(os.path.join(folder, 'notes.txt')) as f:
        assert f.read() == "the hand run's"


def test_a_run_continued_by_hand_past_the_plan_is_left_as_it_is_and_said(tiny_data, tmp_path, capsys):
    """A sweep's run taken further by hand (train.py --init_from=resume --max_iters=8 in its folder): a sweep
    that plans 4 iterations there does not retrain it over the longer run; it says so and records nothing."""
    cfg, p = tiny_plan(tiny_data, tmp_path)
    with guards.Signals('', forward=True) as stopper:
        assert sweep.Sweep(cfg, str(tmp_path / 'r.jsonl'), stopper).run(p) is not None
    done = subprocess.run(p.cmd + ['--init_from=resume', '--max_iters=8', '--lr_decay_iters=8'], cwd=HERE,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    os.remove(tmp_path / 'r.jsonl')  # its record set aside: the sweep plans the run again
    before = tree(p.run_dir)
    capsys.readouterr()
    with guards.Signals('', forward=True) as stopper:
        runs = sweep.Sweep(cfg, str(tmp_path / 'r.jsonl'), stopper)
        assert runs.run(p) is None
    assert tree(p.run_dir) == before and not os.path.exists(tmp_path / 'r.jsonl')
    assert f"{p.run_dir} holds a run past this plan (iter 8 of 4), left as it is; move it away to train the planned " \
           "run" in capsys.readouterr().err


def test_two_sweeps_sharing_a_run_folder_never_train_it_at_once(tiny_data, tmp_path):
    """Two sweeps on different results files with one out_prefix plan the same run: one trains it, the other
    finds it held (not started, said) or, after it, finished (recorded); the run is one run's, whole: each
    step logged once, its checkpoint at its budget."""
    common = ['--configs=gpt', *TINY, f'--data_dir={tiny_data}', f'--out_prefix={tmp_path / "runs"}',
              '--max_iters=300', '--eval_interval=100']
    procs = [subprocess.Popen([sys.executable, 'sweep.py', *common, f'--results={tmp_path / f"r{i}.jsonl"}'], cwd=HERE,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for i in (1, 2)]
    errs = [p.communicate(timeout=600)[1] for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes in ([0, 0], [0, 2]), errs
    if codes == [0, 2]:
        assert any('not started' in e and 'a rerun of this sweep trains it' in e for e in errs), errs
    (run_dir,) = [d for d in os.listdir(tmp_path / 'runs') if not d.startswith('.')]
    with open(tmp_path / 'runs' / run_dir / 'log.jsonl') as f:
        rows = [json.loads(line) for line in f]
    steps = [r['iter'] for r in rows if 'loss' in r]
    assert steps == sorted(set(steps)) == list(range(0, 300, 50))
    assert {**guards.peek(str(tmp_path / 'runs' / run_dir)), 'meta': None} == \
        {'iter_num': 300, 'tokens_seen': 300 * 64, 'finished': True, 'meta': None}


def test_committed_records_name_the_projects_files_relative_to_it():
    """A record's command is one a user can read in a clone: train.py and its run folder relative to the
    project, no path of the machine that ran it (sweep.py writes them so; older records were rewritten once,
    their numbers unchanged)."""
    import glob
    from configurator import read_jsonl
    seen = 0
    for path in glob.glob(os.path.join(HERE, 'results', '**', '*.jsonl'), recursive=True):
        for _, r in read_jsonl(path):
            if isinstance(r, dict) and isinstance(r.get('command'), str):
                seen += 1
                assert not re.search(r"(^| |=)/", r['command']), (path, r['command'][:200])
    assert seen > 500
