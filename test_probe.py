"""probe.py: the MQAR generator's invariants, accuracy on answer positions only, attention passing
an easy setting, the results file round-tripping into the table, and re-runs skipping finished runs."""
import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import probe
from configurator import UsageError, field_docs

HERE = os.path.dirname(os.path.abspath(__file__))


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
    from model import GPT, GPTConfig
    torch.manual_seed(0)
    model = GPT(GPTConfig(n_layer=1, n_head=1, n_embd=16, block_size=48, vocab_size=64))
    x, y = (torch.from_numpy(a) for a in batch(B=4, V=64))
    logits, loss = model(x, y)
    mask = y != -1
    expected = torch.nn.functional.cross_entropy(logits[mask], y[mask])
    assert torch.allclose(loss, expected)


# --- the probe can be passed ---

def test_two_layer_attention_solves_an_easy_setting():
    """A 2-layer Primer EZ (MDHA attention, configs/primer_ez.py) reaches >= 0.9 held-out accuracy at
    T=32, N=4: the probe can be passed. (The GPT-2 block with learned positions needs far more steps
    than a test has: see the README's probe section.)"""
    p = probe.ProbeConfig(vocab_size=32, steps=400, batch_size=32, lr=['3e-3'], warmup_iters=30,
                          eval_interval=50, eval_seqs=256, stop_acc=0.95)
    path = probe.config_paths(['primer_ez'])[0]
    r = probe.train_run(path, p, probe.run_key(p, path, 64, 32, 4, 3e-3), 1)
    assert r['acc'] >= 0.9, r['curve']
    assert r['curve'][0][1] < 0.2  # learned, not given: about 1/16 (or less) at init


# --- CLI, results file, table, re-runs ---

def test_every_key_has_a_comment_for_help():
    docs = field_docs(probe.ProbeConfig)
    assert [f.name for f in dataclasses.fields(probe.ProbeConfig) if not docs.get(f.name)] == []


def test_bad_config_name_lists_the_valid_ones_in_one_line_exit_2():
    out = subprocess.run([sys.executable, 'probe.py', '--configs=gpt,nope'], cwd=HERE, capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stderr.count('\n') == 1 and 'Traceback' not in out.stderr
    assert "unknown config 'nope'" in out.stderr and 'gmlp' in out.stderr


def test_config_names_and_paths_both_work_and_default_leaves_out_quick():
    by_name = probe.config_paths(['gpt', 'gmlp'])
    by_path = probe.config_paths([os.path.join(HERE, 'configs', 'gpt.py')])
    assert [os.path.basename(p) for p in by_name] == ['gpt.py', 'gmlp.py']
    assert os.path.basename(by_path[0]) == 'gpt.py'
    default = [os.path.basename(p) for p in probe.config_paths([])]
    assert 'quick.py' not in default and {'gpt.py', 'gmlp.py', 'amlp.py'} <= set(default)


def test_shape_overrides_keep_the_config_block_and_flags():
    p = probe.ProbeConfig()
    cfg = probe.train_config(probe.config_paths(['primer_ez'])[0], p, width=64, T=128, lr=1e-3)
    assert (cfg.attn, cfg.ffn, cfg.n_layer, cfg.n_embd, cfg.n_head, cfg.block_size, cfg.vocab_size) == \
        ('mdha', 'relu2', 2, 64, 2, 128, 128)
    cfg = probe.train_config(probe.config_paths(['gmlp'])[0], p, width=64, T=256, lr=1e-3)
    assert (cfg.block, cfg.pos_emb, cfg.match_params) == ('gmlp', 'none', '')


def fake_record(p, config, width, T, N, lr, acc):
    key = probe.run_key(p, os.path.join('configs', config + '.py'), width, T, N, lr)
    return dict(key=key, **key, acc=acc, best_acc=acc, solved=acc >= p.stop_acc, steps_run=10, seconds=1.0,
                params=1000, curve=[[0, 0.0, 4.0], [10, acc, 1.0]])


def test_results_file_round_trips_into_the_table(tmp_path):
    p = probe.ProbeConfig(results=str(tmp_path / 'r.jsonl'))
    for rec in (fake_record(p, 'gpt', 64, 64, 4, 1e-3, 0.5), fake_record(p, 'gpt', 64, 64, 4, 3e-3, 1.0),
                fake_record(p, 'gmlp', 64, 64, 4, 1e-3, 0.25), fake_record(p, 'gmlp', 64, 64, 8, 1e-3, 0.125)):
        probe.append_record(p.results, rec)
    with open(p.results, 'a') as f:
        f.write('{"key": {"config": "gpt", "wid')  # a line cut short by a killed run is skipped
    records = probe.read_results(p.results, 'probe')
    assert len(records) == 4
    lines = probe.table(records).splitlines()
    assert lines[0].startswith('| config | width | params | T=64 N=4 | T=64 N=8 |')
    gpt = next(l for l in lines if l.startswith('| gpt |'))
    gmlp = next(l for l in lines if l.startswith('| gmlp |'))
    assert gpt.endswith('| 1.00 | – |')  # best over learning rates; the missing cell shown as –
    assert gmlp.endswith('| 0.25 | 0.12 |')
    rows = probe.main([f'--results={p.results}', f'--png={tmp_path / "r.png"}', '--replot'])
    assert len(rows) == 4


def test_rerun_skips_finished_runs_and_tries_the_next_lr_only_when_unsolved(tmp_path, monkeypatch):
    p = probe.ProbeConfig(results=str(tmp_path / 'r.jsonl'), jobs=1, lr=['3e-3', '1e-3'])
    paths = probe.config_paths(['gpt', 'gmlp'])
    calls = []

    def fake_train_run(path, probe_, key, threads=None, log=False):
        calls.append((key['config'], key['lr']))
        return fake_record(probe_, key['config'], key['width'], key['T'], key['N'], key['lr'],
                           1.0 if key['config'] == 'gpt' else 0.3)

    monkeypatch.setattr(probe, 'train_run', fake_train_run)
    args = (p, paths, [64], [64], [4], [3e-3, 1e-3])
    assert probe.run_grid(*args) == 3
    assert sorted(calls) == [('gmlp', 1e-3), ('gmlp', 3e-3), ('gpt', 3e-3)]  # gpt solved at its first lr
    calls.clear()
    assert probe.run_grid(*args) == 0 and calls == []  # everything is in the file
    assert len(probe.read_results(p.results, 'probe')) == 3
    # a new lr in the grid runs only for the unsolved cell
    assert probe.run_grid(p, paths, [64], [64], [4], [3e-3, 1e-3, 1e-2]) == 1 and calls == [('gmlp', 1e-2)]
