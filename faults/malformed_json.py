"""malformed_json: broken JSON bodies, unparseable tool arguments, a corrupted event, schema drift."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from brownout.core.wire.base import StreamEvent
from brownout.core.wire.framing import framer_for
from brownout.core.wire.realtime import RealtimeEvent
from brownout.faults.arguments import CorruptArguments
from brownout.faults.base import Fault, FaultContext, FaultParams, NotApplicable, StreamEditor
from brownout.faults.drift import apply_drift
from brownout.faults.events import EventAction
from brownout.faults.jsonedit import NOT_JSON, corrupt_json_text, dumps, load, parse_path
from brownout.faults.mcplists import retype
from brownout.faults.streams import AfterEventsEditor, JsonEventEditor, edit_events_in_body, with_data

__all__ = ["MalformedJsonFault", "MalformedJsonParams"]

SSE_DEFAULT_WINDOW = 3  # without event_index, one of the first few events is picked by the rng


class MalformedJsonParams(FaultParams):
    """Parameters of the malformed_json fault."""

    type: Literal["malformed_json"]
    target: Literal["body", "tool_arguments", "sse_event", "schema_drift", "structured_content"] = "body"
    event_index: int | None = Field(
        None, ge=0, description="sse_event: which data event (0-based); absent: seeded pick."
    )
    field: str | None = Field(
        None, description="schema_drift: JSON path, e.g. 'choices[].message'; absent: the one the wire format names."
    )
    action: Literal["rename", "drop"] = Field("rename", description="schema_drift: rename or drop the field.")
    rename_to: str | None = Field(
        None, min_length=1, description="schema_drift rename: new name (default '<field>_v2')."
    )

    @model_validator(mode="after")
    def _params_fit_target(self) -> MalformedJsonParams:
        if self.event_index is not None and self.target != "sse_event":
            raise ValueError("event_index only applies to target sse_event")
        drift = (self.field is not None, self.rename_to is not None, self.action != "rename")
        if any(drift) and self.target != "schema_drift":
            raise ValueError("field, action and rename_to only apply to target schema_drift")
        if self.rename_to is not None and self.action == "drop":
            raise ValueError("rename_to needs action rename")
        if self.field is not None:
            parse_path(self.field)
        return self


def retype_structured_content(doc: Any) -> bool:
    """An MCP tool result whose structuredContent no longer fits the tool's outputSchema: every
    top-level field changes JSON type (a declared schema types its fields, so each change breaks it)."""
    result = doc.get("result") if isinstance(doc, dict) else None
    content = result.get("structuredContent") if isinstance(result, dict) else None
    if not isinstance(content, dict) or not content:
        return False
    for key, value in content.items():
        content[key] = retype(value)
    return True


class _CorruptOneEvent(AfterEventsEditor):
    """Corrupts the data of one event (or of the terminal event, if the stream ends first)."""

    def __init__(self, ctx: FaultContext, index: int) -> None:
        super().__init__(ctx.wire, index)
        self.rng = ctx.rng

    def fire(self, event: StreamEvent) -> list[bytes] | str:
        data = event.data
        # `[DONE]` is no JSON: cutting its bracket still breaks the SDK's end-of-stream check.
        bad = corrupt_json_text(data, self.rng) if _json_document(data) else data[:-1]
        return [with_data(event, bad)]


def _json_document(data: str) -> bool:
    """An object or array (too deep to parse still counts: any corruption of it stays broken)."""
    if data[:1] not in ("{", "["):
        return False
    try:
        return load(data) is not NOT_JSON
    except NotApplicable:
        return True


def _drift(p: MalformedJsonParams, ctx: FaultContext, doc: Any) -> int:
    """schema_drift on one decoded document: the given field, else the one the exchange's wire format names."""
    return apply_drift(doc, p.field or ctx.wire.drift_field(doc), p.action, p.rename_to)


def _schemas(ctx: FaultContext) -> dict[str, Any]:
    return {t.name: t.schema for t in ctx.exchange.tools_declared}


def _arguments_editor(ctx: FaultContext) -> StreamEditor:
    """Breaks tool-call arguments event by event, where the exchange's wire format finds them."""
    events = ctx.wire.tool_arguments_events()
    if events is None:
        raise NotApplicable(f"the {ctx.wire.provider} wire format locates no tool-call arguments in streams")
    edit = CorruptArguments(ctx.rng, _schemas(ctx))
    return JsonEventEditor(lambda doc: events(doc, edit) > 0)


class MalformedJsonFault(Fault):
    """Corrupts JSON the client must parse, in streamed and buffered responses alike."""

    type = "malformed_json"
    Params = MalformedJsonParams
    params: MalformedJsonParams

    def wants_body(self, ctx: FaultContext) -> bool:
        return True

    def stream_editor(self, ctx: FaultContext) -> StreamEditor | None:
        if framer_for(ctx.exchange.content_type) is None:
            # Only event streams are edited as they stream; any other body that streams is one
            # too large to buffer (proxy.buffer_max_bytes), so there is nothing this fault can do.
            raise NotApplicable("the body streamed (too large to buffer) and is not an event stream")
        return self._event_editor(ctx)

    def _event_editor(self, ctx: FaultContext) -> StreamEditor:
        p = self.params
        if p.target == "tool_arguments":
            return _arguments_editor(ctx)
        if p.target == "schema_drift":
            return JsonEventEditor(lambda doc: _drift(p, ctx, doc) > 0)
        if p.target == "structured_content":
            return JsonEventEditor(retype_structured_content)
        # body and sse_event: a stream's body is its events, so one of them breaks.
        index = p.event_index if p.event_index is not None else ctx.rng.randrange(SSE_DEFAULT_WINDOW)
        return _CorruptOneEvent(ctx, index)

    def event_problem(self) -> str | None:
        if self.params.target != "tool_arguments":
            return "on WebSocket events malformed_json takes target: tool_arguments"
        return None

    def on_event(self, ctx: FaultContext, event: RealtimeEvent) -> EventAction | None:
        # The call's arguments stop parsing here and wherever the rest of its generation repeats them
        # (output_item.done, response.done), the same broken text each time.
        broken: dict[str, str] = {}

        def edit(text: str) -> str:
            if text not in broken:
                broken[text] = corrupt_json_text(text, ctx.rng)
            return broken[text]

        out = event.codec.edit_tool_arguments(event, edit)
        if out is None:
            raise NotApplicable(f"{event.type or 'the event'} carries no tool-call arguments")
        gen = event.generation
        return EventAction(replace=out, rewrite=(gen, edit) if gen is not None else None)

    def edit_body(self, ctx: FaultContext, body: bytes, headers: dict[str, str]) -> bytes:
        ct = headers.get("content-type", ctx.exchange.content_type)
        p = self.params
        if framer_for(ct) is not None or p.target in ("body", "sse_event"):
            # A buffered SSE/NDJSON body is edited event by event. The body and sse_event editor is
            # built either way: its seeded pick draws from the rng, as it always has.
            edited = edit_events_in_body(self._event_editor(ctx), body, ct)
            if edited is not None:
                return edited
        doc = load(body)
        if doc is NOT_JSON:
            raise NotApplicable("the body is not JSON")
        if p.target in ("body", "sse_event"):
            return corrupt_json_text(body.decode("utf-8", "replace"), ctx.rng).encode()
        if p.target == "tool_arguments":
            changed = ctx.wire.edit_tool_arguments(doc, CorruptArguments(ctx.rng, _schemas(ctx)))
        elif p.target == "structured_content":
            changed = retype_structured_content(doc)
        else:
            changed = _drift(p, ctx, doc)
        if not changed:
            raise NotApplicable(f"nothing to change for target {p.target}")
        return dumps(doc).encode()
