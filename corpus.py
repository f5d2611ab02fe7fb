"""
The text prepare.py tokenises: a corpus is a list of documents (files, or bytes in memory), read in
pieces of about 1 MB so a large corpus is never held whole, split into train and val, and cut into
pieces that encode in parallel to exactly the ids of the whole text.
"""
import bisect
import codecs
import collections
import dataclasses
import glob
import hashlib
import io
import itertools
import json
import os
import re
import stat
import sys
import sysconfig
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from configurator import UsageError, atomic_write
from data import PREPARED, makedirs

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


def blocks(doc, start, end):
    with open(doc.path, 'rb') if doc.data is None else io.BytesIO(doc.data) as f:
        f.seek(start)
        while start < end:
            block = f.read(min(PIECE_BYTES, end - start))
            if not block:
                raise UsageError(f"{doc.path} shrank while being read")
            start += len(block)
            yield block


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, 'rb') as f:
        for block in iter(lambda: f.read(1 << 20), b''):
            h.update(block)
    return h.hexdigest()


def pydoc_corpus():
    from pydoc_data.topics import topics  # Python's reference manual, in every CPython
    texts = {key: topics[key].encode() for key in sorted(topics)}
    docs = [Doc(f"pydoc_data.topics[{key!r}]", len(data), data=data) for key, data in texts.items()]
    v = sys.version_info
    return docs, {'name': 'pydoc', 'description': f"the Python {v.major}.{v.minor}.{v.micro} "
                                                  "reference manual (pydoc_data.topics), one "
                                                  "document per topic in sorted key order"}


def stdlib_corpus():
    """The running interpreter's standard library: every .py file under sysconfig's stdlib folder, its test
    suite included and vendored packages (site-packages) left out, one document per file in sorted relative
    path order. About 31 MB on CPython 3.11: real code, whose names are defined and used far apart. A file
    that is not UTF-8 (a few encoding tests) is left out and named. The sha256 covers every path and byte,
    so a result names exactly the corpus it was trained on."""
    root = sysconfig.get_paths()['stdlib']
    paths = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in ('site-packages', 'dist-packages', '__pycache__'))
        paths += [os.path.relpath(os.path.join(folder, n), root) for n in names if n.endswith('.py')]
    docs, skipped, h = [], [], hashlib.sha256()
    for rel in sorted(p.replace(os.sep, '/') for p in paths):
        try:
            with open(os.path.join(root, rel), 'rb') as f:
                data = f.read()
            data.decode('utf-8')
        except (OSError, UnicodeDecodeError):  # unreadable, or not UTF-8: not part of the corpus
            skipped.append(rel)
            continue
        if not data:  # an empty __init__.py: no text, no document
            continue
        h.update(rel.encode() + b'\0' + len(data).to_bytes(8, 'little') + data)
        docs.append(Doc(rel, len(data), data=data))
    v, impl = sys.version_info, sys.implementation.name
    return docs, {'name': 'stdlib', 'python': f"{impl} {v.major}.{v.minor}.{v.micro}", 'root': root,
                  'files': len(docs), 'bytes': sum(d.size for d in docs), 'sha256': h.hexdigest(),
                  'skipped': skipped, 'description': f"the .py files of the {impl} {v.major}.{v.minor}.{v.micro} "
                  "standard library (site-packages excluded), one document per file in sorted path order"}


SPLIT_TOLERANCE = 0.25  # a split by whole files holds val_fraction of the bytes within 25% of it, or is not made


def hashed_split(docs, val_fraction):
    """(docs reordered, the cut), or None: val is documents taken in the order of their names' sha256 (a
    spread of the whole corpus, the same on every machine) while they fit val_fraction of the bytes
    (SPLIT_TOLERANCE over it at most), until they hold it. None when whole documents cannot come within
    SPLIT_TOLERANCE of it (files of very unequal sizes): the caller cuts inside one instead. Train documents
    come first, then val, each in their original order."""
    order = sorted(range(len(docs)), key=lambda i: hashlib.sha256(docs[i].name.encode()).hexdigest())
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
            raise UsageError(f"cannot download Tiny Shakespeare ({e}); fetch {SHAKESPEARE_URL} "
                             f"yourself and pass --input=path/to/input.txt") from None
        if hashlib.sha256(data).hexdigest() != SHAKESPEARE_SHA256:
            raise UsageError(f"the download of {SHAKESPEARE_URL} has the wrong sha256; "
                             f"pass a good copy with --input=PATH")
        makedirs(cache_dir)
        atomic_write(path, lambda f: f.write(data))
    return file_corpus([path])


def file_corpus(inputs):
    """Every file the inputs name (files, directories walked in sorted order, globs), one document each.
    A directory walk leaves out hidden files and every folder prepare.py wrote (meta.json beside shards:
    its own output, when out_dir lies inside the input). A pipe (--input=/dev/stdin) is read whole; a
    file that cannot be read (a dangling link, no permission) is a UsageError naming it."""
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
                if 'meta.json' in names and any(PREPARED.fullmatch(n) for n in names):
                    print(f"prepare: leaving out {root}: a dataset prepare.py wrote", file=sys.stderr)
                    dirs[:] = []
                    continue
                dirs[:] = sorted(d for d in dirs if not d.startswith('.'))
                paths += [os.path.join(root, n) for n in sorted(names) if not n.startswith('.')]
    unique = list({os.path.realpath(p): p for p in reversed(paths)}.values())[::-1]  # first mention wins
    named = {os.path.realpath(m) for m in inputs if os.path.exists(m) and not os.path.isdir(m)}
    special = [p for p in unique if os.path.exists(p) and not os.path.isfile(p)]
    walked = [p for p in special if os.path.realpath(p) not in named]
    if walked:  # a device, pipe or socket (or a link to one) found in a folder: never read (it may not end)
        print(f"prepare: leaving out {len(walked)} entr{'y' if len(walked) == 1 else 'ies'} that are not regular "
              f"files (devices, pipes, sockets, links to them): {', '.join(walked[:3])}"
              f"{' ...' if len(walked) > 3 else ''}", file=sys.stderr)
    for p in special:
        if os.path.realpath(p) in named and not stat.S_ISFIFO(os.stat(p).st_mode):
            raise UsageError(f"--input={p!r} is not a regular file (a device or socket: reading it may never "
                             "end); name a file, a folder, or a pipe such as /dev/stdin")
    unique = [p for p in unique if p not in walked]
    docs = []
    for p in unique:
        try:
            if not os.path.exists(p):  # a dangling link
                raise FileNotFoundError(2, 'no such file or directory')
            if not os.access(p, os.R_OK):
                raise PermissionError(13, 'permission denied')
            if os.path.isfile(p):
                docs.append(Doc(p, os.path.getsize(p), path=p))
            else:  # a pipe or a device: its size is 0 until read
                with open(p, 'rb') as f:
                    data = f.read()
                docs.append(Doc(p, len(data), data=data))
        except OSError as e:
            raise UsageError(f"cannot read {p!r} ({(e.strerror or str(e)).lower()}); fix it, or "
                             "leave it out of --input") from None
    stem = os.path.splitext(os.path.basename(os.path.normpath(inputs[0])))[0]
    source = {'name': re.sub(r'\W+', '_', stem).strip('_') or 'corpus', 'inputs': list(inputs),
              'files': len(docs)}
    if len(docs) == 1 and docs[0].size == SHAKESPEARE_BYTES and docs[0].path and \
            sha256_file(docs[0].path) == SHAKESPEARE_SHA256:
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
        rest = b''.join(blocks(docs[i], s, min(docs[i].size, off + (1 << 20))))
        if b'\n' in rest:
            how, off = 'line', s + rest.index(b'\n') + 1
        else:  # step over UTF-8 continuation bytes (0b10xxxxxx) to the start of a character
            skip = next((k for k, b in enumerate(rest[off - s:]) if b & 0xC0 != 0x80), len(rest))
            how, off = 'character', off + skip
        if off < docs[i].size:
            return i, off, how
        if i + 1 < len(docs):
            return i + 1, 0, 'document'
    raise UsageError(f"the corpus ({total} bytes) is too small to split off "
                     f"val_fraction={val_fraction}; add text or change --val_fraction")


# -----------------------------------------------------------------------------
# Decoding and encoding, piece by piece

# Where BPE text may be cut so that encoding it piece by piece (in parallel) gives the ids of
# encoding it
# whole: where the pre-tokenisation patterns of tiktoken's encodings (GPT-2's, cl100k's, o200k's)
# all end
# a piece, whatever follows. That is after a letter or digit followed by whitespace, and (for text
# with
# none: CJK lines ending in 。, minified code) after a newline between two non-whitespace characters.
# Not
# after whitespace + newline: a text ending in "  \n" makes it one piece (`\s++$`) where GPT-2
# splits it
# ("  ", "\n") mid-text; nor before "/": o200k keeps "。\n/" together. test_prepare.py checks all
# three.
# Char and byte ids do not depend on context, so their text is cut anywhere.
_CUT = re.compile(r'[^\W_](?=\s)|(?<=\S)\n(?=[^\s/])')


def cut_point(text, start):
    """Index just after the last match of _CUT at or after `start`; 0 if there is none."""
    last = None
    for last in _CUT.finditer(text, max(start, len(text) - 4096)):
        pass
    if last is None:
        for last in _CUT.finditer(text, start):
            pass
    return last.end() if last else 0


def texts(doc, start, end, errors, *, bpe):
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
    for block in blocks(doc, start, end):
        pending = len(decoder.getstate()[0])  # bytes of a character split across blocks
        try:
            text = carry + decoder.decode(block, final=pos + len(block) == end)
        except UnicodeDecodeError as e:
            raise UsageError(f"{doc.name}: invalid UTF-8 at byte {pos - pending + e.start}; "
                             f"fix the file or pass --errors=replace") from None
        pos += len(block)
        # the carry holds no cut point, so look only from its last character on (linear, not
        # quadratic)
        cut = cut_point(text, max(len(carry) - 1, 0)) if bpe and pos < end else len(text)
        if not cut and len(text) >= CUT_FREE_CHARS:  # no cut point in 1M characters: cut anyway (see above)
            cut = len(text)
        if cut:
            yield text[:cut], pos - start
        carry = text[cut:]



def ordered_map(fn, items, workers):
    """fn(item) on `workers` threads, results in order, at most 2 * workers pieces in flight (memory)."""
    with ThreadPoolExecutor(workers) as pool:
        pending = collections.deque()
        for item in items:
            pending.append(pool.submit(fn, item))
            if len(pending) >= 2 * workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()



def split_parts(docs, cut):
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


def pieces(parts, *, sep, sep_bytes, eot, errors, bpe):
    """(split, text, ids that go before the text, the bytes they stand for) in corpus order. With an
    end-of-text token (`eot`) `sep` starts every document, as in llm.c's fineweb.py; else it goes between
    documents. The bytes are the text's bytes in the corpus, plus `sep_bytes` for a separator ('\\n': 1;
    <|endoftext|> is no text: 0): what bits per byte divide by."""
    for n, (split, doc, start, end) in enumerate(parts):
        new_doc = start == 0 and (eot or (n > 0 and parts[n - 1][0] == split))
        before = 0
        for text, read in texts(doc, start, end, errors, bpe=bpe):
            yield split, text, sep if new_doc else sep[:0], read - before + (sep_bytes if new_doc else 0)
            new_doc, before = False, read


# -----------------------------------------------------------------------------
# FineWeb, already tokenised: llm.c's shards of GPT-2 tokens, downloaded (the GPU user's corpus)

FINEWEB = dict(repo='kjj0/fineweb10B-gpt2', val='fineweb_val_000000.bin', train='fineweb_train_{:06d}.bin',
               shards=103, description="FineWeb's 10B-token sample (HuggingFaceFW/fineweb, sample-10BT) as GPT-2 "
                                       "tokens in llm.c's shard format, 100M tokens a shard (modded-nanogpt's)")


def fetch_fineweb(out_dir, train_shards):
    """Download the val shard and the first `train_shards` train shards of FINEWEB into out_dir (each into
    NAME.partial, resumed where an interrupted run left it, with a progress bar), check each (magic,
    version, token count against the file's size) before it counts, and return the dataset's meta: the
    caller commits it as meta.json. A shard already there and whole is not fetched again. Through
    huggingface_hub (its HTTP, retries and progress bar; HF_ENDPOINT names a mirror), imported only here."""
    from data import ShardError, load_shard

    def problem(path):  # what makes a file not a shard of GPT-2 tokens, or None
        try:
            tokens = load_shard(path)
        except ShardError as e:
            return str(e).split(': ', 1)[-1]
        if len(tokens) == 0:
            return "it holds no tokens"
        top = int(tokens.max())
        return f"it holds token id {top}, beyond GPT-2's 50,257" if top >= 50257 else None
    try:
        from huggingface_hub import get_hf_file_metadata, hf_hub_url
        from huggingface_hub.file_download import http_get
    except ImportError:
        raise UsageError("--dataset=fineweb downloads through huggingface_hub, which is not installed: "
                         "pip install huggingface_hub") from None
    endpoint = os.environ.get('HF_ENDPOINT') or None  # read now, not when huggingface_hub was imported
    names = [FINEWEB['val']] + [FINEWEB['train'].format(i) for i in range(1, train_shards + 1)]
    try:
        with open(os.path.join(out_dir, 'meta.json')) as f:
            files = dict(json.load(f)['source']['files'])  # the etags of the shards fetched before
    except (OSError, ValueError, KeyError, TypeError):
        files = {}
    for name in names:
        path = os.path.join(out_dir, name)
        url = hf_hub_url(FINEWEB['repo'], name, repo_type='dataset', endpoint=endpoint)
        whole = os.path.isfile(path) and problem(path) is None  # (else fetched again)
        if whole and name in files:  # fetched, whole and committed before: no network needed
            continue
        try:
            info = get_hf_file_metadata(url, endpoint=endpoint)
            files[name] = (info.etag or '').strip('"')
            if whole and os.path.getsize(path) == info.size:
                continue
            partial = path + '.partial'
            done = os.path.getsize(partial) if os.path.isfile(partial) else 0
            if done > (info.size or 0):  # longer than the file: not a piece of this one
                os.remove(partial)
                done = 0
            with open(partial, 'ab') as f:
                http_get(url, f, resume_size=done, expected_size=info.size, displayed_filename=name)
                f.flush()
                os.fsync(f.fileno())
        except Exception as e:  # whatever the download raises (no network, HTTP errors, a full disk)
            if isinstance(e, UsageError):
                raise
            raise UsageError(f"could not download {name} from {url} ({type(e).__name__}: "
                             f"{str(e).splitlines()[0][:160] if str(e) else 'no detail'}); what is fetched is "
                             "kept: rerun to go on (HF_ENDPOINT=... names a mirror)") from None
        why = problem(partial)
        if why:  # a corrupt download never counts: removed, so a rerun fetches it again
            os.remove(partial)
            raise UsageError(f"{name} from {url} is not a whole shard of GPT-2 tokens ({why}); it is "
                             "removed: rerun to fetch it again")
        os.replace(partial, path)
    shards = {'val': names[:1], 'train': names[1:]}
    tokens = {s: sum(len(load_shard(os.path.join(out_dir, n))) for n in shards[s]) for s in shards}
    max_id = {s: max(int(load_shard(os.path.join(out_dir, n)).max()) for n in shards[s]) for s in shards}
    files = {n: files.get(n) for n in names}
    return {'format_version': 1, 'tokenizer': {'kind': 'tiktoken', 'name': 'gpt2'}, 'vocab_size': 50257,
            'eot_token': 50256, 'dtype': 'uint16',
            'source': {'name': 'fineweb10B', 'repo': FINEWEB['repo'], 'description': FINEWEB['description'],
                       'url': f"https://huggingface.co/datasets/{FINEWEB['repo']}", 'files': files},
            'split': {'cut': "the dataset's own val shard"}, 'tokens': tokens, 'max_id': max_id, 'shards': shards,
            'bits_per_byte': "unknown: the shards hold GPT-2 tokens without the byte count of their text"}


# -----------------------------------------------------------------------------
# HellaSwag's items (eval.py scores them; sweep.py checks them before any run trains)

def read_hellaswag(path, limit=0):
    """[(context, [4 endings], label)] from HellaSwag's jsonl ('ctx', 'endings', 'label' per line), the
    first `limit` (0: all); a path that is not a regular file, or a line that is not such an item (4
    non-empty string endings in a list, an integer label 0-3), is a UsageError naming it."""
    if not os.path.isfile(path):
        raise UsageError(f"{path!r} is not a regular file of HellaSwag items" if os.path.exists(path) else
                         f"{path!r} not found")
    items = []
    with open(path, 'rb') as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                d = json.loads(line)
                ctx, endings, label = d['ctx'], d['endings'], d['label']
                if isinstance(label, str) and label.strip().isdigit():  # some copies write "2"
                    label = int(label)
                ok = (isinstance(ctx, str) and isinstance(endings, list) and len(endings) == 4
                      and all(isinstance(e, str) and e for e in endings)
                      and isinstance(label, int) and not isinstance(label, bool) and 0 <= label < 4)
            except (ValueError, KeyError, TypeError):
                ok = False
            if not ok:
                raise UsageError(f"{path} line {n} is not a HellaSwag item (ctx, a list of 4 endings, an "
                                 "integer label 0-3)")
            items.append((ctx, endings, label))
            if limit and len(items) == limit:
                break
    if not items:
        raise UsageError(f"{path} holds no items")
    return items
