"""What a wire format hands a fault that rewrites a response in place: tool-call arguments and text.

A wire format knows *where* its responses carry tool-call arguments and the assistant's text
(`WireFormat.edit_tool_arguments`, `.tool_arguments_events`, `.edit_assistant_text`,
`.assistant_text_events`); a fault knows *what* to put there. The format walks a decoded document
(a whole response, or one stream event) and calls the fault's edit at each place, in the form the
wire carries it:

- `ArgumentsEdit.text`: complete arguments as JSON text (OpenAI `function.arguments`);
- `ArgumentsEdit.value`: complete arguments as a JSON value that may be replaced (Gemini `args`,
  Ollama `arguments`);
- `ArgumentsEdit.object`: arguments that must stay an object, edited in place (Anthropic `input`);
- `ArgumentsEdit.fragment`: a streamed piece of one call's JSON text, with a key that tells the
  stream's calls apart (OpenAI chat `index`, Responses `item_id`, Anthropic block `index`);
- `ArgumentsEdit.repeat`: a stream's complete copy of a call whose fragments already went by
  (OpenAI Responses `.done`, `output_item.done`, `response.completed`).

The same modules name the field of an answer (or of one stream event) its SDK cannot do without,
for schema drift to rename or drop (`WireFormat.drift_field`).

A place counts as changed when the edit returns something different (or `object` returns True);
the formats return how many places changed, so a fault that changed nothing can say so.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Protocol

__all__ = [
    "ArgumentsEdit",
    "EventArguments",
    "EventText",
    "TextEdit",
    "edit_fragment",
    "edit_repeat",
    "edit_text",
    "edit_value",
    "member",
    "members",
]

TextEdit = Callable[[str], str]
"""The assistant's text as it is -> the text to send instead ("" where the answer has none yet)."""


class ArgumentsEdit:
    """A rewrite of tool-call arguments, one method per form the wire carries them in; the defaults keep them."""

    def text(self, arguments: str) -> str:
        """Complete arguments carried as JSON text; returns the text to carry instead."""
        return arguments

    def value(self, arguments: Any) -> Any:
        """Complete arguments carried as a JSON value the client decodes; returns the value to carry instead."""
        return arguments

    def object(self, arguments: dict[str, Any], tool: str | None) -> bool:
        """Arguments that must stay an object (`tool`: the called tool, when named); edit in place, True if changed."""
        return False

    def fragment(self, call: Hashable, fragment: str) -> str:
        """A streamed piece of one call's JSON text, in wire order; `call` identifies the call within the stream."""
        return fragment

    def repeat(self, call: Hashable, arguments: str) -> str:
        """A stream's complete JSON text of a call it already streamed as fragments (the same `call` key)."""
        return arguments


EventArguments = Callable[[Any, ArgumentsEdit], int]
"""Edits the tool-call arguments in one decoded stream event; returns how many places changed."""

EventText = Callable[[Any, TextEdit], bool]
"""Edits the first non-empty piece of assistant text in one decoded stream event; True when it did."""


def members(doc: Any, key: str) -> list[dict[str, Any]]:
    """The objects in `doc[key]` when it is a list; [] for anything else."""
    value = doc.get(key) if isinstance(doc, dict) else None
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def member(doc: Any, key: str) -> dict[str, Any]:
    """`doc[key]` when it is an object; a fresh empty dict for anything else (edits to it go nowhere)."""
    value = doc.get(key) if isinstance(doc, dict) else None
    return value if isinstance(value, dict) else {}


# One place of each form: `holder[key]` handed to the edit when it holds that form; 1 when it changed.


def edit_text(holder: dict[str, Any], key: str, edit: ArgumentsEdit) -> int:
    """Arguments carried as JSON text in `holder[key]`."""
    old = holder.get(key)
    if not isinstance(old, str):
        return 0
    new = holder[key] = edit.text(old)
    return int(new != old)


def edit_value(holder: dict[str, Any], key: str, edit: ArgumentsEdit) -> int:
    """Arguments carried as a JSON value in `holder[key]` (a string there is no longer a value of theirs)."""
    if key not in holder or isinstance(holder[key], str):
        return 0
    old = holder[key]
    new = holder[key] = edit.value(old)
    return int(new != old)


def edit_fragment(holder: dict[str, Any], key: str, call: Hashable, edit: ArgumentsEdit) -> int:
    """A streamed fragment of one call's JSON text in `holder[key]`."""
    old = holder.get(key)
    if not isinstance(old, str):
        return 0
    new = holder[key] = edit.fragment(call, old)
    return int(new != old)


def edit_repeat(holder: dict[str, Any], key: str, call: Hashable, edit: ArgumentsEdit) -> int:
    """A stream's complete copy of one call's JSON text in `holder[key]`."""
    old = holder.get(key)
    if not isinstance(old, str):
        return 0
    new = holder[key] = edit.repeat(call, old)
    return int(new != old)


class EditPlaces(Protocol):
    """Where one provider's responses keep tool-call arguments and assistant text: a provider's
    `*_edits` module, named by its wire format's `edit_places`."""

    def tool_arguments(self, doc: Any, edit: ArgumentsEdit) -> int: ...

    def stream_tool_arguments(self, doc: Any, edit: ArgumentsEdit) -> int: ...

    def assistant_text(self, doc: Any, edit: TextEdit) -> bool: ...

    def event_text(self, doc: Any, edit: TextEdit) -> bool: ...

    def drift_field(self, doc: Any) -> str | None: ...
