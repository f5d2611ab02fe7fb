"""
Tokenise a text corpus into binary shards that train.py reads.

    python prepare.py                                 # Python's reference manual, char-level: data/pydoc_char
    python prepare.py --dataset=shakespeare           # Tiny Shakespeare, downloaded once
    python prepare.py --input=books/ --tokenizer=gpt2 # any UTF-8 text: files, directories, globs
    python prepare.py --input=a.txt --tokenizer=path/to/gpt2.tiktoken  # GPT-2 BPE with no network

Tokenizers: char (the default: the sorted set of the corpus's characters, kept in meta.json), byte
(256 values), or tiktoken: an encoding name such as gpt2 (tiktoken downloads it once; offline, point
TIKTOKEN_CACHE_DIR at a copy of its cache) or a local ranks file ending in .tiktoken.
Output: train_g1_000000.bin ... and val_g1_000000.bin ... (g<run>: a new number in each run) in the llm.c /
modded-nanogpt shard format (a 256 x int32 header: magic 20240520, version 1 = uint16 tokens or 2 =
uint32, token count; then the tokens), and meta.json, which lists the shards and says how to rebuild the
tokenizer. Rerunning into the same folder is safe: the new shards go beside the old ones under new names,
and the atomic replacement of meta.json switches the folder from the old dataset to the new in one step
(the readers use only the shards meta.json lists); only then are the old shards removed. So a failure
at any point (an error, a full disk, kill -9, a power cut) leaves the complete old dataset or the
complete new one, at the cost of room for both while the new one is written.

train.py and sample.py read data through this file (`load_shard`, `find_shards`, `read_meta`,
`load_tokenizer`); flag parsing lives in configurator.py.
"""
import base64
import bisect
import codecs
import collections
import dataclasses
import errno
import glob
import hashlib
import io
import itertools
import json
import os
import re
import shlex
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from configurator import UsageError, atomic_write, parse_config, run_main


# -----------------------------------------------------------------------------
# Shards: the llm.c / modded-nanogpt format, a 256 x int32 header then the tokens

MAGIC = 20240520
HEADER_BYTES = 256 * 4


class ShardError(UsageError):
    """A file that is not a complete token shard (truncated, corrupt, or something else entirely)."""


def _header(ntok, version):
    header = np.zeros(256, dtype=np.int32)
    header[:3] = (MAGIC, version, ntok)  # version 1: uint16 tokens, 2: uint32
    return header.tobytes()


def write_shard(path, tokens, *, dtype=None):
    """Write `tokens` as one shard, with atomic_write: `path` is complete or untouched."""
    tokens = np.asarray(tokens)
    top = int(tokens.max()) if tokens.size else 0
    dtype = np.dtype(dtype or (np.uint16 if top < 2**16 else np.uint32))
    if tokens.size and (int(tokens.min()) < 0 or top > np.iinfo(dtype).max):
        raise ValueError(f"token ids {tokens.min()}..{top} do not fit in {dtype}")

    def write(f):
        f.write(_header(len(tokens), 1 if dtype == np.uint16 else 2))
        f.write(tokens.astype(dtype, copy=False).tobytes())
    atomic_write(path, write)


def load_shard(path):
    """The tokens of one shard as a read-only np.memmap, after checking the header against the file."""
    try:
        size = os.path.getsize(path)
    except OSError:
        raise ShardError(f"shard {path!r} not found") from None
    if size < HEADER_BYTES:
        raise ShardError(f"{path}: {size} bytes is shorter than the {HEADER_BYTES}-byte shard header; "
                         f"it is truncated, rerun prepare.py")
    header = np.fromfile(path, dtype=np.int32, count=256)
    if header[0] != MAGIC:
        raise ShardError(f"{path}: not a token shard (magic number {header[0]}, expected {MAGIC})")
    if header[1] not in (1, 2):
        raise ShardError(f"{path}: unknown shard version {header[1]} (1 = uint16 tokens, 2 = uint32)")
    dtype = np.dtype(np.uint16 if header[1] == 1 else np.uint32)
    ntok = int(header[2])
    expected = HEADER_BYTES + ntok * dtype.itemsize
    if ntok < 0 or size != expected:
        raise ShardError(f"{path}: the header says {ntok} tokens ({expected} bytes) but the file has "
                         f"{size} bytes; it is truncated or corrupt, rerun prepare.py")
    if ntok == 0:
        return np.zeros(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode='r', offset=HEADER_BYTES, shape=(ntok,))


# prepare.py names its shards <split>_g<run>_<index>.bin, with a run number no file in the folder has used, so
# a run never overwrites the shards meta.json lists; <split>_<index>.bin are from before run numbers
PREPARED = re.compile(r'(?:train|val)_(?:g(\d+)_)?\d{6}\.bin')
LEFTOVER = re.compile(r'(?:train|val)_(?:g\d+_)?\d{6}\.bin\.tmp\d+|meta\.json\.tmp\d*')  # of killed runs


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


def _meta_problem(meta):
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
            raise UsageError(f"{data_dir} holds shards prepare.py wrote ({ours[0]}, ...) but no meta.json: a "
                             f"prepare.py run did not finish; rerun prepare.py (raw llm.c shards are named "
                             f"like fineweb_train_000001.bin)")
        return None
    try:
        with open(path, encoding='utf-8') as f:
            meta = json.load(f)
    except (ValueError, OSError) as e:
        raise UsageError(f"{path} is unreadable ({e}); rerun prepare.py") from None
    problem = _meta_problem(meta)
    if problem:
        raise UsageError(f"{path} {problem}; rerun prepare.py")
    return meta


# -----------------------------------------------------------------------------
# Tokenizers: each has encode(str) -> list[int], decode(ids) -> str, vocab_size, eot_token, name,
# meta() (what meta.json needs to rebuild it) and encode_array(str) -> np.ndarray (the fast path)

EOT = '<|endoftext|>'
# tiktoken's GPT-2 (r50k_base) pre-tokenisation pattern, tiktoken_ext/openai_public.py
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""


def _decode_runs(ids, vocab_size, to_bytes):
    """UTF-8 text of `ids`, with U+FFFD for ids outside the vocabulary (a padded model vocab can emit them)."""
    out, run = [], []
    for i in ids:
        if 0 <= i < vocab_size:
            run.append(i)
        else:
            out += [to_bytes(run), '\ufffd'.encode()]
            run = []
    out.append(to_bytes(run))
    return b''.join(out).decode('utf-8', errors='replace')


class CharTokenizer:
    """One id per character; the vocabulary is the sorted set of the corpus's characters."""
    eot_token = None
    name = 'char'

    def __init__(self, chars):
        self.chars = chars  # a str, sorted by code point, each character once
        self.vocab_size = len(chars)
        self._codes = np.array([ord(c) for c in chars], dtype=np.uint32)

    def encode_array(self, text):
        codes = np.frombuffer(text.encode('utf-32-le'), dtype=np.uint32)  # one code point per character
        ids = np.searchsorted(self._codes, codes)  # vocabulary is sorted, so id = rank of the code point
        unknown = self._codes[np.minimum(ids, self.vocab_size - 1)] != codes if self.vocab_size else codes >= 0
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
    eot_token = None
    name = 'byte'
    vocab_size = 256

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

    def encode_array(self, text):
        # the corpus's text is ordinary text: a literal "<|endoftext|>" in it is not the special token
        return self.enc.encode_to_numpy(text, disallowed_special=())

    def encode(self, text):
        return self.enc.encode(text, allowed_special=self.enc.special_tokens_set)  # prompts may hold EOT

    def decode(self, ids):
        return _decode_runs(ids, self.vocab_size, self.enc.decode_bytes)

    def meta(self):
        return dict(self.info)


def tiktoken_from_file(path, *, pat_str=GPT2_PATTERN, special_tokens=None, sha256=None):
    """A tiktoken Encoding from a local ranks file ("base64-token rank" per line), no network needed.
    By default the GPT-2 pattern, and <|endoftext|> takes the id after the last rank (50256 for GPT-2)."""
    import tiktoken
    try:
        with open(path, 'rb') as f:
            data = f.read()
    except OSError:
        raise UsageError(f"tiktoken ranks file {path!r} not found") from None
    if sha256 and hashlib.sha256(data).hexdigest() != sha256:
        raise UsageError(f"tiktoken ranks file {path!r} changed since prepare.py used it (sha256 differs)")
    try:  # parsed here: tiktoken.load would read through (and write) its download cache
        lines = (line.split() for line in data.splitlines() if line)
        ranks = {base64.b64decode(token, validate=True): int(rank) for token, rank in lines}
    except ValueError:  # also binascii.Error
        ranks = None
    if not ranks:
        raise UsageError(f"{path!r} is not a tiktoken ranks file (lines of 'base64-token rank')")
    missing = [b for b in range(256) if bytes([b]) not in ranks]
    if missing:  # tiktoken would panic (a Rust PanicException, not an Exception) on the first such byte
        raise UsageError(f"{path!r} lacks {len(missing)} of the 256 single-byte tokens (the first: "
                         f"{bytes(missing[:1])!r}); byte-level BPE needs every byte in its ranks")
    if len(set(ranks.values())) != len(ranks):
        raise UsageError(f"{path!r} gives two tokens the same rank; each token needs its own rank")
    special_tokens = special_tokens or {EOT: max(ranks.values()) + 1}
    name = os.path.basename(path).removesuffix('.tiktoken')
    try:
        enc = tiktoken.Encoding(name, pat_str=pat_str, mergeable_ranks=ranks, special_tokens=special_tokens)
    except Exception as e:
        raise UsageError(f"cannot build a tokenizer from {path!r}: {type(e).__name__}: {e}".splitlines()[0]) \
            from None
    info = {'kind': 'tiktoken', 'name': name, 'ranks_file': os.path.abspath(path),
            'ranks_sha256': hashlib.sha256(data).hexdigest(), 'pat_str': pat_str,
            'special_tokens': special_tokens}
    return TiktokenTokenizer(enc, info)


def tiktoken_by_name(name):
    """tiktoken.get_encoding(name): downloads on first use, then reads TIKTOKEN_CACHE_DIR (or its temp dir)."""
    import tiktoken
    names = tiktoken.list_encoding_names()
    if name not in names:
        raise UsageError(f"unknown tokenizer {name!r}; choose char, byte, a tiktoken encoding "
                         f"({', '.join(names)}) or a path to a .tiktoken ranks file")
    try:
        enc = tiktoken.get_encoding(name)
    except Exception as e:  # offline: requests' ConnectionError, or anything else from the download
        raise UsageError(f"tiktoken could not load {name!r} ({type(e).__name__}); offline, pass --tokenizer="
                         f"path/to/{name}.tiktoken or set TIKTOKEN_CACHE_DIR to a copy of its cache") from None
    return TiktokenTokenizer(enc, {'kind': 'tiktoken', 'name': name})


def load_tokenizer(meta):
    """Rebuild the tokenizer that meta.json (as a dict) describes."""
    tok = (meta or {}).get('tokenizer')
    kind = tok.get('kind') if isinstance(tok, dict) else None
    if kind == 'char':
        return CharTokenizer(tok['chars'])
    if kind == 'byte':
        return ByteTokenizer()
    if kind == 'tiktoken' and tok.get('ranks_file'):
        return tiktoken_from_file(tok['ranks_file'], pat_str=tok.get('pat_str', GPT2_PATTERN),
                                  special_tokens=tok.get('special_tokens'), sha256=tok.get('ranks_sha256'))
    if kind == 'tiktoken':
        return tiktoken_by_name(tok['name'])
    raise UsageError(f"meta.json does not describe a tokenizer (tokenizer = {tok!r}); rerun prepare.py")


# -----------------------------------------------------------------------------
# The corpus: a list of documents, each read in blocks so a big corpus is never held whole

SHAKESPEARE_URL = 'https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt'
SHAKESPEARE_SHA256 = '86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed'
SHAKESPEARE_BYTES = 1115394
PIECE_BYTES = 1 << 20  # text is read, decoded and encoded in pieces of about 1 MB
CUT_FREE_CHARS = 1 << 20  # BPE text with no cut point (see _CUT) for this long is cut anyway (bounds memory)


@dataclasses.dataclass
class Doc:
    name: str
    size: int           # bytes
    path: str = None    # read from this file ...
    data: bytes = None  # ... or from memory


def _blocks(doc, start, end):
    with open(doc.path, 'rb') if doc.data is None else io.BytesIO(doc.data) as f:
        f.seek(start)
        while start < end:
            block = f.read(min(PIECE_BYTES, end - start))
            if not block:
                raise UsageError(f"{doc.path} shrank while being read")
            start += len(block)
            yield block


def _sha256_file(path):
    h = hashlib.sha256()
    with open(path, 'rb') as f:
        for block in iter(lambda: f.read(1 << 20), b''):
            h.update(block)
    return h.hexdigest()


def _pydoc_corpus():
    from pydoc_data.topics import topics  # Python's reference manual, in every CPython
    texts = {key: topics[key].encode() for key in sorted(topics)}
    docs = [Doc(f"pydoc_data.topics[{key!r}]", len(data), data=data) for key, data in texts.items()]
    v = sys.version_info
    return docs, {'name': 'pydoc', 'description': f"the Python {v.major}.{v.minor}.{v.micro} reference manual "
                  "(pydoc_data.topics), one document per topic in sorted key order"}


def _shakespeare_corpus(cache_dir):
    path = os.path.join(cache_dir, 'tinyshakespeare.txt')
    if not (os.path.isfile(path) and _sha256_file(path) == SHAKESPEARE_SHA256):
        try:
            with urllib.request.urlopen(SHAKESPEARE_URL, timeout=30) as r:
                data = r.read()
        except OSError as e:  # URLError, timeouts
            raise UsageError(f"cannot download Tiny Shakespeare ({e}); fetch {SHAKESPEARE_URL} "
                             f"yourself and pass --input=path/to/input.txt") from None
        if hashlib.sha256(data).hexdigest() != SHAKESPEARE_SHA256:
            raise UsageError(f"the download of {SHAKESPEARE_URL} has the wrong sha256; "
                             f"pass a good copy with --input=PATH")
        _makedirs(cache_dir)
        atomic_write(path, lambda f: f.write(data))
    return _file_corpus([path])


def _file_corpus(inputs):
    paths = []
    for pattern in inputs:
        if any(c in pattern for c in '*?['):
            matches = sorted(glob.glob(pattern, recursive=True))
            if not matches:
                raise UsageError(f"--input={pattern!r} matches no file")
        elif os.path.exists(pattern):
            matches = [pattern]
        else:
            raise UsageError(f"--input={pattern!r}: no such file or directory")
        for m in matches:
            if not os.path.isdir(m):
                paths.append(m)
                continue
            for root, dirs, names in os.walk(m):  # a directory: every file below it, hidden ones aside
                dirs[:] = sorted(d for d in dirs if not d.startswith('.'))
                paths += [os.path.join(root, n) for n in sorted(names) if not n.startswith('.')]
    unique = list({os.path.realpath(p): p for p in reversed(paths)}.values())[::-1]  # first mention wins
    docs = [Doc(p, os.path.getsize(p), path=p) for p in unique]
    stem = os.path.splitext(os.path.basename(os.path.normpath(inputs[0])))[0]
    source = {'name': re.sub(r'\W+', '_', stem).strip('_') or 'corpus', 'inputs': list(inputs),
              'files': len(docs)}
    if len(docs) == 1 and docs[0].size == SHAKESPEARE_BYTES and _sha256_file(docs[0].path) == SHAKESPEARE_SHA256:
        source.update(name='shakespeare', description='Tiny Shakespeare (karpathy/char-rnn)',
                      url=SHAKESPEARE_URL)
    return [d for d in docs if d.size], source


def plan_split(docs, val_fraction):
    """Where val starts: (document index, byte offset in it, how). Val is the last val_fraction of
    the bytes, cut at the nearest document boundary when one lies within 20% of that size (many
    documents), else after the next newline (else at a character boundary) inside the document."""
    starts = list(itertools.accumulate([d.size for d in docs], initial=0))
    total = starts[-1]
    target = round(total * (1 - val_fraction))  # the first byte of val
    near = min(starts[1:-1], key=lambda b: abs(b - target), default=None)
    if near is not None and abs(near - target) <= 0.2 * (total - target):
        return starts.index(near), 0, 'document'
    i = bisect.bisect_right(starts, target) - 1  # the document that holds the target byte
    if 0 < target < total:
        off = target - starts[i]
        s = max(off - 1, 0)  # search from the byte before, so a target that starts a line stays put
        rest = b''.join(_blocks(docs[i], s, min(docs[i].size, off + (1 << 20))))
        if b'\n' in rest:
            how, off = 'line', s + rest.index(b'\n') + 1
        else:  # step over UTF-8 continuation bytes (0b10xxxxxx) to the start of a character
            skip = next((k for k, b in enumerate(rest[off - s:]) if b & 0xC0 != 0x80), len(rest))
            how, off = 'character', off + skip
        if off < docs[i].size:
            return i, off, how
        if i + 1 < len(docs):
            return i + 1, 0, 'document'
    raise UsageError(f"the corpus ({total} bytes) is too small to split off val_fraction={val_fraction}; "
                     f"add text or change --val_fraction")


# -----------------------------------------------------------------------------
# Decoding and encoding, piece by piece

# Where BPE text may be cut so that encoding it piece by piece (in parallel) gives the ids of encoding it
# whole: where the pre-tokenisation patterns of tiktoken's encodings (GPT-2's, cl100k's, o200k's) all end
# a piece, whatever follows. That is after a letter or digit followed by whitespace, and (for text with
# none: CJK lines ending in 。, minified code) after a newline between two non-whitespace characters. Not
# after whitespace + newline: a text ending in "  \n" makes it one piece (`\s++$`) where GPT-2 splits it
# ("  ", "\n") mid-text; nor before "/": o200k keeps "。\n/" together. test_prepare.py checks all three.
# Char and byte ids do not depend on context, so their text is cut anywhere.
_CUT = re.compile(r'[^\W_](?=\s)|(?<=\S)\n(?=[^\s/])')


def _cut_point(text, start):
    """Index just after the last match of _CUT at or after `start`; 0 if there is none."""
    last = None
    for last in _CUT.finditer(text, max(start, len(text) - 4096)):
        pass
    if last is None:
        for last in _CUT.finditer(text, start):
            pass
    return last.end() if last else 0


def _texts(doc, start, end, errors, *, bpe):
    """Yield (text, bytes read so far) for bytes [start, end) of `doc`, decoded in pieces of about
    PIECE_BYTES; with bpe=True each piece ends at a cut point (see _CUT), up to the next one if needed.
    Text that runs CUT_FREE_CHARS characters (1M) with no cut point (long minified code or JSON, a base64
    blob, one huge run of punctuation) is cut anyway where the block read ends, at a character boundary:
    encoding one pre-token of n bytes takes ~45n bytes of memory, so a piece must stay bounded. Only there
    the ids can differ from encoding the text whole (the tokens of the BPE word or two that straddle such a
    cut); the ids still decode to exactly the text. Text with a cut point every 1M characters (any prose,
    any text with line breaks between non-blank lines) never meets this."""
    decoder = codecs.getincrementaldecoder('utf-8')(errors)
    carry, pos = '', start
    for block in _blocks(doc, start, end):
        pending = len(decoder.getstate()[0])  # bytes of a character split across blocks
        try:
            text = carry + decoder.decode(block, final=pos + len(block) == end)
        except UnicodeDecodeError as e:
            raise UsageError(f"{doc.name}: invalid UTF-8 at byte {pos - pending + e.start}; "
                             f"fix the file or pass --errors=replace") from None
        pos += len(block)
        # the carry holds no cut point, so look only from its last character on (linear, not quadratic)
        cut = _cut_point(text, max(len(carry) - 1, 0)) if bpe and pos < end else len(text)
        if not cut and len(text) >= CUT_FREE_CHARS:  # no cut point in 1M characters: cut anyway (see above)
            cut = len(text)
        if cut:
            yield text[:cut], pos - start
        carry = text[cut:]


class _ShardWriter:
    """Streams one split's tokens into shards of at most `limit` tokens, named <split>_g<run>_<index>.bin:
    names no file in the folder has, invisible to the readers until meta.json lists them (and the header
    says 0 tokens until the shard is complete). Any OSError becomes a one-line UsageError naming the file."""

    def __init__(self, out_dir, split, run, dtype, limit):
        self.out_dir, self.split, self.run, self.dtype, self.limit = out_dir, split, run, np.dtype(dtype), limit
        self.version = 1 if self.dtype == np.uint16 else 2  # the header's: uint16 or uint32 tokens
        self.paths, self.done = [], []  # every file opened; the names of the complete ones
        self.tokens, self.max_id, self.f, self.n = 0, -1, None, 0

    def add(self, ids):
        if len(ids):
            self.max_id = max(self.max_id, int(ids.max()))  # kept in meta.json, checked against vocab_size
        try:
            while len(ids):
                if self.f is None:
                    name = f"{self.split}_g{self.run}_{len(self.done):06d}.bin"
                    self.paths.append(os.path.join(self.out_dir, name))
                    self.f = open(self.paths[-1], 'wb')
                    self.f.write(_header(0, self.version))
                take = ids[:self.limit - self.n]
                self.f.write(take.astype(self.dtype, copy=False).tobytes())
                self.n, ids = self.n + len(take), ids[len(take):]
                if self.n == self.limit:
                    self.close()
        except OSError as e:
            raise _write_error(self.paths[-1], e) from None

    def close(self):
        if self.f is not None:
            try:
                self.f.seek(0)
                self.f.write(_header(self.n, self.version))
                self.f.flush()
                os.fsync(self.f.fileno())  # the data is on disk before meta.json names it
                self.f.close()
            except OSError as e:
                raise _write_error(self.paths[-1], e) from None
            self.done.append(os.path.basename(self.paths[-1]))
            self.tokens, self.f, self.n = self.tokens + self.n, None, 0

    def discard(self):
        """Remove every file this writer made. Closing may raise again (a full disk fails the flush of
        what is still buffered), and is only a means to the removal."""
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


def _write_error(path, e):
    why = e.strerror or str(e) or type(e).__name__
    hint = "; free some space or pass --out_dir=a/disk/with/room" if e.errno == errno.ENOSPC else ""
    return UsageError(f"could not write {path!r}: {why[:1].lower()}{why[1:]}{hint}")


def _ordered_map(fn, items, workers):
    """fn(item) on `workers` threads, results in order, at most 2 * workers pieces in flight (memory)."""
    with ThreadPoolExecutor(workers) as pool:
        pending = collections.deque()
        for item in items:
            pending.append(pool.submit(fn, item))
            if len(pending) >= 2 * workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


# -----------------------------------------------------------------------------
# The command

MIN_SHARD_TOKENS = 1 << 16  # smaller shards only make thousands of files, each too short for many windows

@dataclasses.dataclass
class PrepareConfig:
    dataset: str = 'pydoc'       # 'pydoc' (inside Python, works offline) | 'shakespeare' (downloaded once)
    input: list = dataclasses.field(default_factory=list)  # files, directories, globs; replaces dataset
    tokenizer: str = 'char'      # char (default) | byte | a tiktoken name (gpt2) | path/to/ranks.tiktoken
    out_dir: str = ''            # '' = data/<corpus>_<tokenizer>, e.g. data/pydoc_char
    val_fraction: float = 0.1    # the last 10% of the corpus is the val split
    shard_tokens: int = 100_000_000  # tokens per shard file at most (at least 65,536)
    errors: str = 'strict'       # invalid UTF-8: 'strict' (an error) | 'replace' (with U+FFFD)
    workers: int = 0             # encoding threads; 0 = one per core
    cache_dir: str = 'data/downloads'  # where --dataset=shakespeare is kept

    def __post_init__(self):
        if self.dataset not in ('pydoc', 'shakespeare'):
            raise ValueError(f"unknown dataset {self.dataset!r}; choose pydoc or shakespeare, "
                             f"or pass --input=PATH")
        if not 0 < self.val_fraction < 1:
            raise ValueError(f"val_fraction={self.val_fraction} must be between 0 and 1")
        if not MIN_SHARD_TOKENS <= self.shard_tokens < 2**31:  # tiny shards: thousands of files, few windows
            raise ValueError(f"shard_tokens={self.shard_tokens} must be between {MIN_SHARD_TOKENS:,} and "
                             f"2**31 - 1 (the default is 100,000,000)")
        if self.errors not in ('strict', 'replace'):
            raise ValueError(f"errors={self.errors!r} must be strict or replace")
        if self.workers < 0:
            raise ValueError(f"workers={self.workers} must be >= 0 (0 = one per core)")


def _parts(docs, cut):
    """(split, doc, first byte, end byte) for every document, train first; one document may be cut in two."""
    k, off, _ = cut
    for i, d in enumerate(docs):
        if i < k:
            yield 'train', d, 0, d.size
        elif i == k and off:
            yield 'train', d, 0, off
            yield 'val', d, off, d.size
        else:
            yield 'val', d, 0, d.size


def _make_tokenizer(cfg, parts, several_docs):
    spec = cfg.tokenizer
    if spec == 'char':  # a pass over the corpus finds the vocabulary, and checks its UTF-8 before writing
        chars = {'\n'} if several_docs else set()  # '\n' separates documents
        for _, doc, start, end in parts:
            for text, _ in _texts(doc, start, end, cfg.errors, bpe=False):
                chars.update(text)
        return CharTokenizer(''.join(sorted(chars)))
    if spec == 'byte':
        return ByteTokenizer()
    if spec.endswith('.tiktoken') or os.sep in spec or os.path.isfile(spec):
        return tiktoken_from_file(spec)
    return tiktoken_by_name(spec)


def _makedirs(path):
    """os.makedirs, returning the directories it created (so a failed run can remove them)."""
    created, p = [], os.path.abspath(path)
    while not os.path.exists(p):
        created.append(p)
        p = os.path.dirname(p)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:  # a file in the way, no permission, a read-only or virtual file system
        for d in filter(os.path.isdir, created):  # deepest first
            os.rmdir(d)
        raise UsageError(f"cannot create directory {path!r}: {e.strerror or e}") from None
    return created


def _fsync_dir(path):
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


def _next_run(out_dir):
    """1 + the highest run number among the folder's shard names: the new shards collide with nothing."""
    try:
        names = os.listdir(out_dir)
    except OSError as e:
        raise UsageError(f"cannot read --out_dir={out_dir!r}: {e.strerror or e}") from None
    runs = [int(m.group(1) or 0) for m in map(PREPARED.fullmatch, names) if m]
    return max(runs, default=0) + 1


def _remove_stale(out_dir, keep):
    """Remove prepare.py's files that meta.json does not list: the previous dataset once the new one is
    committed, and what killed runs left. A file that will not go stays (invisible) for the next run."""
    try:
        names = os.listdir(out_dir)
    except OSError:
        return
    for name in names:
        if (PREPARED.fullmatch(name) or LEFTOVER.fullmatch(name)) and name not in keep:
            try:
                os.remove(os.path.join(out_dir, name))
            except OSError as e:
                print(f"prepare: could not remove {name} ({e.strerror}); the next run will", file=sys.stderr)


def _commit(out_dir, meta):
    """Make the new dataset the folder's, in one step: atomically replace meta.json, which lists the new
    shards (complete and fsynced, under names the old meta.json does not use). Until that rename the
    readers see only the old dataset; from it on, only the new one; main then removes the old shards."""
    _fsync_dir(out_dir)  # the new shards' names are durable before a meta.json names them
    atomic_write(os.path.join(out_dir, 'meta.json'),
                 lambda f: f.write(json.dumps(meta, indent=1, ensure_ascii=False).encode()))


def main(argv):
    if '-h' in argv or '--help' in argv:
        print(__doc__.strip())  # then parse_config lists every key with its default
    cfg = parse_config(PrepareConfig, argv)
    t0 = time.time()
    if cfg.input:
        if cfg.dataset != 'pydoc':
            raise UsageError("pass either --dataset or --input, not both")
        docs, source = _file_corpus(cfg.input)
    elif cfg.dataset == 'shakespeare':
        docs, source = _shakespeare_corpus(cfg.cache_dir)
    else:
        docs, source = _pydoc_corpus()
    total = sum(d.size for d in docs)
    if not total:
        raise UsageError(f"the corpus is empty ({', '.join(cfg.input) or cfg.dataset} has no text)")
    source.update(documents=len(docs), bytes=total)
    cut = plan_split(docs, cfg.val_fraction)
    parts = list(_parts(docs, cut))
    tok = _make_tokenizer(cfg, parts, several_docs=len(docs) > 1)
    out_dir = cfg.out_dir or os.path.join('data', f"{source['name']}_{tok.name}")
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise UsageError(f"--out_dir={out_dir!r} is a file")

    sep = [tok.eot_token] if tok.eot_token is not None else tok.encode('\n') if len(docs) > 1 else []
    sep = np.array(sep, dtype=np.uint32)

    def items():  # (split, text, ids that go before the text, bytes read so far), in corpus order
        done = 0
        for n, (split, doc, start, end) in enumerate(parts):
            # <|endoftext|> starts every document (as in llm.c's fineweb.py); '\n' goes between documents
            new_doc = start == 0 and (tok.eot_token is not None or (n > 0 and parts[n - 1][0] == split))
            for text, read in _texts(doc, start, end, cfg.errors, bpe=isinstance(tok, TiktokenTokenizer)):
                yield split, text, sep if new_doc else sep[:0], done + read
                new_doc = False
            done += end - start

    def encode(item):  # runs on a worker thread; tiktoken releases the GIL while it encodes
        split, text, prefix, read = item
        return split, np.concatenate([prefix, tok.encode_array(text)]), read

    created = _makedirs(out_dir)
    try:
        old = read_meta(out_dir)
    except UsageError:  # unreadable or half-written: replaced below, nothing in it is listed to keep
        old = None
    if old and 'shards' in old:  # what killed runs left takes space the new shards need
        _remove_stale(out_dir, {'meta.json', *old['shards']['train'], *old['shards']['val']})
    run = _next_run(out_dir)
    dtype = np.uint16 if tok.vocab_size <= 65535 else np.uint32
    writers = {s: _ShardWriter(out_dir, s, run, dtype, cfg.shard_tokens) for s in ('train', 'val')}
    cores = len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count()
    ntok, last = 0, time.time()
    try:
        for split, ids, read in _ordered_map(encode, items(), cfg.workers or cores):
            writers[split].add(ids)
            ntok, now = ntok + len(ids), time.time()
            if now - last > 2:  # progress, for runs long enough to want it
                last, dt = now, now - t0
                print(f"prepare: {read / 1e6:.0f}/{total / 1e6:.0f} MB, {read / 1e6 / dt:.1f} MB/s, "
                      f"{ntok / 1e6 / dt:.2f}M tokens/s", file=sys.stderr, flush=True)
        for w in writers.values():
            w.close()
        meta = {
            'format_version': 1,
            'tokenizer': tok.meta(),
            'vocab_size': tok.vocab_size,
            'eot_token': tok.eot_token,
            'dtype': np.dtype(dtype).name,
            'source': source,
            'split': {'val_fraction': cfg.val_fraction, 'cut': cut[2]},
            'tokens': {s: w.tokens for s, w in writers.items()},
            'max_id': {s: w.max_id for s, w in writers.items() if w.tokens},
            'run': run,
            'shards': {s: w.done for s, w in writers.items()},
            'command': shlex.join(['python', sys.argv[0], *argv]),
        }
        _commit(out_dir, meta)
    except BaseException as e:  # an error or ^C before the commit: remove what this run wrote, keep the rest
        try:
            committed = (read_meta(out_dir) or {}).get('run') == run  # ^C can land just after the rename
        except UsageError:
            committed = False
        if committed:
            raise
        for w in writers.values():
            w.discard()
        for d in created:
            try:
                os.rmdir(d)  # only if empty
            except OSError:
                pass
        if isinstance(e, OSError):  # reading the input, say; writing the shards raises UsageError
            raise UsageError(f"{e.filename or out_dir}: {e.strerror or e}") from None
        raise
    _fsync_dir(out_dir)  # the new meta.json is durable before the old shards go
    _remove_stale(out_dir, {'meta.json', *meta['shards']['train'], *meta['shards']['val']})
    hint = ' (the default; --tokenizer=gpt2 for BPE)' if cfg.tokenizer == 'char' else ''
    print(f"wrote {writers['train'].tokens:,} train + {writers['val'].tokens:,} val tokens of {source['name']} "
          f"to {out_dir}: tokenizer {tok.name}{hint}, vocab {tok.vocab_size}, "
          f"{total / 1e6 / (time.time() - t0):.1f} MB/s")


if __name__ == "__main__":
    run_main(main)
