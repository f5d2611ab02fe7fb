"""
hellaswag.py: HellaSwag-style scoring on items the tests write: a model trained on the right endings scores
100% on rigged items and chance on random ones, the command line writes its result and refuses bad
input in one line, 2 processes under torchrun score as one, and FineWeb's shards (a local endpoint)
go through prepare -> train -> hellaswag.py.
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import prepare
import train
import dataset
from conftest import as_script

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repository
SENTENCES = ["the cat sat on the mat.", "a dog ran to the log.", "the sky is blue today.", "my hen is red."]
RIGGED = [("the cat sat on the", ["mat.", "log.", "sky.", "dog."], 0),
          ("a dog ran to the", ["cat.", "log.", "mat.", "sky."], 1),
          ("the sky is blue", ["red.", "mat.", "today.", "log."], 2),
          ("my hen is", ["blue.", "on.", "the.", "red."], 3)]
TINY = ['--device=cpu', '--dtype=float32', '--n_layer=2', '--n_head=2', '--n_embd=64', '--block_size=32',
        '--batch_size=16', '--gradient_accumulation_steps=1', '--eval_iters=2', '--eval_interval=1000',
        '--log_interval=1000', '--warmup_iters=10', '--learning_rate=3e-3', '--min_lr=3e-4']


def write_items(path, items):
    with open(path, 'w') as f:
        for ctx, endings, label in items:
            f.write(json.dumps({'ctx': ctx, 'endings': endings, 'label': label, 'ind': 0}) + '\n')
    return str(path)


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
    """A char-level model that has learnt SENTENCES by heart: its out_dir."""
    root = tmp_path_factory.mktemp('eval')
    rng = np.random.default_rng(0)
    (root / 'text.txt').write_text('\n'.join(rng.choice(SENTENCES, size=3000)) + '\n')
    prepare.main([f'--input={root / "text.txt"}', f'--out_dir={root / "data"}'])
    train.main([*TINY, f'--data_dir={root / "data"}', f'--out_dir={root / "out"}', '--max_iters=300',
                '--lr_decay_iters=300'])
    return str(root / 'out')


def evaluate(out_dir, items, tmp_path, *args):
    import hellaswag as ev
    return ev.main([f'--out_dir={out_dir}', f'--input={write_items(tmp_path / "items.jsonl", items)}', '--device=cpu',
                    *args])


def test_a_model_that_learnt_the_right_endings_scores_every_rigged_item(trained, tmp_path):
    r = evaluate(trained, RIGGED, tmp_path, '--batch_size=3')  # batches of 3: a last batch of 1 too
    assert r['n'] == 4 and r['acc'] == 1.0 and r['acc_norm'] == 1.0
    assert json.load(open(os.path.join(trained, 'eval_hellaswag.json')))['acc_norm'] == 1.0


def test_random_items_score_near_chance(trained, tmp_path):
    """Endings of random letters and labels at random: the scores carry no information about the label."""
    rng = np.random.default_rng(1)
    letters = sorted(set(''.join(SENTENCES)) - {'.'})
    word = lambda n: ''.join(rng.choice(letters, size=n))  # noqa: E731
    items = [(word(12), [word(int(rng.integers(3, 9))) for _ in range(4)], int(rng.integers(4))) for _ in range(400)]
    r = evaluate(trained, items, tmp_path, '--batch_size=50')
    assert r['n'] == 400 and abs(r['acc'] - 0.25) < 0.07 and abs(r['acc_norm'] - 0.25) < 0.07
    assert evaluate(trained, items, tmp_path, '--limit=30')['n'] == 30


def test_the_command_line_writes_its_result_and_refuses_bad_input_in_one_line(trained, tmp_path):
    items = write_items(tmp_path / 'items.jsonl', RIGGED)
    r = subprocess.run([sys.executable, 'hellaswag.py', f'--out_dir={trained}', f'--input={items}', '--device=cpu',
                        f'--json={tmp_path / "r.json"}'], cwd=HERE, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith('hellaswag: acc_norm 1.0000, acc 1.0000 on 4 items') and r.stdout.count('\n') == 1
    assert json.load(open(tmp_path / 'r.json'))['n'] == 4
    (tmp_path / 'bad.jsonl').write_text(json.dumps({'ctx': 'a', 'endings': ['b', 'c'], 'label': 0}) + '\n')
    for args, expect in [([f'--input={tmp_path / "bad.jsonl"}'], 'line 1 is not a HellaSwag item'),
                         ([f'--input={tmp_path / "nope.jsonl"}'], 'not found'),
                         (['--task=mmlu'], "task is not a task this script knows"),
                         (['--url=http://127.0.0.1:9/hellaswag_val.jsonl'], 'offline, pass --input='),
                         # a mistyped run is said before any download: the nearest runs, not the network
                         ([f'--out_dir={trained}x', '--url=http://127.0.0.1:9/hellaswag_val.jsonl'],
                          f"no checkpoint at '{trained}x/ckpt.pt'; ")]:
        code, _, err = as_script('hellaswag.py', [f'--out_dir={trained}', *args], tmp_path)
        said = err.splitlines()  # (a download says so on a line of its own first)
        assert code == 2 and said[-1].startswith('error:') and expect in said[-1], err
        assert len(said) == 1 or (len(said) == 2 and said[0].startswith('downloading')), err
        assert len(said) == 1 or 'no checkpoint' not in expect, err  # no download tried first


def test_the_items_are_downloaded_once(trained, tmp_path):
    from conftest import FakeHub
    lines = ''.join(json.dumps({'ctx': c, 'endings': e, 'label': y}) + '\n' for c, e, y in RIGGED).encode()
    hub = FakeHub({'hellaswag_val.jsonl': lines})
    url = f"{hub.url}/datasets/rowanz/resolve/main/hellaswag_val.jsonl"
    for _ in range(2):  # (in a folder of its own: data/hellaswag/ is made there)
        r = subprocess.run([sys.executable, os.path.join(HERE, 'hellaswag.py'), f'--out_dir={trained}', f'--url={url}',
                            '--device=cpu', f'--json={tmp_path / "r.json"}'], cwd=tmp_path, capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0 and 'on 4 items' in r.stdout, r.stderr
    assert (tmp_path / 'data' / 'hellaswag' / 'hellaswag_val.jsonl').read_bytes() == lines
    assert len(hub.ranges) == 1  # the second run read the copy


def test_two_processes_under_torchrun_score_as_one(trained, tmp_path):
    from test_train import torchrun
    rng = np.random.default_rng(2)
    items = RIGGED * 5 + [(c, list(rng.permutation(e)), 0) for c, e, _ in RIGGED]
    path = write_items(tmp_path / 'items.jsonl', items)
    one = evaluate(trained, items, tmp_path)
    r = torchrun(os.path.join(HERE, 'hellaswag.py'), f'--out_dir={trained}', f'--input={path}', '--device=cpu',
                 f'--json={tmp_path / "ddp.json"}')
    assert r.returncode == 0, r.stderr[-2000:]
    ddp = json.load(open(tmp_path / 'ddp.json'))
    assert (ddp['n'], ddp['acc'], ddp['acc_norm']) == (one['n'], one['acc'], one['acc_norm']) == (24, one['acc'],
                                                                                                  one['acc_norm'])


def test_fineweb_shards_train_and_evaluate_end_to_end(fake_hub, tmp_path, monkeypatch):
    """fineweb.py (tiny shards from a local endpoint) -> train.py -> hellaswag.py, offline: a tiny BPE ranks
    file stands in for GPT-2's, which tiktoken would download (get_encoding('gpt2') gives it, for this test)."""
    import tiktoken
    import fineweb
    from test_prepare import tiny_ranks_file
    fineweb.main(['--train_shards=2', f'--out_dir={tmp_path / "fw"}'])
    s = train.main(['--device=cpu', '--dtype=float32', '--n_layer=1', '--n_head=2', '--n_embd=32', '--block_size=32',
                    '--batch_size=4', '--gradient_accumulation_steps=1', '--eval_iters=2', '--eval_interval=5',
                    '--warmup_iters=1', '--lr_decay_iters=5', '--max_iters=5', '--vocab_size=50304',
                    f'--data_dir={tmp_path / "fw"}', f'--out_dir={tmp_path / "out"}'])
    assert s['iter_num'] == 5 and s['val_bpb'] is None  # FineWeb's byte count is unknown: no bits per byte
    tiny = dataset.tiktoken_from_file(tiny_ranks_file(tmp_path / 'gpt2.tiktoken')).enc
    monkeypatch.setattr(tiktoken, 'get_encoding', lambda name: tiny if name == 'gpt2' else None)
    import hellaswag
    r = hellaswag.main([f'--out_dir={tmp_path / "out"}', f'--input={write_items(tmp_path / "i.jsonl", RIGGED * 2)}'])
    assert r['n'] == 8 and 0 <= r['acc_norm'] <= 1
