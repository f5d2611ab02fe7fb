"""The layout holds: the core (model.py, train.py, sample.py, prepare.py and the modules they import)
never imports a comparison tool; model.py imports nothing of ours; train.py at most four of our
modules; no two modules import each other, even through others; no module imports a test file (the
block author's test_model.py sits beside model.py: a test, not a module); importing any module, or
any top-level test file (pytest's collection does), touches no GPU and starts nothing."""
import ast
import glob
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repository
TOP = {os.path.basename(p)[:-3]: p for p in glob.glob(os.path.join(HERE, '*.py'))}
TESTS = {name: p for name, p in TOP.items() if name.startswith('test_')}  # pytest's files, not modules
MODULES = {name: p for name, p in TOP.items() if name not in TESTS}
CORE = ('model', 'train', 'sample', 'prepare')
TOOLS = ('sweep', 'stats', 'report', 'probe', 'bench', 'hellaswag', 'fineweb')


def imports(name):
    """Every top-level name `name` (a module or a test file) imports, at the top or inside a function."""
    with open(TOP[name]) as f:
        tree = ast.parse(f.read())
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and n.module and not n.level:
            out.add(n.module.split('.')[0])
        elif isinstance(n, ast.Import):
            out |= {a.name.split('.')[0] for a in n.names}
    return out


def ours(name):
    """The modules of this repository that `name` imports, at the top or inside a function."""
    return imports(name) & set(MODULES)


def reach(name):
    """Every module of ours that importing `name` loads."""
    seen, todo = set(), [name]
    while todo:
        for m in ours(todo.pop()) - seen:
            seen.add(m)
            todo.append(m)
    return seen


def test_the_core_reads_without_the_tools_and_imports_in_one_direction():
    assert set(CORE) | set(TOOLS) <= set(MODULES)
    for name in CORE:
        assert not reach(name) & set(TOOLS), f"{name}.py reaches {sorted(reach(name) & set(TOOLS))}"
    assert ours('model') == set(), "model.py reads alone"
    assert len(ours('train')) <= 4, f"train.py imports {sorted(ours('train'))}"
    cycles = [m for m in MODULES if m in reach(m)]
    assert not cycles, f"modules that import themselves through others: {cycles}"
    assert 'test_model' in TESTS and not set(TESTS) & set(MODULES)
    assert not [m for m in MODULES if imports(m) & set(TESTS)], "a module imports a test file"


def test_importing_every_module_starts_nothing():
    code = (f"import sys, threading; sys.path.insert(0, {HERE!r})\n"
            f"for name in {sorted(MODULES) + sorted(TESTS)!r}: __import__(name)\n"
            "import torch\n"
            "assert not torch.cuda.is_initialized(), 'a module initialised CUDA at import'\n"
            "import torch.distributed as dist\n"
            "assert not (dist.is_available() and dist.is_initialized()), 'a module made a process group'\n"
            "assert threading.active_count() == 1, [t.name for t in threading.enumerate()]\n")
    proc = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_the_device_scripts_name_files_that_exist():
    """A script prepared for a GPU session (results/**/*.sh) runs once a device is lent, with no
    second try: every repository file it names (`test_model.py`, `configs/gpt.py`) is there."""
    scripts = glob.glob(os.path.join(HERE, 'results', '**', '*.sh'), recursive=True)
    assert scripts
    for path in scripts:
        with open(path, encoding='utf-8') as f:
            text = f.read()
        for name in re.findall(r'(?<![\w/$*.{-])((?:[\w-]+/)*[\w-]+\.py)\b', text):
            assert os.path.isfile(os.path.join(HERE, name)), \
                f"{os.path.relpath(path, HERE)} names {name}, which is not in the repository"
