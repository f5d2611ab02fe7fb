# LLaMA-style block (Touvron et al. 2023, arXiv:2302.13971): pre-RMSNorm, rotary positions,
# SwiGLU FFN, no biases: the modern baseline beside GPT-2's block.
# parameters: 0.85M (get_num_params() at vocab_size=256, data/stdlib_byte)
#   -0.5% vs gpt: ffn hidden 360, chosen by model.matched_width
#   python prepare.py --dataset=stdlib && python train.py configs/llama.py

from _recipe import *  # noqa: F403 (configs/_recipe.py: the recipe every architecture shares)

out_dir = 'out-llama'
learning_rate = 2e-3  # the best of RESULTS.md §2's grid at this shape (1e-3 ... 1.6e-2)
min_lr = 2e-4  # learning_rate / 10

norm = 'rmsnorm'
pos_emb = 'rope'  # rotary positions (arXiv:2104.09864) on q and k; no wpe table
ffn = 'swiglu'
match_params = 'gpt'  # width (ffn_hidden / gmlp_d_ffn) picked so parameters equal gpt's at this shape
