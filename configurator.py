"""
The plumbing every script shares (nanoGPT's configurator.py, checked against a dataclass instead of
exec-ed into globals): config files and `--key=value` flags (`parse_config`), `--help` from the
fields' comments, one-line errors (`UsageError`, `run_main`), crash-safe writes, and the one reader
of JSON-lines files. Every folder a script writes has one lock and one swap: `hold(path)` guards a
*name* (whoever writes, renames or removes a folder holds it first; once locked, a holder looks the
name up again), `swap_in(new, dest, ...)` replaces a folder whole in renames a kill can cut anywhere
(the next holder finishes it), and only what is ours, hidden names included, is ever replaced.
"""
import contextlib
import dataclasses
import difflib
import glob
import inspect
import json
import os
import re
import signal
import stat
import sys
import time
import types

try:
    import fcntl
except ImportError:  # (Windows: no flock; nothing is locked there)
    fcntl = None

HERE = os.path.dirname(os.path.abspath(__file__))  # this repository's scripts


def cores():
    """The CPU cores this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count()


class UsageError(Exception):
    """A mistake in what the user asked for: scripts print it as one line and exit with code 2."""


def nearest(name, choices, n=3):
    """The choices a mistyped `name` may have meant: by initials first (lr: learning_rate), then
    spelled alike. The one 'did you mean' of flags, config files and run folders."""
    initials = [c for c in choices if len(name) > 1 and ''.join(w[:1] for w in c.split('_')) == name]
    return (initials + [c for c in difflib.get_close_matches(name, choices, n=n, cutoff=0.6)
                        if c not in initials])[:n]


# -----------------------------------------------------------------------------
# config files and --key=value flags

def config_not_found(path, what='config file'):
    """The one line for a config file that is not at `path`: the nearest shipped config, as a path
    typed from here (`configs/llama` or `quick`: configs/llama.py, configs/quick.py)."""
    configs = os.path.join(HERE, 'configs')
    name = os.path.basename(path if path.endswith('.py') else f"{path}.py")
    near = nearest(name, [n for n in sorted(os.listdir(configs)) if n.endswith('.py')], n=1)
    return UsageError(f"{what} {path!r} not found; " + (
        f"did you mean {os.path.relpath(os.path.join(configs, near[0]))}?" if near else
        f"the shipped configs are in {os.path.relpath(configs)}/"))


def _coerce(name, text, default, from_config=False):
    """`text` as the type of `default` (the value in effect), or a UsageError quoting it."""
    kind = type(default)
    try:
        if kind is bool:
            low = text.strip().lower()
            if low in ('1', 'true', 'yes', 'on', '0', 'false', 'no', 'off'):
                return low in ('1', 'true', 'yes', 'on')
            raise ValueError
        if kind is list:  # comma-separated; a repeated flag appends (see parse_config)
            return [part for part in text.split(',') if part]
        return kind(text)
    except ValueError:
        raise UsageError(f"--{name}={text!r} is not a valid {kind.__name__} "
                         f"({'the value in effect' if from_config else 'the default'} is "
                         f"{default!r})") from None


def _check_value(name, value, default):
    """A config file's value, checked against the type of the default."""
    kind = type(default)
    if kind is float and type(value) is int:
        return float(value)
    if kind is list and isinstance(value, str):
        return [value]
    if type(value) is not kind:
        raise UsageError(f"{name} = {value!r} is a {type(value).__name__}, expected "
                         f"{kind.__name__} (the default is {default!r})")
    return value


def _unknown(name, valid):
    close = nearest(name, valid)
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
    if os.path.isdir(path):
        raise UsageError(f"config file {path!r} is a folder; name a config file (configs/*.py)")
    if not os.path.isfile(path):
        raise config_not_found(path)
    scope, folder = {'__file__': path}, os.path.dirname(os.path.abspath(path))
    before = set(sys.modules)
    shipped = os.path.join(HERE, 'configs')
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
                values[key] = _check_value(key, value, defaults[key])
        elif config_files and '=' not in arg:  # a config without .py, or a bare name: configs/x.py
            raise config_not_found(arg)
        else:
            raise UsageError(f"unexpected argument {arg!r}; flags look like --key=value")
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
        with contextlib.suppress(OSError, TypeError):  # built-ins, classes made by make_dataclass
            docs.update(m.groups() for m in map(_FIELD.match, inspect.getsource(klass).splitlines())
                        if m)
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
# running a script, reading and writing files

def run_main(main):
    """Run a script's main(): a UsageError, or an OSError on a path (no permission, a full disk,
    ...), is one line on stderr and exit code 2, Ctrl-C exits 130, a closed stdout pipe exits
    quietly."""
    signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C: KeyboardInterrupt from here
    try:
        main(sys.argv[1:])
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except BrokenPipeError:  # `python sample.py | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit
        sys.exit(1)
    except OSError as e:
        if e.filename is None:
            raise
        print(f"error: {e.filename}: {e.strerror}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:  # ^C: no traceback, and the shell's exit code for SIGINT
        print(file=sys.stderr)
        sys.exit(130)


def regular_file(path, what, *, output=False, fix='name a file'):
    """`path` if it is a regular file (or, for an output, not there yet), else a UsageError naming
    `what` and `fix`: a folder, device, pipe or socket is never read (/dev/zero has no end), nor
    replaced by a file (/dev/null)."""
    if os.path.isfile(path) or output and not os.path.lexists(path):
        return path
    if not os.path.exists(path):
        raise UsageError(f"{what} {path!r} not found")
    kind = 'a folder' if os.path.isdir(path) else 'not a regular file (a device, pipe or socket)'
    raise UsageError(f"{what} {path!r} is {kind}; {fix}")


def atomic_write(path, write):
    """write(f) into a temp file beside `path`, fsync, then os.replace: a crash leaves `path` as it
    was. A failure (torch.save's RuntimeError on a full disk too) is one line naming the path."""
    regular_file(path, 'output', output=True)
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, 'wb') as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())  # the data is on disk before the rename makes it visible
        os.replace(tmp, path)
    except (OSError, RuntimeError) as e:
        raise write_error(path, e) from None
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def write_error(path, e):
    """The one line for a failed write of `path`: why, from the deepest cause (torch.save wraps a
    full disk's OSError); a second Ctrl-C inside torch.save is a KeyboardInterrupt again."""
    while e is not None:
        if isinstance(e, KeyboardInterrupt):
            raise KeyboardInterrupt
        why, e = getattr(e, 'strerror', None) or str(e).strip(), e.__cause__ or e.__context__
    return UsageError(f"could not write {path!r}: {why[:1].lower()}{why.splitlines()[0][1:]}")


# -----------------------------------------------------------------------------
# one lock, one swap: every folder a script writes, renames or removes (train.py's out_dir and prev/,
# a dataset, a sweep's runs, a results file)

def hold(path, *, file=False, waiting=None, stop=None):
    """Hold the name `path` until release(), which it returns, or this process's exit: a flock on
    .<name>.lock beside what it names (a lock file is never renamed, so the lock stays with the name
    while the holder renames or removes what it names; a flock dies with its process, kill -9 too:
    never stale). Once locked, the lock file is looked up again (one its last holder removed is not
    it). The folder `path` names is then made if missing (not with file=True), and removed again at
    release if nothing was put in it. Held elsewhere: a UsageError naming it; with `waiting`, said
    once and waited for until `stop` turns true (then None)."""
    real = os.path.realpath(path)  # (names of one folder, a symlink's too: one lock)
    lock = os.path.join(os.path.dirname(real), f".{os.path.basename(real)}.lock")
    made, said = None if file else topmost_missing(path), False
    while True:
        try:
            os.makedirs(os.path.dirname(lock), exist_ok=True)
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:  # read-only, a file where a folder goes, ...
            raise UsageError(f"cannot lock {path} ({e.strerror}: {e.filename}); pass another "
                             "folder") from None
        try:
            if fcntl:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # held by another process
            os.close(fd)
            if not waiting:
                raise UsageError(f"{path} is in use: another process (a train.py, prepare.py or "
                                 "sweep.py) is writing there; wait for it to finish or stop it, or "
                                 "use another folder") from None
            if stop:
                return None
            if not said:
                print(f"  {waiting}; waiting", file=sys.stderr, flush=True)
            said = True
            time.sleep(1.0)
            continue
        except OSError as e:  # (ENOLCK: a network file system without locks)
            os.close(fd)
            raise UsageError(f"cannot lock {path} ({e.strerror}); use a folder on a local disk") \
                from None
        if same(fd, lock):
            break
        os.close(fd)  # removed by the holder before us: the name's lock is a new file now
    try:
        if not file:
            os.makedirs(path, exist_ok=True)
    except OSError as e:  # a file in the way, ...
        release(fd, lock, path, made)
        raise UsageError(f"{path} cannot be made a folder ({e.strerror}: {e.filename}); pass "
                         "another folder") from None
    return lambda: release(fd, lock, path, made)


def same(fd, path):
    """Whether `path` still names what `fd` holds open."""
    try:
        return os.path.samestat(os.stat(path), os.fstat(fd))
    except OSError:
        return False


def topmost_missing(path):
    """The outermost folder of `path` that does not exist yet (what makedirs would make), or None."""
    if os.path.lexists(path):
        return None
    path = os.path.abspath(path)
    while not os.path.lexists(os.path.dirname(path)):
        path = os.path.dirname(path)
    return path


def release(fd, lock, path, made):
    """Give a hold back: its lock file goes, then what it made if nothing was put in it."""
    with contextlib.suppress(OSError):
        os.unlink(lock)
    path = os.path.abspath(path)
    while made and os.path.isdir(path):  # (an OSError: not empty)
        try:
            os.rmdir(path)
        except OSError:
            break
        if path == made:
            break
        path = os.path.dirname(path)
    os.close(fd)


def foreign(folder, ours):
    """The names in `folder` that are not ours: not regular files that ours(folder), a name
    predicate, claims (a symlink or a folder never is); [folder] when it is itself a symlink, or
    not a folder."""
    if os.path.islink(folder) or not os.path.isdir(folder):
        return [folder]
    claims = ours(folder)
    return [n for n in sorted(os.listdir(folder))
            if not (claims(n) and stat.S_ISREG(os.lstat(os.path.join(folder, n)).st_mode))]


def refuse_foreign(folder, ours, what):
    """A UsageError naming what in `folder` is not ours (`what`: whose folder it is, and why)."""
    names = foreign(folder, ours) if os.path.lexists(folder) else []
    if names == [folder]:
        raise UsageError(f"{folder} is {'a symlink' if os.path.islink(folder) else 'not a folder'}, "
                         f"where {what} writes: move it away, or use another folder")
    if names:
        raise UsageError(f"{folder} holds {', '.join(names[:3])}{', ...' if names[3:] else ''}, "
                         f"which {what} did not write: move it away, or use another folder")


def swap_in(new, dest, ours, what, *, ready=True):
    """dest replaced by the folder `new`, whole (`ready`: the caller's word that it is): dest ->
    <new>.old, new -> dest, then <new>.old goes. Run again after a kill anywhere in it, it finishes
    (dest held: hold() may have made an empty dest in the gap, which the second rename replaces).
    Only a folder whose every name `ours` claims (see foreign) is replaced or removed; anything else
    stops it, in one line naming it, and stays."""
    old = f"{new}.old"
    if ready and os.path.isdir(new):
        if os.path.lexists(dest) and not os.path.lexists(old):
            refuse_foreign(dest, ours, what)
            os.replace(dest, old)
        os.replace(new, dest)
        fsync_dir(os.path.dirname(os.path.abspath(dest)))
    if os.path.lexists(old):
        refuse_foreign(old, ours, what)
        for name in sorted(os.listdir(old), key=lambda n: n == 'meta.json'):  # (what claims the
            os.remove(os.path.join(old, name))  # rest goes last: cut short, the rest is still ours)
        os.rmdir(old)


def fsync_dir(path):
    """Make a folder's renames durable (a power cut cannot undo them); best effort: Windows cannot
    open a folder, some file systems do not fsync one."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def json_object(line):
    """The JSON object a line (bytes) holds, or None: not JSON, or JSON of another type."""
    try:
        r = json.loads(line.decode('utf-8'))
    except ValueError:  # also UnicodeDecodeError
        return None
    return r if isinstance(r, dict) else None


def read_jsonl(path):
    """[(line number, the JSON object on it, or None if it holds none)] of a JSON-lines file; blank
    lines and a last line cut short (a killed writer's) are left out."""
    with open(path, 'rb') as f:
        lines = f.read().splitlines(keepends=True)
    out = []
    for n, line in enumerate(lines, 1):
        row = json_object(line)
        if line.strip(b'\0 \t\r\n') and (row or n < len(lines) or line.endswith(b'\n')):
            out.append((n, row))
    return out


def read_log(path):
    """The rows of a run's log.jsonl: JSON objects with an integer 'iter' (a last line cut short by a
    killed run is left out); any other line is a UsageError naming it."""
    for n, row in (pairs := read_jsonl(path)):
        if row is None or type(row.get('iter')) is not int:
            raise UsageError(f"{path} line {n} is not a log row (a JSON object with an integer "
                             "'iter'); delete that line, or the file, and rerun")
    return [row for _, row in pairs]


# -----------------------------------------------------------------------------
# the commands this repository's messages give

def script(name):
    """A file of this repository as a command typed here names it (`../gpt-blocks/train.py`)."""
    path = os.path.join(HERE, name)
    return name if os.path.abspath(name) == path else os.path.relpath(path)


def quick_start(prepare=True):
    """The quick start's commands as typed here: a first run in about a minute on a CPU."""
    train = f"python {script('train.py')} {script('configs/quick.py')}"
    return f"python {script('prepare.py')} && {train}" if prepare else train


def no_checkpoint(path, train=None):
    """The error for a missing out_dir/ckpt.pt: the run before a scratch start is in its prev/; a
    sweep's folder (--out_prefix) names its runs; else how to train one (`train`: the command that
    trains this out_dir's run, if known)."""
    folder = os.path.dirname(path)
    prev, runs = os.path.join(folder, 'prev'), sorted(
        glob.glob(os.path.join(glob.escape(folder), '*', 'ckpt.pt')), key=os.path.getmtime)
    return UsageError(f"no checkpoint at {path!r}; " + (
        f"{prev}/ holds the run before the last scratch start there (--out_dir={prev})"
        if os.path.isfile(os.path.join(prev, 'ckpt.pt')) else
        f"{folder} holds the run folders of {len(runs)} run(s), the newest "
        f"{os.path.dirname(runs[-1])}: pass --out_dir=one of them" if runs else
        f"train one first ({train or quick_start()}) or point out_dir at the right folder"))
