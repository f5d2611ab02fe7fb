"""
sweep.py's records a user can trust: the key is the resolved run, a run folder belongs to one sweep
from its start to its record, only finished runs are recorded, a file shared with a killed writer
stays readable, Ctrl-C stops the sweep and its runs, and warmup-stable-decay branches equal straight
runs. Tiny shapes on a corpus each test writes.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

import results as R
import sweep
from configurator import UsageError

HERE = os.path.dirname(os.path.abspath(__file__))
TINY = ['--n_layer=1', '--n_embd=32', '--n_head=2', '--block_size=16', '--batch_size=4', '--eval_iters=2',
        '--warmup_iters=2', '--device=cpu']


def cli(*args, timeout=300):
    return subprocess.run([sys.executable, 'sweep.py', *args], cwd=HERE, capture_output=True, text=True,
                          timeout=timeout)


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
        assert sweep.run_id(edited.key) != sweep.run_id(base.key), edit
        assert edited.run_dir != base.run_dir and edited.key[name] != base.key[name]
    (copy / '_recipe.py').write_text(recipe)
    assert sweep.run_id(plan(tmp_path, configs_dir=copy).key) == sweep.run_id(base.key)  # stable
    for no_effect in (['--log_interval=7'], ['--out_dir=elsewhere'], ['--always_save_checkpoint=False']):
        assert sweep.run_id(plan(tmp_path, no_effect, configs_dir=copy).key) == sweep.run_id(base.key)
    assert set(sweep.NO_EFFECT) < set(sweep.DEFAULTS)  # each a train.py setting, by name
    # a record written before a setting existed (no such key) matches when the setting is at its default
    older = {k: v for k, v in base.key.items() if k != 'cooldown_frac'}
    assert sweep.run_id(older) == sweep.run_id(base.key)
    assert sweep.run_id({**older, 'cooldown_frac': 0.5}) != sweep.run_id(base.key)


def test_the_key_names_the_data_not_the_folder_it_was_prepared_into(tiny_data, tmp_path):
    """Two folders prepared from one text share a fingerprint; another text with the same tokenizer
    does not, so its runs are not mistaken for this one's."""
    import prepare
    from data import fingerprint, read_meta
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


# -----------------------------------------------------------------------------
# the results file: duplicates, a killed writer, glued lines

def record(config, seed, val, **kw):
    key = dict(config=config, seed=seed, lr=1e-3, **kw)
    return dict(kind='sweep', key=key, config=config, size='1x32', seed=seed, lr=1e-3, optimizer='adamw',
                budget='max_iters', budget_value=10, data_dir='d', val_loss=val, params=100, tokens=10,
                flops=1.0, train_s=1.0, curve=[[0, 0, 0.0, 0.0, val + 1], [10, 10, 1.0, 1.0, val]])


def test_the_regime_view_ranks_each_budget_and_pairs_the_gaps_to_both_baselines(tmp_path):
    """Several budgets at one size: a rank, loss and best lr per budget, the gaps to gpt and to llama
    paired by seed at every budget, a '-' where a config has no run, and the gap plot."""
    recs = []
    losses = {  # (config, budget): {lr: per-seed losses}; x overtakes llama at the long budget
        ('gpt', 100): {1e-3: [3.0, 3.2], 2e-3: [2.9, 3.1]}, ('gpt', 1600): {2e-3: [2.0, 2.2]},
        ('llama', 100): {1e-3: [2.5, 2.7]}, ('llama', 1600): {1e-3: [1.9, 2.1]},
        ('x', 100): {1e-3: [2.6, 2.9]}, ('x', 1600): {1e-3: [1.7, 2.0]}, ('y', 100): {1e-3: [2.8, 3.0]}}
    for (name, budget), by_lr in losses.items():
        for lr, vals in by_lr.items():
            for seed, v in enumerate(vals, 1):
                recs.append({**record(name, seed, v, budget=budget, at_lr=lr), 'lr': lr, 'budget_value': budget,
                             'tokens': 1000 * budget, 'schedule': 'wsd'})
    rows = R.summary_rows(recs)
    groups = R.regime_groups(rows)
    assert len(groups) == 1
    rs = next(iter(groups.values()))
    text = R.regime_tables(rs)
    lines = {line.split(' | ')[0]: line for line in text.splitlines() if line.startswith('| ')}
    assert '| config | 1000.0 (100) | 16000.0 (1600) |' in text  # tokens per gpt parameter (100)
    first = text.split('gap to gpt')[0]
    assert '| x | #2 2.7500 ± 0.2121 (2), lr 0.001 | #1 1.8500 ± 0.2121 (2), lr 0.001 |' in first
    assert '| gpt | #4 3.0000 ± 0.1414 (2), lr 0.002 (top of grid) | #3 2.1000' in first  # its grid's edge
    assert '| y | #3 2.9000 ± 0.1414 (2), lr 0.001 | – |' in first
    to_gpt, to_llama = text.split('gap to gpt')[1].split('gap to llama')
    assert '| x | -0.2500 ± 0.0500 | -0.2500 ± 0.0500 |' in to_gpt  # (2.6-2.9, 2.9-3.1) and (1.7-2.0, 2.0-2.2)
    assert '| x | +0.1500 ± 0.0500 | -0.1500 ± 0.0500 |' in to_llama and '| gpt |' in to_llama
    if R.pyplot() is not None:
        png = str(tmp_path / 'regime.png')
        assert R.plot_regime(rs, png, 'title') and os.path.getsize(png) > 10_000
    # a sweep of one other config alone over the budgets (its report shows its own runs): no gap to
    # draw, its loss instead
    alone = next(iter(R.regime_groups(R.summary_rows([r for r in recs if r['config'] == 'x'])).values()))
    assert 'gap to' not in R.regime_tables(alone)
    if R.pyplot() is not None:
        png = str(tmp_path / 'alone.png')
        assert R.plot_regime(alone, png, 'title') and os.path.getsize(png) > 10_000


def test_a_cut_short_last_line_is_set_aside_before_the_next_append(tmp_path, capsys):
    path = str(tmp_path / 'r.jsonl')
    R.append_record(path, record('gpt', 1, 2.0))
    whole = open(path, 'rb').read()
    with open(path, 'ab') as f:
        f.write(json.dumps(record('gpt', 2, 2.1)).encode()[:40])  # a writer killed mid-line
    assert [r['seed'] for r in R.read_results(path)] == [1]
    assert 'line 2 is cut short' in capsys.readouterr().err
    R.append_record(path, record('gpt', 3, 2.2))
    err = capsys.readouterr().err
    assert f"moved to {path}.partial" in err
    assert [r['seed'] for r in R.read_results(path)] == [1, 3]  # the next record is whole, not glued
    assert open(path, 'rb').read().startswith(whole) and open(path, 'rb').read().endswith(b'\n')
    assert open(path + '.partial', 'rb').read() == json.dumps(record('gpt', 2, 2.1)).encode()[:40] + b'\n'
    R.append_record(path, record('gpt', 4, 2.3))  # a whole file: nothing set aside
    assert [r['seed'] for r in R.read_results(path)] == [1, 3, 4] and 'moved' not in capsys.readouterr().err


def test_a_record_glued_to_a_cut_short_line_is_read(tmp_path, capsys):
    """What appends did before they set cut-short lines aside: the next record on the same line."""
    path = tmp_path / 'r.jsonl'
    path.write_bytes(json.dumps(record('gpt', 1, 2.0)).encode()[:30] + json.dumps(record('gpt', 2, 2.1)).encode()
                     + b'\n' + json.dumps(record('gpt', 3, 2.2)).encode() + b'\n')
    assert [r['seed'] for r in R.read_results(str(path))] == [2, 3]
    assert 'line 1 starts with 30 bytes of a record cut short' in capsys.readouterr().err
    path.write_text('{"kind": "sweep", "oops": 1}\n')  # not a record at all: still an error
    with pytest.raises(UsageError, match="line 1 is not a sweep results record"):
        R.read_results(str(path))


def test_two_records_of_one_run_are_read_once_and_said(tmp_path, capsys):
    path = str(tmp_path / 'r.jsonl')
    for seed, val in ((1, 2.0), (2, 2.1), (1, 2.5)):
        R.append_record(path, record('gpt', seed, val))
    got = R.read_results(path)
    assert [(r['seed'], r['val_loss']) for r in got] == [(1, 2.0), (2, 2.1)]
    assert 'records 1 run(s) twice, lines 3 (as line 1)' in capsys.readouterr().err


def test_two_processes_appending_at_once_leave_whole_lines(tmp_path):
    path = str(tmp_path / 'r.jsonl')
    code = ("import sys, results as R\n"
            "for i in range(200):\n"
            "    R.append_record(sys.argv[1], dict(kind='sweep', key={'w': sys.argv[2], 'i': i}, config='gpt', "
            "seed=i, lr=1e-3, size='x', budget='max_iters', budget_value=1, optimizer='adamw', data_dir='d', "
            "val_loss=1.0, pad='x' * 5000))\n")
    procs = [subprocess.Popen([sys.executable, '-c', code, path, w], cwd=HERE) for w in 'ab']
    assert all(p.wait(timeout=120) == 0 for p in procs)
    assert len(R.read_results(path)) == 400


# -----------------------------------------------------------------------------
# one run, one sweep: claims, finished runs only

def test_a_run_another_sweep_holds_is_waited_for_and_not_trained_again(tiny_data, tmp_path, capsys):
    """Sweep B finds the run's claim held by sweep A: it waits (never deletes A's folder), and once A has
    recorded the run, B records nothing and trains nothing."""
    cfg = sweep.SweepConfig(out_prefix=str(tmp_path / 'runs'), max_iters=['4'])
    p = sweep.plan_run(os.path.join(HERE, 'configs', 'gpt.py'), cfg, [*TINY, f'--data_dir={tiny_data}'],
                       seed=1, lr=1e-3, size=None)
    os.makedirs(p.run_dir)
    marker = os.path.join(p.run_dir, 'sweep-A-was-here')
    open(marker, 'w').close()
    results = str(tmp_path / 'r.jsonl')
    held = sweep.claim(os.path.join(cfg.out_prefix, '.claims', os.path.basename(p.run_dir)))
    with sweep.Stopper() as stopper:
        runs = sweep.Sweep(cfg, results, stopper)
        t = threading.Thread(target=runs.run, args=(p,))
        t.start()
        time.sleep(1.5)
        assert t.is_alive() and os.path.exists(marker)  # waiting, and A's folder untouched
        R.append_record(results, {**record('gpt', 1, 1.0), 'key': p.key})  # A records the run...
        sweep.release(held)  # ...and lets go
        t.join(timeout=60)
    assert not t.is_alive() and os.path.exists(marker) and not runs.recorded
    assert len(R.read_results(results)) == 1
    err = capsys.readouterr().err
    assert 'another sweep is running it' in err and 'recorded by another sweep' in err


def test_a_constant_lr_run_another_sweep_holds_is_waited_for_then_branched(tiny_data, tmp_path, capsys):
    """Two sweeps with other budgets share one constant-lr run: while sweep A holds it (training it
    further, or copying it), sweep B neither trains it nor copies it; then B branches as usual."""
    cfg = sweep.SweepConfig(out_prefix=str(tmp_path / 'runs'), max_iters=['10'])
    p = sweep.plan_run(os.path.join(HERE, 'configs', 'gpt.py'), cfg,
                       [*TINY, f'--data_dir={tiny_data}', '--lr_schedule=wsd', '--eval_interval=5'],
                       seed=1, lr=2e-3, size=None)
    assert p.trunk and p.branch_at == 8
    held = sweep.claim(os.path.join(cfg.out_prefix, '.claims', os.path.basename(p.trunk)))
    results = str(tmp_path / 'r.jsonl')
    with sweep.Stopper() as stopper:
        runs = sweep.Sweep(cfg, results, stopper)
        t = threading.Thread(target=runs.run, args=(p,))
        t.start()
        time.sleep(1.5)
        assert t.is_alive() and not os.path.exists(p.trunk) and not os.path.exists(p.run_dir)
        sweep.release(held)
        t.join(timeout=120)
    assert not t.is_alive() and len(runs.recorded) == 1
    rec = R.read_results(results)[0]
    assert rec['iters'] == 10 and rec['branched_from'].endswith(' at iter 8')
    assert 'another sweep is running it' in capsys.readouterr().err


def test_a_run_that_did_not_finish_its_budget_is_not_recorded(tiny_data, tmp_path, capsys):
    """The record comes from the checkpoint's own state: a run that stops short of its planned
    iterations (here a config that stops it by tokens first) is a failure, not a record."""
    cfg = sweep.SweepConfig(out_prefix=str(tmp_path / 'runs'), max_iters=['8'])
    p = sweep.plan_run(os.path.join(HERE, 'configs', 'gpt.py'), cfg,
                       [*TINY, f'--data_dir={tiny_data}', '--eval_interval=4'], seed=1, lr=1e-3, size=None)
    p.cmd.append('--max_tokens=128')  # 2 iterations of 4 x 16
    with sweep.Stopper() as stopper:
        runs = sweep.Sweep(cfg, str(tmp_path / 'r.jsonl'), stopper)
        assert runs.run(p) is None
    assert runs.failed and not os.path.exists(tmp_path / 'r.jsonl')
    assert 'ended at iter 2 without finishing its 8 iterations; not recorded' in capsys.readouterr().err


def test_a_failed_run_is_said_by_its_own_error_line_and_the_command_that_reruns_it(tmp_path):
    cmd = [sys.executable, os.path.join(HERE, 'train.py'), '--no_such_key=1']
    with sweep.Stopper() as stopper:
        runs = sweep.Sweep(sweep.SweepConfig(out_prefix=str(tmp_path / 'runs')), str(tmp_path / 'r.jsonl'), stopper)
        ok, why = runs.train(cmd, resume=False)
    assert not ok
    assert why.splitlines() == ["exit 2: error: unknown key 'no_such_key'; run with --help to list the keys",
                                '  rerun: ' + ' '.join(cmd)]


def test_two_sweeps_on_one_file_record_each_run_once_and_whole(tiny_data, tmp_path):
    args = sweep_args(tiny_data, tmp_path, '--seeds=2', '--learning_rate=1e-3,2e-3', '--max_iters=12',
                      '--eval_interval=4', '--configs=gpt,llama', '--jobs=2')
    procs = [subprocess.Popen([sys.executable, 'sweep.py', *args], cwd=HERE, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    errs = [p.communicate(timeout=300)[1] for p in procs]
    assert all(p.returncode == 0 for p in procs), errs
    recs = R.read_results(str(tmp_path / 'r.jsonl'))
    assert len(recs) == 8 and len({sweep.run_id(r['key']) for r in recs}) == 8
    assert all(r['iters'] == 12 and r['curve'][-1][0] == 12 for r in recs)
    assert 'twice' not in ''.join(errs)


# -----------------------------------------------------------------------------
# Ctrl-C, and what comes back after it

@pytest.mark.parametrize('how', ['parent', 'group'])
def test_ctrl_c_stops_the_sweep_its_runs_save_and_a_rerun_continues(tiny_data, tmp_path, how):
    args = sweep_args(tiny_data, tmp_path, '--seeds=3', '--max_iters=400', '--eval_interval=100', '--jobs=2',
                      '--learning_rate=1e-3')
    proc = subprocess.Popen([sys.executable, 'sweep.py', *args], cwd=HERE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.time() + 120
    while not list((tmp_path / 'runs').glob('*/log.jsonl')) and time.time() < deadline:
        time.sleep(0.2)
    time.sleep(1.0)
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
    again = cli(*sweep_args(tiny_data, tmp_path, '--seeds=3', '--max_iters=400', '--eval_interval=100',
                            '--jobs=2', '--learning_rate=1e-3'))
    assert again.returncode == 0, again.stderr
    recs = R.read_results(str(tmp_path / 'r.jsonl'))
    assert sorted(r['seed'] for r in recs) == [1, 2, 3] and all(r['iters'] == 400 for r in recs)
    # a stopped run resumed where it stood: the same result as a straight run (exact resume)
    straight = cli(*sweep_args(tiny_data, tmp_path, '--seeds=1', '--max_iters=400', '--eval_interval=100',
                               '--learning_rate=1e-3', '--jobs=2', f'--results={tmp_path / "s.jsonl"}',
                               f'--out_prefix={tmp_path / "straight"}'))
    assert straight.returncode == 0
    one = R.read_results(str(tmp_path / 's.jsonl'))[0]
    assert one['val_loss'] == next(r for r in recs if r['seed'] == 1)['val_loss']


# -----------------------------------------------------------------------------
# warmup-stable-decay: branches equal straight runs

def test_wsd_branches_equal_straight_runs_and_share_one_constant_lr_run(tiny_data, tmp_path):
    args = sweep_args(tiny_data, tmp_path, '--lr_schedule=wsd', '--max_iters=10,20,40', '--eval_interval=10',
                      '--learning_rate=2e-3', '--jobs=1')
    r = cli(*args)
    assert r.returncode == 0, r.stderr
    assert '3 runs to do (1 constant-lr runs branched into cooldowns)' in r.stderr
    recs = sorted(R.read_results(str(tmp_path / 'r.jsonl')), key=lambda r: r['budget_value'])
    assert [r['iters'] for r in recs] == [10, 20, 40]
    assert [r['branched_from'].split(' at iter ')[1] for r in recs] == ['8', '16', '32']  # a fifth: cooldown
    trunks = list((tmp_path / 'runs').glob('*-wsd-trunk-*'))
    assert len(trunks) == 1
    for rec in recs:  # the straight run each record's command names gives the same loss, bit for bit
        cmd = [a for a in rec['command'].split() if not a.startswith('--out_dir=')]
        out = tmp_path / f"straight{rec['iters']}"
        p = subprocess.run([sys.executable, *cmd, f'--out_dir={out}'], cwd=HERE, capture_output=True, text=True,
                           timeout=120, env={**os.environ, 'OMP_NUM_THREADS': '1'})
        assert p.returncode == 0, p.stderr
        rows = [json.loads(line) for line in open(out / 'log.jsonl')]
        assert [r['val_loss'] for r in rows if 'val_loss' in r][-1] == rec['val_loss']
    again = cli(*args)
    assert again.returncode == 0 and '0 runs to do' in again.stderr


# -----------------------------------------------------------------------------
# a sweep that cannot mislead: matched parameters, curves, edges, its own runs

def test_a_match_that_cannot_come_within_one_percent_is_an_error_naming_where_it_can():
    """gMLP at 2x64 with a 256-byte context: its 256 x 256 spatial weights per layer outweigh the GPT-2
    block it is matched to (+13%); the error says so and names a shape that matches."""
    from model import GPTConfig, count_params, matched_width
    cfg = GPTConfig(n_layer=2, n_embd=64, n_head=2, block_size=256, vocab_size=256, block='gmlp', pos_emb='none',
                    match_params='gpt', bias=False)
    with pytest.raises(ValueError, match=r"gmlp cannot come within 1% of the GPT-2 block's 131,392 parameters at "
                                         r"n_layer=2, n_embd=64, block_size=256 \(closest: 148,546, \+13%\); it can "
                                         r"at n_embd=96 or block_size=128"):
        matched_width(cfg)
    for shape in (dict(n_embd=96, n_head=3), dict(block_size=128)):  # the shapes it names do match
        ok = GPTConfig(**{**vars(cfg), **shape})
        gpt = GPTConfig(**{**vars(ok), 'block': 'transformer', 'pos_emb': 'learned', 'match_params': ''})
        assert abs(count_params(ok) / count_params(gpt) - 1) <= 0.01


def test_a_sweep_at_a_shape_a_config_cannot_match_is_one_line(tiny_data, tmp_path):
    r = cli('--configs=gpt,gmlp', '--n_layer=2', '--n_embd=64', '--n_head=2', '--block_size=256',
            f'--data_dir={tiny_data}', '--max_iters=2', f'--results={tmp_path / "r.jsonl"}')
    assert r.returncode == 2 and r.stderr.count('\n') == 1, r.stderr
    assert r.stderr.startswith("error: gmlp: match_params='gpt': gmlp cannot come within 1%")
    assert not (tmp_path / 'r.jsonl').exists()


def test_tables_mark_a_config_whose_parameters_are_not_matched(tmp_path, capsys):
    path = str(tmp_path / 'r.jsonl')
    for config, params in (('gpt', 1000), ('wide', 1300), ('near', 1005)):
        R.append_record(path, {**record(config, 1, 2.0), 'params': params})
    sweep.report(sweep.SweepConfig(), path, str(tmp_path / 'p.png'))
    out = capsys.readouterr().out
    assert '| wide | 1x32 | adamw | max_iters=10 | 1,300 (+30% vs gpt: not matched) |' in out
    assert '| near | 1x32 | adamw | max_iters=10 | 1,005 |' in out


def test_a_best_lr_at_the_edge_of_its_grid_is_flagged_with_the_flag_that_extends_it(tmp_path, capsys):
    path = str(tmp_path / 'r.jsonl')
    for lr, val in ((1e-3, 2.0), (2e-3, 1.9), (4e-3, 1.8)):  # still falling at the largest lr
        R.append_record(path, {**record('gpt', 1, val), 'lr': lr, 'key': {'lr': lr}})
    rows = sweep.report(sweep.SweepConfig(), path, str(tmp_path / 'p.png'))
    assert rows[0]['edge'] == 'top' and not rows[0]['tuned']
    assert '| 0.004 (top of grid: --extend_lr) |' in capsys.readouterr().out


def test_a_sweep_draws_curves_of_eight_points_and_reports_only_its_own_runs(tiny_data, tmp_path):
    results = tmp_path / 'r.jsonl'
    R.append_record(str(results), {**record('amlp', 7, 9.9), 'data_dir': 'another', 'key': {'other': 1}})
    r = cli(*sweep_args(tiny_data, tmp_path, '--max_iters=40', '--learning_rate=2e-3'))
    assert r.returncode == 0, r.stderr
    rec = next(x for x in R.read_results(str(results)) if x['config'] == 'gpt')
    assert [p[0] for p in rec['curve']] == [0, 5, 10, 15, 20, 25, 30, 35, 40]  # every 40 // 8 iterations
    assert '| gpt |' in r.stdout and 'amlp' not in r.stdout  # this sweep's runs only
    assert 'amlp' in cli('--report', f'--results={results}').stdout  # --report: the whole file
    r = cli(*sweep_args(tiny_data, tmp_path, '--max_iters=40', '--learning_rate=2e-3', '--eval_interval=20'))
    rec = [x for x in R.read_results(str(results)) if x['config'] == 'gpt'][-1]
    assert [p[0] for p in rec['curve']] == [0, 20, 40]  # given: as given


def test_a_recipe_file_and_hellaswag_scores_go_into_every_record(tiny_data, tmp_path):
    """--recipe applies a config file after each architecture's (its keys win, the block stays); with
    --hellaswag each finished run is scored by eval.py and the tables gain a column."""
    recipe = tmp_path / 'recipe.py'
    recipe.write_text("n_layer = 1\nn_embd = 32\nn_head = 2\nblock_size = 16\nbatch_size = 4\nlearning_rate = 2e-3\n")
    items = tmp_path / 'items.jsonl'
    items.write_text(''.join(json.dumps({'ctx': 'the cat', 'endings': ['sat', 'ran', 'dog', 'red'], 'label': i % 4})
                             + '\n' for i in range(8)))
    r = cli('--configs=gpt,gmlp', f'--recipe={recipe}', f'--hellaswag={items}', '--max_iters=4', '--eval_iters=1',
            '--device=cpu', f'--data_dir={tiny_data}', f'--results={tmp_path / "r.jsonl"}',
            f'--out_prefix={tmp_path / "runs"}')
    assert r.returncode == 0, r.stderr
    recs = R.read_results(str(tmp_path / 'r.jsonl'))
    assert sorted(x['config'] for x in recs) == ['gmlp', 'gpt']
    assert all(x['n_layer'] == 1 and x['n_embd'] == 32 and x['lr'] == 2e-3 and x['hellaswag_n'] == 8 for x in recs)
    assert next(x for x in recs if x['config'] == 'gmlp')['key']['block'] == 'gmlp'
    assert 'HellaSwag acc_norm' in r.stdout
    bad = cli('--configs=gpt', '--recipe=nope.py', f'--data_dir={tiny_data}')
    assert bad.returncode == 2 and "--recipe='nope.py' not found" in bad.stderr
