"""
Token datasets on disk: the shard format, meta.json, the atomic commit of a dataset folder, and the
batches a run draws from it. prepare.py writes through `DatasetWriter`; train.py reads through
`open_dataset` and `Batches`.

Shards are the llm.c / modded-nanogpt format: a 256 x int32 header (magic 20240520, version 1 =
uint16 tokens or 2 = uint32, token count), then the tokens. prepare.py names them
<split>_g<run>_<index>.bin; meta.json lists them, and replacing meta.json is the one step that
switches a folder from its old dataset to a new one.
"""
import glob
import hashlib
import json
import math
import os
import re
import sys

import numpy as np

from configurator import UsageError, atomic_write, lock_folder, write_error

MAGIC = 20240520
HEADER_BYTES = 256 * 4
# prepare.py names its shards <split>_g<run>_<index>.bin, with a run number no file in the folder
# has used, so
# a run never overwrites the shards meta.json lists; <split>_<index>.bin are from before run numbers
PREPARED = re.compile(r'(?:train|val)_(?:g(\d+)_)?\d{6}\.bin')
LEFTOVER = re.compile(r'(?:train|val)_(?:g\d+_)?\d{6}\.bin\.tmp\d+|meta\.json\.tmp\d*')  # of killed runs


class ShardError(UsageError):
    """A file that is not a complete token shard (truncated, corrupt, or something else entirely)."""


def shard_header(ntok, dtype):
    header = np.zeros(256, dtype=np.int32)
    header[:3] = (MAGIC, 1 if np.dtype(dtype) == np.uint16 else 2, ntok)  # version 1: uint16 tokens, 2: uint32
    return header.tobytes()


def write_shard(path, tokens, *, dtype=None):
    """Write `tokens` as one shard, with atomic_write: `path` is complete or untouched."""
    tokens = np.asarray(tokens)
    top = int(tokens.max()) if tokens.size else 0
    dtype = np.dtype(dtype or (np.uint16 if top < 2**16 else np.uint32))
    if tokens.size and (int(tokens.min()) < 0 or top > np.iinfo(dtype).max):
        raise ValueError(f"token ids {tokens.min()}..{top} do not fit in {dtype}")
    atomic_write(path, lambda f: f.write(shard_header(len(tokens), dtype) + tokens.astype(dtype).tobytes()))


def load_shard(path):
    """The tokens of one shard as a read-only np.memmap, after checking the header against the file."""
    try:
        size = os.path.getsize(path)
    except OSError:
        raise ShardError(f"shard {path!r} not found") from None
    if size < HEADER_BYTES:
        raise ShardError(f"{path}: {size} bytes is shorter than the {HEADER_BYTES}-byte shard "
                         "header; it is truncated, rerun prepare.py")
    header = np.fromfile(path, dtype=np.int32, count=256)
    if header[0] != MAGIC:
        raise ShardError(f"{path}: not a token shard (magic number {header[0]}, expected {MAGIC})")
    if header[1] not in (1, 2):
        raise ShardError(f"{path}: unknown shard version {header[1]} (1 = uint16 tokens, 2 = uint32)")
    dtype = np.dtype(np.uint16 if header[1] == 1 else np.uint32)
    ntok = int(header[2])
    expected = HEADER_BYTES + ntok * dtype.itemsize
    if ntok < 0 or size != expected:
        raise ShardError(f"{path}: the header says {ntok} tokens ({expected} bytes) but the file "
                         f"has {size} bytes; it is truncated or corrupt, rerun prepare.py")
    if ntok == 0:
        return np.zeros(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode='r', offset=HEADER_BYTES, shape=(ntok,))


def shard_ok(path):
    """Whether `path` is a whole shard (load_shard's checks pass)."""
    try:
        load_shard(path)
        return True
    except ShardError:
        return False


# -----------------------------------------------------------------------------
# meta.json and the shards it lists

def find_shards(data_dir, split):
    """The shard paths of `split`: those meta.json lists, else (no meta.json: raw llm.c shards) the sorted
    data_dir/<split>_*.bin, else *_<split>_*.bin (llm.c's fineweb_train_000001.bin names). UsageError if
    there are none, or if the folder is one a prepare.py run did not finish (see read_meta)."""
    meta = read_meta(data_dir)
    if meta and 'shards' in meta:  # only these: the files of a run that did not finish stay invisible
        paths = [os.path.join(data_dir, name) for name in meta['shards'][split]]
        missing = next((p for p in paths if not os.path.isfile(p)), None)
        if missing:
            raise UsageError(f"{missing} is listed in meta.json but missing; rerun prepare.py")
        if paths:
            return paths
    else:  # a meta.json without a shard list (written by hand) ignores the numbered runs' shards
        for pattern in (f"{split}_*.bin", f"*_{split}_*.bin"):
            paths = sorted(p for p in glob.glob(os.path.join(glob.escape(data_dir), pattern))
                           if not (meta and re.fullmatch(r'\w+_g\d+_\d{6}\.bin', os.path.basename(p))))
            if paths:
                return paths
    raise UsageError(f"no {split}_*.bin shards in {data_dir!r}; make them with prepare.py "
                     f"(python prepare.py writes data/pydoc_char)")


def meta_problem(meta):
    """What is wrong with a parsed meta.json, or None."""
    if not isinstance(meta, dict):
        return f"holds a JSON {type(meta).__name__}, not an object"
    vocab = meta.get('vocab_size')
    if type(vocab) is not int or vocab <= 0:
        return f"has vocab_size={vocab!r}, not a positive integer"
    eot = meta.get('eot_token')
    if eot is not None and not (type(eot) is int and 0 <= eot < vocab):
        return f"has eot_token={eot!r}, not an id below vocab_size={vocab}"
    shards = meta.get('shards', {'train': [], 'val': []})
    if not (isinstance(shards, dict) and all(
            isinstance(shards.get(s), list) and all(isinstance(n, str) and re.fullmatch(r'\w[\w.-]*\.bin', n)
                                                    for n in shards[s]) for s in ('train', 'val'))):
        return "has a malformed shard list (expected shards = {'train': [file names], 'val': [file names]})"
    top = meta.get('max_id', {})
    if not isinstance(top, dict) or not all(type(v) is int for v in top.values()):
        return f"has a malformed max_id {top!r}"
    for split, i in top.items():
        if i >= vocab:
            return f"says the {split} shards hold token id {i}, but vocab_size is {vocab}"
    return None


def read_meta(data_dir):
    """The parsed data_dir/meta.json after checking its structure, or None when there is none (raw llm.c
    shards). A folder with prepare.py's shard names but no meta.json is what an older prepare.py left when
    it failed half-way: UsageError, rather than reading it as raw shards."""
    path = os.path.join(data_dir, 'meta.json')
    if not os.path.isfile(path):
        try:
            ours = sorted(n for n in os.listdir(data_dir) if PREPARED.fullmatch(n))
        except OSError:
            ours = []  # no folder: find_shards says so
        if ours:
            raise UsageError(f"{data_dir} holds shards prepare.py wrote ({ours[0]}, ...) but no "
                             "meta.json: a prepare.py run did not finish; rerun prepare.py (raw "
                             "llm.c shards are named like fineweb_train_000001.bin)")
        return None
    try:
        with open(path, encoding='utf-8') as f:
            meta = json.load(f)
    except (ValueError, OSError) as e:
        raise UsageError(f"{path} is unreadable ({e}); rerun prepare.py") from None
    problem = meta_problem(meta)
    if problem:
        raise UsageError(f"{path} {problem}; rerun prepare.py")
    return meta


def prepare_command(data_dir):
    """The prepare.py command that writes `data_dir` (prepare.py's default is data/<corpus>_<tokenizer>)."""
    corpus, _, tok = os.path.basename(os.path.normpath(data_dir)).partition('_')
    if corpus == 'fineweb10B':  # FineWeb's GPT-2 shards (a download)
        out = '' if os.path.normpath(data_dir) == os.path.join('data', 'fineweb10B') else f" --out_dir={data_dir}"
        return f"python prepare.py --dataset=fineweb --train_shards=N{out}"
    if corpus not in ('pydoc', 'stdlib', 'shakespeare'):
        return f"python prepare.py --input=YOUR_TEXT --out_dir={data_dir}"
    args = [f'--dataset={corpus}'] if corpus != 'pydoc' else []
    default = 'byte' if corpus == 'stdlib' else 'char'
    tok = tok or default
    if tok != default:
        args.append(f"--tokenizer={tok}")
    if os.path.normpath(data_dir) != os.path.join('data', f"{corpus}_{tok}"):
        args.append(f"--out_dir={data_dir}")
    return ' '.join(['python prepare.py', *args])


def bits_per_byte(meta, split, loss):
    """A loss in nats per token as bits per byte of text: loss / ln 2 x the split's tokens per byte, which
    prepare.py records, so that char, byte and BPE runs compare on one scale. None without that ratio
    (raw shards, or a meta.json from before it was recorded: rerun prepare.py)."""
    ratio = ((meta or {}).get('tokens_per_byte') or {}).get(split)
    return None if ratio is None else loss / math.log(2) * ratio


# what in meta.json says which data it is (not the shard files' names, the command that wrote them,
# nor fields a later prepare.py may add)
DATA_FIELDS = ('tokenizer', 'vocab_size', 'source', 'split', 'tokens', 'bytes')


def fingerprint(meta):
    """12 hex digits naming the data a meta.json describes (tokenizer, source, split, token counts) and
    not where it lies or which prepare.py run wrote it: two folders prepared from the same text agree,
    another corpus with the same tokenizer does not. None for raw shards (no meta.json)."""
    if meta is None:
        return None
    what = {k: meta.get(k) for k in DATA_FIELDS}
    source = what['source'] if isinstance(what['source'], dict) else {}
    what['source'] = {k: v for k, v in source.items() if k not in ('root', 'inputs')}  # where it was found
    if 'sha256' not in source:  # a source with no hash of its own (a folder of text): its tokens' hash
        what['token_sha256'] = meta.get('token_sha256')
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:12]


def describe_data(meta, data_dir=None):
    """'stdlib (cpython 3.11.7, sha256 1a2b3c4d5e6f) in data/stdlib_byte': which data a meta.json
    describes, in a few words; 'data 0123456789ab' (its fingerprint) where it names no source."""
    if meta is None:
        return f"raw shards{f' in {data_dir}' if data_dir else ''}"
    source = meta.get('source') if isinstance(meta.get('source'), dict) else {}
    sha = source.get('sha256') and f"sha256 {source['sha256'][:12]}"
    about = ', '.join(v for v in (source.get('python'), sha) if v)
    name = source.get('name') or f"data {fingerprint(meta)}"
    return f"{name}{f' ({about})' if about else ''}" + (f" in {data_dir}" if data_dir else '')


def open_dataset(data_dir):
    """(meta or None, train shard paths, val shard paths) of a dataset folder, or a UsageError that
    names the prepare.py command to run."""
    if not os.path.isdir(data_dir):
        raise UsageError(f"data_dir {data_dir!r} not found; run `{prepare_command(data_dir)}` first "
                         f"or pass --data_dir=...")
    return read_meta(data_dir), find_shards(data_dir, 'train'), find_shards(data_dir, 'val')


# -----------------------------------------------------------------------------
# Writing a dataset folder: new shards beside the old, then one atomic switch

class DatasetWriter:
    """
    A new dataset in `out_dir`, committed in one step or not at all:
        with DatasetWriter(out_dir, dtype=..., shard_tokens=...) as w:   # open
            w.add('train', ids) ...                                       # shards of a new generation
            w.commit(meta)                                                # meta.json lists them: the switch
    Leaving the block without commit() (an error, Ctrl-C) removes what this run wrote (discard), and
    the folder keeps its old dataset. One run at a time: the folder is locked for the block (a
    second prepare.py into it is refused with one line naming the first). Shards are named
    <split>_g<run>_<index>.bin with a run number no file in the folder has used, invisible to
    readers until meta.json lists them (their header says 0 tokens until complete). Any OSError
    becomes a one-line UsageError naming the file.
    """

    def __init__(self, out_dir, *, dtype, shard_tokens):
        self.out_dir, self.dtype, self.limit = out_dir, np.dtype(dtype), shard_tokens
        self.created, self.paths, self.committed = [], [], False  # folders and files this run made
        self.done = {'train': [], 'val': []}  # names of complete shards
        self.tokens, self.bytes = {'train': 0, 'val': 0}, {'train': 0, 'val': 0}
        self.max_id = {}
        self.sha = {'train': hashlib.sha256(), 'val': hashlib.sha256()}  # of each split's tokens, in order
        self.f, self.split, self.n = None, None, 0  # the shard being written
        self.lock = None

    def __enter__(self):
        self.created = makedirs(self.out_dir)
        try:
            self.lock = lock_folder(self.out_dir, 'a dataset')
        except UsageError:
            self.discard()
            raise
        try:
            old = read_meta(self.out_dir)
        except UsageError:  # unreadable or half-written: replaced below, nothing in it is listed to keep
            old = None
        if old and 'shards' in old:  # what killed runs left takes space the new shards need
            self.remove_stale(listed(old))
        try:
            names = os.listdir(self.out_dir)
        except OSError as e:
            raise UsageError(f"cannot read --out_dir={self.out_dir!r}: {e.strerror or e}") from None
        # 1 + the highest run number among the folder's shard names: the new shards collide with
        # nothing
        self.run = 1 + max((int(m.group(1) or 0) for m in map(PREPARED.fullmatch, names) if m), default=0)
        return self

    def add(self, split, ids, nbytes):
        """Append token ids to `split`; `nbytes`: the bytes of text they stand for (for bits per byte)."""
        self.bytes[split] += nbytes
        if len(ids):
            self.max_id[split] = max(self.max_id.get(split, -1), int(ids.max()))
        try:
            while len(ids):
                if self.f is not None and self.split != split:
                    self.close_shard()
                if self.f is None:
                    name = f"{split}_g{self.run}_{len(self.done[split]):06d}.bin"
                    self.paths.append(os.path.join(self.out_dir, name))
                    self.f, self.split = open(self.paths[-1], 'wb'), split
                    self.f.write(shard_header(0, self.dtype))
                take = ids[:self.limit - self.n]
                data = take.astype(self.dtype, copy=False).tobytes()
                self.sha[split].update(data)
                self.f.write(data)
                self.n, ids = self.n + len(take), ids[len(take):]
                if self.n == self.limit:
                    self.close_shard()
        except OSError as e:
            raise write_error(self.paths[-1], e) from None

    def close_shard(self):
        if self.f is None:
            return
        try:
            self.f.seek(0)
            self.f.write(shard_header(self.n, self.dtype))
            self.f.flush()
            os.fsync(self.f.fileno())  # the data is on disk before meta.json names it
            self.f.close()
        except OSError as e:
            raise write_error(self.paths[-1], e) from None
        self.done[self.split].append(os.path.basename(self.paths[-1]))
        self.tokens[self.split] += self.n
        self.f, self.n = None, 0

    def commit(self, meta):
        """Complete `meta` with the shard list and counts and make it the folder's meta.json: until that
        rename the readers see only the old dataset; from it on, only the new one. Then the old shards go."""
        self.close_shard()
        per_byte = {s: self.tokens[s] / self.bytes[s] for s in self.tokens if self.bytes[s]}
        meta.update(tokens=self.tokens, bytes=self.bytes, tokens_per_byte=per_byte, max_id=self.max_id, run=self.run,
                    shards=self.done, token_sha256={s: h.hexdigest() for s, h in self.sha.items()})
        fsync_dir(self.out_dir)  # the new shards' names are durable before a meta.json names them
        atomic_write(os.path.join(self.out_dir, 'meta.json'),
                     lambda f: f.write(json.dumps(meta, indent=1, ensure_ascii=False).encode()))
        self.committed = True
        fsync_dir(self.out_dir)  # the new meta.json is durable before the old shards go
        self.remove_stale(listed(meta))
        return meta

    def __exit__(self, kind, e, tb):
        try:
            return self.finish(kind, e)
        finally:
            if self.lock is not None:
                os.close(self.lock)

    def finish(self, kind, e):
        if self.committed or kind is None:
            return False
        try:  # ^C can land just after the rename: then the new dataset is the folder's
            if (read_meta(self.out_dir) or {}).get('run') == self.run:
                return False
        except UsageError:
            pass
        self.discard()
        if isinstance(e, OSError):  # reading the input, say; writing the shards raises UsageError
            raise UsageError(f"{e.filename or self.out_dir}: {e.strerror or e}") from None
        return False

    def discard(self):
        """Remove every file and folder this run made. Closing may raise again (a full disk fails the
        flush of what is still buffered), and is only a means to the removal."""
        if self.f is not None:
            try:
                self.f.close()
            except OSError:
                pass
            self.f = None
        for path in self.paths:
            try:
                os.remove(path)
            except OSError:
                pass  # gone already, or not removable: invisible anyway, the next run removes it
        for d in self.created:
            try:
                os.rmdir(d)  # only if empty
            except OSError:
                pass

    def remove_stale(self, keep):
        """Remove prepare.py's files that meta.json does not list: the previous dataset once the new one
        is committed, and what killed runs left. A file that will not go stays (invisible) for the next run."""
        try:
            names = os.listdir(self.out_dir)
        except OSError:
            return
        for name in names:
            if (PREPARED.fullmatch(name) or LEFTOVER.fullmatch(name)) and name not in keep:
                try:
                    os.remove(os.path.join(self.out_dir, name))
                except OSError as e:
                    print(f"prepare: could not remove {name} ({e.strerror}); the next run will", file=sys.stderr)


def listed(meta):
    return {'meta.json', *meta['shards']['train'], *meta['shards']['val']}


def makedirs(path):
    """os.makedirs, returning the directories it created (so a failed run can remove them)."""
    created, p = [], os.path.abspath(path)
    while not os.path.exists(p):
        created.append(p)
        p = os.path.dirname(p)
    if os.path.exists(path) and not os.path.isdir(path):
        raise UsageError(f"--out_dir={path!r} is a file")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:  # a file in the way, no permission, a read-only or virtual file system
        for d in filter(os.path.isdir, created):  # deepest first
            os.rmdir(d)
        raise UsageError(f"cannot create directory {path!r}: {e.strerror or e}") from None
    return created


def fsync_dir(path):
    """Make the folder's renames and new names durable (a power cut cannot undo them); best effort."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # Windows cannot open a folder
        return
    try:
        os.fsync(fd)
    except OSError:  # some file systems do not fsync folders
        pass
    finally:
        os.close(fd)


# -----------------------------------------------------------------------------
# Batches: what a run trains and evaluates on

class Batches:
    """
    Random windows of block_size + 1 tokens from memory-mapped shards, uniform over every
    window of every shard. Batch `key` is a pure function of (seed, *key): each draw seeds a fresh
    numpy Generator, so any process can draw any batch without drawing the ones before it (DDP
    ranks, resumed runs) and the sampler has no state to save.
    """

    def __init__(self, paths, *, block_size, batch_size, seed, device, check_vocab=0):
        self.shards = [load_shard(p) for p in paths]
        self.block_size, self.batch_size, self.seed, self.device = block_size, batch_size, seed, device
        self.paths, self.check_vocab = paths, check_vocab  # ids >= the model's vocab_size: an IndexError
        self.starts = np.array([max(len(s) - block_size, 0) for s in self.shards])  # windows per shard
        self.ends = np.cumsum(self.starts)
        if self.ends[-1] == 0:
            split = os.path.basename(paths[0]).partition('_')[0]  # train_*.bin, val_*.bin
            longest = max(len(s) for s in self.shards)
            raise UsageError(f"{os.path.dirname(paths[0])}: the {split} split holds no window of block_size + 1 "
                             f"= {block_size + 1} tokens (its longest shard: {longest:,}); lower block_size, "
                             f"or prepare more text{' (or a larger --val_fraction)' if split == 'val' else ''}")

    def get(self, *key):
        rng = np.random.default_rng([self.seed, *key])
        pos = rng.integers(self.ends[-1], size=self.batch_size)  # window index over all shards
        shard = np.searchsorted(self.ends, pos, side='right')
        start = pos - (self.ends[shard] - self.starts[shard])
        T = self.block_size
        xy = np.stack([self.shards[s][i:i + T + 1] for s, i in zip(shard, start)]).astype(np.int64)
        if self.check_vocab and xy.max() >= self.check_vocab:  # cheap: one small batch
            bad = next(s for s, i in zip(shard, start) if self.shards[s][i:i + T + 1].max() >= self.check_vocab)
            meta = os.path.join(os.path.dirname(self.paths[bad]), 'meta.json')
            fix = (f"{meta} does not match its shards: rerun prepare.py" if os.path.exists(meta) else
                   "pass a larger --vocab_size (GPT-2 shards: 50304)")
            raise UsageError(f"{self.paths[bad]} holds token id {int(xy.max())} >= "
                             f"vocab_size={self.check_vocab}; {fix}")
        import torch  # here, not at the top: prepare.py writes datasets without loading torch
        xy = torch.from_numpy(xy)  # (B, T + 1)
        x, y = xy[:, :-1].contiguous(), xy[:, 1:].contiguous()  # (B, T) inputs and next-token targets
        if self.device.startswith('cuda'):  # pinned memory: the copy overlaps with compute
            return (x.pin_memory().to(self.device, non_blocking=True),
                    y.pin_memory().to(self.device, non_blocking=True))
        return x.to(self.device), y.to(self.device)
