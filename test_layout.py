"""The layout holds: scripts (a file with an `if __name__ == "__main__":` block) import libraries, never
each other, and no library imports a script; importing a library touches no GPU and starts nothing."""
import ast
import glob
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MODULES = {os.path.basename(p)[:-3]: p for p in glob.glob(os.path.join(HERE, '*.py'))
           if not os.path.basename(p).startswith(('test_', 'conftest'))}


def tree(name):
    with open(MODULES[name]) as f:
        return ast.parse(f.read())


def is_script(name):
    return any(isinstance(n, ast.If) and '__main__' in ast.dump(n.test) for n in tree(name).body)


def imported(name):
    """Every module `name` imports, at the top or inside a function."""
    out = set()
    for n in ast.walk(tree(name)):
        if isinstance(n, ast.ImportFrom) and n.module and not n.level:
            out.add(n.module.split('.')[0])
        elif isinstance(n, ast.Import):
            out |= {a.name.split('.')[0] for a in n.names}
    return out


def test_no_module_imports_a_script():
    scripts = {name for name in MODULES if is_script(name)}
    assert {'prepare', 'train', 'sample', 'bench', 'sweep', 'probe'} <= scripts
    libraries = set(MODULES) - scripts
    assert {'model', 'configurator', 'data', 'tokenizer', 'corpus', 'checkpoint', 'runtime', 'results'} <= libraries
    wrong = {name: sorted(imported(name) & scripts - {name}) for name in MODULES}
    assert not {k: v for k, v in wrong.items() if v}, f"modules that import a script: {wrong}"


def test_importing_every_library_starts_nothing():
    libraries = sorted(name for name in MODULES if not is_script(name))
    code = (f"import sys, threading; sys.path.insert(0, {HERE!r})\n"
            f"for name in {libraries!r}: __import__(name)\n"
            "import torch\n"
            "assert not torch.cuda.is_initialized(), 'a library initialised CUDA at import'\n"
            "import torch.distributed as dist\n"
            "assert not (dist.is_available() and dist.is_initialized()), 'a library made a process group'\n"
            "assert threading.active_count() == 1, [t.name for t in threading.enumerate()]\n")
    proc = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
