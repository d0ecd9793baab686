"""A small tool-using agent built on the official SDKs, written to survive faults and report them.

It reads the proxy from the environment (HTTP_PROXY/HTTPS_PROXY/SSL_CERT_FILE), so it runs
unchanged under `brownout exec`. Run: `python -m brownout.proxy.demo.agent --upstream URL [--json]`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from typing import Any, cast

import anthropic
import httpx
import openai

from brownout.proxy.demo.agent_steps import AgentSummary, StepRecorder

__all__ = ["AgentSummary", "main", "run_agent"]

log = logging.getLogger(__name__)

WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
QUESTION = "What's the weather in Paris right now?"


class _Agent:
    """One agent run: SDK clients sharing one step recorder."""

    def __init__(
        self, upstream: str, tools_url: str, model: str, timeout_s: float, max_retries: int, headers: dict[str, str]
    ) -> None:
        self.rec = StepRecorder()
        hooks = {"request": [self.rec.on_http_request]}
        # The SDK's own client classes keep its defaults and still read the proxy env.
        self.oai = openai.OpenAI(
            base_url=upstream.rstrip("/") + "/v1",
            api_key=os.environ.get("OPENAI_API_KEY", "sk-demo"),
            timeout=timeout_s,
            max_retries=max_retries,
            default_headers=headers,
            http_client=openai.DefaultHttpxClient(event_hooks=hooks),
        )
        self.claude = anthropic.Anthropic(
            base_url=upstream.rstrip("/"),
            api_key=os.environ.get("ANTHROPIC_API_KEY", "sk-ant-demo"),
            timeout=timeout_s,
            max_retries=max_retries,
            default_headers=headers,
            http_client=anthropic.DefaultHttpxClient(event_hooks=hooks),
        )
        self.http = httpx.Client(base_url=tools_url.rstrip("/"), timeout=timeout_s, event_hooks=hooks)
        self.model = model

    def close(self) -> None:
        self.oai.close()
        self.claude.close()
        self.http.close()

    def call_tool(self, name: str, arguments: str) -> str:
        """Run a tool call against the JSON tool API; failures go back to the model as text."""
        with self.rec.step("tool", f"tool {name}") as step:
            args = json.loads(arguments or "{}")  # malformed arguments are a recorded error
            r = self.http.get("/tools/weather", params={"city": args.get("city", "Paris")})
            step.status = r.status_code
            r.raise_for_status()
            return r.text
        return json.dumps({"error": step.error})

    def openai_turn(self, turn: int, stream_first: bool) -> str | None:
        """Ask, get a tool call, run it, send the result back, return the final text."""
        messages: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
        call: dict[str, str] | None = None
        with self.rec.step("openai.chat", f"turn {turn}: ask", stream=stream_first) as step:
            if stream_first:
                call = self._streamed_tool_call(messages, step)
            else:
                r = self.oai.chat.completions.create(
                    model=self.model, messages=cast(Any, messages), tools=cast(Any, [WEATHER_TOOL])
                )
                step.status = 200
                tcs = r.choices[0].message.tool_calls or []
                if tcs:
                    tc = tcs[0]
                    call = {"id": tc.id, "name": tc.function.name, "arguments": tc.function.arguments}  # type: ignore[union-attr]
            if call is None:
                raise RuntimeError("the model answered without the expected tool call")
        if call is None:
            return None
        result = self.call_tool(call["name"], call["arguments"])
        messages += [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": call["name"], "arguments": call["arguments"]},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call["id"], "content": result},
        ]
        with self.rec.step("openai.chat", f"turn {turn}: answer", stream=not stream_first) as step:
            if stream_first:
                r = self.oai.chat.completions.create(
                    model=self.model, messages=cast(Any, messages), tools=cast(Any, [WEATHER_TOOL])
                )
                step.status = 200
                return step.answer(r.choices[0].message.content or "")
            text, finish = "", None
            stream = self.oai.chat.completions.create(
                model=self.model,
                messages=cast(Any, messages),
                tools=cast(Any, [WEATHER_TOOL]),
                stream=True,
                stream_options={"include_usage": True},
            )
            step.status = 200
            for chunk in stream:
                step.mark_first_chunk()
                for choice in chunk.choices:
                    text += choice.delta.content or ""
                    finish = choice.finish_reason or finish
            step.answer(text)
            if finish is None:  # a cut stream without [DONE] raises nothing in the SDK
                raise RuntimeError("stream ended without finish_reason (truncated?)")
            return text
        return None

    def _streamed_tool_call(self, messages: list[dict[str, Any]], step: Any) -> dict[str, str] | None:
        stream = self.oai.chat.completions.create(
            model=self.model,
            messages=cast(Any, messages),
            tools=cast(Any, [WEATHER_TOOL]),
            stream=True,
        )
        step.status = 200
        call: dict[str, str] = {"id": "", "name": "", "arguments": ""}
        finish = None
        for chunk in stream:
            step.mark_first_chunk()
            for choice in chunk.choices:
                finish = choice.finish_reason or finish
                for tc in choice.delta.tool_calls or []:
                    call["id"] = tc.id or call["id"]
                    if tc.function:
                        call["name"] = tc.function.name or call["name"]
                        call["arguments"] += tc.function.arguments or ""
        if finish is None:
            raise RuntimeError("stream ended without finish_reason (truncated?)")
        return call if call["name"] else None

    def anthropic_summary(self, answer: str | None) -> str | None:
        with self.rec.step("anthropic.messages", "summarise", stream=True) as step:
            prompt = f"Summarise for a traveller: {answer or 'no weather data'}"
            with self.claude.messages.stream(
                model="claude-haiku-demo", max_tokens=200, messages=[{"role": "user", "content": prompt}]
            ) as s:
                step.status = 200
                for _ in s.text_stream:
                    step.mark_first_chunk()
                return step.answer(s.get_final_text())
        return None


def run_agent(
    upstream: str,
    *,
    tools_url: str | None = None,
    model: str = "gpt-4o-mini",
    timeout_s: float = 10.0,
    max_retries: int = 2,
    llm_headers: dict[str, str] | None = None,
) -> AgentSummary:
    """Run the demo agent against `upstream` (LLM APIs) and `tools_url` (defaults to upstream).

    `llm_headers` are added to every SDK request (e.g. the mock's `x-mock-*` knobs).
    """
    agent = _Agent(upstream, tools_url or upstream, model, timeout_s, max_retries, dict(llm_headers or {}))
    started = time.perf_counter()
    try:
        first = agent.openai_turn(1, stream_first=False)
        second = agent.openai_turn(2, stream_first=True)
        summary = agent.anthropic_summary(second or first)
    finally:
        agent.close()
    return agent.rec.summary(
        final_answer=second or first, summary_text=summary, elapsed_s=time.perf_counter() - started
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m brownout.proxy.demo.agent", description=__doc__)
    parser.add_argument(
        "--upstream",
        default=os.environ.get("BROWNOUT_DEMO_UPSTREAM", "http://127.0.0.1:8000"),
        help="base URL of the LLM APIs (the mock upstream, or brownout in reverse mode)",
    )
    parser.add_argument("--tools-url", default=None, help="base URL of the JSON tool API (default: --upstream)")
    parser.add_argument("--timeout", type=float, default=10.0)
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = parser.parse_args(argv)
    result = run_agent(args.upstream, tools_url=args.tools_url, timeout_s=args.timeout)
    if args.json:
        print(json.dumps(result.to_dict()))
    else:
        for s in result.steps:
            print(
                f"{s.name:<22} {s.api:<20} {'ok' if s.ok else 'FAILED'} {s.duration_ms:7.1f} ms "
                f"attempts={s.attempts} {s.error or ''}"
            )
        print(f"final answer: {result.final_answer}")
    return 0 if result.errors == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
