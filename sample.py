"""
Sample text from a checkpoint train.py wrote: the model and its tokenizer are rebuilt from ckpt.pt
alone.

    python sample.py                                          # the newest out*/ckpt.pt here
    python sample.py --out_dir=out-quick                      # that run: out-quick/ckpt.pt
    python sample.py --out_dir=out-gmlp --start="ROMEO:" --num_samples=3 --max_new_tokens=500
    python sample.py configs/gmlp.py --start=FILE:prompt.txt  # a train.py config file names out_dir
    python sample.py --out_dir=out-quick --temperature=0      # greedy: always the likeliest token

The checkpoint carries the model's GPTConfig ('model_args') and the data's meta.json ('meta'), so
sampling needs neither the config file nor the data. Every block decodes incrementally (model.py's
DecodeCache, through `stream` below); --use_cache=False re-runs the window for each token. On a
GPU, --compile records the one-token step as a CUDA graph once and replays it (CapturedStep: no
per-token kernel launches, no torch.compile wait); elsewhere it changes nothing and says so. Text
goes to stdout, everything else to stderr: `python sample.py ... > out.txt` keeps only text.
"""
import os
import signal

if __name__ == "__main__":  # Ctrl-C while torch loads (seconds): exit 130, quietly
    signal.signal(signal.SIGINT, lambda *_: os._exit(130))

import contextlib
import dataclasses
import glob
import math
import sys
import time
from dataclasses import dataclass

import torch
from torch.nn import functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from configurator import (UsageError, exec_config_file, help_text, no_checkpoint, parse_config,
                          quick_start, regular_file, require, run_main, script)
from dataset import load_tokenizer
from guards import (DTYPES, autocast_context, busy, hold_run, load_checkpoint, peek,
                    resolve_device, resolve_dtype)
from model import GPT, DecodeCache


SEPARATOR = '---------------'  # the line between samples, as nanoGPT prints it
USAGE = "python sample.py [config.py] [--key=value ...]"


@dataclass
class SampleConfig:
    out_dir: str = ''             # the run: out_dir/ckpt.pt; '' = the newest out*/ckpt.pt here
    start: str = ''               # the prompt, or FILE:path; '' = end-of-text token, or a newline
    num_samples: int = 1          # 1 is streamed token by token; more: one batch, printed at end
    max_new_tokens: int = 500     # tokens generated per sample
    temperature: float = 0.8      # < 1 sharper, > 1 flatter; 0 = greedy (argmax)
    top_k: int = 200              # keep only the k likeliest tokens; 0 = all of them
    top_p: float = 1.0            # nucleus: the fewest tokens holding this much probability
    seed: int = 1337              # the same seed (and device) gives the same text
    use_cache: bool = True        # incremental decoding; False recomputes the window for each token
    device: str = 'auto'          # 'auto' (cuda, mps, cpu), 'cpu', 'cuda', 'cuda:1', 'mps'
    dtype: str = 'auto'           # 'auto' (bfloat16/float16 on cuda, else float32) or one of DTYPES
    compile: bool = False         # on a GPU: record the one-token step as a CUDA graph, replay it
    threads: int = 0              # CPU threads; 0 = torch's default (OMP_NUM_THREADS, or every core)
    ranks_file: str = ''          # a BPE run's .tiktoken file where it moved (or GPT-2's, offline)

    def __post_init__(self):
        require(self, 'dtype', lambda v: v in DTYPES, f"is not one of {', '.join(DTYPES)}")
        require(self, 'num_samples', lambda v: v >= 1, "must be at least 1")
        require(self, 'max_new_tokens top_k threads', lambda v: v >= 0, "must not be negative")
        require(self, 'temperature', lambda v: 0 <= v < math.inf,
                "must be a finite number, not negative (0 = greedy)")
        require(self, 'seed', lambda v: 0 <= v < 2**63, "must be in [0, 2**63)")  # torch's: 64 bits
        require(self, 'top_p', lambda v: 0 < v <= 1, "must be in (0, 1] (1 turns it off)")


def parse_args(argv):
    """SampleConfig from argv: flags are sample.py's keys; a config file may be train.py's, of which
    sample.py takes its own keys (out_dir, device, dtype, compile, seed: `sample.py configs/gmlp.py`
    samples the run it trains), a flag winning over a file."""
    mine = {f.name for f in dataclasses.fields(SampleConfig)}
    files = [a for a in argv if a.endswith('.py') and not a.startswith('-')]
    cfg = parse_config(SampleConfig, [a for a in argv if a not in files], usage=USAGE)
    given = {a[2:].partition('=')[0] for a in argv if a.startswith('--')}
    taken = {k: v for path in files for k, v in exec_config_file(path).items()
             if k in mine and k not in given}
    try:
        return dataclasses.replace(cfg, **taken)
    except (ValueError, TypeError) as e:
        raise UsageError(f"{', '.join(files)}: {e}") from None


def read_prompt(start):
    """The prompt: --start, or the text of the file --start=FILE:path names (read as given: a pipe
    to its end)."""
    if not start.startswith('FILE:'):
        return start
    try:
        with open(start[len('FILE:'):], encoding='utf-8') as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"--start={start}: cannot read it ({type(e).__name__}: {e})") from None


def read_start(start, tok):
    """(prompt text to print, its token ids); with nothing to continue, a new document as training
    saw them begin: after <|endoftext|>, or a newline."""
    try:
        return start, (tok.encode(start) if start else [tok.eot_token]
                       if tok.eot_token is not None else tok.encode('\n'))
    except UsageError as e:  # e.g. a character the char-level vocabulary lacks
        raise UsageError(f"--start: {e}") from None
    except UnicodeEncodeError:  # bytes on the command line that are not UTF-8
        raise UsageError("--start holds bytes that are not UTF-8 text; pass UTF-8, or "
                         "--start=FILE:path") from None


def decode_stream(tok, ids):
    """Yield the text of `ids` as it becomes final: a token ending inside a UTF-8 character (U+FFFD
    until the rest arrives) waits for the next, so the pieces join to exactly tok.decode(ids)."""
    pending = []
    for i in ids:
        pending.append(i)
        text = tok.decode(pending)
        if not text.endswith('\ufffd'):
            yield text
            pending = []
    if pending:
        yield tok.decode(pending)  # the end: whatever is left, complete or not


def main(argv):
    if '-h' in argv or '--help' in argv:
        print(help_text(SampleConfig, USAGE, __doc__))
        return
    cfg = parse_args(argv)
    prompt = read_prompt(cfg.start)  # (before the model loads: a file not there is said first)
    device = resolve_device(cfg.device)
    device_type = torch.device(device).type
    dtype = resolve_dtype(cfg.dtype, device_type)

    # the model and tokenizer, from the checkpoint alone (on the CPU: its optimizer state stays off
    # the GPU)
    configs = [a for a in argv if a.endswith('.py') and not a.startswith('-')]
    ckpt_path, ckpt, model = load_run(cfg.out_dir, train=configs and ' '.join(
        ['python', script('train.py'), *configs]))
    mc = model.config
    tok = tokenizer_for(ckpt, mc.vocab_size, ranks_file=cfg.ranks_file)
    arch = f"{mc.block} {mc.attn} {mc.ffn}" if mc.block == 'transformer' else mc.block
    text, ids = read_start(prompt, tok)
    print(f"{ckpt_path}: {arch}, {model.get_num_params() / 1e6:.2f}M parameters, iter "
          f"{ckpt.get('iter_num', '?')}, tokenizer {tok.name}; sampling on {device} in {dtype}",
          file=sys.stderr)
    del ckpt
    model.eval().to(device)
    # --compile: the fixed-shape one-token step, recorded as a CUDA graph once
    step = CapturedStep(model) if cfg.compile and cfg.use_cache and device_type == 'cuda' else None
    if cfg.compile:
        print("compile: the one-token decoding step is recorded as a CUDA graph at the first token "
              "and replayed for every later one" if step else "note: --compile records the cached "
              f"decoding step as a CUDA graph, which needs --use_cache and a CUDA device; on "
              f"{device}{'' if cfg.use_cache else ' uncached'} decoding runs as without it",
              file=sys.stderr)
    if len(ids) > mc.block_size:
        print(f"warning: the prompt is {len(ids)} tokens, longer than block_size={mc.block_size}; "
              f"the model sees only its last {mc.block_size}", file=sys.stderr)
        ids = ids[-mc.block_size:]
    x = torch.tensor([ids] * cfg.num_samples, dtype=torch.long, device=device)  # (num_samples, T)
    threads_before = torch.get_num_threads()  # (given back at the end, to a caller in this process)
    torch.set_num_threads(cfg.threads or threads_before)
    note = device_type == 'cpu' and busy(torch.get_num_threads(), "--threads=1 decodes on one")
    if note:
        print(note, file=sys.stderr)

    generator = torch.Generator(device=device).manual_seed(cfg.seed)
    tokens = stream(model, x, cfg.max_new_tokens, temperature=cfg.temperature,
                    top_k=cfg.top_k or None, top_p=cfg.top_p, use_cache=cfg.use_cache,
                    generator=generator, fixed=step is not None, step=step)
    out = sys.stdout
    t0 = time.time()
    with autocast_context(device_type, dtype):
        if cfg.num_samples == 1:  # stream: print each piece of text as soon as it is whole
            out.write(text)
            for piece in decode_stream(tok, (t.item() for t in tokens)):
                out.write(piece)
                out.flush()
            out.write('\n')
        else:  # one batch for all samples, printed when done
            new = torch.cat(list(tokens), dim=1).tolist() if cfg.max_new_tokens else \
                [[]] * cfg.num_samples
            for k, row in enumerate(new):
                if k:
                    out.write(SEPARATOR + '\n')
                out.write(text + tok.decode(row) + '\n')
    out.flush()
    dt = time.time() - t0
    n = cfg.num_samples * cfg.max_new_tokens
    print(f"{n} tokens in {dt:.2f}s: {n / max(dt, 1e-9):,.1f} tokens/s "
          f"({'uncached' if not cfg.use_cache else 'cached, CUDA graph' if step else 'cached'} "
          f"decoding, batch {cfg.num_samples})",
          file=sys.stderr)
    torch.set_num_threads(threads_before)


# -----------------------------------------------------------------------------
# which run, and its tokenizer

def checkpoint_path(out_dir, *, verb='sampling', train=None):
    """out_dir/ckpt.pt, what a killed train.py left there settled first (unless a run holds it);
    with no out_dir, the newest out*/ckpt.pt here, named on stderr as the run `verb` reads (None:
    the caller says it). `train`: the command that trains out_dir's run, for the line saying none
    is there."""
    if out_dir:  # one that is not there is said now (before hellaswag.py downloads, say)
        if os.path.isdir(out_dir):
            with contextlib.suppress(UsageError):  # (held: a run trains there; read as it is)
                hold_run(out_dir)()
        path = os.path.join(out_dir, 'ckpt.pt')
        if not os.path.lexists(path):
            raise no_checkpoint(path, train)
        return regular_file(path, 'checkpoint', fix='move it away, or pass another --out_dir')
    runs = sorted(glob.glob(os.path.join('out*', 'ckpt.pt')), key=os.path.getmtime, reverse=True)
    if not runs:
        raise UsageError(f"no checkpoint here (out*/ckpt.pt); train one first ({quick_start()}: "
                         "about a minute on a CPU) or pass --out_dir=the/run")
    if verb:
        others = (f" of {len(runs)} ({', '.join(os.path.dirname(p) for p in runs)}; pick one "
                  "with --out_dir)" if runs[1:] else "")
        print(f"no --out_dir given: {verb} the newest run here{others}: "
              f"{os.path.dirname(runs[0])}", file=sys.stderr)
    return runs[0]


def load_run(out_dir, *, verb='sampling', train=None):
    """(its ckpt.pt's path, the checkpoint, the model it holds) of the run in out_dir (see
    checkpoint_path), rebuilt from the checkpoint alone; a run that stopped before its budget is
    said, with where a finished one is."""
    path = checkpoint_path(out_dir, verb=verb, train=train)
    ckpt = load_checkpoint(path)
    if ckpt.get('finished') is False:  # (an older train.py's does not say)
        prev = os.path.join(os.path.dirname(path), 'prev')
        done = (peek(prev) or {}).get('finished')
        print(f"note: {path} is a run stopped before its budget (iter {ckpt['iter_num']:,}); "
              + (f"{prev}/ holds a finished one (--out_dir={prev})" if done else
                 "train.py --init_from=resume on its config continues it"), file=sys.stderr)
    try:
        return path, ckpt, GPT.from_checkpoint(ckpt)
    except (TypeError, ValueError, RuntimeError) as e:  # model_args or weights that do not fit
        raise UsageError(f"{path} does not rebuild a model: {' '.join(str(e).split())[:400]}") \
            from None


def tokenizer_for(ckpt, vocab_size, *, ranks_file=''):
    """The tokenizer of the checkpoint's data (its 'meta': the data's meta.json)."""
    meta = ckpt.get('meta')
    if meta is None:  # raw llm.c shards (no meta.json) hold GPT-2 tokens
        print("note: the checkpoint records no tokenizer (raw shards): GPT-2 BPE", file=sys.stderr)
        meta = {'tokenizer': {'kind': 'tiktoken', 'name': 'gpt2'}}
    tok = load_tokenizer(meta, ranks_file=ranks_file)
    if tok.vocab_size > vocab_size:
        raise UsageError(f"the tokenizer ({tok.name}, {tok.vocab_size} tokens) is larger than the "
                         f"model's vocab_size={vocab_size}: the checkpoint's meta does not match "
                         "its model")
    return tok


# -----------------------------------------------------------------------------
# decoding: the cached stream of tokens, sampling, the CUDA-graph step

# Decoding changes the attention's shape every token. cuDNN's SDPA backend (torch's choice for bf16
# on an H100) builds a new plan per shape, ~50 ms each: 15 tokens/s at GPT-2 124M instead of ~190
# (bench.py).
DECODE_SDPA = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


@torch.no_grad()
def stream(model, idx, max_new_tokens, temperature=1.0, top_k=None, top_p=None,
           use_cache=True, generator=None, fixed=False, step=None, cache=None):
    """
    Yield max_new_tokens tokens, each (B, 1), continuing idx (B, T) cropped to block_size. With
    use_cache each step feeds one token through a DecodeCache (fixed: of fixed shapes; `step`: what
    runs the one-token call, e.g. a CapturedStep; `cache`: one to reuse, emptied first). Once the
    window is full it slides, and is re-encoded as the uncached path sees it.
    """
    if cache is not None and cache.fixed != fixed:
        raise ValueError(f"a cache with fixed={cache.fixed} given to stream(fixed={fixed})")
    cache = cache if cache is not None else DecodeCache(model.config.n_layer, fixed=fixed)
    filled, bs, idx_next = 0, model.config.block_size, None
    for _ in range(max_new_tokens):
        with sdpa_kernel(DECODE_SDPA):
            if not use_cache:
                logits, _ = model(idx[:, -bs:])
            elif not filled or filled >= bs:  # the start, or the window slid: (re-)encode it
                cache.reset()
                logits, _ = model(idx[:, -bs:], cache=cache)
                filled = min(idx.size(1), bs)
            else:  # the token sampled last: (B, 1) of strides (1, 1) at every step and batch size
                # (a slice of idx would carry idx's growing row stride: a recompile per token)
                logits, _ = (model if step is None else step)(idx_next, cache=cache)
                filled += 1
        idx_next = sample_next(logits[:, -1, :].float(), temperature, top_k, top_p, generator)
        idx = torch.cat((idx, idx_next), dim=1)
        yield idx_next


def generate(model, idx, max_new_tokens, temperature=1.0, top_k=None, top_p=None,
             use_cache=True, generator=None, fixed=False):
    """Return idx (B, T) followed by max_new_tokens sampled tokens; temperature 0 is greedy."""
    new = list(stream(model, idx, max_new_tokens, temperature, top_k, top_p, use_cache, generator,
                      fixed))
    return torch.cat([idx, *new], dim=1)


def sample_next(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """One token per row from logits (B, V): greedy at temperature 0, else top-k, then top-p."""
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    # the largest logit moved to 0 first: a tiny temperature then gives -inf, not inf - inf = nan
    logits = (logits - logits.amax(dim=-1, keepdim=True)) / temperature
    if top_k is not None and top_k < logits.size(-1):
        v, _ = torch.topk(logits, top_k)
        logits = logits.masked_fill(logits < v[:, [-1]], -float('inf'))
    if top_p is not None and top_p < 1.0:
        sorted_logits, order = torch.sort(logits, descending=True)
        probs = F.softmax(sorted_logits, dim=-1)
        # drop a token when the tokens ranked above it already cover top_p (the first always stays)
        drop = probs.cumsum(dim=-1) - probs >= top_p
        logits = logits.masked_fill(drop.scatter(1, order, drop), -float('inf'))
    probs = F.softmax(logits, dim=-1)
    return torch.multinomial(probs, num_samples=1, generator=generator)


class CapturedStep:
    """
    A fixed-shape DecodeCache's one-token call, recorded once as a CUDA graph and replayed for every
    later token: no Python, no kernel launches per token. `fn`: the model, or the model compiled
    without CUDA graphs of its own. step(idx_next, cache=cache) -> (logits, None); the logits are
    the graph's output buffer, overwritten by the next replay.

    The warm-up calls before recording leave no trace (the cache's state is saved and put back).
    The graph uses the cache's tensors where they were: another cache, or this one reallocated for
    another batch size, records again (`records` counts). Autocast's weight cache is off while
    recording (casts made outside the graph would be read from freed memory).
    """

    def __init__(self, fn, warmup=3):
        self.fn, self.warmup, self.graph, self.recorded_on, self.records = fn, warmup, None, None, 0

    def __call__(self, idx, targets=None, cache=None):
        if targets is not None or cache is None or not cache.fixed:
            raise ValueError("CapturedStep runs one decoding step: step(idx_next, "
                             "cache=DecodeCache(n, fixed=True))")
        if cache.step is None:
            raise ValueError("CapturedStep needs a cache that holds a prompt: run the model on "
                             "it first")
        with torch.cuda.device(idx.device):  # streams and the graph on the model's GPU, not GPU 0
            if self.recorded_on != self._where(idx, cache):
                self._record(idx, cache)
            self.idx.copy_(idx)
            self.graph.replay()
        return self.logits, None

    @staticmethod
    def _where(idx, cache):
        return id(cache), idx.shape, [t.data_ptr() for t in cache._state()]

    def _record(self, idx, cache):
        autocast = torch.autocast('cuda', dtype=torch.get_autocast_dtype('cuda'),
                                  enabled=torch.is_autocast_enabled('cuda'), cache_enabled=False)
        self.idx, self.graph, self.recorded_on = idx.clone(), torch.cuda.CUDAGraph(), None
        saved = cache.save()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side), autocast:
            for _ in range(self.warmup):
                self.fn(self.idx, cache=cache)
                cache.load(saved)
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(self.graph), autocast:  # recorded, not run: the cache is as saved
            self.logits, _ = self.fn(self.idx, cache=cache)
        self.recorded_on, self.records = self._where(idx, cache), self.records + 1


if __name__ == "__main__":
    run_main(main)
