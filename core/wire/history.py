"""The conversation inside an LLM request, in its provider's layout: what request mutations edit.

Each provider keeps messages, tool results and the user's words in different places (OpenAI chat
`messages`, Responses `input` items, Anthropic content blocks, Gemini `contents` parts). A wire
format answers `request_history(exchange, doc)` with a `RequestHistory` over the decoded request
document; everything it returns points into that document, so an edit through it changes what is
sent upstream. Faults ask it where things are and never learn a provider's layout themselves.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

__all__ = ["ParallelResults", "RequestHistory", "TextSlot", "longest_string_slot", "text_parts"]

PINNED_ROLES = frozenset({"system", "developer"})


class TextSlot:
    """A string inside a decoded request document, rewritable in place."""

    __slots__ = ("_attach", "container", "key")

    def __init__(self, container: Any, key: str | int, attach: list[Any] | None = None) -> None:
        self.container = container
        self.key = key
        # A text part that does not exist yet: it joins `attach` when first written.
        self._attach = attach

    def get(self) -> str:
        try:
            value = self.container[self.key]
        except (KeyError, IndexError):
            return ""
        return value if isinstance(value, str) else ""

    def set(self, value: str) -> None:
        self.container[self.key] = value
        if self._attach is not None:
            self._attach.append(self.container)
            self._attach = None


@dataclass(slots=True)
class ParallelResults:
    """Sibling tool results in one list, answering one turn's parallel calls: their order carries no meaning."""

    items: list[Any]  # the list that holds them (the message list, or one message's content blocks)
    indices: tuple[int, ...]  # their positions in `items`, ascending
    message_index: int  # position in the message list of the first of them (or of the message holding them)


def text_parts(content: Any, part_types: frozenset[str], *, create: str | None = None) -> list[TextSlot]:
    """Slots of the text in a message content: the string itself, or the `text` of typed parts.

    With `create` (a part type) and a list without text parts, one new part of that type is offered."""
    if isinstance(content, list):
        slots = [
            TextSlot(part, "text")
            for part in content
            if isinstance(part, dict) and part.get("type") in part_types and isinstance(part.get("text"), str)
        ]
        if not slots and create is not None:
            slots = [TextSlot({"type": create, "text": ""}, "text", attach=content)]
        return slots
    return []


def longest_string_slot(doc: Any) -> TextSlot | None:
    """The longest string value in a JSON value (ties: the first, breadth first)."""
    best: TextSlot | None = None
    best_len = -1
    queue: list[Any] = [doc]
    while queue:
        node = queue.pop(0)
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, value in items:
            if isinstance(value, str) and len(value) > best_len:
                best, best_len = TextSlot(node, key), len(value)
            elif isinstance(value, dict | list):
                queue.append(value)
    return best


class RequestHistory(ABC):
    """The editable conversation of one decoded request document."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc

    @abstractmethod
    def messages(self) -> list[Any]:
        """The document's own list of messages (items), oldest first; [] when it has none."""

    def role(self, message: Any) -> str:
        return str(message.get("role") or "") if isinstance(message, dict) else ""

    def pinned(self, message: Any) -> bool:
        """System and developer messages: memory keeps them, so they are never dropped or cut."""
        return self.role(message) in PINNED_ROLES

    @abstractmethod
    def user_text(self, message: Any) -> list[TextSlot]:
        """The text a person wrote in this message; [] for other roles and tool-result-only messages."""

    @abstractmethod
    def tool_results(self, message: Any) -> list[tuple[str | None, TextSlot]]:
        """(tool call id, where its text is) for each tool result this message carries."""

    @abstractmethod
    def parallel_results(self) -> list[ParallelResults]:
        """Groups of two or more sibling tool results, oldest first."""

    def last_user_text(self) -> tuple[int, list[TextSlot]] | None:
        """The most recent message a person wrote: its index and its text slots."""
        messages = self.messages()
        for i in range(len(messages) - 1, -1, -1):
            slots = self.user_text(messages[i])
            if slots:
                return i, slots
        return None

    def last_tool_result(self) -> tuple[int, str | None, TextSlot] | None:
        """The most recent tool result: its message index, call id and text slot."""
        messages = self.messages()
        for i in range(len(messages) - 1, -1, -1):
            results = self.tool_results(messages[i])
            if results:
                call_id, slot = results[-1]
                return i, call_id, slot
        return None
