"""
Score a trained run on a downstream task: HellaSwag (Zellers et al. 2019, arXiv:1905.07830), the
sentence-completion test llm.c, modded-nanogpt and nanochat report (GPT-2 124M: 29.4% in llm.c's
scoring, acc_norm below).

    python hellaswag.py --out_dir=out-gpt                        # downloads the val file once
    python hellaswag.py --out_dir=RUN --input=hellaswag_val.jsonl --limit=500  # offline, a look
    torchrun --standalone --nproc_per_node=8 hellaswag.py --out_dir=RUN  # items shared by GPUs

Each item is a context and 4 endings, one of them right. Each ending is scored by the model's loss
on its own tokens after the context (the checkpoint's own tokenizer; " " + ending, as the GPT-2
papers and llm.c do): `acc` picks the ending of least total loss, `acc_norm` the least mean loss per
token (the length-normalised score; llm.c's and nanochat's headline). The result goes to stdout and
to out_dir/eval_hellaswag.json; sweep.py --hellaswag=FILE adds it to each record. A context longer
than the model's block_size keeps its last tokens. Chance is 25%.
"""
import os
import signal

def read_hellaswag(path, limit=0):
    """[(context, [4 endings], label)] from HellaSwag's jsonl, the first `limit` (0: all); a path
    that is not a regular file, or a line that is not such an item, is a UsageError naming it."""
    if not os.path.isfile(path):
        raise UsageError(f"{path!r} is not a regular file of HellaSwag items"
                         if os.path.exists(path) else f"{path!r} not found")
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
                raise UsageError(f"{path} line {n} is not a HellaSwag item (ctx, a list of 4 "
                                 "endings, an integer label 0-3)")
            items.append((ctx, endings, label))
            if limit and len(items) == limit:
                break
    if not items:
        raise UsageError(f"{path} holds no items")
    return items


if __name__ == "__main__":  # Ctrl-C while torch loads (seconds): exit 130, quietly
    signal.signal(signal.SIGINT, lambda *_: os._exit(130))

import json
import sys
import time
import urllib.request
from dataclasses import dataclass

import torch
from torch.nn import functional as F

from configurator import UsageError, atomic_write, parse_config, regular_file, require, run_main
from dataset import sha256_file
from sample import checkpoint_path, load_run, tokenizer_for
from guards import DTYPES, autocast_context, resolve_device, resolve_dtype
from train import Distributed


HELLASWAG_URL = 'https://raw.githubusercontent.com/rowanz/hellaswag/master/data/hellaswag_val.jsonl'


@dataclass
class EvalConfig:
    task: str = 'hellaswag'       # the task (HellaSwag's validation set, 10,042 items)
    out_dir: str = ''             # the run: out_dir/ckpt.pt; '' = the newest out*/ckpt.pt here
    input: str = ''               # a local copy of the items (HellaSwag's jsonl); '' = downloaded
    url: str = HELLASWAG_URL      # where the items are downloaded from, once, into data/hellaswag/
    limit: int = 0                # the first N items only (a quick look); 0 = all
    batch_size: int = 16          # items per forward pass (x 4 endings)
    device: str = 'auto'          # 'auto' (cuda, mps, cpu), 'cpu', 'cuda', 'cuda:1', 'mps'
    dtype: str = 'auto'           # 'auto' (bfloat16/float16 on cuda, else float32) or one of DTYPES
    json: str = ''                # where the result goes; '' = out_dir/eval_<task>.json
    ranks_file: str = ''          # a BPE run's .tiktoken file where it moved (or GPT-2's, offline)

    def __post_init__(self):
        require(self, 'task', lambda v: v == 'hellaswag',
                "is not a task this script knows (hellaswag)")
        require(self, 'limit', lambda v: v >= 0, "must not be negative (0 = every item)")
        require(self, 'batch_size', lambda v: v >= 1, "must be at least 1")
        require(self, 'dtype', lambda v: v in DTYPES, f"is not one of {', '.join(DTYPES)}")


def items_file(cfg):
    """The items' jsonl: --input, else the copy downloaded before, else downloaded now
    (atomically)."""
    if cfg.input:
        return regular_file(cfg.input, "--input (HellaSwag's hellaswag_val.jsonl)")
    path = os.path.join('data', 'hellaswag', os.path.basename(cfg.url))
    if not os.path.isfile(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        print(f"downloading {cfg.url} to {path} (once)", file=sys.stderr)
        try:
            with urllib.request.urlopen(cfg.url, timeout=60) as r:
                data = r.read()
        except OSError as e:  # no network: URLError, timeouts
            raise UsageError(f"could not download {cfg.url} ({getattr(e, 'reason', e)}); offline, "
                             "pass --input=path/to/hellaswag_val.jsonl") from None
        atomic_write(path, lambda f: f.write(data))
    return path


@torch.no_grad()
def score(model, tok, items, *, batch_size, device, ctx):
    """[(pred by total loss, pred by mean loss, label)] per item: each ending scored by the model's
    cross-entropy on its tokens after the context, `batch_size` items per padded batch."""
    T = model.config.block_size
    out = []
    for i in range(0, len(items), batch_size):
        rows, spans = [], []
        for context, endings, _ in items[i:i + batch_size]:
            c = tok.encode(context)
            for end in [tok.encode(' ' + e) for e in endings]:
                rows.append((c + end)[-(T + 1):])  # +1: the last token is only a target
                spans.append(len(end))
        L = max(len(r) for r in rows)
        x = torch.zeros(len(rows), L, dtype=torch.long)
        mask = torch.zeros(len(rows), L - 1)
        for k, (ids, n) in enumerate(zip(rows, spans)):
            x[k, :len(ids)] = torch.tensor(ids)
            mask[k, len(ids) - 1 - min(n, len(ids) - 1):len(ids) - 1] = 1  # the ending's targets
        x, mask = x.to(device), mask.to(device)
        with ctx:
            logits, _ = model(x[:, :-1], x[:, 1:])  # (rows, L-1, V): with targets, every position
        losses = F.cross_entropy(logits.float().transpose(1, 2), x[:, 1:], reduction='none') * mask
        total = losses.sum(1).view(-1, 4)
        mean = total / mask.sum(1).view(-1, 4)
        out += [(int(t.argmin()), int(m.argmin()), label)
                for (_, _, label), t, m in zip(items[i:i + batch_size], total, mean)]
    return out


def main(argv):
    cfg = parse_config(EvalConfig, argv, config_files=False, doc=__doc__,
                       usage="python hellaswag.py [--out_dir=RUN] [--key=value ...]")
    procs = Distributed()  # one process, or torchrun's: each scores every world-th item
    device = procs.device(resolve_device(cfg.device))
    dtype = resolve_dtype(cfg.dtype, torch.device(device).type)
    out = cfg.json or os.path.join(cfg.out_dir, f"eval_{cfg.task}.json")  # before any work:
    regular_file(out, '--json', output=True)  # a device or a pipe is refused now, never replaced
    if not cfg.input:  # a run to score exists before any download (a named --input: checked first)
        checkpoint_path(cfg.out_dir, verb=None)
    path = items_file(cfg) if procs.master else None
    ckpt_path = checkpoint_path(cfg.out_dir, verb='scoring' if procs.master else None)
    with procs.running(device, 1800.0, cfg.out_dir):
        path = procs.gather(path)[0]  # the master downloads; every process reads its copy
        items = read_hellaswag(path, cfg.limit)
        _, ckpt, model = load_run(os.path.dirname(ckpt_path) or '.', verb=None)
        model = model.eval().to(device)
        tok = tokenizer_for(ckpt, model.config.vocab_size, ranks_file=cfg.ranks_file)
        t0 = time.time()
        mine = score(model, tok, items[procs.rank::procs.world], batch_size=cfg.batch_size,
                     device=device, ctx=autocast_context(torch.device(device).type, dtype))
        counts = [sum(p == y for p, _, y in mine), sum(q == y for _, q, y in mine), len(mine)]
        counts = torch.tensor(counts, dtype=torch.float64, device=device)
        acc, acc_norm, n = procs.all_reduce(counts).tolist()
    result = dict(task=cfg.task, acc=acc / n, acc_norm=acc_norm / n, n=int(n), checkpoint=ckpt_path,
                  iter=ckpt.get('iter_num'), input=path, input_sha256=sha256_file(path),
                  limit=cfg.limit,
                  seconds=time.time() - t0, device=device, dtype=dtype)
    if procs.master:
        atomic_write(out, lambda f: f.write(json.dumps(result, indent=1).encode()))
        print(f"{cfg.task}: acc_norm {result['acc_norm']:.4f}, acc {result['acc']:.4f} on "
              f"{result['n']:,} items ({ckpt_path}, iter {result['iter']}; chance 0.25) in "
              f"{result['seconds']:.0f}s -> {out}")
    return result


if __name__ == "__main__":
    run_main(main)
