"""LLM-shaped load: the traffic brownout exists for, measured side by side with plain mitmdump.

`GET /ping` measures the proxy's floor but none of what an agent's LLM calls make brownout do: parse
a request with messages and tool declarations, parse the answer (a whole body, or a stream event by
event), reassemble tool-call arguments, fill the span's GenAI attributes, run the invariants (tool
arguments against their schema, PII scans of both directions, budgets). Each case here is one such
call, repeated by the load generator against the mock upstream (which answers it as the provider
would, with a tool call), through each path:

- `openai-tools`: OpenAI chat completions, non-streamed, answered with a tool call;
- `openai-tools-stream`: the same streamed (SSE, the tool call's arguments in fragments, usage);
- `anthropic-tools-stream`: Anthropic messages, streamed (`tool_use`, `input_json_delta` fragments).

Each request carries a system prompt, a conversation with an earlier tool call and its result, and
three tool declarations with JSON schemas (about 3 KB). Targets: brownout with everything on at
least 0.90x plain mitmdump's throughput at 1 and 8 connections, and its p99 at 1 connection at most
2 ms over mitmdump's, per case.

Plain mitmdump buffers each answer and writes it once; brownout streams an event stream through as
it comes (an agent reads each token as it is generated). With `reference` paths (`bench/run.py
--llm-reference`), the cases also go through `mitmdump-stream` (the same engine, unbuffered) and
`brownout` with no rules, and the report splits the gap: what streaming costs mitmproxy itself, and
what brownout adds on top of it, in throughput and in proxy CPU per request (informational rows).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.load import LoadResult, Request, median_round, run_load
from bench.procstat import tree_cpu_seconds
from bench.report import P99_ADDED_MS, RPS_FLOOR, info, target

__all__ = [
    "CASES",
    "LLM_PATHS",
    "PATHS",
    "REFERENCE_PATHS",
    "LlmCase",
    "answer_ok",
    "llm_targets",
    "measure_llm",
    "render_llm_rows",
]

# The all-on targets are against plain mitmdump: all-on with its analysis on the proxy's loop, and in a
# second process (bench/all-on-process.yaml).
BROWNOUTS = ("brownout-all-on", "brownout-all-on-process")
BROWNOUT = BROWNOUTS[0]
LLM_PATHS = ("direct", "mitmdump", *BROWNOUTS)
REFERENCE_PATHS = ("mitmdump-stream", "brownout")  # where the gap comes from (informational)
PATHS = (*LLM_PATHS[:2], *REFERENCE_PATHS, *BROWNOUTS)  # every path of bench/run.py, in its order

_SYSTEM = (
    "You are a travel assistant for a company's employees. Answer briefly and cite the tool you used. "
    "Use get_weather for any question about current conditions, search_docs for company travel policy, "
    "and create_ticket only when the user asks you to book or change something. Never invent a "
    "booking reference. If a tool fails, say so and suggest what the user can do instead. "
    "Dates are in ISO format; temperatures in the unit the user asks for, Celsius by default."
)

_PARAMS: dict[str, dict[str, Any]] = {
    "get_weather": {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City name, e.g. Paris"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city"],
        "additionalProperties": False,
    },
    "search_docs": {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to look for in the travel policy"},
            "limit": {"type": "integer", "minimum": 1, "maximum": 10},
        },
        "required": ["query"],
        "additionalProperties": False,
    },
    "create_ticket": {
        "type": "object",
        "properties": {
            "summary": {"type": "string"},
            "priority": {"type": "string", "enum": ["low", "normal", "high"]},
            "due": {"type": "string", "description": "ISO date"},
        },
        "required": ["summary", "priority"],
        "additionalProperties": False,
    },
}
_DESCRIPTIONS = {
    "get_weather": "Current weather for a city.",
    "search_docs": "Search the company travel policy.",
    "create_ticket": "Open a ticket with the travel desk.",
}
_WEATHER = {"city": "Paris", "temperature_c": 18, "conditions": "light rain", "wind_kmh": 14, "humidity": 0.81}
_ASKED = "What's the weather in Paris today? I fly there tomorrow morning."
_ANSWERED = "It is 18 °C with light rain in Paris (get_weather). Take an umbrella."
_NEXT = "And what does the policy say about taxis from the airport? Then check Oslo's weather too."


def _openai(stream: bool) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": _SYSTEM},
            {"role": "user", "content": _ASKED},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_Pw3bd1hQmZ2a",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris"})},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_Pw3bd1hQmZ2a", "content": json.dumps(_WEATHER)},
            {"role": "assistant", "content": _ANSWERED},
            {"role": "user", "content": _NEXT},
        ],
        "tools": [
            {"type": "function", "function": {"name": n, "description": _DESCRIPTIONS[n], "parameters": p}}
            for n, p in _PARAMS.items()
        ],
        "tool_choice": "auto",
        "temperature": 0.2,
    }
    if stream:
        body |= {"stream": True, "stream_options": {"include_usage": True}}
    return body


def _anthropic() -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "system": _SYSTEM,
        "stream": True,
        "tools": [{"name": n, "description": _DESCRIPTIONS[n], "input_schema": p} for n, p in _PARAMS.items()],
        "messages": [
            {"role": "user", "content": _ASKED},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Let me check the weather."},
                    {
                        "type": "tool_use",
                        "id": "toolu_01A09q90qw90lq917835",
                        "name": "get_weather",
                        "input": {"city": "Paris"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_01A09q90qw90lq917835",
                        "content": json.dumps(_WEATHER),
                    }
                ],
            },
            {"role": "assistant", "content": [{"type": "text", "text": _ANSWERED}]},
            {"role": "user", "content": _NEXT},
        ],
    }


@dataclass(frozen=True)
class LlmCase:
    """One LLM call, repeated: where it goes, what it sends, and how a whole answer to it looks."""

    name: str
    path: str
    body: dict[str, Any]
    complete: Callable[[bytes], bool]  # the answer carries its tool call and (streams) its end

    @property
    def request(self) -> Request:
        headers = (("Content-Type", "application/json"), ("Authorization", "Bearer sk-bench-not-a-real-key"))
        return Request("POST", json.dumps(self.body).encode(), headers)


def _openai_whole(body: bytes) -> bool:
    try:
        message = json.loads(body)["choices"][0]["message"]
    except (ValueError, KeyError, IndexError, TypeError):
        return False
    return bool(message.get("tool_calls"))


CASES: tuple[LlmCase, ...] = (
    LlmCase("openai-tools", "/v1/chat/completions", _openai(stream=False), _openai_whole),
    LlmCase(
        "openai-tools-stream",
        "/v1/chat/completions",
        _openai(stream=True),
        lambda body: b'"tool_calls"' in body and b'"arguments"' in body and body.rstrip().endswith(b"data: [DONE]"),
    ),
    LlmCase(
        "anthropic-tools-stream",
        "/v1/messages",
        _anthropic(),
        lambda body: b'"input_json_delta"' in body and b"event: message_stop" in body,
    ),
)


def answer_ok(port: int, case: LlmCase, timeout_s: float = 10.0) -> bool:
    """One request of the case on a fresh connection: a 200 whose (de-chunked) body is a whole answer."""
    req = case.request
    raw = req.head("127.0.0.1", port, case.path).replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n", 1)
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as s:
        s.sendall(raw + req.body)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    if b"transfer-encoding: chunked" in head.lower():
        out, rest = b"", body
        while rest:
            size_line, _, rest = rest.partition(b"\r\n")
            size = int(size_line.split(b";")[0], 16)
            if size == 0:
                break
            out, rest = out + rest[:size], rest[size + 2 :]
        body = out
    return head.startswith(b"HTTP/1.1 200") and case.complete(body)


def _median(runs: list[LoadResult], cpu_s: list[float | None]) -> dict[str, Any]:
    best = median_round(runs)
    requests = sum(r.requests for r in runs)
    if requests and cpu_s and all(c is not None for c in cpu_s):
        # Over every round (not the median one's): the proxy's own CPU is steadier than its req/s.
        best["cpu_ms_per_request"] = round(sum(c for c in cpu_s if c is not None) / requests * 1000, 3)
    return best


def _cpu(pid: int | None) -> float | None:
    return None if pid is None else tree_cpu_seconds(pid)  # with its analysis process, when it has one


def measure_llm(
    ports: dict[str, int],
    duration_s: float,
    rounds: int,
    use_wrk: bool,
    cases: tuple[LlmCase, ...] = CASES,
    *,
    pids: dict[str, int] | None = None,
) -> dict[str, Any]:
    """Each case through each path at 1 and 8 connections, rounds interleaving the paths; the median round
    (bench/load.py's median_round).
    The paths are LLM_PATHS and whichever REFERENCE_PATHS `ports` has; with `pids`, each path's proxy CPU
    per request too."""
    paths = {name: ports[name] for name in PATHS if name in ports}
    pids = pids or {}
    out: dict[str, Any] = {"paths": list(paths), "cases": {}, "checked": {}}
    for case in cases:
        print(f"  LLM case {case.name}: {len(case.request.body):,} byte requests", flush=True)
        out["checked"][case.name] = {name: answer_ok(port, case) for name, port in paths.items()}
        runs: dict[str, dict[str, list[LoadResult]]] = {name: {"c1": [], "c8": []} for name in paths}
        cpu: dict[str, dict[str, list[float | None]]] = {name: {"c1": [], "c8": []} for name in paths}
        for port in paths.values():  # warm-up: the first requests of a shape are slower everywhere
            run_load(port, case.path, 8, max(1.0, duration_s / 5), use_wrk=use_wrk, request=case.request)
        for _ in range(rounds):
            for name, port in paths.items():
                for c, n in (("c1", 1), ("c8", 8)):
                    before = _cpu(pids.get(name))
                    runs[name][c].append(
                        run_load(port, case.path, n, duration_s, use_wrk=use_wrk, request=case.request)
                    )
                    after = _cpu(pids.get(name))
                    cpu[name][c].append(after - before if before is not None and after is not None else None)
        out["cases"][case.name] = {
            name: {c: _median(r[c], cpu[name][c]) for c in ("c1", "c8")} for name, r in runs.items()
        }
    return out


def llm_targets(llm: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per case: each all-on path's throughput against plain mitmdump at 1 and 8 connections, and its p99
    at 1 connection over mitmdump's; a case whose answers came back broken through a path is missed."""
    out: dict[str, dict[str, Any]] = {}
    for case, results in llm.get("cases", {}).items():
        m = results.get("mitmdump")
        for name in BROWNOUTS:
            if name == BROWNOUT or name in llm.get("paths", ()):  # all-on missing is a miss
                out.update(_all_on_targets(case, name, results.get(name), m))
        # Throughput of broken answers would prove nothing: each path must answer the case whole.
        checked = llm.get("checked", {}).get(case, {})
        broken = sorted(name for name, ok in checked.items() if not ok)
        errors = sum(r[c]["errors"] for r in results.values() for c in ("c1", "c8"))
        detail = f"broken through: {', '.join(broken) or 'none'}; load errors: {errors}"
        out[f"{case}: broken_answers_and_load_errors"] = target(len(broken) + errors, "<=", 0, "", detail, group="llm")
        out.update(_split(case, results))
    return out


def _all_on_targets(case: str, name: str, b: dict[str, Any] | None, m: dict[str, Any] | None) -> dict[str, Any]:
    out: dict[str, dict[str, Any]] = {}
    for c in ("c1", "c8"):
        rb = b[c]["rps"] if b else None
        rm = m[c]["rps"] if m else None
        ratio = rb / rm if rb is not None and rm else None
        detail = f"{rb:,.0f} vs {rm:,.0f} req/s" if rb is not None and rm is not None else ""
        out[f"{name}: {case}: rps_ratio_vs_mitmdump_{c}"] = target(
            ratio, ">=", RPS_FLOOR[name], "x", detail, group="llm"
        )
    b99, m99 = (b["c1"]["p99_ms"] if b else None), (m["c1"]["p99_ms"] if m else None)
    added = b99 - m99 if b99 is not None and m99 is not None else None
    detail = f"p99 {b99:.3f} vs {m99:.3f} ms" if added is not None else ""
    out[f"{name}: {case}: p99_added_vs_mitmdump_c1_ms"] = target(added, "<=", P99_ADDED_MS, " ms", detail, group="llm")
    return out


def _split(case: str, results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Informational, with the reference paths: streaming's own cost to mitmproxy, and brownout's (with no
    rules and with everything on) over unbuffered mitmdump, in req/s and in proxy CPU per request."""
    out: dict[str, dict[str, Any]] = {}
    pairs = [("mitmdump-stream", "mitmdump"), ("brownout", "mitmdump-stream")]
    pairs += [(name, "mitmdump-stream") for name in BROWNOUTS]
    for path, base in pairs:
        a, b = results.get(path), results.get(base)
        if a is None or b is None:
            continue
        vs = base.replace("-", "_")
        for c in ("c1", "c8"):
            ra, rb = a[c]["rps"], b[c]["rps"]
            row = info(ra / rb if rb else None, f"{ra:,.0f} vs {rb:,.0f} req/s", unit="x")
            out[f"{path}: {case}: rps_ratio_vs_{vs}_{c}"] = {**row, "group": "llm"}
        ca, cb = a["c8"].get("cpu_ms_per_request"), b["c8"].get("cpu_ms_per_request")
        if ca is not None and cb is not None:
            row = info(ca - cb, f"{ca:.3f} vs {cb:.3f} ms of proxy CPU per request")
            out[f"{path}: {case}: cpu_ms_per_request_added_vs_{vs}_c8"] = {**row, "group": "llm"}
    return out


def render_llm_rows(llm: dict[str, Any]) -> list[str]:
    """Markdown rows: case, path, req/s and latency at 1 and 8 connections."""
    with_cpu = any("cpu_ms_per_request" in r["c8"] for results in llm["cases"].values() for r in results.values())
    lines = [
        "| case | path | req/s, 1 conn | p50 ms | p99 ms | req/s, 8 conns | p99 ms |"
        + (" proxy CPU ms/req, 8 conns |" if with_cpu else ""),
        "|---|---|---:|---:|---:|---:|---:|" + ("---:|" if with_cpu else ""),
    ]
    for case, results in llm["cases"].items():
        for name, r in results.items():
            c1, c8 = r["c1"], r["c8"]
            cpu = c8.get("cpu_ms_per_request")
            lines.append(
                f"| {case} | {name} | {c1['rps']:,.0f} | {c1['p50_ms']:.2f} | {c1['p99_ms']:.2f} | "
                f"{c8['rps']:,.0f} | {c8['p99_ms']:.2f} |"
                + ((f" {cpu:.3f} |" if cpu is not None else " - |") if with_cpu else "")
            )
    return lines
