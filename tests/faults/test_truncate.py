from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from brownout.core.wire import by_provider
from brownout.faults.base import CLOSE, RESET, NotApplicable, StreamTiming
from brownout.faults.truncate import TruncateFault, TruncateParams
from tests.faults.conftest import run_editor, sse
from tests.faults.samples import ANTHROPIC_TEXT_STREAM, JSON, OPENAI_CHAT, OPENAI_TEXT_STREAM, SSE, dump, openai_sdk


def fault(**kw: object) -> TruncateFault:
    return TruncateFault(TruncateParams.model_validate({"type": "truncate", **kw}))


@pytest.mark.parametrize(
    "bad",
    [
        {},
        {"at_bytes": 1, "after_events": 1},
        {"at_fraction": 1.0},
        {"at_bytes": -1},
        {"after_events": 1, "close": "fin"},
    ],
)
def test_invalid(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        TruncateParams.model_validate({"type": "truncate", **bad})


def test_openai_stream_cut_after_events_loses_done_and_sdk_returns_partial_text(make_ctx) -> None:
    ctx = make_ctx(wire=by_provider("openai"), stream=True)
    out, end = run_editor(fault(after_events=2).stream_editor(ctx), sse(*OPENAI_TEXT_STREAM))
    assert end == CLOSE and b"[DONE]" not in out
    chunks = list(openai_sdk(200, SSE, out).chat.completions.create(model="m", messages=[], stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "Hello"  # no error: the real failure


@pytest.mark.parametrize("close", ["clean", "reset"])
def test_anthropic_stream_never_reaches_message_stop(make_ctx, close: str) -> None:
    ctx = make_ctx(wire=by_provider("anthropic"), stream=True)
    out, end = run_editor(
        fault(after_events=99, close=close).stream_editor(ctx), sse(*ANTHROPIC_TEXT_STREAM, done=False)
    )
    assert end == (RESET if close == "reset" else CLOSE)
    assert b"message_stop" not in out and b"message_delta" in out


def test_stream_at_bytes_cuts_inside_an_event(make_ctx) -> None:
    events = sse(*OPENAI_TEXT_STREAM)
    out, end = run_editor(fault(at_bytes=150).stream_editor(make_ctx(stream=True)), events)
    assert len(out) == 150 and end == CLOSE


def test_reset_at_bytes_is_realised_by_the_tap(make_ctx) -> None:
    f = fault(at_bytes=10, close="reset")
    assert f.stream_timing(make_ctx()) == StreamTiming(reset_after_bytes=10)
    assert f.stream_editor(make_ctx()) is None


def test_reset_at_fraction_uses_content_length(make_ctx) -> None:
    f = fault(at_fraction=0.5, close="reset")
    ctx = make_ctx(response_headers={"content-length": "100"})
    assert f.stream_timing(ctx) == StreamTiming()  # forces the body through the editor
    editor = f.stream_editor(ctx)
    out, end = run_editor(editor, [sse({"x": "a" * 30}, done=False)[0]] * 3)
    assert len(out) == 50 and end == RESET
    with pytest.raises(NotApplicable, match="content-length"):  # no length: a fraction is undefined
        f.stream_editor(make_ctx())


@pytest.mark.parametrize("kw,size", [({"at_bytes": 40}, 40), ({"at_fraction": 0.25}, None)])
def test_buffered_json_body_is_cut_and_sdk_fails_to_parse(make_ctx, kw: dict[str, object], size: int | None) -> None:
    body = dump(OPENAI_CHAT)
    f = fault(**kw)
    assert f.wants_body(make_ctx())
    cut = f.edit_body(make_ctx(), body, dict(JSON))
    assert len(cut) == (size or int(len(body) * 0.25)) and body.startswith(cut)
    with pytest.raises(json.JSONDecodeError):
        openai_sdk(200, JSON, cut).chat.completions.create(model="m", messages=[])


def test_buffered_event_stream_after_events(make_ctx) -> None:
    ctx = make_ctx(wire=by_provider("openai"))
    body = b"".join(e.raw for e in sse(*OPENAI_TEXT_STREAM))
    cut = fault(after_events=1).edit_body(ctx, body, dict(SSE))
    assert cut == sse(*OPENAI_TEXT_STREAM)[0].raw
    with pytest.raises(NotApplicable, match="event stream"):
        fault(after_events=1).edit_body(ctx, b'{"a": 1}', dict(JSON))
    with pytest.raises(NotApplicable, match="event stream"):
        fault(after_events=1).stream_editor(make_ctx(content_type="application/json"))
