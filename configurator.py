"""
The plumbing every script shares (nanoGPT's configurator.py, checked against a dataclass instead of
exec-ed into globals): config files and `--key=value` flags (`parse_config`), `--help` from the
fields' comments, one-line errors (`UsageError`, `run_main`), crash-safe writes and folder locks.
"""
import contextlib
import dataclasses
import difflib
import glob
import errno
import inspect
import os
import re
import signal
import sys
import types


class UsageError(Exception):
    """A mistake in what the user asked for: scripts print it as one line and exit with code 2."""


# -----------------------------------------------------------------------------
# --key=value parsing

def _coerce(name, text, default, from_config=False):
    """`text` as the type of `default` (the value in effect), or a UsageError quoting it."""
    kind = type(default)
    try:
        if kind is bool:
            low = text.strip().lower()
            if low in ('1', 'true', 'yes', 'on'):
                return True
            if low in ('0', 'false', 'no', 'off'):
                return False
            raise ValueError
        if kind is int:
            return int(text)
        if kind is float:
            return float(text)
        if kind is list:  # comma-separated; a repeated flag appends (see parse_config)
            return [part for part in text.split(',') if part]
        return text
    except ValueError:
        raise UsageError(f"--{name}={text!r} is not a valid {kind.__name__} "
                         f"({'the value in effect' if from_config else 'the default'} is "
                         f"{default!r})") from None


def _check_value(name, value, default, metadata=None):
    """Type check for a config file's value; metadata `accepts_bool`: a str field that was a bool."""
    kind = type(default)
    if isinstance(value, bool) and (metadata or {}).get('accepts_bool'):
        return value
    if kind is float and type(value) is int:
        return float(value)
    if kind is list and isinstance(value, str):
        return [value]
    if type(value) is not kind:
        raise UsageError(f"{name} = {value!r} is a {type(value).__name__}, expected "
                         f"{kind.__name__} (the default is {default!r})")
    return value


def _unknown(name, valid):
    # initials first: --lr is learning_rate, --bs batch_size; then names spelled alike
    close = [v for v in valid if len(name) > 1 and ''.join(w[0] for w in v.split('_')) == name]
    close += [v for v in difflib.get_close_matches(name, valid, n=3, cutoff=0.5) if v not in close]
    hint = f"did you mean {', '.join(close)}?" if close else "run with --help to list the keys"
    return UsageError(f"unknown key {name!r}; {hint}")


def require(cfg, names, ok, must):
    """ValueError "{name} {must}, got {value}" for the first of the fields `names` failing `ok`.
    Write `ok` as what is allowed, so that nan fails it too: v >= 0, never not v < 0."""
    for name in names.split():
        value = getattr(cfg, name)
        if not ok(value):
            raise ValueError(f"{name} {must}, got {value!r}")


def exec_config_file(path):
    """The names a plain-Python config file assigns (not modules, functions, _private names). Its
    folder, then configs/, are importable while it runs: `from _recipe import *` works anywhere."""
    if not os.path.isfile(path):
        here = os.path.dirname(path)
        folders = [here or '.', os.path.join(here, 'configs'), 'configs']
        known = [os.path.normpath(os.path.join(d, n)) for d in folders if os.path.isdir(d)
                 for n in sorted(os.listdir(d)) if n.endswith('.py')]
        near = difflib.get_close_matches(os.path.basename(path),
                                         [os.path.basename(k) for k in known], n=1)
        near = [k for k in known if near and os.path.basename(k) == near[0] and 'configs' in k] or \
            [k for k in known if near and os.path.basename(k) == near[0]]
        raise UsageError(f"config file {path!r} not found"
                         + (f"; did you mean {near[0]}?" if near else ""))
    scope, folder = {'__file__': path}, os.path.dirname(os.path.abspath(path))
    before = set(sys.modules)
    shipped = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'configs')
    sys.path[:0] = [folder, shipped]
    try:
        with open(path) as f:
            exec(compile(f.read(), path, 'exec'), scope)
    except SystemExit as e:  # a config that calls sys.exit() is a mistake too, not a silent exit
        raise UsageError(f"config file {path!r} called sys.exit({e.code!r}); config files only "
                         "assign keys") from None
    except Exception as e:  # a user's syntax error is a one-line message too
        raise UsageError(f"config file {path!r} failed: {type(e).__name__}: {e}") from None
    finally:  # the next config file imports its own _recipe, not this one's
        sys.path.remove(folder)
        sys.path.remove(shipped)
        for name in set(sys.modules) - before:
            where = getattr(sys.modules[name], '__file__', '') or ''
            if os.path.dirname(os.path.abspath(where)) in (folder, shipped):
                del sys.modules[name]
    return {k: v for k, v in scope.items()
            if not k.startswith('_')
            and not isinstance(v, (types.ModuleType, types.FunctionType, type))}


def parse_config(cls, argv, *, config_files=True, usage=None, doc=None):
    """
    The dataclass `cls` from config files (*.py) and `--key=value` flags, in order: a later argument
    wins. A bare bool flag is true; a list flag takes a,b,c and, repeated, appends. An unknown key,
    a wrong type or __post_init__'s ValueError is a UsageError; `--help` prints help_text, exits 0.
    """
    defaults = {f.name: getattr(cls(), f.name) for f in dataclasses.fields(cls)}
    metadata = {f.name: f.metadata for f in dataclasses.fields(cls)}
    values, seen_list = {}, set()
    for arg in argv:
        if arg in ('-h', '--help'):
            print(help_text(cls, usage, doc))
            raise SystemExit(0)
        if arg.startswith('--'):
            key, eq, text = arg[2:].partition('=')
            if key not in defaults:
                raise _unknown(key, list(defaults))
            if not eq and type(defaults[key]) is not bool:
                raise UsageError(f"flag {arg!r} has no value; write --{key}=VALUE")
            value = (_coerce(key, text, values.get(key, defaults[key]), key in values) if eq
                     else True)
            if isinstance(value, list) and key in seen_list:
                value = values[key] + value  # repeated list flag: append
            seen_list.add(key)
            values[key] = value
        elif config_files and arg.endswith('.py'):
            for key, value in exec_config_file(arg).items():
                if key not in defaults:
                    raise UsageError(f"{arg}: " + str(_unknown(key, list(defaults))))
                values[key] = _check_value(key, value, defaults[key], metadata[key])
        else:
            hint = "config files end in .py; " if config_files else ""
            here = os.path.join(os.path.dirname(os.path.abspath(sys.argv[0] or '.')), 'configs',
                                f"{arg}.py")
            near = next((p for p in (os.path.join('configs', f"{arg}.py"), here)
                         if os.path.isfile(p)), None)
            if config_files and near:  # a bare name, as sweep.py --configs takes them
                hint = f"did you mean {os.path.relpath(near)}? "
            raise UsageError(f"unexpected argument {arg!r}; {hint}flags look like --key=value")
    try:
        return cls(**values)
    except ValueError as e:
        raise UsageError(str(e)) from None


# -----------------------------------------------------------------------------
# help: one line per key, read from the comment beside the field where it is defined

_FIELD = re.compile(r'^\s+(\w+)\s*:\s*[^=#]+=[^#]*#\s*(.+?)\s*$')


def field_docs(cls):
    """{field: its trailing comment} for `cls` and its bases (a subclass's comment wins)."""
    docs = {}
    for klass in reversed(cls.__mro__):
        try:
            source = inspect.getsource(klass)
        except (OSError, TypeError):  # built-ins, classes made by make_dataclass
            continue
        for line in source.splitlines():
            m = _FIELD.match(line)
            if m:
                docs[m.group(1)] = m.group(2)
    return docs


def help_text(cls, usage=None, doc=None):
    """The usage line, then every key as `--key=default  meaning`, in field order, then `doc`."""
    usage = usage or f"python {os.path.basename(sys.argv[0])} [config.py ...] [--key=value ...]"
    docs = field_docs(cls)
    rows = [(f"--{f.name}={getattr(cls(), f.name)!r}", docs.get(f.name, ''))
            for f in dataclasses.fields(cls)]
    width = min(max(len(k) for k, _ in rows), 34)
    lists = any(isinstance(getattr(cls(), f.name), list) for f in dataclasses.fields(cls))
    lines = [f"usage: {usage}", "", "keys (a later argument wins" +
             ("; a list key takes a,b,c and, repeated, appends" if lists else "") + "):"]
    lines += [f"  {k:<{width}}  {d}".rstrip() for k, d in rows]
    return "\n".join(lines + (['', doc.strip()] if doc else []))


# -----------------------------------------------------------------------------
# running a script, writing files

def run_main(main):
    """Run a script's main(): a UsageError (or a failed torch.compile) is one line on stderr and
    exit code 2, Ctrl-C exits 130, a closed stdout pipe exits quietly."""
    signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C: KeyboardInterrupt from here
    try:
        main(sys.argv[1:])
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:  # ^C: no traceback, and the shell's exit code for SIGINT
        print(file=sys.stderr)
        sys.exit(130)
    except BrokenPipeError:  # `python sample.py | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit
        sys.exit(1)
    except Exception as e:
        line = compile_failure(e)
        if line is None:
            raise
        print(f"error: {line}", file=sys.stderr)
        sys.exit(2)


def compile_failure(e):
    """A torch.compile failure as one line (most often a cache entry cut short), else None."""
    if not type(e).__module__.startswith(('torch._dynamo', 'torch._inductor')):
        return None
    from torch._inductor.runtime.cache_dir_utils import cache_dir
    why = next((line for line in str(e).splitlines()  # not a heading such as "backend=... raised:"
                if line.strip() and not line.rstrip().endswith(':')), type(e).__name__)[:200]
    return (f"torch.compile failed ({why}); a compile stopped part-way can leave its cache cut "
            f"short: remove {cache_dir()} and rerun, or leave out --compile")


def split_flags(argv, cls, passed_on):
    """(a script's own arguments, the flags it passes on to the dataclass `passed_on`): sweep.py
    hands train.py's keys to train.py. A key neither knows is an error naming the nearest."""
    mine = {f.name for f in dataclasses.fields(cls)}
    theirs = {f.name for f in dataclasses.fields(passed_on)}
    own, other = [], []
    for arg in argv:
        key = arg[2:].partition('=')[0] if arg.startswith('--') and arg != '--help' else None
        if key is None or key in mine:
            own.append(arg)
        elif key in theirs:
            other.append(arg)
        else:
            raise _unknown(key, sorted(mine | theirs))
    return own, other


def numbers(name, texts, kind):
    """A list flag's strings (--widths=64,128) as positive finite numbers of `kind`."""
    try:
        values = [kind(t) for t in texts]
    except ValueError:
        raise UsageError(f"--{name}={','.join(texts)}: give {kind.__name__}s separated by "
                         "commas") from None
    if not values or not all(0 < v < float('inf') for v in values):
        raise UsageError(f"--{name}={','.join(texts)}: give one or more positive numbers")
    return values


def keys_given(argv):
    """The keys of the `--key[=value]` flags in argv: what the user set on the command line."""
    return {a[2:].partition('=')[0] for a in argv if a.startswith('--')}


def regular_file(path, what):
    """`path` if it is a regular file, else a UsageError naming `what`: a folder, device, pipe or
    socket is never read (/dev/zero has no end)."""
    if os.path.isfile(path):
        return path
    if not os.path.exists(path):
        raise UsageError(f"{what} {path!r} not found")
    kind = 'a folder' if os.path.isdir(path) else 'not a regular file (a device, pipe or socket)'
    raise UsageError(f"{what} {path!r} is {kind}; name a file")


def atomic_write(path, write, *, then=''):
    """write(f) into a temp file beside `path`, fsync, then os.replace: a crash leaves `path` as it
    was. An OSError (or torch.save's RuntimeError on a full disk) is write_error's line + `then`."""
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, 'wb') as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())  # the data is on disk before the rename makes it visible
        os.replace(tmp, path)
    except (OSError, RuntimeError) as e:
        if caused_by(e, KeyboardInterrupt):  # a second Ctrl-C in torch.save, which wraps it
            raise KeyboardInterrupt from None
        raise write_error(path, e, then) from None
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def caused_by(e, kind, errnos=()):
    """Whether `e` or an exception in its chain is a `kind` (with one of `errnos`, if given)."""
    while e is not None:
        if isinstance(e, kind) and (not errnos or getattr(e, 'errno', None) in errnos):
            return True
        e = e.__cause__ or e.__context__
    return False


def disk_full(e):
    """Whether an exception comes from a full disk (or quota)."""
    return caused_by(e, OSError, (errno.ENOSPC, errno.EDQUOT))


def write_error(path, e, then=''):
    """The one line for a failed write: the file a temp file was to become, why, and `then`."""
    why = 'no space left on device' if disk_full(e) else (getattr(e, 'strerror', None)
                                                          or str(e).strip()
                                                          or type(e).__name__).splitlines()[0]
    path = re.sub(r'(\.(?:tmp|new)\d+)+$', '', path)  # the file a temp or staged one was to become
    return UsageError(f"could not write {path!r}: {why[:1].lower()}{why[1:]}"
                      + (f"; {then}" if then else ''))


def lock_folder(path, what):
    """Hold the folder `path` until this process exits or closes the returned fd: a flock on the
    folder itself leaves no lock file, and dies with its process (kill -9 too), so it is never
    stale. Held elsewhere: a UsageError naming the holder and `what`. No flock (Windows): None."""
    try:
        import fcntl
    except ImportError:
        return None
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise UsageError(f"{path} is in use by {lock_holder(path)}, which is writing {what} there; "
                         "wait for it to finish or stop it, or use another folder") from None
    return fd


def lock_holder(path):
    """'pid 1234 (python train.py ...)' holding the flock on `path` (/proc/locks), else 'another
    process'."""
    st = os.stat(path)
    device = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        with open('/proc/locks') as f:
            pid = next(line.split()[4] for line in f
                       if 'FLOCK' in line and line.split()[5] == device)
        with open(f'/proc/{pid}/cmdline', 'rb') as f:
            argv = f.read().decode(errors='replace').strip('\0').split('\0')
        command = ' '.join([os.path.basename(argv[0]), *argv[1:]])
        command = command if len(command) <= 100 else command[:97] + '...'
    except (OSError, StopIteration, IndexError):
        return "another process"
    return f"pid {pid} ({command})"


def fsync_dir(path):
    """Make a folder's renames durable (a power cut cannot undo them); best effort: Windows cannot
    open a folder, some file systems do not fsync one."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def config_paths(names):
    """Config files from paths or names (gpt -> configs/gpt.py); none: every architecture's."""
    here = os.path.dirname(os.path.abspath(__file__))
    shipped = sorted(glob.glob(os.path.join(here, 'configs', '[!_]*.py')))
    known = [os.path.basename(p)[:-3] for p in shipped]
    paths = []
    for c in names:
        if c.endswith('.py'):
            if not os.path.isfile(c):
                raise UsageError(f"config {c!r} not found")
            paths.append(c)
        elif c in known:
            paths.append(os.path.relpath(shipped[known.index(c)]))
        else:
            archs = [k for k in known if k != 'quick']  # (quick.py is the quick start's, not one)
            raise UsageError(f"unknown config {c!r}; choose among {', '.join(archs)} or pass a .py "
                             "path")
    paths = paths or [os.path.relpath(p) for p in shipped if not p.endswith('quick.py')]
    if not paths:
        raise UsageError("no configs: pass config files or run from the repository root")
    return paths


def script(name):
    """A file of this repository as a command typed here names it (`../gpt-blocks/train.py`)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name)
    return name if os.path.abspath(name) == path else os.path.relpath(path)


def quick_start(prepare=True):
    """The quick start's commands as typed here: a first run in about a minute on a CPU."""
    train = f"python {script('train.py')} {script('configs/quick.py')}"
    return f"python {script('prepare.py')} && {train}" if prepare else train


def no_checkpoint(path):
    """The error for a missing out_dir/ckpt.pt, with checkpoint_advice's fix."""
    return UsageError(f"no checkpoint at {path!r}; {checkpoint_advice(path)}")


def checkpoint_advice(path):
    """What to do about a missing out_dir/ckpt.pt: the config that trains that out_dir, the runs
    with the nearest names, or how to train a first one."""
    folder = os.path.normpath(os.path.dirname(path) or '.')
    here = os.path.dirname(os.path.abspath(__file__))
    for config in sorted(glob.glob(os.path.join(here, 'configs', '[!_]*.py'))):
        try:
            trains = os.path.normpath(str(exec_config_file(config).get('out_dir', '')))
        except UsageError:  # a config that does not read cannot be the one
            continue
        if trains == folder:
            return f"train it first: python {script('train.py')} {os.path.relpath(config)}"
    runs = {os.path.relpath(os.path.dirname(p))  # here and beside the scripts, by folder name
            for p in glob.glob('out*/ckpt.pt') + glob.glob(os.path.join(here, 'out*', 'ckpt.pt'))}
    alike = {r: difflib.SequenceMatcher(None, os.path.basename(folder), os.path.basename(r)).ratio()
             for r in runs}
    near = sorted((r for r in runs if alike[r] >= 0.5), key=lambda r: (-alike[r], r))
    if near:
        return f"the runs with the nearest names: {', '.join(near[:3])} (--out_dir=...)"
    return f"train one first ({quick_start()}) or point out_dir at the right folder"
