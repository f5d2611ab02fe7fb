"""Fixtures the test files share."""
import numpy as np
import pytest


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
