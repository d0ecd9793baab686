from __future__ import annotations

import asyncio
import json

import pytest
from pydantic import ValidationError

from brownout.faults.base import CLOSE, Respond
from brownout.faults.http_error import HttpErrorFault, HttpErrorParams
from tests.faults.conftest import run_editor, sse


def fault(**kw: object) -> HttpErrorFault:
    return HttpErrorFault(HttpErrorParams.model_validate({"type": "http_error", **kw}))


def test_before_upstream_answers_with_wire_error(make_ctx) -> None:
    res = asyncio.run(fault(status=429, retry_after_s=2, error_type="insufficient_quota").before_upstream(make_ctx()))
    assert isinstance(res, Respond) and res.status == 429
    assert json.loads(res.body) == {"status": 429, "type": "insufficient_quota", "message": None, "retry_after_s": 2}


def test_mid_stream_on_non_stream_request_answers_up_front(make_ctx) -> None:
    f = fault(status=529, mid_stream=True)
    ctx = make_ctx(stream=False)
    assert isinstance(asyncio.run(f.before_upstream(ctx)), Respond)
    assert f.stream_editor(ctx) is None


def test_mid_stream_emits_error_event_after_n_events_then_closes(make_ctx) -> None:
    f = fault(mid_stream=True, after_events=2, error_type="overloaded_error", message="Overloaded")
    ctx = make_ctx(stream=True)
    assert asyncio.run(f.before_upstream(ctx)) is None
    events = sse({"n": 1}, {"n": 2}, {"n": 3}, {"n": 4})
    out, end = run_editor(f.stream_editor(ctx), events)
    assert end == CLOSE
    assert (
        out
        == events[0].raw
        + events[1].raw
        + b'event: error\ndata: {"type": "overloaded_error", "message": "Overloaded"}\n\n'
    )


def test_mid_stream_short_stream_replaces_terminal_event(make_ctx) -> None:
    f = fault(mid_stream=True, after_events=10)
    events = sse({"n": 1})
    out, end = run_editor(f.stream_editor(make_ctx(stream=True)), events)
    assert end is None and b"[DONE]" not in out and out.endswith(b"event: error\n" + out.split(b"event: error\n")[1])


@pytest.mark.parametrize("bad", [{"status": 200}, {"status": 600}, {"after_events": -1}, {"retry_after_s": -1}])
def test_invalid(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        HttpErrorParams.model_validate({"type": "http_error", **bad})


# --- with the real wire formats, seen by the official SDKs ------------------------------

import anthropic  # noqa: E402
import openai  # noqa: E402

from brownout.core.wire import by_provider  # noqa: E402
from tests.faults.samples import ANTHROPIC_TEXT_STREAM, SSE, anthropic_sdk, openai_sdk  # noqa: E402


@pytest.mark.parametrize(
    "status,error_type,exc",
    [
        (429, None, openai.RateLimitError),
        (429, "insufficient_quota", openai.RateLimitError),
        (503, None, openai.InternalServerError),
        (400, "context_length_exceeded", openai.BadRequestError),
    ],
)
def test_openai_sdk_sees_the_real_error(make_ctx, status: int, error_type: str | None, exc: type) -> None:
    ctx = make_ctx(wire=by_provider("openai"), provider="openai", operation="chat")
    res = asyncio.run(fault(status=status, error_type=error_type, retry_after_s=2).before_upstream(ctx))
    with pytest.raises(exc) as info:
        openai_sdk(res.status, res.headers, res.body).chat.completions.create(model="m", messages=[])
    assert info.value.status_code == status
    if error_type:
        assert info.value.code == error_type or info.value.type == error_type


@pytest.mark.parametrize("status,exc", [(529, anthropic.OverloadedError), (429, anthropic.RateLimitError)])
def test_anthropic_sdk_sees_the_real_error(make_ctx, status: int, exc: type) -> None:
    ctx = make_ctx(wire=by_provider("anthropic"), provider="anthropic", operation="chat")
    res = asyncio.run(fault(status=status).before_upstream(ctx))
    with pytest.raises(exc):
        anthropic_sdk(res.status, res.headers, res.body).messages.create(model="c", max_tokens=9, messages=[])


def test_anthropic_mid_stream_error_event_is_raised_by_the_sdk(make_ctx) -> None:
    ctx = make_ctx(wire=by_provider("anthropic"), provider="anthropic", operation="chat", stream=True)
    f = fault(mid_stream=True, after_events=3, error_type="overloaded_error")
    out, end = run_editor(f.stream_editor(ctx), sse(*ANTHROPIC_TEXT_STREAM, done=False))
    assert end == CLOSE
    with pytest.raises(anthropic.APIStatusError):
        list(anthropic_sdk(200, SSE, out).messages.create(model="c", max_tokens=9, messages=[], stream=True))
