"""
Tokenise a text corpus into binary shards that train.py reads.

    python prepare.py                        # Python's reference manual, char-level: data/pydoc_char
    python prepare.py --dataset=stdlib       # Python's standard library, 31 MB, bytes: data/stdlib_byte
    python prepare.py --dataset=shakespeare  # Tiny Shakespeare, downloaded once
    python prepare.py --input=books/ --tokenizer=gpt2  # any UTF-8 text: files, directories, globs
    python prepare.py --input=a.txt --tokenizer=path/to/gpt2.tiktoken  # GPT-2 BPE, no network

Tokenizers: char (the sorted set of the corpus's characters, kept in meta.json), byte (256 values:
the stdlib corpus's default), or tiktoken: an encoding name such as gpt2 (tiktoken downloads it
once; offline, point TIKTOKEN_CACHE_DIR at a copy of its cache) or a local ranks file ending in
.tiktoken. Output: train_g1_000000.bin ... and val_g1_000000.bin ... (g<run>: a new number in each
run) in the llm.c / modded-nanogpt shard format (a 256 x int32 header: magic 20240520, version 1 =
uint16 tokens or 2 = uint32, token count; then the tokens), and meta.json, which lists the shards
and says how to rebuild the tokenizer, and the tokens per byte of each split: train.py reports every
loss in bits per byte too, so runs at char, byte and BPE level compare on one scale. Rerunning into
the same folder is safe: the new shards go beside the old ones under new names, and the atomic
replacement of meta.json switches the folder from the old dataset to the new in one step (the
readers use only the shards meta.json lists); only then are the old shards removed. So a failure at
any point (an error, a full disk, kill -9, a power cut) leaves the complete old dataset or the
complete new one, at the cost of room for both while the new one is written.
"""
import os
import signal

if __name__ == "__main__":  # Ctrl-C while the imports below load (torch takes seconds): exit 130, quietly
    signal.signal(signal.SIGINT, lambda *_: os._exit(130))

import dataclasses
import functools
import json
import shlex
import sys
import time

import numpy as np

from configurator import UsageError, atomic_write, lock_folder, parse_config, require, run_main
from corpus import (FINEWEB, SPLIT_TOLERANCE, fetch_fineweb, file_corpus, hashed_split, ordered_map, pieces, plan_split,
                    pydoc_corpus, shakespeare_corpus, split_parts, stdlib_corpus, texts)
from data import DatasetWriter, makedirs
from tokenizer import (ByteTokenizer, CharTokenizer, TiktokenTokenizer, tiktoken_by_name,
                       tiktoken_from_file)

MIN_SHARD_TOKENS = 1 << 16  # smaller shards only make thousands of files, each with few windows
DATASETS = ('pydoc', 'stdlib', 'shakespeare', 'fineweb')


@dataclasses.dataclass
class PrepareConfig:
    dataset: str = 'pydoc'       # pydoc | stdlib (both inside Python: offline) | shakespeare | fineweb (downloaded)
    train_shards: int = 1        # fineweb: train shards to download, 100M GPT-2 tokens (200 MB) each, 1..103
    input: list = dataclasses.field(default_factory=list)  # files, directories, globs; replaces dataset
    tokenizer: str = ''          # char | byte | tiktoken name (gpt2) | path.tiktoken; '' = stdlib byte, else char
    out_dir: str = ''            # '' = data/<corpus>_<tokenizer>, e.g. data/pydoc_char
    val_fraction: float = 0.1    # the share of the corpus's bytes in the val split
    split: str = 'auto'          # val: 'hashed' (whole files, picked by a hash of their names), 'last' (the end); auto: hashed for several files
    shard_tokens: int = 100_000_000  # tokens per shard file at most (at least 65,536)
    errors: str = 'strict'       # invalid UTF-8: 'strict' (an error) | 'replace' (with U+FFFD)
    workers: int = 0             # encoding threads; 0 = one per core
    cache_dir: str = 'data/downloads'  # where --dataset=shakespeare is kept

    def __post_init__(self):
        if self.dataset not in DATASETS:
            raise ValueError(f"unknown dataset {self.dataset!r}; choose {', '.join(DATASETS)}, or pass "
                             "--input=PATH")
        stdlib = self.dataset == 'stdlib' and not self.input
        if self.dataset == 'fineweb' and self.tokenizer not in ('', 'gpt2'):
            raise ValueError(f"--dataset=fineweb is GPT-2 tokens already; leave out --tokenizer={self.tokenizer}")
        self.tokenizer = self.tokenizer or ('byte' if stdlib else 'gpt2' if self.dataset == 'fineweb' else 'char')
        require(self, 'train_shards', lambda v: 1 <= v <= FINEWEB['shards'], f"must be in 1..{FINEWEB['shards']}")
        require(self, 'val_fraction', lambda v: 0 < v < 1, "must be between 0 and 1")
        if not MIN_SHARD_TOKENS <= self.shard_tokens < 2**31:  # tiny: thousands of files, few windows
            raise ValueError(f"shard_tokens={self.shard_tokens} must be between "
                             f"{MIN_SHARD_TOKENS:,} and 2**31 - 1 (the default is 100,000,000)")
        require(self, 'errors', lambda v: v in ('strict', 'replace'), "must be strict or replace")
        require(self, 'split', lambda v: v in ('auto', 'hashed', 'last'), "must be auto, hashed or last")
        require(self, 'workers', lambda v: v >= 0, "must be >= 0 (0 = one per core)")


def make_tokenizer(cfg, parts, several_docs):
    spec = cfg.tokenizer
    if spec == 'char':  # a pass over the corpus finds the vocabulary, and checks its UTF-8
        chars = {'\n'} if several_docs else set()  # '\n' separates documents
        for _, doc, start, end in parts:
            for text, _ in texts(doc, start, end, cfg.errors, bpe=False):
                chars.update(text)
        return CharTokenizer(''.join(sorted(chars)))
    if spec == 'byte':
        return ByteTokenizer()
    if spec.endswith('.tiktoken') or os.sep in spec or os.path.isfile(spec):
        return tiktoken_from_file(spec)
    return tiktoken_by_name(spec)


def encode(tok, item):
    """One piece of text as token ids, after the ids that go before it. Runs on a worker thread:
    tiktoken releases the GIL while it encodes."""
    split, text, prefix, nbytes = item
    return split, np.concatenate([prefix, tok.encode_array(text)]), nbytes


def download(cfg, argv, t0):
    """--dataset=fineweb: shards fetched (and checked) as they are, committed by one meta.json."""
    out_dir = cfg.out_dir or os.path.join('data', 'fineweb10B')
    makedirs(out_dir)
    lock = lock_folder(out_dir, 'a dataset')
    try:
        meta = fetch_fineweb(out_dir, cfg.train_shards)
        meta['command'] = shlex.join(['python', sys.argv[0], *argv])
        atomic_write(os.path.join(out_dir, 'meta.json'),
                     lambda f: f.write(json.dumps(meta, indent=1, ensure_ascii=False).encode()))
    finally:
        os.close(lock)
    print(f"{out_dir}: {meta['tokens']['train']:,} train + {meta['tokens']['val']:,} val tokens of FineWeb "
          f"(GPT-2 BPE, {len(meta['shards']['train'])} train shard(s)) in {time.time() - t0:.0f}s")
    return meta


def main(argv):
    cfg = parse_config(PrepareConfig, argv, doc=__doc__)
    t0 = time.time()
    if cfg.input and cfg.dataset != 'pydoc':
        raise UsageError("pass either --dataset or --input, not both")
    if cfg.dataset == 'fineweb':
        return download(cfg, argv, t0)
    docs, source = (file_corpus(cfg.input) if cfg.input else
                    stdlib_corpus() if cfg.dataset == 'stdlib' else
                    shakespeare_corpus(cfg.cache_dir) if cfg.dataset == 'shakespeare' else
                    pydoc_corpus())
    total = sum(d.size for d in docs)
    if not total:
        raise UsageError(f"the corpus is empty ({', '.join(cfg.input) or cfg.dataset} has no text)")
    source.update(documents=len(docs), bytes=total)
    # val: whole documents picked by a hash of their names, spread over the corpus (the stdlib, a folder
    # of your files: not all of one package), or the corpus's last part (one file; pydoc's topics)
    hashed = cfg.split == 'hashed' or cfg.split == 'auto' and (source['name'] == 'stdlib' or cfg.input and len(docs) > 1)
    if hashed and len(docs) < 2:
        raise UsageError("--split=hashed picks whole files for val, and this corpus is one; use --split=last")
    split = hashed_split(docs, cfg.val_fraction) if hashed else None
    if hashed and split is None:  # whole files cannot hold val_fraction (sizes too unequal): cut inside one
        print(f"prepare: whole files cannot make val_fraction={cfg.val_fraction:g} within "
              f"{SPLIT_TOLERANCE:.0%} (their sizes are too unequal): val is the last {cfg.val_fraction:g} of the "
              "bytes instead, as --split=last makes it", file=sys.stderr)
    docs, cut = split or (docs, plan_split(docs, cfg.val_fraction))
    parts = list(split_parts(docs, cut))
    tok = make_tokenizer(cfg, parts, several_docs=len(docs) > 1)
    out_dir = cfg.out_dir or os.path.join('data', f"{source['name']}_{tok.name}")
    # <|endoftext|> starts every document (as in llm.c's fineweb.py), else '\n' goes between
    # documents
    eot = tok.eot_token is not None
    sep = [tok.eot_token] if eot else tok.encode('\n') if len(docs) > 1 else []
    stream = pieces(parts, sep=np.array(sep, dtype=np.uint32), sep_bytes=0 if eot else 1, eot=eot,
                    errors=cfg.errors, bpe=isinstance(tok, TiktokenTokenizer))
    cores = len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count()
    dtype = np.uint16 if tok.vocab_size <= 65535 else np.uint32
    ntok, read, last = 0, 0, time.time()
    with DatasetWriter(out_dir, dtype=dtype, shard_tokens=cfg.shard_tokens) as dataset:
        encoded = ordered_map(functools.partial(encode, tok), stream, cfg.workers or cores)
        for split, ids, nbytes in encoded:
            dataset.add(split, ids, nbytes)
            ntok, read, now = ntok + len(ids), read + nbytes, time.time()
            if now - last > 2:  # progress, for runs long enough to want it
                last, dt = now, now - t0
                print(f"prepare: {read / 1e6:.0f}/{total / 1e6:.0f} MB, {read / 1e6 / dt:.1f} "
                      f"MB/s, {ntok / 1e6 / dt:.2f}M tokens/s", file=sys.stderr, flush=True)
        meta = dataset.commit({'format_version': 1, 'tokenizer': tok.meta(),
                               'vocab_size': tok.vocab_size, 'eot_token': tok.eot_token,
                               'dtype': np.dtype(dtype).name, 'source': source,
                               'split': {'val_fraction': cfg.val_fraction, 'cut': cut[2]},
                               'command': shlex.join(['python', sys.argv[0], *argv])})
    print(f"wrote {meta['tokens']['train']:,} train + {meta['tokens']['val']:,} val tokens of "
          f"{source['name']} to {out_dir}: tokenizer {tok.name}, vocab {tok.vocab_size}, "
          f"{meta['tokens_per_byte']['val']:.3f} val tokens per byte, "
          f"{total / 1e6 / (time.time() - t0):.1f} MB/s")


if __name__ == "__main__":
    run_main(main)
