"""Chat formatting: prompts, tools, the fallback template, and the tokens of an action."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from agentenvs.policy.base import Conversation
from agentenvs.policy.chat import (
    FALLBACK_CHAT_TEMPLATE,
    ChatFormatter,
    ChatTemplateError,
    apply_stop,
)

TOOLS = [{"type": "function", "function": {"name": "move", "parameters": {"type": "object"}}}]


def conversation(turns: int = 1, tools: Any = None) -> Conversation:
    conv = Conversation.start("Map:\nP_\n_G", {"system_prompt": "You are playing FrozenLake."})
    conv.tools = tools
    for turn in range(turns - 1):
        conv.add_turn(f"<answer>Right</answer> {turn}", "Map:\n_P\n_G")
    return conv


def without_template(tokenizer: Any) -> Any:
    bare = copy.deepcopy(tokenizer)
    bare.chat_template = None
    return bare


def test_prompt_uses_the_models_template(tiny_tokenizer: Any) -> None:
    formatter = ChatFormatter(tiny_tokenizer)
    text = formatter.prompt_text(conversation(2))
    assert not formatter.uses_fallback
    assert text.startswith("<|im_start|>system\nYou are playing FrozenLake.<|im_end|>\n")
    assert "<|im_start|>assistant\n<answer>Right</answer> 0<|im_end|>\n" in text
    assert text.endswith("<|im_start|>user\nMap:\n_P\n_G<|im_end|>\n<|im_start|>assistant\n")
    ids = formatter.prompt_ids(conversation(2))
    assert tiny_tokenizer.decode(ids) == text  # no BOS added on top of the template
    assert ids.count(tiny_tokenizer.convert_tokens_to_ids("<|im_end|>")) == 4


def test_tools_go_to_a_template_that_takes_them(tiny_tokenizer: Any) -> None:
    text = ChatFormatter(tiny_tokenizer).prompt_text(conversation(tools=TOOLS))
    assert text.startswith('<|im_start|>system\nTools: [{"type": "function"')


def test_tools_go_into_the_system_prompt_otherwise(tiny_tokenizer: Any) -> None:
    formatter = ChatFormatter(tiny_tokenizer, chat_template=FALLBACK_CHAT_TEMPLATE)
    assert not formatter.template_takes_tools
    text = formatter.prompt_text(conversation(tools=TOOLS))
    assert text.startswith("<s>### System:\nYou are playing FrozenLake.\n\nYou can call these functions:")
    assert '"name": "move"' in text


def test_fallback_template_when_the_tokenizer_has_none(tiny_tokenizer: Any) -> None:
    formatter = ChatFormatter(without_template(tiny_tokenizer))
    assert formatter.uses_fallback
    assert formatter.prompt_text(conversation(2)) == (
        "<s>### System:\nYou are playing FrozenLake.\n\n### User:\nMap:\nP_\n_G\n\n"
        "### Assistant:\n<answer>Right</answer> 0</s>\n\n### User:\nMap:\n_P\n_G\n\n### Assistant:\n"
    )
    # the model ends its turn with EOS there
    assert formatter.end_of_turn_token() == "</s>"
    seq = formatter.scored_sequence(conversation(2), "<answer>Up</answer>")
    assert tiny_tokenizer.decode(seq.action_ids) == "<answer>Up</answer></s>"


def test_system_role_refused_by_the_template_is_merged(tiny_tokenizer: Any) -> None:
    strict = (
        "{% for m in messages %}{% if m['role'] == 'system' %}"
        "{{ raise_exception('System role not supported') }}{% endif %}"
        "<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    text = ChatFormatter(tiny_tokenizer, chat_template=strict).prompt_text(conversation())
    assert text.startswith("<|im_start|>user\nYou are playing FrozenLake.\n\nMap:")


@pytest.mark.parametrize("turns", [1, 3])
@pytest.mark.parametrize("action", ["<answer>Left</answer>", "  spaced out  ", "ünïcode ☃ text"])
def test_action_tokens_follow_the_prompt_and_end_with_end_of_turn(
    tiny_tokenizer: Any, turns: int, action: str
) -> None:
    formatter = ChatFormatter(tiny_tokenizer)
    conv = conversation(turns)
    seq = formatter.scored_sequence(conv, action)
    prompt = formatter.prompt_ids(conv)
    assert seq.ids[: seq.action_start] == prompt
    assert seq.action_start == len(prompt)
    # exactly the assistant message's content and the end-of-turn token, not the newline after
    assert tiny_tokenizer.decode(seq.action_ids) == action + "<|im_end|>"
    full = tiny_tokenizer.apply_chat_template(
        [*conv.messages, {"role": "assistant", "content": action}], tokenize=False
    )
    assert formatter.encode(full)[: len(seq.ids)] == seq.ids
    span = formatter.action_span(conv, action)
    assert (span.action, span.end_of_turn) == (action, "<|im_end|>")


def test_a_template_that_does_not_continue_its_prompt_is_refused(tiny_tokenizer: Any) -> None:
    odd = (
        "{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}[assistant, please answer]{% endif %}"
    )
    with pytest.raises(ChatTemplateError, match="continuation"):
        ChatFormatter(tiny_tokenizer, chat_template=odd).scored_sequence(conversation(), "x")


def test_apply_stop_cuts_at_the_earliest_stop() -> None:
    assert apply_stop("ab</answer>cd STOP", ["STOP", "</answer>"]) == ("ab", True)
    assert apply_stop("abc", ["x", ""]) == ("abc", False)
    assert apply_stop("abc", []) == ("abc", False)
