"""boto3's bedrock-runtime client through the real proxy in reverse mode (`endpoint_url` at brownout).

One proxy and one mock upstream serve the module; each rule picks its case out by model id. Every fault
must reach boto3 as the real failure: a `ClientError` with Bedrock's code after botocore's own retries,
an `EventStreamError` with the exception's code while the caller iterates, a silent end on a clean cut.
"""

from __future__ import annotations

import itertools
import json
import shutil
import time
from collections.abc import Iterator
from typing import Any, NamedTuple

import pytest
from botocore.exceptions import ClientError, ConnectionClosedError, EventStreamError, ReadTimeoutError
from urllib3.exceptions import ProtocolError

from tests.proxy.bedrock_support import (
    HAIKU,
    claude_body,
    client,
    converse,
    converse_stream,
    invoke_stream,
    model,
)
from tests.proxy.test_passthrough import collect

CASES = {
    "throttled": "{type: http_error, status: 429}",
    "unavailable": "{type: http_error, status: 503}",
    "internal": "{type: http_error, status: 500}",
    "timeout": "{type: http_error, status: 408}",
    "model-error": "{type: http_error, status: 424}",
    "invalid": "{type: http_error, status: 400}",
    "not-ready": "{type: http_error, status: 429, error_type: ModelNotReadyException}",
    "mid-throttle": "{type: http_error, status: 429, mid_stream: true, after_events: 2}",
    "mid-stream-error": "{type: http_error, status: 424, mid_stream: true, after_events: 3}",
    "mid-default": "{type: http_error, mid_stream: true, after_events: 1}",
    "cut": "{type: truncate, after_events: 3}",
    "cut-in-frame": "{type: truncate, at_bytes: 150}",
    "cut-reset": "{type: truncate, after_events: 3, close: reset}",
    "bad-args": "{type: malformed_json, target: tool_arguments}",
    "bad-event": "{type: malformed_json, target: sse_event, event_index: 1}",
    "drift": "{type: malformed_json, target: schema_drift}",
    "empty": "{type: empty}",
    "inject": "{type: inject, target: completion, text: INJECTED-MARKER}",
    "latency": "{type: latency, delay_ms: 300}",
    "stall": "{type: stall, after_events: 2, pause_ms: 400}",
    "throttle": "{type: throttle, bytes_per_s: 3000}",
    "reset": "{type: reset, phase: request}",
    "reset-mid": "{type: reset, phase: mid_body, after_bytes: 200}",
    "hang": "{type: hang}",
    "mutate": "{type: mutate, kind: typos, rate: 1}",
    "budget": "{type: latency, delay_ms: 1}",
}
HI = [{"role": "user", "content": [{"text": "hi"}]}]
FOLLOW_UP = "anthropic.claude-follow-up-v1:0"  # no rule picks it


class Rig(NamedTuple):
    """The module's mock upstream, proxy, the exchanges it recorded and the violations it announced."""

    up: Any
    proxy: Any
    seen: list[Any]
    violations: list[Any]


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory, _ca_template: Any) -> Iterator[Rig]:
    from brownout.proxy.demo.upstream import MockUpstream
    from brownout.proxy.embed import running_proxy

    rules = "".join(
        f"  - name: {name}\n    match: {{model: '{model(name)}'}}\n    fault: {fault}\n"
        for name, fault in CASES.items()
    )
    invariants = (
        "invariants:\n  - {type: stream_complete}\n  - {type: tool_arguments_json, schema: true}\n"
        "  - {type: retry_discipline, max_retries: 0}\n  - {type: token_budget, max_tokens: 40}\n"
    )
    work = tmp_path_factory.mktemp("bedrock")
    confdir = work / "confdir"
    shutil.copytree(_ca_template, confdir)
    path = work / "chaos.yaml"
    path.write_text(f"version: 1\nseed: 1\nproxy: {{session_idle_s: 600}}\nrules:\n{rules}{invariants}")
    seen, on_exchange = collect()
    options = {"brownout_metrics_listen": "127.0.0.1:0", "brownout_control_listen": "127.0.0.1:0"}
    with MockUpstream.run_in_thread() as up:
        with running_proxy(
            path, mode=f"reverse:{up.url}", confdir=confdir, extra_options=options, on_exchange=on_exchange
        ) as proxy:
            violations: list[Any] = []
            proxy.addon.pipeline.violation_listeners.append(violations.append)
            yield Rig(up, proxy, seen, violations)
            assert proxy.addon.guard.snapshot() == {}, "contained failures"


def _after(seen: list[Any], model_id: str, n: int = 1) -> list[Any]:
    """The exchanges of one model id, once `n` of them arrived (and a moment for any more to come)."""
    deadline = time.monotonic() + 5
    while len([ex for ex in seen if ex.model == model_id]) < n and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)
    return [ex for ex in seen if ex.model == model_id]


def _of(violations: list[Any], ex: Any, invariant: str) -> int:
    """How many `invariant` violations name this exchange."""
    time.sleep(0.05)  # violations follow the exchange's span
    return sum(1 for v in violations if v.exchange_id == ex.id and v.invariant == invariant)


def _carry_on(c: Any, partial: list[Any]) -> None:
    """The agent's next call, with the streamed text it got in its history as if the answer were whole."""
    text = "".join(e["contentBlockDelta"]["delta"].get("text", "") for e in partial if "contentBlockDelta" in e)
    history = [
        *HI,
        {"role": "assistant", "content": [{"text": text}]},
        {"role": "user", "content": [{"text": "go on"}]},
    ]
    c.converse(modelId=FOLLOW_UP, messages=history)


def _in_session(c: Any, session: str) -> Any:
    """The client's requests carry `x-brownout-session` (added after signing, as any proxy header would be)."""
    c.meta.events.register("before-send.bedrock-runtime.*", lambda request, **_: request.headers.__setitem__(
        "x-brownout-session", session))  # fmt: skip
    return c


def test_converse_stream_and_invoke_pass_through_with_their_telemetry(rig: Rig) -> None:
    c = client(rig.proxy.url)
    answer = converse(c)
    events = converse_stream(c)
    claude = invoke_stream(c)
    whole, stream, invoked = _after(rig.seen, HAIKU, 3)
    assert answer["output"]["message"]["content"][0]["text"] and answer["stopReason"] == "end_turn"
    tool = next(e["contentBlockStart"]["start"]["toolUse"] for e in events if "contentBlockStart" in e)
    assert tool["name"] == "get_weather" and "messageStop" in events[-2] and "metadata" in events[-1]
    assert claude[-1]["type"] == "message_stop"
    for ex in (whole, stream, invoked):
        assert (ex.provider, ex.gen_ai_provider, ex.model, ex.operation) == ("bedrock", "aws.bedrock", HAIKU, "chat")
        assert ex.usage.input_tokens and ex.usage.output_tokens and ex.cost is not None and ex.cost.provider == "aws"
        assert ex.parse_error is None and not ex.faults and ex.retry_count == 0
    assert stream.stream_complete is True and stream.finish_reasons == ["tool_use"]
    (call,) = stream.tool_calls
    assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "Paris"}
    assert invoked.stream_complete is True and invoked.output_text.startswith("Hello!")
    assert whole.stream_complete is None and whole.output_text == answer["output"]["message"]["content"][0]["text"]
    assert _of(rig.violations, stream, "tool_arguments_json") == 0
    metrics = rig.proxy.addon.pipeline.exporters.metrics.registry
    sample = metrics.get_sample_value
    assert (sample("brownout_requests_total", {"provider": "bedrock", "operation": "chat", "tool": "none",
                                                "status_class": "2xx"}) or 0) >= 3  # fmt: skip
    genai = {"gen_ai_operation_name": "chat", "gen_ai_provider_name": "aws.bedrock", "gen_ai_request_model": "other"}
    assert (sample("gen_ai_client_token_usage_count", {**genai, "gen_ai_token_type": "input"}) or 0) >= 3


@pytest.mark.parametrize(
    ("case", "code", "retried"),
    [
        ("throttled", "ThrottlingException", True),
        ("unavailable", "ServiceUnavailableException", True),
        ("internal", "InternalServerException", True),
        ("not-ready", "ModelNotReadyException", True),
        ("timeout", "ModelTimeoutException", False),
        ("model-error", "ModelErrorException", False),
        ("invalid", "ValidationException", False),
    ],
)
def test_http_error_is_botocores_client_error_after_its_retries(rig: Rig, case: str, code: str, retried: bool) -> None:
    upstream_before = len(rig.up.requests_seen)
    with pytest.raises(ClientError) as err:
        converse(client(rig.proxy.url, attempts=2), model(case))
    assert err.value.response["Error"]["Code"] == code
    got = _after(rig.seen, model(case), 2 if retried else 1)
    assert [ex.retry_count for ex in got] == ([0, 1] if retried else [0])
    assert all(ex.faults[0].fault == "http_error" and ex.error_type == code for ex in got)
    assert len(rig.up.requests_seen) == upstream_before  # answered by brownout, never forwarded


@pytest.mark.parametrize(
    ("case", "code", "events_before"),
    [("mid-throttle", "throttlingException", 2), ("mid-stream-error", "modelStreamErrorException", 3),
     ("mid-default", "internalServerException", 1)],
)  # fmt: skip
def test_mid_stream_exception_is_raised_while_iterating_and_not_retried(
    rig: Rig, case: str, code: str, events_before: int
) -> None:
    got: list[Any] = []
    with pytest.raises(EventStreamError) as err:
        for ev in client(rig.proxy.url, attempts=3).converse_stream(modelId=model(case), messages=HI)["stream"]:
            got.append(ev)
    assert err.value.response["Error"]["Code"] == code and len(got) == events_before
    (ex,) = _after(rig.seen, model(case))  # raised outside botocore's retry loop: one attempt only
    assert ex.status == 200 and ex.error_type == code and ex.stream_complete is False


def test_truncate_at_a_frame_boundary_ends_the_iteration_silently(rig: Rig) -> None:
    c = client(rig.proxy.url)
    events = converse_stream(c, model("cut"))
    assert len(events) == 3 and not any("messageStop" in e for e in events)
    (ex,) = _after(rig.seen, model("cut"))
    assert ex.stream_complete is False and ex.stream_events == 3
    _carry_on(c, events)
    follow_up = _after(rig.seen, FOLLOW_UP)[-1]
    (v,) = [v for v in rig.violations if v.invariant == "stream_complete" and v.exchange_id == follow_up.id]
    assert v.details["truncated_exchange_id"] == ex.id


def test_truncate_inside_a_frame_ends_silently_too(rig: Rig) -> None:
    # botocore keeps a partial message until the rest arrives; a body that ends first just ends the iteration.
    events = converse_stream(client(rig.proxy.url), model("cut-in-frame"))
    (ex,) = _after(rig.seen, model("cut-in-frame"))
    assert 0 < len(events) < 3 and not any("messageStop" in e for e in events)
    assert ex.stream_complete is False


def test_truncate_with_a_reset_is_urllib3s_protocol_error_mid_iteration(rig: Rig) -> None:
    got: list[Any] = []
    with pytest.raises(ProtocolError):  # botocore does not wrap errors of an event stream it is reading
        for ev in client(rig.proxy.url).converse_stream(modelId=model("cut-reset"), messages=HI)["stream"]:
            got.append(ev)
    assert len(got) == 3


def test_malformed_tool_arguments_in_a_converse_stream(rig: Rig) -> None:
    events = converse_stream(client(rig.proxy.url), model("bad-args"))
    text = "".join(e["contentBlockDelta"]["delta"]["toolUse"]["input"] for e in events
                   if "toolUse" in e.get("contentBlockDelta", {}).get("delta", {}))  # fmt: skip
    with pytest.raises(ValueError):
        json.loads(text)
    (ex,) = _after(rig.seen, model("bad-args"))
    assert ex.tool_calls[0].arguments == text and ex.faults[0].fault == "malformed_json"
    assert _of(rig.violations, ex, "tool_arguments_json") == 1


def test_malformed_tool_arguments_in_a_whole_answer_break_the_schema(rig: Rig) -> None:
    answer = converse(client(rig.proxy.url), model("bad-args"), tools=True)
    use = next(b["toolUse"] for b in answer["output"]["message"]["content"] if "toolUse" in b)
    assert use["input"] == {}  # the schema's required key is gone; `input` is an object on the wire, so it stays one
    ex = _after(rig.seen, model("bad-args"), 2)[-1]
    assert _of(rig.violations, ex, "tool_arguments_json") == 1


def test_a_corrupted_event_reaches_the_caller_empty(rig: Rig) -> None:
    # botocore parses a payload that is no JSON as {"message": <text>}, which fits no member of the event.
    events = converse_stream(client(rig.proxy.url), model("bad-event"), tools=False)
    assert events[1] == {"contentBlockDelta": {}} and "messageStop" in events[-2]


def test_schema_drift_renames_what_the_agent_reads(rig: Rig) -> None:
    answer = converse(client(rig.proxy.url), model("drift"))
    assert "output" not in answer and answer["stopReason"] == "end_turn"  # botocore drops the unknown output_v2


def test_empty(rig: Rig) -> None:
    c = client(rig.proxy.url)
    whole = converse(c, model("empty"))
    events = converse_stream(c, model("empty"))
    claude = invoke_stream(c, model("empty"))
    assert whole["output"]["message"]["content"] == [] and whole["stopReason"] == "end_turn"
    assert [next(iter(e)) for e in events] == ["messageStart", "messageStop", "metadata"]
    assert [e["type"] for e in claude] == ["message_start", "message_delta", "message_stop"]


def test_inject_into_the_completion(rig: Rig) -> None:
    c = client(rig.proxy.url)
    whole = converse(c, model("inject"))
    events = converse_stream(c, model("inject"), tools=False)
    claude = invoke_stream(c, model("inject"))
    assert "INJECTED-MARKER" in whole["output"]["message"]["content"][0]["text"]
    assert any("INJECTED-MARKER" in e.get("contentBlockDelta", {}).get("delta", {}).get("text", "") for e in events)
    assert any("INJECTED-MARKER" in e.get("delta", {}).get("text", "") for e in claude)


def test_latency_stall_per_frame_and_throttle(rig: Rig) -> None:
    c = client(rig.proxy.url)
    t0 = time.perf_counter()
    converse(c, model("latency"))
    assert time.perf_counter() - t0 >= 0.29
    times = []
    t0 = time.perf_counter()
    for _ in c.converse_stream(modelId=model("stall"), messages=HI)["stream"]:
        times.append(time.perf_counter() - t0)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert max(gaps) >= 0.38 and gaps.index(max(gaps)) == 1, gaps  # the pause falls after the 2nd message
    t0 = time.perf_counter()
    events = converse_stream(c, model("throttle"))
    (ex,) = _after(rig.seen, model("throttle"))
    assert "metadata" in events[-1] and time.perf_counter() - t0 >= 0.8 * ex.response_bytes / 3000


def test_reset_and_hang(rig: Rig) -> None:
    with pytest.raises(ConnectionClosedError):
        converse(client(rig.proxy.url), model("reset"))
    with pytest.raises(ProtocolError):
        converse_stream(client(rig.proxy.url), model("reset-mid"))
    with pytest.raises(ReadTimeoutError):
        converse(client(rig.proxy.url, read_timeout_s=0.5), model("hang"))


def test_mutate_never_alters_a_signed_request(rig: Rig) -> None:
    client(rig.proxy.url).invoke_model(modelId=model("mutate"), body=claude_body())
    (ex,) = _after(rig.seen, model("mutate"))
    assert not ex.faults and [f.fault for f in ex.faults_skipped] == ["mutate"]
    assert "signed" in ex.faults_skipped[0].params["skipped"]
    assert rig.up.requests_seen[-1].body == claude_body().encode()


def test_budgets_and_retry_discipline_read_bedrock_usage_and_attempts(rig: Rig) -> None:
    c = _in_session(client(rig.proxy.url, attempts=3), "bedrock-budget")
    converse(c, model("budget"))
    converse(c, model("budget"))  # two calls of about 20 tokens each: over the session's 40
    with pytest.raises(ClientError):
        converse(c, model("throttled"))  # three attempts: two retries, over max_retries 0
    time.sleep(0.2)
    mine = {v.invariant for v in rig.violations if v.session_id == "bedrock-budget"}
    assert {"token_budget", "retry_discipline"} <= mine, mine
