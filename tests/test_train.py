"""
train.py on CPU in seconds: every config builds and trains, a resumed run equals a straight one
bit for bit, 2 DDP processes equal 1 process with twice the accumulation, user errors are one
line, an interrupted checkpoint write keeps the previous checkpoint, a non-finite loss stops the
run, and the token / time budgets stop it. Every test makes its own tiny corpus.
"""
import dataclasses
import glob
import json
import math
import os
import re
import shlex
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

import train
from configurator import UsageError, parse_config
from conftest import as_script, write_shard
from model import GPT, GPTConfig, count_params
import guards
import prepare
import dataset

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repository
CONFIGS = sorted(glob.glob(os.path.join(HERE, 'configs', '[!_]*.py')))  # _recipe.py: shared, not a config
# every architecture config in configs/ (all but quick.py and the _recipes): a config added there is
# checked below (its parameter count, matched to gpt's within 1%, trains, the results table) with no edit here
ARCHS = tuple(sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(HERE, 'configs', '[!_]*.py'))
                     if not p.endswith('quick.py')))

# architecture configs added since results/sweep_stdlib.jsonl was made: their learning rate is not yet
# the best of its grid (the test of the results table says so, and skips them)
NOT_YET_TUNED = ()

# a small model that trains in milliseconds per iteration
TINY = ['--device=cpu', '--dtype=float32', '--compile=False', '--n_layer=2', '--n_head=2', '--n_embd=32',
        '--block_size=16', '--batch_size=4', '--gradient_accumulation_steps=1', '--eval_iters=2',
        '--eval_interval=4', '--log_interval=1', '--warmup_iters=2', '--lr_decay_iters=20',
        '--learning_rate=1e-2', '--min_lr=1e-3', '--max_iters=6']


def corpus_text(n_words, seed):
    words = "the a cat dog sat ran on under mat log and then it was big small red".split()
    rng = np.random.default_rng(seed)
    return ' '.join(rng.choice(words, size=n_words)) + '.\n'


def write_corpus(folder, *, meta=True):
    """Char-level shards: two train shards and one val shard, with or without meta.json."""
    os.makedirs(folder, exist_ok=True)
    texts = {'train_000000.bin': corpus_text(3000, 0), 'train_000001.bin': corpus_text(1000, 1),
             'val_000000.bin': corpus_text(800, 2)}
    chars = sorted(set(''.join(texts.values())))
    for name, text in texts.items():
        write_shard(os.path.join(folder, name), np.array([chars.index(c) for c in text], dtype=np.uint16))
    if meta:
        with open(os.path.join(folder, 'meta.json'), 'w') as f:
            json.dump({'tokenizer': {'kind': 'char', 'chars': ''.join(chars)}, 'vocab_size': len(chars),
                       'eot_token': None, 'source': {'name': 'test'}, 'format_version': 1}, f)
    return str(folder)


@pytest.fixture(scope='module')
def data_dir(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp('data'))


def run(data_dir, out_dir, *extra):
    return train.main([*TINY, f'--data_dir={data_dir}', f'--out_dir={out_dir}', *extra])


def read_log(out_dir):
    with open(os.path.join(out_dir, 'log.jsonl')) as f:
        rows = [json.loads(line) for line in f]
    steps = {r['iter']: r for r in rows if 'loss' in r}
    evals = {r['iter']: r for r in rows if 'val_loss' in r}
    return steps, evals


def cli(*args, **kw):
    return subprocess.run([sys.executable, os.path.join(HERE, 'train.py'), *args], cwd=HERE,
                          capture_output=True, text=True, timeout=120, **kw)


def torchrun(script, *args):
    """`torchrun --standalone --nproc_per_node=2 script args` on the CPU (gloo), one thread per process."""
    return subprocess.run([sys.executable, '-m', 'torch.distributed.run', '--standalone', '--nproc_per_node=2',
                           str(script), *args], cwd=HERE, env={**os.environ, 'OMP_NUM_THREADS': '1'},
                          capture_output=True, text=True, timeout=120)


# -----------------------------------------------------------------------------
# configs/

def param_comment(path):
    text = open(path).read()
    m = re.search(r"# parameters: ([\d.]+)M \(get_num_params\(\) at vocab_size=(\d+)", text)
    assert m, f"{path} lacks its '# parameters: ...M (get_num_params() at vocab_size=N' comment"
    return float(m.group(1)), int(m.group(2))


def built_params(path, vocab_size):
    cfg = parse_config(train.TrainConfig, [path])
    return GPT(GPTConfig(**{**cfg.model_args(), 'vocab_size': vocab_size})).get_num_params()


@pytest.mark.parametrize('name', ARCHS)
def test_every_architecture_config_states_only_its_block_on_the_shared_recipe(name):
    """An architecture config starts from the shared recipe and is matched to gpt's parameters: what
    README's "Adding a block" asks of a new one."""
    assert 'gpt' in ARCHS and 'quick' not in ARCHS
    text = open(os.path.join(HERE, 'configs', f'{name}.py')).read()
    assert 'from _recipe import *' in text, f"configs/{name}.py must start with `from _recipe import *`"
    cfg = parse_config(train.TrainConfig, [os.path.join(HERE, 'configs', f'{name}.py')])
    assert name == 'gpt' or cfg.match_params == 'gpt', f"configs/{name}.py must set match_params = 'gpt'"


@pytest.mark.parametrize('path', CONFIGS, ids=lambda p: os.path.basename(p))
def test_config_header_is_what_its_command_computes(path):
    """Every figure of a config's header comment (its parameters; matched to gpt: how far from gpt's
    count and the width that gets there) is what `python tests/config_header.py CONFIG` prints."""
    from config_header import header
    stated, vocab = param_comment(path)
    text = open(path).read()
    data = re.search(r"# parameters: .* at vocab_size=\d+, ([^)]*)\)", text).group(1)
    want, rel = header(path, vocab, data), os.path.relpath(path, HERE)
    got = [line for line in text.splitlines() if line.startswith('# parameters:') or ' vs gpt: ' in line]
    if got != want:  # the header follows from the model: a model that fails its own checks is the cause
        from test_model import ffn_problem
        cfg = parse_config(train.TrainConfig, [path])
        cause = cfg.block == 'transformer' and cfg.ffn != 'none' and ffn_problem(cfg.ffn)
        pytest.fail(f"{rel}'s header differs from what its command computes because the model fails its own "
                    f"check: {cause}; fix the model first (the header follows from it)" if cause else
                    f"{rel}'s header says {got}; `python tests/config_header.py {rel} --vocab_size={vocab} "
                    f"--data={data}` computes {want}: write those lines", pytrace=False)
    n = built_params(path, vocab)
    if os.path.basename(path)[:-3] in ARCHS:  # matched to the gpt baseline within 1% (match_params='gpt')
        base = built_params(os.path.join(HERE, 'configs', 'gpt.py'), vocab)
        assert abs(n / base - 1) < 0.01, f"{path}: {n:,} parameters vs gpt's {base:,}"


@pytest.mark.parametrize('name', ARCHS)
def test_architecture_configs_train_what_the_results_table_reports(name):
    """GUIDE.md says `train.py configs/gmlp.py` trains the run RESULTS.md §2's main table reports: every
    architecture config's corpus, shape, iterations and learning rate are those of that table's row
    in the committed results file, the best lr of its grid."""
    from report import summary_rows
    from stats import read_results
    rows = summary_rows(read_results(os.path.join(HERE, 'results', 'sweep_stdlib.jsonl')))
    cfg = parse_config(train.TrainConfig, [os.path.join(HERE, 'configs', f'{name}.py')])
    size = f"{cfg.n_layer}x{cfg.n_embd}"
    row = [r for r in rows if r['config'] == name and r['data_dir'] == cfg.data_dir and r['size'] == size
           and r['budget'] == f"max_iters={cfg.max_iters}" and r['optimizer'] == cfg.optimizer]
    if not row and name in NOT_YET_TUNED:
        return
    assert len(row) == 1, (f"configs/{name}.py has no row in results/sweep_stdlib.jsonl at {cfg.data_dir}, "
                           f"{size}: run its lr grid as RESULTS.md §2 says (python sweep.py --configs={name} "
                           "... --results=results/sweep_stdlib.jsonl) and set its best lr, or name it in "
                           "NOT_YET_TUNED in test_train.py until you have")
    assert row[0]['n'] >= 3 and row[0]['runs'][0]['block_size'] == cfg.block_size
    assert cfg.learning_rate == row[0]['lr'] and cfg.min_lr == pytest.approx(cfg.learning_rate / 10), \
        f"configs/{name}.py: learning_rate {cfg.learning_rate}, the table's best is {row[0]['lr']}"


@pytest.mark.parametrize('path', CONFIGS, ids=lambda p: os.path.basename(p))
def test_config_trains_at_a_shrunken_size(path, data_dir, tmp_path):
    out = tmp_path / 'out'
    summary = train.main([path, '--device=cpu', '--dtype=float32', '--compile=False', '--n_layer=1',
                          '--block_size=16', '--batch_size=2', '--gradient_accumulation_steps=1',
                          '--max_iters=3', '--eval_iters=1', '--eval_interval=2', '--log_interval=1',
                          f'--data_dir={data_dir}', f'--out_dir={out}'])
    assert summary['iter_num'] == 3 and np.isfinite(summary['val_loss'])
    ckpt = guards.load_checkpoint(str(out / 'ckpt.pt'))
    model = GPT.from_checkpoint(ckpt)
    cfg = parse_config(train.TrainConfig, [path])
    for key in ('block', 'attn', 'ffn', 'n_embd', 'gmlp_d_ffn', 'ffn_hidden', 'ffn_multiple_of'):
        assert getattr(model.config, key) == getattr(cfg, key)


# -----------------------------------------------------------------------------
# the checkpoint and its helpers

def test_checkpoint_layout_and_rebuild(data_dir, tmp_path):
    run(data_dir, tmp_path, '--max_iters=3')
    ckpt = guards.load_checkpoint(str(tmp_path / 'ckpt.pt'))
    assert {'model', 'model_args', 'config', 'meta', 'optimizer', 'scaler', 'iter_num', 'tokens_seen',
            'best_val_loss', 'rng', 'format_version'} <= ckpt.keys()
    assert ckpt['iter_num'] == 3 and ckpt['tokens_seen'] == 3 * 4 * 16
    with open(os.path.join(data_dir, 'meta.json')) as f:
        assert ckpt['meta'] == json.load(f)
    with open(tmp_path / 'config.json') as f:  # the settings, for a person (how far the run got: the checkpoint)
        assert json.load(f) == ckpt['config'] and ckpt['finished'] is True
    assert ckpt['config']['vocab_size'] == ckpt['meta']['vocab_size'] == ckpt['model_args']['vocab_size']
    assert not any(k.startswith(('_orig_mod.', 'module.')) for k in ckpt['model'])
    assert {'torch', 'cuda', 'numpy', 'python', 'data'} <= ckpt['rng'][0].keys()
    steps, evals = read_log(tmp_path)
    assert sorted(steps) == [0, 1, 2] and sorted(evals) == [0, 3]
    for row in steps.values():
        assert {'iter', 'loss', 'lr', 'elapsed_s', 'train_s', 'tokens', 'tokens_per_s', 'mfu'} <= row.keys()
        assert 0 <= row['train_s'] <= row['elapsed_s'] and row['tokens_per_s'] > 0
    # the first step compiles (with --compile): it is not training time, the later ones are
    assert steps[0]['train_s'] == 0 < steps[1]['train_s'] < steps[2]['train_s']
    assert {'train_loss', 'val_loss', 'tokens', 'elapsed_s', 'train_s'} <= evals[3].keys()
    assert ckpt['best_val_loss'] == min(r['val_loss'] for r in evals.values())
    # the rebuilt model is the trained one: same logits as the saved weights give
    ckpt['model_args']['no_such_field'] = 1  # a field from a future model.py is dropped
    del ckpt['model_args']['tie_weights']  # a field an older checkpoint lacks takes its default
    model = GPT.from_checkpoint(ckpt).eval()
    idx = torch.randint(0, ckpt['model_args']['vocab_size'], (2, 16))
    reference = GPT(GPTConfig(**guards.load_checkpoint(str(tmp_path / 'ckpt.pt'))['model_args']))
    reference.load_state_dict(ckpt['model'])
    assert torch.equal(model.eval()(idx)[0], reference.eval()(idx)[0])


def test_load_checkpoint_errors_are_one_line(tmp_path):
    with pytest.raises(UsageError, match='no checkpoint'):
        guards.load_checkpoint(str(tmp_path / 'missing.pt'))
    (tmp_path / 'bad.pt').write_bytes(b'not a checkpoint at all')
    with pytest.raises(UsageError, match='cannot be read') as e:
        guards.load_checkpoint(str(tmp_path / 'bad.pt'))
    assert '\n' not in str(e.value)


def test_batches_are_a_function_of_their_key(data_dir):
    shards = dataset.open_dataset(data_dir)[1]['train']
    a = train.Batches(shards, block_size=16, batch_size=8, seed=5, device='cpu')
    b = train.Batches(shards, block_size=16, batch_size=8, seed=5, device='cpu')
    x, y = a.get(0, 3, 1)
    assert torch.equal(x, b.get(0, 3, 1)[0]) and not torch.equal(x, a.get(0, 3, 2)[0])
    assert torch.equal(x[:, 1:], y[:, :-1])  # targets are the inputs shifted by one
    assert x.dtype == torch.int64 and x.shape == (8, 16)


# -----------------------------------------------------------------------------
# exactness: resume, DDP

def test_resume_equals_straight_through_bitwise(data_dir, tmp_path):
    extra = ['--dropout=0.1', '--max_iters=12']  # dropout: the RNG state must come back too
    run(data_dir, tmp_path / 'straight', *extra)
    run(data_dir, tmp_path / 'split', '--dropout=0.1', '--max_iters=6')
    run(data_dir, tmp_path / 'split', *extra, '--init_from=resume')
    a_steps, a_evals = read_log(tmp_path / 'straight')
    b_steps, b_evals = read_log(tmp_path / 'split')
    assert sorted(b_steps) == list(range(12))
    for it in range(12):
        assert a_steps[it]['loss'] == b_steps[it]['loss'], it
        assert a_steps[it]['tokens'] == b_steps[it]['tokens']
    for it in (8, 12):
        assert a_evals[it]['val_loss'] == b_evals[it]['val_loss']
    a = guards.load_checkpoint(str(tmp_path / 'straight' / 'ckpt.pt'))
    b = guards.load_checkpoint(str(tmp_path / 'split' / 'ckpt.pt'))
    assert a['iter_num'] == b['iter_num'] == 12
    for k, v in a['model'].items():
        assert torch.equal(v, b['model'][k]), k


def test_wsd_schedule_is_constant_then_decays_to_min_lr_at_its_budget():
    """Warmup as cosine's, then learning_rate until the cooldown (the last cooldown_frac of
    lr_decay_iters), then down to min_lr, reached at lr_decay_iters (the budget) and kept after: so
    the runs of one lr at any budgets share every step before the shortest one's cooldown."""
    cfg = train.TrainConfig(lr_schedule='wsd', learning_rate=1e-2, min_lr=1e-3, warmup_iters=10,
                              lr_decay_iters=100, max_iters=100)
    cosine = train.TrainConfig(learning_rate=1e-2, min_lr=1e-3, warmup_iters=10, lr_decay_iters=100)
    lrs = [cfg.lr_at(it) for it in range(120)]
    assert lrs[:10] == [cosine.lr_at(it) for it in range(10)]
    assert cfg.cooldown_start() == 80 and all(lr == 1e-2 for lr in lrs[10:80])
    assert lrs[80] == pytest.approx(1e-2, rel=1e-12)  # the cooldown's first step: 1 - sqrt(0), up to rounding
    assert all(a > b for a, b in zip(lrs[80:100], lrs[81:101])) and lrs[100] == 1e-3 and set(lrs[100:]) == {1e-3}
    assert lrs[90] == pytest.approx(1e-3 + 9e-3 * (1 - math.sqrt(0.5)))  # the 1 - sqrt cooldown
    longer = train.TrainConfig(**{**vars(cfg), 'lr_decay_iters': 400, 'max_iters': 400})
    assert [longer.lr_at(it) for it in range(80)] == lrs[:80]  # a prefix of every longer run
    with pytest.raises(ValueError, match="cooldown .* starts at iter 9, inside warmup_iters=10"):
        train.TrainConfig(lr_schedule='wsd', warmup_iters=10, lr_decay_iters=11)
    with pytest.raises(ValueError, match='cooldown_frac must be in'):
        train.TrainConfig(lr_schedule='wsd', cooldown_frac=0.0)
    with pytest.raises(ValueError, match="unknown|not one of"):
        train.TrainConfig(lr_schedule='linear')


def test_resume_in_the_middle_of_a_cooldown_is_exact(data_dir, tmp_path):
    wsd = ['--lr_schedule=wsd', '--lr_decay_iters=12', '--cooldown_frac=0.5', '--warmup_iters=2']
    run(data_dir, tmp_path / 'straight', *wsd, '--max_iters=12')
    run(data_dir, tmp_path / 'split', *wsd, '--max_iters=9')  # the cooldown runs from iteration 6 to 12
    run(data_dir, tmp_path / 'split', *wsd, '--max_iters=12', '--init_from=resume')
    a_steps, a_evals = read_log(tmp_path / 'straight')
    b_steps, b_evals = read_log(tmp_path / 'split')
    assert [a_steps[it]['lr'] for it in range(12)] == [b_steps[it]['lr'] for it in range(12)]
    assert a_steps[5]['lr'] == 1e-2 and all(a_steps[it]['lr'] > a_steps[it + 1]['lr'] for it in range(6, 11))
    assert [a_steps[it]['loss'] for it in range(12)] == [b_steps[it]['loss'] for it in range(12)]
    assert a_evals[12]['val_loss'] == b_evals[12]['val_loss']
    a = guards.load_checkpoint(str(tmp_path / 'straight' / 'ckpt.pt'))
    b = guards.load_checkpoint(str(tmp_path / 'split' / 'ckpt.pt'))
    for k, v in a['model'].items():
        assert torch.equal(v, b['model'][k]), k


def test_two_ddp_processes_equal_one_with_twice_the_accumulation(data_dir, tmp_path):
    args = [*TINY, f'--data_dir={data_dir}', '--gradient_accumulation_steps=2', '--max_iters=5']
    proc = torchrun(os.path.join(HERE, 'train.py'), *args, f'--out_dir={tmp_path / "ddp"}')
    assert proc.returncode == 0, proc.stderr[-3000:]
    train.main([*args, f'--out_dir={tmp_path / "one"}'])
    ddp_steps, ddp_evals = read_log(tmp_path / 'ddp')
    one_steps, one_evals = read_log(tmp_path / 'one')
    assert sorted(ddp_steps) == sorted(one_steps) == list(range(5))
    for it in range(5):
        assert abs(ddp_steps[it]['loss'] - one_steps[it]['loss']) < 1e-4, it
        assert ddp_steps[it]['tokens'] == one_steps[it]['tokens'] == (it + 1) * 2 * 4 * 16
    for it in one_evals:
        assert abs(ddp_evals[it]['val_loss'] - one_evals[it]['val_loss']) < 1e-4
    assert len(guards.load_checkpoint(str(tmp_path / 'ddp' / 'ckpt.pt'))['rng']) == 2


@pytest.mark.skipif(not os.path.isdir('/proc/self/task'), reason='lists the threads of a rank from /proc')
def test_ddp_ranks_leave_no_process_group_threads_behind(data_dir, tmp_path):
    # gloo's threads still running when the interpreter exits abort a finished rank now and then
    # (SIGABRT, "terminate called without an active exception"): destroy_process_group must end them
    rank = tmp_path / 'rank.py'
    rank.write_text(f"""import glob, sys, time
sys.path.insert(0, {HERE!r})
import train
train.main(sys.argv[1:])
def gloo():
    return [n for p in glob.glob('/proc/self/task/*/comm') if 'gloo' in (n := open(p).read())]
deadline = time.time() + 10  # a thread may take a moment to end once told to
while gloo() and time.time() < deadline:
    time.sleep(0.05)
sys.exit(f'threads left 10 s after main: {{gloo()}}' if gloo() else 0)
""")
    proc = torchrun(rank, *TINY, f'--data_dir={data_dir}', '--max_iters=2', f'--out_dir={tmp_path / "out"}')
    assert proc.returncode == 0 and 'threads left' not in proc.stderr, proc.stderr[-3000:]
    assert guards.load_checkpoint(str(tmp_path / 'out' / 'ckpt.pt'))['iter_num'] == 2


def test_accumulation_is_rounded_up_to_a_multiple_of_the_processes():
    assert [train.micro_steps(a, n) for a, n in [(40, 8), (1, 8), (3, 2), (4, 2), (5, 1)]] == [5, 1, 2, 2, 5]


def test_a_shipped_config_runs_under_torchrun_with_more_processes_than_its_accumulation(data_dir, tmp_path):
    # configs/gpt.py as written has gradient_accumulation_steps = 1: two processes make it 2 micro-steps
    out = tmp_path / 'out'
    proc = torchrun(os.path.join(HERE, 'train.py'), os.path.join(HERE, 'configs', 'gpt.py'),
                    '--device=cpu', '--n_layer=1', '--block_size=16', '--batch_size=2', '--max_iters=3',
                    '--eval_iters=2', '--eval_interval=2', '--log_interval=1', f'--data_dir={data_dir}',
                    f'--out_dir={out}')
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert 'tokens per iteration: 64 = 2 process(es) x 1 micro-step(s) x batch_size 2 x block_size 16; ' \
           'model: ' in proc.stdout  # 1 accumulation step over 2 processes: one micro-step each
    ckpt = guards.load_checkpoint(str(out / 'ckpt.pt'))
    assert ckpt['iter_num'] == 3 and ckpt['tokens_seen'] == 3 * 64 and len(ckpt['rng']) == 2


# -----------------------------------------------------------------------------
# user errors

@pytest.mark.parametrize('flag,expect', [
    ('--batchsize=3', 'batch_size'), ('--batch_size=abc', 'int (the default is 12)'),
    ('llama', 'did you mean configs/llama.py?'),  # a bare config name, as sweep.py takes them
    ('configs/gpt.py --max_iters=10k', 'not a valid int (the value in effect is 500)')])  # the config's value
def test_bad_flag_is_one_line(flag, expect):
    code, _, err = as_script('train.py', flag.split(), HERE)
    assert code == 2 and 'Traceback' not in err
    assert len(err.strip().splitlines()) == 1 and expect in err


@pytest.mark.parametrize('flags,expect', [
    (['--warmup_iters=100', '--lr_decay_iters=50'], 'lr_decay_iters'),
    (['--init_from=restart'], 'init_from'),
    (['--dtype=fp16'], 'dtype'),
    (['--block=gmlp', '--ffn=swiglu'], 'gmlp'),
    (['--n_embd=100', '--n_head=3'], 'n_head'),
])
def test_invalid_combination_is_a_usage_error(flags, expect):
    with pytest.raises(UsageError, match=expect) as e:
        parse_config(train.TrainConfig, flags)
    assert '\n' not in str(e.value)


def test_runtime_usage_errors(data_dir, tmp_path, monkeypatch):
    with pytest.raises(UsageError, match='smaller than the data'):
        run(data_dir, tmp_path, '--vocab_size=5')
    with pytest.raises(UsageError, match='data_dir'):
        run(tmp_path / 'nowhere', tmp_path)
    with pytest.raises(UsageError, match=r"^data_dir '.*shakespeare_char' not found; write it with prepare.py "
                                         r"\(python prepare.py --help\) or pass --data_dir=...$"):
        run(tmp_path / 'data' / 'shakespeare_char', tmp_path)
    with pytest.raises(UsageError, match='no checkpoint'):
        run(data_dir, tmp_path / 'empty', '--init_from=resume')


def test_resume_with_another_architecture_is_an_error(data_dir, tmp_path):
    run(data_dir, tmp_path, '--max_iters=2')
    with pytest.raises(UsageError, match=r'n_layer=2 \(asked 3\)'):
        run(data_dir, tmp_path, '--init_from=resume', '--n_layer=3')
    summary = run(data_dir, tmp_path, '--init_from=resume', '--max_iters=3', '--dropout=0.1')  # dropout may change
    assert summary['iter_num'] == 3


@pytest.mark.parametrize('dtype', ['bfloat16', 'float16'])
def test_autocast_dtypes_train_on_cpu(dtype, data_dir, tmp_path):
    summary = run(data_dir, tmp_path, f'--dtype={dtype}', '--max_iters=3')  # float16: with GradScaler
    assert np.isfinite(summary['val_loss'])
    ckpt = guards.load_checkpoint(str(tmp_path / 'ckpt.pt'))
    assert all(v.dtype == torch.float32 for v in ckpt['model'].values())  # autocast keeps float32 weights
    assert bool(ckpt['scaler']) == (dtype == 'float16')


def test_raw_shards_take_the_vocabulary_from_the_config(tmp_path):
    raw = write_corpus(tmp_path / 'raw', meta=False)
    for name in os.listdir(raw):  # llm.c's own names: fineweb_train_000000.bin, fineweb_val_000000.bin
        os.rename(os.path.join(raw, name), os.path.join(raw, 'fineweb_' + name))
    run(raw, tmp_path / 'out', '--vocab_size=40', '--max_iters=1')
    ckpt = guards.load_checkpoint(str(tmp_path / 'out' / 'ckpt.pt'))
    assert ckpt['model_args']['vocab_size'] == 40 and ckpt['meta'] is None


def test_raw_shards_with_ids_beyond_the_vocabulary_are_one_line(tmp_path):
    raw = write_corpus(tmp_path / 'raw', meta=False)  # ~20 distinct chars
    for name in os.listdir(raw):  # raw shards as llm.c names them (prepare.py's names need meta.json)
        os.rename(os.path.join(raw, name), os.path.join(raw, 'fineweb_' + name))
    with pytest.raises(UsageError, match=r'fineweb_train_00000\d.bin holds token id \d+ >= vocab_size=5'):
        run(raw, tmp_path / 'out', '--vocab_size=5', '--max_iters=1')


def test_resume_from_a_foreign_checkpoint_is_one_line(data_dir, tmp_path):
    run(data_dir, tmp_path, '--max_iters=2')
    ckpt = torch.load(tmp_path / 'ckpt.pt', weights_only=True)
    # as nanoGPT saves it: compiled-module prefixes, and no tokens_seen / rng / scaler
    ckpt['model'] = {'_orig_mod.' + k: v for k, v in ckpt['model'].items()}
    for key in ('tokens_seen', 'rng', 'scaler'):
        del ckpt[key]
    torch.save(ckpt, tmp_path / 'ckpt.pt')
    with pytest.raises(UsageError, match='ckpt.pt cannot resume here: it was not written by this train.py, or is corrupt'):
        run(data_dir, tmp_path, '--init_from=resume')
    model = GPT.from_checkpoint(ckpt)  # sample.py still reads it: the prefixes are stripped
    assert model.get_num_params() > 0


def test_resume_skips_a_log_line_cut_short(data_dir, tmp_path):
    run(data_dir, tmp_path, '--max_iters=4')
    with open(tmp_path / 'log.jsonl', 'a') as f:
        f.write('{"iter": 7, "loss": 2.6')  # a kill mid-write
    summary = run(data_dir, tmp_path, '--init_from=resume', '--max_iters=6')
    steps, evals = read_log(tmp_path)
    assert summary['iter_num'] == 6 and sorted(steps) == list(range(6))


def test_out_dir_that_cannot_be_created_is_one_line(data_dir, tmp_path):
    (tmp_path / 'f.txt').write_text('a file')
    code, _, err = as_script('train.py', [*TINY, f'--data_dir={data_dir}', f'--out_dir={tmp_path / "f.txt"}'], HERE)
    assert code == 2 and 'Traceback' not in err
    assert re.fullmatch(r"error: .*f.txt cannot be made a folder \(File exists: .*f.txt\); pass another folder\n",
                        err), err


# -----------------------------------------------------------------------------
# failures and stopping

def test_interrupted_checkpoint_write_keeps_the_previous_one(data_dir, tmp_path, monkeypatch):
    run(data_dir, tmp_path, '--max_iters=4')
    before = (tmp_path / 'ckpt.pt').read_bytes()

    def broken_save(obj, f, *args, **kw):
        f.write(b'half a checkpoint')
        raise RuntimeError('disk went away')
    monkeypatch.setattr(train.torch, 'save', broken_save)
    with pytest.raises(UsageError, match=r"could not write '.*ckpt.pt': disk went away"):  # one line, no traceback
        run(data_dir, tmp_path, '--init_from=resume', '--max_iters=8')
    monkeypatch.undo()
    assert (tmp_path / 'ckpt.pt').read_bytes() == before
    assert guards.load_checkpoint(str(tmp_path / 'ckpt.pt'))['iter_num'] == 4
    assert sorted(os.listdir(tmp_path)) == ['ckpt.pt', 'config.json', 'log.jsonl']  # no temp file left


def test_non_finite_loss_stops_and_saves_nothing(data_dir, tmp_path):
    run(data_dir, tmp_path, '--max_iters=4')
    before = (tmp_path / 'ckpt.pt').read_bytes()
    proc = cli(*TINY, f'--data_dir={data_dir}', f'--out_dir={tmp_path}', '--init_from=resume', '--max_iters=20',
               '--learning_rate=1e30', '--warmup_iters=0', '--grad_clip=0', '--eval_interval=1')
    assert proc.returncode != 0 and 'Traceback' not in proc.stderr
    assert re.fullmatch(r"error: loss is not finite at iter \d+: .*\n", proc.stderr), proc.stderr
    assert (tmp_path / 'ckpt.pt').read_bytes() == before


def test_max_tokens_stops(data_dir, tmp_path):
    summary = run(data_dir, tmp_path, '--max_iters=1000', '--max_tokens=200')  # 64 tokens per iteration
    assert summary['stop'] == 'max_tokens' and summary['iter_num'] == 4 and summary['tokens'] == 256
    assert guards.load_checkpoint(str(tmp_path / 'ckpt.pt'))['iter_num'] == 4


def test_max_seconds_stops(data_dir, tmp_path):
    summary = run(data_dir, tmp_path, '--max_iters=1000000', '--max_seconds=0.5', '--eval_interval=1000',
                  '--log_interval=1000')
    assert summary['stop'] == 'max_seconds' and 0 < summary['iter_num'] < 1000000
    assert summary['train_s'] >= 0.5  # (no upper bound: wall-clock limits belong in bench.py, not tests)
    steps, evals = read_log(tmp_path)
    assert summary['iter_num'] in evals  # the final evaluation


def test_sigint_saves_a_checkpoint_then_exits(data_dir, tmp_path):
    args = [os.path.join(HERE, 'train.py'), *TINY, f'--data_dir={data_dir}', f'--out_dir={tmp_path}',
            '--max_iters=1000000', '--eval_interval=1000000', '--init_from=scratch']
    proc = subprocess.Popen([sys.executable, *args], cwd=HERE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    log, deadline = tmp_path / 'log.jsonl', time.time() + 60
    while time.time() < deadline and not (log.exists() and len(log.read_text().splitlines()) >= 5):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGINT, err
    assert 'Traceback' not in err and 'stopped by SIGINT' in out
    ckpt = guards.load_checkpoint(str(tmp_path / 'ckpt.pt'))
    assert ckpt['iter_num'] >= 4  # the line gives the command that continues it, whole
    assert f"stopped by SIGINT at iter {ckpt['iter_num']}; resume with: python {shlex.join(args[:-1])} " \
           "--init_from=resume\n" in out, out
    steps, _ = read_log(tmp_path)
    assert max(steps) == ckpt['iter_num'] - 1  # the checkpoint holds every logged step
    assert 'SIGINT: stopping after this step' in err and 'Ctrl-C again to abort' in err


def signal_inside_evaluation(monkeypatch, at):
    """A Ctrl-C (SIGINT to this process) half-way through the evaluation at iteration `at`: between its
    splits, where only a wait for it to finish could keep it."""
    real_evaluate, real_bpb, now = train.evaluate, train.bits_per_byte, {}

    def evaluate(model, batches, iter_num, *a, **kw):
        now['iter'] = iter_num
        return real_evaluate(model, batches, iter_num, *a, **kw)

    def bits_per_byte(meta, split, loss):
        if now.get('iter') == at and split == 'train':
            os.kill(os.getpid(), signal.SIGINT)
        return real_bpb(meta, split, loss)
    monkeypatch.setattr(train, 'evaluate', evaluate)
    monkeypatch.setattr(train, 'bits_per_byte', bits_per_byte)


def test_sigint_during_an_evaluation_lets_it_finish_then_saves_and_resumes_exactly(data_dir, tmp_path, monkeypatch,
                                                                                   capsys):
    extra = ['--dropout=0.1', '--max_iters=8']  # dropout: the RNG state must come back too
    run(data_dir, tmp_path / 'straight', *extra)
    run(data_dir, tmp_path / 'split', '--dropout=0.1', '--max_iters=3')  # evals at 0 and 3
    capsys.readouterr()
    with monkeypatch.context() as m:  # resumed, and a Ctrl-C inside the evaluation at iter 4
        signal_inside_evaluation(m, 4)
        with pytest.raises(SystemExit, match='130'):
            run(data_dir, tmp_path / 'split', *extra, '--init_from=resume')
    out, err = capsys.readouterr()
    assert ("SIGINT: the evaluation in progress finishes, then the run stops (a checkpoint is saved if it trained); "
            "Ctrl-C again to abort") in err
    assert re.search(r"^step 4: train loss .*\nsaved .*ckpt.pt at iter 4\nstopped by SIGINT at iter 4", out, re.M), out
    ckpt = guards.load_checkpoint(str(tmp_path / 'split' / 'ckpt.pt'))
    assert ckpt['iter_num'] == 4 and ckpt['evaluated'] and not ckpt['finished']
    steps, evals = read_log(tmp_path / 'split')
    assert sorted(evals) == [0, 3, 4] and ckpt['best_val_loss'] == min(r['val_loss'] for r in evals.values())
    # resumed: the run equals a straight one bit for bit (its evaluation at 4 not run twice)
    run(data_dir, tmp_path / 'split', *extra, '--init_from=resume')
    a_steps, a_evals = read_log(tmp_path / 'straight')
    b_steps, b_evals = read_log(tmp_path / 'split')
    assert sorted(b_steps) == list(range(8)) and sorted(b_evals) == [0, 3, 4, 8]
    assert all(a_steps[it]['loss'] == b_steps[it]['loss'] for it in range(8))
    assert a_evals[4]['val_loss'] == b_evals[4]['val_loss'] and a_evals[8]['val_loss'] == b_evals[8]['val_loss']
    a = guards.load_checkpoint(str(tmp_path / 'straight' / 'ckpt.pt'))
    b = guards.load_checkpoint(str(tmp_path / 'split' / 'ckpt.pt'))
    assert a['iter_num'] == b['iter_num'] == 8
    for k, v in a['model'].items():
        assert torch.equal(v, b['model'][k]), k


def test_a_signal_in_the_final_evaluation_lets_the_run_finish(data_dir, tmp_path, monkeypatch):
    """At its budget a run evaluates last; a signal inside that evaluation lets it finish: the run saves as
    finished (a sweep records it), and its evaluation is logged."""
    out = tmp_path / 'out'
    run(data_dir, out, '--max_iters=3')
    signal_inside_evaluation(monkeypatch, 5)
    summary = run(data_dir, out, '--init_from=resume', '--max_iters=5', '--eval_interval=100')
    ckpt = guards.load_checkpoint(str(out / 'ckpt.pt'))
    assert summary['stop'] == 'max_iters' and ckpt['iter_num'] == 5 and ckpt['evaluated'] and ckpt['finished']
    assert 5 in read_log(out)[1]


# -----------------------------------------------------------------------------
# what a run prints

def test_progress_lines_show_the_position_and_an_eta(data_dir, tmp_path, capsys):
    run(data_dir, tmp_path / 'a', '--max_iters=6')
    out = capsys.readouterr().out
    assert re.search(r"^iter 3/6 \(50%\): loss [\d.]+, lr .*ms/iter, .* tok/s, ETA \d+:\d\d:\d\d$", out, re.M), out
    assert re.search(r"^step 4: evaluating, 2 batches per split\.\.\.\nstep 4: train loss [\d.]+, val loss [\d.]+ "
                     r"± [\d.]+ \(s\.e\. over 2 batches\) \(\d+:\d\d:\d\d\)$", out, re.M), out
    run(data_dir, tmp_path / 'b', '--max_iters=1000', '--max_tokens=200')  # 64 tokens per iteration: 4
    assert re.search(r"^iter 2/4 \(50% of max_tokens\): .*, ETA ", capsys.readouterr().out, re.M)


def test_progress_counts_the_budget_that_ends_the_run_first():
    def status(args, state, tokens_per_iter=100, flops_per_token=1.0):
        cfg = parse_config(train.TrainConfig, args)
        end = train.budget_end(cfg, train.RunState(), tokens_per_iter, flops_per_token)
        return train.progress(cfg, state, end, 0.1)
    # 1750 iterations at 0.1s: the ETA is seconds per iteration times the iterations left
    assert status(['--max_iters=2000', '--eval_interval=500'], train.RunState(iter_num=249, train_s=25.0)) == \
        ('iter 250/2000 (12%)', 'ETA 0:02:55')
    # 35 seconds left end it before max_iters
    assert status(['--max_iters=2000', '--eval_interval=500', '--max_seconds=60'],
                  train.RunState(iter_num=249, train_s=25.0)) == ('iter 250 (42% of max_seconds)', 'ETA 0:00:35')
    assert status(['--max_iters=2000', '--max_flops=1e6'], train.RunState(iter_num=4),
                  flops_per_token=1000.0)[0] == 'iter 5/10 (50% of max_flops)'
    assert [guards.duration(s) for s in (0.04, 42, 92, 5 * 3600 + 180, 3 * 86400 + 4 * 3600)] == \
        ['0:00:00', '0:00:42', '0:01:32', '5:03:00', '3 days, 4:00:00']


def test_resume_with_another_optimizer_is_one_line(data_dir, tmp_path):
    run(data_dir, tmp_path, '--max_iters=2')
    ckpt = torch.load(tmp_path / 'ckpt.pt', weights_only=True)
    ckpt['config']['optimizer'] = 'muon'
    torch.save(ckpt, tmp_path / 'ckpt.pt')
    with pytest.raises(UsageError, match=r"trained with optimizer='muon', asked 'adamw': an optimizer's state loads "
                                         r"into its own kind only; resume with --optimizer=muon") as e:
        run(data_dir, tmp_path, '--init_from=resume', '--max_iters=3')
    assert '\n' not in str(e.value)


def test_a_scratch_run_keeps_the_previous_runs_checkpoint(data_dir, tmp_path, capsys):
    out = tmp_path / 'out'
    run(data_dir, out, '--max_iters=6')
    trained = (out / 'ckpt.pt').read_bytes()
    old_log = (out / 'log.jsonl').read_text()
    run(data_dir, out, '--max_iters=2', '--seed=5')  # rerunning the config: a new, shorter run
    assert f"the run there (iter 6, 384 tokens, finished) moved to {out}/prev/" in capsys.readouterr().out
    assert (out / 'prev' / 'ckpt.pt').read_bytes() == trained  # nothing the user had is lost
    assert (out / 'prev' / 'log.jsonl').read_text() == old_log
    assert guards.load_checkpoint(str(out / 'ckpt.pt'))['iter_num'] == 2
    run(data_dir, out, '--init_from=resume', '--max_iters=4')  # resume continues, keeps prev/ as it was
    assert (out / 'prev' / 'ckpt.pt').read_bytes() == trained


def test_eval_rows_give_bits_per_byte_from_the_datas_tokens_per_byte(data_dir, tmp_path):
    import prepare
    text = ''.join(corpus_text(200, seed).replace('dog', 'dög') for seed in range(20))  # ö: 2 bytes, 1 char
    (tmp_path / 'c.txt').write_text(text, encoding='utf-8')
    prepare.main([f"--input={tmp_path / 'c.txt'}", f"--out_dir={tmp_path / 'data'}"])
    with open(tmp_path / 'data' / 'meta.json') as f:
        per_byte = json.load(f)['tokens_per_byte']
    assert 0.9 < per_byte['val'] < 1.0  # char level: fewer tokens than bytes
    summary = run(tmp_path / 'data', tmp_path / 'out', '--max_iters=4')
    _, evals = read_log(tmp_path / 'out')
    for row in evals.values():
        for split in ('train', 'val'):
            assert row[f'{split}_bpb'] == pytest.approx(row[f'{split}_loss'] / math.log(2) * per_byte[split])
    assert summary['val_bpb'] == evals[4]['val_bpb']
    run(data_dir, tmp_path / 'raw', '--max_iters=1')
    assert read_log(tmp_path / 'raw')[1][1]['val_bpb'] is None  # a meta.json without the ratio (written by hand here): no bpb


def test_peak_flops_by_gpu_name_and_dtype(monkeypatch):
    """MFU divides by the right GPU's dense peak for the run's dtype (tf32's for float32); the most specific
    name wins (A100 is not an A10, an H100 PCIe not an SXM); a GPU not in the table gets none."""
    names = {'NVIDIA H100 80GB HBM3': (989e12, 495e12), 'NVIDIA H100 PCIe': (756e12, 378e12),
             'NVIDIA H100 NVL': (835e12, 418e12), 'NVIDIA H200': (989e12, 495e12), 'NVIDIA H200 NVL': (835e12, 418e12),
             'NVIDIA A100-SXM4-80GB': (312e12, 156e12), 'NVIDIA A100-PCIE-40GB': (312e12, 156e12),
             'NVIDIA L4': (121e12, 60e12), 'NVIDIA L40S': (362e12, 183e12), 'NVIDIA L40': (181e12, 90.5e12),
             'NVIDIA A10': (125e12, 62.5e12), 'NVIDIA GeForce RTX 4090': (165e12, 82.6e12),
             'NVIDIA GeForce RTX 3090': (71e12, 35.6e12), 'NVIDIA A10G': (None, None), 'Tesla T4': (None, None)}
    for name, (bf16, tf32) in names.items():
        monkeypatch.setattr(torch.cuda, 'get_device_name', lambda device, name=name: name)
        assert guards.peak_flops('cuda', 0.0, 'bfloat16') == bf16, name
        assert guards.peak_flops('cuda', 0.0, 'float16') == bf16, name
        assert guards.peak_flops('cuda:1', 0.0, 'float32') == tf32, name
    assert guards.peak_flops('cuda', 5e14, 'bfloat16') == 5e14 and guards.peak_flops('cpu') is None


def test_the_124m_recipe_trains_every_architecture_at_gpt2_small_for_twenty_tokens_a_parameter():
    """configs/_fineweb124m.py after each architecture config: GPT-2 small's shape on FineWeb, parameters
    matched within 1% of gpt's 124M, 524,288 tokens an iteration, 2.5B tokens: 20 per parameter."""
    base = None
    for name in ARCHS:
        cfg = parse_config(train.TrainConfig, [os.path.join(HERE, 'configs', f'{name}.py'),
                                                 os.path.join(HERE, 'configs', '_fineweb124m.py')])
        n = count_params(GPTConfig(**cfg.model_args()))
        base = base or n
        assert (cfg.n_layer, cfg.n_embd, cfg.block_size, cfg.vocab_size) == (12, 768, 1024, 50304), name
        assert abs(n / base - 1) < 0.01, (name, n, base)
        tokens = cfg.batch_size * cfg.gradient_accumulation_steps * cfg.block_size
        assert tokens == 524288 and 19.5 < tokens * cfg.max_iters / n < 20.5, name
        assert cfg.data_dir == 'data/fineweb10B' and cfg.learning_rate == 6e-4


def test_every_seed_is_scored_on_the_same_val_batches(data_dir, tmp_path, monkeypatch):
    """Evaluation batches come from eval_seed, not the run's seed: two seeds train on different batches
    and are scored on the same ones; eval_seed=-1 gives each seed its own (the old way), and a checkpoint
    of one val set does not resume with another. Each evaluation logs its standard error and, at the end,
    each batch's loss."""
    drawn = []
    real = train.Batches.get

    def spy(self, *key):
        x, y = real(self, *key)
        drawn.append((key[0], x.clone()))  # key (0, ...): training; (1, k): evaluation
        return x, y
    monkeypatch.setattr(train.Batches, 'get', spy)
    seen = {}
    for seed, eval_seed in ((1, 0), (2, 0), (2, -1)):
        drawn.clear()
        run(data_dir, tmp_path / f's{seed}{eval_seed}', f'--seed={seed}', f'--eval_seed={eval_seed}')
        seen[seed, eval_seed] = ([x for k, x in drawn if k == 1], [x for k, x in drawn if k == 0])
    (eval1, train1), (eval2, train2), (own, _) = seen[1, 0], seen[2, 0], seen[2, -1]
    assert eval1 and all(torch.equal(a, b) for a, b in zip(eval1, eval2))  # one val set
    assert not all(torch.equal(a, b) for a, b in zip(train1, train2))       # seeds train on their own batches
    assert not all(torch.equal(a, b) for a, b in zip(eval2, own))           # -1: the seed's own val batches
    _, evals = read_log(tmp_path / 's10')
    last = evals[max(evals)]
    assert len(last['val_batches']) == 2 and last['val_loss'] == pytest.approx(sum(last['val_batches']) / 2, abs=1e-4)
    assert last['val_se'] > 0
    with pytest.raises(UsageError, match=r"was trained with eval_seed=0, asked 5: its val curve would change val "
                                         r"set midway; resume with --eval_seed=0"):
        run(data_dir, tmp_path / 's10', '--seed=1', '--eval_seed=5', '--init_from=resume')


def test_compiling_says_so_before_it_starts(data_dir, capsys):
    """--compile's first step is silent for a minute on a CPU otherwise: a line says so first."""
    cfg = parse_config(train.TrainConfig, [*TINY, '--compile=True'])
    model = GPT(GPTConfig(**{**cfg.model_args(), 'vocab_size': 16}))
    train.say_start(cfg, train.Distributed(), 1, model)
    said = [line for line in capsys.readouterr().out.splitlines() if not line.startswith('note: this machine is busy')]
    assert said[-1].endswith(  # (the line a busy machine adds comes after it)
        '; compiling it (torch.compile): the first step takes about a minute on a CPU, less on a GPU, and is not '
        'counted as training time')
    train.say_start(dataclasses.replace(cfg, compile=False), train.Distributed(), 1, model)
    assert 'compiling' not in capsys.readouterr().out  # without compile: nothing


