"""inject: insert text into what the agent reads (tool output or the completion): prompt injection.

Where a completion's text is belongs to the exchange's wire format (`WireFormat.edit_assistant_text`,
`.assistant_text_events`); a format that knows no place for it leaves the fault skipped.
"""

from __future__ import annotations

import contextlib
import json
from functools import partial
from typing import Any, Literal

from pydantic import Field, model_validator

from brownout.core.wire.framing import framer_for
from brownout.faults.base import Fault, FaultContext, FaultParams, NotApplicable, StreamEditor
from brownout.faults.jsonedit import NOT_JSON, dumps, find_longest_string, iter_path, load, parse_path
from brownout.faults.streams import JsonEventEditor, edit_events_in_body

__all__ = ["InjectFault", "InjectParams", "inject_tool_output"]


class InjectParams(FaultParams):
    """Parameters of the inject fault."""

    type: Literal["inject"]
    text: str = Field(min_length=1, description="The text to insert, e.g. an instruction the agent should not follow.")
    target: Literal["tool_output", "completion"] = "tool_output"
    path: str | None = Field(None, description="tool_output: JSON path of the string to extend; absent: auto.")
    position: Literal["end", "start", "replace"] = Field(
        "end", description="Append to, prepend to, or replace the text found (MCP results: all their content)."
    )
    separator: str = Field("\n\n", description="Between the original text and the injected text.")

    @model_validator(mode="after")
    def _path_for_tool_output(self) -> InjectParams:
        if self.position == "replace" and self.target != "tool_output":
            raise ValueError("position replace only applies to target tool_output")
        if self.path is not None:
            if self.target != "tool_output":
                raise ValueError("path only applies to target tool_output")
            parse_path(self.path)
        return self


def _join(old: str, p: InjectParams) -> str:
    if p.position == "replace":
        return p.text
    return p.text + p.separator + old if p.position == "start" else old + p.separator + p.text


def _join_completion(old: str, p: InjectParams) -> str:
    # The answer's own text: an answer without text gets the text alone, with no separator.
    return _join(old, p) if old else p.text


def inject_tool_output(doc: Any, p: InjectParams) -> bool:
    """Insert the text into a tool API's JSON document in place; True when a place was found."""
    if p.path is not None:
        hits = [(c, k) for c, k in iter_path(doc, parse_path(p.path)) if isinstance(c[k], str)]
        for container, key in hits:
            container[key] = _join(container[key], p)
        return bool(hits)
    result = doc.get("result") if isinstance(doc, dict) and "jsonrpc" in doc else None
    if isinstance(result, dict) and isinstance(result.get("content"), list):
        _inject_mcp_result(result, p)
        return True
    # A plain JSON tool API: the longest string is where the prose (and the agent's eye) is.
    return _inject_longest(doc, p)


def _inject_longest(doc: Any, p: InjectParams) -> bool:
    spot = find_longest_string(doc)
    if spot is None:
        return False
    container, key = spot
    container[key] = _join(container[key], p)
    return True


def _inject_mcp_result(result: dict[str, Any], p: InjectParams) -> None:
    """An MCP tool result: the model reads its `content` text, a client with an outputSchema its
    `structuredContent`; both get the text. A text item that is the JSON of the structured result (as
    servers send it beside one) is written again from the edited result, so the two stay one."""
    structured = result.get("structuredContent")
    serialised: list[dict[str, Any]] = []
    if isinstance(structured, dict | list):
        serialised = [c for c in result["content"] if _serialises(c, structured)]
        if not _inject_longest(structured, p):
            serialised = []  # no string to carry the text (e.g. only numbers): the content text does
    if serialised and p.position != "replace":
        for item in serialised:
            item["text"] = _serialise_like(item["text"], structured)
        return
    texts = [c for c in result["content"] if isinstance(c, dict) and c.get("type") == "text"]
    if p.position == "replace":
        result["content"] = [{"type": "text", "text": p.text}]  # the whole result swapped
    elif texts:
        texts[0]["text"] = _join(str(texts[0].get("text", "")), p)
    else:
        result["content"].append({"type": "text", "text": p.text})


def _serialises(item: Any, structured: Any) -> bool:
    if not isinstance(item, dict) or item.get("type") != "text" or not isinstance(item.get("text"), str):
        return False
    try:
        return bool(json.loads(item["text"]) == structured)
    except ValueError:
        return False


def _serialise_like(text: str, value: Any) -> str:
    """`value` as JSON in the layout of `text`: indented (Python's and JavaScript's 2 spaces) or compact."""
    if "\n" in text:
        return json.dumps(value, indent=2, ensure_ascii=False)
    separators = (", ", ": ") if '": ' in text else (",", ":")
    return json.dumps(value, separators=separators, ensure_ascii=False)


class InjectFault(Fault):
    """Adds attacker-style text to a tool response or to the assistant's answer (AgentDojo setting)."""

    type = "inject"
    Params = InjectParams
    params: InjectParams

    def wants_body(self, ctx: FaultContext) -> bool:
        return True

    def _edit(self, ctx: FaultContext, doc: Any) -> bool:
        p = self.params
        if p.target == "completion":
            return ctx.wire.edit_assistant_text(doc, partial(_join_completion, p=p))
        return inject_tool_output(doc, p)

    def stream_editor(self, ctx: FaultContext) -> StreamEditor | None:
        if framer_for(ctx.exchange.content_type) is None:
            raise NotApplicable("the body streamed (too large to buffer) and is not an event stream")
        return self._event_editor(ctx)

    def _event_editor(self, ctx: FaultContext) -> StreamEditor:
        p = self.params
        text_events = None
        if p.target == "completion":
            text_events = ctx.wire.assistant_text_events()
            if text_events is None:
                raise NotApplicable(f"the {ctx.wire.provider} wire format locates no assistant text in streams")
        done = False

        def once(doc: Any) -> bool:
            # Streams get the text once: in the first text delta, or the first tool result event.
            nonlocal done
            if done:
                return False
            if text_events is not None:
                done = text_events(doc, partial(_join_completion, p=p))
            else:
                done = inject_tool_output(doc, p)
            return done

        return JsonEventEditor(once)

    def edit_body(self, ctx: FaultContext, body: bytes, headers: dict[str, str]) -> bytes:
        ct = headers.get("content-type", ctx.exchange.content_type)
        # A buffered SSE/NDJSON body is edited event by event.
        edited = edit_events_in_body(self._event_editor(ctx), body, ct) if framer_for(ct) else None
        if edited is not None:
            return edited
        doc = load(body)
        if doc is NOT_JSON:
            if self.params.target == "tool_output" and ("text" in ct or not ct):
                with contextlib.suppress(UnicodeDecodeError):  # binary: not a place for text
                    return _join(body.decode("utf-8"), self.params).encode()  # a plain-text tool response
            raise NotApplicable("the body is neither JSON nor text")
        if isinstance(doc, str):
            return dumps(_join(doc, self.params)).encode()
        if not self._edit(ctx, doc):
            raise NotApplicable(f"no place for the text ({self.params.target})")
        return dumps(doc).encode()
