"""A small tool-using agent on the official openai SDK, for the brownout experiment example.

Arguments: CITY. Talks to the OpenAI-compatible demo upstream at $DEMO_UPSTREAM. The experiment starts
that upstream and sets the variable, so from the repository's root, under chaos:
    brownout experiment run examples/experiment/exp.yaml --out brownout-report
or once, by hand, against the experiment's upstream without the proxy:
    brownout experiment services examples/experiment/exp.yaml -- python examples/experiment/agent.py Paris
It streams completions, calls the weather tool API, and prints `ANSWER: ...` on success.
It recovers the way production agents do: the SDK retries 429/5xx/resets, and the agent itself
re-asks once after a broken stream or tool arguments that do not parse.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import httpx
import openai

UPSTREAM = os.environ.get("DEMO_UPSTREAM", "")
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]
MAX_TURNS = 4
REPAIRS = 1


def complete(client: openai.OpenAI, messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, str]], str | None]:
    """One streamed completion: (text, tool calls, finish_reason); finish_reason None means the stream broke."""
    text, calls, finish = [], {}, None
    stream = client.chat.completions.create(
        model="gpt-4o-mini", messages=messages, tools=TOOLS, stream=True, stream_options={"include_usage": True}
    )
    for chunk in stream:
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        delta = choice.delta
        if delta.content:
            text.append(delta.content)
        for tc in delta.tool_calls or []:
            slot = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
            slot["id"] = tc.id or slot["id"]
            if tc.function is not None:
                slot["name"] += tc.function.name or ""
                slot["arguments"] += tc.function.arguments or ""
        finish = choice.finish_reason or finish
    return "".join(text), [calls[i] for i in sorted(calls)], finish


def run(city: str) -> int:
    client = openai.OpenAI(base_url=f"{UPSTREAM}/v1", api_key="sk-demo", max_retries=2, timeout=10.0)
    tools_http = httpx.Client(timeout=10.0)  # trusts HTTP(S)_PROXY and SSL_CERT_FILE like the SDK
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"What is the weather in {city}?"}]
    repairs = REPAIRS
    for _ in range(MAX_TURNS):
        text, calls, finish = complete(client, messages)
        if finish is None:
            if repairs:
                repairs -= 1
                continue  # a truncated stream: ask again
            print("error: the stream ended without a finish_reason", file=sys.stderr)
            return 3
        if not calls:
            if not text.strip():
                print("error: empty completion", file=sys.stderr)
                return 4
            print(f"ANSWER: {text.strip()}")
            return 0
        messages.append(
            {
                "role": "assistant",
                "content": text or None,
                "tool_calls": [
                    {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                    for c in calls
                ],
            }
        )
        for c in calls:
            try:
                args = json.loads(c["arguments"] or "{}")
            except json.JSONDecodeError:
                if not repairs:
                    print("error: tool arguments are not JSON", file=sys.stderr)
                    return 5
                repairs -= 1
                args = {"city": city}  # repair from the task itself rather than trust broken arguments
            try:
                r = tools_http.get(f"{UPSTREAM}/tools/weather", params={"city": args.get("city", city)})
                content = r.text if r.status_code == 200 else json.dumps({"error": f"tool returned {r.status_code}"})
            except httpx.HTTPError as e:
                content = json.dumps({"error": f"tool unavailable: {type(e).__name__}"})
            messages.append({"role": "tool", "tool_call_id": c["id"], "content": content})
    print("error: no answer within the turn budget", file=sys.stderr)
    return 6


def main() -> int:
    city = " ".join(sys.argv[1:]) or os.environ.get("BROWNOUT_TASK") or "Paris"
    if not UPSTREAM:
        print(
            "error: DEMO_UPSTREAM is not set; run me as "
            f"`brownout experiment services examples/experiment/exp.yaml -- python {sys.argv[0]} {city}`",
            file=sys.stderr,
        )
        return 2
    try:
        return run(city)
    except openai.APIError as e:
        print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
