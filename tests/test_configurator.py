"""Tests for configurator.py: --key=value flags and config files, help from field comments, one-line
errors, atomic writes."""
import dataclasses
import glob
import os
import shutil
import sys

import pytest

import configurator as C
from conftest import as_script
import stats

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repository


def write(path, content):
    with open(path, 'w') as f:
        f.write(content)
    return str(path)


# -----------------------------------------------------------------------------
# parse_config

@dataclasses.dataclass
class Cfg:
    n_layer: int = 4
    learning_rate: float = 1e-3
    compile: bool = False
    device: str = 'cpu'
    tags: list = dataclasses.field(default_factory=list)

    def __post_init__(self):
        if self.n_layer < 1:
            raise ValueError(f"n_layer={self.n_layer} must be >= 1")


def test_parse_config_types_and_lists():
    cfg = C.parse_config(Cfg, ['--n_layer=6', '--learning_rate=3e-4', '--compile=yes', '--tags=a,b', '--tags=c'])
    assert (cfg.n_layer, cfg.learning_rate, cfg.compile, cfg.device) == (6, 3e-4, True, 'cpu')
    assert cfg.tags == ['a', 'b', 'c']  # comma-separated, and a repeated list flag appends
    assert C.parse_config(Cfg, []) == Cfg()


def test_run_main_errors_and_interrupt(capsys):
    def usage(argv):
        raise C.UsageError('bad flag')
    def interrupted(argv):
        raise KeyboardInterrupt
    for main, code, err in [(usage, 2, 'error: bad flag\n'), (interrupted, 130, '\n')]:
        with pytest.raises(SystemExit) as e:
            C.run_main(main)
        assert e.value.code == code and capsys.readouterr().err == err


def test_parse_config_errors():
    with pytest.raises(C.UsageError, match="unknown key 'n_layers'; did you mean n_layer"):
        C.parse_config(Cfg, ['--n_layers=2'])
    with pytest.raises(C.UsageError, match='not a valid int'):
        C.parse_config(Cfg, ['--n_layer=2.5'])
    with pytest.raises(C.UsageError, match='not a valid bool'):
        C.parse_config(Cfg, ['--compile=maybe'])
    with pytest.raises(C.UsageError, match='has no value'):
        C.parse_config(Cfg, ['--n_layer'])
    with pytest.raises(C.UsageError, match='must be >= 1'):  # __post_init__'s ValueError
        C.parse_config(Cfg, ['--n_layer=0'])
    with pytest.raises(C.UsageError, match='unexpected argument'):
        C.parse_config(Cfg, ['n_layer=2'])


def test_parse_config_file(tmp_path):
    conf = write(tmp_path / 'small.py', "import math\nn_layer = 2\nlearning_rate = 1  # an int for a float is fine\n"
                                        "tags = 'x'\n_private = 5\n")
    cfg = C.parse_config(Cfg, [conf, '--n_layer=3'])  # the flag, given later, wins
    assert (cfg.n_layer, cfg.learning_rate, cfg.tags) == (3, 1.0, ['x'])
    bad = write(tmp_path / 'bad.py', "n_layr = 2\n")
    with pytest.raises(C.UsageError, match='bad.py.*did you mean n_layer'):
        C.parse_config(Cfg, [bad])
    wrong = write(tmp_path / 'wrong.py', "compile = 'yes'\n")
    with pytest.raises(C.UsageError, match='expected bool'):
        C.parse_config(Cfg, [wrong])
    with pytest.raises(C.UsageError, match='not found'):
        C.parse_config(Cfg, [str(tmp_path / 'missing.py')])


def test_atomic_write_keeps_the_old_file_on_failure(tmp_path):
    path = write(tmp_path / 'x.json', 'old')
    def fail(f):
        f.write(b'half')
        raise OSError(28, 'No space left on device')
    with pytest.raises(C.UsageError, match='could not write .*no space left'):
        C.atomic_write(path, fail)
    C.atomic_write(str(tmp_path / 'y.json'), lambda f: f.write(b'new'))
    assert open(path).read() == 'old' and sorted(os.listdir(tmp_path)) == ['x.json', 'y.json']


def test_config_file_calling_sys_exit_is_an_error(tmp_path):
    conf = write(tmp_path / 'quits.py', "import sys\nsys.exit(3)\n")
    with pytest.raises(C.UsageError, match=r'quits.py.*sys.exit\(3\)'):
        C.parse_config(Cfg, [conf])


def test_help_reads_field_comments():
    text = C.help_text(Cfg, usage='python x.py [--key=value ...]')
    assert text.startswith('usage: python x.py')
    assert "--n_layer=4" in text and "--device='cpu'" in text


SCRIPTS = sorted(os.path.basename(p) for p in glob.glob(os.path.join(HERE, '*.py'))
                 if 'if __name__ ==' in open(p).read())


def test_the_scripts_are_the_ones_a_user_runs():
    assert {'prepare.py', 'train.py', 'sample.py', 'bench.py', 'sweep.py', 'probe.py',
            'hellaswag.py'} <= set(SCRIPTS)


@pytest.mark.parametrize('script', SCRIPTS)
def test_every_script_help_explains_every_key(script):
    code, out, err = as_script(script, ['--help'], HERE, process=script == 'train.py')  # (one a process)
    assert code == 0, err
    assert 'usage: python ' + script in out
    keys = [line for line in out.splitlines() if line.startswith('  --')]
    import importlib  # every key of the settings the script parses is listed (its *Config dataclass)
    module = importlib.import_module(script[:-3])
    config = next(v for k, v in vars(module).items() if k.endswith('Config') and dataclasses.is_dataclass(v)
                  and v.__module__ == module.__name__)
    assert [line.split('=')[0].strip()[2:] for line in keys] == [f.name for f in dataclasses.fields(config)]
    undocumented = [line.split('=')[0].strip() for line in keys if not line.split(None, 1)[1:]
                    or len(line.split(None, 1)[1].strip()) < 4]
    assert not undocumented, f"{script}: keys without a description: {undocumented}"


def test_a_config_copied_to_another_folder_finds_the_shipped_recipe(tmp_path):
    """configs/gmlp.py starts with `from _recipe import *`: a copy of it elsewhere still reads (the shipped
    configs/ is importable after the file's own folder), and a _recipe.py beside the copy wins."""
    shutil.copy(os.path.join(HERE, 'configs', 'gmlp.py'), tmp_path / 'mine.py')
    got = C.exec_config_file(str(tmp_path / 'mine.py'))
    assert got['block'] == 'gmlp' and got['n_layer'] == C.exec_config_file(os.path.join(HERE, 'configs', 'gmlp.py'))['n_layer']
    (tmp_path / '_recipe.py').write_text("n_layer = 7\n")
    assert C.exec_config_file(str(tmp_path / 'mine.py'))['n_layer'] == 7
    assert 'mine' not in sys.modules and '_recipe' not in sys.modules


def test_an_unknown_config_is_answered_with_the_nearest_and_architectures_only():
    with pytest.raises(C.UsageError, match=r"^unknown config 'gtp'; did you mean gpt\? choose among (?!.*quick)"):
        stats.config_paths(['gtp'])
    with pytest.raises(C.UsageError, match=r"^unknown config 'zzz'; choose among (?!.*quick)"):
        stats.config_paths(['zzz'])


def test_a_config_path_not_found_names_the_nearest_shipped_config(tmp_path, monkeypatch):
    """A config path that is not there (typed from another folder, without .py, or a bare name as sweep.py
    --configs takes): one line naming the nearest shipped config as a path typed from here, for train.py and
    sample.py, the tools' config paths (sweep.py, bench.py, probe.py) and sweep.py's --recipe alike."""
    import re
    import sample
    import sweep
    import train
    monkeypatch.chdir(tmp_path)
    for name, attempt in [('configs/quick.py', lambda: train.main(['configs/quick.py'])),
                          ('configs/quick.py', lambda: sample.main(['configs/quick.py'])),
                          ('configs/gmlp.py', lambda: stats.config_paths(['configs/gmlp.py'])),
                          ('configs/_recipe.py', lambda: sweep.main(['--configs=gpt', '--recipe=configs/_recipe.py'])),
                          ('configs/llama', lambda: train.main(['configs/llama'])),
                          ('quick', lambda: train.main(['quick']))]:
        near = os.path.relpath(os.path.join(HERE, 'configs', os.path.basename(name).removesuffix('.py') + '.py'))
        with pytest.raises(C.UsageError, match=rf"'{name}' not found; did you mean {re.escape(near)}\?$"):
            attempt()
