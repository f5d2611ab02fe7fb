"""
sample.py on CPU in seconds, from tiny checkpoints that train.py writes once per module (one per
block type, and a byte-level one): its text equals a plain model.generate + decode reference, the
same seed gives the same text, temperature -> 0 is greedy, cached decoding equals uncached,
streaming never splits a UTF-8 character, old checkpoints load, config files written for train.py
are accepted, and user errors are one line with no traceback.
"""
import base64
import dataclasses
import json
import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

import prepare
import sample
import train
from configurator import UsageError
from model import GPT
from sample import generate
from dataset import ByteTokenizer, load_tokenizer, tiktoken_from_file
import guards

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repository
ARCHS = {'mha': ['--block=transformer', '--attn=mha'],
         'mdha': ['--block=transformer', '--attn=mdha', '--ffn=relu2'],  # Primer EZ
         'gmlp': ['--block=gmlp', '--pos_emb=none'],
         'amlp': ['--block=amlp', '--tiny_attn_size=16']}
TINY = ['--device=cpu', '--dtype=float32', '--compile=False', '--n_layer=2', '--n_head=2', '--n_embd=32',
        '--block_size=16', '--batch_size=4', '--gradient_accumulation_steps=1', '--eval_iters=2',
        '--eval_interval=100', '--log_interval=100', '--warmup_iters=2', '--lr_decay_iters=20',
        '--learning_rate=1e-2', '--min_lr=1e-3', '--max_iters=8']
PROMPT = 'the cat'


def corpus_text(n_words, seed):
    words = "the a cat dog sat ran on under mat log and then it was big small red café naïve".split()
    rng = np.random.default_rng(seed)
    lines = [' '.join(rng.choice(words, size=8)) + '.' for _ in range(n_words // 8)]
    return '\n'.join(lines) + '\n'


@pytest.fixture(scope='module')
def runs(tmp_path_factory):
    """out_dir of a freshly trained tiny checkpoint for each block type, char-level, and one byte-level."""
    root = tmp_path_factory.mktemp('sample')
    corpus = root / 'corpus.txt'
    corpus.write_text(corpus_text(2400, 0), encoding='utf-8')
    for kind in ('char', 'byte'):
        prepare.main([f'--input={corpus}', f'--tokenizer={kind}', f'--out_dir={root / kind}'])
    out = {}
    for name, args in [*ARCHS.items(), ('byte', ARCHS['mha'])]:
        out[name] = str(root / f'out-{name}')
        data = root / ('byte' if name == 'byte' else 'char')
        train.main([*TINY, *args, f'--data_dir={data}', f'--out_dir={out[name]}'])
    return out


def run(capsys, out_dir, *args):
    """sample.main in this process: (stdout, stderr)."""
    capsys.readouterr()
    sample.main([f'--out_dir={out_dir}', '--device=cpu', *args])
    cap = capsys.readouterr()
    return cap.out, cap.err


def reference(out_dir, start, n, *, seed, num_samples=1, temperature=0.8, top_k=200, use_cache=True):
    """The text sample.py should print, written plainly: model.generate, then decode."""
    ckpt = guards.load_checkpoint(os.path.join(out_dir, 'ckpt.pt'))
    model = GPT.from_checkpoint(ckpt).eval()
    tok = load_tokenizer(ckpt['meta'])
    idx = torch.tensor([tok.encode(start)] * num_samples)
    y = generate(model, idx, n, temperature=temperature, top_k=top_k, use_cache=use_cache,
                       generator=torch.Generator().manual_seed(seed))
    return [start + tok.decode(row[idx.size(1):].tolist()) for row in y]


def cli(*args):
    return subprocess.run([sys.executable, os.path.join(HERE, 'sample.py'), '--device=cpu', *args],
                          cwd=HERE, capture_output=True, text=True, timeout=120)


# -----------------------------------------------------------------------------
# sampling

@pytest.mark.parametrize('arch', ARCHS)
def test_each_block_samples_reproducibly_and_decodes(runs, arch, capsys):
    out, err = run(capsys, runs[arch], f'--start={PROMPT}', '--max_new_tokens=40', '--seed=1')
    assert out == reference(runs[arch], PROMPT, 40, seed=1)[0] + '\n'  # stdout holds the text only
    with open(os.path.join(os.path.dirname(runs[arch]), 'char', 'meta.json'), encoding='utf-8') as f:
        chars = json.load(f)['tokenizer']['chars']
    assert len(out) == len(PROMPT) + 40 + 1 and set(out) <= set(chars)  # one character per token
    assert 'tokens/s' in err
    assert run(capsys, runs[arch], f'--start={PROMPT}', '--max_new_tokens=40', '--seed=1')[0] == out
    assert run(capsys, runs[arch], f'--start={PROMPT}', '--max_new_tokens=40', '--seed=2')[0] != out


@pytest.mark.parametrize('arch', ARCHS)
def test_tiny_temperature_is_greedy(runs, arch, capsys):
    args = f'--start={PROMPT}', '--max_new_tokens=30', '--top_k=0'
    greedy = run(capsys, runs[arch], *args, '--temperature=0')[0]
    assert greedy == reference(runs[arch], PROMPT, 30, seed=0, temperature=0)[0] + '\n'
    for seed in (1, 2):
        assert run(capsys, runs[arch], *args, '--temperature=1e-6', f'--seed={seed}')[0] == greedy


@pytest.mark.parametrize('arch', ARCHS)
def test_cached_equals_uncached(runs, arch, capsys):
    # 7 + 40 tokens > block_size 16: the window slides, and the cache is rebuilt for it
    args = f'--start={PROMPT}', '--max_new_tokens=40', '--temperature=1.0', '--seed=3'
    cached = run(capsys, runs[arch], *args, '--use_cache=True')[0]
    assert run(capsys, runs[arch], *args, '--use_cache=False')[0] == cached


def test_compile_says_what_it_does_and_changes_no_token(runs, capsys):
    """--compile records a CUDA graph on a GPU (its equality test: test_model.py); elsewhere, and with
    --use_cache=False, it says in one line why it does nothing, and the text is the same."""
    args = f'--start={PROMPT}', '--max_new_tokens=20', '--seed=3'
    plain = run(capsys, runs['mdha'], *args)
    out, err = run(capsys, runs['mdha'], *args, '--compile=True')
    assert out == plain[0] and 'needs --use_cache and a CUDA device; on cpu decoding runs as without it' in err
    assert '(cached decoding, batch 1)' in err
    out, err = run(capsys, runs['mdha'], *args, '--compile=True', '--use_cache=False')
    assert out == plain[0] and 'on cpu uncached decoding runs as without it' in err


def test_several_samples_are_one_batch_separated_by_a_line(runs, capsys):
    out, err = run(capsys, runs['gmlp'], f'--start={PROMPT}', '--num_samples=3', '--max_new_tokens=20', '--seed=4')
    texts = reference(runs['gmlp'], PROMPT, 20, seed=4, num_samples=3)
    assert out == f'\n{sample.SEPARATOR}\n'.join(texts) + '\n'
    assert len(set(texts)) == 3 and '60 tokens' in err


def test_byte_level_stream_prints_whole_characters(runs, capsys):
    start = 'naïve café 日本'
    out, _ = run(capsys, runs['byte'], f'--start={start}', '--max_new_tokens=60', '--seed=5', '--temperature=1.5')
    assert out == reference(runs['byte'], start, 60, seed=5, temperature=1.5)[0] + '\n'


def test_decode_stream_holds_back_split_characters(tmp_path):
    text = 'naïve café, 日本語 🙂!'
    tok = ByteTokenizer()
    pieces = list(sample.decode_stream(tok, tok.encode(text)))
    assert ''.join(pieces) == text and '\ufffd' not in ''.join(pieces)
    assert len(pieces) == len(text)  # each character printed as soon as its last byte arrives
    ids = np.random.default_rng(0).integers(0, 256, size=500).tolist()  # mostly invalid UTF-8
    assert ''.join(sample.decode_stream(tok, ids)) == tok.decode(ids)
    # a BPE whose tokens cut characters in the middle: b'\xe6\x97' + b'\xa5\xe6' + ... is '日本'
    ranks = {bytes([i]): i for i in range(256)} | {b'\xe6\x97': 256, b'\xa5\xe6': 257}
    path = tmp_path / 'cut.tiktoken'
    path.write_bytes(b''.join(base64.b64encode(t) + b' %d\n' % r for t, r in ranks.items()))
    bpe = tiktoken_from_file(str(path))
    ids = bpe.encode('a 日本 b')
    assert 256 in ids and 257 in ids
    assert list(sample.decode_stream(bpe, ids)) == ['a', ' ', '日本', ' ', 'b']


# -----------------------------------------------------------------------------
# prompts

def test_start_from_file_and_empty_start(runs, capsys, tmp_path):
    prompt = tmp_path / 'prompt.txt'
    prompt.write_text('a dog\nran', encoding='utf-8')
    args = '--max_new_tokens=20', '--seed=6'
    assert run(capsys, runs['mha'], f'--start=FILE:{prompt}', *args)[0] == \
        run(capsys, runs['mha'], '--start=a dog\nran', *args)[0]
    # nothing to continue: a char-level model starts after a newline, which is not printed
    assert run(capsys, runs['mha'], '--start=', *args)[0] == run(capsys, runs['mha'], '--start=\n', *args)[0][1:]
    with pytest.raises(UsageError, match='missing.txt'):
        sample.main([f'--out_dir={runs["mha"]}', f'--start=FILE:{tmp_path / "missing.txt"}'])


def test_unknown_character_is_a_one_line_error_naming_it(runs):
    with pytest.raises(UsageError) as e:
        sample.main([f'--out_dir={runs["mha"]}', '--device=cpu', '--start=the €uro'])
    assert "'€'" in str(e.value) and '\n' not in str(e.value)


def test_long_prompt_is_cropped_with_one_warning(runs, capsys):
    start = 'the cat sat on the mat and then it ran'  # 38 characters > block_size 16
    out, err = run(capsys, runs['amlp'], f'--start={start}', '--max_new_tokens=10', '--seed=7')
    assert out.startswith(start) and len(out) == len(start) + 10 + 1
    warnings = [line for line in err.splitlines() if line.startswith('warning:')]
    assert len(warnings) == 1 and '38 tokens' in warnings[0] and 'block_size=16' in warnings[0]
    # the model saw only the last 16 characters
    assert out[len(start) - 16:] == run(capsys, runs['amlp'], f'--start={start[-16:]}', '--max_new_tokens=10',
                                        '--seed=7')[0]


# -----------------------------------------------------------------------------
# checkpoints

def test_old_checkpoint_without_new_fields_loads(runs, capsys, tmp_path):
    ckpt = torch.load(os.path.join(runs['mha'], 'ckpt.pt'), weights_only=True)
    nanogpt = ('n_layer', 'n_head', 'n_embd', 'block_size', 'bias', 'vocab_size', 'dropout')
    ckpt['model_args'] = {k: ckpt['model_args'][k] for k in nanogpt}  # nanoGPT's fields only
    old = tmp_path / 'out-old'
    old.mkdir()
    torch.save(ckpt, old / 'ckpt.pt')
    args = f'--start={PROMPT}', '--max_new_tokens=30', '--seed=8'
    assert run(capsys, old, *args)[0] == run(capsys, runs['mha'], *args)[0]


def test_no_arguments_after_the_quick_start_prints_text(tmp_path):
    # the README's first three commands, in a folder of their own: prepare, train configs/quick.py, sample
    (tmp_path / 'corpus.txt').write_text(corpus_text(2400, 0), encoding='utf-8')

    def script(name, *args):
        r = subprocess.run([sys.executable, os.path.join(HERE, name), *args], cwd=tmp_path, capture_output=True,
                           text=True, timeout=300, env={**os.environ, 'OMP_NUM_THREADS': '1'})
        assert r.returncode == 0, r.stderr[-3000:]
        return r
    script('prepare.py', '--input=corpus.txt', '--out_dir=data/pydoc_char')  # as a plain prepare.py names it
    script('train.py', os.path.join(HERE, 'configs', 'quick.py'), '--max_iters=2', '--eval_iters=2')
    r = script('sample.py')
    assert len(r.stdout) > 400 and set(r.stdout) <= set(corpus_text(2400, 0))  # 500 characters of text
    assert 'sampling the newest run here: out-quick' in r.stderr


def test_without_out_dir_the_newest_run_here_is_sampled(runs, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match=r'no checkpoint here \(out\*/ckpt.pt\); train one first'):
        sample.main(['--device=cpu'])
    for name, arch, age in (('out', 'mha', 100), ('out-gmlp', 'gmlp', 0), ('out-amlp', 'amlp', 50)):
        os.mkdir(name)
        with open(os.path.join(runs[arch], 'ckpt.pt'), 'rb') as f:
            (tmp_path / name / 'ckpt.pt').write_bytes(f.read())
        os.utime(tmp_path / name / 'ckpt.pt', (time.time() - age, time.time() - age))
    args = ['--device=cpu', f'--start={PROMPT}', '--max_new_tokens=20', '--seed=1']
    capsys.readouterr()
    sample.main(args)
    out, err = capsys.readouterr()
    assert out == run(capsys, runs['gmlp'], *args[1:])[0]
    assert 'sampling the newest run here of 3 (out-gmlp, out-amlp, out; pick one with --out_dir): out-gmlp' in err


def test_help_has_a_usage_line_and_every_key(capsys):
    sample.main(['--help'])
    out = capsys.readouterr().out
    assert out.startswith('usage: python sample.py [config.py] [--key=value ...]\n')
    assert all(f'--{f.name}=' in out for f in dataclasses.fields(sample.SampleConfig))


def test_bad_keys_are_one_line_errors(tmp_path):
    with pytest.raises(UsageError, match=r"^unknown key 'n_layer'; run with --help"):
        sample.parse_args(['--n_layer=4'])  # the model comes from the checkpoint
    with pytest.raises(UsageError, match='temperature'):
        sample.parse_args(['--temprature=0.5'])
    cfg = tmp_path / 'train_config.py'  # a train.py config: sample.py takes its own keys of it, a flag winning
    cfg.write_text("out_dir = 'x'\nlearning_rate = 1e-3\nseed = 5\ntemperature = 0.5\n")
    got = sample.parse_args([str(cfg), '--seed=7'])
    assert (got.out_dir, got.seed, got.temperature) == ('x', 7, 0.5)
    cfg.write_text("temperature = -1\n")
    with pytest.raises(UsageError, match=r"train_config.py: temperature must be a finite number"):
        sample.parse_args([str(cfg)])
    for flag in ('--top_p=0', '--temperature=-1', '--num_samples=0', '--dtype=int8'):
        with pytest.raises(UsageError):
            sample.parse_args([flag])


def test_decoding_threads_are_chosen_and_given_back(runs, capsys, monkeypatch):
    before, seen = torch.get_num_threads(), []
    real = sample.stream
    monkeypatch.setattr(sample, 'stream', lambda *a, **k: (seen.append(torch.get_num_threads()), real(*a, **k))[1])
    run(capsys, runs['mha'], '--max_new_tokens=4', '--threads=1')
    run(capsys, runs['mha'], '--max_new_tokens=4')
    assert seen == [1, before] and torch.get_num_threads() == before  # --threads=1, then torch's own


def test_a_bpe_run_whose_ranks_file_moved_is_told_where_and_takes_it_checked(tmp_path, capsys):
    """The checkpoint records the ranks file's path and sha256: moved, one line names --ranks_file, which then
    works, checked against the sha256 recorded."""
    from test_prepare import tiny_ranks_file
    (tmp_path / 'tok').mkdir()
    ranks = tiny_ranks_file(tmp_path / 'tok' / 'tiny.tiktoken')
    corpus = tmp_path / 'corpus.txt'
    corpus.write_text(corpus_text(2400, 0), encoding='utf-8')
    prepare.main([f'--input={corpus}', f'--tokenizer={ranks}', f'--out_dir={tmp_path / "bpe"}'])
    out = tmp_path / 'out-bpe'
    train.main([*TINY, f'--data_dir={tmp_path / "bpe"}', f'--out_dir={out}'])
    want, _ = run(capsys, out, '--max_new_tokens=8', '--seed=3')
    moved = tmp_path / 'elsewhere' / 'tiny.tiktoken'
    moved.parent.mkdir()
    os.replace(ranks, moved)
    with pytest.raises(UsageError, match=r"tiny.tiktoken' not found \(moved\?\); pass "
                                         r"--ranks_file=path/to/tiny.tiktoken$") as e:
        run(capsys, out, '--max_new_tokens=8', '--seed=3')
    assert '\n' not in str(e.value)
    assert run(capsys, out, '--max_new_tokens=8', '--seed=3', f'--ranks_file={moved}')[0] == want
    other = tiny_ranks_file(tmp_path / 'other.tiktoken', more=(b'ca',))  # checked by the sha256 recorded
    with pytest.raises(UsageError, match=r"is not the one the data was tokenized with \(its sha256 differs\)"):
        run(capsys, out, f'--ranks_file={other}')


def test_gpt2_by_name_offline_is_one_line_naming_tiktokens_cache(tmp_path, monkeypatch):
    """A dataset tokenized with tiktoken's 'gpt2' by name (FineWeb's): offline, one line that says how tiktoken
    reads it without the network (its cache)."""
    import tiktoken

    def offline(name):
        raise ConnectionError('no network')
    monkeypatch.setattr(tiktoken, 'get_encoding', offline)
    with pytest.raises(UsageError, match=r"^tiktoken could not load 'gpt2' \(ConnectionError\); offline, set "
                                         r"TIKTOKEN_CACHE_DIR to a copy of its cache$"):
        load_tokenizer({'tokenizer': {'kind': 'tiktoken', 'name': 'gpt2'}, 'vocab_size': 50257})


def test_a_missing_run_is_one_line_that_says_how_to_make_one_or_where_the_run_before_is(runs, tmp_path, monkeypatch):
    """sample.py on a folder with no checkpoint: how to train one (the commands as typed from here); where
    a scratch rerun stopped before its first checkpoint, the run before it, in prev/."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match=rf"^no checkpoint at 'out-gmlp/ckpt.pt'; train one first \(python "
                                         rf"{re.escape(os.path.relpath(HERE))}/prepare.py && python .*/train.py "
                                         r".*/configs/quick.py\) or point out_dir at the right folder$"):
        sample.main(['--out_dir=out-gmlp', '--device=cpu'])
    data = [*TINY, f"--data_dir={os.path.join(os.path.dirname(runs['mha']), 'char')}", '--out_dir=out']
    train.main(data)
    with pytest.raises(UsageError, match='loss is not finite'):  # a rerun that fails before its first save
        train.main([*data, '--learning_rate=1e30', '--warmup_iters=0', '--grad_clip=0', '--eval_interval=1'])
    with pytest.raises(UsageError, match=r"^no checkpoint at 'out/ckpt.pt'; out/prev/ holds the run before the "
                                         r"last scratch start there \(--out_dir=out/prev\)$"):
        sample.main(['--out_dir=out', '--device=cpu'])


def test_a_config_with_no_run_names_its_own_train_command_and_a_sweeps_prefix_names_its_runs(runs, tmp_path,
                                                                                              monkeypatch):
    """`sample.py configs/gmlp.py` before it trained: the line names that config's train command (not the quick
    start's); a sweep's --out_prefix given as out_dir: the line says it holds run folders, and the newest."""
    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / 'mine.py'
    cfg.write_text("out_dir = 'out-mine'\n")
    with pytest.raises(UsageError, match=rf"^no checkpoint at 'out-mine/ckpt.pt'; train one first \(python "
                                         rf".*train.py {re.escape(str(cfg))}\) or point out_dir at the right folder$"):
        sample.main([str(cfg), '--device=cpu'])
    prefix = os.path.dirname(runs['mha'])  # the module's runs: out-mha, out-mdha, ... each a run folder
    folders = [os.path.join(prefix, d) for d in os.listdir(prefix) if os.path.isfile(os.path.join(prefix, d, 'ckpt.pt'))]
    newest = max(folders, key=lambda d: os.path.getmtime(os.path.join(d, 'ckpt.pt')))
    assert len(folders) >= 5
    with pytest.raises(UsageError, match=rf"^no checkpoint at '{re.escape(prefix)}/ckpt.pt'; {re.escape(prefix)} holds "
                                         rf"the run folders of {len(folders)} run\(s\), the newest {re.escape(newest)}: "
                                         r"pass --out_dir=one of them$"):
        sample.main([f'--out_dir={prefix}', '--device=cpu'])


def test_a_run_stopped_before_its_budget_is_said_with_where_a_finished_one_is(runs, tmp_path, capsys):
    """Sampling a run that stopped short (a rerun Ctrl-C'd at iteration 4 of 8, say): one line says so, and
    names prev/ when the run before it there finished."""
    data = os.path.join(os.path.dirname(runs['mha']), 'char')
    out = tmp_path / 'out'
    train.main([*TINY, f'--data_dir={data}', f'--out_dir={out}', '--max_iters=4'])  # finished
    ckpt = torch.load(out / 'ckpt.pt', weights_only=True)
    ckpt['finished'] = False  # as a run stopped at iter 4 of a longer budget saves it
    torch.save(ckpt, out / 'ckpt.pt')
    _, err = run(capsys, out, '--max_new_tokens=2')
    assert f"note: {out / 'ckpt.pt'} is a run stopped before its budget (iter 4); train.py --init_from=resume " \
           "on its config continues it" in err
    train.main([*TINY, f'--data_dir={data}', f'--out_dir={out}', '--max_iters=2'])  # the stopped one to prev/
    torch.save({**torch.load(out / 'ckpt.pt', weights_only=True), 'finished': False}, out / 'ckpt.pt')
    torch.save({**torch.load(out / 'prev' / 'ckpt.pt', weights_only=True), 'finished': True}, out / 'prev' / 'ckpt.pt')
    _, err = run(capsys, out, '--max_new_tokens=2')
    assert f"is a run stopped before its budget (iter 2); {out / 'prev'}/ holds a finished one " \
           f"(--out_dir={out / 'prev'})" in err
    _, err = run(capsys, runs['mha'], '--max_new_tokens=2')
    assert 'stopped before its budget' not in err


def test_a_fifo_as_the_checkpoint_and_a_folder_as_a_ranks_file_say_what_is_there(tmp_path):
    out = tmp_path / 'out'
    out.mkdir()
    os.mkfifo(out / 'ckpt.pt')
    with pytest.raises(UsageError, match=r"^checkpoint '.*ckpt.pt' is not a regular file \(a device, pipe or socket\); "
                                         r"move it away, or pass another --out_dir$"):
        sample.main([f'--out_dir={out}', '--device=cpu'])
    (tmp_path / 'ranks').mkdir()
    with pytest.raises(UsageError, match=r"^tiktoken ranks file '.*ranks' is a folder; name a .tiktoken file$"):
        tiktoken_from_file(str(tmp_path / 'ranks'))


def test_a_busy_machine_is_said_once_with_how_to_use_fewer_threads(runs, tmp_path, capsys, monkeypatch):
    """More load than cores at the start (the last minute's average): sample.py and train.py each say it in one
    line with the flag that takes fewer threads; on one thread, or an idle machine, nothing is said."""
    before = torch.get_num_threads()
    monkeypatch.setattr(guards, 'cores', lambda: 2)
    try:
        for load, threads, said in ((5.0, 2, True), (5.0, 1, False), (1.0, 2, False)):
            monkeypatch.setattr(os, 'getloadavg', lambda: (load, load, load))
            _, err = run(capsys, runs['mha'], '--max_new_tokens=2', f'--threads={threads}')
            note = (f"note: this machine is busy (load {load:.1f} on 2 cores): {threads} threads wait for cores at "
                    "every step, which can make it many times slower; --threads=1 decodes on one")
            assert (note in err) == said, err
        torch.set_num_threads(2)
        monkeypatch.setattr(os, 'getloadavg', lambda: (5.0, 5.0, 5.0))
        train.main([*TINY, f"--data_dir={os.path.join(os.path.dirname(runs['mha']), 'char')}",
                    f"--out_dir={tmp_path / 'busy'}", '--max_iters=1'])
        assert ("note: this machine is busy (load 5.0 on 2 cores): 2 threads wait for cores at every step, which can "
                "make it many times slower; OMP_NUM_THREADS=1 before the command trains on one (its losses then "
                "differ from another thread count's in their last digits)") in capsys.readouterr().out
    finally:
        torch.set_num_threads(before)
