"""A small BPE tokenizer for the tiny from-config backbones (the CPU tests' PRM and helper)."""

from __future__ import annotations


def train_tokenizer(texts, *, vocab_size: int = 512, extra=()):
    """A small BPE tokenizer (``tokenizers``) trained on ``texts``; digits split
    one per token. Returns a ``PreTrainedTokenizerFast`` with ``[PAD]``/``[UNK]``."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tk = Tokenizer(models.BPE(unk_token="[UNK]"))
    tk.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Whitespace(), pre_tokenizers.Digits(individual_digits=True)]
    )
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=["[PAD]", "[UNK]"], show_progress=False
    )
    corpus = [t for t in texts if t] + list(extra)
    if not corpus:
        raise ValueError("cannot train a tokenizer: every text is empty")
    tk.train_from_iterator(corpus, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="[PAD]", unk_token="[UNK]")
