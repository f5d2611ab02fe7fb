"""Tests for prepare.py: tokenizers, shards and the corpus pipeline.
Every test builds its own tiny corpus in tmp_path; nothing here touches the network."""
import base64
import errno
import hashlib
import io
import json
import math
import os
import re
import shutil
import subprocess
import sys
import urllib.error
import urllib.request

import numpy as np
import pytest

import prepare as P
from conftest import write_shard
import configurator
import prepare
import train
import dataset

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repository
TINY_TRAIN = ['--device=cpu', '--dtype=float32', '--n_layer=1', '--n_head=2', '--n_embd=16', '--block_size=8',
              '--batch_size=2', '--gradient_accumulation_steps=1', '--eval_iters=1', '--max_iters=2',
              '--warmup_iters=1', '--lr_decay_iters=4']
TEXT = ("First Citizen:\nBefore we proceed any further, hear me speak.\n\n"
        "All:\tSpeak, speak!\n  héllo wörld ✓ 🐍 42\r\n")


def run_cli(args, cwd):
    return subprocess.run([sys.executable, os.path.join(HERE, 'prepare.py'), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def write(path, content):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'wb') as f:
        f.write(content.encode() if isinstance(content, str) else content)
    return str(path)


def read_split(out_dir, split):
    return np.concatenate([tokens for _, tokens in dataset.open_dataset(str(out_dir))[1][split]])


def tiny_ranks_file(path, more=(), drop=None):
    """A .tiktoken file: all 256 single bytes (rank = byte value) but `drop`, and a few merges."""
    merges = [b'th', b'the', b' t', b' the', b'in', b'ing', b'e ', b'  ', *more]
    ranks = [bytes([b]) for b in range(256) if bytes([b]) != drop] + merges
    return write(path, b''.join(base64.b64encode(t) + b' %d\n' % r for r, t in enumerate(ranks)))


# -----------------------------------------------------------------------------
# tokenizers

def test_char_and_byte_round_trip():
    char = dataset.CharTokenizer(''.join(sorted(set(TEXT))))
    ids = char.encode(TEXT)
    assert char.decode(ids) == TEXT
    assert sorted(set(ids)) == list(range(char.vocab_size)) and char.vocab_size == len(set(TEXT))
    assert char.encode('\t\n') == [0, 1]  # sorted by code point: tab and newline come first
    byte = dataset.ByteTokenizer()
    assert byte.decode(byte.encode(TEXT)) == TEXT and byte.vocab_size == 256
    assert len(byte.encode('🐍')) == 4
    for tok in (char, byte):  # rebuilt from what meta.json stores
        again = dataset.load_tokenizer(json.loads(json.dumps({'tokenizer': tok.meta(), 'vocab_size': tok.vocab_size})))
        assert again.encode(TEXT) == tok.encode(TEXT) and again.vocab_size == tok.vocab_size
    with pytest.raises(configurator.UsageError, match='not in this'):
        char.encode('Z')
    assert char.decode([1, 10_000]) == '\n\ufffd'  # ids beyond the vocabulary (a padded model) decode visibly


def test_tiktoken_from_local_ranks_file(tmp_path):
    tok = dataset.tiktoken_from_file(tiny_ranks_file(tmp_path / 'tiny.tiktoken'))
    assert tok.name == 'tiny' and tok.eot_token == 264 and tok.vocab_size == 265  # <|endoftext|> after the last rank
    assert tok.encode('the') == [257] and tok.encode(' the') == [259] and tok.encode('thing') == [256, 261]
    assert tok.decode(tok.encode(TEXT)) == TEXT
    assert tok.encode('a<|endoftext|>') == [97, 264]  # in a prompt, the special token is allowed
    assert list(tok.encode_array('<|endoftext|>')) == tok.enc.encode_ordinary('<|endoftext|>')  # in a corpus, not
    again = dataset.load_tokenizer(json.loads(json.dumps({'tokenizer': tok.meta(), 'vocab_size': tok.vocab_size})))
    assert again.encode(TEXT) == tok.encode(TEXT) and again.eot_token == 264
    with pytest.raises(configurator.UsageError, match='is not a byte-level BPE ranks file tiktoken can use'):
        dataset.tiktoken_from_file(write(tmp_path / 'bad.tiktoken', 'hello world\n'))
    with pytest.raises(configurator.UsageError, match='not found'):
        dataset.tiktoken_from_file(str(tmp_path / 'missing.tiktoken'))


def test_prepare_with_local_ranks_file(tmp_path):
    ranks = tiny_ranks_file(tmp_path / 'tiny.tiktoken')
    docs = [write(tmp_path / f'doc{i}.txt', f"the thing {i} is in the {'ring ' * i}\n" * 3) for i in range(20)]
    out = tmp_path / 'out'
    P.main([f'--input={tmp_path}/doc*.txt', f'--tokenizer={ranks}', f'--out_dir={out}', '--split=last'])
    meta = dataset.read_meta(str(out))
    assert meta['tokenizer']['kind'] == 'tiktoken' and meta['eot_token'] == 264 and meta['split']['cut'] == 'document'
    tok = dataset.load_tokenizer(meta)
    train, val = read_split(out, 'train'), read_split(out, 'val')
    assert [len(train), len(val)] == [meta['tokens']['train'], meta['tokens']['val']]
    # every document starts with <|endoftext|> (llm.c's convention), so the shards split back into the files
    texts = tok.decode(np.concatenate([train, val]).tolist()).split('<|endoftext|>')
    assert texts[0] == '' and texts[1:] == [open(d).read() for d in sorted(docs)]


def test_text_is_encoded_in_bounded_pieces_cut_after_newlines_and_decodes_exactly(tmp_path, monkeypatch):
    """Text goes to the encoding threads in pieces of about PIECE_BYTES cut after a newline (a line longer
    than that where it ends): at most two blocks each, whatever the text (CJK, one long line, blank lines);
    BPE ids may differ from the whole text's at a cut, but always decode to exactly the text."""
    monkeypatch.setattr(prepare, 'PIECE_BYTES', 64)
    monkeypatch.setattr(P, 'MIN_SHARD_TOKENS', 1)
    rng = np.random.default_rng(0)
    words = ['the', 'thing', 'in', '!', '42', 'héllo', '🐍', ' ', '  ', '\n', '\n\n', '\t', 'x\n ', "it's", '天地玄黄。']
    for text in [''.join(rng.choice(words) for _ in range(3000)), '天地玄黄，宇宙洪荒。\n' * 500,
                 '{"k":[12,"x"]}' * 500 + '\n' + ' the end\n' * 100]:
        doc = prepare.Doc('t', len(text.encode()), data=text.encode())
        pieces = [piece for piece, _ in prepare.texts(doc, 0, doc.size, 'strict')]
        assert ''.join(pieces) == text and max(len(p.encode()) for p in pieces) <= 2 * 64
        assert all(p.endswith('\n') or '\n' not in p for p in pieces[:-1])  # cut after the last newline
        out = tmp_path / f'out{len(text)}'
        ranks = tiny_ranks_file(tmp_path / 'tiny.tiktoken')
        P.main([f"--input={write(tmp_path / 'one.txt', text)}", f'--tokenizer={ranks}', f'--out_dir={out}',
                '--shard_tokens=500'])
        tok = dataset.load_tokenizer(dataset.read_meta(str(out)))
        ids = np.concatenate([read_split(out, s) for s in ('train', 'val')])
        assert tok.decode(ids.tolist()) == '<|endoftext|>' + text


# -----------------------------------------------------------------------------
# shards

@pytest.mark.parametrize('top, dtype, version', [(500, np.uint16, 1), (70_000, np.uint32, 2)])
def test_shard_header_and_length(tmp_path, top, dtype, version):
    tokens = np.arange(1000) % top + (top - 500)
    path = str(tmp_path / 'train_000000.bin')
    write_shard(path, tokens)
    header = np.fromfile(path, dtype=np.int32, count=256)
    assert list(header[:3]) == [20240520, version, 1000] and not header[3:].any()
    assert os.path.getsize(path) == 256 * 4 + 1000 * np.dtype(dtype).itemsize
    got = dataset.load_shard(path)
    assert got.dtype == dtype and np.array_equal(got, tokens)
    assert os.listdir(tmp_path) == ['train_000000.bin']  # no temporary file left behind


def test_reader_rejects_bad_shards(tmp_path):
    path = str(tmp_path / 'train_000000.bin')
    write_shard(path, np.arange(100))
    good = open(path, 'rb').read()
    header = np.frombuffer(good[:1024], dtype=np.int32).copy()
    cases = {'truncated': good[:-1], 'too short': good[:100], 'longer': good + b'\0\0',
             'wrong magic': np.array([1234, *header[1:]], np.int32).tobytes() + good[1024:],
             'wrong version': np.array([header[0], 7, *header[2:]], np.int32).tobytes() + good[1024:]}
    for name, data in cases.items():
        write(path, data)
        with pytest.raises(dataset.ShardError) as e:
            dataset.load_shard(path)
        assert '\n' not in str(e.value) and isinstance(e.value, configurator.UsageError), name
    with pytest.raises(dataset.ShardError, match='not found'):
        dataset.load_shard(str(tmp_path / 'missing.bin'))


def test_find_shards_and_read_meta(tmp_path):
    assert dataset.read_meta(str(tmp_path)) is None  # raw llm.c shards have no meta.json
    with pytest.raises(configurator.UsageError, match='no train_'):
        dataset.find_shards(str(tmp_path), 'train', None)
    for i in (1, 0, 10):  # raw llm.c shards, no meta.json
        write_shard(str(tmp_path / f'fineweb_train_{i:06d}.bin'), [1, 2])
    assert [os.path.basename(p) for p in dataset.find_shards(str(tmp_path), 'train', None)] == \
        ['fineweb_train_000000.bin', 'fineweb_train_000001.bin', 'fineweb_train_000010.bin']
    assert dataset.read_meta(str(tmp_path)) is None


def test_only_the_shards_meta_lists_are_read(tmp_path):
    for name in ('train_g1_000000.bin', 'train_g2_000000.bin', 'train_g2_000001.bin', 'val_g2_000000.bin'):
        write_shard(str(tmp_path / name), [1, 2])
    meta = {'vocab_size': 3, 'tokenizer': {'kind': 'char', 'chars': 'abc'},
            'shards': {'train': ['train_g2_000000.bin', 'train_g2_000001.bin'], 'val': ['val_g2_000000.bin']}}
    write(tmp_path / 'meta.json', json.dumps(meta))
    assert [os.path.basename(p) for p, _ in dataset.open_dataset(str(tmp_path))[1]['train']] == meta['shards']['train']
    write(tmp_path / 'meta.json', json.dumps({**meta, 'shards': {'train': ['gone.bin'], 'val': []}}))
    with pytest.raises(configurator.UsageError, match=r"shard '.*gone.bin' not found; rerun prepare.py"):
        dataset.open_dataset(str(tmp_path))


@pytest.mark.parametrize('meta', [
    [1, 2], {'tokenizer': {'kind': 'byte'}}, {'vocab_size': '256'}, {'vocab_size': 0}, {'vocab_size': True},
    {'vocab_size': 2.5}, {'vocab_size': 10, 'eot_token': 10}, {'vocab_size': 10, 'shards': ['train_000000.bin']},
    {'vocab_size': 10, 'shards': {'train': ['../x.bin'], 'val': []}}, {'vocab_size': 10, 'max_id': {'train': 12}},
    {'vocab_size': 10, 'max_id': []}, {'vocab_size': 10, 'shards': {'train': [3], 'val': []}},
])
def test_wrong_meta_is_one_line(tmp_path, meta):
    """Any field a reader uses that is not as prepare.py writes it (a vocab_size that is not a positive int, an
    eot_token outside it, a shard list that is not file names in the folder, an id beyond the vocabulary): one
    line naming the file and the fields, never a traceback; the same meta.json made right reads."""
    write(tmp_path / 'meta.json', json.dumps(meta))
    with pytest.raises(configurator.UsageError, match=r"meta\.json is not as prepare\.py writes it \(its vocab_size, "
                                                      r"eot_token, shard list or max_id is malformed\); rerun prepare\.py$"):
        dataset.read_meta(str(tmp_path))
    write(tmp_path / 'meta.json', json.dumps({'vocab_size': 10, 'eot_token': 9, 'max_id': {'train': 9},
                                              'shards': {'train': ['train_000000.bin'], 'val': []}}))
    assert dataset.read_meta(str(tmp_path))['vocab_size'] == 10


def test_meta_records_the_largest_id(tmp_path):
    out = str(tmp_path / 'out')
    P.main([f"--input={write(tmp_path / 'a.txt', TEXT * 10)}", f'--out_dir={out}', '--tokenizer=byte'])
    meta = dataset.read_meta(out)
    assert meta['max_id'] == {s: int(read_split(out, s).max()) for s in ('train', 'val')}
    meta['vocab_size'] = meta['max_id']['train']  # as if the shards held ids the vocabulary lacks
    write(os.path.join(out, 'meta.json'), json.dumps(meta))
    with pytest.raises(configurator.UsageError, match='max_id is malformed'):
        dataset.open_dataset(out)


# -----------------------------------------------------------------------------
# the command

def test_default_corpus_with_no_arguments(tmp_path):
    r = run_cli([], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = tmp_path / 'data' / 'pydoc_char'  # train.py's default data_dir
    meta = dataset.read_meta(str(out))
    assert meta['source']['name'] == 'pydoc' and meta['tokenizer']['kind'] == 'char' and meta['eot_token'] is None
    assert meta['command'].endswith('prepare.py') and meta['split']['cut'] == 'document'
    assert sorted(os.listdir(out)) == ['meta.json', 'train_000000.bin', 'val_000000.bin']
    from pydoc_data.topics import topics
    tok = dataset.load_tokenizer(meta)
    train, val = (tok.decode(read_split(out, s).tolist()) for s in ('train', 'val'))
    assert train + '\n' + val == '\n'.join(topics[k] for k in sorted(topics))  # documents joined by '\n'
    assert 0.08 < len(val) / (len(train) + len(val)) < 0.12


@pytest.mark.parametrize('case', ['missing path', 'empty corpus', 'invalid utf-8', 'invalid utf-8 late',
                                  'unknown key', 'wrong type', 'too small', 'tiny shards', 'bad ranks'])
def test_bad_inputs_exit_with_one_line_and_write_nothing(tmp_path, case):
    out = tmp_path / 'out'
    bad = write(tmp_path / 'bad.txt', b'abc\xffddd')
    late = write(tmp_path / 'late.txt', b'ab cd\n' * 500_000 + b'\xfe')
    args, expect = {
        'missing path': (['--input=nope.txt'], 'no such file'),
        'empty corpus': ([f"--input={write(tmp_path / 'empty.txt', '')}"], 'empty'),
        'invalid utf-8': ([f'--input={bad}'], 'byte 3;'),
        # found after shards were already being written: they must be removed again
        'invalid utf-8 late': ([f'--input={late}', '--tokenizer=byte', '--shard_tokens=100000'], 'byte 3000000;'),
        'unknown key': (['--tokenzier=byte'], 'did you mean tokenizer'),
        'wrong type': (['--val_fraction=lots'], 'not a valid float'),
        'too small': ([f"--input={write(tmp_path / 'small.txt', 'hello')}", '--val_fraction=0.01'], 'too small'),
        'tiny shards': (['--shard_tokens=1'], 'shard_tokens=1 must be between 65,536'),  # not 400k files
        'bad ranks': ([f"--input={write(tmp_path / 'c.txt', TEXT * 20)}",
                       f"--tokenizer={tiny_ranks_file(tmp_path / 'r.tiktoken', drop=b'A')}"], "every one of the 256 bytes"),
    }[case]
    r = run_cli(args + [f'--out_dir={out}'], cwd=tmp_path)
    assert r.returncode == 2 and r.stdout == ''
    assert r.stderr.startswith('error: ') and r.stderr.count('\n') == 1 and expect in r.stderr, r.stderr
    assert not out.exists() and not (tmp_path / 'data').exists()


@pytest.mark.parametrize('out_dir', ['f.txt', 'f.txt/sub'])
def test_out_dir_that_cannot_be_created(tmp_path, out_dir):
    write(tmp_path / 'f.txt', 'a file where the output directory should go')
    r = run_cli([f"--input={write(tmp_path / 'c.txt', TEXT * 10)}", f'--out_dir={out_dir}'], cwd=tmp_path)
    assert r.returncode == 2 and r.stdout == ''
    assert r.stderr.startswith('error: ') and r.stderr.count('\n') == 1 and 'f.txt' in r.stderr, r.stderr


def test_rerun_replaces_output_cleanly(tmp_path, monkeypatch):
    monkeypatch.setattr(P, 'MIN_SHARD_TOKENS', 1)
    corpus = write(tmp_path / 'c.txt', TEXT * 40)
    out = str(tmp_path / 'out')
    P.main([f'--input={corpus}', f'--out_dir={out}', '--shard_tokens=300', '--tokenizer=byte'])
    assert len(dataset.read_meta(out)['shards']['train']) > 5
    P.main([f'--input={corpus}', f'--out_dir={out}', '--shard_tokens=100000'])
    meta = dataset.read_meta(out)
    assert sorted(os.listdir(out)) == ['meta.json', 'train_000000.bin', 'val_000000.bin']
    assert sorted(os.listdir(tmp_path)) == ['c.txt', 'out']  # nothing left beside it
    assert meta['tokenizer']['kind'] == 'char'
    assert meta['shards'] == {'train': ['train_000000.bin'], 'val': ['val_000000.bin']}
    assert meta['tokens']['train'] + meta['tokens']['val'] == len(TEXT * 40)


@pytest.mark.parametrize('end', ['', '\n'])
def test_one_line_corpus(tmp_path, end):
    """One document whose only newline, if any, ends it: val is cut at a character boundary, not after that
    newline (which would leave val nothing), and nothing separates documents."""
    out = str(tmp_path / 'out')
    P.main([f"--input={write(tmp_path / 'a.txt', 'é' * 300 + end)}", f'--out_dir={out}'])
    meta = dataset.read_meta(out)
    assert meta['tokenizer']['chars'] == ''.join(sorted('é' + end)) and meta['split']['cut'] == 'character'
    assert meta['tokens']['train'] + meta['tokens']['val'] == 300 + len(end) and 29 <= meta['tokens']['val'] <= 31


@pytest.mark.parametrize('after', ['read_meta', 'load_shard'])
def test_a_reader_never_pairs_one_datasets_meta_with_anothers_shards(tmp_path, monkeypatch, after):
    """A prepare.py that swaps a new dataset in while a reader reads (after meta.json, or after its first shard):
    the reader reads inside the folder it opened, so it gets that dataset whole or one line saying the folder was
    replaced while it was read, never one dataset's meta.json with the other's shards; what it got stays readable
    (and the same) after the swap removed the old folder."""
    old_text, new_text = TEXT * 30, TEXT[::-1] * 30
    out = str(tmp_path / 'out')
    P.main([f"--input={write(tmp_path / 'a.txt', old_text)}", f'--out_dir={out}', '--tokenizer=byte'])
    real, swaps = getattr(dataset, after), []

    def swap_after(*args, **kwargs):
        got = real(*args, **kwargs)
        if not swaps:  # the first call only: a prepare.py replaces the dataset in this instant
            swaps.append(P.main([f"--input={write(tmp_path / 'b.txt', new_text)}", f'--out_dir={out}',
                                 '--tokenizer=byte', '--split=last']))
        return got
    monkeypatch.setattr(dataset, after, swap_after)
    with pytest.raises(configurator.UsageError, match=rf"^{re.escape(out)} was replaced while it was read \(a "
                                                      r"prepare.py swapped a new dataset in\): rerun$"):
        dataset.open_dataset(out)
    assert swaps
    monkeypatch.setattr(dataset, after, real)
    meta, shards = dataset.open_dataset(out)  # the new one, whole
    tokens = lambda: np.concatenate([t for split in ('train', 'val') for _, t in shards[split]])  # noqa: E731
    assert bytes(tokens().astype(np.uint8)).decode() == new_text and meta == dataset.read_meta(out)
    P.main([f"--input={tmp_path / 'a.txt'}", f'--out_dir={out}', '--tokenizer=byte'])  # swapped again: gone
    assert bytes(tokens().astype(np.uint8)).decode() == new_text


def test_a_folder_is_a_runs_or_a_datasets(tmp_path):
    """prepare.py into a run's folder, or train.py into a dataset's: one line, and the other's files as they were."""
    data = str(tmp_path / 'data')
    P.main([f"--input={write(tmp_path / 'a.txt', TEXT * 40)}", f'--out_dir={data}'])
    before = files(data)
    with pytest.raises(configurator.UsageError, match=rf"^{re.escape(data)} holds a dataset \(meta.json\): a folder "
                                                      r"is a run's or a dataset's; pass another --out_dir$"):
        train.main([*TINY_TRAIN, f'--data_dir={data}', f'--out_dir={data}'])
    assert files(data) == before
    run = str(tmp_path / 'run')
    train.main([*TINY_TRAIN, f'--data_dir={data}', f'--out_dir={run}'])
    runs = files(run)
    with pytest.raises(configurator.UsageError, match=rf"^{re.escape(run)} holds ckpt.pt, config.json, log.jsonl, which "
                                                      r"prepare.py \(a dataset's folder holds meta.json and the shards it "
                                                      r"lists\) did not write: move it away, or use another folder$"):
        P.main([f"--input={tmp_path / 'a.txt'}", f'--out_dir={run}'])
    assert files(run) == runs


def test_failed_run_leaves_previous_output_untouched(tmp_path, monkeypatch):
    monkeypatch.setattr(prepare, 'PIECE_BYTES', 256)
    monkeypatch.setattr(P, 'MIN_SHARD_TOKENS', 1)
    out = str(tmp_path / 'out')
    P.main([f"--input={write(tmp_path / 'a.txt', TEXT * 40)}", f'--out_dir={out}'])
    before = {n: open(os.path.join(out, n), 'rb').read() for n in os.listdir(out)}
    write(tmp_path / 'b.txt', b'word ' * 2000 + b'\xed\xb3\xbf')  # an encoded surrogate: not UTF-8
    with pytest.raises(configurator.UsageError, match='invalid UTF-8'):  # fails after writing shards of the new run
        P.main([f'--input={tmp_path}/a.txt,{tmp_path}/b.txt', f'--out_dir={out}', '--tokenizer=byte',
                '--shard_tokens=1000'])
    assert {n: open(os.path.join(out, n), 'rb').read() for n in os.listdir(out)} == before


def test_invalid_utf8_offset_across_blocks_and_replace(tmp_path, monkeypatch):
    monkeypatch.setattr(prepare, 'PIECE_BYTES', 8)
    data = ('é' * 20).encode() + b'\xc3(' + b' tail\n' * 20  # the bad sequence starts at byte 40
    path = write(tmp_path / 'x.txt', data)
    with pytest.raises(configurator.UsageError, match='at byte 40;'):
        P.main([f'--input={path}', f'--out_dir={tmp_path}/out'])
    P.main([f'--input={path}', f'--out_dir={tmp_path}/out', '--errors=replace'])
    tok = dataset.load_tokenizer(dataset.read_meta(f'{tmp_path}/out'))
    text = tok.decode(np.concatenate([read_split(f'{tmp_path}/out', s) for s in ('train', 'val')]).tolist())
    assert text == data.decode('utf-8', errors='replace')


def test_split_boundaries():
    many = [prepare.Doc(f'd{i}', 10, data=b'x' * 9 + b'\n') for i in range(50)]
    assert prepare.plan_split(many, 0.1) == (45, 0, 'document')
    lines = [prepare.Doc('one', 200, data=b'abcdefghi\n' * 20)]
    assert prepare.plan_split(lines, 0.1) == (0, 180, 'line')
    assert prepare.plan_split(lines, 0.12) == (0, 180, 'line')  # the cut moves forward to the next line
    wide = 'é' * 100  # 200 bytes and no newline: cut at a character boundary
    i, off, how = prepare.plan_split([prepare.Doc('w', 200, data=wide.encode())], 0.105)
    assert how == 'character' and off % 2 == 0 and 170 <= off <= 180
    with pytest.raises(configurator.UsageError, match='too small'):
        prepare.plan_split([prepare.Doc('tiny', 5, data=b'hello')], 0.05)


def test_shakespeare_offline_and_from_its_cache(tmp_path, monkeypatch):
    def offline(*args, **kwargs):
        raise urllib.error.URLError('no network')
    monkeypatch.setattr(urllib.request, 'urlopen', offline)
    cache = tmp_path / 'cache'
    with pytest.raises(configurator.UsageError, match=rf"offline, put a copy of .* at {re.escape(str(cache))}"):
        P.main(['--dataset=shakespeare', f'--cache_dir={cache}', f'--out_dir={tmp_path}/out'])
    assert not (tmp_path / 'out').exists()
    # a copy with Tiny Shakespeare's sha256 (here a stand-in) in the cache: the dataset is Tiny Shakespeare
    fake = ('ROMEO:\nBut soft!\n\n' * 50).encode()
    monkeypatch.setattr(prepare, 'SHAKESPEARE_SHA256', hashlib.sha256(fake).hexdigest())
    write(cache / 'tinyshakespeare.txt', fake)
    monkeypatch.chdir(tmp_path)
    P.main(['--dataset=shakespeare', f'--cache_dir={cache}'])
    assert dataset.read_meta('data/shakespeare_char')['source']['name'] == 'shakespeare'


def test_ranks_file_without_every_byte_or_with_a_rank_twice_is_one_line(tmp_path):
    """tiktoken panics (a PanicException, which is no Exception) on text with a byte the ranks lack: refused
    when the file is read, as is a file giving two tokens one rank; one line naming the file."""
    dup = write(tmp_path / 'dup.tiktoken', open(tiny_ranks_file(tmp_path / 'b.tiktoken'), 'rb').read()
                + base64.b64encode(b'xyz') + b' 300\n' + base64.b64encode(b'xy') + b' 300\n')
    for path in (tiny_ranks_file(tmp_path / 'a.tiktoken', drop=b'\n'), dup):
        with pytest.raises(configurator.UsageError, match=rf"^'{re.escape(path)}' is not a byte-level BPE ranks file "
                                                          r"tiktoken can use \(lines of 'base64-token rank', every "
                                                          r"one of the 256 bytes among them, each rank once\); pass "
                                                          r"prepare.py a good --tokenizer=FILE$"):
            dataset.tiktoken_from_file(path)


def files(folder):
    return {n: open(os.path.join(folder, n), 'rb').read() for n in sorted(os.listdir(folder))}


def dataset_in(folder):
    """What the readers see: the tokenizer and each split's tokens, or the one-line error."""
    try:
        meta = dataset.read_meta(str(folder))
        tokens = {s: read_split(folder, s).tolist() for s in ('train', 'val')}
        return meta['tokenizer']['kind'], meta['tokens'], tokens
    except configurator.UsageError as e:
        return f"error: {e}"


class FullDisk(io.FileIO):
    """A file on a disk that fills up after `room` bytes: writes raise ENOSPC, as the kernel's do."""
    room = 100

    def write(self, b):
        if self.tell() + len(b) > self.room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return super().write(b)


def fill_disk(monkeypatch, which):
    """open() of files whose name matches `which` gets a buffered FullDisk, as a real full disk would:
    the error comes back when the buffer is flushed, in close() too."""
    import builtins
    real_open = builtins.open

    def fake_open(path, mode='r', *args, **kwargs):
        if 'w' in mode and which(os.path.basename(str(path))):
            return io.BufferedWriter(FullDisk(path, 'w'))
        return real_open(path, mode, *args, **kwargs)
    monkeypatch.setattr(builtins, 'open', fake_open)


@pytest.mark.parametrize('which', ['shard', 'meta.json'])
@pytest.mark.parametrize('before', ['an old dataset', 'no folder'])
def test_full_disk_is_one_line_and_changes_nothing(tmp_path, monkeypatch, which, before):
    out = tmp_path / 'data' / 'out'
    corpus = write(tmp_path / 'c.txt', TEXT * 200)
    if before == 'an old dataset':
        P.main([f'--input={corpus}', f'--out_dir={out}', '--tokenizer=byte'])
    old = files(out) if out.exists() else None
    fill_disk(monkeypatch, (lambda n: n.endswith('.bin')) if which == 'shard' else (lambda n: 'meta.json' in n))
    with pytest.raises(configurator.UsageError) as e:
        P.main([f'--input={corpus}', f'--out_dir={out}'])
    message = str(e.value)
    assert '\n' not in message and 'no space left on device' in message.lower(), message
    assert (which == 'shard' and '.bin' in message) or 'meta.json' in message, message
    if old is None:  # the folder this run made is gone again, and its parent
        assert not (tmp_path / 'data').exists()
    else:
        assert files(out) == old


def run_killed_at(step, args):
    """prepare.main(args) in a forked child that dies (os._exit, as kill -9: no except, no finally) just
    before its step-th file operation; its exit code, 137 if it was killed."""
    import builtins
    pid = os.fork()
    if pid == 0:
        n = [0]

        def counted(fn):
            def call(*a, **kw):
                n[0] += 1
                if n[0] == step:
                    os._exit(137)
                return fn(*a, **kw)
            return call
        for name in ('replace', 'remove', 'fsync', 'rmdir', 'open'):
            setattr(os, name, counted(getattr(os, name)))
        builtins.open = counted(builtins.open)
        try:
            P.main(args)
        except BaseException:
            os._exit(1)
        os._exit(0)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


@pytest.mark.skipif(not hasattr(os, 'fork'), reason='needs fork')
def test_kill_at_every_step_leaves_the_old_or_the_new_dataset(tmp_path, monkeypatch):
    """Killed before each file operation of a rerun in turn, the folder reads as exactly the old dataset
    or exactly the new one, or (killed between the swap's two renames) a reader is told in one line that
    the next prepare.py finishes the swap; the next run then leaves only the new one."""
    monkeypatch.setattr(P, 'MIN_SHARD_TOKENS', 1)
    corpus = write(tmp_path / 'c.txt', TEXT * 20)
    old_args = [f'--input={corpus}', '--tokenizer=byte', '--shard_tokens=700']
    new_args = [f'--input={corpus}', '--shard_tokens=400', '--workers=1']
    pristine = tmp_path / 'pristine'
    P.main([*old_args, f'--out_dir={pristine}'])
    P.main([*new_args, f'--out_dir={tmp_path / "ref"}'])
    old, new = dataset_in(pristine), dataset_in(tmp_path / 'ref')
    assert old != new and len(dataset.read_meta(str(pristine))['shards']['train']) > 1
    seen = set()
    for step in range(1, 200):
        out = tmp_path / f'out{step}'
        shutil.copytree(pristine, out)
        code = run_killed_at(step, [*new_args, f'--out_dir={out}'])
        assert code in (0, 137), code
        got = dataset_in(out)
        between = (f"error: data_dir '{out}' is missing: a prepare.py is swapping in the dataset it wrote in "
                   f"{tmp_path / f'.out{step}.new'}, or was killed doing so; rerun it")
        assert got in (old, new) or got == between and dataset_in(tmp_path / f'.out{step}.new') == new, (step, got)
        seen.add('old' if got == old else 'new' if got == new else 'between')
        P.main([*new_args, f'--out_dir={out}'])  # the next run cleans up whatever the killed one left
        assert dataset_in(out) == new
        meta = dataset.read_meta(str(out))
        assert sorted(os.listdir(out)) == sorted(['meta.json', *meta['shards']['train'], *meta['shards']['val']])
        assert not [n for n in os.listdir(tmp_path) if n.startswith(f'.out{step}.')]  # nothing left beside it
        shutil.rmtree(out)
        if code == 0:
            break
    assert code == 0 and step > 10 and seen == {'old', 'new', 'between'}, (code, step, seen)


def test_fault_at_every_step_leaves_the_old_or_the_new_dataset(tmp_path, monkeypatch):
    """An OSError (a full disk) at each file operation in turn: a one-line error naming the path, and the old
    folder byte for byte, or (after the commit) the new dataset, or (within the swap) the new dataset whole
    beside it, which the next prepare.py moves in."""
    monkeypatch.setattr(P, 'MIN_SHARD_TOKENS', 1)
    corpus = write(tmp_path / 'c.txt', TEXT * 20)
    out = tmp_path / 'out'
    P.main([f'--input={corpus}', '--shard_tokens=400', f'--out_dir={tmp_path / "ref"}'])
    P.main([f'--input={corpus}', '--tokenizer=byte', '--shard_tokens=700', f'--out_dir={out}'])
    old, old_files, new = dataset_in(out), files(out), dataset_in(tmp_path / 'ref')
    new_args = [f'--input={corpus}', '--shard_tokens=400', f'--out_dir={out}']
    for step in range(1, 200):
        n = [0]

        def counted(fn):
            def call(*args, **kwargs):
                n[0] += 1
                if n[0] == step:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), args[0] if args else None)
                return fn(*args, **kwargs)
            return call
        with monkeypatch.context() as m:
            for name in ('replace', 'remove', 'unlink', 'fsync', 'rmdir'):
                m.setattr(os, name, counted(getattr(os, name)))
            m.setattr(dataset, 'DatasetWriter', type('W', (dataset.DatasetWriter,), {'close_shard': counted(dataset.DatasetWriter.close_shard)}))
            try:
                P.main(new_args)
                failed = None
            except (configurator.UsageError, OSError) as e:
                failed = str(e)
        left = tmp_path / '.out.new'
        if failed:
            assert '\n' not in failed and ('No space left on device' in failed or 'no space left' in failed), (step, failed)
            assert (files(out) == old_files or dataset_in(out) == new if out.exists() else dataset_in(left) == new), step
        else:
            assert dataset_in(out) == new
            if n[0] < step:  # no fault was injected: done
                break
        P.main(new_args)  # whatever the fault left: the next run ends with the new dataset, nothing beside it
        assert dataset_in(out) == new and sorted(os.listdir(tmp_path)) == ['c.txt', 'out', 'ref']
        P.main([f'--input={corpus}', '--tokenizer=byte', '--shard_tokens=700', f'--out_dir={out}'])
        assert dataset_in(out) == old  # back to the old dataset for the next step
        old_files = files(out)
    assert step > 5


@pytest.mark.skipif(not os.path.isdir('/proc/self'), reason='Linux /proc')
@pytest.mark.parametrize('out_dir', ['/proc/self', '/sys'])
def test_out_dir_that_cannot_be_written(tmp_path, out_dir):
    if not os.path.isdir(out_dir) or os.access(out_dir, os.W_OK) and out_dir == '/sys' and os.getuid():
        pytest.skip(f'no {out_dir}')
    r = run_cli([f"--input={write(tmp_path / 'c.txt', TEXT * 10)}", f'--out_dir={out_dir}'], cwd=tmp_path)
    assert r.returncode == 2 and r.stdout == ''
    assert r.stderr.startswith('error: ') and r.stderr.count('\n') == 1 and out_dir in r.stderr, r.stderr


# -----------------------------------------------------------------------------
# the standard-library corpus and bits per byte

def test_stdlib_corpus_is_deterministic_split_by_document_and_offline(tmp_path, monkeypatch):
    import socket

    def no_network(*args, **kwargs):
        raise AssertionError('prepare.py --dataset=stdlib used the network')
    monkeypatch.setattr(socket, 'socket', no_network)
    docs, source = prepare.stdlib_corpus()
    again, source2 = prepare.stdlib_corpus()
    assert source == source2 and [d.name for d in docs] == [d.name for d in again]  # same interpreter, same corpus
    assert source['files'] == len(docs) > 100 and source['bytes'] == sum(d.size for d in docs) > 1_000_000
    assert [d.name for d in docs] == sorted(d.name for d in docs) and all(d.name.endswith('.py') for d in docs)
    assert not any('site-packages' in d.name for d in docs) and len(source['sha256']) == 64
    assert source['python'].endswith(f"{sys.version_info.major}.{sys.version_info.minor}.{sys.version_info.micro}")
    out = tmp_path / 'stdlib'
    P.main(['--dataset=stdlib', f'--out_dir={out}'])
    meta = dataset.read_meta(str(out))
    assert meta['tokenizer']['kind'] == 'byte' and meta['split']['cut'] == 'hashed documents'
    assert {k: meta['source'][k] for k in ('files', 'bytes', 'sha256', 'python')} == \
        {k: source[k] for k in ('files', 'bytes', 'sha256', 'python')}
    # split by document: the val bytes are whole files, those first in the order of their names' sha256
    ordered, (k, off, _) = prepare.hashed_split(docs, 0.1)
    assert off == 0 and sorted(d.name for d in ordered) == sorted(d.name for d in docs)
    val = ordered[k:]
    assert {d.name for d in val}.isdisjoint(d.name for d in ordered[:k])
    assert 0.1 <= sum(d.size for d in val) / source['bytes'] < 0.2
    # '\n' between documents of a split: tokens = bytes for the byte tokenizer, so bits per byte = loss / ln 2
    assert meta['bytes']['val'] == sum(d.size for d in val) + len(val) - 1 == meta['tokens']['val']
    assert meta['tokens_per_byte'] == {'train': 1.0, 'val': 1.0}


def test_tokens_per_byte_of_a_char_corpus(tmp_path):
    text = 'héllo wörld\n' * 40  # 12 characters, 14 bytes per line
    P.main([f"--input={write(tmp_path / 'a.txt', text)}", f'--out_dir={tmp_path / "out"}', '--val_fraction=0.25'])
    meta = dataset.read_meta(str(tmp_path / 'out'))
    for split in ('train', 'val'):
        assert meta['tokens'][split] == len(read_split(tmp_path / 'out', split))
        assert meta['tokens_per_byte'][split] == pytest.approx(12 / 14)  # a line split at a line boundary
    assert train.bits_per_byte(meta, 'val', 2.0) == pytest.approx(2.0 / math.log(2) * 12 / 14)
    assert train.bits_per_byte({'vocab_size': 5}, 'val', 2.0) is None  # an older meta.json: no ratio recorded


# -----------------------------------------------------------------------------
# two runs at once, reading its own output, inputs that are not plain files

def test_a_folder_another_prepare_is_writing_is_refused_and_a_killed_holder_does_not_block(tmp_path):
    corpus = write(tmp_path / 'c.txt', TEXT * 20)
    out = tmp_path / 'out'
    P.main([f'--input={corpus}', f'--out_dir={out}'])
    before = files(out)
    holder = subprocess.Popen([sys.executable, '-c', f"import sys, time; sys.path.insert(0, {HERE!r}); import "
                               f"configurator; configurator.hold({str(out)!r}); print(1, flush=True); "
                               f"time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    holder.stdout.readline()  # another prepare.py, half-way through writing its shards into `out`
    r = run_cli([f'--input={corpus}', f'--out_dir={out}', '--tokenizer=byte'], cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.count('\n') == 1, r.stderr
    assert f"{out} is in use: another process (a train.py, prepare.py or sweep.py) is writing there; wait for it to finish" in r.stderr
    assert files(out) == before  # nothing of its own written, nothing of the other's removed
    holder.kill()  # as kill -9: the kernel drops the lock with the process
    holder.wait()
    P.main([f'--input={corpus}', f'--out_dir={out}', '--tokenizer=byte'])
    assert dataset.read_meta(str(out))['tokenizer']['kind'] == 'byte'


def test_two_prepares_at_once_leave_one_whole_dataset(tmp_path):
    corpus = write(tmp_path / 'c.txt', TEXT * 20000)  # ~1.5 MB: long enough to overlap
    out = tmp_path / 'out'
    procs = [subprocess.Popen([sys.executable, os.path.join(HERE, 'prepare.py'), f'--input={corpus}', f'--out_dir={out}',
                               f'--tokenizer={tok}'], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for tok in ('char', 'byte')]
    results = [p.communicate(timeout=120) for p in procs]
    codes = [p.returncode for p in procs]
    assert sorted(codes) in ([0, 2], [0, 0]), results
    meta = dataset.read_meta(str(out))
    assert sorted(os.listdir(out)) == sorted(['meta.json', *meta['shards']['train'], *meta['shards']['val']])
    tok = dataset.load_tokenizer(meta)
    assert tok.decode(read_split(out, 'train').tolist() + read_split(out, 'val').tolist()) == TEXT * 20000


def test_a_pipe_is_read_as_given_and_unreadable_inputs_are_one_line(tmp_path):
    """An input is read as any tool reads it: a pipe to its end (GUIDE §9: a FIFO blocks until written);
    a file that cannot be read is one line naming it."""
    r = subprocess.run([sys.executable, os.path.join(HERE, 'prepare.py'), '--input=/dev/stdin', '--split=last',
                        f'--out_dir={tmp_path / "piped"}'], input=TEXT * 20, text=True, capture_output=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    tok = dataset.load_tokenizer(dataset.read_meta(str(tmp_path / 'piped')))
    assert tok.decode(read_split(tmp_path / 'piped', 'train').tolist() + read_split(tmp_path / 'piped', 'val').tolist()) \
        == TEXT * 20
    folder = tmp_path / 'in'
    folder.mkdir()
    write(folder / 'a.txt', TEXT)
    os.symlink(folder / 'gone.txt', folder / 'b.txt')  # a dangling link
    with pytest.raises(configurator.UsageError, match=r"cannot read '.*b.txt' \(no such file or directory\)"):
        P.main([f'--input={folder}', f'--out_dir={tmp_path / "out"}'])
    os.remove(folder / 'b.txt')
    write(folder / 'c.txt', TEXT)
    os.chmod(folder / 'c.txt', 0)
    if not os.access(folder / 'c.txt', os.R_OK):  # (root reads anything)
        with pytest.raises(configurator.UsageError, match=r"cannot read '.*c.txt' \(permission denied\)"):
            P.main([f'--input={folder}', f'--out_dir={tmp_path / "out"}'])
    assert not os.path.exists(tmp_path / 'out')


def test_a_folder_of_files_is_split_by_hashed_document_unless_asked_otherwise(tmp_path):
    """Seven packages of five files each: the default val takes whole files picked by a hash of their
    paths, from several packages (the path-order tail would be all of the last package); --split=last
    keeps the old tail, and meta.json records which."""
    for p in range(7):
        for f in range(5):
            write(tmp_path / 'src' / f'pkg{p}' / f'mod{f}.py', f"# package {p} module {f}\n" + f"x{p} = {f}\n" * 40)
    P.main([f'--input={tmp_path / "src"}', f'--out_dir={tmp_path / "h"}'])
    meta = dataset.read_meta(str(tmp_path / 'h'))
    assert meta['split'] == {'val_fraction': 0.1, 'cut': 'hashed documents'}
    tok = dataset.load_tokenizer(meta)
    val = tok.decode(read_split(tmp_path / 'h', 'val').tolist())
    packages = set(re.findall(r'# package (\d)', val))
    assert len(packages) >= 2 and 3 <= val.count('# package') <= 5  # whole files, from several packages
    train = tok.decode(read_split(tmp_path / 'h', 'train').tolist())
    assert train.count('# package') + val.count('# package') == 35  # every file once
    P.main([f'--input={tmp_path / "src"}', f'--out_dir={tmp_path / "l"}', '--split=last'])
    last = dataset.read_meta(str(tmp_path / 'l'))
    tail = dataset.load_tokenizer(last).decode(read_split(tmp_path / 'l', 'val').tolist())
    assert last['split']['cut'] != 'hashed documents' and set(re.findall(r'# package (\d)', tail)) == {'6'}
    with pytest.raises(configurator.UsageError, match='--split=hashed picks whole files for val, and this corpus is one'):
        P.main([f'--input={tmp_path / "src" / "pkg0" / "mod0.py"}', f'--out_dir={tmp_path / "o"}', '--split=hashed'])


@pytest.mark.parametrize('sizes', [(200_000, 800), (800, 200_000), (50_000, 40_000, 900), (3000,) * 2])
def test_a_folder_split_holds_val_fraction_whatever_its_files_sizes(tmp_path, capsys, sizes):
    """Files of very unequal sizes cannot make val_fraction of whole files (one large file would be 99% or
    a small one 0.4%, by their names alone): val is then the last val_fraction of the bytes, said in a
    line; either way val holds val_fraction of the bytes within the stated tolerance."""
    for i, n in enumerate(sizes):
        write(tmp_path / 'src' / f'f{i}.py', ('x = 1\n' * (n // 6 + 1))[:n])
    P.main([f'--input={tmp_path / "src"}', f'--out_dir={tmp_path / "d"}', '--val_fraction=0.1'])
    val, train = (len(read_split(tmp_path / 'd', s)) for s in ('val', 'train'))
    assert abs(val / (val + train) - 0.1) <= prepare.SPLIT_TOLERANCE * 0.1 + 1e-3
    cut = dataset.read_meta(str(tmp_path / 'd'))['split']['cut']
    assert (cut == 'hashed documents') == ('cannot make val_fraction' not in capsys.readouterr().err)


# -----------------------------------------------------------------------------
# only what is ours is replaced; a swap in progress holds the name

@pytest.mark.parametrize('case', ['a git checkout', 'a .gitignore in the dataset', 'raw shards'])
def test_a_folder_is_replaced_only_if_everything_in_it_is_a_dataset_prepare_wrote(tmp_path, case):
    """Hidden names count: a folder holding anything but meta.json and the shards it lists (a checkout's .git/
    and .env, a .gitignore beside a dataset, llm.c's raw shards with no meta.json) is refused in one line naming
    it, and every file stays as it was."""
    out = tmp_path / 'out'
    corpus = write(tmp_path / 'c.txt', TEXT * 20)
    if case == 'a git checkout':
        subprocess.run(['git', 'init', '-q', str(out)], check=True)
        write(out / '.env', 'SECRET=1')
        named = r'\.env, \.git'
    elif case == 'a .gitignore in the dataset':
        P.main([f'--input={corpus}', f'--out_dir={out}'])
        write(out / '.gitignore', '*.bin\n')
        named = r'\.gitignore'
    else:
        out.mkdir()
        write_shard(str(out / 'train_000000.bin'), [1, 2, 3])
        named = 'train_000000.bin'
    tree = lambda: {os.path.join(r, n): open(os.path.join(r, n), 'rb').read()  # noqa: E731
                    for r, _, names in os.walk(out) for n in names}
    before = tree()
    r = run_cli([f'--input={corpus}', f'--out_dir={out}', '--tokenizer=byte'], cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.count('\n') == 1, r.stderr
    assert re.fullmatch(rf"error: {re.escape(str(out))} holds {named}, which prepare.py \(a dataset's folder holds "
                        r"meta.json and the shards it lists\) did not write: move it away, or use another folder\n",
                        r.stderr), r.stderr
    assert tree() == before and sorted(os.listdir(tmp_path)) == ['c.txt', 'out']


SLOW_SWAP = """
import os, sys, time
sys.path.insert(0, {here!r})
import prepare
from configurator import run_main
replace = os.replace
def slow(src, dst):
    replace(src, dst)
    if str(dst).endswith('.new.old'):  # between the swap's two renames: the name is empty for a while
        print('swapping', flush=True)
        time.sleep(3)
os.replace = slow
run_main(prepare.main)
"""


def test_a_second_prepare_during_a_swap_is_refused_and_the_first_ends_whole(tmp_path):
    """While the first prepare.py is between its swap's two renames (the name names nothing for an instant,
    here three seconds), a second one on the same folder is refused: it would make the name anew and be
    overwritten. The first ends with its dataset whole and nothing beside it."""
    corpus, out = write(tmp_path / 'c.txt', TEXT * 20), tmp_path / 'out'
    P.main([f'--input={corpus}', f'--out_dir={out}'])
    script = tmp_path / 'slow.py'
    script.write_text(SLOW_SWAP.format(here=HERE))
    first = subprocess.Popen([sys.executable, str(script), f'--input={corpus}', f'--out_dir={out}', '--tokenizer=byte'],
                             cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert first.stdout.readline() == 'swapping\n' and not out.exists()
    second = run_cli([f'--input={corpus}', f'--out_dir={out}'], cwd=tmp_path)
    assert second.returncode == 2 and f"{out} is in use: another process" in second.stderr, second.stderr
    _, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    meta = dataset.read_meta(str(out))
    assert meta['tokenizer']['kind'] == 'byte' and sorted(os.listdir(tmp_path)) == ['c.txt', 'out', 'slow.py']
    assert sorted(os.listdir(out)) == sorted(['meta.json', *meta['shards']['train'], *meta['shards']['val']])


def test_a_folder_walk_reads_regular_files_only_and_never_the_dataset_it_writes(tmp_path, capsys):
    """A FIFO or socket met while walking an --input folder is skipped and said (as grep -r does: it would
    block), and a dataset's folder there, the one this command writes included, is never read as text: the
    same command twice gives the same dataset."""
    texts = tmp_path / 'texts'
    write(texts / 'a.txt', TEXT * 20)
    os.mkfifo(texts / 'pipe')
    capsys.readouterr()
    P.main([f'--input={texts}', f'--out_dir={texts / "data"}'])
    first = dataset.read_meta(str(texts / 'data'))
    assert f"prepare: skipped {texts / 'pipe'} (not a regular file)" in capsys.readouterr().err
    P.main([f'--input={texts}', f'--out_dir={texts / "data"}'])
    again = dataset.read_meta(str(texts / 'data'))
    err = capsys.readouterr().err
    assert f"{texts / 'data'}/ (a dataset)" in err and f"{texts / 'pipe'} (not a regular file)" in err
    assert again['tokenizer'] == first['tokenizer'] and again['tokens'] == first['tokens']
    assert again['source']['files'] == first['source']['files'] == 1


def test_names_that_are_not_utf8_are_read_and_written(tmp_path):
    """File and folder names in another encoding (bytes that are not UTF-8): read, and meta.json written with
    their JSON escape, which reads back as the same names."""
    folder = os.path.join(os.fsencode(tmp_path), b'in\xff')
    os.makedirs(folder)
    with open(os.path.join(folder, b'a\xfe.txt'), 'wb') as f:
        f.write(TEXT.encode() * 20)
    out = os.fsdecode(os.path.join(os.fsencode(tmp_path), b'out\xff'))
    P.main([f'--input={os.fsdecode(folder)}', f'--out_dir={out}'])
    meta = dataset.read_meta(out)
    assert meta['source']['inputs'] == [os.fsdecode(folder)] and meta['tokens']['train'] > 0


def test_a_folder_given_as_the_tokenizer_says_it_is_a_folder(tmp_path):
    (tmp_path / 'toks').mkdir()
    corpus = write(tmp_path / 'c.txt', TEXT * 20)
    for spec in (str(tmp_path / 'toks'), 'toks'):
        r = run_cli([f'--input={corpus}', f'--tokenizer={spec}', f'--out_dir={tmp_path / "out"}'], cwd=tmp_path)
        assert r.returncode == 2 and r.stderr.count('\n') == 1, r.stderr
        assert re.fullmatch(r"error: tiktoken ranks file '.*toks' is a folder; name a .tiktoken file\n", r.stderr), r.stderr
