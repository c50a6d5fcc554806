"""A tiny Qwen2-shaped model and a word-level tokenizer (random weights), saved for verl to load offline.

python make_tiny_model.py OUT_DIR    (capture.sh, group verl)
"""

import sys

from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

out = sys.argv[1]
words = ["<pad>", "<eos>", "<unk>", "user", "assistant", "system"] + [f"w{i}" for i in range(250)]
tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
tok.pre_tokenizer = pre_tokenizers.Whitespace()
fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")
fast.chat_template = (
    "{% for m in messages %}{{ m['role'] }} {{ m['content'] }} {% endfor %}"
    "{% if add_generation_prompt %}assistant {% endif %}"
)
fast.save_pretrained(out)
cfg = Qwen2Config(
    vocab_size=len(words),
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=1,
    num_attention_heads=2,
    num_key_value_heads=1,
    max_position_embeddings=256,
)
Qwen2ForCausalLM(cfg).save_pretrained(out)
print("saved", out)
