"""
Many runs as child processes, for scripts that make them (sweep.py): a claim that holds a run's
folder for one sweep from the run's start to its record, and `Stopper`, which makes Ctrl-C (or
SIGTERM, to the process group or to the parent alone) stop everything cleanly: each running child
gets the signal once (train.py saves its checkpoint and exits), work not started is not started,
and the parent exits with the signal's code once its children have.
"""
import os
import signal
import subprocess
import sys
import threading
import time

from configurator import UsageError, lock_holder

try:
    import fcntl
except ImportError:  # Windows: no flock, so no claims (one sweep per results file there)
    fcntl = None


class Stopper:
    """
    SIGINT / SIGTERM while the block runs (main thread): the first is noted, announced and sent on to
    every running child, once; children run in sessions of their own, so a Ctrl-C at the terminal
    reaches them only through this, never twice. A second signal is sent on too (the children abort)
    and so on. `run` starts no child once stopped.
    """

    def __init__(self, *, what='runs', stopping=None):
        self.signum, self.what, self.stopping = None, what, stopping  # stopping: what the first signal does
        self.procs, self.lock, self.previous = set(), threading.Lock(), {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self.previous = {s: signal.signal(s, self.on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        return self

    def __exit__(self, *exc):
        for s, h in self.previous.items():
            signal.signal(s, h)

    def __bool__(self):
        return self.signum is not None

    def on_signal(self, signum, frame):
        again = self.signum is not None
        self.signum = self.signum or signum
        with self.lock:
            procs = list(self.procs)
        name = signal.Signals(signum).name
        first = self.stopping or (f"{len(procs)} running {self.what} save their checkpoints and stop, none "
                                  f"more starts; {name} again to abort them")
        print(f"\n{name}: " + (f"sent on to {len(procs)} running {self.what}, which now abort" if again else
                               f"stopping: {first}"), file=sys.stderr, flush=True)
        for p in procs:
            self.send(p, signum)

    @staticmethod
    def send(proc, signum):
        try:
            proc.send_signal(signum)
        except ProcessLookupError:  # it has just exited
            pass

    def run(self, cmd, **kwargs):
        """subprocess.run(cmd, capture stderr, stdout discarded) in a session of its own, stopped with this
        process: a CompletedProcess, or None when stopped before it started."""
        with self.lock:
            if self.signum is not None:
                return None
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                    start_new_session=True, **kwargs)
            self.procs.add(proc)
        try:
            _, err = proc.communicate()
        finally:
            with self.lock:
                self.procs.discard(proc)
        return subprocess.CompletedProcess(cmd, proc.returncode, None, err)

    def exit_code(self):
        return 128 + self.signum


def claim(path, stopper=None, *, waiting=None, poll_s=1.0):
    """Hold the lock file `path` (made if missing) until the returned fd is closed or the process ends
    (the kernel drops a flock with its process: never stale). If another process holds it, say
    `waiting` once and wait; None when `stopper` stops the wait. No flock (Windows): no claim."""
    if fcntl is None:
        return -1
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    said = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except OSError:
            pass
        if stopper:
            os.close(fd)
            return None
        if waiting and not said:
            print(f"  {waiting}: {lock_holder(path)} holds it; waiting", file=sys.stderr, flush=True)
            said = True
        time.sleep(poll_s)


def release(fd):
    if fd is not None and fd >= 0:
        os.close(fd)


def locked_append(path, data, *, aside):
    """Append the bytes `data` (whole lines) to `path` under an exclusive flock, in one write, fsynced.
    A file that does not end in a newline (a writer killed mid-line) first has its cut-short last
    line moved to the file `aside`, and the note saying so is returned (else None)."""
    note = None
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b'\n':
            start = size
            while start > 0:  # back to the last newline, 64 KiB at a time
                chunk = os.pread(fd, min(65536, start), max(0, start - 65536))
                nl = chunk.rfind(b'\n')
                if nl >= 0:
                    start = start - len(chunk) + nl + 1
                    break
                start -= len(chunk)
            partial = os.pread(fd, size - start, start)
            with open(aside, 'ab') as f:
                f.write(partial + b'\n')
                f.flush()
                os.fsync(f.fileno())
            os.ftruncate(fd, start)
            note = (f"{path} ended in a line cut short ({size - start} bytes, a writer killed mid-line): "
                    f"moved to {aside}")
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)  # and the flock with it
    return note


def check_claimable(folder):
    """A UsageError now if the claims folder cannot be made (before any run starts)."""
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as e:
        raise UsageError(f"cannot create {folder!r} ({e.strerror}); pass --out_prefix=a/folder/you/can/write") from None
