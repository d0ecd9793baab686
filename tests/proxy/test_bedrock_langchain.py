"""An agent on LangChain's ChatBedrockConverse (langchain-aws, boto3 inside) through the real proxy: its
tool loop completes, brownout reads both turns, and a mid-stream exception reaches the agent as botocore raises it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import EventStreamError
from langchain_aws import ChatBedrockConverse
from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from tests.proxy.bedrock_support import CREDENTIALS, HAIKU, model
from tests.proxy.test_passthrough import wait_for

CONFIG = """
version: 1
rules:
  - name: throttled-mid-stream
    match: {provider: bedrock, model: "*case-mid-throttle-*"}
    fault: {type: http_error, status: 429, mid_stream: true, after_events: 2}
"""


@tool
def get_weather(city: str) -> str:
    """Current weather in a city."""
    return json.dumps({"city": city, "temp_c": 18, "conditions": "cloudy"})


def _llm(proxy: Any, model_id: str) -> Any:
    # disable_streaming=False: langchain-aws streams only the model ids it knows; the test ids are made up.
    return ChatBedrockConverse(model=model_id, region_name="us-east-1", endpoint_url=proxy.url,
                               aws_access_key_id=CREDENTIALS.access_key, aws_secret_access_key=CREDENTIALS.secret_key,
                               disable_streaming=False).bind_tools([get_weather])  # fmt: skip


def _streamed(llm: Any, messages: list[BaseMessage]) -> Any:
    chunks = iter(llm.stream(messages))
    message = next(chunks)
    for chunk in chunks:
        message = message + chunk
    return message


@pytest.fixture(autouse=True)
def _no_langsmith(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2", "LANGSMITH_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def test_a_tool_loop_through_brownout(upstream: Any, brownout_proxy: Any) -> None:
    seen: list[Any] = []
    proxy = brownout_proxy(CONFIG, mode="reverse", upstream=upstream, on_exchange=seen.append)
    llm = _llm(proxy, HAIKU)
    messages: list[BaseMessage] = [HumanMessage("What is the weather in Paris?")]
    ai = _streamed(llm, messages)
    (call,) = ai.tool_calls
    assert call["name"] == "get_weather" and call["args"] == {"city": "Paris"}
    messages += [ai, ToolMessage(get_weather.invoke(call["args"]), tool_call_id=call["id"])]
    answer = llm.invoke(messages)
    assert "18°C" in answer.content and "Paris" in answer.content
    wait_for(seen, 2)
    asked, answered = seen
    assert (asked.provider, asked.stream, asked.stream_complete, asked.tool_calls[0].name) == (
        "bedrock", True, True, "get_weather")  # fmt: skip
    (result,) = answered.tool_results
    assert (result.name, result.call_id) == ("get_weather", call["id"]) and "temp_c" in result.content
    assert answered.output_text == answer.content and answered.usage.output_tokens


def test_a_mid_stream_throttle_reaches_the_agent(upstream: Any, brownout_proxy: Any) -> None:
    seen: list[Any] = []
    proxy = brownout_proxy(CONFIG, mode="reverse", upstream=upstream, on_exchange=seen.append)
    with pytest.raises(EventStreamError) as err:
        _streamed(_llm(proxy, model("mid-throttle")), [HumanMessage("What is the weather in Paris?")])
    assert err.value.response["Error"]["Code"] == "throttlingException"
    wait_for(seen, 1)  # the agent stops reading at the exception; brownout ends the exchange just after
    (ex,) = seen
    assert ex.error_type == "throttlingException" and ex.stream_complete is False
