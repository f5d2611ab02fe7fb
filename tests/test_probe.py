"""probe.py: the MQAR generator's invariants, accuracy on answer positions only, attention passing
an easy setting, the results file round-tripping into the table, and re-runs skipping finished runs."""
import dataclasses
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

import probe
from configurator import UsageError, field_docs
from conftest import as_script
from model import GPT, GPTConfig
import configurator
import report
import stats
import sweep

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repository


def batch(seed=0, *, B=64, T=48, N=8, V=64):
    return probe.mqar_batch(np.random.default_rng(seed), batch=B, T=T, n_pairs=N, vocab=V)


# --- the generator ---

def test_keys_distinct_and_from_the_key_half_values_from_the_value_half():
    N, V = 8, 64
    x, _ = batch(N=N, V=V)
    keys, values = x[:, 0:2 * N:2], x[:, 1:2 * N:2]
    assert all(len(set(row)) == N for row in keys.tolist())
    assert keys.min() >= 1 and keys.max() < V // 2  # 0 is FILLER
    assert values.min() >= V // 2 and values.max() < V


def test_every_query_answer_is_the_value_paired_with_its_key_and_every_key_is_asked_once():
    N = 8
    x, y = batch(N=N)
    for xr, yr in zip(x.tolist(), y.tolist()):
        pairs = dict(zip(xr[0:2 * N:2], xr[1:2 * N:2]))
        asked = [(t, xr[t], yr[t]) for t in range(len(xr)) if yr[t] != -1]
        assert sorted(k for _, k, _ in asked) == sorted(pairs)  # each key queried exactly once
        assert all(v == pairs[k] for _, k, v in asked)
        assert all(t >= 2 * N for t, _, _ in asked)  # queries come after the pairs


def test_answers_only_at_answer_positions_and_filler_elsewhere():
    N, T = 8, 48
    x, y = batch(N=N, T=T)
    answer = y != -1
    assert (answer.sum(axis=1) == N).all()
    assert not answer[:, :2 * N].any()  # no target inside the key-value part
    tail = x[:, 2 * N:]
    assert ((tail != probe.FILLER) == answer[:, 2 * N:]).all()  # a query key exactly where an answer is


def test_same_seed_same_data_other_seed_other_data():
    a, b, c = batch(seed=1), batch(seed=1), batch(seed=2)
    assert all((u == v).all() for u, v in zip(a, b))
    assert not (a[0] == c[0]).all()
    # through batch_at: the training stream and the held-out set differ
    tr, ho = probe.batch_at(0, 0, 0, batch=8, T=32, n_pairs=4, vocab=32), probe.batch_at(0, 1, batch=8, T=32, n_pairs=4, vocab=32)
    assert not torch.equal(tr[0], ho[0])


def test_impossible_settings_are_usage_errors():
    with pytest.raises(UsageError, match='distinct keys'):
        batch(N=40, V=64)
    with pytest.raises(UsageError, match='3N <= T'):
        batch(N=20, T=48, V=128)


# --- accuracy ---

def test_accuracy_counts_only_answer_positions():
    x, y = batch(B=8, V=64)
    torch_y = torch.from_numpy(y)
    # "logits" right everywhere except at the answer positions: the filler's id wins there
    right_elsewhere = torch.from_numpy(np.where(y == -1, x, probe.FILLER))
    logits = torch.nn.functional.one_hot(right_elsewhere, 64).float()
    assert probe.accuracy(logits, torch_y) == 0.0
    # and right at the answer positions only (wrong everywhere else): 1
    right_there = torch.from_numpy(np.where(y == -1, probe.FILLER, y))
    assert probe.accuracy(torch.nn.functional.one_hot(right_there, 64).float(), torch_y) == 1.0


def test_the_loss_ignores_non_answer_positions():
    torch.manual_seed(0)
    model = GPT(GPTConfig(n_layer=1, n_head=1, n_embd=16, block_size=48, vocab_size=64))
    x, y = (torch.from_numpy(a) for a in batch(B=4, V=64))
    logits, loss = model(x, y)
    mask = y != -1
    expected = torch.nn.functional.cross_entropy(logits[mask], y[mask])
    assert torch.allclose(loss, expected)


# --- the two views ---

def test_the_mixer_view_removes_exactly_the_channel_mlps():
    p = probe.ProbeConfig()
    for name in ('gpt', 'llama', 'primer_ez', 'swiglu', 'gmlp', 'amlp'):
        path = stats.config_paths([name])[0]
        block = GPT(GPTConfig(**probe.model_args(path, p, view='block', width=64, T=64)))
        mixer = GPT(GPTConfig(**probe.model_args(path, p, view='mixer', width=64, T=64)))
        b, m = dict(block.named_parameters()), dict(mixer.named_parameters())
        assert set(m) <= set(b) and all(m[k].shape == b[k].shape for k in m)
        gone = sorted(set(b) - set(m))
        if block.config.block == 'transformer':  # the MLP and its norm, in every layer, and nothing else
            assert gone and all(re.fullmatch(r'transformer\.h\.\d\.(mlp\.\w+|ln_2)\.\w+', k) for k in gone), gone
            assert {k.split('.')[2] for k in gone} == {'0', '1'} and mixer.config.attn == block.config.attn
        else:  # gMLP and aMLP: the SGU is the mixer, the block stays whole
            assert gone == []


def test_configs_whose_mixers_are_one_model_share_a_run(tmp_path):
    p = probe.ProbeConfig(results=str(tmp_path / 'r.jsonl'), views=['mixer', 'block'])
    todo, _ = probe.plan(p, stats.config_paths(['gpt', 'swiglu', 'geglu', 'llama', 'gmlp']), [64], [64], [4], [3e-3])
    by_view = {view: sorted(names for (v, *_), _, _, names in todo if v == view) for view in ('mixer', 'block')}
    assert by_view['mixer'] == [['gmlp'], ['gpt', 'swiglu', 'geglu'], ['llama']]
    assert by_view['block'] == [['geglu'], ['gmlp'], ['gpt'], ['llama'], ['swiglu']]


# --- the probe can be passed ---

def test_two_layer_attention_alone_solves_an_easy_setting():
    """GPT-2's attention with its MLP removed (the mixer view of configs/gpt.py), 2 layers, reaches
    0.99 held-out accuracy at T=32, N=4 within the test's budget: the probe can be passed."""
    p = probe.ProbeConfig(vocab_size=32, batch_size=128, budget=0.3, eval_interval=50, eval_seqs=256)
    args = probe.model_args(stats.config_paths(['gpt'])[0], p, view='mixer', width=64, T=32)
    r = probe.train_run(args, p, probe.run_key(p, args, view='mixer', T=32, N=4, lr=3e-3))
    assert r['solved'] and r['acc'] >= 0.99, r['curve']
    assert r['curve'][0][1] < 0.2  # learned, not given: about 1/16 (or less) at init
    assert sum(n for *_, n in r['acc_by_distance']) == 256 * 4  # every answer, by how far back its key was


# --- CLI, results file, table, re-runs ---

def test_every_key_has_a_comment_for_help():
    docs = field_docs(probe.ProbeConfig)
    assert [f.name for f in dataclasses.fields(probe.ProbeConfig) if not docs.get(f.name)] == []


def test_bad_config_name_lists_the_valid_ones_in_one_line_exit_2():
    code, _, err = as_script('probe.py', ['--configs=gpt,nope'], HERE)
    assert code == 2 and err.count('\n') == 1 and 'Traceback' not in err
    assert "unknown config 'nope'" in err and 'gmlp' in err


def test_config_names_and_paths_both_work_and_default_leaves_out_quick():
    by_name = stats.config_paths(['gpt', 'gmlp'])
    by_path = stats.config_paths([os.path.join(HERE, 'configs', 'gpt.py')])
    assert [os.path.basename(p) for p in by_name] == ['gpt.py', 'gmlp.py']
    assert os.path.basename(by_path[0]) == 'gpt.py'
    default = [os.path.basename(p) for p in stats.config_paths([])]
    assert 'quick.py' not in default and '_recipe.py' not in default and {'gpt.py', 'gmlp.py', 'amlp.py'} <= set(default)


def test_shape_overrides_keep_the_config_block_and_flags():
    p = probe.ProbeConfig()
    args = probe.model_args(stats.config_paths(['primer_ez'])[0], p, view='block', width=64, T=128)
    assert [args[k] for k in ('attn', 'ffn', 'n_layer', 'n_embd', 'n_head', 'block_size', 'vocab_size')] == \
        ['mdha', 'relu2', 2, 64, 2, 128, 256]
    assert probe.model_args(stats.config_paths(['primer_ez'])[0], p, view='mixer', width=64, T=128)['ffn'] == 'none'
    args = probe.model_args(stats.config_paths(['gmlp'])[0], p, view='mixer', width=64, T=256)
    assert (args['block'], args['pos_emb'], args['match_params']) == ('gmlp', 'none', '')


def test_the_budget_follows_the_emergence_law():
    p = probe.ProbeConfig()  # batch 512: 10^5.7 sqrt(512 x 64) tokens at T=64, about 2,800 steps
    assert probe.law_steps(p, 64) == 2769 and probe.law_steps(p, 256) == 1385  # sqrt(4) = 2x tokens, 4x per step
    assert probe.law_steps(dataclasses.replace(p, budget=2.0), 64) == math.ceil(2 * 10 ** 5.7 / math.sqrt(512 * 64))


def fake_record(p, config, width, T, N, lr, acc, view='mixer'):
    args = probe.model_args(stats.config_paths([config])[0], p, view=view, width=width, T=T)
    key = probe.run_key(p, args, view=view, T=T, N=N, lr=lr)
    return dict(kind='probe', key=key, **key, config=config, configs=[config], acc=acc, best_acc=acc,
                solved=acc >= p.stop_acc, solved_at=10 if acc >= p.stop_acc else None, steps_run=10, seconds=1.0,
                params=1000, curve=[[0, 0.0, 4.0], [10, acc, 1.0]])


def test_results_file_round_trips_into_the_table(tmp_path):
    p = probe.ProbeConfig(results=str(tmp_path / 'r.jsonl'))
    for rec in (fake_record(p, 'gpt', 64, 64, 4, 1e-3, 0.5), fake_record(p, 'gpt', 64, 64, 4, 3e-3, 1.0),
                fake_record(p, 'gmlp', 64, 64, 4, 1e-3, 0.25), fake_record(p, 'gmlp', 64, 64, 8, 1e-3, 0.125),
                fake_record(p, 'gpt', 64, 64, 4, 3e-3, 0.75, view='block')):
        stats.append_record(p.results, rec)
    with open(p.results, 'a') as f:
        f.write('{"key": {"config": "gpt", "wid')  # a line cut short by a killed run is skipped
    records = stats.read_results(p.results, 'probe')
    assert len(records) == 5
    lines = probe.probe_table(records).splitlines()
    assert lines[0].startswith('| config | view | width | params | T=64 N=4 | T=64 N=8 |')
    gpt = next(line for line in lines if line.startswith('| gpt | mixer |'))
    gmlp = next(line for line in lines if line.startswith('| gmlp | mixer |'))
    assert gpt.endswith('| 1.00 (10 steps, lr 0.003) | – |')  # the best lr; a missing cell shown as –
    assert gmlp.endswith('| 0.25 | 0.12 |')
    assert next(line for line in lines if line.startswith('| gpt | block |')).endswith('| 0.75 | – |')
    rows = probe.main([f'--results={p.results}', f'--png={tmp_path / "r.png"}', '--replot'])
    assert len(rows) == 5
    if report.pyplot() is not None:
        assert open(tmp_path / 'r.png', 'rb').read(8) == b'\x89PNG\r\n\x1a\n'


def test_replot_skips_a_hand_edited_record_with_a_line_naming_it(tmp_path, capsys):
    """A record edited by hand so a field a report reads is broken (T, curve, acc, width): skipped with a
    line naming the file, the line and the field; never a traceback."""
    p = probe.ProbeConfig(results=str(tmp_path / 'r.jsonl'))
    stats.append_record(p.results, fake_record(p, 'gpt', 64, 64, 4, 1e-3, 0.5))
    edits = [('T', 'x'), ('curve', 'x'), ('curve', [[0, 'x', 1.0]]), ('acc', 1e308), ('width', 0), ('solved_at', 'x'),
             ('view', 3), ('machine', ['x'])]
    for field, value in edits:
        stats.append_record(p.results, {**fake_record(p, 'gmlp', 64, 64, 4, 1e-3, 0.25), field: value})
    rows = probe.main([f'--results={p.results}', f'--png={tmp_path / "r.png"}', '--replot'])
    assert len(rows) == 1
    err = capsys.readouterr().err
    for n, (field, _) in enumerate(edits, 2):
        assert f"r.jsonl line {n}: its {field!r} is missing or not what probe.py writes" in err, err


def test_rerun_skips_finished_runs_and_tries_the_next_lr_only_when_unsolved(tmp_path, monkeypatch):
    p = probe.ProbeConfig(results=str(tmp_path / 'r.jsonl'))
    paths = stats.config_paths(['gpt', 'gmlp'])
    calls = []

    def fake_train_run(args, probe_, key, stopper=()):
        name = 'gpt' if args['block'] == 'transformer' else 'gmlp'
        calls.append((name, key['lr']))
        return fake_record(probe_, name, key['width'], key['T'], key['N'], key['lr'], 1.0 if name == 'gpt' else 0.3)

    monkeypatch.setattr(probe, 'train_run', fake_train_run)
    grid = (paths, [64], [64], [4])
    assert probe.run_grid(p, probe.plan(p, *grid, [3e-3, 1e-3])[0], ()) == (3, 0)  # (runs, cells cut short)
    assert sorted(calls) == [('gmlp', 1e-3), ('gmlp', 3e-3), ('gpt', 3e-3)]  # gpt solved at its first lr
    calls.clear()
    assert probe.plan(p, *grid, [3e-3, 1e-3]) == ([], 2) and calls == []  # everything is in the file
    # a new lr in the grid runs only for the unsolved cell
    assert probe.run_grid(p, probe.plan(p, *grid, [3e-3, 1e-3, 1e-2])[0], ()) == (1, 0) and calls == [('gmlp', 1e-2)]


def test_quick_in_a_fresh_clone_stops_at_ctrl_c_continues_and_leaves_git_clean(tmp_path):
    """probe.py --quick in a fresh clone, Ctrl-C once the first cell is recorded: the running cell is cut
    short at its next step (it has nothing to save) and no process is left; the run recorded before
    stays; the printed command continues, skipping it; no tracked file changed."""
    if subprocess.run(['git', 'rev-parse'], cwd=HERE, capture_output=True).returncode:
        pytest.skip('not a git checkout')
    clone = tmp_path / 'clone'  # the tracked files as they are now, in a repository of their own
    for name in subprocess.run(['git', 'ls-files'], cwd=HERE, capture_output=True, text=True).stdout.split():
        os.makedirs(clone / os.path.dirname(name), exist_ok=True)
        shutil.copy(os.path.join(HERE, name), clone / name)
    for cmd in (['init', '-q'], ['add', '-A'], ['-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-qm', 'x']):
        subprocess.run(['git', *cmd], cwd=clone, check=True)
    results = clone / 'out-probe' / 'quick.jsonl'
    cmd = [sys.executable, 'probe.py', '--quick']
    proc = subprocess.Popen(cmd, cwd=clone, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    while proc.poll() is None and not (results.exists() and results.read_text().count('\n') >= 1):
        time.sleep(0.05)  # the first cell recorded: the second one running
    os.killpg(proc.pid, signal.SIGINT)  # the terminal's Ctrl-C: the whole process group
    err = proc.communicate(timeout=120)[1]
    assert proc.returncode == 130, err
    assert '2 cells to run (0 already in' in err and 'Traceback' not in err, err
    assert 'stopped: 1 runs recorded' in err and '1 cell(s) cut short; continue with: python probe.py' in err
    for _ in range(50):  # none left
        left = subprocess.run(['pgrep', '-g', str(proc.pid)], capture_output=True, text=True).stdout
        if not left:
            break
        time.sleep(0.2)
    assert left == ''
    again = subprocess.run(cmd, cwd=clone, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert "1 cells to run (1 already in" in again.stderr and '1 runs in' in again.stderr  # it trained, and said so
    assert len(stats.read_results(str(results), 'probe')) == 2
    assert subprocess.run(['git', 'status', '--porcelain'], cwd=clone, capture_output=True, text=True).stdout == ''


def test_train_py_keys_make_variants_of_a_config(tmp_path):
    """--bias=True (any train.py key) changes every probed model; its runs are named and keyed apart."""
    paths = [os.path.join(HERE, 'configs', 'gpt_rope.py')]
    base = probe.model_args(paths[0], probe.ProbeConfig(), view='mixer', width=64, T=64)
    biased = probe.model_args(paths[0], probe.ProbeConfig(), view='mixer', width=64, T=64, overrides=['--bias=True'])
    assert not base['bias'] and biased['bias'] and biased['pos_emb'] == 'rope' and biased['ffn'] == 'none'
    cfg = probe.ProbeConfig(results=str(tmp_path / 'r.jsonl'))
    todo, _ = probe.plan(cfg, paths, [64], [64], [4], [1e-3], ['--bias=True'])
    plain, _ = probe.plan(cfg, paths, [64], [64], [4], [1e-3])
    assert todo[0][3] == ['gpt_rope --bias=True'] and plain[0][3] == ['gpt_rope']
    assert todo[0][1][0]['model'] != plain[0][1][0]['model']
    with pytest.raises(UsageError, match="unknown key 'nope'"):
        probe.main(['--nope=1'])
