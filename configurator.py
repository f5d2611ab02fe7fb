"""
The plumbing every script shares (nanoGPT's configurator.py, checked against a dataclass instead of
exec-ed into globals): config files and `--key=value` flags (`parse_config`), `--help` from the
fields' comments, one-line errors (`UsageError`, `run_main`), crash-safe writes, folder locks and
the one reader of JSON-lines files.
"""
import contextlib
import dataclasses
import difflib
import inspect
import itertools
import json
import os
import re
import signal
import sys
import time
import types

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
    """Run a script's main(): a UsageError is one line on stderr and exit code 2, Ctrl-C exits 130,
    a closed stdout pipe exits quietly."""
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


def atomic_write(path, write, *more):
    """write(f) into a temp file beside `path`, fsync, then os.replace: a crash leaves `path` as it
    was. `more`: further (path, write) pairs, each whole in its temp file before the first rename,
    then renamed in order: once one is renamed, the later ones' temp files stay whole for the next
    start to rename (a kill or an error between two renames). A failure (torch.save's RuntimeError
    on a full disk too) is one line naming the path."""
    files, temps = [(path, write), *more], []
    try:
        for path, write in files:
            regular_file(path, 'output', output=True)
            temps.append(f"{path}.tmp{os.getpid()}")
            with open(temps[-1], 'wb') as f:
                write(f)
                f.flush()
                os.fsync(f.fileno())  # the data is on disk before the rename makes it visible
        for (path, _), tmp in zip(files, temps):
            os.replace(tmp, path)
            temps = []
    except (OSError, RuntimeError) as e:
        raise write_error(path, e) from None
    finally:
        for tmp in temps:
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


def lock_folder(path, *, waiting=None, stop=None):
    """Hold `path` (a folder, or a lock file made if missing) until this process exits or closes the
    returned fd: a flock dies with its process (kill -9 too), so it is never stale. Held elsewhere:
    a UsageError; with `waiting`, said once and waited for, until `stop` turns true (then None).
    No flock (Windows): None."""
    try:
        import fcntl
    except ImportError:
        return None
    try:
        fd = os.open(path, os.O_RDONLY if os.path.isdir(path) else os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise write_error(path, e) from None
    for n in itertools.count():
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:  # held by another process
            pass
        except OSError as e:  # (ENOLCK: a network file system without locks)
            os.close(fd)
            raise UsageError(f"cannot lock {path} ({e.strerror}); use a folder on a local disk") \
                from None
        if not waiting or stop:
            os.close(fd)
            if waiting:
                return None
            raise UsageError(f"{path} is in use: another process (a train.py or a prepare.py) is "
                             "writing there; wait for it to finish or stop it, or use another folder")
        if n == 0:
            print(f"  {waiting}; waiting", file=sys.stderr, flush=True)
        time.sleep(1.0)


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


def no_checkpoint(path):
    """The error for a missing out_dir/ckpt.pt: the run before a scratch start is in its prev/."""
    prev = os.path.join(os.path.dirname(path), 'prev')
    return UsageError(f"no checkpoint at {path!r}; " + (
        f"{prev}/ holds the run before the last scratch start there (--out_dir={prev})"
        if os.path.isfile(os.path.join(prev, 'ckpt.pt')) else
        f"train one first ({quick_start()}) or point out_dir at the right folder"))
