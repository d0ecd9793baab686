"""OpenAI Realtime (GA) over WebSocket, as the official SDK's realtime client expects it.

Text and audio modalities (audio deltas are short base64 silence), function calls when the session
declares tools (answered with the tool's result once the client sends it back), `response.cancel`,
and `rate_limits.updated` after each response.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from typing import Any

from brownout.proxy.demo.httpserver import Request, Responder
from brownout.proxy.demo.mockdata import Knobs, answer_pieces, mock_arguments, mock_id, split_text, tool_answer
from brownout.proxy.demo.wsserver import WsClosed, WsSession, accept

__all__ = ["SILENCE", "realtime"]

SILENCE = base64.b64encode(bytes(480)).decode()  # 10 ms of 24 kHz PCM16 silence
_MODEL = "gpt-realtime"


class _Session:
    """One mock Realtime session: its config, its conversation, the response in progress."""

    def __init__(self, ws: WsSession, model: str, knobs: Knobs) -> None:
        self.ws = ws
        self.knobs = knobs
        self.config: dict[str, Any] = {
            "type": "realtime",
            "object": "realtime.session",
            "id": mock_id("sess_", 24),
            "model": model,
            "output_modalities": ["text"],
            "instructions": "",
            "tools": [],
            "tool_choice": "auto",
        }
        self.pending_output: str | None = None  # the last function_call_output the client sent
        self.task: asyncio.Task[None] | None = None

    async def send(self, kind: str, **fields: Any) -> None:
        await self.ws.send_json({"type": kind, "event_id": mock_id("event_", 22), **fields})

    async def run(self) -> None:
        await self.send("session.created", session=self.config)
        try:
            while True:
                raw = await self.ws.recv()
                try:
                    doc = json.loads(raw)
                except ValueError:
                    await self.error("invalid_json", "We could not parse the JSON body of your request.")
                    continue
                await self.handle(doc if isinstance(doc, dict) else {})
        except (WsClosed, ConnectionError):
            pass
        finally:
            if self.task is not None:
                self.task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await self.task

    async def handle(self, doc: dict[str, Any]) -> None:
        kind = doc.get("type")
        if kind == "session.update":
            update: dict[str, Any] = doc["session"] if isinstance(doc.get("session"), dict) else {}
            self.config.update({k: v for k, v in update.items() if k not in ("id", "object")})
            await self.send("session.updated", session=self.config)
        elif kind == "conversation.item.create":
            item = dict(doc.get("item") or {})
            item.setdefault("id", mock_id("item_", 22))
            item["status"] = "completed"
            if item.get("type") == "function_call_output":
                self.pending_output = str(item.get("output", ""))
            await self.send("conversation.item.added", previous_item_id=None, item=item)
            await self.send("conversation.item.done", previous_item_id=None, item=item)
        elif kind == "response.create":
            if self.task is not None and not self.task.done():
                await self.error(
                    "conversation_already_has_active_response",
                    "Conversation already has an active response in progress.",
                )
                return
            self.task = asyncio.create_task(self.respond())
        elif kind == "response.cancel":
            if self.task is not None and not self.task.done():
                self.task.cancel()
        elif kind == "input_audio_buffer.commit":
            await self.send("input_audio_buffer.committed", previous_item_id=None, item_id=mock_id("item_", 22))
        elif kind not in ("input_audio_buffer.append", "input_audio_buffer.clear"):
            await self.error("invalid_value", f"Invalid value: '{kind}'. Supported values are: 'session.update', ...")

    async def error(self, code: str, message: str) -> None:
        err = {"type": "invalid_request_error", "code": code, "message": message, "param": None, "event_id": None}
        await self.send("error", error=err)

    async def respond(self) -> None:
        rid = mock_id("resp_", 22)
        base: dict[str, Any] = {
            "object": "realtime.response",
            "id": rid,
            "conversation_id": None,
            "output_modalities": self.config.get("output_modalities") or ["text"],
            "max_output_tokens": "inf",
            "audio": None,
            "metadata": None,
            "usage": None,
        }
        await self.send("response.created", response={**base, "status": "in_progress", "output": []})
        item: dict[str, Any] = {}
        try:
            tools = [t for t in self.config.get("tools") or [] if isinstance(t, dict)]
            if self.pending_output is not None:
                text, self.pending_output = tool_answer(self.pending_output), None
                item = await self._message(rid, text)
            elif tools:
                item = await self._call(rid, tools[0])
            else:
                item = await self._message(rid, None)
        except asyncio.CancelledError:
            details = {"type": "cancelled", "reason": "client_cancelled"}
            done = {**base, "status": "cancelled", "status_details": details, "output": [item] if item else []}
            with contextlib.suppress(WsClosed, ConnectionError):
                await self.send("response.done", response=done)
            return
        usage = {
            "total_tokens": 60,
            "input_tokens": 40,
            "output_tokens": 20,
            "input_token_details": {"text_tokens": 40, "audio_tokens": 0, "cached_tokens": 0},
            "output_token_details": {"text_tokens": 20, "audio_tokens": 0},
        }
        done = {**base, "status": "completed", "status_details": None, "output": [item], "usage": usage}
        await self.send("response.done", response=done)
        limits = [
            {"name": "requests", "limit": 5000, "remaining": 4999, "reset_seconds": 0.012},
            {"name": "tokens", "limit": 40000, "remaining": 39940, "reset_seconds": 0.09},
        ]
        await self.send("rate_limits.updated", rate_limits=limits)

    async def _pause(self) -> None:
        await asyncio.sleep(self.knobs.chunk_delay_s)

    async def _message(self, rid: str, text: str | None) -> dict[str, Any]:
        iid = mock_id("item_", 22)
        audio = "audio" in (self.config.get("output_modalities") or ())
        item: dict[str, Any] = {
            "id": iid, "object": "realtime.item", "type": "message", "role": "assistant", "status": "in_progress"
        }  # fmt: skip
        where = {"response_id": rid, "item_id": iid, "output_index": 0, "content_index": 0}
        await self.send("response.output_item.added", response_id=rid, output_index=0, item={**item, "content": []})
        part_type = "output_audio" if audio else "output_text"
        await self.send("response.content_part.added", **where, part={"type": part_type})
        pieces = answer_pieces(text, self.knobs, 4)
        for piece in pieces:
            await self._pause()
            if audio:
                await self.send("response.output_audio.delta", **where, delta=SILENCE)
                await self.send("response.output_audio_transcript.delta", **where, delta=piece)
            else:
                await self.send("response.output_text.delta", **where, delta=piece)
        full = "".join(pieces)
        if audio:
            await self.send("response.output_audio.done", **where)
            await self.send("response.output_audio_transcript.done", **where, transcript=full)
            part = {"type": "output_audio", "transcript": full}
        else:
            await self.send("response.output_text.done", **where, text=full)
            part = {"type": "output_text", "text": full}
        await self.send("response.content_part.done", **where, part=part)
        item = {**item, "status": "completed", "content": [part]}
        await self.send("response.output_item.done", response_id=rid, output_index=0, item=item)
        return item

    async def _call(self, rid: str, tool: dict[str, Any]) -> dict[str, Any]:
        iid, call_id = mock_id("item_", 22), mock_id("call_", 16)
        name = str(tool.get("name") or "get_weather")
        arguments = json.dumps(mock_arguments(tool.get("parameters")))
        item = {
            "id": iid,
            "object": "realtime.item",
            "type": "function_call",
            "status": "in_progress",
            "name": name,
            "call_id": call_id,
            "arguments": "",
        }
        await self.send("response.output_item.added", response_id=rid, output_index=0, item=item)
        where = {"response_id": rid, "item_id": iid, "output_index": 0, "call_id": call_id}
        for piece in split_text(arguments, 2):
            await self._pause()
            await self.send("response.function_call_arguments.delta", **where, delta=piece)
        await self.send("response.function_call_arguments.done", **where, name=name, arguments=arguments)
        item = {**item, "status": "completed", "arguments": arguments}
        await self.send("response.output_item.done", response_id=rid, output_index=0, item=item)
        return item


async def realtime(req: Request, resp: Responder, knobs: Knobs) -> None:
    """Serve one Realtime WebSocket session on `resp`'s connection."""
    ws = accept(req, resp)
    if ws is None:
        return
    model = next((v for k, _, v in (p.partition("=") for p in req.query.split("&")) if k == "model" and v), _MODEL)
    await _Session(ws, model, knobs).run()
    await ws.close()
