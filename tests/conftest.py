"""Fixtures and helpers the test files share."""
import contextlib
import importlib
import io
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

import configurator
from configurator import atomic_write
from dataset import shard_header

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class NeverEnded(BaseException):
    pass


def as_script(script, args, cwd, process=False):
    """(exit code, stdout, stderr) of `python SCRIPT ARGS` run in `cwd`. Every script's __main__ is
    run_main(main): unless `process`, it runs here as it would there (a blocking open or read of a pipe
    stopped after a minute; an endless device such as /dev/zero only in a process, as its read is not
    interrupted), saving a start of Python and torch."""
    if process:
        proc = subprocess.run([sys.executable, os.path.join(ROOT, script), *args], cwd=cwd, capture_output=True,
                              text=True, timeout=120, stdin=subprocess.DEVNULL)
        return proc.returncode, proc.stdout, proc.stderr

    def never_ends(*_):  # (not an Exception: no handler of the script's may take it for its own error)
        raise NeverEnded(f"{script} {' '.join(args)} still running after 60 s")
    out, err, before = io.StringIO(), io.StringIO(), (os.getcwd(), sys.argv, signal.getsignal(signal.SIGALRM))
    os.chdir(cwd)
    sys.argv = [os.path.join(ROOT, script), *args]
    signal.signal(signal.SIGALRM, never_ends)
    signal.alarm(60)
    code = 0  # (main returned)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            configurator.run_main(importlib.import_module(script[:-3]).main)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
    finally:
        signal.alarm(0)
        os.chdir(before[0])
        sys.argv = before[1]
        signal.signal(signal.SIGALRM, before[2])
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope='module')
def tiny_data(tmp_path_factory):
    """A char-level corpus of a few thousand words, prepared by prepare.py: its folder."""
    import prepare
    folder = tmp_path_factory.mktemp('tiny_data')
    words = "the a cat dog sat ran on under mat log and then it was big small red".split()
    rng = np.random.default_rng(0)
    corpus = folder / 'corpus.txt'
    corpus.write_text(''.join(' '.join(rng.choice(words, size=12)) + '.\n' for _ in range(500)))
    prepare.main([f'--input={corpus}', f'--out_dir={folder / "data"}'])
    return str(folder / 'data')


class FakeHub:
    """A local stand-in for the Hugging Face hub's file endpoint (HF_ENDPOINT points at it): HEAD and
    GET of /datasets/<repo>/resolve/<revision>/<file>, with ranges. `cut[name] = n` ends the next GET of
    that file after n bytes (a connection that died; the next GET is whole); `ranges` records each
    GET's Range header."""

    def __init__(self, files):
        import http.server
        import threading
        self.files, self.cut, self.ranges = dict(files), {}, []
        hub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def name(self):
                parts = self.path.split('?')[0].split('/')
                return parts[-1] if 'resolve' in parts and parts[-1] in hub.files else None

            def headers_for(self, data, status=200, start=0):
                import hashlib
                self.send_response(status)
                self.send_header('X-Repo-Commit', '0' * 40)
                self.send_header('ETag', f'"{hashlib.sha256(data).hexdigest()}"')
                self.send_header('Accept-Ranges', 'bytes')
                self.send_header('Content-Length', str(len(data) - start))
                if status == 206:
                    self.send_header('Content-Range', f"bytes {start}-{len(data) - 1}/{len(data)}")
                self.end_headers()

            def do_HEAD(self):
                name = self.name()
                if name is None:
                    self.send_response(404)
                    self.end_headers()
                else:
                    self.headers_for(hub.files[name])

            def do_GET(self):
                name = self.name()
                if name is None:
                    self.send_response(404)
                    self.end_headers()
                    return
                data, rng = hub.files[name], self.headers.get('Range')
                hub.ranges.append((name, rng))
                start = int(rng.split('=')[1].split('-')[0]) if rng else 0
                self.headers_for(data, 206 if rng else 200, start)
                if name in hub.cut:
                    self.wfile.write(data[start:start + hub.cut.pop(name)])
                    return  # the connection closes short of Content-Length
                self.wfile.write(data[start:])

        self.server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def llmc_shard(tokens, *, ntok=None):
    """llm.c's shard bytes: a 256 x int32 header (magic 20240520, version 1, token count) and uint16 tokens."""
    header = np.zeros(256, dtype=np.int32)
    header[:3] = (20240520, 1, len(tokens) if ntok is None else ntok)
    return header.tobytes() + np.asarray(tokens, dtype=np.uint16).tobytes()


@pytest.fixture
def fake_hub(monkeypatch):
    """FineWeb's shards, tiny (GPT-2 ids of a repeated text), behind a local endpoint: (hub, files)."""
    pytest.importorskip('huggingface_hub')
    import huggingface_hub.constants
    rng = np.random.default_rng(0)
    files = {'fineweb_val_000000.bin': llmc_shard(rng.integers(0, 50257, 3000))}
    for i in range(1, 4):
        files[f'fineweb_train_{i:06d}.bin'] = llmc_shard(rng.integers(0, 50257, 20000 + i))
    hub = FakeHub(files)
    monkeypatch.setenv('HF_ENDPOINT', hub.url)
    monkeypatch.setenv('HF_HUB_DISABLE_TELEMETRY', '1')
    monkeypatch.setattr(huggingface_hub.constants, 'DOWNLOAD_CHUNK_SIZE', 4096)  # a cut lands after whole chunks
    return hub, files


def write_shard(path, tokens, *, dtype=None):
    """Write `tokens` as one shard, with atomic_write: `path` is complete or untouched."""
    tokens = np.asarray(tokens)
    top = int(tokens.max()) if tokens.size else 0
    dtype = np.dtype(dtype or (np.uint16 if top < 2**16 else np.uint32))
    if tokens.size and (int(tokens.min()) < 0 or top > np.iinfo(dtype).max):
        raise ValueError(f"token ids {tokens.min()}..{top} do not fit in {dtype}")
    atomic_write(path, lambda f: f.write(shard_header(len(tokens), dtype) + tokens.astype(dtype).tobytes()))
