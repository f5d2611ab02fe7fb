"""
bench.py: the speed table / JSON at a tiny shape, the sweep summary and the plot from log.jsonl files.
"""
import json
import os
import subprocess
import sys

import pytest

import bench

HERE = os.path.dirname(os.path.abspath(__file__))
TINY = ['--n_layer=1', '--n_head=2', '--n_embd=16', '--block_size=16', '--batch_size=2', '--iters=1',
        '--repeats=3', '--warmup=1', '--decode_tokens=4', '--device=cpu']
CONFIGS = [os.path.join(HERE, 'configs', 'gpt.py'), os.path.join(HERE, 'configs', 'gmlp.py')]


def test_speed_mode_json_and_table():
    proc = subprocess.run([sys.executable, 'bench.py', *CONFIGS, *TINY, '--json'], cwd=HERE,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert 'device=cpu' in out['setup']
    rows = out['rows']
    assert [r['config'] for r in rows] == ['gpt', 'gmlp']
    for r in rows:
        assert r['params'] > 0 and r['ms_per_iter'] > 0 and r['flops_per_token'] > 0
        assert r['tokens_per_s'] == pytest.approx(2 * 16 / (r['ms_per_iter'] / 1000))
        assert r['decode_tok_s_cached'] > 0 and r['decode_tok_s_uncached'] > 0
        assert r['mfu'] is None  # no peak FLOP/s on a CPU
    assert rows[0]['flops_per_token'] != rows[1]['flops_per_token']  # each block counted its own way

    table = bench.markdown_table(rows, bench.SPEED_COLUMNS)
    lines = table.splitlines()
    assert len(lines) == 2 + len(rows)
    assert all(line.startswith('| ') and line.endswith(' |') for line in lines[2:])
    assert all(line.count('|') == len(bench.SPEED_COLUMNS) + 1 for line in lines)


def test_bad_arguments_are_one_line():
    proc = subprocess.run([sys.executable, 'bench.py', 'configs/nope.py'], cwd=HERE,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr == "error: config 'configs/nope.py' not found\n"
    proc = subprocess.run([sys.executable, 'bench.py', '--plot'], cwd=HERE, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr.startswith('error: --plot needs run directories')


def fake_run(folder, losses, ms_per_iter):
    os.makedirs(folder)
    with open(os.path.join(folder, 'log.jsonl'), 'w') as f:
        for k, loss in enumerate(losses):
            it = 10 * k
            f.write(json.dumps({'iter': it, 'loss': loss, 'lr': 1e-3, 'tokens': 100 * it,
                                'elapsed_s': it * ms_per_iter / 1000, 'train_s': it * ms_per_iter / 1000}) + '\n')
            f.write(json.dumps({'iter': it, 'train_loss': loss, 'val_loss': loss + 0.1, 'lr': 1e-3,
                                'tokens': 100 * it, 'elapsed_s': it * ms_per_iter / 1000,
                                'train_s': it * ms_per_iter / 1000}) + '\n')
        f.write('{"iter": 99, "loss"')  # a line cut short by a killed run is skipped
    return str(folder)


def test_summary_of_runs(tmp_path):
    a = fake_run(tmp_path / 'a', [4.0, 3.0, 2.5, 2.0], ms_per_iter=20)
    s = bench.run_summary(a)
    assert s['run'] == 'a' and s['final_val'] == pytest.approx(2.1) and s['best_val'] == pytest.approx(2.1)
    assert s['iters'] == 30 and s['tokens'] == 3000 and s['ms_per_iter'] == pytest.approx(20)
    with pytest.raises(bench.UsageError, match='log.jsonl not found'):
        bench.run_summary(str(tmp_path))


def test_plot_writes_a_png(tmp_path):
    pytest.importorskip('matplotlib')
    a = fake_run(tmp_path / 'a', [4.0, 3.0, 2.5, 2.0], ms_per_iter=20)
    b = fake_run(tmp_path / 'b', [4.0, 2.8, 2.2, 1.9], ms_per_iter=30)
    png = str(tmp_path / 'runs.png')
    assert bench.plot_runs([a, b], png)
    with open(png, 'rb') as f:
        data = f.read()
    assert data[:8] == b'\x89PNG\r\n\x1a\n' and len(data) > 5000
    assert not [p for p in os.listdir(tmp_path) if '.tmp' in p]


def test_plot_without_matplotlib_is_one_line(tmp_path, monkeypatch, capsys):
    a = fake_run(tmp_path / 'a', [4.0, 3.0], ms_per_iter=20)
    monkeypatch.setitem(sys.modules, 'matplotlib', None)  # import matplotlib now raises ImportError
    assert bench.plot_runs([a], str(tmp_path / 'runs.png')) is False
    assert capsys.readouterr().err == "plots skipped: matplotlib is not installed (pip install matplotlib)\n"
    assert not os.path.exists(tmp_path / 'runs.png')
