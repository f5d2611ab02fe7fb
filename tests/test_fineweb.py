"""
fineweb.py: FineWeb's GPT-2 shards downloaded (from a local stand-in for the hub: no network), each checked
before it counts, kept beside the dataset for a rerun, and swapped in whole as prepare.py's datasets are.
"""
import sys
import time

import numpy as np
import pytest

import configurator
import dataset
import fineweb as F
import prepare
import train


# -----------------------------------------------------------------------------
# downloaded shards, checked, resumed, committed by meta.json (a local endpoint: no network)

def test_fineweb_downloads_checks_and_commits_shards(fake_hub, tmp_path, capsys):
    hub, files = fake_hub
    out = tmp_path / 'fw'
    meta = F.main(['--train_shards=2', f'--out_dir={out}'])
    assert meta['shards'] == {'val': ['fineweb_val_000000.bin'],
                              'train': ['fineweb_train_000001.bin', 'fineweb_train_000002.bin']}
    for name in ('fineweb_val_000000.bin', 'fineweb_train_000001.bin', 'fineweb_train_000002.bin'):
        assert (out / name).read_bytes() == files[name]
    assert not (out / 'fineweb_train_000003.bin').exists()
    on_disk = dataset.read_meta(str(out))
    assert on_disk['tokens'] == {'val': 3000, 'train': 20001 + 20002} and on_disk['vocab_size'] == 50257
    assert on_disk['tokenizer'] == {'kind': 'tiktoken', 'name': 'gpt2'} and 'bits_per_byte' in on_disk
    assert train.bits_per_byte(on_disk, 'val', 2.0) is None  # the byte count is unknown: no bits per byte
    assert [len(tokens) for _, tokens in dataset.open_dataset(str(out))[1]['train']] == [20001, 20002]
    hub.ranges.clear()
    F.main(['--train_shards=3', f'--out_dir={out}'])  # one more: the others stay
    assert [name for name, _ in hub.ranges] == ['fineweb_train_000003.bin']
    assert 'train 3 shard' not in capsys.readouterr().err


def test_fineweb_resumes_a_cut_download_where_it_stopped(fake_hub, tmp_path):
    """A connection that dies part-way through a shard: huggingface_hub asks again from the byte it
    had (a Range request), and the shard is whole and counted."""
    hub, files = fake_hub
    out = tmp_path / 'fw'
    hub.cut['fineweb_train_000001.bin'] = 3 * 4096 + 100  # the connection dies after 3 whole chunks
    F.main(['--train_shards=1', f'--out_dir={out}'])
    asked = [r for name, r in hub.ranges if name == 'fineweb_train_000001.bin']
    assert asked[0] is None and asked[1] is not None and partial_size(asked[1]) >= 3 * 4096, asked
    assert (out / 'fineweb_train_000001.bin').read_bytes() == files['fineweb_train_000001.bin']
    assert dataset.read_meta(str(out))['tokens']['train'] == 20001


def partial_size(range_header):
    """The offset a resumed request asked from (the bytes kept of the cut download)."""
    return int(range_header.split('=')[1].rstrip('-'))


@pytest.mark.parametrize('bad', ['count', 'magic', 'empty', 'ids'])
def test_fineweb_refuses_a_corrupt_shard_in_one_line(fake_hub, tmp_path, bad):
    """A shard whose header lies, that is not a shard, that holds no tokens, or holds ids beyond GPT-2's
    vocabulary: one line, removed, and a rerun fetches it again once fixed upstream."""
    from conftest import llmc_shard
    hub, files = fake_hub
    good = files['fineweb_train_000001.bin']
    hub.files['fineweb_train_000001.bin'] = {
        'count': llmc_shard(np.zeros(100), ntok=101), 'magic': b'\x00' * 4 + good[4:], 'empty': llmc_shard([]),
        'ids': llmc_shard([5, 60000, 7])}[bad]
    out = tmp_path / 'fw'
    expect = {'count': "the header says 101 tokens", 'magic': "not a token shard", 'empty': "it holds no tokens",
              'ids': "it holds token id 60000, beyond GPT-2's 50,257"}[bad]
    with pytest.raises(configurator.UsageError, match=rf"fineweb_train_000001.bin from .* is not a whole shard of GPT-2 tokens \({expect}.*\); "
                                           r"it is removed: rerun to fetch it again") as e:
        F.main(['--train_shards=1', f'--out_dir={out}'])
    assert '\n' not in str(e.value)
    assert not out.exists()  # a first prepare that failed: nothing of it
    hub.files['fineweb_train_000001.bin'] = good  # fixed upstream: the rerun fetches it
    assert F.main(['--train_shards=1', f'--out_dir={out}'])['tokens']['train'] == 20001


def test_fineweb_without_the_network_or_its_library_is_one_line(tmp_path, monkeypatch):
    pytest.importorskip('huggingface_hub')
    monkeypatch.setenv('HF_ENDPOINT', 'http://127.0.0.1:9')  # nothing listens there
    monkeypatch.setattr(time, 'sleep', lambda s: None)  # huggingface_hub's 5 retries, without their 23 s
    with pytest.raises(configurator.UsageError, match=r"could not download fineweb_val_000000.bin .*rerun to go on"):
        F.main([f'--out_dir={tmp_path / "fw"}'])
    monkeypatch.setitem(sys.modules, 'huggingface_hub', None)
    with pytest.raises(configurator.UsageError, match="downloads through huggingface_hub, which is not installed: pip install"):
        F.main([f'--out_dir={tmp_path / "fw"}'])
    with pytest.raises(configurator.UsageError, match=r"unknown dataset 'fineweb'.*\(FineWeb's GPT-2 shards: python fineweb.py\)"):
        prepare.main(['--dataset=fineweb'])


def test_fineweb_a_shard_the_hub_does_not_have_is_said_so_not_a_connection_to_retry(fake_hub, tmp_path):
    hub, files = fake_hub
    del hub.files['fineweb_train_000002.bin']  # a 404 for it
    with pytest.raises(configurator.UsageError, match=r"could not download fineweb_train_000002.bin .*; it is not "
                                                      r"there \(404\): check HF_ENDPOINT, or the repository$") as e:
        F.main(['--train_shards=2', f'--out_dir={tmp_path / "fw"}'])
    assert 'rerun to go on' not in str(e.value)
