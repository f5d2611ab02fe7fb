"""
Faults and bad input in train.py and sample.py: one line `error: ...` (exit code 2, no traceback),
never a mix of old and new files in out_dir, and nothing a user had before the command is lost.
A full disk is simulated by file objects whose writes raise OSError(ENOSPC), so CI can run it.
"""
import dataclasses
import errno
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch

import configurator
import prepare
import sample
from configurator import UsageError, parse_config
from conftest import as_script
from test_train import HERE, TINY, data_dir, run, torchrun, write_corpus  # noqa: F401 (data_dir: the fixture)
import guards
import train


def snapshot(folder):
    """{relative path: bytes} of every file under `folder`."""
    files = {}
    for root, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(root, name)
            with open(path, 'rb') as f:
                files[os.path.relpath(path, folder)] = f.read()
    return files


class FullDisk:
    """A file whose writes fail with ENOSPC once `room` more bytes (or characters) are written."""

    def __init__(self, f, room):
        self.f, self.room = f, room

    def write(self, data):
        if len(data) > self.room:
            self.f.write(data[:self.room])
            self.room = 0
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.room -= len(data)
        return self.f.write(data)

    def __getattr__(self, name):
        return getattr(self.f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()


def fill_disk(monkeypatch, module, pattern, room=0):
    """Files that `module` opens for writing, with a name matching `pattern`, find the disk full."""
    def fake_open(path, mode='r', *args, **kw):
        f = open(path, mode, *args, **kw)
        writing = any(c in mode for c in 'wax+')
        return FullDisk(f, room) if writing and re.search(pattern, os.path.basename(str(path))) else f
    monkeypatch.setattr(module, 'open', fake_open, raising=False)


def dead_pid():
    proc = subprocess.Popen([sys.executable, '-c', 'pass'])
    proc.wait()
    return proc.pid


# -----------------------------------------------------------------------------
# resuming on other data

def test_resume_on_data_with_another_tokenizer_is_one_line(data_dir, tmp_path):
    run(data_dir, tmp_path / 'out', '--max_iters=2')
    before = snapshot(tmp_path / 'out')
    other = write_corpus(tmp_path / 'other')  # the same text, the vocabulary in another order
    with open(os.path.join(other, 'meta.json')) as f:
        meta = json.load(f)
    chars = meta['tokenizer']['chars']
    assert chars[-1] < '~'
    meta['tokenizer']['chars'] = chars[:-1] + '~'  # another vocabulary, no larger: the vocab check passes
    with open(os.path.join(other, 'meta.json'), 'w') as f:
        json.dump(meta, f)
    with pytest.raises(UsageError, match=r"is tokenized with char \(\d+ characters\) but .*ckpt.pt was trained "
                                         r"with char \(\d+ characters\); resume on data prepared with") as e:
        run(other, tmp_path / 'out', '--init_from=resume', '--max_iters=4')
    assert '\n' not in str(e.value)
    assert snapshot(tmp_path / 'out') == before  # the checkpoint's tokenizer was not replaced
    # the same tokenizer in another folder is fine
    copy = write_corpus(tmp_path / 'copy')
    assert run(copy, tmp_path / 'out', '--init_from=resume', '--max_iters=4')['iter_num'] == 4


def prepared(tmp_path, name, seed):
    """A folder prepare.py wrote from a text of its own (the same characters as every other seed)."""
    import prepare
    from test_train import corpus_text
    text = tmp_path / f'{name}.txt'
    text.write_text(''.join(corpus_text(30, seed * 100 + i) for i in range(200)))
    prepare.main([f'--input={text}', f'--out_dir={tmp_path / name}'])
    return str(tmp_path / name)


def test_resume_on_another_corpus_is_refused_unless_new_data_which_the_log_marks(tmp_path):
    a, b = prepared(tmp_path, 'a', 1), prepared(tmp_path, 'b', 2)
    run(a, tmp_path / 'out', '--max_iters=4')
    before = snapshot(tmp_path / 'out')
    with pytest.raises(UsageError, match=r"b holds b, but .*ckpt.pt was trained on a; resume "
                                         r"on that data, or pass --new_data=True") as e:
        run(b, tmp_path / 'out', '--init_from=resume', '--max_iters=8')
    assert '\n' not in str(e.value) and snapshot(tmp_path / 'out') == before
    assert run(a, tmp_path / 'out', '--init_from=resume', '--max_iters=6')['iter_num'] == 6  # its own data: fine
    assert run(b, tmp_path / 'out', '--init_from=resume', '--max_iters=8', '--new_data=True')['iter_num'] == 8
    rows = [json.loads(line) for line in open(tmp_path / 'out' / 'log.jsonl')]
    switch = [r for r in rows if 'data_switch' in r]
    assert [r['iter'] for r in switch] == [6] and switch[0]['data_switch'] == {'from': 'a', 'to': 'b'}
    run(b, tmp_path / 'out', '--init_from=resume', '--max_iters=10')  # the checkpoint's data is b's now
    rows = [json.loads(line) for line in open(tmp_path / 'out' / 'log.jsonl')]
    assert len([r for r in rows if 'data_switch' in r]) == 1


@pytest.mark.parametrize('edit', [lambda m: m.pop('tokenizer'), lambda m: m['tokenizer'].update(chars=m['tokenizer']['chars'][1:]),
                                  lambda m: m['tokenizer'].update(chars=m['tokenizer']['chars'][::-1]),
                                  lambda m: m['tokenizer'].update(kind='bpe'), lambda m: m['tokenizer'].pop('chars')],
                         ids=['none', 'a character short', 'out of order', 'another kind', 'no characters'])
def test_a_meta_json_whose_tokenizer_cannot_decode_is_refused_before_training(tmp_path, edit):
    folder = write_corpus(tmp_path / 'data')
    with open(os.path.join(folder, 'meta.json')) as f:
        meta = json.load(f)
    edit(meta)
    with open(os.path.join(folder, 'meta.json'), 'w') as f:
        json.dump(meta, f)
    with pytest.raises(UsageError, match=r"meta.json does not describe a tokenizer of its 20 token ids \(tokenizer = .*\); "
                                         r"rerun prepare.py$"):
        run(folder, tmp_path / 'out', '--max_iters=2')
    assert not os.path.exists(tmp_path / 'out')
    ckpt = {'meta': meta, 'model_args': {'vocab_size': 20}}  # a checkpoint with that meta: sample.py's one line
    with pytest.raises(UsageError, match=r"meta.json does not describe a tokenizer of its 20 token ids"):
        sample.tokenizer_for(ckpt, 20)


# -----------------------------------------------------------------------------
# a failed run leaves out_dir as it was

def test_a_run_that_fails_before_training_leaves_out_dir_as_it_was(data_dir, tmp_path):
    out = tmp_path / 'out'
    run(data_dir, out, '--max_iters=4')
    before = snapshot(out)
    bad = write_corpus(tmp_path / 'bad')  # meta.json says fewer tokens than the shards hold
    with open(os.path.join(bad, 'meta.json')) as f:
        meta = json.load(f)
    meta['vocab_size'] = 5
    meta['tokenizer']['chars'] = meta['tokenizer']['chars'][:5]  # a tokenizer of its own that decodes
    with open(os.path.join(bad, 'meta.json'), 'w') as f:
        json.dump(meta, f)
    with pytest.raises(UsageError, match=r"train_00000\d.bin holds token id \d+ >= vocab_size=5; "
                                         r".*meta.json does not match its shards: rerun prepare.py"):
        run(bad, out, '--max_iters=8')  # a scratch run: checked in full before out_dir changes
    with pytest.raises(UsageError, match='smaller than the data'):
        run(data_dir, out, '--max_iters=8', '--vocab_size=5')
    assert snapshot(out) == before
    with pytest.raises(UsageError, match=r'holds token id'):
        run(bad, tmp_path / 'new', '--max_iters=8')
    assert not os.path.exists(tmp_path / 'new')  # not even created


def runs(out):
    """(out_dir's run files, prev/'s) as {name: bytes}: what a reader of each folder sees."""
    now = snapshot(out) if os.path.isdir(out) else {}
    return ({k: v for k, v in now.items() if k in guards.RUN_FILES},
            {k[5:]: v for k, v in now.items() if k.startswith('prev/') and k[5:] in guards.RUN_FILES})


def test_a_scratch_run_that_fails_in_training_keeps_the_previous_run(data_dir, tmp_path):
    out = tmp_path / 'out'
    run(data_dir, out, '--max_iters=6')
    first, _ = runs(out)
    nan = ['--learning_rate=1e30', '--warmup_iters=0', '--grad_clip=0', '--eval_interval=1', '--max_iters=20']
    with pytest.raises(UsageError, match=r"loss is not finite at iter \d+: stopped without saving; no checkpoint was "
                                         rf"saved \(the run before is in {re.escape(str(out))}/prev/\)$"):
        run(data_dir, out, *nan)
    here, prev = runs(out)
    assert prev == first and sorted(here) == ['config.json', 'log.jsonl']  # moved whole before it trained
    # a good rerun keeps prev/ (the failed run's log goes); a failing one after it makes that one the backup
    run(data_dir, out, '--max_iters=2', '--seed=5')
    second, prev = runs(out)
    assert prev == first and guards.load_checkpoint(str(out / 'ckpt.pt'))['config']['seed'] == 5
    with pytest.raises(UsageError, match='loss is not finite'):
        run(data_dir, out, *nan)
    assert runs(out)[1] == second


def test_a_scratch_run_says_where_the_previous_run_goes(data_dir, tmp_path, capsys):
    out = tmp_path / 'out'
    run(data_dir, out, '--max_iters=2')
    capsys.readouterr()
    run(data_dir, out, '--max_iters=4', '--eval_interval=2')
    text = capsys.readouterr().out
    note = text.index(f"note: this run starts over in {out} (--init_from=resume continues a run instead): the run "
                      f"there (iter 2, 128 tokens, finished) moved to {out / 'prev'}/; `mv {out / 'prev'} "
                      "another/folder` makes a run of it again\n")
    assert note < text.index('step 0: evaluating') < text.index(f"saved {out / 'ckpt.pt'} at iter 2")
    assert guards.load_checkpoint(str(out / 'prev' / 'ckpt.pt'))['iter_num'] == 2
    steps = [r['iter'] for _, r in configurator.read_jsonl(str(out / 'log.jsonl')) if 'loss' in r]
    assert steps == [0, 1, 2, 3]
    ckpt = guards.load_checkpoint(str(out / 'ckpt.pt'))
    with open(out / 'config.json') as f:  # the settings, for a person: the checkpoint says how far the run got
        assert json.load(f) == ckpt['config']
    assert sorted(os.listdir(out)) == ['ckpt.pt', 'config.json', 'log.jsonl', 'prev']
    assert sorted(os.listdir(out / 'prev')) == ['ckpt.pt', 'config.json', 'log.jsonl']


def test_a_full_disk_at_a_log_row_is_one_line_and_keeps_the_checkpoint(data_dir, tmp_path, monkeypatch):
    out = tmp_path / 'out'
    run(data_dir, out, '--max_iters=4')
    before = snapshot(out)
    fill_disk(monkeypatch, train, r'^log\.jsonl', room=300)  # a row or two, then the disk is full
    with pytest.raises(UsageError, match=r"^could not write '.*log.jsonl': no space left on device; .*ckpt.pt is "
                                         r"the last checkpoint saved$"):
        run(data_dir, out, '--init_from=resume', '--max_iters=8', '--eval_interval=100')
    assert snapshot(out)['ckpt.pt'] == before['ckpt.pt']
    # a scratch run over it: the previous run is in prev/, whole, before the new log fails
    with pytest.raises(UsageError, match=r"could not write '.*log.jsonl': no space left on device; no checkpoint "
                                         r"was saved \(the run before is in .*prev/\)$"):
        run(data_dir, out, '--max_iters=8', '--eval_interval=100')
    monkeypatch.undo()
    assert runs(out)[1]['ckpt.pt'] == before['ckpt.pt'] and sorted(runs(out)[1]) == sorted(before)
    run(data_dir, out, '--max_iters=2', '--seed=3')  # what the failed run left goes, prev/ stays
    assert runs(out)[1]['ckpt.pt'] == before['ckpt.pt']


def test_a_full_disk_at_a_checkpoint_names_it_and_keeps_the_last_one(data_dir, tmp_path, monkeypatch):
    out = tmp_path / 'out'
    run(data_dir, out, '--max_iters=4')
    before = snapshot(out)
    fill_disk(monkeypatch, configurator, r'^ckpt\.pt\.tmp', room=2000)  # torch.save then says 'unexpected pos'
    with pytest.raises(UsageError, match=r"^could not write '.*ckpt.pt': no space left on device; .*ckpt.pt is the "
                                         r"last checkpoint saved$"):
        run(data_dir, out, '--init_from=resume', '--max_iters=8')
    assert snapshot(out)['ckpt.pt'] == before['ckpt.pt']
    assert sorted(os.listdir(out)) == ['ckpt.pt', 'config.json', 'log.jsonl']  # no temp file left
    after_resume = snapshot(out)  # (its log holds the rows past the checkpoint; a resume drops them)
    # the first checkpoint of a scratch run over it fails: the run before is whole in prev/
    with pytest.raises(UsageError, match=r"^could not write '.*ckpt.pt': no space left on device; no checkpoint "
                                         r"was saved \(the run before is in .*prev/\)$"):
        run(data_dir, out, '--max_iters=8')
    assert runs(out)[1] == after_resume and 'ckpt.pt' not in runs(out)[0]


def test_a_model_or_a_step_too_large_for_memory_is_one_line(data_dir, tmp_path, monkeypatch):
    """An allocation that fails is a user's mistake: one line naming its size and what to lower, exit 2, no
    traceback; at build (a real one: a 2.56 TB embedding) the run before is as it was, in a training step
    (the allocator's error, injected) the line says what is kept."""
    out = tmp_path / 'out'
    run(data_dir, out, '--max_iters=2')
    before = snapshot(out)
    proc = subprocess.run([sys.executable, os.path.join(HERE, 'train.py'), *TINY, f'--data_dir={data_dir}',
                           f'--out_dir={out}', '--vocab_size=20000000000'], cwd=HERE, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and proc.stderr.count('\n') == 1, proc.stderr[-2000:]
    assert re.fullmatch(r"error: out of memory on cpu \(2560000000000 bytes at once\): lower batch_size \(4; "
                        r"gradient_accumulation_steps keeps the tokens per step\), block_size \(16\), or the model's "
                        r"size \(n_layer=2, n_embd=32, vocab_size=20000000000\)\n", proc.stderr), proc.stderr
    assert snapshot(out) == before

    def too_large(*args, **kwargs):
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: can't allocate memory: "
                           "you tried to allocate 123456789 bytes. Error code 12 (Cannot allocate memory)")
    monkeypatch.setattr(train, 'train_step', too_large)
    with pytest.raises(UsageError, match=r"^out of memory on cpu \(123456789 bytes at once\): lower batch_size .*; "
                                         r"no checkpoint was saved \(the run before is in .*prev/\)$"):
        run(data_dir, out, '--max_iters=4')
    assert runs(out)[1] == before  # moved whole to prev/ before it trained


def test_a_block_size_the_data_cannot_fill_is_refused_before_the_model_is_built(data_dir, tmp_path, monkeypatch):
    """A typo such as --block_size=100000000 is refused by the data's windows at once, not after building
    a position table of block_size rows."""
    built = []
    monkeypatch.setattr(train, 'GPT', lambda *args, **kwargs: built.append(args))
    with pytest.raises(UsageError, match=r"the train split holds no window of block_size \+ 1 = 100000001 tokens"):
        run(data_dir, tmp_path / 'out', '--block_size=100000000')
    assert not built and not (tmp_path / 'out').exists()


def test_a_failed_write_names_its_cause_through_torch_save():
    import torch
    f = FullDisk(open(os.devnull, 'wb'), 1000)
    with pytest.raises(RuntimeError) as e:
        torch.save({'w': torch.zeros(10000)}, f)
    assert str(configurator.write_error('ckpt.pt', e.value)) == "could not write 'ckpt.pt': no space left on device"


# -----------------------------------------------------------------------------
# temp files of killed runs

def test_stale_temp_files_of_killed_runs_are_removed(data_dir, tmp_path):
    """out_dir is locked: a temp file of train.py's found there is a dead writer's, whoever's pid it names."""
    out = tmp_path / 'out'
    out.mkdir()
    dead, alive = dead_pid(), os.getppid()
    stale = [f'ckpt.pt.tmp{dead}', f'log.jsonl.tmp{dead}', f'config.json.tmp{dead}',
             f'log.jsonl.tmp{dead}.tmp{dead}', f'ckpt.pt.tmp{alive}']
    kept = [f'notes.txt.tmp{dead}', 'ckpt.pt.tmpx']  # not train.py's
    for name in stale + kept:
        (out / name).write_bytes(b'x')
    run(data_dir, out, '--max_iters=2')
    assert sorted(os.listdir(out)) == sorted(['ckpt.pt', 'config.json', 'log.jsonl', *kept])


# -----------------------------------------------------------------------------
# bad input is one line

@pytest.mark.parametrize('line,what', [(b'[1, 2]', 'not a log row'), (b'{"loss": 2.5}', 'not a log row'),
                                       (b'{"iter": "3"}', 'not a log row'), (b'\xff\xfe{"iter": 3}', 'not a log row')])
def test_a_bad_log_line_is_one_line_naming_it(data_dir, tmp_path, line, what):
    out = tmp_path / 'out'
    run(data_dir, out, '--max_iters=2')
    with open(out / 'log.jsonl', 'ab') as f:
        f.write(line + b'\n{"iter": 9, "loss": 1.0}\n')
    before = snapshot(out)
    n = len(before['log.jsonl'].splitlines()) - 1
    with pytest.raises(UsageError, match=rf"log.jsonl line {n} is {what} \(a JSON object with an integer 'iter'\); "
                                         rf"delete that line, or the file, and rerun$") as e:
        run(data_dir, out, '--init_from=resume', '--max_iters=4')
    assert '\n' not in str(e.value) and snapshot(out) == before


def test_read_jsonl_skips_only_a_last_line_cut_short(tmp_path):
    path = tmp_path / 'log.jsonl'
    path.write_bytes(b'{"iter": 0, "loss": 3.0}\n\n{"iter": 1, "loss": 2.9}\n{"iter": 2, "lo')
    assert [(n, r['iter']) for n, r in configurator.read_jsonl(str(path))] == [(1, 0), (3, 1)]
    path.write_bytes(b'{"iter": 0}\n\x00\x00\x00')  # a crash can leave zeros at the end
    assert configurator.read_jsonl(str(path)) == [(1, {'iter': 0})]
    path.write_bytes(b'{"iter": 0}\n{"iter": 1}')  # a whole last line without its newline: kept
    assert [r['iter'] for _, r in configurator.read_jsonl(str(path))] == [0, 1]


@pytest.mark.parametrize('value', ['nan', 'inf'])
def test_sample_temperature_must_be_finite(value):
    with pytest.raises(UsageError, match='temperature must be a finite number') as e:
        sample.parse_args([f'--temperature={value}'])
    assert '\n' not in str(e.value)


@pytest.mark.parametrize('value', ['0', '-1', 'nan', 'inf'])
def test_ddp_timeout_must_be_positive(value):
    with pytest.raises(UsageError, match='ddp_timeout_s must be a positive number of seconds'):
        parse_config(train.TrainConfig, [f'--ddp_timeout_s={value}'])


# -----------------------------------------------------------------------------
# DDP: a process that stops does not hang the others

HANG = """
import os, signal, sys, time
sys.path.insert(0, {here!r})
import train
from configurator import run_main
if os.environ['RANK'] == '1':
    get = train.Batches.get

    def stuck(self, *key):
        if key[:2] == (0, 2):  # rank 1 stops for good while drawing iteration 2's batch
            signal.signal(signal.SIGTERM, signal.SIG_DFL)  # (torchrun's SIGTERM ends it)
            time.sleep(600)
        return get(self, *key)
    train.Batches.get = stuck
run_main(train.main)
"""


def test_a_stuck_ddp_process_ends_the_run_after_ddp_timeout_s(data_dir, tmp_path):
    script = tmp_path / 'hang.py'
    script.write_text(HANG.format(here=HERE))
    t0 = time.time()
    proc = torchrun(script, *TINY, f'--data_dir={data_dir}', f'--out_dir={tmp_path / "out"}', '--max_iters=20',
                    '--ddp_timeout_s=2')
    assert proc.returncode != 0
    assert re.search(r"^error: rank 0 of 2: the other processes did not answer within ddp_timeout_s=2s or went "
                     r"away \(one stopped, crashed or hangs: see its output\); no checkpoint was saved; .*$",
                     proc.stderr, re.M), proc.stderr[-3000:]
    assert time.time() - t0 < 60  # not the default 1800 s


# -----------------------------------------------------------------------------
# nothing lost: reruns, Ctrl-C, two runs at once, faults in the middle of the rotation to prev/

def start(data_dir, out_dir, *extra):
    """train.py in a process of its own (its own session: a signal reaches it alone)."""
    return subprocess.Popen([sys.executable, os.path.join(HERE, 'train.py'), *TINY, f'--data_dir={data_dir}',
                             f'--out_dir={out_dir}', *extra], cwd=HERE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def wait_for(proc, text):
    """Read proc's stdout until a line holds `text`; the lines read."""
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if text in line:
            return lines
    raise AssertionError(f"{text!r} never printed: {''.join(lines)}{proc.stderr.read()}")


def test_rerun_and_ctrl_c_before_any_training_saves_nothing(data_dir, tmp_path, monkeypatch, capsys):
    """A rerun stopped before it trained: by a Ctrl-C in its first evaluation (which finishes, then the run
    stops), or by a second Ctrl-C that aborts that evaluation: nothing saved, the trained run whole in prev/."""
    from test_train import signal_inside_evaluation
    out = tmp_path / 'out'
    run(data_dir, out, '--max_iters=6')
    trained, _ = runs(out)
    with monkeypatch.context() as m:
        signal_inside_evaluation(m, 0)
        with pytest.raises(SystemExit, match='130'):
            run(data_dir, out, '--max_iters=50')
    assert 'stopped by SIGINT before any training: nothing saved' in capsys.readouterr().out
    here, prev = runs(out)
    assert prev == trained and 'ckpt.pt' not in here  # moved whole to prev/ before it trained
    proc = start(data_dir, out, '--max_iters=50', '--eval_iters=1000000')  # a first evaluation of minutes
    wait_for(proc, 'step 0: evaluating')
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)  # the second aborts it
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130 and 'Traceback' not in stderr, stderr
    assert 'Ctrl-C again to abort' in stderr and 'saved' not in stdout
    assert runs(out)[1] == trained and 'ckpt.pt' not in runs(out)[0]  # the rerun before it went, prev/ stayed


def test_prev_holds_the_run_before_the_last_scratch_start_whole(data_dir, tmp_path):
    """Finished runs one after another: each scratch run moves the one before to prev/, its three files
    together; prev/'s older run goes."""
    out = tmp_path / 'out'
    for seed, iters in ((1, 4), (2, 2), (3, 6)):
        before = runs(out)[0]
        run(data_dir, out, f'--max_iters={iters}', f'--seed={seed}')
        assert guards.load_checkpoint(str(out / 'ckpt.pt'))['config']['seed'] == seed
        assert runs(out)[1] == before


# train.py runs forked from one process that has imported torch (a fresh process less its import): each
# action of `plan` in turn, in its `out` (a copy of `base` if given); after each, out is copied to <prefix><i>
# and the exit code written to <prefix><i>.rc. An action can stop its run at its `at`-th step (SIGINT, SIGTERM,
# or `kill`: as kill -9), or fail its `fault`-th file operation from the start of out_dir's set-up on (`mode`:
# kill or error); a run of faults ends at the first that did fewer operations than its fault's number
DRIVER = """
import json, os, shutil, signal, sys, traceback
sys.path.insert(0, {here!r})
import torch._dynamo  # torch.optim imports it on first use: here once, not in every fork
import guards, train
from configurator import run_main
plan, prefix = json.loads(sys.argv[1]), sys.argv[2]
for i, act in enumerate(plan):
    out = act['out']
    if act.get('base'):
        shutil.copytree(act['base'], out)
    pid = os.fork()
    if pid == 0:
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        os.dup2(os.open(f'{{prefix}}{{i}}.err', os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 2)
        n = [0]
        if act.get('how'):
            step = train.train_step
            def stopping(*a, **kw):
                n[0] += 1
                if n[0] == act['at']:
                    if act['how'] == 'kill':
                        os._exit(137)
                    os.kill(os.getpid(), getattr(signal, act['how'].upper()))
                return step(*a, **kw)
            train.train_step = stopping
        if act.get('fault'):
            def counted(fn):
                def call(*a, **kw):
                    n[0] += 1
                    if n[0] == act['fault']:
                        if act['mode'] == 'kill':
                            os._exit(137)  # as kill -9: no except, no finally
                        raise OSError(28, 'No space left on device')
                    return fn(*a, **kw)
                return call
            start = train.start_over
            def counting(*a, **kw):
                for name in ('replace', 'remove', 'unlink', 'mkdir', 'rmdir', 'rename'):
                    setattr(os, name, counted(getattr(os, name)))
                return start(*a, **kw)
            train.start_over = counting
        sys.argv = ['train.py', *act['args'], f'--out_dir={{out}}']
        code = 1
        try:
            run_main(train.main)
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
        except BaseException:
            traceback.print_exc()
        finally:
            print(f"operations: {{n[0]}}", file=sys.stderr)
            sys.stdout.flush(), sys.stderr.flush()
            os._exit(code)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    if os.path.isdir(out):
        shutil.copytree(out, f'{{prefix}}{{i}}', symlinks=True)
    with open(f'{{prefix}}{{i}}.rc', 'w') as f:
        f.write(str(code))
    if act.get('fault') and code == 0 and int(open(f'{{prefix}}{{i}}.err').read().split('operations: ')[1]) < act['fault']:
        break  # no fault was injected: every operation is covered
"""


def drive(tmp_path, data_dir, plan):
    """Run DRIVER's plan; [(exit code, stderr, the copy of out_dir after it)] for each action it ran."""
    script = tmp_path / 'driver.py'
    script.write_text(DRIVER.format(here=HERE))
    for act in plan:
        act['args'] = [*TINY, f'--data_dir={data_dir}', f"--seed={act['seed']}", *act['args']]
        act['out'] = str(act.get('out', tmp_path / 'out'))
    subprocess.run([sys.executable, str(script), json.dumps(plan), str(tmp_path / 'after')], cwd=HERE,
                   check=True, timeout=600, env={**os.environ, 'OMP_NUM_THREADS': '1'})
    done = []
    for i in range(len(plan)):
        if not (tmp_path / f'after{i}.rc').exists():
            break
        done.append((int((tmp_path / f'after{i}.rc').read_text()), (tmp_path / f'after{i}.err').read_text(),
                     tmp_path / f'after{i}'))
    return done


def identity(folder):
    """(seed, iter, tokens, finished) of the run in `folder`, after checking that it is whole: ckpt.pt and
    config.json of one run, and its log's steps those of the run up to its checkpoint; None without ckpt.pt."""
    if not os.path.exists(os.path.join(folder, 'ckpt.pt')):
        return None
    ckpt = guards.load_checkpoint(os.path.join(folder, 'ckpt.pt'))
    with open(os.path.join(folder, 'config.json')) as f:
        config = json.load(f)
    assert config['seed'] == ckpt['config']['seed'], (folder, config['seed'], ckpt['config']['seed'])
    steps = [r['iter'] for _, r in configurator.read_jsonl(os.path.join(folder, 'log.jsonl')) if 'loss' in r]
    logged = list(range(0, ckpt['iter_num'], config['log_interval']))
    assert steps[:len(logged)] == logged, folder
    return ckpt['config']['seed'], ckpt['iter_num'], ckpt['tokens_seen'], ckpt['finished']


def kept_by_a_rerun(here, prev):
    """The rule (README, GUIDE §9): at a scratch start, out_dir's run becomes prev/'s unless it has none, or
    stopped short of prev/'s run (fewer tokens, or as many when prev/'s finished): then prev/ keeps its own. A
    run goes only in favour of a finished run or a strictly longer one (of two unfinished runs of as many
    tokens, the newer stays)."""
    if here is None or not here[3] and prev is not None and (here[2] < prev[2] or here[2] == prev[2] and prev[3]):
        return prev
    return here


@pytest.mark.parametrize('plan', [
    # the newcomer's: a finished run, a rerun stopped by Ctrl-C, a rerun; then a newer finished run is the backup
    [dict(seed=1, args=['--max_iters=24']),
     dict(seed=2, args=['--max_iters=24'], how='sigint', at=10),
     dict(seed=3, args=['--max_iters=24']),
     dict(seed=4, args=['--max_iters=4'])],
    # finished, a killed rerun (its log past its checkpoint), SIGTERM, a NaN stop, a longer Ctrl-C'd run, other
    # budgets and another config
    [dict(seed=1, args=['--max_iters=24']),
     dict(seed=2, args=['--max_iters=24', '--eval_interval=4'], how='kill', at=15),
     dict(seed=3, args=['--max_iters=24'], how='sigterm', at=6),
     dict(seed=4, args=['--learning_rate=1e30', '--warmup_iters=0', '--grad_clip=0', '--eval_interval=1']),
     dict(seed=5, args=['--max_iters=100'], how='sigint', at=30),
     dict(seed=6, args=['--max_tokens=256', '--n_embd=16']),
     dict(seed=7, args=['--max_iters=100'], how='kill', at=3),
     dict(seed=8, args=['--max_iters=8'])],
], ids=['newcomer', 'mixed'])
def test_a_rerun_never_loses_a_finished_run_to_an_interrupted_one(data_dir, tmp_path, plan):
    """Any mix of finished runs, runs stopped by Ctrl-C, SIGTERM, a kill or a NaN stop, and reruns with other
    budgets or configs: after each, every run on disk is whole, out_dir holds the newest run's files only, and
    prev/ holds what the rule keeps: a run goes only in favour of a finished run or a longer one."""
    done = drive(tmp_path, data_dir, plan)
    assert len(done) == len(plan)
    here = prev = None
    for (code, err, after), act in zip(done, plan):
        expected = kept_by_a_rerun(here, prev) if here or prev else None
        here, prev = identity(after), identity(after / 'prev')
        assert prev == expected, (act, prev, expected, err[-1500:])
        assert here is None or here[0] == act['seed'], (act, here)  # out_dir: this run's files only
        assert code == {'sigint': 130, 'sigterm': 143, 'kill': 137}.get(act.get('how'), code), (code, err[-1500:])
        if code in (0, 130, 143):  # it saved where it stopped
            assert here[3] == (code == 0) and 'Traceback' not in err, (act, here)
        assert sorted(n for n in os.listdir(after) if n not in guards.RUN_FILES and not n.endswith('.lock')) == \
            (['prev'] if prev else [])
    assert prev is not None and prev[3]  # a finished run is the backup at the end of both sequences


def test_a_kill_as_a_reruns_first_checkpoint_appears_then_a_resume_continues_that_run(data_dir, tmp_path, capsys):
    """SIGKILL the moment a scratch rerun's first checkpoint is on disk: the resume that follows continues
    that run, not the one before it, which stays whole in prev/."""
    out = tmp_path / 'out'
    run(data_dir, out, '--max_iters=6')  # the trained run: seed 1337, iter 6
    trained, _ = runs(out)
    proc = start(data_dir, out, '--max_iters=60', '--eval_interval=20', '--seed=7')
    while proc.poll() is None and not (os.path.exists(out / 'ckpt.pt') and os.path.exists(out / 'prev' / 'ckpt.pt')):
        time.sleep(0.0005)
    proc.kill()
    proc.communicate()
    capsys.readouterr()
    run(data_dir, out, '--max_iters=60', '--eval_interval=20', '--seed=7', '--init_from=resume')
    assert 'resuming from iter 20 ' in capsys.readouterr().out
    assert runs(out)[1] == trained
    rows = [r for _, r in configurator.read_jsonl(str(out / 'log.jsonl'))]
    assert [r['iter'] for r in rows if 'loss' in r] == list(range(60))  # the new run's rows only
    assert guards.load_checkpoint(str(out / 'ckpt.pt'))['config']['seed'] == 7


def test_a_scratch_run_that_cannot_move_the_run_before_is_one_line(data_dir, tmp_path, monkeypatch):
    """out_dir holds a run but nothing can be written there (read-only; root ignores the mode, so the
    failure is simulated), or a file of someone else's sits where the move goes: one line, and out_dir as
    it was."""
    out = tmp_path / 'out'
    run(data_dir, out, '--max_iters=2')
    before = snapshot(out)
    with monkeypatch.context() as m:
        m.setattr(guards.os, 'mkdir', lambda *a, **k: (_ for _ in ()).throw(PermissionError(13, 'Permission denied', a[0])))
        with pytest.raises(UsageError, match=r"^.*out/prev cannot be made a folder \(Permission denied: .*prev\); "
                                             r"pass another folder$"):
            run(data_dir, out, '--max_iters=4')
    assert snapshot(out) == before
    (out / '.moving').write_text('not a folder train.py made')
    with pytest.raises(UsageError, match=r"^.*out/\.moving is not a folder, where train.py \(it keeps the run before a "
                                         r"scratch start in prev/\) writes: move it away, or use another folder$"):
        run(data_dir, out, '--max_iters=4')
    assert snapshot(out) == {**before, '.moving': b'not a folder train.py made'}


def test_two_runs_in_one_out_dir_the_second_is_refused(data_dir, tmp_path):
    out = tmp_path / 'out'
    first = start(data_dir, out, '--max_iters=1000000', '--eval_interval=1000000')
    wait_for(first, 'iter 2/')  # out_dir is locked from its creation on
    second = subprocess.run([sys.executable, os.path.join(HERE, 'train.py'), *TINY, f'--data_dir={data_dir}',
                             f'--out_dir={out}'], cwd=HERE, capture_output=True, text=True, timeout=120)
    assert second.returncode == 2 and 'Traceback' not in second.stderr
    assert re.fullmatch(rf"error: {re.escape(str(out))} is in use: another process \(a train.py, prepare.py or "
                        rf"sweep.py\) is writing there; wait for it to finish or stop it, or use another folder\n", second.stderr), second.stderr
    first.send_signal(signal.SIGINT)
    first.communicate(timeout=60)
    assert first.returncode == 130
    assert guards.load_checkpoint(str(out / 'ckpt.pt'))['iter_num'] > 0 and not os.path.exists(out / 'prev')
    # the lock went with the process that held it (even killed with -9): a new run is not refused
    holder = subprocess.Popen([sys.executable, '-c', f"import sys, time; sys.path.insert(0, {HERE!r}); import "
                               f"configurator; configurator.hold({str(out)!r}); print(1, flush=True); "
                               f"time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    holder.stdout.readline()
    with pytest.raises(UsageError, match='is in use: another process'):
        run(data_dir, out, '--max_iters=2', '--init_from=resume')  # refused at once, out_dir as it was
    holder.kill()
    holder.wait()
    n = guards.load_checkpoint(str(out / 'ckpt.pt'))['iter_num']
    assert run(data_dir, out, '--init_from=resume', f'--max_iters={n + 2}')['iter_num'] == n + 2


def test_two_runs_started_together_in_a_new_out_dir_leave_whole_runs(data_dir, tmp_path):
    out = tmp_path / 'new'
    procs = [start(data_dir, out, '--max_iters=300', '--log_interval=100', f'--seed={seed}') for seed in (1, 2)]
    results = [p.communicate(timeout=120) for p in procs]
    codes = [p.returncode for p in procs]
    assert sorted(codes) in ([0, 2], [0, 0]), results  # overlapping: one is refused; one after the other: both ran
    for err, code in zip((e for _, e in results), codes):
        assert code == 0 or re.fullmatch(r"error: .* is in use: another process \(a train.py, prepare.py or sweep.py\) is writing there; .*\n", err), err
    folders = [out] + ([out / 'prev'] if codes == [0, 0] else [])
    assert len({identity(folder)[0] for folder in folders}) == len(folders)  # each whole, each its own run


def stopped_run(monkeypatch, data_dir, out, at, *extra):
    """A run that Ctrl-C stops at its `at`-th step (it saves there)."""
    step, n = train.train_step, [0]

    def stopping(*a, **kw):
        n[0] += 1
        if n[0] == at:
            os.kill(os.getpid(), signal.SIGINT)
        return step(*a, **kw)
    with monkeypatch.context() as m:
        m.setattr(train, 'train_step', stopping)
        with pytest.raises(SystemExit, match='130'):
            run(data_dir, out, *extra)


@pytest.mark.parametrize('mode', ['kill', 'error'])
@pytest.mark.parametrize('before', ['finished', 'stopped'])
def test_a_fault_at_every_file_operation_of_a_scratch_start_keeps_every_run_whole(
        data_dir, tmp_path, monkeypatch, mode, before):
    """A scratch rerun killed (or failing: a full disk) at each file operation in turn, from out_dir's set-up
    to its last save: over a finished run (which moves to prev/, the older one there going), or over a
    stopped, shorter one (which goes, prev/ staying). Once the next start has settled what the fault left,
    every run is whole and where the rule puts it; the next command continues from there."""
    base = tmp_path / 'base'
    run(data_dir, base, '--max_iters=4', '--seed=2')
    run(data_dir, base, '--max_iters=6', '--seed=1')  # the trained run; the one before it in prev/
    if before == 'stopped':
        stopped_run(monkeypatch, data_dir, base, 2, '--max_iters=40', '--seed=5')  # 2 steps: fewer tokens
    start_here, start_prev = identity(base), identity(base / 'prev')
    done = drive(tmp_path, data_dir, [dict(seed=3, args=['--max_iters=2'], fault=k, mode=mode, base=str(base),
                                           out=tmp_path / f'{mode}{k}') for k in range(1, 40)])
    for k, (code, err, after) in enumerate(done, 1):
        assert 'Traceback' not in err and code in (0, 2, 137), err[-2000:]
        if mode == 'error' and code == 2:
            assert err.count('\n') == 2 and err.startswith('error: '), err  # one line (and the count)
        out = tmp_path / f'{mode}{k}'  # (the fault's own folder: `after` is a copy of it)
        guards.hold_run(str(out))()  # what the next start does first
        here, prev = identity(out), identity(out / 'prev')  # whole, both
        if prev == start_prev and here == start_here:  # not moved yet: out_dir as it was
            pass
        else:  # moved or dropped by the rule; out_dir holds the new run's files or none
            assert prev == kept_by_a_rerun(start_here, start_prev), (k, prev, err)
            assert here is None or here[0] == 3, (k, here)
        assert sorted(n for n in os.listdir(out) if n not in guards.RUN_FILES and not n.endswith('.lock')) == \
            ['prev'], os.listdir(out)
        # what comes next obeys the rule from what is there
        run(data_dir, out, '--max_iters=2', '--seed=4')
        assert identity(out / 'prev') == kept_by_a_rerun(here, prev) and identity(out)[0] == 4
    assert code == 0 and k > 6, k


# -----------------------------------------------------------------------------
# readers refuse what they cannot trust; bad values are one line

def test_a_checkpoint_from_a_newer_format_or_not_ours_is_one_line(data_dir, tmp_path):
    """One check of what torch.load gives (a dict with model and model_args) and of the format version; a
    checkpoint of another architecture (a pos_emb of before rotary positions, weights that do not fit) is
    refused by the architecture check on resume, and by the rebuild in sample.py, naming what differs."""
    out = tmp_path / 'out'
    run(data_dir, out, '--max_iters=2')
    good = torch.load(out / 'ckpt.pt', weights_only=True)
    for change, resume, rebuild in [
            (dict(format_version=2), 'checkpoint format 2', 'checkpoint format 2'),
            (dict(model_args=[1, 2]), 'cannot be read', 'cannot be read'),
            (dict(model_args={**good['model_args'], 'pos_emb': True}), r"another architecture: pos_emb=True",
             r"does not rebuild a model: unknown pos_emb True"),
            (dict(model={k: v for k, v in good['model'].items() if 'ln_f' not in k}), r"cannot resume here: .*Missing key",
             r"does not rebuild a model: Error\(s\) in loading state_dict for GPT: Missing key\(s\) in "
             r"state_dict: \"transformer.ln_f.weight\", \"transformer.ln_f.bias\"")]:
        torch.save({**good, **change}, out / 'ckpt.pt')
        before = snapshot(out)
        with pytest.raises(UsageError, match=resume) as e:
            run(data_dir, out, '--max_iters=4', '--init_from=resume')
        assert '\n' not in str(e.value) and snapshot(out) == before  # not resumed, not rewritten as format 1
        with pytest.raises(UsageError, match=rebuild) as e:
            sample.main([f'--out_dir={out}', '--device=cpu', '--max_new_tokens=2'])
        assert '\n' not in str(e.value)
    torch.save({**good, 'model_args': {**good['model_args'], 'n_layer': 'two'}}, out / 'ckpt.pt')
    with pytest.raises(UsageError, match=r"ckpt.pt does not rebuild a model: "):
        sample.main([f'--out_dir={out}', '--device=cpu', '--max_new_tokens=2'])
    torch.save(good, out / 'ckpt.pt')
    with pytest.raises(UsageError, match=r"^--start holds bytes that are not UTF-8 text; pass UTF-8, or --start=FILE:path$"):
        sample.main([f'--out_dir={out}', '--device=cpu', '--max_new_tokens=2', '--start=\udcff\udcfe'])


@pytest.mark.parametrize('args,expect', [
    (['--max_flops=inf'], 'max_flops must be a finite number'), (['--max_flops=nan'], 'max_flops must be a finite'),
    (['--learning_rate=nan'], 'learning_rate must be a positive number'), (['--seed=18446744073709551616'], 'seed'),
    (['--max_seconds=inf'], 'max_seconds'), (['--lr=1e-3'], "unknown key 'lr'; did you mean learning_rate"),
    (['--quik'], "unknown key 'quik'"), (['configs/gmlp.py', '--n_embd=150'], 'gmlp .*no heads.*n_head to one of'),
    (['configs/amlp.py', '--n_embd=150'], 'amlp .*no heads'), (['configs/gmlp.py', '--n_head=5'], 'gmlp .*no heads'),
    (['configs/gmpl.py'], r"not found; did you mean .*configs/gmlp\.py"), (['gmlp.py'], r"did you mean configs/gmlp\.py"),
])
def test_bad_values_are_one_line(args, expect):
    with pytest.raises(UsageError, match=expect) as e:
        parse_config(train.TrainConfig, [os.path.join(HERE, a) if a.startswith('configs/') else a for a in args])
    assert '\n' not in str(e.value)


@pytest.mark.parametrize('script,args,expect', [
    ('train.py', [], 'give a config: python {train.py} {configs/quick.py} '),  # paths from the folder it ran in
    ('train.py', ['--device=meta'], "device 'meta' is not one this code runs on"),
    ('train.py', ['--device=hpu'], "device 'hpu' is not one this code runs on"),
    ('sample.py', ['--seed=18446744073709551616'], r'seed must be in \[0, 2\*\*63\)'),
    ('bench.py', ['--device=meta'], "device 'meta' is not one this code runs on"),
    ('sweep.py', ['--max_flops=nan'], 'max_flops=nan: give one or more positive numbers'),
    ('sweep.py', [], r'a bare sweep trains every config .*: python sweep.py --quick \(about a minute\)'),
    ('sweep.py', ['--max_iters=1.5'], 'max_iters=1.5: give integers separated by commas'),
    ('sweep.py', ['--learning_rate=abc'], 'learning_rate=abc: give floats separated by commas'),  # before the data
    ('sweep.py', ['--sizes=3x96'], '--sizes is read by --scaling only'),
    ('probe.py', ['--head_size=7'], r'head_size=7 does not divide width 64; pick head_size among \[2, 4, 8, 16, 32, 64\]'),
    ('probe.py', ['--head_size=48'], 'head_size=48 does not divide width 64'),
])
def test_bad_input_is_one_line_and_exit_2(script, args, expect, tmp_path):
    code, out, err = as_script(script, args, tmp_path, process=args == ['--sizes=3x96'])
    assert code == 2 and out == '' and err.count('\n') == 1, err
    expect = re.sub(r'\{(\S+)\}', lambda m: re.escape(os.path.relpath(os.path.join(HERE, m.group(1)), tmp_path)),
                    expect)
    assert re.match(rf"error: .*{expect}", err), err


TINY_REF = ['--n_layer=1', '--n_head=2', '--n_embd=32', '--block_size=16', '--vocab_size=64', '--batch_size=2',
            '--device=cpu', '--iters=1', '--repeats=1', '--warmup=1', '--decode_tokens=0']
NOT_NANOGPT = """
import torch
from dataclasses import dataclass
@dataclass
class GPTConfig:
    block_size: int = 16
    vocab_size: int = 64
    n_layer: int = 1
    n_head: int = 2
    n_embd: int = 32
    dropout: float = 0.0
    bias: bool = True
class GPT(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
    def forward(self, idx, targets=None):
        return self.lin(idx.float())  # logits only: not nanoGPT's (logits, loss)
    def configure_optimizers(self, weight_decay, learning_rate, betas, device_type):
        return torch.optim.AdamW(self.parameters(), lr=learning_rate)
"""


@pytest.mark.parametrize('case', ['sample-folder', 'hellaswag-folder', 'hellaswag-stdin',
                                  'bench-folder', 'bench-devnull', 'bench-not-py', 'bench-exit',
                                  'bench-not-nanogpt'])
def test_a_path_a_user_names_is_a_regular_file_or_one_line(case, tmp_path):
    """A device, pipe, socket or folder named where a file is read is refused in one line before it is
    read (/dev/zero has no end); a --reference file that is not nanoGPT's kind of model file too."""
    (tmp_path / 'exits.py').write_text('import sys\nsys.exit(0)\n')
    (tmp_path / 'model.txt').write_text('not python')
    (tmp_path / 'other.py').write_text(NOT_NANOGPT)
    script, args, expect = {
        'sample-folder': ('sample.py', [f'--start=FILE:{tmp_path}'], r'--start=FILE:.*: cannot read it \(IsADirectoryError'),
        'hellaswag-folder': ('hellaswag.py', ['--out_dir=nowhere', f'--input={tmp_path}'], 'is a folder'),
        'hellaswag-stdin': ('hellaswag.py', ['--out_dir=nowhere', '--input=/dev/stdin'], 'not a regular file'),
        'bench-folder': ('bench.py', [f'--reference={tmp_path}', *TINY_REF], 'is a folder'),
        'bench-devnull': ('bench.py', ['--reference=/dev/null', *TINY_REF], 'not a regular file'),
        'bench-not-py': ('bench.py', [f'--reference={tmp_path / "model.txt"}', *TINY_REF], r'is not a Python file'),
        'bench-exit': ('bench.py', [f'--reference={tmp_path / "exits.py"}', *TINY_REF], 'failed to load: SystemExit'),
        'bench-not-nanogpt': ('bench.py', [f'--reference={tmp_path / "other.py"}', *TINY_REF],
                              "the reference model does not build or train as nanoGPT's interface does"),
    }[case]
    code, _, err = as_script(script, args, tmp_path, process=case == 'hellaswag-stdin')  # (this stdin: none)
    assert code == 2 and err.count('\n') == 1, err
    assert re.match(rf"error: .*{expect}", err), err


@pytest.mark.parametrize('case', ['sweep-report-png', 'sweep-plot-png', 'sweep-results', 'probe-png',
                                  'probe-results', 'hellaswag-json'])
def test_an_output_path_that_is_a_pipe_is_refused_never_replaced(case, tmp_path):
    """An output named by the user that exists and is not a regular file (a FIFO here; /dev/null or
    /dev/full as root alike) is refused in one line before any work, and is still what it was: the
    atomic write never renames a file over it."""
    import stat
    fifo = tmp_path / 'out.fifo'
    os.mkfifo(fifo)
    results = os.path.join(HERE, 'results', 'sweep_stdlib.jsonl')
    (tmp_path / 'run').mkdir()
    script, args = {
        'sweep-report-png': ('sweep.py', ['--report', f'--results={results}', f'--png={fifo}']),
        'sweep-plot-png': ('sweep.py', ['--plot', str(tmp_path / 'run'), f'--png={fifo}']),
        'sweep-results': ('sweep.py', ['--configs=gpt', f'--results={fifo}', '--max_iters=2']),
        'probe-png': ('probe.py', ['--replot', f'--results={HERE}/results/probe.jsonl', f'--png={fifo}']),
        'probe-results': ('probe.py', ['--quick', f'--results={fifo}']),
        'hellaswag-json': ('hellaswag.py', ['--out_dir=nowhere', f'--json={fifo}']),
    }[case]
    code, _, err = as_script(script, args, tmp_path, process=case == 'sweep-results')
    assert code == 2 and err.count('\n') == 1, err
    assert re.match(r"error: --(png|results|json)[ =]'.*out.fifo' is not a regular file", err), err
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


@pytest.mark.parametrize('name', ['ckpt.pt', 'log.jsonl', 'config.json', 'meta.json'])
def test_a_pipe_where_a_run_or_a_dataset_puts_its_files_is_refused_never_replaced(name, data_dir, tmp_path):
    """train.py renames its files into out_dir, prepare.py its meta.json: a FIFO (a device alike) at
    one of those names is refused in one line, a scratch run and a resume alike, and stays there."""
    import stat
    out = tmp_path / 'out'
    out.mkdir()
    os.mkfifo(out / name)
    (tmp_path / 'corpus.txt').write_text('a cat sat on the mat.\n' * 400)
    attempts = ([lambda: prepare.main([f"--input={tmp_path / 'corpus.txt'}", f'--out_dir={out}'])]
                if name == 'meta.json' else
                [lambda: run(data_dir, out, '--max_iters=2'), lambda: run(data_dir, out, '--init_from=resume')])
    for attempt in attempts:
        with pytest.raises(UsageError) as e:
            attempt()
        assert str(e.value) == (f"{out} holds meta.json, which prepare.py (a dataset's folder holds meta.json and the "
                                "shards it lists) did not write: move it away, or use another folder" if name == 'meta.json' else
                                f"a run's file '{out / name}' is not a regular file (a device, pipe or socket); "
                                "move it away, or pass another --out_dir")
        assert os.listdir(out) == [name] and stat.S_ISFIFO(os.stat(out / name).st_mode)


def test_what_is_there_is_what_the_line_says(data_dir, tmp_path):
    """Each misleading line of the adversarial run says what is there: a prev that is a file, a folder named
    like a config file, the default HellaSwag output that is a FIFO (refused before any work), a report's
    derived plot that is a FIFO (refused before any of the report is printed)."""
    out = tmp_path / 'out'
    run(data_dir, out, '--max_iters=2')
    (out / 'prev').write_text('mine')
    with pytest.raises(UsageError, match=rf"^{re.escape(str(out / 'prev'))} is not a folder, where train.py \(it keeps "
                                         r"the run before a scratch start in prev/\) writes: move it away, or use another "
                                         r"folder$"):
        run(data_dir, out, '--max_iters=4')
    assert (out / 'prev').read_text() == 'mine' and guards.load_checkpoint(str(out / 'ckpt.pt'))['iter_num'] == 2
    (tmp_path / 'x.py').mkdir()
    with pytest.raises(UsageError, match=r"config file '.*x.py' is a folder; name a config file"):
        train.main([str(tmp_path / 'x.py')])
    os.remove(out / 'prev')
    os.mkfifo(out / 'eval_hellaswag.json')
    proc = subprocess.run([sys.executable, os.path.join(HERE, 'hellaswag.py'), f'--out_dir={out}',
                           '--url=http://127.0.0.1:9/hellaswag_val.jsonl'], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.count('\n') == 1 and 'downloading' not in proc.stderr, proc.stderr
    assert "eval_hellaswag.json' is not a regular file" in proc.stderr
    results = os.path.join(HERE, 'results', 'shapes_stdlib.jsonl')
    os.mkfifo(tmp_path / 'r-3x96-wsd-regime.png')
    proc = subprocess.run([sys.executable, os.path.join(HERE, 'sweep.py'), '--report', f'--results={results}',
                           f'--png={tmp_path / "r.png"}'], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and proc.stdout == '', proc.stdout[:500]  # nothing of the report printed first
    assert "r-3x96-wsd-regime.png' is not a regular file" in proc.stderr and proc.stderr.count('\n') == 1


def test_bare_bool_flags_resume_message_and_a_sample_of_a_tiny_temperature(data_dir, tmp_path, capsys):
    run(data_dir, tmp_path, '--max_iters=2', '--always_save_checkpoint')  # a bare bool is --key=true
    capsys.readouterr()
    run(data_dir, tmp_path, '--max_iters=3', '--init_from=resume')
    assert 'resuming from iter 2 (128 tokens)' in capsys.readouterr().out
    greedy = sample.main([f'--out_dir={tmp_path}', '--device=cpu', '--max_new_tokens=8', '--temperature=0'])
    greedy = capsys.readouterr().out
    sample.main([f'--out_dir={tmp_path}', '--device=cpu', '--max_new_tokens=8', '--temperature=1e-40'])
    assert capsys.readouterr().out == greedy  # 1e-40 is greedy, not a nan from inf - inf


def test_ctrl_c_under_torchrun_saves_and_resumes(data_dir, tmp_path):
    # a terminal's Ctrl-C signals torchrun and its workers together; torchrun then prints its own report
    # (GUIDE.md §3 says what it looks like); the worker's checkpoint and resume line are what count, and
    # every worker exits by itself (one hung at exit 5 times in 28 before its gloo threads were let
    # finish: torchrun killed it after 30 s)
    out = tmp_path / 'out'
    proc = subprocess.Popen([sys.executable, '-m', 'torch.distributed.run', '--standalone', '--nproc_per_node=2',
                             os.path.join(HERE, 'train.py'), *TINY, f'--data_dir={data_dir}', f'--out_dir={out}',
                             '--max_iters=1000000', '--eval_interval=1000000'], cwd=HERE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env={**os.environ, 'OMP_NUM_THREADS': '1'})
    wait_for(proc, 'iter 3/')
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert re.search(r'stopped by SIGINT at iter (\d+); resume with: torchrun <its options> \S*train.py .* '
                     r'--init_from=resume\n', stdout), stdout + stderr
    assert 'forcefully exiting' not in stderr, stderr
    n = guards.load_checkpoint(str(out / 'ckpt.pt'))['iter_num']
    assert n >= 3 and run(data_dir, out, '--init_from=resume', f'--max_iters={n + 1}')['iter_num'] == n + 1


def test_a_torchrun_worker_takes_the_terminals_ctrl_c_and_torchruns_as_one():
    """torchrun sends the terminal's Ctrl-C on to its workers, which had it already: train.py under
    torchrun (once=True) takes the two as one, never as a second Ctrl-C that aborts a save; a plain
    run's second Ctrl-C aborts."""
    with guards.Signals('stopping', announce=False, once=True) as signals:
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)
        assert signals.received == [signal.SIGINT]
    with pytest.raises(KeyboardInterrupt):
        with guards.Signals('stopping', announce=False) as signals:
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)
    assert signals.received == [signal.SIGINT]


def script_configs():
    """Every script's settings dataclass: (script, class)."""
    import bench
    import prepare
    import probe
    import sweep
    return [('train.py', train.TrainConfig), ('sample.py', sample.SampleConfig), ('sweep.py', sweep.SweepConfig),
            ('probe.py', probe.ProbeConfig), ('bench.py', bench.BenchConfig), ('prepare.py', prepare.PrepareConfig)]


@pytest.mark.parametrize('value', ['nan', 'inf', '-inf'])
def test_every_float_setting_of_every_script_refuses_a_value_that_is_not_finite(value):
    """nan and inf are never a setting: each is one line naming the key, whatever the key (a rule for
    every float field, not a list of the ones that once slipped through)."""
    checked = 0
    for script, cls in script_configs():
        for f in dataclasses.fields(cls):
            if type(getattr(cls(), f.name)) is float:
                with pytest.raises(UsageError, match=rf"\b{f.name}\b") as e:
                    parse_config(cls, [f'--{f.name}={value}'])
                assert '\n' not in str(e.value), (script, f.name)
                checked += 1
    assert checked >= 15


@pytest.mark.parametrize('args,expect', [
    (['--rope_base=0'], 'rope_base must be a positive finite number'),
    (['--rope_base=-10000'], 'rope_base must be a positive finite number'),
    (['--peak_flops=-1'], 'peak_flops must be a finite number, not negative')])
def test_out_of_range_floats_name_the_key_not_another(args, expect):
    with pytest.raises(UsageError, match=expect):
        parse_config(train.TrainConfig, args)


def test_log_rows_are_json_even_when_a_value_is_not_finite(tmp_path):
    """A value that is not a finite number is null in log.jsonl: NaN is not JSON (a strict reader, or
    another language's, refuses the whole file)."""
    with open(tmp_path / 'log.jsonl', 'w') as log:
        train.write_row(log, {'iter': 0, 'loss': 2.0, 'mfu': float('nan'), 'tokens_per_s': float('inf')})
    text = open(tmp_path / 'log.jsonl').read()
    assert json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in log.jsonl")) == \
        {'iter': 0, 'loss': 2.0, 'mfu': None, 'tokens_per_s': None}


def test_a_second_ctrl_c_inside_a_checkpoint_write_is_a_ctrl_c_not_a_disk_error(tmp_path):
    """torch.save turns a KeyboardInterrupt raised in its writes into a RuntimeError ('unexpected pos');
    the write is undone and it stays a Ctrl-C (exit 130), not 'could not write' (exit 2)."""
    path = tmp_path / 'ckpt.pt'
    path.write_bytes(b'the last good checkpoint')

    class Interrupted:
        def __init__(self, f):
            self.f, self.n = f, 0

        def write(self, data):
            self.n += 1
            if self.n == 3:
                raise KeyboardInterrupt
            return self.f.write(data)

        def __getattr__(self, name):
            return getattr(self.f, name)

    with pytest.raises(KeyboardInterrupt):
        configurator.atomic_write(str(path), lambda f: torch.save({'w': torch.zeros(10000)}, Interrupted(f)))
    assert path.read_bytes() == b'the last good checkpoint' and os.listdir(tmp_path) == ['ckpt.pt']


def test_a_split_too_short_for_one_window_is_named(tmp_path):
    """A val split shorter than block_size + 1 (a small text, a small val_fraction): the message names
    that split, not 'every shard'."""
    folder = write_corpus(tmp_path / 'data')
    from conftest import write_shard
    import numpy as np
    write_shard(os.path.join(folder, 'val_000000.bin'), np.zeros(10, dtype=np.uint16))
    with pytest.raises(UsageError, match=r"the val split holds no window of block_size \+ 1 = 17 tokens \(its longest "
                                         r"shard: 10\); lower block_size, or prepare more text \(or a larger "
                                         r"--val_fraction\)"):
        run(folder, tmp_path / 'out', '--max_iters=2')


@pytest.mark.parametrize('script', ['train.py', 'sample.py', 'sweep.py', 'probe.py', 'bench.py', 'prepare.py'])
def test_ctrl_c_while_the_script_starts_is_quiet(script, tmp_path):
    """Ctrl-C during `import torch` (the first second or two): exit 130, no traceback. On a cold start
    (a fresh virtual environment) the signal can land before the interpreter has any handler: the
    process then dies by SIGINT, which is quiet too and what a shell also reports as 130."""
    proc = subprocess.Popen([sys.executable, os.path.join(HERE, script), '--help'], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(0.15)  # past the interpreter's own start, inside the imports
    proc.send_signal(signal.SIGINT)
    err = proc.communicate(timeout=60)[1]
    done = script == 'prepare.py' and proc.returncode == 0  # no torch to import: it may have finished
    assert (proc.returncode in (130, -signal.SIGINT) or done) and 'Traceback' not in err, err


@pytest.mark.parametrize('odd', ['unreadable', 'no config'])
def test_a_scratch_run_over_an_odd_checkpoint_moves_it_to_prev_with_a_note(data_dir, tmp_path, capsys, odd):
    """Retraining over a checkpoint that cannot be read, or one with no config (and no config.json): the
    run is not refused (the user is retraining), and the old file is kept in prev/ as it was."""
    out = tmp_path / 'out'
    out.mkdir()
    if odd == 'unreadable':
        (out / 'ckpt.pt').write_bytes(b'not a checkpoint')
    else:
        torch.save({'model': {}, 'model_args': {}}, out / 'ckpt.pt')
    old = (out / 'ckpt.pt').read_bytes()
    assert run(data_dir, out, '--max_iters=2')['iter_num'] == 2
    assert (out / 'prev' / 'ckpt.pt').read_bytes() == old
    assert guards.load_checkpoint(str(out / 'ckpt.pt'))['iter_num'] == 2
    assert f"the run there (a checkpoint that cannot be read) moved to {out}/prev/" in capsys.readouterr().out


# -----------------------------------------------------------------------------
# the storage layer's rules (GUIDE §9): a folder another process holds is never renamed or removed; which run
# prev/ keeps is read from the checkpoints alone; only what is ours is ever replaced or removed

def holder(path):
    """A process holding `path` (as a train.py training there would) until killed: (the process)."""
    proc = subprocess.Popen([sys.executable, '-c', f"import sys, time; sys.path.insert(0, {HERE!r}); import configurator; "
                             f"configurator.hold({str(path)!r}); print(1, flush=True); time.sleep(120)"],
                            stdout=subprocess.PIPE, text=True)
    proc.stdout.readline()
    return proc


def test_a_scratch_start_never_moves_prev_while_a_run_trains_there(data_dir, tmp_path):
    """The line a missing checkpoint gives (--out_dir=D/prev) resumes the run in prev/; a scratch start in D
    meanwhile would move prev/ away under it: refused in one line, nothing moved. The live run then ends in
    prev/ with its own checkpoint and log."""
    out = tmp_path / 'out'
    run(data_dir, out, '--max_iters=2', '--seed=1')
    run(data_dir, out, '--max_iters=4', '--seed=2')  # prev/: seed 1; out: seed 2, finished (it would move)
    live = start(data_dir, out / 'prev', '--init_from=resume', '--seed=1', '--max_iters=1000000',
                 '--eval_interval=1000000')
    wait_for(live, 'iter 4/')
    before = runs(out)[0]
    with pytest.raises(UsageError, match=rf"^{re.escape(str(out / 'prev'))} is in use: another process"):
        run(data_dir, out, '--max_iters=2', '--seed=3')
    assert runs(out)[0] == before
    live.send_signal(signal.SIGINT)
    live.communicate(timeout=60)
    seed, it, _, finished = identity(out / 'prev')  # its own checkpoint beside its own log
    assert seed == 1 and it > 4 and not finished and identity(out)[:2] == (2, 4)
    run(data_dir, out, '--max_iters=2', '--seed=3')  # no one in prev/ now: the rule (out's finished run moves)
    assert identity(out / 'prev')[:2] == (2, 4)


def edit_checkpoint(folder, **changes):
    """Rewrite folder/ckpt.pt with `changes` (None: the key left out, as an older train.py wrote it)."""
    ckpt = torch.load(folder / 'ckpt.pt', weights_only=True)
    for k, v in changes.items():
        ckpt.pop(k) if v is None else ckpt.__setitem__(k, v)
    torch.save(ckpt, folder / 'ckpt.pt')


@pytest.mark.parametrize('prev_is', ["an older train.py's", 'config.json deleted', 'config.json not JSON',
                                     'config.json says finished and longer'])
def test_which_run_prev_keeps_is_read_from_the_checkpoints_alone(data_dir, tmp_path, monkeypatch, capsys, prev_is):
    """prev/ holds a run of 6 iterations whose config.json says anything (or nothing), or whose checkpoint is an
    older train.py's (it does not say whether it finished: read as not): a rerun stopped after 2 iterations goes
    (fewer tokens), one stopped after 9 replaces it (more tokens). The note says what each run is."""
    out, prev = tmp_path / 'out', tmp_path / 'out' / 'prev'
    run(data_dir, out, '--max_iters=6', '--seed=1')
    stopped_run(monkeypatch, data_dir, out, 2, '--max_iters=40', '--seed=2')  # the 6 go to prev/; 2 steps here
    if prev_is == "an older train.py's":
        edit_checkpoint(prev, finished=None, evaluated=None)
    elif prev_is == 'config.json deleted':
        os.remove(prev / 'config.json')
    else:
        (prev / 'config.json').write_text('{"saved": {"iter_num": 99999, "tokens_seen": 1e30, "finished": true}}'
                                          if prev_is.endswith('longer') else '{not json')
    kept, state = runs(out)[1], 'stopped early' if prev_is == "an older train.py's" else 'finished'
    capsys.readouterr()
    stopped_run(monkeypatch, data_dir, out, 9, '--max_iters=40', '--seed=4')  # the 2 go; 9 steps here
    assert runs(out)[1] == kept
    assert (f"the run there (iter 2, 128 tokens, stopped early) went: {prev}/ keeps a finished or longer one (iter "
            f"6, 384 tokens, {state})") in capsys.readouterr().out
    run(data_dir, out, '--max_iters=1', '--seed=5')  # the 9 replace the 6
    assert identity(prev)[:2] == (4, 9)
    assert (f"the run there (iter 9, 576 tokens, stopped early) moved to {prev}/, replacing the one there (iter 6, "
            f"384 tokens, {state})") in capsys.readouterr().out


def test_a_run_of_as_many_tokens_goes_only_in_favour_of_a_finished_one(data_dir, tmp_path, monkeypatch):
    """prev/ finished at 4 iterations; a rerun stopped at 4 (killed in its final evaluation, say): it goes,
    the finished run stays. Two stopped runs of as many tokens: the newer stays (neither is longer)."""
    out = tmp_path / 'out'
    run(data_dir, out, '--max_iters=4', '--seed=1')
    stopped_run(monkeypatch, data_dir, out, 4, '--max_iters=40', '--seed=2')  # the finished 4 to prev/
    finished = runs(out)[1]
    assert identity(out)[1:] == (4, 256, False) and identity(out / 'prev')[1:] == (4, 256, True)
    stopped_run(monkeypatch, data_dir, out, 4, '--max_iters=40', '--seed=3')  # seed 2's as many tokens: it goes
    assert runs(out)[1] == finished
    edit_checkpoint(out / 'prev', finished=False)  # now both stopped at 4: the newer one stays
    run(data_dir, out, '--max_iters=1', '--seed=7')
    assert identity(out / 'prev')[:2] == (3, 4)


@pytest.mark.parametrize('case', ['a file in prev/', 'a hidden file in prev/', 'prev a symlink', 'a folder in prev/',
                                  "a user's .moving/"])
def test_what_is_not_ours_in_prev_or_a_reserved_name_is_refused_and_stays(data_dir, tmp_path, case):
    """A scratch start replaces prev/ only if everything in it is a run's file; a user's file (hidden ones too),
    a folder, a symlink as prev/, or a user's folder under the name the move uses: one line naming it, and
    every file stays as it was (a resume is never turned into a move)."""
    out, mine = tmp_path / 'out', tmp_path / 'mine'
    run(data_dir, out, '--max_iters=2', '--seed=1')
    run(data_dir, out, '--max_iters=3', '--seed=2')
    mine.mkdir()
    (mine / 'notes.txt').write_text('mine')
    where = {'a file in prev/': out / 'prev' / 'notes.txt', 'a hidden file in prev/': out / 'prev' / '.env',
             'a folder in prev/': out / 'prev' / 'data', "a user's .moving/": out / '.moving' / 'notes.txt'}.get(case)
    if case == 'prev a symlink':
        shutil.rmtree(out / 'prev')
        os.symlink(mine, out / 'prev')
    elif case == 'a folder in prev/':
        where.mkdir()
    else:
        where.parent.mkdir(exist_ok=True)
        where.write_text('mine')
    before, target = snapshot(out), snapshot(mine)
    named = {'prev a symlink': 'prev is a symlink', "a user's .moving/": r'\.moving holds notes\.txt',
             'a folder in prev/': 'prev holds data', 'a hidden file in prev/': r'prev holds \.env'}.get(case, 'prev holds notes.txt')
    with pytest.raises(UsageError, match=rf"out/{named}"):
        run(data_dir, out, '--max_iters=2', '--seed=3')
    assert snapshot(out) == before and snapshot(mine) == target
    if case != 'prev a symlink':
        assert run(data_dir, out, '--max_iters=4', '--init_from=resume')['iter_num'] == 4  # a resume trains on
    assert snapshot(mine) == target and (os.path.islink(out / 'prev') or where.exists())


def test_a_users_folder_under_another_hidden_name_is_never_touched(data_dir, tmp_path):
    """Names train.py does not use (a user's .gone/, .cache/) stay through scratch starts and resumes."""
    out = tmp_path / 'out'
    run(data_dir, out, '--max_iters=2')
    for name in ('.gone', '.cache'):
        (out / name).mkdir()
        (out / name / 'x').write_text(name)
    for args in (['--max_iters=2', '--seed=2'], ['--max_iters=3', '--init_from=resume'], ['--max_iters=1']):
        run(data_dir, out, *args)
        assert (out / '.gone' / 'x').read_text() == '.gone' and (out / '.cache' / 'x').read_text() == '.cache'


def test_a_move_cut_between_its_renames_is_no_dataset_and_the_next_start_finishes_it(data_dir, tmp_path):
    """Killed between the swap's renames, a run folder holds only .moving/ and .moving.old/: prepare.py there
    is refused naming them (both runs stay), and the next train.py start finishes the move."""
    out = tmp_path / 'out'
    run(data_dir, out, '--max_iters=2', '--seed=1')
    run(data_dir, out, '--max_iters=3', '--seed=2')
    os.rename(out / 'prev', out / '.moving.old')  # what the kill left: prev/ renamed away,
    os.mkdir(out / '.moving')  # the run's files moved in, .moving/ not yet renamed to prev/
    for name in guards.RUN_FILES:
        os.rename(out / name, out / '.moving' / name)
    before = snapshot(out)
    (tmp_path / 'corpus.txt').write_text('a cat sat on the mat.\n' * 400)
    with pytest.raises(UsageError, match=r"out holds \.moving, \.moving\.old, which prepare.py .* did not write"):
        prepare.main([f"--input={tmp_path / 'corpus.txt'}", f'--out_dir={out}'])
    assert snapshot(out) == before
    run(data_dir, out, '--max_iters=1', '--seed=3')  # the next start settles: the move finished, then the rule
    assert identity(out / 'prev')[:2] == (2, 3) and identity(out)[:2] == (3, 1)
    assert not (out / '.moving').exists() and not (out / '.moving.old').exists()
