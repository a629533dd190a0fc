"""The ``hf`` actor with a tiny random-weight Qwen3 built here (no download) and a BPE
tokenizer trained on the fly: batched generation, chat template, seeded sampling, and a
collection through the real parser and environment."""

from __future__ import annotations

import json

import pytest

import helpdp
from collect.actors import HFActor, HFActorConfig
from collect.awm.protocol import format_call_tool, system_prompt
from collect.collector import collect, collect_config
from collect.rollout import EpisodeView, TurnRequest
from collect.schedule import ScheduleConfig, SplitConfig, build_schedule

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    path = tmp_path_factory.mktemp("tiny-qwen3")
    texts = [system_prompt(expert_enabled=False)] * 3 + [
        format_call_tool("list_workflows", {"search": "Nightly CRM Sync"})
    ] * 3
    tk = Tokenizer(models.BPE(unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    special = ["<unk>", "<|im_start|>", "<|im_end|>", "<pad>"]
    tk.train_from_iterator(
        texts,
        trainers.BpeTrainer(
            vocab_size=400,
            special_tokens=special,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        ),
    )
    tok = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tk, unk_token="<unk>", eos_token="<|im_end|>", pad_token="<pad>"
    )
    tok.chat_template = TEMPLATE
    tok.save_pretrained(path)
    config = transformers.Qwen3Config(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        max_position_embeddings=16384,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    torch.manual_seed(0)
    transformers.Qwen3ForCausalLM(config).save_pretrained(path)
    return path


def _request(seed, content):
    spec = build_schedule([("w_1", 0)], 1, ScheduleConfig(probabilities=[0.0]), SplitConfig())[0]
    view = EpisodeView(spec, content, [], None, [])
    return TurnRequest([{"role": "user", "content": content}], seed, view)


def test_hf_actor_generates_batched_and_seeded(tiny_model):
    cfg = HFActorConfig(model=str(tiny_model), max_tokens=8, temperature=1.0, device="cpu")
    actor = HFActor(cfg)
    assert actor.name == str(tiny_model)
    reqs = [
        _request(1, "Pause the workflow."),
        _request(2, "List every workflow that failed today, please."),
    ]
    a = actor.generate(reqs)
    b = actor.generate(reqs)
    assert [r.text for r in a] == [r.text for r in b]  # seeded
    assert all(0 < r.completion_tokens <= 8 for r in a)
    assert a[1].prompt_tokens > a[0].prompt_tokens > 0  # left padding not counted
    prompt = actor._prompt(reqs[0].messages)
    assert prompt.startswith("<|im_start|>user\nPause") and prompt.endswith(
        "<|im_start|>assistant\n"
    )


def test_collection_with_the_hf_actor(tiny_model, tmp_path):
    cfg = collect_config(
        [
            f"out={tmp_path / 'ds'}",
            "collect/actor=hf",
            f"actor.model={tiny_model}",
            "actor.name=tiny-qwen3",
            "actor.max_tokens=12",
            "actor.temperature=0",
            "actor.device=cpu",
            "executor.batch_size=2",
            "schedule.scenarios=[workflow_automation_1]",
            "schedule.tasks=[0,1]",
            "schedule.probabilities=[0.0,1.0]",
            "schedule.seeds=[0]",
            "progress=false",
            f"env.work_root={tmp_path / 'work'}",
        ]
    )
    result = collect(cfg)
    assert result.episodes == 4
    ds = helpdp.load_dataset(tmp_path / "ds")
    src = ds.manifest["source"]
    assert src["actor"] == "tiny-qwen3" and src["actor_kind"] == "hf"
    assert "transformers" in src["versions"] and "torch" in src["versions"]
    st = ds.steps
    assert (st["completion_tokens"] > 0).all() and (st["prompt_tokens"] > 300).all()
    # a random model's text is parsed and applied like any other turn
    assert set(st["kind"]) <= {"final", "invalid", "call_tool", "list_tools", "ask_expert"}
    ep = ds.episodes
    assert set(ep["outcome"]) <= {"others", "format_error", "complete"}
    assert (ep["steps"] >= 1).all()
    # the oracle's advice reached the model's context in the p=1 episodes
    helped = ep[ep.trigger_p == 1.0]
    assert (helped["calls_oracle"] >= 1).all()
    text = ds.states.set_index("state_id").loc[st[st.action == 1]["next_state_id"], "text"]
    assert text.str.contains("Expert help:").all()
    json.dumps(src)  # manifest stays JSON


@pytest.mark.parametrize("prefix_cache", [False, True])
def test_a_prompt_that_fills_the_context_window_gets_an_error_not_a_turn(tiny_model, prefix_cache):
    """Past its context window a model is outside what it learned (and a real one ran for
    half an hour per turn at 55 000 tokens): the actor refuses such a prompt, as vLLM and
    OpenAI endpoints do, so the episode ends there (outcome server_error); a prompt near
    the end of the window generates only up to it."""
    cfg = HFActorConfig(
        model=str(tiny_model),
        max_tokens=8,
        temperature=0.0,
        device="cpu",
        prefix_cache=prefix_cache,
    )
    actor = HFActor(cfg)
    assert actor.window == 16384  # the model config's max_position_embeddings
    short, long_ = _request(1, "Pause the workflow."), _request(2, "List every workflow " * 20)
    n_short = actor.generate([short])[0].prompt_tokens
    n_long = actor.generate([long_])[0].prompt_tokens
    actor.window = n_long  # the long prompt fills the window exactly
    a, b = actor.generate([short, long_])
    assert b.error is not None and "context window" in b.error and b.text == ""
    assert b.prompt_tokens == n_long and b.completion_tokens == 0
    assert a.error is None and 0 < a.completion_tokens <= 8
    actor.window = n_short + 2  # room for two new tokens
    assert actor.generate([short])[0].completion_tokens <= 2
