"""Where the conversation lives in an Anthropic Messages request: `messages` of content blocks.

Tool results are `tool_result` blocks inside a user message (parallel results share one message),
and the system prompt is the top-level `system`, outside the history.
"""

from __future__ import annotations

from typing import Any

from brownout.core.wire.history import ParallelResults, RequestHistory, TextSlot, text_parts

__all__ = ["AnthropicHistory"]

_TEXT = frozenset({"text"})


class AnthropicHistory(RequestHistory):
    """Messages API request: user/assistant messages whose content is a string or content blocks."""

    def messages(self) -> list[Any]:
        messages = self.doc.get("messages")
        return messages if isinstance(messages, list) else []

    def user_text(self, message: Any) -> list[TextSlot]:
        if self.role(message) != "user":
            return []
        if isinstance(message.get("content"), str):
            return [TextSlot(message, "content")]
        return text_parts(message.get("content"), _TEXT)

    @staticmethod
    def _result_blocks(message: Any) -> list[tuple[int, dict[str, Any]]]:
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            return []
        return [(i, b) for i, b in enumerate(content) if isinstance(b, dict) and b.get("type") == "tool_result"]

    def tool_results(self, message: Any) -> list[tuple[str | None, TextSlot]]:
        out: list[tuple[str | None, TextSlot]] = []
        for _, block in self._result_blocks(message):
            call_id = block.get("tool_use_id") if isinstance(block.get("tool_use_id"), str) else None
            content = block.get("content")
            if isinstance(content, list):
                slot = text_parts(content, _TEXT, create="text")[-1]
            else:
                slot = TextSlot(block, "content")
            out.append((call_id, slot))
        return out

    def parallel_results(self) -> list[ParallelResults]:
        runs: list[ParallelResults] = []
        for i, message in enumerate(self.messages()):
            blocks = self._result_blocks(message)
            if len(blocks) >= 2:
                runs.append(ParallelResults(message["content"], tuple(j for j, _ in blocks), i))
        return runs
