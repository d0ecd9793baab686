"""A small tool-using agent on the OpenAI Agents SDK (`openai-agents`), for the brownout experiment example.

Arguments: CITY. Same contract as agent.py: talks to the OpenAI-compatible demo upstream at
$DEMO_UPSTREAM, prints `ANSWER: ...` and exits 0 on success, prints `error: ...` to stderr and exits
non-zero otherwise. The experiment starts that upstream and sets the variable; from the repository's root:
    brownout experiment run examples/experiment/exp-framework.yaml --out brownout-report-framework
    brownout experiment services examples/experiment/exp-framework.yaml -- python examples/experiment/framework_agent.py Tokyo

The agent is an `agents.Agent` with one function tool, `get_weather`, that calls the demo weather
tool API over httpx; `Runner.run_sync` drives the loop. The model is `OpenAIChatCompletionsModel`
over an `AsyncOpenAI` client pointed at the upstream's /v1 (chat completions; the demo upstream also
serves /v1/responses, but chat completions keeps the example small). Tracing export is disabled:
there is no OpenAI platform to export to.

Both the openai client and the tool's httpx client trust HTTP(S)_PROXY and SSL_CERT_FILE from the
environment, so `brownout experiment run` routes every exchange through its proxy, attributed to the
run, without any change here. Recovery is the framework's own: the openai client retries 429/5xx and
connection resets, and the Agents SDK hands tool failures (and tool arguments that do not parse) back
to the model as a tool result instead of crashing the run.
"""

from __future__ import annotations

import json
import os
import sys

import httpx
import openai
from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
from agents.exceptions import AgentsException

UPSTREAM = os.environ.get("DEMO_UPSTREAM", "")
MAX_TURNS = 4


@function_tool
async def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: The city to look up.
    """
    try:
        async with httpx.AsyncClient(timeout=10.0) as http:  # trusts HTTP(S)_PROXY and SSL_CERT_FILE
            r = await http.get(f"{UPSTREAM}/tools/weather", params={"city": city})
    except httpx.HTTPError as e:
        return json.dumps({"error": f"tool unavailable: {type(e).__name__}"})
    return r.text if r.status_code == 200 else json.dumps({"error": f"tool returned {r.status_code}"})


def build_agent() -> Agent:
    client = openai.AsyncOpenAI(base_url=f"{UPSTREAM}/v1", api_key="sk-demo", max_retries=2, timeout=10.0)
    return Agent(
        name="weather",
        instructions="Answer weather questions. Use the get_weather tool, then answer in one sentence.",
        model=OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client),
        tools=[get_weather],
    )


def run(city: str) -> int:
    result = Runner.run_sync(build_agent(), f"What is the weather in {city}?", max_turns=MAX_TURNS)
    text = str(result.final_output or "").strip()
    if not text:
        print("error: empty final output", file=sys.stderr)
        return 4
    print(f"ANSWER: {' '.join(text.split())}")
    return 0


def main() -> int:
    set_tracing_disabled(True)
    city = " ".join(sys.argv[1:]) or os.environ.get("BROWNOUT_TASK") or "Paris"
    if not UPSTREAM:
        print(
            "error: DEMO_UPSTREAM is not set; run me as "
            f"`brownout experiment services examples/experiment/exp-framework.yaml -- python {sys.argv[0]} {city}`",
            file=sys.stderr,
        )
        return 2
    try:
        return run(city)
    except openai.APIError as e:
        print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    except AgentsException as e:  # MaxTurnsExceeded, ModelBehaviorError, ...
        print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
