"""Where the conversation lives in OpenAI requests: chat `messages` and Responses `input` items.

Ollama's `/api/chat` uses the chat layout too (its content is always a string), so it shares
`ChatHistory`.
"""

from __future__ import annotations

from typing import Any

from brownout.core.wire.history import ParallelResults, RequestHistory, TextSlot, text_parts

__all__ = ["ChatHistory", "ResponsesHistory", "consecutive_runs"]

_CHAT_TEXT = frozenset({"text"})
_RESPONSES_USER_TEXT = frozenset({"input_text"})
_RESPONSES_OUTPUT_TEXT = frozenset({"input_text", "output_text"})


def consecutive_runs(items: list[Any], is_result: Any) -> list[ParallelResults]:
    """Runs of two or more adjacent items for which `is_result(item)` holds."""
    runs: list[ParallelResults] = []
    start = None
    for i in range(len(items) + 1):
        hit = i < len(items) and is_result(items[i])
        if hit and start is None:
            start = i
        elif not hit and start is not None:
            if i - start >= 2:
                runs.append(ParallelResults(items, tuple(range(start, i)), start))
            start = None
    return runs


class ChatHistory(RequestHistory):
    """Chat completions: `messages` with roles; tool results are `tool` (or legacy `function`) messages."""

    def messages(self) -> list[Any]:
        messages = self.doc.get("messages")
        return messages if isinstance(messages, list) else []

    def user_text(self, message: Any) -> list[TextSlot]:
        if self.role(message) != "user":
            return []
        content = message.get("content")
        if isinstance(content, str):
            return [TextSlot(message, "content")]
        return text_parts(content, _CHAT_TEXT)

    def _is_result(self, message: Any) -> bool:
        return self.role(message) in ("tool", "function")

    def tool_results(self, message: Any) -> list[tuple[str | None, TextSlot]]:
        if not self._is_result(message):
            return []
        call_id = message.get("tool_call_id")
        call_id = call_id if isinstance(call_id, str) else None
        content = message.get("content")
        if isinstance(content, list):
            slots = text_parts(content, _CHAT_TEXT, create="text")
            return [(call_id, slots[-1])]
        return [(call_id, TextSlot(message, "content"))]

    def parallel_results(self) -> list[ParallelResults]:
        return consecutive_runs(self.messages(), self._is_result)


class ResponsesHistory(RequestHistory):
    """Responses API: `input` is a string or a list of items (messages, function calls, their outputs)."""

    def messages(self) -> list[Any]:
        items = self.doc.get("input")
        return items if isinstance(items, list) else []

    def role(self, message: Any) -> str:
        if not isinstance(message, dict):
            return ""
        return str(message.get("role") or message.get("type") or "")

    def user_text(self, message: Any) -> list[TextSlot]:
        if not isinstance(message, dict) or message.get("role") != "user":
            return []
        if isinstance(message.get("content"), str):
            return [TextSlot(message, "content")]
        return text_parts(message.get("content"), _RESPONSES_USER_TEXT)

    def last_user_text(self) -> tuple[int, list[TextSlot]] | None:
        if isinstance(self.doc.get("input"), str):  # a bare string input is the user's message
            return 0, [TextSlot(self.doc, "input")]
        return super().last_user_text()

    @staticmethod
    def _is_result(item: Any) -> bool:
        return isinstance(item, dict) and item.get("type") == "function_call_output"

    def tool_results(self, message: Any) -> list[tuple[str | None, TextSlot]]:
        if not self._is_result(message):
            return []
        call_id = message.get("call_id")
        call_id = call_id if isinstance(call_id, str) else None
        output = message.get("output")
        if isinstance(output, list):
            return [(call_id, text_parts(output, _RESPONSES_OUTPUT_TEXT, create="input_text")[-1])]
        return [(call_id, TextSlot(message, "output"))]

    def parallel_results(self) -> list[ParallelResults]:
        return consecutive_runs(self.messages(), self._is_result)
