"""One conversation in every LLM request layout, for the request-mutation tests.

The conversation: a system prompt; the user asks about two cities; the assistant calls get_weather
twice in parallel; both results come back; the assistant answers; the user asks a follow-up.
`LAYOUT[provider]` says where its parts sit in that provider's list of messages.
"""

from __future__ import annotations

import copy
import json
from typing import Any

__all__ = ["ANSWER", "FIRST_QUESTION", "LAYOUT", "LYON", "PARIS", "PROVIDERS", "QUESTION", "SYSTEM", "request"]

SYSTEM = "You are a travel assistant."
FIRST_QUESTION = "What is the weather in Paris and Lyon?"
QUESTION = "Which city should I visit tomorrow for a picnic?"
PARIS = json.dumps({"city": "Paris", "temp_c": 18, "conditions": "cloudy"})
LYON = json.dumps({"city": "Lyon", "temp_c": 21, "conditions": "sunny"})
ANSWER = "Paris is 18C and cloudy; Lyon is 21C and sunny."

_CALLS = [("call_1", {"city": "Paris"}), ("call_2", {"city": "Lyon"})]

_OPENAI_CHAT = {
    "model": "gpt-4o-mini",
    "messages": [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": FIRST_QUESTION},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": i, "type": "function", "function": {"name": "get_weather", "arguments": json.dumps(a)}}
                for i, a in _CALLS
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": PARIS},
        {"role": "tool", "tool_call_id": "call_2", "content": LYON},
        {"role": "assistant", "content": ANSWER},
        {"role": "user", "content": [{"type": "text", "text": QUESTION}]},
    ],
}

_OPENAI_RESPONSES = {
    "model": "gpt-4o-mini",
    "instructions": SYSTEM,
    "input": [
        {"role": "user", "content": FIRST_QUESTION},
        *(
            {"type": "function_call", "call_id": i, "name": "get_weather", "arguments": json.dumps(a)}
            for i, a in _CALLS
        ),
        {"type": "function_call_output", "call_id": "call_1", "output": PARIS},
        {"type": "function_call_output", "call_id": "call_2", "output": LYON},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": ANSWER}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": QUESTION}]},
    ],
}

_ANTHROPIC = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 256,
    "system": SYSTEM,
    "messages": [
        {"role": "user", "content": FIRST_QUESTION},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": i, "name": "get_weather", "input": a} for i, a in _CALLS],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": PARIS},
                {"type": "tool_result", "tool_use_id": "call_2", "content": [{"type": "text", "text": LYON}]},
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": ANSWER}]},
        {"role": "user", "content": QUESTION},
    ],
}

_GEMINI = {
    "systemInstruction": {"parts": [{"text": SYSTEM}]},
    "contents": [
        {"role": "user", "parts": [{"text": FIRST_QUESTION}]},
        {"role": "model", "parts": [{"functionCall": {"name": "get_weather", "args": a}} for _, a in _CALLS]},
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "get_weather", "response": {"result": PARIS}}},
                {"functionResponse": {"name": "get_weather", "response": {"result": LYON}}},
            ],
        },
        {"role": "model", "parts": [{"text": ANSWER}]},
        {"role": "user", "parts": [{"text": QUESTION}]},
    ],
}

_OLLAMA = {
    "model": "llama3.2",
    "stream": False,
    "messages": [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": FIRST_QUESTION},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "get_weather", "arguments": a}} for _, a in _CALLS],
        },
        {"role": "tool", "tool_name": "get_weather", "content": PARIS},
        {"role": "tool", "tool_name": "get_weather", "content": LYON},
        {"role": "assistant", "content": ANSWER},
        {"role": "user", "content": QUESTION},
    ],
}

# provider (or "responses", OpenAI's other layout) -> (request document, path)
_REQUESTS: dict[str, tuple[dict[str, Any], str]] = {
    "openai": (_OPENAI_CHAT, "/v1/chat/completions"),
    "responses": (_OPENAI_RESPONSES, "/v1/responses"),
    "anthropic": (_ANTHROPIC, "/v1/messages"),
    "gemini": (_GEMINI, "/v1beta/models/gemini-2.0-flash:generateContent"),
    "ollama": (_OLLAMA, "/api/chat"),
}

# Where the conversation's parts are in each layout's message list: the key of that list, the index of
# the last user message, of the message holding the last tool result, of the first parallel result,
# how many pinned (system) messages open it, and its length.
LAYOUT: dict[str, dict[str, Any]] = {
    "openai": {"list": "messages", "user": 6, "result": 4, "parallel": 3, "system": 1, "length": 7},
    "responses": {"list": "input", "user": 6, "result": 4, "parallel": 3, "system": 0, "length": 7},
    "anthropic": {"list": "messages", "user": 4, "result": 2, "parallel": 2, "system": 0, "length": 5},
    "gemini": {"list": "contents", "user": 4, "result": 2, "parallel": 2, "system": 0, "length": 5},
    "ollama": {"list": "messages", "user": 6, "result": 4, "parallel": 3, "system": 1, "length": 7},
}

PROVIDERS = tuple(_REQUESTS)


def request(provider: str) -> tuple[dict[str, Any], str]:
    """A fresh copy of the conversation in `provider`'s layout, and its path."""
    doc, path = _REQUESTS[provider]
    return copy.deepcopy(doc), path
