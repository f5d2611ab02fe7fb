"""
Faults and bad input in train.py and sample.py: one line `error: ...` (exit code 2, no traceback),
never a mix of old and new files in out_dir, and nothing a user had before the command is lost.
A full disk is simulated by file objects whose writes raise OSError(ENOSPC), so CI can run it.
"""
import errno
import json
import os
import re
import subprocess
import sys
import time

import pytest

import checkpoint
import configurator
import runtime
import sample
from configurator import UsageError, parse_config
from test_train import HERE, TINY, data_dir, run, torchrun, write_corpus  # noqa: F401 (data_dir: the fixture)


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
    meta['tokenizer']['chars'] = meta['tokenizer']['chars'][::-1]  # no larger: the vocab check passes
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


def test_a_scratch_run_that_fails_in_training_keeps_the_previous_run(data_dir, tmp_path):
    out = tmp_path / 'out'
    run(data_dir, out, '--max_iters=6')
    first = snapshot(out)
    nan = ['--learning_rate=1e30', '--warmup_iters=0', '--grad_clip=0', '--eval_interval=1', '--max_iters=20']
    with pytest.raises(UsageError, match=r"loss is not finite at iter \d+: stopped without saving; .*ckpt.pt is kept "
                                         r"as it was; try a lower learning_rate, warmup_iters > 0 or grad_clip=1.0$"):
        run(data_dir, out, *nan)
    assert snapshot(out) == first  # its log and config too; no temp file, no prev/
    # a good rerun moves the first run to prev/; a failing one after it keeps both
    run(data_dir, out, '--max_iters=2', '--seed=5')
    second = snapshot(out)
    assert {k[len('prev/'):]: v for k, v in second.items() if k.startswith('prev/')} == first
    with pytest.raises(UsageError, match='loss is not finite'):
        run(data_dir, out, *nan)
    assert snapshot(out) == second


def test_a_scratch_run_says_where_the_previous_run_goes(data_dir, tmp_path, capsys):
    out = tmp_path / 'out'
    run(data_dir, out, '--max_iters=2')
    capsys.readouterr()
    run(data_dir, out, '--max_iters=4', '--eval_interval=2')
    text = capsys.readouterr().out
    start = text.index(f"note: {out} holds a previous run: it stays as it is until this run saves its first "
                       f"checkpoint, then moves to {out / 'prev'}/")
    moved = text.index(f"note: {out} held a checkpoint: the previous run (ckpt.pt, log.jsonl, config.json) is "
                       f"kept in {out / 'prev'}/")
    assert start < text.index('step 2: train loss') < moved < text.index(f"saved {out / 'ckpt.pt'} at iter 2")
    assert checkpoint.load_checkpoint(str(out / 'prev' / 'ckpt.pt'))['iter_num'] == 2
    steps = [r['iter'] for r in checkpoint.read_jsonl(str(out / 'log.jsonl')) if 'loss' in r]
    assert steps == [0, 1, 2, 3]  # the rows written before the first checkpoint are in the new log
    with open(out / 'config.json') as f:
        assert json.load(f) == checkpoint.load_checkpoint(str(out / 'ckpt.pt'))['config']
    assert sorted(os.listdir(out)) == ['ckpt.pt', 'config.json', 'log.jsonl', 'prev']


# -----------------------------------------------------------------------------
# a full disk

def test_a_full_disk_at_a_log_row_is_one_line_and_keeps_the_checkpoint(data_dir, tmp_path, monkeypatch):
    out = tmp_path / 'out'
    run(data_dir, out, '--max_iters=4')
    before = snapshot(out)
    fill_disk(monkeypatch, checkpoint, r'^log\.jsonl', room=300)  # a row or two, then the disk is full
    with pytest.raises(UsageError, match=r"^could not write '.*log.jsonl': no space left on device; .*ckpt.pt is "
                                         r"kept as it was; free some space and resume with --init_from=resume$"):
        run(data_dir, out, '--init_from=resume', '--max_iters=8', '--eval_interval=100')
    assert snapshot(out)['ckpt.pt'] == before['ckpt.pt']
    # a scratch run over it: the previous run stays whole, the new log is gone
    with pytest.raises(UsageError, match=r"could not write '.*log.jsonl': no space left on device; "
                                         r"the previous run in .* is kept as it was"):
        run(data_dir, out, '--max_iters=8', '--eval_interval=100')
    monkeypatch.undo()
    after = snapshot(out)
    assert after['ckpt.pt'] == before['ckpt.pt'] and sorted(after) == sorted(before)
    assert run(data_dir, out, '--init_from=resume', '--max_iters=6')['iter_num'] == 6  # resumes fine


def test_a_full_disk_at_a_checkpoint_names_it_and_keeps_the_last_one(data_dir, tmp_path, monkeypatch):
    out = tmp_path / 'out'
    run(data_dir, out, '--max_iters=4')
    before = snapshot(out)
    fill_disk(monkeypatch, configurator, r'^ckpt\.pt\.tmp', room=2000)  # torch.save then says 'unexpected pos'
    with pytest.raises(UsageError, match=r"^could not write '.*ckpt.pt': no space left on device; .*ckpt.pt is kept "
                                         r"as it was; free some space and resume with --init_from=resume$"):
        run(data_dir, out, '--init_from=resume', '--max_iters=8')
    assert snapshot(out)['ckpt.pt'] == before['ckpt.pt']
    assert sorted(os.listdir(out)) == ['ckpt.pt', 'config.json', 'log.jsonl']  # no temp file left
    after_resume = snapshot(out)  # (its log holds the rows past the checkpoint; a resume drops them)
    # the first checkpoint of a scratch run over it: nothing moves to prev/
    with pytest.raises(UsageError, match=r"^could not write '.*ckpt.pt': no space left on device; the previous "
                                         r"run in .* is kept as it was; free some space and rerun$"):
        run(data_dir, out, '--max_iters=8')
    assert snapshot(out) == after_resume


def test_disk_full_sees_through_torch_save():
    import torch
    f = FullDisk(open(os.devnull, 'wb'), 1000)
    with pytest.raises(RuntimeError) as e:
        torch.save({'w': torch.zeros(10000)}, f)
    assert configurator.disk_full(e.value) and not configurator.disk_full(RuntimeError('unexpected pos 1 vs 2'))


# -----------------------------------------------------------------------------
# temp files of killed runs

def test_stale_temp_files_of_killed_runs_are_removed(data_dir, tmp_path):
    out = tmp_path / 'out'
    out.mkdir()
    dead, alive = dead_pid(), os.getppid()
    stale = [f'ckpt.pt.tmp{dead}', f'log.jsonl.tmp{dead}', f'config.json.tmp{dead}',
             f'log.jsonl.tmp{dead}.tmp{dead}']
    kept = [f'ckpt.pt.tmp{alive}', f'notes.txt.tmp{dead}', 'ckpt.pt.tmpx']  # a live run's; not train.py's
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
    with pytest.raises(UsageError, match=rf"log.jsonl line {n} is {what} \(a JSON object with an integer 'iter'\): "
                                         rf".*; delete that line, or the file, and rerun$") as e:
        run(data_dir, out, '--init_from=resume', '--max_iters=4')
    assert '\n' not in str(e.value) and snapshot(out) == before


def test_read_jsonl_skips_only_a_last_line_cut_short(tmp_path):
    path = tmp_path / 'log.jsonl'
    path.write_bytes(b'{"iter": 0, "loss": 3.0}\n\n{"iter": 1, "loss": 2.9}\n{"iter": 2, "lo')
    assert [r['iter'] for r in checkpoint.read_jsonl(str(path))] == [0, 1]
    path.write_bytes(b'{"iter": 0}\n\x00\x00\x00')  # a crash can leave zeros at the end
    assert checkpoint.read_jsonl(str(path)) == [{'iter': 0}]


@pytest.mark.parametrize('value', ['nan', 'inf'])
def test_sample_temperature_must_be_finite(value):
    with pytest.raises(UsageError, match='temperature must be a finite number') as e:
        sample.parse_args([f'--temperature={value}'])
    assert '\n' not in str(e.value)


def test_non_finite_advice_leaves_out_what_is_already_set():
    def advice(*flags):
        return runtime.non_finite_advice(parse_config(runtime.TrainConfig, ['--device=cpu', *flags]))
    assert advice('--grad_clip=1.0', '--dtype=float32') == 'a lower learning_rate'
    assert advice('--grad_clip=0', '--dtype=float32') == 'a lower learning_rate or grad_clip=1.0'
    assert advice('--grad_clip=0.5', '--dtype=float16', '--warmup_iters=0') == \
        'a lower learning_rate, warmup_iters > 0 or dtype=bfloat16'


@pytest.mark.parametrize('value', ['0', '-1', 'nan', 'inf'])
def test_ddp_timeout_must_be_positive(value):
    with pytest.raises(UsageError, match='ddp_timeout_s must be a positive number of seconds'):
        parse_config(runtime.TrainConfig, [f'--ddp_timeout_s={value}'])


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
