"""Gemini Live (BidiGenerateContent) over WebSocket, as google-genai's live client expects it.

The server's messages go out as binary frames of JSON, like the real API's. Text answers split
into `serverContent` parts, a `toolCall` when the setup declares functions (answered once the
client sends its `toolResponse`), `usageMetadata` with `turnComplete`, and a
`sessionResumptionUpdate` after each turn when the setup asked for resumption.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from brownout.core.wire.gemini_live import field
from brownout.proxy.demo.httpserver import Request, Responder
from brownout.proxy.demo.mockdata import Knobs, answer_pieces, mock_arguments, mock_id, tool_answer
from brownout.proxy.demo.wsserver import WsClosed, WsSession, accept

__all__ = ["live"]


class _Session:
    def __init__(self, ws: WsSession, knobs: Knobs) -> None:
        self.ws, self.knobs = ws, knobs
        self.functions: list[dict[str, Any]] = []
        self.resumable = False
        self.turns = 0

    async def send(self, doc: dict[str, Any]) -> None:
        await self.ws.send_json(doc, binary=True)

    async def run(self) -> None:
        setup = (await self.ws.recv_json()).get("setup")
        if not isinstance(setup, dict):
            await self.ws.close(1007, "Request contains an invalid argument.")
            return
        for tool in setup.get("tools") or []:
            if isinstance(tool, dict):
                self.functions += [d for d in field(tool, "functionDeclarations") or [] if isinstance(d, dict)]
        self.resumable = isinstance(field(setup, "sessionResumption"), dict)
        await self.send({"setupComplete": {}})
        while True:
            doc = await self.ws.recv_json()
            tool_response, content, realtime = (
                field(doc, k) for k in ("toolResponse", "clientContent", "realtimeInput")
            )
            if isinstance(tool_response, dict):
                responses = field(tool_response, "functionResponses") or [{}]
                response = responses[0].get("response") or {}
                output = json.dumps(response.get("result", response) if isinstance(response, dict) else response)
                await self._answer(tool_answer(output))
            elif isinstance(content, dict) and field(content, "turnComplete"):
                if self.functions:
                    await self._call(self.functions[0])
                else:
                    await self._answer(None)
            elif isinstance(realtime, dict) and realtime.get("text"):
                await self._answer(None)

    async def _answer(self, text: str | None) -> None:
        for piece in answer_pieces(text, self.knobs, 4):
            await asyncio.sleep(self.knobs.chunk_delay_s)
            await self.send({"serverContent": {"modelTurn": {"role": "model", "parts": [{"text": piece}]}}})
        await self.send({"serverContent": {"generationComplete": True}})
        usage = {"promptTokenCount": 30, "responseTokenCount": 12, "totalTokenCount": 42}
        await self.send({"serverContent": {"turnComplete": True}, "usageMetadata": usage})
        self.turns += 1
        if self.resumable:
            update = {
                "newHandle": mock_id("handle-", 16),
                "resumable": True,
                "lastConsumedClientMessageIndex": str(self.turns),
            }
            await self.send({"sessionResumptionUpdate": update})

    async def _call(self, decl: dict[str, Any]) -> None:
        schema = decl.get("parametersJsonSchema") or decl.get("parameters")
        args = mock_arguments(_lower_types(schema) if isinstance(schema, dict) else None)
        call = {"id": mock_id("function-call-", 20), "name": decl.get("name", "get_weather"), "args": args}
        await self.send({"toolCall": {"functionCalls": [call]}})


def _lower_types(schema: dict[str, Any]) -> dict[str, Any]:
    """Gemini's OpenAPI-style schemas spell types in capitals (STRING): the mock's helper reads JSON Schema."""
    props = schema.get("properties")
    if not isinstance(props, dict):
        return schema
    lowered = {k: {**v, "type": str(v.get("type", "string")).lower()} for k, v in props.items() if isinstance(v, dict)}
    return {**schema, "properties": lowered}


async def live(req: Request, resp: Responder, knobs: Knobs) -> None:
    """Serve one Live session on `resp`'s connection."""
    ws = accept(req, resp)
    if ws is None:
        return
    try:
        await _Session(ws, knobs).run()
    except (WsClosed, ConnectionError, ValueError):
        pass
    await ws.close()
