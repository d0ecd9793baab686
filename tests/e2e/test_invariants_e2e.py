"""Invariants on single calls (no_loop, retry_discipline, no_pii, tool_arguments_json), each
positive and negative, driven through the real proxy by the official SDKs; the scenario and its checks are in tests/e2e/invariant_scenarios.py.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.e2e.invariant_scenarios import (  # noqa: F401  (fixtures)
    MODEL,
    WEATHER,
    Brownout,
    assistant_calls,
    bo,
    client,
    user,
    weather,
)

# --- no_loop -----------------------------------------------------------------------------------------


def test_no_loop_flags_an_agent_repeating_the_same_tool_call(bo: Brownout, client: Any) -> None:
    session = "loop-stuck"
    oai = client(session)
    with bo.tools(session) as tools:
        for _ in range(4):  # the agent never feeds the result back, so the model keeps asking
            msg = oai.chat.completions.create(model=MODEL, messages=[user()], tools=[WEATHER]).choices[0].message
            weather(tools, bo, msg.tool_calls[0].function.arguments)
    found = bo.violations.wait(session, "no_loop", n=2)  # the model's loop and the executed one
    (model_loop,) = [v for v in found if v.details["source"] == "model"]
    bo.check(model_loop, session=session, invariant="no_loop", severity="warning")
    assert model_loop.details["tool"] == "get_weather" and model_loop.details["count"] == 4
    assert model_loop.tool == "get_weather" and model_loop.model == MODEL and model_loop.provider == "openai"
    executed = [v for v in found if v.details["source"] == "executed"]
    assert len(executed) == 1 and executed[0].tool == "weather"


def test_no_loop_passes_an_agent_that_uses_the_results(bo: Brownout, client: Any) -> None:
    session = "loop-ok"
    oai = client(session)
    with bo.tools(session) as tools:
        for city in ("Paris", "Lyon"):
            history: list[Any] = [user(f"What's the weather in {city}?")]
            msg = oai.chat.completions.create(model=MODEL, messages=history, tools=[WEATHER]).choices[0].message
            history += [
                assistant_calls(msg),
                {
                    "role": "tool",
                    "tool_call_id": msg.tool_calls[0].id,
                    "content": weather(tools, bo, msg.tool_calls[0].function.arguments),
                },
            ]
            answer = oai.chat.completions.create(model=MODEL, messages=history, tools=[WEATHER]).choices[0].message
            assert "18" in answer.content
        # Looking up several cities through the tool API is work, not a loop.
        for city in ("Nice", "Lille", "Brest", "Metz"):
            tools.get(f"{bo.upstream.url}/tools/weather", params={"city": city}).raise_for_status()
    bo.none(session, "no_loop", exchanges=10)


# --- retry_discipline ----------------------------------------------------------------------------------


def test_retry_discipline_flags_a_storm_that_ignores_retry_after(bo: Brownout) -> None:
    session = "retry-storm"
    body = {"model": MODEL, "messages": [user()]}
    with bo.tools(session) as http:  # a hand-rolled retry loop: no wait, retry-after ignored
        statuses = [http.post(f"{bo.upstream.url}/v1/chat/completions", json=body).status_code for _ in range(6)]
    assert statuses == [429] * 6
    found = bo.violations.wait(session, "retry_discipline", n=3)
    checks = {v.details["check"]: v for v in found}
    assert set(checks) == {"retry_after", "max_retries", "storm"}
    for v in found:
        bo.check(
            v, session=session, invariant="retry_discipline", severity="error", rule="storm-429", fault="http_error"
        )
    assert "retry-after 1 s" in checks["retry_after"].message
    assert checks["max_retries"].details["retries"] == 4
    assert len(bo.violations.of(session, "retry_discipline")) == 3  # each check once per chain


def test_retry_discipline_passes_the_sdk_honouring_retry_after(bo: Brownout, client: Any) -> None:
    session = "retry-polite"
    oai = client(session, max_retries=2)  # openai-python waits for retry-after (1 s here) and retries
    started = time.monotonic()
    reply = oai.chat.completions.create(model=MODEL, messages=[user()])
    assert reply.choices[0].message.content and time.monotonic() - started >= 0.9
    bo.none(session, "retry_discipline", exchanges=2)
    first, second = sorted(bo.spans.of(session), key=lambda s: s.start_time)
    assert first.attributes["http.response.status_code"] == 429
    assert first.attributes["brownout.fault.rules"] == ("polite-429",)
    assert second.attributes["brownout.client.retry_count"] == 1


# --- no_pii --------------------------------------------------------------------------------------------


def test_no_pii_flags_an_email_and_a_card_in_the_prompt(bo: Brownout, client: Any) -> None:
    session = "pii-leak"
    prompt = "Book the Paris trip for jane.doe@acme-corp.com and charge card 4111 1111 1111 1111."
    client(session).chat.completions.create(model=MODEL, messages=[user(prompt)])
    found = {v.details["kind"]: v for v in bo.violations.wait(session, "no_pii", n=2)}
    assert set(found) == {"email", "card"}
    for kind, v in found.items():
        bo.check(v, session=session, invariant="no_pii", severity="critical")
        assert v.details["direction"] == "request" and v.details["count"] == 1
        assert v.message.startswith(f"{kind} in request body at offset ")
    for v in found.values():  # where, never what
        assert "jane.doe" not in v.message + json.dumps(v.to_dict())
        assert "4111 1111" not in v.message + json.dumps(v.to_dict())  # the number, not 4111 in a random id


def test_no_pii_passes_a_clean_prompt(bo: Brownout, client: Any) -> None:
    session = "pii-clean"
    client(session).chat.completions.create(model=MODEL, messages=[user("Book the Paris trip for next Tuesday.")])
    bo.none(session, "no_pii", exchanges=1)


# --- tool_arguments_json -------------------------------------------------------------------------------


def test_tool_arguments_json_flags_arguments_that_no_longer_parse(bo: Brownout, client: Any) -> None:
    session = "args-malformed"
    chunks = client(session).chat.completions.create(model=MODEL, messages=[user()], tools=[WEATHER], stream=True)
    arguments = "".join(
        tc.function.arguments or "" for c in chunks for ch in c.choices for tc in (ch.delta.tool_calls or [])
    )
    with pytest.raises(json.JSONDecodeError):
        json.loads(arguments)  # what the agent got
    (v,) = bo.violations.wait(session, "tool_arguments_json")
    bo.check(
        v, session=session, invariant="tool_arguments_json", severity="error", rule="bad-args", fault="malformed_json"
    )
    assert "'get_weather' (tool_calls[0]): arguments are not valid JSON" in v.message
    assert v.tool == "get_weather" and v.details["call_id"]


def test_tool_arguments_json_flags_arguments_against_the_declared_schema(bo: Brownout, client: Any) -> None:
    session = "args-schema"
    strict = json.loads(json.dumps(WEATHER))
    strict["function"]["parameters"]["properties"]["unit"] = {"enum": ["celsius", "fahrenheit"]}
    strict["function"]["parameters"]["required"] = ["city", "unit"]
    msg = client(session).chat.completions.create(model=MODEL, messages=[user()], tools=[strict]).choices[0].message
    assert json.loads(msg.tool_calls[0].function.arguments) == {"city": "Paris"}  # valid JSON, no `unit`
    (v,) = bo.violations.wait(session, "tool_arguments_json")
    bo.check(v, session=session, invariant="tool_arguments_json", severity="error")
    assert "does not match the declared schema" in v.message or "do not match the declared schema" in v.message
    assert "'unit' is a required property" in v.message


def test_tool_arguments_json_passes_valid_arguments(bo: Brownout, client: Any) -> None:
    session = "args-ok"
    oai = client(session)
    oai.chat.completions.create(model=MODEL, messages=[user()], tools=[WEATHER])
    list(oai.chat.completions.create(model=MODEL, messages=[user()], tools=[WEATHER], stream=True))
    bo.none(session, "tool_arguments_json", exchanges=2)
