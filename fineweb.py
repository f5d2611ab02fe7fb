"""
FineWeb's 10B-token sample as GPT-2 tokens, downloaded into a dataset train.py reads: no text to
tokenise (prepare.py's job), the shards are llm.c's, as modded-nanogpt trains on them.

    python fineweb.py                        # the val shard and 1 train shard (100M tokens)
    python fineweb.py --train_shards=25      # 2.5B train tokens (5 GB): configs/_fineweb124m.py

The shards come through huggingface_hub (retried, a cut connection resumed; HF_ENDPOINT names a
mirror) into .<name>.download/ beside out_dir, where a rerun finds them. Each is checked before it
counts (its header and size, at least one token, every id below GPT-2's 50,257; a bad one is
removed, so that a rerun fetches it again), then linked into a new dataset swapped in whole, as
prepare.py's are (dataset.DatasetWriter): out_dir is held throughout, the download folder with it.
"""
import dataclasses
import os
import shlex
import sys
import time

import numpy as np

from configurator import UsageError, parse_config, require, run_main
from dataset import DatasetWriter, ShardError, beside, load_shard

REPO = 'kjj0/fineweb10B-gpt2'
SHARDS = 103  # train shards in REPO, 100M tokens each
DESCRIPTION = ("FineWeb's 10B-token sample (HuggingFaceFW/fineweb, sample-10BT) as GPT-2 tokens in "
               "llm.c's shard format, 100M tokens a shard (modded-nanogpt's)")


@dataclasses.dataclass
class FinewebConfig:
    train_shards: int = 1             # train shards to fetch, 1..103 (100M tokens, 200 MB each)
    out_dir: str = 'data/fineweb10B'  # the dataset (what configs/_fineweb124m.py trains on)

    def __post_init__(self):
        require(self, 'train_shards', lambda v: 1 <= v <= SHARDS, f"must be in 1..{SHARDS}")


def main(argv):
    cfg = parse_config(FinewebConfig, argv, config_files=False, doc=__doc__)
    t0, command = time.time(), shlex.join(['python', sys.argv[0], *argv])
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:
        raise UsageError("fineweb.py downloads through huggingface_hub, which is not installed: "
                         "pip install huggingface_hub") from None
    split = {'fineweb_val_000000.bin': 'val',
             **{f'fineweb_train_{i:06d}.bin': 'train' for i in range(1, cfg.train_shards + 1)}}
    cache, tokens, top = beside(cfg.out_dir, 'download'), {'train': 0, 'val': 0}, {}
    with DatasetWriter(cfg.out_dir, dtype=np.uint16, shard_tokens=0) as dataset:
        for name, s in split.items():
            try:
                path = hf_hub_download(REPO, name, repo_type='dataset', local_dir=cache,
                                       endpoint=os.environ.get('HF_ENDPOINT') or None)
            except Exception as e:  # no network, HTTP errors, a full disk, ...: one line
                detail = str(e).splitlines()[0][:160] if str(e) else 'no detail'
                gone = any(getattr(getattr(c, 'response', None), 'status_code', None) == 404
                           for c in (e, e.__cause__, e.__context__))  # (found, or from a cache)
                raise UsageError(f"could not download {name} from {REPO} ({type(e).__name__}: "
                                 f"{detail}); " + ("it is not there (404): check HF_ENDPOINT, or "
                                                   "the repository" if gone else
                                                   "rerun to go on (HF_ENDPOINT=... names a mirror)"))\
                    from None
            try:
                held = load_shard(path)
                why = ("it holds no tokens" if not len(held) else
                       f"it holds token id {held.max()}, beyond GPT-2's 50,257"
                       if held.max() >= 50257 else None)
            except ShardError as e:
                why = str(e).split(': ', 1)[-1]
            if why:  # a corrupt download never counts: removed, so that a rerun fetches it again
                os.remove(path)
                raise UsageError(f"{name} from {REPO} is not a whole shard of GPT-2 tokens ({why}); "
                                 "it is removed: rerun to fetch it again")
            tokens[s] += len(held)
            top[s] = max(top.get(s, 0), int(held.max()))
            dataset.link(s, path)
        meta = dataset.commit({
            'format_version': 1, 'tokenizer': {'kind': 'tiktoken', 'name': 'gpt2'},
            'vocab_size': 50257, 'eot_token': 50256, 'dtype': 'uint16',
            'source': {'name': 'fineweb10B', 'repo': REPO, 'description': DESCRIPTION,
                       'url': f"https://huggingface.co/datasets/{REPO}"},
            'split': {'cut': "the dataset's own val shard"}, 'tokens': tokens, 'max_id': top,
            'bits_per_byte': "unknown: the shards hold GPT-2 tokens without the byte count of "
                             "their text", 'command': command})
    print(f"{cfg.out_dir}: {tokens['train']:,} train + {tokens['val']:,} val tokens of FineWeb "
          f"(GPT-2 BPE, {cfg.train_shards} train shard(s)) in {time.time() - t0:.0f}s")
    return meta


if __name__ == "__main__":
    run_main(main)
