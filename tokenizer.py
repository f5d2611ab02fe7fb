"""
Tokenizers: text <-> token ids, and how meta.json (stored in every checkpoint too) describes one so
that sample.py rebuilds exactly the tokenizer a model was trained with.

Each has encode(str) -> list[int], decode(ids) -> str, vocab_size, eot_token, name, meta() (what
meta.json needs to rebuild it) and encode_array(str) -> np.ndarray (the fast path prepare.py uses).
char: the sorted set of the corpus's characters; byte: the 256 UTF-8 byte values; tiktoken: a
byte-level BPE by name (gpt2; downloaded once) or from a local ranks file (no network).
"""
import base64
import glob
import hashlib
import itertools
import os
import pathlib

import numpy as np

from configurator import UsageError


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
        data = pathlib.Path(path).read_bytes()
    except OSError:
        raise UsageError(f"tiktoken ranks file {path!r} not found") from None
    if sha256 and hashlib.sha256(data).hexdigest() != sha256:
        raise UsageError(f"tiktoken ranks file {path!r} changed since prepare.py used it "
                         "(sha256 differs)")
    try:  # parsed here: tiktoken.load would read through (and write) its download cache
        lines = (line.split() for line in data.splitlines() if line)
        ranks = {base64.b64decode(token, validate=True): int(rank) for token, rank in lines}
    except ValueError:  # also binascii.Error
        ranks = None
    if not ranks:
        raise UsageError(f"{path!r} is not a tiktoken ranks file (lines of 'base64-token rank')")
    missing = [b for b in range(256) if bytes([b]) not in ranks]
    if missing:  # tiktoken would panic (a Rust PanicException, not an Exception) on such a byte
        raise UsageError(f"{path!r} lacks {len(missing)} of the 256 single-byte tokens (the first: "
                         f"{bytes(missing[:1])!r}); byte-level BPE needs every byte in its ranks")
    if len(set(ranks.values())) != len(ranks):
        raise UsageError(f"{path!r} gives two tokens the same rank; each token needs its own rank")
    special_tokens = special_tokens or {EOT: max(ranks.values()) + 1}
    name = os.path.basename(path).removesuffix('.tiktoken')
    try:
        enc = tiktoken.Encoding(name, pat_str=pat_str, mergeable_ranks=ranks,
                                special_tokens=special_tokens)
    except Exception as e:
        why = f"{type(e).__name__}: {e}".splitlines()[0]
        raise UsageError(f"cannot build a tokenizer from {path!r}: {why}") from None
    info = {'kind': 'tiktoken', 'name': name, 'ranks_file': os.path.abspath(path),
            'ranks_sha256': hashlib.sha256(data).hexdigest(), 'pat_str': pat_str,
            'special_tokens': special_tokens}
    return TiktokenTokenizer(enc, info)


# the sha256 of the ranks file of an encoding known by name, so that a local copy can stand in for
# it offline, checked: gpt2's ranks are r50k_base's (openaipublic's r50k_base.tiktoken)
KNOWN_RANKS = {'gpt2': '306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930',
               'r50k_base': '306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930'}


def tiktoken_by_name(name, *, flag='--tokenizer'):
    """tiktoken.get_encoding(name): downloaded on first use, then read from TIKTOKEN_CACHE_DIR (or
    its temp dir). Offline, the message names `flag`: the option that takes a local ranks file."""
    import tiktoken
    names = tiktoken.list_encoding_names()
    if name not in names:
        raise UsageError(f"unknown tokenizer {name!r}; choose char, byte, a tiktoken encoding "
                         f"({', '.join(names)}) or a path to a .tiktoken ranks file")
    try:
        enc = tiktoken.get_encoding(name)
    except Exception as e:  # offline: requests' ConnectionError, or anything else from the download
        raise UsageError(f"tiktoken could not load {name!r} ({type(e).__name__}); offline, pass "
                         f"{flag}=path/to/{name}.tiktoken or set TIKTOKEN_CACHE_DIR to a copy "
                         "of its cache") from None
    return TiktokenTokenizer(enc, {'kind': 'tiktoken', 'name': name})


def load_tokenizer(meta, *, ranks_file='', look_in=()):
    """Rebuild the tokenizer that meta.json (as a dict) describes. A BPE ranks file no longer where
    it was (a moved folder, another machine) is `ranks_file` if given, else the *.tiktoken file in
    one of the folders `look_in` whose sha256 is the one recorded."""
    tok = (meta or {}).get('tokenizer')
    kind = tok.get('kind') if isinstance(tok, dict) else None
    if kind == 'char':
        return CharTokenizer(tok['chars'])
    if kind == 'byte':
        return ByteTokenizer()
    if kind == 'tiktoken' and tok.get('ranks_file'):  # a file prepare.py read, its sha256 kept
        path, sha = ranks_file or tok['ranks_file'], tok.get('ranks_sha256')
        if not ranks_file and not os.path.isfile(path):
            path = find_ranks_file(sha, look_in) or path
            if not os.path.isfile(path):
                raise UsageError(f"tiktoken ranks file {tok['ranks_file']!r} is not there any "
                                 f"more (moved?) and no *.tiktoken file with its sha256 "
                                 f"({(sha or '?')[:12]}...) is in "
                                 f"{', '.join(look_in) or 'the folders looked in'}; pass "
                                 f"--ranks_file=path/to/{os.path.basename(tok['ranks_file'])}")
        return tiktoken_from_file(path, pat_str=tok.get('pat_str', GPT2_PATTERN),
                                  special_tokens=tok.get('special_tokens'), sha256=sha)
    if kind == 'tiktoken':  # by name (gpt2): a local ranks file stands in, checked by its sha256
        name, sha = tok['name'], KNOWN_RANKS.get(tok['name'])
        if ranks_file and not os.path.isfile(ranks_file):
            raise UsageError(f"--ranks_file={ranks_file!r} not found (or not a regular file)")
        if ranks_file and sha:
            if hashlib.sha256(pathlib.Path(ranks_file).read_bytes()).hexdigest() != sha:
                raise UsageError(f"--ranks_file={ranks_file!r} is not {name}'s ranks (its sha256 "
                                 f"is not {sha[:12]}...); pass the {name}.tiktoken ranks file")
        path = ranks_file or (find_ranks_file(sha, look_in) if sha else None)
        if path:
            enc = tiktoken_from_file(path, special_tokens={EOT: 50256}, sha256=sha)
            return TiktokenTokenizer(enc.enc, {'kind': 'tiktoken', 'name': name})
        return tiktoken_by_name(name, flag='--ranks_file')
    raise UsageError(f"meta.json does not describe a tokenizer (tokenizer = {tok!r}); "
                     "rerun prepare.py")


def find_ranks_file(sha256, folders):
    """The first *.tiktoken file in `folders` whose contents have this sha256, or None."""
    for folder in folders:
        for path in sorted(glob.glob(os.path.join(folder, '*.tiktoken'))):
            if sha256 and hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest() == sha256:
                return path
    return None


def tokenizer_problem(meta):
    """What is wrong with the tokenizer a meta.json describes, or None: checked before training, so
    that a run whose tokens sample.py could not decode is refused before it trains, not after."""
    tok, vocab = meta.get('tokenizer'), meta.get('vocab_size')
    kind = tok.get('kind') if isinstance(tok, dict) else None
    if kind not in ('char', 'byte', 'tiktoken'):
        return f"does not describe a tokenizer (tokenizer = {tok!r})"
    if kind == 'char':
        chars = tok.get('chars')
        if not isinstance(chars, str) or list(chars) != sorted(set(chars)):
            return "has a character list that is not each character once, in code-point order"
        if len(chars) != vocab:
            return f"lists {len(chars)} characters for vocab_size={vocab}"
    if kind == 'byte' and vocab != 256:
        return f"has vocab_size={vocab} for the byte tokenizer (256)"
    if kind == 'tiktoken' and not isinstance(tok.get('name'), str):
        return f"names no tiktoken encoding (tokenizer = {tok!r})"
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
