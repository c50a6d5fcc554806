"""Capture the real wording of two tokenizer errors, offline (no hub access, no model files).

1. padding=True on a tokenizer that has no pad token.
2. apply_chat_template on a tokenizer that has no chat template.
Each error is raised for real and its traceback printed by Python's default handler.
"""

import sys

from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import Whitespace
from transformers import PreTrainedTokenizerFast


def build_tokenizer():
    tok = Tokenizer(WordLevel({"a": 0, "b": 1, "[UNK]": 2}, unk_token="[UNK]"))
    tok.pre_tokenizer = Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tok)


def main(which):
    tokenizer = build_tokenizer()
    if which == "padding":
        tokenizer(["a b a", "b"], padding=True)
    elif which == "chat-template":
        tokenizer.apply_chat_template([{"role": "user", "content": "a b"}], tokenize=False)
    else:
        raise SystemExit(f"unknown case {which}")


if __name__ == "__main__":
    main(sys.argv[1])
