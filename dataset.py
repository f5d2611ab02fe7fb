"""
What a token dataset on disk is, for prepare.py that writes it and train.py and sample.py that read
it: the tokenizer its meta.json describes (char, byte or tiktoken, rebuilt and checked from it), its
shards in llm.c's format (a 256 x int32 header: magic 20240520, version 1 = uint16 tokens or 2 =
uint32, token count; then the tokens), meta.json and the data's fingerprint, how a reader opens a
folder once (open_dataset) and how one is written once (`DatasetWriter`: the new dataset whole
beside it, then configurator.swap_in).

Each tokenizer has encode(str) -> list[int], decode(ids) -> str, vocab_size, eot_token, name, meta()
(what meta.json needs to rebuild it) and encode_array(str) -> np.ndarray (prepare.py's fast path).
"""
import base64
import contextlib
import hashlib
import itertools
import json
import os
import pathlib
import re
import shutil
import stat

import numpy as np

from configurator import (UsageError, atomic_write, fsync_dir, hold, refuse_foreign, regular_file,
                          script, swap_in, write_error)


EOT = '<|endoftext|>'
# tiktoken's GPT-2 (r50k_base) pre-tokenisation pattern, tiktoken_ext/openai_public.py
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""


def _decode_runs(ids, vocab_size, to_bytes):
    """The text of `ids`; U+FFFD for each id outside the vocabulary (a padded model emits them)."""
    out = [to_bytes(list(run)) if known else '\ufffd'.encode() * len(list(run))
           for known, run in itertools.groupby(ids, lambda i: 0 <= i < vocab_size)]
    return b''.join(out).decode('utf-8', errors='replace')


class CharTokenizer:
    """One id per character; the vocabulary is the sorted set of the corpus's characters."""
    eot_token, name = None, 'char'

    def __init__(self, chars):
        self.chars = chars  # a str, sorted by code point, each character once
        self.vocab_size = len(chars)
        self._codes = np.array([ord(c) for c in chars], dtype=np.uint32)

    def encode_array(self, text):
        codes = np.frombuffer(text.encode('utf-32-le'), dtype=np.uint32)  # one per character
        ids = np.searchsorted(self._codes, codes)  # the vocabulary is sorted: id = the code's rank
        unknown = (self._codes[np.minimum(ids, self.vocab_size - 1)] != codes if self.vocab_size
                   else codes >= 0)
        if unknown.any():
            c = text[int(np.argmax(unknown))]
            raise UsageError(f"character {c!r} (U+{ord(c):04X}) is not in this "
                             f"{self.vocab_size}-character vocabulary")
        return ids

    def encode(self, text):
        return self.encode_array(text).tolist()

    def decode(self, ids):
        return ''.join(self.chars[i] if 0 <= i < self.vocab_size else '\ufffd' for i in ids)

    def meta(self):
        return {'kind': 'char', 'name': 'char', 'chars': self.chars}


class ByteTokenizer:
    """The 256 byte values of the UTF-8 text: any text round-trips, no vocabulary to store."""
    eot_token, name, vocab_size = None, 'byte', 256

    def encode_array(self, text):
        return np.frombuffer(text.encode('utf-8'), dtype=np.uint8)

    def encode(self, text):
        return list(text.encode('utf-8'))

    def decode(self, ids):
        return _decode_runs(ids, 256, bytes)

    def meta(self):
        return {'kind': 'byte', 'name': 'byte'}


class TiktokenTokenizer:
    """A tiktoken Encoding (byte-level BPE); documents are delimited by <|endoftext|>."""

    def __init__(self, enc, info):
        self.enc, self.info = enc, info
        self.name, self.vocab_size = enc.name, enc.n_vocab
        self.eot_token = enc.encode_single_token(EOT) if EOT in enc.special_tokens_set else None

    def encode_array(self, text):  # a corpus's literal "<|endoftext|>" is text, not the token
        return self.enc.encode_to_numpy(text, disallowed_special=())

    def encode(self, text):  # a prompt may hold the token
        return self.enc.encode(text, allowed_special=self.enc.special_tokens_set)

    def decode(self, ids):
        return _decode_runs(ids, self.vocab_size, self.enc.decode_bytes)

    def meta(self):
        return dict(self.info)


def tiktoken_from_file(path, *, pat_str=GPT2_PATTERN, special_tokens=None, sha256=None):
    """A tiktoken Encoding from a local ranks file ("base64-token rank" per line), no network. By
    default the GPT-2 pattern; <|endoftext|> takes the id after the last rank (GPT-2's 50256)."""
    import tiktoken
    try:
        data = pathlib.Path(regular_file(path, 'tiktoken ranks file',
                                         fix='name a .tiktoken file')).read_bytes()
    except OSError as e:
        raise UsageError(f"tiktoken ranks file {path!r}: {e.strerror}") from None
    if sha256 and hashlib.sha256(data).hexdigest() != sha256:
        raise UsageError(f"tiktoken ranks file {path!r} is not the one the data was tokenized "
                         "with (its sha256 differs)")
    name = os.path.basename(path).removesuffix('.tiktoken')
    try:  # parsed here: tiktoken.load would read through (and write) its download cache
        ranks = {base64.b64decode(token, validate=True): int(rank)
                 for token, rank in (line.split() for line in data.splitlines() if line)}
        special_tokens = special_tokens or {EOT: max(ranks.values()) + 1}
        # byte-level BPE ranks every byte (tiktoken panics, a BaseException, on one it lacks) and
        # gives each token its own rank
        if any(bytes([b]) not in ranks for b in range(256)) or len(set(ranks.values())) < len(ranks):
            raise ValueError
        enc = tiktoken.Encoding(name, pat_str=pat_str, mergeable_ranks=ranks,
                                special_tokens=special_tokens)
    except Exception:
        raise UsageError(f"{path!r} is not a byte-level BPE ranks file tiktoken can use (lines of "
                         "'base64-token rank', every one of the 256 bytes among them, each rank once);"
                         " pass prepare.py a good --tokenizer=FILE") from None
    info = {'kind': 'tiktoken', 'name': name, 'ranks_file': os.path.abspath(path),
            'ranks_sha256': hashlib.sha256(data).hexdigest(), 'pat_str': pat_str,
            'special_tokens': special_tokens}
    return TiktokenTokenizer(enc, info)


def tiktoken_by_name(name):
    """tiktoken.get_encoding(name): downloaded on first use, then read from TIKTOKEN_CACHE_DIR (or
    its temp dir)."""
    import tiktoken
    names = tiktoken.list_encoding_names()
    if name not in names:
        raise UsageError(f"unknown tokenizer {name!r}; choose char, byte, a tiktoken encoding "
                         f"({', '.join(names)}) or a path to a .tiktoken ranks file")
    try:
        enc = tiktoken.get_encoding(name)
    except Exception as e:  # offline: requests' ConnectionError, or anything else from the download
        raise UsageError(f"tiktoken could not load {name!r} ({type(e).__name__}); offline, set "
                         "TIKTOKEN_CACHE_DIR to a copy of its cache") from None
    return TiktokenTokenizer(enc, {'kind': 'tiktoken', 'name': name})


def load_tokenizer(meta, *, ranks_file=''):
    """Rebuild the tokenizer that meta.json (as a dict) describes. A BPE ranks file no longer where
    it was (a moved folder, another machine) is `ranks_file`, checked by its sha256."""
    problem = tokenizer_problem(meta or {})
    if problem:
        raise UsageError(f"meta.json {problem}; rerun prepare.py")
    tok = meta['tokenizer']
    if tok['kind'] == 'char':
        return CharTokenizer(tok['chars'])
    if tok['kind'] == 'byte':
        return ByteTokenizer()
    if not tok.get('ranks_file'):  # an encoding by name
        return tiktoken_by_name(tok['name'])
    path = ranks_file or tok['ranks_file']  # a file prepare.py read, its sha256 kept
    if not os.path.lexists(path):
        raise UsageError(f"tiktoken ranks file {path!r} not found (moved?); pass --ranks_file=path/"
                         f"to/{os.path.basename(tok['ranks_file'])}")
    return tiktoken_from_file(path, sha256=tok.get('ranks_sha256'),
                              pat_str=tok.get('pat_str', GPT2_PATTERN),
                              special_tokens=tok.get('special_tokens'))


def sha256_file(path):
    """The hex sha256 of a file's bytes, read a MiB at a time."""
    h = hashlib.sha256()
    with open(path, 'rb') as f:
        for block in iter(lambda: f.read(1 << 20), b''):
            h.update(block)
    return h.hexdigest()


def tokenizer_problem(meta):
    """Why the tokenizer a meta.json describes cannot decode its tokens, or None: checked before
    training (else only sample.py finds out) and before a tokenizer is rebuilt."""
    tok, vocab = meta.get('tokenizer'), meta.get('vocab_size')
    kind = tok.get('kind') if isinstance(tok, dict) else None
    chars = tok.get('chars') if kind == 'char' else None
    if not (kind == 'byte' and vocab == 256 or kind == 'tiktoken' and isinstance(tok.get('name'), str)
            or isinstance(chars, str) and list(chars) == sorted(set(chars)) and len(chars) == vocab):
        return f"does not describe a tokenizer of its {vocab} token ids (tokenizer = {str(tok)[:60]})"
    return None


def tokenizer_of(meta):
    """What a resumed run must keep: the data's tokenizer as meta.json describes it (None, raw llm.c
    shards: GPT-2 BPE), less the ranks file's path (its sha256 says what it holds)."""
    tok = {'kind': 'tiktoken', 'name': 'gpt2'} if meta is None else meta.get('tokenizer')
    return {k: v for k, v in tok.items() if k != 'ranks_file'} if isinstance(tok, dict) else tok


def describe_tokenizer(meta):
    """A tokenizer in a few words: 'char (65 characters)', 'tiktoken gpt2', 'raw shards (GPT-2
    BPE)'."""
    tok = tokenizer_of(meta)
    if meta is None:
        return "raw shards (GPT-2 BPE)"
    if not isinstance(tok, dict):
        return repr(tok)
    if tok.get('kind') == 'char':
        return f"char ({len(tok.get('chars', ''))} characters)"
    return ' '.join(str(tok[k]) for k in ('kind', 'name', 'ranks_sha256') if k in tok)


# -----------------------------------------------------------------------------
# the shard format and meta.json: written here, read by train.py

MAGIC = 20240520
HEADER_BYTES = 256 * 4


class ShardError(UsageError):
    """A file that is not a complete token shard (truncated, corrupt, or something else)."""


def shard_header(ntok, dtype):
    header = np.zeros(256, dtype=np.int32)
    header[:3] = (MAGIC, 1 if np.dtype(dtype) == np.uint16 else 2, ntok)  # 1: uint16, 2: uint32
    return header.tobytes()


def load_shard(path, opener=None):
    """One shard's tokens as a read-only np.memmap, after checking its header against the file
    (`opener`: open its name inside a folder held open, see open_dataset)."""
    try:
        f = open(os.path.basename(path) if opener else path, 'rb', opener=opener)
    except OSError:
        raise ShardError(f"shard {path!r} not found; rerun prepare.py") from None
    with f:
        size = os.fstat(f.fileno()).st_size
        if size < HEADER_BYTES:
            raise ShardError(f"{path}: {size} bytes is shorter than the {HEADER_BYTES}-byte shard "
                             "header; it is truncated, rerun prepare.py")
        header = np.frombuffer(f.read(HEADER_BYTES), dtype=np.int32)
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
        return np.memmap(f, dtype=dtype, mode='r', offset=HEADER_BYTES, shape=(ntok,))


def find_shards(data_dir, split, meta, names=None):
    """The shard paths of `split`: those `meta` (data_dir's meta.json) lists, else (raw llm.c
    shards) the sorted data_dir/<split>_*.bin, else *_<split>_*.bin (fineweb_train_000001.bin), of
    `names` (the folder's, by default listed now)."""
    if meta and 'shards' in meta:  # only these: no other file in the folder is read
        return [os.path.join(data_dir, name) for name in meta['shards'][split]]
    names = sorted(os.listdir(data_dir) if names is None else names)
    found = ([n for n in names if re.fullmatch(rf'{split}_.*\.bin', n)]
             or [n for n in names if re.fullmatch(rf'.*_{split}_.*\.bin', n)])
    if not found:
        raise UsageError(f"no {split}_*.bin shards in {data_dir!r}; make them with prepare.py "
                         f"(python {script('prepare.py')} writes data/pydoc_char)")
    return [os.path.join(data_dir, n) for n in found]


def open_dataset(data_dir):
    """(meta or None, {'train': [(path, tokens)], 'val': [...]}): the folder opened once, and
    meta.json and the shards it lists read inside it, so a prepare.py that swaps a new dataset in
    meanwhile can never pair one dataset's meta.json with another's shards."""
    try:
        fd = os.open(data_dir, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        new = beside(data_dir, 'new')
        raise UsageError(
            f"data_dir {data_dir!r} is missing: a prepare.py is swapping in the dataset it wrote "
            f"in {new}, or was killed doing so; rerun it" if os.path.lexists(new) else
            f"data_dir {data_dir!r} not found; write it with prepare.py (python "
            f"{script('prepare.py')} --help) or pass --data_dir=...") from None
    except NotADirectoryError:
        raise UsageError(f"data_dir {data_dir!r} is not a folder; pass --data_dir=a/dataset/folder") \
            from None

    def opener(name, flags):  # names inside the folder opened above, whatever data_dir names now
        return os.open(name, flags, dir_fd=fd)
    try:
        meta = read_meta(data_dir, opener)
        problem = meta and tokenizer_problem(meta)
        if problem:  # else a run trains, and only sample.py finds its tokens cannot be decoded
            raise UsageError(f"{data_dir}/meta.json {problem}; rerun prepare.py")
        names = os.listdir(fd)
        shards = {split: [(p, load_shard(p, opener)) for p in find_shards(data_dir, split, meta, names)]
                  for split in ('train', 'val')}
    except UsageError:
        if not os.path.isdir(data_dir) or os.path.samestat(os.fstat(fd), os.stat(data_dir)):
            raise
        raise UsageError(f"{data_dir} was replaced while it was read (a prepare.py swapped a new "
                         "dataset in): rerun") from None
    finally:
        os.close(fd)
    return meta, shards


def read_meta(data_dir, opener=None):
    """The parsed data_dir/meta.json once the fields readers use are checked (one line if one is
    not as prepare.py writes it), or None when there is none (raw llm.c shards)."""
    path = os.path.join(data_dir, 'meta.json')
    try:  # (opened without blocking, and then checked: a FIFO there is never read)
        f = open('meta.json' if opener else path, 'rb',
                 opener=lambda name, flags: (opener or os.open)(name, flags | os.O_NONBLOCK))
    except FileNotFoundError:
        return None
    except OSError as e:
        raise UsageError(f"{path} is unreadable ({e.strerror}); rerun prepare.py") from None
    with f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise UsageError(f"{path} is not a regular file (a device, pipe or socket); rerun "
                             "prepare.py")
        try:
            meta = json.loads(f.read())
        except ValueError as e:
            raise UsageError(f"{path} is unreadable ({e}); rerun prepare.py") from None
    try:
        vocab, eot = meta['vocab_size'], meta.get('eot_token')
        shards = meta.get('shards', {'train': [], 'val': []})
        if not (type(vocab) is int and vocab > 0 and (eot is None or type(eot) is int and 0 <= eot < vocab)
                and all(re.fullmatch(r'\w[\w.-]*\.bin', n) for s in ('train', 'val') for n in shards[s])
                and all(type(i) is int and i < vocab for i in meta.get('max_id', {}).values())):
            raise ValueError
    except (KeyError, TypeError, ValueError, AttributeError):  # (a list, a string, a null, ...)
        raise UsageError(f"{path} is not as prepare.py writes it (its vocab_size, eot_token, shard "
                         "list or max_id is malformed); rerun prepare.py") from None
    return meta


# what in meta.json says which data it is (not the shards' names, the command that wrote them, nor
# fields a later prepare.py may add)
DATA_FIELDS = ('tokenizer', 'vocab_size', 'source', 'split', 'tokens', 'bytes')


def fingerprint(meta):
    """12 hex digits naming the data a meta.json describes, not where it lies or which run wrote it:
    two folders prepared from the same text agree. None for raw shards (no meta.json)."""
    if meta is None:
        return None
    what = {k: meta.get(k) for k in DATA_FIELDS}
    source = what['source'] if isinstance(what['source'], dict) else {}
    # not where the text was found; for a source with no hash of its own (a folder), its tokens'
    what['source'] = {k: v for k, v in source.items() if k not in ('root', 'inputs')}
    if 'sha256' not in source:
        what['token_sha256'] = meta.get('token_sha256')
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:12]


def describe_data(meta, data_dir=None):
    """'stdlib (cpython 3.11.7, sha256 1a2b3c4d5e6f) in data/stdlib_byte': the data in a few words;
    'data 0123456789ab' (its fingerprint) where meta.json names no source."""
    if meta is None:
        return f"raw shards{f' in {data_dir}' if data_dir else ''}"
    source = meta.get('source') if isinstance(meta.get('source'), dict) else {}
    sha = source.get('sha256') and f"sha256 {source['sha256'][:12]}"
    about = ', '.join(v for v in (source.get('python'), sha) if v)
    name = source.get('name') or f"data {fingerprint(meta)}"
    return f"{name}{f' ({about})' if about else ''}" + (f" in {data_dir}" if data_dir else '')




# -----------------------------------------------------------------------------
# writing a dataset folder: whole beside it, then swapped in

def beside(out_dir, part):
    """A folder beside out_dir: .<name>.new (a dataset being written), .<name>.old (the one it
    replaces, while the swap runs), .<name>.download (FineWeb's shards, kept for a rerun)."""
    parent, name = os.path.split(os.path.normpath(out_dir))
    return os.path.join(parent, f".{name}.{part}")


class DatasetWriter:
    """
    A new dataset for `out_dir`, written whole beside it, then swapped in:
        with DatasetWriter(out_dir, dtype=..., shard_tokens=...) as w:  # out_dir held
            w.add('train', ids, nbytes) ...  # shards train_000000.bin, ... in .<name>.new/
            w.commit(meta)                   # its meta.json, then configurator.swap_in
    A reader sees the old dataset or the new one, whole. Leaving the block without commit() (an
    error, Ctrl-C) removes what this run wrote; the next run finishes a swap a kill cut short. Only
    a folder holding exactly a dataset prepare.py wrote (hidden names included) is replaced.
    """

    def __init__(self, out_dir, *, dtype, shard_tokens):
        self.out_dir, self.dtype, self.limit = os.path.normpath(out_dir), np.dtype(dtype), shard_tokens
        self.new = beside(self.out_dir, 'new')
        self.done, self.committed = {'train': [], 'val': []}, False
        self.tokens, self.bytes = {'train': 0, 'val': 0}, {'train': 0, 'val': 0}
        self.sha = {'train': hashlib.sha256(), 'val': hashlib.sha256()}  # of each split's tokens
        self.max_id, self.f, self.split, self.n = {}, None, None, 0  # n: the open shard's tokens

    def __enter__(self):
        self.give_back = hold(self.out_dir)  # (made if missing: gone again if nothing came of it)
        try:
            done = os.path.isfile(os.path.join(self.new, 'meta.json'))  # (whole: meta.json is last)
            if done or os.path.lexists(f"{self.new}.old"):  # a swap a kill cut short: finished
                swap_in(self.new, self.out_dir, dataset_names, WRITER, ready=done)
            if os.path.lexists(self.new):  # a dataset a kill left unfinished
                refuse_foreign(self.new, lambda _: SHARD.fullmatch, WRITER)
                shutil.rmtree(self.new)
            refuse_foreign(self.out_dir, dataset_names, WRITER)  # (before anything is written)
            os.mkdir(self.new)
        except BaseException:
            self.give_back()
            raise
        return self

    def add(self, split, ids, nbytes):
        """Append token ids to `split`; `nbytes`: the bytes of text they stand for."""
        self.bytes[split] += nbytes
        if len(ids):
            self.max_id[split] = max(self.max_id.get(split, -1), int(ids.max()))
        path = None
        try:
            while len(ids):
                if self.f is not None and self.split != split:
                    self.close_shard()
                if self.f is None:
                    path = os.path.join(self.new, f"{split}_{len(self.done[split]):06d}.bin")
                    self.f, self.split = open(path, 'wb'), split
                    self.f.write(shard_header(0, self.dtype))
                take = ids[:self.limit - self.n]
                data = take.astype(self.dtype, copy=False).tobytes()
                self.sha[split].update(data)
                self.f.write(data)
                self.n, ids = self.n + len(take), ids[len(take):]
                if self.n == self.limit:
                    self.close_shard()
        except OSError as e:
            raise write_error(path or self.f.name, e) from None

    def link(self, split, path):
        """A whole shard already on disk (a download) into `split`, as it is: linked, or copied."""
        target = os.path.join(self.new, os.path.basename(path))
        try:
            os.link(path, target)
        except OSError:  # another file system, or none that links
            shutil.copyfile(path, target)
        self.done[split].append(os.path.basename(path))

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
            raise write_error(self.f.name, e) from None
        self.done[self.split].append(os.path.basename(self.f.name))
        self.tokens[self.split] += self.n
        self.f, self.n = None, 0

    def counts(self):
        """What meta.json says of the tokens add() wrote: per split, their count, bytes of text,
        tokens per byte, largest id and sha256."""
        self.close_shard()
        return dict(tokens=self.tokens, bytes=self.bytes, max_id=self.max_id,
                    tokens_per_byte={s: self.tokens[s] / self.bytes[s] for s in self.tokens
                                     if self.bytes[s]},
                    token_sha256={s: h.hexdigest() for s, h in self.sha.items()})

    def commit(self, meta):
        """`meta` with the shard list, as the new folder's meta.json; then the swap (a failure from
        here on leaves it to the next prepare.py there, which finishes it)."""
        self.close_shard()
        meta = {**meta, 'shards': self.done}
        atomic_write(os.path.join(self.new, 'meta.json'),
                     lambda f: f.write(json.dumps(meta, indent=1, ensure_ascii=False).encode(
                         errors="backslashreplace")))  # (a name not UTF-8: its JSON escape)
        fsync_dir(self.new)
        self.committed = True
        swap_in(self.new, self.out_dir, dataset_names, WRITER)
        return meta

    def __exit__(self, kind, e, tb):
        """Not committed: what this run wrote goes."""
        try:
            if kind is not None and not self.committed:
                if self.f is not None:
                    with contextlib.suppress(OSError):  # (a full disk fails the flush again)
                        self.f.close()
                shutil.rmtree(self.new, ignore_errors=True)
        finally:
            self.give_back()


WRITER = "prepare.py (a dataset's folder holds meta.json and the shards it lists)"
SHARD = re.compile(r'\w*(train|val)_\d{6}\.bin|meta\.json\.tmp\d+')  # what DatasetWriter writes


def dataset_names(folder):
    """What in `folder` is a dataset prepare.py wrote: meta.json and the shards it lists (a name
    predicate); nothing, when meta.json is not one."""
    try:
        with open(regular_file(os.path.join(folder, 'meta.json'), 'meta.json'), encoding='utf-8') as f:
            shards = json.load(f)['shards']  # (a FIFO there is never read: not ours)
        return {'meta.json', *shards['train'], *shards['val']}.__contains__
    except (UsageError, OSError, ValueError, KeyError, TypeError):
        return lambda name: False
