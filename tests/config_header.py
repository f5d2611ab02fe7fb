"""
The figures of a config file's header comment, computed:

    python tests/config_header.py configs/NAME.py [--vocab_size=256] [--data=data/stdlib_byte]

prints the lines to write at the top of configs/NAME.py: its parameter count, and for a config
matched to gpt (match_params='gpt') how far from gpt's count it lands and the width that gets it
there. tests/test_train.py checks every config's header against these lines.
"""
import os
import sys

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repository
sys.path.insert(0, HERE)
from configurator import parse_config  # noqa: E402
from model import GPTConfig, count_params, matched_width  # noqa: E402
from train import TrainConfig  # noqa: E402


def header(path, vocab_size=256, data='data/stdlib_byte'):
    """The header lines of the config at `path` at this vocabulary (the data's: byte-level stdlib)."""
    def model(p):
        return GPTConfig(**{**parse_config(TrainConfig, [p]).model_args(), 'vocab_size': vocab_size})
    cfg = model(path)
    n = count_params(cfg)
    lines = [f"# parameters: {n / 1e6:.2f}M (get_num_params() at vocab_size={vocab_size}, {data})"]
    if cfg.match_params:
        gpt = count_params(model(os.path.join(HERE, 'configs', 'gpt.py')))
        knob = 'ffn hidden' if cfg.block == 'transformer' else 'd_ffn'
        lines.append(f"#   {n / gpt - 1:+.1%} vs gpt: {knob} {matched_width(cfg)}, chosen by "
                     "model.matched_width")
    return lines


if __name__ == '__main__':
    flags = dict(a[2:].split('=', 1) for a in sys.argv[1:] if a.startswith('--'))
    for p in (a for a in sys.argv[1:] if not a.startswith('--')):
        print('\n'.join(header(p, int(flags.get('vocab_size', 256)),
                               flags.get('data', 'data/stdlib_byte'))))
