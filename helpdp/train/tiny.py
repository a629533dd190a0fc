"""A tiny Qwen3 built from a config (random weights, no download) with a byte-level
BPE tokenizer trained on the worlds' texts and a Qwen-style chat template: the
actor of the CPU smoke run, the tests and the benchmark."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from collect.awm.protocol import system_prompt
from collect.simulate import tool_call_text
from helpdp.train.config import ModelConfig

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from collect.types import Pool

__all__ = ["CHAT_TEMPLATE", "build_tiny", "world_texts", "warm_start"]

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def world_texts(pool: Pool, tasks: Sequence[tuple[str, int]]) -> tuple[list[str], list[str]]:
    """``(corpus, turns)``: texts to train the tokenizer on (system prompt, tasks,
    reference calls) and the reference turns (one ``<tool_call>`` each) for
    :func:`warm_start`."""

    corpus = [system_prompt(expert_enabled=True), system_prompt(expert_enabled=False)]
    turns: list[str] = []
    for name, idx in tasks:
        sc = pool.scenario(name)
        corpus.append(sc.task(idx).text)
        sol = sc.solutions.get(idx)
        for call in sol.calls if sol is not None else []:
            turns.append(tool_call_text(call["tool_name"], call.get("arguments") or {}))
    turns.append('<tool_call>\n{"name": "list_tools", "arguments": null}\n</tool_call>')
    return corpus + turns, turns


def build_tiny(cfg: ModelConfig, corpus: Sequence[str]):
    """``(model, tokenizer)``: a Qwen3ForCausalLM of ``cfg`` and its tokenizer."""
    import torch
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tk = Tokenizer(models.BPE(unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    special = ["<unk>", "<|im_start|>", "<|im_end|>", "<pad>"]
    tk.train_from_iterator(
        list(corpus),
        trainers.BpeTrainer(
            vocab_size=int(cfg.vocab_size),
            special_tokens=special,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        ),
    )
    tok = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tk, unk_token="<unk>", eos_token="<|im_end|>", pad_token="<pad>"
    )
    tok.add_tokens(["<tool_call>", "</tool_call>"])  # one token each, as in Qwen3's vocabulary
    tok.chat_template = CHAT_TEMPLATE
    config = transformers.Qwen3Config(
        vocab_size=len(tok),
        hidden_size=int(cfg.hidden_size),
        intermediate_size=2 * int(cfg.hidden_size),
        num_hidden_layers=int(cfg.num_layers),
        num_attention_heads=int(cfg.num_heads),
        num_key_value_heads=1,
        head_dim=max(8, int(cfg.hidden_size) // int(cfg.num_heads)),
        max_position_embeddings=32768,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        bos_token_id=None,
        tie_word_embeddings=True,
    )
    torch.manual_seed(int(cfg.seed))
    model = transformers.Qwen3ForCausalLM(config)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    return model, tok


def warm_start(
    model: PreTrainedModel,
    tok: PreTrainedTokenizerBase,
    turns: Sequence[str],
    steps: int,
    *,
    lr: float = 1e-2,
) -> float | None:
    """``steps`` AdamW next-token steps on assistant turns ``turns`` (full weights);
    returns the last loss. Gives a random model a taste of the call format."""
    import torch

    if steps <= 0 or not turns:
        return None
    texts = [f"<|im_start|>assistant\n{t}<|im_end|>" for t in turns]
    enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    labels = enc["input_ids"].masked_fill(enc["attention_mask"] == 0, -100)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    loss = None
    for _ in range(int(steps)):
        out = model(**enc, labels=labels)
        out.loss.backward()
        opt.step()
        opt.zero_grad()
        loss = float(out.loss.detach())
    model.eval()
    return loss
