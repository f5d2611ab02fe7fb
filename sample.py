"""
Sample text from a checkpoint train.py wrote: the model and its tokenizer are rebuilt from ckpt.pt
alone.

    python sample.py                                          # the newest run here (out*/ckpt.pt)
    python sample.py --out_dir=out-quick                      # that run: out-quick/ckpt.pt
    python sample.py --out_dir=out-gmlp --start="ROMEO:" --num_samples=3 --max_new_tokens=500
    python sample.py configs/gmlp.py --start=FILE:prompt.txt  # a train.py config file names out_dir
    python sample.py --out_dir=out-quick --temperature=0      # greedy: always the likeliest token

The checkpoint carries the model's GPTConfig ('model_args'; fields an older checkpoint lacks take
today's defaults) and the data's meta.json ('meta'), so sampling needs neither the config file nor
the data directory. Every block type decodes incrementally (model.py's DecodeCache);
--use_cache=False re-runs the whole window for each token, to compare. On a GPU, --compile records
the one-token step as a CUDA graph once and replays it (model.py's CapturedStep: no per-token kernel
launches, ready after one step, no torch.compile wait); elsewhere it says so and changes nothing. The text goes to stdout,
everything else (the model line, warnings, tokens/s) to stderr, so `python sample.py ... > out.txt`
keeps only text.
"""
import os
import signal

if __name__ == "__main__":  # Ctrl-C while the imports below load (torch takes seconds): exit 130, quietly
    signal.signal(signal.SIGINT, lambda *_: os._exit(130))

import dataclasses
import math
import sys
import time
from dataclasses import dataclass

import torch

from checkpoint import checkpoint_path, load_checkpoint, model_from_checkpoint, tokenizer_for
from configurator import UsageError, help_text, parse_config, run_main
from model import CapturedStep
from runtime import (DTYPES, TrainConfig, autocast_context, decode_threads, resolve_device,
                     resolve_dtype)

SEPARATOR = '---------------'  # the line between samples, as nanoGPT prints it
USAGE = "python sample.py [config.py] [--key=value ...]"


@dataclass
class SampleConfig:
    out_dir: str = ''             # the run: out_dir/ckpt.pt; '' = the newest out*/ckpt.pt here
    start: str = ''               # the prompt, or FILE:path; '' = the end-of-text token, else a newline
    num_samples: int = 1          # 1 is streamed token by token; more: one batch, printed at the end
    max_new_tokens: int = 500     # tokens generated per sample
    temperature: float = 0.8      # < 1 sharper, > 1 flatter; 0 = greedy (argmax)
    top_k: int = 200              # keep only the k likeliest tokens; 0 = all of them
    top_p: float = 1.0            # nucleus: the fewest tokens holding this much probability; 1 = all
    seed: int = 1337              # the same seed (and device) gives the same text
    use_cache: bool = True        # incremental decoding; False recomputes the window for each token
    device: str = 'auto'          # 'auto' (cuda, mps, cpu), 'cpu', 'cuda', 'cuda:1', 'mps'
    dtype: str = 'auto'           # 'auto' (bfloat16/float16 on cuda, else float32) or one of DTYPES
    compile: bool = False         # on a GPU: record the one-token decoding step as a CUDA graph, replay it
    threads: int = 0              # CPU threads; 0 = OMP_NUM_THREADS if set, else the fastest, measured
    ranks_file: str = ''          # a BPE run's .tiktoken file, where it moved ('' = where it was, else found by sha256)

    def __post_init__(self):
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype={self.dtype!r} is not one of {', '.join(DTYPES)}")
        if self.num_samples < 1:
            raise ValueError(f"num_samples must be at least 1, got {self.num_samples}")
        for name in ('max_new_tokens', 'temperature', 'top_k'):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative, got {getattr(self, name)}")
        if not math.isfinite(self.temperature):  # nan passes `< 0`: garbage, not an error
            raise ValueError(f"temperature must be a finite number (0 = greedy), got "
                             f"{self.temperature}")
        if self.threads < 0:
            raise ValueError(f"threads must not be negative, got {self.threads} (0 = measured)")
        if not 0 <= self.seed < 2**63:  # torch's generators take 64 bits
            raise ValueError(f"seed must be in [0, 2**63), got {self.seed}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p} (1 turns it off)")


def parse_args(argv):
    """
    SampleConfig from argv. Flags (--key=value) must be sample.py's own keys. A config file may be
    one written for train.py: it is read against train.py's keys and sample.py's together and
    sample.py keeps its own, so `python sample.py configs/gmlp.py` samples the run that config
    trains (the shared keys out_dir, device, dtype, compile and seed mean the same in both).
    A key that neither script knows is still an error, with the nearest names.
    """
    mine = [f.name for f in dataclasses.fields(SampleConfig)]
    flags = [a for a in argv if a.startswith('-')]
    for key in (a[2:].partition('=')[0] for a in flags):
        if key not in mine and key in {f.name for f in dataclasses.fields(TrainConfig)}:
            raise UsageError(f"--{key} is a train.py key; sample.py rebuilds the model from the "
                             "checkpoint (sample.py --help lists its keys)")
    parse_config(SampleConfig, flags, usage=USAGE)  # flags: strictly sample.py's keys
    train_only = [(f.name, f.type, dataclasses.field(default=f.default))
                  for f in dataclasses.fields(TrainConfig) if f.name not in mine]
    both = parse_config(dataclasses.make_dataclass('SampleConfig', train_only, bases=(SampleConfig,)),
                        argv, usage=USAGE)
    return SampleConfig(**{name: getattr(both, name) for name in mine})


def read_start(start, tok):
    """(prompt text to print, its token ids). FILE:path reads the prompt from a file."""
    if start.startswith('FILE:'):
        path = start[len('FILE:'):]
        try:
            with open(path, encoding='utf-8') as f:
                start = f.read()
        except (OSError, UnicodeDecodeError) as e:
            raise UsageError(f"--start=FILE:{path}: cannot read it ({type(e).__name__}: {e})") \
                from None
    if start:
        try:
            return start, tok.encode(start)
        except UsageError as e:  # e.g. a character the char-level vocabulary lacks
            raise UsageError(f"--start: {e}") from None
    # nothing to continue: begin a new document as training saw them, after <|endoftext|> or a
    # newline
    if tok.eot_token is not None:
        return '', [tok.eot_token]
    try:
        return '', tok.encode('\n')
    except UsageError:  # a char vocabulary without '\n' (a one-line corpus): its first character
        return '', [0]


def decode_stream(tok, ids):
    """
    Yield the text of the token ids as it becomes final. A byte-level or BPE token can end inside a
    multi-byte UTF-8 character, which decodes to U+FFFD until the rest arrives; such tokens are held
    back and decoded with the next ones, so the pieces join to exactly tok.decode(all ids).
    """
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
    device = resolve_device(cfg.device)
    device_type = torch.device(device).type
    dtype = resolve_dtype(cfg.dtype, device_type)

    # the model and tokenizer, from the checkpoint alone; loaded on the CPU so optimizer state stays
    # off the GPU
    ckpt_path = checkpoint_path(cfg.out_dir)
    ckpt = load_checkpoint(ckpt_path, 'cpu')
    model = model_from_checkpoint(ckpt)
    mc = model.config
    tok = tokenizer_for(ckpt, mc.vocab_size, ranks_file=cfg.ranks_file, out_dir=os.path.dirname(ckpt_path))
    arch = f"{mc.block} {mc.attn} {mc.ffn}" if mc.block == 'transformer' else mc.block
    text, ids = read_start(cfg.start, tok)
    print(f"{ckpt_path}: {arch}, {model.get_num_params() / 1e6:.2f}M parameters, iter "
          f"{ckpt.get('iter_num', '?')}, "
          f"tokenizer {tok.name}; sampling on {device} in {dtype}", file=sys.stderr)
    del ckpt
    model.eval().to(device)
    step = None
    if cfg.compile and not cfg.use_cache:
        print("note: --compile records the cached decoding step; --use_cache=False has none, so decoding "
              "re-runs the window for each token, as without --compile", file=sys.stderr)
    elif cfg.compile and device_type == 'cuda':  # a one-token step of fixed shapes, recorded once, replayed
        step = CapturedStep(model)
        print("compile: the one-token decoding step is recorded as a CUDA graph at the first token and "
              "replayed for every later one", file=sys.stderr)
    elif cfg.compile:
        print(f"note: --compile records the decoding step as a CUDA graph, which needs a CUDA device; on "
              f"{device} decoding runs as without it", file=sys.stderr)
    if len(ids) > mc.block_size:
        print(f"warning: the prompt is {len(ids)} tokens, longer than block_size={mc.block_size}; "
              f"the model sees only its last {mc.block_size}", file=sys.stderr)
        ids = ids[-mc.block_size:]
    x = torch.tensor([ids] * cfg.num_samples, dtype=torch.long, device=device)  # (num_samples, T)
    threads_before = torch.get_num_threads()  # (given back at the end, to a caller in this process)
    threads, why = decode_threads(model, x[:1, -1:], given=cfg.threads, device_type=device_type)
    if threads:
        print(f"threads: {threads} ({why}; --threads=N chooses)", file=sys.stderr)

    generator = torch.Generator(device=device).manual_seed(cfg.seed)
    tokens = model.stream(x, cfg.max_new_tokens, temperature=cfg.temperature, top_k=cfg.top_k or None,
                          top_p=cfg.top_p, use_cache=cfg.use_cache, generator=generator,
                          fixed=step is not None, step=step)
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
          f"({'uncached' if not cfg.use_cache else 'cached, CUDA graph' if step else 'cached'} decoding, "
          f"batch {cfg.num_samples})",
          file=sys.stderr)
    torch.set_num_threads(threads_before)


if __name__ == "__main__":
    run_main(main)
