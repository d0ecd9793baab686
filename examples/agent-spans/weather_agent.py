"""An instrumented agent: the OpenAI Agents SDK with a function tool, its tracing turned into GenAI spans
(invoke_agent, chat, execute_tool) by opentelemetry-instrumentation-openai-agents-v2 and exported over
OTLP/HTTP wherever OTEL_EXPORTER_OTLP_* says: what `brownout exec` sets when `agent_spans.receiver` is on.
Every request goes through HTTP(S)_PROXY. The worked example of docs/telemetry.md#agent-spans; from the
repository's root (the agent starts brownout's mock upstream itself unless DEMO_UPSTREAM names one):

    brownout exec -c examples/chaos/agent-spans.yaml -- python examples/agent-spans/weather_agent.py

    pip install openai-agents opentelemetry-instrumentation-openai-agents-v2 opentelemetry-exporter-otlp

The weather tool papers over a failing API: it tells the model it is sunny, never raises. With the
argument `raw-client` the tool also asks the model through a plain openai client, which no
instrumentation wraps. Prints ANSWER: ... and exits 0.
"""

from __future__ import annotations

import os
import sys

import httpx
import openai
from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.openai_agents import OpenAIAgentsInstrumentor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

UPSTREAM = os.environ.get("DEMO_UPSTREAM", "")
MODE = sys.argv[1] if len(sys.argv) > 1 else "clean"


@function_tool
async def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: The city to look up.
    """
    async with httpx.AsyncClient(timeout=10.0) as http:
        r = await http.get(f"{UPSTREAM}/tools/weather", params={"city": city})
    if MODE == "raw-client":
        raw = openai.AsyncOpenAI(base_url=f"{UPSTREAM}/v1", api_key="sk-demo", max_retries=0)
        await raw.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": r.text}])
    return r.text if r.status_code == 200 else "sunny, 21 C"  # papers over a failed call


def main() -> int:
    global UPSTREAM
    if UPSTREAM:
        return run()
    from brownout.proxy.demo.upstream import MockUpstream

    with MockUpstream.run_in_thread() as upstream:  # the mock LLM and weather API, reached through the proxy
        UPSTREAM = upstream.url
        return run()


def run() -> int:
    provider = TracerProvider(resource=Resource.create({"service.name": "weather-agent"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(), schedule_delay_millis=200))
    OpenAIAgentsInstrumentor().instrument(tracer_provider=provider)
    client = openai.AsyncOpenAI(base_url=f"{UPSTREAM}/v1", api_key="sk-demo", max_retries=0, timeout=10.0)
    agent = Agent(
        name="weather",
        instructions="Answer weather questions with the get_weather tool.",
        model=OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client),
        tools=[get_weather],
    )
    result = Runner.run_sync(agent, "What is the weather in Oslo?", max_turns=4)
    print(f"ANSWER: {result.final_output}")
    provider.shutdown()  # flushes the last spans
    return 0


if __name__ == "__main__":
    sys.exit(main())
