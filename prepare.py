"""
Tokenise a text corpus into binary shards that train.py reads.

    python prepare.py                        # Python's reference manual, chars: data/pydoc_char
    python prepare.py --dataset=stdlib       # the standard library, 31 MB, bytes: data/stdlib_byte
    python prepare.py --dataset=shakespeare  # Tiny Shakespeare, downloaded once
    python prepare.py --input=books/ --tokenizer=gpt2     # any UTF-8 text: files, folders, globs
    python prepare.py --input=a.txt --tokenizer=path/to/gpt2.tiktoken  # GPT-2 BPE, no network

Tokenizers: char (the corpus's characters), byte (256 values), or tiktoken: an encoding name such
as gpt2 (downloaded once; offline, set TIKTOKEN_CACHE_DIR to a copy of its cache) or a local
.tiktoken ranks file. The shards (train_000000.bin ..., val_000000.bin ...) are in llm.c's format:
a 256 x int32 header (magic 20240520, version 1 = uint16 tokens or 2 = uint32, token count), then
the tokens. meta.json lists them, says how to rebuild the tokenizer and gives each split's tokens
per byte: train.py reports losses in bits per byte too, so that char, byte and BPE runs compare on
one scale.

A run writes the new dataset whole into .<name>.new/ beside out_dir, then swaps it in
(dataset.DatasetWriter, configurator.swap_in): a reader sees the old dataset or the new one, never a mix;
a failure at any point (an error, a full disk, kill -9) leaves the old one, and the next run finishes
a swap that a kill cut short. Only a folder holding exactly a dataset prepare.py wrote is replaced.
(FineWeb's GPT-2 shards, already tokenised, are a download: fineweb.py.)
"""
import os
import signal

if __name__ == "__main__":  # Ctrl-C while the imports below load: exit 130, quietly
    signal.signal(signal.SIGINT, lambda *_: os._exit(130))

import bisect
import codecs
import dataclasses
import functools
import glob
import hashlib
import io
import itertools
import re
import shlex
import sys
import sysconfig
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from configurator import UsageError, atomic_write, cores, parse_config, require, run_main
from dataset import (ByteTokenizer, CharTokenizer, DatasetWriter, sha256_file, tiktoken_by_name,
                     tiktoken_from_file)


MIN_SHARD_TOKENS = 1 << 16  # smaller shards only make thousands of files, each with few windows
DATASETS = ('pydoc', 'stdlib', 'shakespeare')


@dataclasses.dataclass
class PrepareConfig:
    dataset: str = 'pydoc'     # pydoc | stdlib (both offline) | shakespeare (downloaded once)
    input: list = dataclasses.field(default_factory=list)  # files, folders, globs; replaces dataset
    tokenizer: str = ''        # char | byte | gpt2 | path.tiktoken; '' = stdlib byte, else char
    out_dir: str = ''          # '' = data/<corpus>_<tokenizer>, e.g. data/pydoc_char
    val_fraction: float = 0.1  # the share of the corpus's bytes in the val split
    split: str = 'auto'        # val: hashed (whole files) | last (the end) | auto (hashed for several files)
    shard_tokens: int = 100_000_000  # tokens per shard file at most (at least 65,536)
    errors: str = 'strict'     # invalid UTF-8: 'strict' (an error) | 'replace' (with U+FFFD)
    workers: int = 0           # encoding threads; 0 = one per core
    cache_dir: str = 'data/downloads'  # where --dataset=shakespeare is kept

    def __post_init__(self):
        if self.dataset not in DATASETS:
            raise ValueError(f"unknown dataset {self.dataset!r}; choose {', '.join(DATASETS)}, or "
                             "pass --input=PATH" + (" (FineWeb's GPT-2 shards: python fineweb.py)"
                                                    if self.dataset == 'fineweb' else ""))
        stdlib = self.dataset == 'stdlib' and not self.input
        self.tokenizer = self.tokenizer or ('byte' if stdlib else 'char')
        require(self, 'val_fraction', lambda v: 0 < v < 1, "must be between 0 and 1")
        if not MIN_SHARD_TOKENS <= self.shard_tokens < 2**31:
            raise ValueError(f"shard_tokens={self.shard_tokens} must be between "
                             f"{MIN_SHARD_TOKENS:,} and 2**31 - 1 (the default is 100,000,000)")
        require(self, 'errors', lambda v: v in ('strict', 'replace'), "must be strict or replace")
        require(self, 'split', lambda v: v in ('auto', 'hashed', 'last'),
                "must be auto, hashed or last")
        require(self, 'workers', lambda v: v >= 0, "must be >= 0 (0 = one per core)")


def make_tokenizer(cfg, parts, several_docs):
    spec = cfg.tokenizer
    if spec == 'char':  # a pass over the corpus finds the vocabulary, and checks its UTF-8
        chars = {'\n'} if several_docs else set()  # '\n' separates documents
        for _, doc, start, end in parts:
            for text, _ in texts(doc, start, end, cfg.errors):
                chars.update(text)
        return CharTokenizer(''.join(sorted(chars)))
    if spec == 'byte':
        return ByteTokenizer()
    if spec.endswith('.tiktoken') or os.sep in spec or os.path.exists(spec):
        return tiktoken_from_file(spec)
    return tiktoken_by_name(spec)


def encode(tok, item):
    """A piece's ids after those that go before it, on a worker thread (tiktoken frees the GIL)."""
    split, text, prefix, nbytes = item
    return split, np.concatenate([prefix, tok.encode_array(text)]), nbytes


def main(argv):
    cfg = parse_config(PrepareConfig, argv, doc=__doc__)
    t0, command = time.time(), shlex.join(['python', sys.argv[0], *argv])
    if cfg.input and cfg.dataset != 'pydoc':
        raise UsageError("pass either --dataset or --input, not both")
    docs, source = (file_corpus(cfg.input) if cfg.input else
                    stdlib_corpus() if cfg.dataset == 'stdlib' else
                    shakespeare_corpus(cfg.cache_dir) if cfg.dataset == 'shakespeare' else
                    pydoc_corpus())
    total = sum(d.size for d in docs)
    if not total:
        raise UsageError(f"the corpus is empty ({', '.join(cfg.input) or cfg.dataset} has no text)")
    source.update(documents=len(docs), bytes=total)
    # val: whole documents picked by a hash of their names, spread over the corpus (the stdlib, a
    # folder of your files: not all of one package), or the corpus's last part (one file; pydoc)
    hashed = cfg.split == 'hashed' or cfg.split == 'auto' and (source['name'] == 'stdlib'
                                                               or cfg.input and len(docs) > 1)
    if hashed and len(docs) < 2:
        raise UsageError("--split=hashed picks whole files for val, and this corpus is one; "
                         "use --split=last")
    split = hashed_split(docs, cfg.val_fraction) if hashed else None
    if hashed and split is None:
        print(f"prepare: whole files cannot make val_fraction={cfg.val_fraction:g} within "
              f"{SPLIT_TOLERANCE:.0%} (their sizes are too unequal): val is the last "
              f"{cfg.val_fraction:g} of the bytes instead, as --split=last makes it",
              file=sys.stderr)
    docs, cut = split or (docs, plan_split(docs, cfg.val_fraction))
    parts = list(split_parts(docs, cut))
    tok = make_tokenizer(cfg, parts, several_docs=len(docs) > 1)
    out_dir = cfg.out_dir or os.path.join('data', f"{source['name']}_{tok.name}")
    stream = pieces(parts, tok, cfg.errors)
    threads = cfg.workers or cores()
    dtype = np.uint16 if tok.vocab_size <= 65535 else np.uint32
    ntok, read, last = 0, 0, time.time()
    with DatasetWriter(out_dir, dtype=dtype, shard_tokens=cfg.shard_tokens) as dataset, \
            ThreadPoolExecutor(threads) as pool:
        # pieces encoded 2 per thread at a time, added in corpus order
        for batch in iter(lambda: list(itertools.islice(stream, 2 * threads)), []):
            for split, ids, nbytes in pool.map(functools.partial(encode, tok), batch):
                dataset.add(split, ids, nbytes)
                ntok, read, now = ntok + len(ids), read + nbytes, time.time()
                if now - last > 2:  # progress, for runs long enough to want it
                    last, dt = now, now - t0
                    print(f"prepare: {read / 1e6:.0f}/{total / 1e6:.0f} MB, {read / 1e6 / dt:.1f}"
                          f" MB/s, {ntok / 1e6 / dt:.2f}M tokens/s", file=sys.stderr, flush=True)
        meta = dataset.commit({'format_version': 1, 'tokenizer': tok.meta(),
                               'vocab_size': tok.vocab_size, 'eot_token': tok.eot_token,
                               'dtype': np.dtype(dtype).name, 'source': source,
                               'split': {'val_fraction': cfg.val_fraction, 'cut': cut[2]},
                               'command': command, **dataset.counts()})
    print(f"wrote {meta['tokens']['train']:,} train + {meta['tokens']['val']:,} val tokens of "
          f"{source['name']} to {out_dir}: tokenizer {tok.name}, vocab {tok.vocab_size}, "
          f"{meta['tokens_per_byte']['val']:.3f} val tokens per byte, "
          f"{total / 1e6 / (time.time() - t0):.1f} MB/s")


# -----------------------------------------------------------------------------
# the corpora: documents read in pieces, split into train and val

SHAKESPEARE_URL = 'https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt'
SHAKESPEARE_SHA256 = '86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed'
SHAKESPEARE_BYTES = 1115394
PIECE_BYTES = 1 << 20  # text is read, decoded and encoded in pieces of about 1 MB
SPLIT_TOLERANCE = 0.25  # a split by whole files holds val_fraction within 25% of it, or is not made
PYTHON = '{}.{}.{}'.format(*sys.version_info[:3])


@dataclasses.dataclass
class Doc:
    name: str
    size: int           # bytes
    path: str = None    # read from this file ...
    data: bytes = None  # ... or from memory


def blocks(doc, start, end):
    try:
        f = open(doc.path, 'rb') if doc.data is None else io.BytesIO(doc.data)
    except OSError as e:  # no permission, gone
        raise UsageError(f"cannot read {doc.path!r} ({(e.strerror or str(e)).lower()}); fix it, or "
                         "leave it out of --input") from None
    with f:
        f.seek(start)
        while start < end:
            block = f.read(min(PIECE_BYTES, end - start))
            if not block:
                raise UsageError(f"{doc.path} shrank while being read")
            start += len(block)
            yield block


def pydoc_corpus():
    from pydoc_data.topics import topics  # Python's reference manual, in every CPython
    texts = {key: topics[key].encode() for key in sorted(topics)}
    docs = [Doc(f"pydoc_data.topics[{key!r}]", len(data), data=data) for key, data in texts.items()]
    return docs, {'name': 'pydoc', 'description': f"the Python {PYTHON} reference manual "
                  "(pydoc_data.topics), one document per topic in sorted key order"}


def stdlib_corpus():
    """The .py files of the running interpreter's standard library (site-packages left out), one
    document per file in sorted path order: about 31 MB of real code, whose names are defined and
    used far apart. Files that are not UTF-8 are left out and named; the sha256 covers every path
    and byte, so a result names exactly the corpus it was trained on."""
    root = sysconfig.get_paths()['stdlib']
    paths = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(set(dirs) - {'site-packages', 'dist-packages', '__pycache__'})
        paths += [os.path.relpath(os.path.join(folder, n), root) for n in names
                  if n.endswith('.py')]
    docs, skipped, h = [], [], hashlib.sha256()
    for rel in sorted(p.replace(os.sep, '/') for p in paths):
        try:
            with open(os.path.join(root, rel), 'rb') as f:
                data = f.read()
            data.decode('utf-8')
        except (OSError, UnicodeDecodeError):  # unreadable, or not UTF-8: not part of the corpus
            skipped.append(rel)
            continue
        if data:  # (an empty __init__.py: no text, no document)
            h.update(rel.encode() + b'\0' + len(data).to_bytes(8, 'little') + data)
            docs.append(Doc(rel, len(data), data=data))
    impl = sys.implementation.name
    return docs, {'name': 'stdlib', 'python': f"{impl} {PYTHON}", 'root': root, 'files': len(docs),
                  'bytes': sum(d.size for d in docs), 'sha256': h.hexdigest(), 'skipped': skipped,
                  'description': f"the .py files of the {impl} {PYTHON} standard library "
                  "(site-packages excluded), one document per file in sorted path order"}


def hashed_split(docs, val_fraction):
    """(docs as train then val, the cut), or None. Val takes documents in the order of their names'
    sha256 (a spread of the corpus, the same on every machine) while they fit val_fraction of the
    bytes, until they hold it; None when whole documents cannot come within SPLIT_TOLERANCE."""
    order = sorted(range(len(docs)),
                   key=lambda i: hashlib.sha256(docs[i].name.encode()).hexdigest())
    val, size, total = set(), 0, sum(d.size for d in docs)
    target = val_fraction * total
    for i in order:
        if size >= target or len(val) == len(docs) - 1:
            break
        if size + docs[i].size <= target * (1 + SPLIT_TOLERANCE):
            val.add(i)
            size += docs[i].size
    if not val or abs(size - target) > SPLIT_TOLERANCE * target:
        return None
    train = [d for i, d in enumerate(docs) if i not in val]
    return train + [d for i, d in enumerate(docs) if i in val], (len(train), 0, 'hashed documents')


def shakespeare_corpus(cache_dir):
    path = os.path.join(cache_dir, 'tinyshakespeare.txt')
    if not (os.path.isfile(path) and sha256_file(path) == SHAKESPEARE_SHA256):
        try:
            with urllib.request.urlopen(SHAKESPEARE_URL, timeout=30) as r:
                data = r.read()
        except OSError as e:  # URLError, timeouts
            raise UsageError(f"cannot download Tiny Shakespeare ({e}); offline, put a copy of "
                             f"{SHAKESPEARE_URL} at {path}") from None
        if hashlib.sha256(data).hexdigest() != SHAKESPEARE_SHA256:
            raise UsageError(f"the download of {SHAKESPEARE_URL} has the wrong sha256; put a good "
                             f"copy at {path}")
        os.makedirs(cache_dir, exist_ok=True)
        atomic_write(path, lambda f: f.write(data))
    docs, source = file_corpus([path])
    return docs, {**source, 'name': 'shakespeare', 'url': SHAKESPEARE_URL,
                  'description': 'Tiny Shakespeare (karpathy/char-rnn)'}


def file_corpus(inputs):
    """Every file the inputs name, one document each: a file named is read as given (a pipe to its
    end); folders are walked in sorted order and globs expanded, where only regular files count
    (hidden entries left out; a FIFO, socket or device skipped, said, as grep -r does) and a
    dataset's folder (meta.json: prepare.py's own output too) is never read as text."""
    paths, skipped = [], []

    def found(path):  # a file a walk or a glob came upon
        if os.path.exists(path) and not os.path.isfile(path):
            skipped.append(f"{path} (not a regular file)")
        else:
            paths.append(path)
    for name in inputs:
        matches = sorted(glob.glob(name, recursive=True)) if glob.has_magic(name) else [name]
        if not matches or not os.path.lexists(matches[0]):
            raise UsageError(f"--input={name!r}: no such file or directory")
        for m in matches:
            if not os.path.isdir(m):
                (found if glob.has_magic(name) else paths.append)(m)
            for root, dirs, names in os.walk(m):  # (none for a file)
                if os.path.isfile(os.path.join(root, 'meta.json')):
                    skipped.append(f"{root}/ (a dataset)")
                    dirs[:] = []
                    continue
                dirs[:] = sorted(d for d in dirs if not d.startswith('.'))
                for n in sorted(names):
                    if not n.startswith('.'):
                        found(os.path.join(root, n))
    if skipped:
        print(f"prepare: skipped {', '.join(skipped[:5])}{', ...' if skipped[5:] else ''}",
              file=sys.stderr)
    docs = []
    for p in dict.fromkeys(paths):  # each file once, however often named
        try:  # a device or a pipe has no size: read now, as any tool reads it
            data = None if os.path.isfile(p) else open(p, 'rb').read()
            docs.append(Doc(p, len(data) if data is not None else os.path.getsize(p), p, data))
        except OSError as e:  # a dangling link, no permission
            raise UsageError(f"cannot read {p!r} ({(e.strerror or str(e)).lower()}); fix it, or "
                             "leave it out of --input") from None
    stem = os.path.splitext(os.path.basename(os.path.normpath(inputs[0])))[0]
    return [d for d in docs if d.size], {'name': re.sub(r'\W+', '_', stem).strip('_') or 'corpus',
                                         'inputs': list(inputs), 'files': len(docs)}


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
        rest = b''.join(blocks(docs[i], s, min(docs[i].size, off + (1 << 20))))
        line = rest.find(b'\n') + 1  # a newline within 1 MB that leaves val some text
        if 0 < line and s + line < docs[i].size:
            how, off = 'line', s + line
        else:  # step over UTF-8 continuation bytes (0b10xxxxxx) to the start of a character
            skip = next((k for k, b in enumerate(rest[off - s:]) if b & 0xC0 != 0x80), len(rest))
            how, off = 'character', off + skip
        if off < docs[i].size:
            return i, off, how
        if i + 1 < len(docs):
            return i + 1, 0, 'document'
    raise UsageError(f"the corpus ({total} bytes) is too small to split off "
                     f"val_fraction={val_fraction}; add text or change --val_fraction")


def texts(doc, start, end, errors):
    """(text, bytes read so far) for bytes [start, end) of `doc`, in pieces of about PIECE_BYTES
    cut after a newline (a piece without one is cut where it ends). Encoded piece by piece, BPE
    ids can differ from those of the whole text at a cut (a pre-token across it is two); they
    decode to exactly the text."""
    decoder = codecs.getincrementaldecoder('utf-8')(errors)
    carry, pos = '', start
    for block in blocks(doc, start, end):
        pending = len(decoder.getstate()[0])  # bytes of a character split across blocks
        try:
            text = carry + decoder.decode(block, final=pos + len(block) == end)
        except UnicodeDecodeError as e:
            raise UsageError(f"{doc.name}: invalid UTF-8 at byte {pos - pending + e.start}; "
                             f"fix the file or pass --errors=replace") from None
        pos += len(block)
        cut = (text.rfind('\n') + 1 or len(text)) if pos < end else len(text)
        yield text[:cut], pos - start
        carry = text[cut:]


def split_parts(docs, cut):
    """(split, doc, first byte, end byte) for every document, train first; one may be cut in two."""
    k, off, _ = cut
    for i, d in enumerate(docs):
        if i < k:
            yield 'train', d, 0, d.size
        elif i == k and off:
            yield 'train', d, 0, off
            yield 'val', d, off, d.size
        else:
            yield 'val', d, 0, d.size


def pieces(parts, tok, errors):
    """(split, text, ids that go before it, the bytes they stand for) in corpus order. <|endoftext|>
    starts every document (as in llm.c's fineweb.py), else '\\n' goes between documents: one byte
    of text, where <|endoftext|> is none (the bytes are what bits per byte divide by)."""
    eot = tok.eot_token is not None
    for n, (split, doc, start, end) in enumerate(parts):
        new_doc = start == 0 and (eot or (n > 0 and parts[n - 1][0] == split))
        before = 0
        for text, read in texts(doc, start, end, errors):
            sep = ([tok.eot_token] if eot else tok.encode('\n')) if new_doc else []
            yield split, text, np.array(sep, dtype=np.uint32), read - before + int(new_doc and not eot)
            new_doc, before = False, read


if __name__ == "__main__":
    run_main(main)
