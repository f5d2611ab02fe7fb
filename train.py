"""
Train one of model.py's architectures on the token shards prepare.py writes.

    python prepare.py                                   # char-level pydoc corpus -> data/pydoc_char
    python train.py configs/quick.py                    # about a minute on 2 CPU cores
    python train.py configs/gmlp.py --max_iters=100     # any key can be overridden as --key=value
    torchrun --standalone --nproc_per_node=8 train.py configs/gpt.py  # DDP: GPUs or CPU processes

The loop has nanoGPT's shape: DDP only when torchrun sets RANK, autocast (GradScaler for float16
only), gradient accumulation with the gradient all-reduce on the last micro-step only, the next
batch fetched while the forward pass runs. What it adds to make comparisons fair and exact:
- every batch is a pure function of (seed, iteration, global micro-step), so N processes with
  accumulation A/N each draw exactly the batches one process with accumulation A draws, and a
  resumed run draws those of a straight run (an A that N does not divide is rounded up to a
  multiple of N, and the start says so: an iteration then holds more tokens);
- stopping at equal tokens (max_tokens), FLOPs (max_flops) or training seconds (max_seconds,
  evals excluded); each progress line shows the position against that budget and an ETA;
- Ctrl-C (or SIGTERM) is acknowledged at once, cuts an evaluation short, saves and exits 130;
  the checkpoint resumes exactly; a second Ctrl-C aborts;
- out_dir/log.jsonl with tokens, train_s and MFU from each model's own FLOP count.
The machinery lives in libraries named for what they do: runtime.py (settings, device, processes,
signals, clock), checkpoint.py (what is saved and resumed, out_dir's files), data.py (batches).
"""
import os
import signal

if __name__ == "__main__":  # Ctrl-C while the imports below load (torch takes seconds): exit 130, quietly
    signal.signal(signal.SIGINT, lambda *_: os._exit(130))

import dataclasses
import math
import time
from contextlib import nullcontext
from types import SimpleNamespace

import torch
from torch.nn.parallel import DistributedDataParallel as DDP

from checkpoint import (RunFiles, RunState, check_resumable, data_switch, load_checkpoint,
                        make_checkpoint, restore, rng_state, set_rng_state)
from configurator import UsageError, parse_config, run_main
from data import Batches, bits_per_byte, open_dataset
from model import GPT, GPTConfig
from tokenizer import tokenizer_problem
from runtime import (Distributed, NonFiniteWatch, Progress, StopSignals, TrainConfig,
                     autocast_context, check_memory, config_text, duration, keep_output_from_stopping_the_run,
                     micro_steps, peak_flops, resolve_device, resolve_dtype, stop_with_the_sweep, sync_device)


def main(argv):
    if not argv:  # nanoGPT's bare train.py is GPT-2 124M for days: say what to run instead
        raise UsageError("give a config: python train.py configs/quick.py (about a minute on a "
                         "CPU), or one per architecture in configs/; python train.py --help lists "
                         "every key")
    cfg = parse_config(TrainConfig, argv, doc=__doc__)
    procs = Distributed()  # one process, or the ones torchrun started
    device = procs.device(resolve_device(cfg.device))
    device_type = torch.device(device).type
    dtype = resolve_dtype(cfg.dtype, device_type)

    # data; the model's vocabulary is the data's unless set larger (e.g. padded to a multiple of 64)
    meta, train_paths, val_paths = open_dataset(cfg.data_dir)
    problem = meta and tokenizer_problem(meta)
    if problem:  # else the run trains, and only sample.py finds its tokens cannot be decoded
        raise UsageError(f"{cfg.data_dir}/meta.json {problem}; rerun prepare.py")
    ckpt_path = os.path.join(cfg.out_dir, 'ckpt.pt')
    ckpt = load_checkpoint(ckpt_path) if cfg.init_from == 'resume' else None
    vocab = (cfg.vocab_size or (ckpt and ckpt['model_args'].get('vocab_size'))
             or (meta and meta['vocab_size']) or 50304)  # GPT-2's 50257 padded: raw llm.c shards
    if meta and vocab < meta['vocab_size']:
        source = ("the --vocab_size given; leave it at 0 to use the data's" if cfg.vocab_size else
                  f"the vocab of the checkpoint in {cfg.out_dir}; resume on the data it was "
                  "trained on")
        raise UsageError(f"vocab_size={vocab} is smaller than the data's {meta['vocab_size']} "
                         f"({cfg.data_dir}/meta.json): {source}")
    try:  # (the checks that need the vocabulary: match_params at this shape)
        cfg = dataclasses.replace(cfg, device=device, dtype=dtype, vocab_size=vocab)
    except ValueError as e:
        raise UsageError(str(e)) from None
    check_memory(cfg, device)  # before anything is allocated
    if ckpt is not None:
        check_resumable(ckpt, cfg, meta, ckpt_path)
    switch = ckpt and data_switch(ckpt, meta)  # --new_data: a row of log.jsonl says so
    files = RunFiles(cfg)  # out_dir's ckpt.pt, log.jsonl (one JSON object per line), config.json
    if procs.master:
        files.hold()  # one run at a time in out_dir: a second is refused now, not after its warm-up

    with procs.running(device, cfg.ddp_timeout_s, ckpt_path):
        if procs.master:
            print(config_text(dataclasses.asdict(cfg)))
            if meta is None:
                print(f"note: no meta.json in {cfg.data_dir}: raw shards, vocab_size {vocab}")
        # training batches come from the run's seed; the evaluation's from eval_seed, one val set for
        # every run (the same text scores every seed and config), unless eval_seed=-1
        shape = dict(block_size=cfg.block_size, batch_size=cfg.batch_size, device=device,
                     check_vocab=cfg.vocab_size)
        batches = {'train': Batches(train_paths, seed=cfg.seed, **shape),
                   'scored': {split: Batches(paths, seed=cfg.val_seed(), **shape)
                              for split, paths in (('train', train_paths), ('val', val_paths))}}
        # the model, optimizer and loss scaler: fresh, or as the checkpoint left them
        torch.manual_seed(cfg.seed)  # the same initial weights in every process and every run
        raw_model = GPT(GPTConfig(**cfg.model_args())).to(device)
        optimizer = raw_model.configure_optimizers(cfg.weight_decay, cfg.learning_rate,
                                                   (cfg.beta1, cfg.beta2), device_type,
                                                   optimizer=cfg.optimizer)
        scaler = torch.amp.GradScaler(device_type, enabled=(dtype == 'float16'))  # float16 only
        torch.manual_seed(cfg.seed + 1 + procs.rank)  # dropout masks: a stream in each process
        # a scratch run holds no training at iteration 0: nothing to save there
        state = (RunState(saved_at=0) if ckpt is None else
                 restore(ckpt, raw_model, optimizer, scaler, cfg=cfg, dist=procs))
        accum = micro_steps(cfg.gradient_accumulation_steps, procs.world)  # this process's
        if procs.master:
            rounded = "" if procs.world * accum == cfg.gradient_accumulation_steps else (
                f" (gradient_accumulation_steps={cfg.gradient_accumulation_steps} rounded up to "
                f"{procs.world * accum}, a multiple of {procs.world} processes)")
            print(f"tokens per iteration: {procs.world * accum * cfg.batch_size * cfg.block_size:,}"
                  f" = {procs.world} process(es) x {accum} micro-step(s) x batch_size "
                  f"{cfg.batch_size} x block_size {cfg.block_size}{rounded}")
            print(f"model: {raw_model.get_num_params() / 1e6:.2f}M parameters, "
                  f"{raw_model.flops_per_token() / 1e6:.1f} MFLOPs per token (training)")
        if device_type == 'cuda':
            torch.backends.cuda.matmul.allow_tf32 = True  # allow tf32 on matmul
            torch.backends.cudnn.allow_tf32 = True  # allow tf32 on cudnn
        if procs.master and switch:
            print(f"note: --new_data: resuming at iter {state.iter_num} on {switch['data_switch']['to']}, "
                  f"after {switch['data_switch']['from']}")
        return train(cfg, meta, batches, procs, files, accum=accum, raw_model=raw_model,
                     optimizer=optimizer, scaler=scaler, state=state, first_rows=[switch] if switch else [])


def train(cfg, meta, batches, procs, files, *, accum, raw_model, optimizer, scaler, state, first_rows=()):
    device_type = torch.device(cfg.device).type
    ctx = autocast_context(device_type, cfg.dtype)
    tokens_per_iter = procs.world * accum * cfg.batch_size * cfg.block_size
    flops_per_token = raw_model.flops_per_token()  # at block_size: the max_flops budget's unit
    model = torch.compile(raw_model) if cfg.compile else raw_model  # evaluation runs this one
    train_model = model if not procs.ddp else DDP(
        model, device_ids=[torch.device(cfg.device).index] if device_type == 'cuda' else None)
    stop_signals = StopSignals(announce=procs.master)  # Ctrl-C / SIGTERM: step, save, exit
    progress = Progress(cfg, iter_num=state.iter_num, tokens_seen=state.tokens_seen,
                        tokens_per_iter=tokens_per_iter, flops_per_token=flops_per_token,
                        train_s=state.train_s, elapsed_s=state.elapsed_s)
    peak = peak_flops(cfg.device, cfg.peak_flops, cfg.dtype)  # for MFU: this GPU's, once
    if procs.master and peak is None and device_type == 'cuda':
        print(f"note: no peak FLOP/s known for {torch.cuda.get_device_name(cfg.device)!r}: MFU is not logged; "
              "--peak_flops=<its dense FLOP/s for this dtype> gives it")
    # what evaluating, saving and logging need
    run = SimpleNamespace(cfg=cfg, meta=meta, files=files, procs=procs, progress=progress, peak=peak,
                          watch=NonFiniteWatch(cfg, cfg.device, procs),
                          flops_per_token=flops_per_token, summary=dict.fromkeys(
                              ('train_loss', 'val_loss', 'train_bpb', 'val_bpb')))
    X, Y = batches['train'].get(0, state.iter_num, procs.rank * accum)  # the first micro-batch
    micro_s = warm_up(train_model, X, Y, ctx, scaler, optimizer, procs)  # compiles, if asked
    note = None if cfg.compile else progress.start_estimate(  # (compiled: it timed the compiler)
        micro_s, accum=accum, eval_batches=2 * math.ceil(cfg.eval_iters / procs.world),
        iter_num=state.iter_num, train_s=state.train_s, device_type=device_type)
    if procs.master and note:
        print(note, flush=True)
    batches['scored']['val'].get(1, 0)  # the first eval batch's ids are checked too before out_dir changes
    if procs.master:
        files.open(state.iter_num)
        for row in first_rows:
            files.write_row(row)
    stop_signals.install()
    progress.start()
    last = {'iter': state.iter_num, 'tokens': state.tokens_seen, 'train_s': state.train_s}
    try:
        while True:
            # 1. stop? at a budget or a signal, decided together by every process
            state.train_s, state.elapsed_s = progress.train_s, progress.elapsed_s
            signalled, out_of_time = procs.agree(stop_signals, progress.out_of_time())
            stop = progress.stop_reason(state.iter_num, out_of_time, signalled)
            state.finished = stop not in (None, 'signal')  # a checkpoint from here on is the last

            # 2. evaluate (also at the end) and save; not twice at one iteration (a resumed one's)
            if progress.eval_due(state.iter_num, stop) and state.evaluated_at != state.iter_num:
                sync_device(device_type)
                with progress.paused(evaluation=True):
                    losses = evaluate(model, batches['scored'], state.iter_num, cfg, meta, ctx,
                                      stop_signals, procs)
                    if losses is None:  # cut short by a signal: not logged, not a best_val_loss
                        stop = 'signal'
                    elif record_eval(losses, state, run) and state.iter_num > 0:  # (0: untrained)
                        save(raw_model, optimizer, scaler, state, run)
            if stop:
                break

            # 3. one optimizer step over `accum` micro-batches
            lr = cfg.lr_at(state.iter_num)
            for group in optimizer.param_groups:
                group['lr'] = lr
            loss_sum = torch.zeros((), device=cfg.device)
            for micro_step in range(accum):
                if procs.ddp:  # all-reduce the gradients on the last micro-step only
                    train_model.require_backward_grad_sync = (micro_step == accum - 1)
                with ctx:
                    _, loss = train_model(X, Y)
                    loss = loss / accum  # the mean over micro-steps, as one big batch would have it
                # fetch the next micro-batch while the forward pass runs on the GPU
                first = procs.rank * accum  # this process's first global micro-step
                if micro_step + 1 < accum:
                    X, Y = batches['train'].get(0, state.iter_num, first + micro_step + 1)
                else:
                    X, Y = batches['train'].get(0, state.iter_num + 1, first)
                scaler.scale(loss).backward()
                loss_sum += loss.detach()
            if cfg.grad_clip != 0.0:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(raw_model.parameters(), cfg.grad_clip)
            scaler.step(optimizer)  # skipped by the scaler if float16 gradients overflowed
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
            run.watch.step(loss_sum, state.iter_num)  # notes a nan/inf loss, no wait for the GPU
            state.tokens_seen += tokens_per_iter

            # 4. log: a progress line and a row of log.jsonl
            if state.iter_num % cfg.log_interval == 0:
                last = log_step(loss_sum, lr, state, last, run, raw_model)
            state.iter_num += 1

        if state.saved_at != state.iter_num:  # the final state (also after a signal), if trained
            save(raw_model, optimizer, scaler, state, run)
    finally:
        stop_signals.restore()
        files.close()

    run.summary.update(iter_num=state.iter_num, tokens=state.tokens_seen, stop=stop,
                       flops=state.tokens_seen * flops_per_token, best_val_loss=state.best_val_loss,
                       train_s=state.train_s, elapsed_s=progress.elapsed_s,
                       ckpt_path=files.ckpt_path, params=raw_model.get_num_params())
    if stop == 'signal':  # exit 128 + the signal's number, as a shell does
        stop_signals.exit(f"at iter {state.iter_num}; resume with --init_from=resume"
                          if state.iter_num else "before any training: nothing saved",
                          announce=procs.master)
    if procs.master:
        print(f"done: {stop} at iter {state.iter_num}, {state.tokens_seen:,} tokens, "
              f"{state.train_s:.1f}s training")
    return run.summary


@torch.no_grad()
def evaluate(model, batches, iter_num, cfg, meta, ctx, stop_signals, procs):
    """The mean loss over the same eval_iters batches of each split every time (drawn from eval_seed),
    shared among the processes, in bits per byte, and its standard error from the spread of the
    batches' losses (how far this val sample's mean may sit from the split's); with a line before
    and after. None when a signal cuts it short: at once in one process, between batches (the same
    ones in every process) with DDP."""
    if procs.master:
        print(f"step {iter_num}: evaluating, {cfg.eval_iters} batches per split...", flush=True)
    t0, out = time.time(), {}
    model.eval()
    try:
        stop_signals.cut_short = not procs.ddp
        for split, data in batches.items():
            each = torch.zeros(cfg.eval_iters, device=cfg.device)  # each batch's loss, filled by its process
            # the same count of batches in every process
            for k in range(procs.rank, procs.rank + cfg.eval_iters, procs.world):
                if procs.agree(stop_signals)[0]:
                    raise StopSignals.CutShort
                if k < cfg.eval_iters:
                    X, Y = data.get(1, k)  # key (1, k): never a training key (0, iter, step)
                    with ctx:
                        _, loss = model(X, Y)
                    each[k] = loss.float()
            each = procs.all_reduce(each).tolist()
            n = len(each)
            out[f'{split}_loss'] = loss = sum(each) / n
            out[f'{split}_bpb'] = bits_per_byte(meta, split, loss)  # None for raw shards
            # s.e. of the mean = sd of the batch losses / sqrt(n): how far this val sample's mean may sit
            # from the split's; the batch losses let a report say the same of a gap between two runs
            out[f'{split}_se'] = (math.sqrt(sum((v - loss) ** 2 for v in each) / (n - 1) / n) if n > 1
                                  else None)
            if split == 'val':
                out['val_batches'] = [round(v, 5) for v in each]
        stop_signals.cut_short = False  # inside the try: a signal from here on is only noted
    except StopSignals.CutShort:
        out = None
    finally:
        stop_signals.cut_short = False
        model.train()
    if procs.master and out is None:
        print(f"step {iter_num}: evaluation cut short, not logged; resuming runs it first",
              flush=True)
    elif procs.master:
        bpb = f" ({out['val_bpb']:.4f} bits per byte)" if out['val_bpb'] is not None else ""
        se = f" ± {out['val_se']:.4f} (s.e. over {cfg.eval_iters} batches)" if out['val_se'] is not None else ""
        print(f"step {iter_num}: train loss {out['train_loss']:.4f}, val loss "
              f"{out['val_loss']:.4f}{se}{bpb} ({duration(time.time() - t0)})", flush=True)
    return out


def record_eval(losses, state, run):
    """Check, log and keep an evaluation's losses; whether a checkpoint is due: the val loss
    improved on the best so far, or always_save_checkpoint."""
    run.watch.check(state.iter_num, losses['train_loss'], losses['val_loss'], kept=kept(run.files))
    run.summary.update(losses)
    if run.procs.master:
        run.files.write_row({'iter': state.iter_num, **losses, 'lr': run.cfg.lr_at(state.iter_num),
                             'tokens': state.tokens_seen,
                             'flops': state.tokens_seen * run.flops_per_token,
                             'elapsed_s': state.elapsed_s, 'train_s': state.train_s})
    improved = losses['val_loss'] < state.best_val_loss
    state.best_val_loss = min(state.best_val_loss, losses['val_loss'])
    state.evaluated_at = state.iter_num
    return improved or run.cfg.always_save_checkpoint


def log_step(loss_sum, lr, state, last, run, raw_model):
    """The progress line and the log row of step state.iter_num; the row it becomes the last of."""
    run.watch.check(state.iter_num, kept=kept(run.files))
    lossf = run.procs.all_reduce(loss_sum).item() / run.procs.world  # every micro-step and process
    state.train_s, state.elapsed_s = run.progress.train_s, run.progress.elapsed_s
    dt = max(state.train_s - last['train_s'], 1e-9)
    s_per_iter = dt / (state.iter_num + 1 - last['iter'])
    tokens_per_s = (state.tokens_seen - last['tokens']) / dt
    peak = run.peak
    mfu = raw_model.estimate_mfu(tokens_per_s / run.procs.world, peak) if peak else None  # per GPU
    if run.procs.master:
        where, eta = run.progress.status(state.iter_num, state.train_s, s_per_iter)
        print(f"{where}: loss {lossf:.4f}, lr {lr:.2e}, {1000 * s_per_iter:.1f}ms/iter, "
              f"{tokens_per_s:,.0f} tok/s" + (f", mfu {100 * mfu:.2f}%" if peak else "")
              + f", {eta}", flush=True)
        run.files.write_row({'iter': state.iter_num, 'loss': lossf, 'lr': lr,
                             'tokens': state.tokens_seen,
                             'flops': state.tokens_seen * run.flops_per_token,
                             'elapsed_s': state.elapsed_s, 'train_s': state.train_s,
                             'tokens_per_s': tokens_per_s, 'mfu': mfu})
    return {'iter': state.iter_num + 1, 'tokens': state.tokens_seen, 'train_s': state.train_s}


def save(raw_model, optimizer, scaler, state, run):
    """Write ckpt.pt (the master process; every process gives its random generators)."""
    run.watch.check(state.iter_num, model=raw_model, kept=kept(run.files))
    rng = run.procs.gather(rng_state())
    if run.procs.master:
        run.files.save(make_checkpoint(raw_model, optimizer, scaler, state, cfg=run.cfg,
                                       meta=run.meta, rng=rng))
        print(f"saved {run.files.ckpt_path} at iter {state.iter_num}")
    state.saved_at = state.iter_num


def kept(files):
    """The end of a stop line: the last checkpoint, if there is one, stays as it was."""
    return f"; {files.ckpt_path} is kept as it was" if os.path.exists(files.ckpt_path) else ""


def warm_up(model, X, Y, ctx, scaler, optimizer, procs):
    """One forward + backward before the clock starts, then undone (gradients, random generators):
    compiling is not training time, and its duration sizes up the run. Seconds it took."""
    state = rng_state()
    device_type = X.device.type
    sync_device(device_type)
    t0 = time.time()
    with model.no_sync() if procs.ddp else nullcontext():
        with ctx:
            _, loss = model(X, Y)
        scaler.scale(loss).backward()
    sync_device(device_type)
    seconds = time.time() - t0
    optimizer.zero_grad(set_to_none=True)
    set_rng_state(state)
    return seconds


if __name__ == "__main__":
    keep_output_from_stopping_the_run()  # a closed pipe or terminal: the run goes on, and saves
    stop_with_the_sweep()  # started by sweep.py: a SIGTERM if the sweep is killed
    run_main(main)
