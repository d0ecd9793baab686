"""Where the conversation lives in a Gemini request: `contents`, each a role and a list of parts.

A tool result is a `functionResponse` part whose `response` is a JSON object (parallel results
are parts of one content); `systemInstruction` sits outside the history.
"""

from __future__ import annotations

from typing import Any

from brownout.core.wire.history import ParallelResults, RequestHistory, TextSlot, longest_string_slot

__all__ = ["GeminiHistory"]


def _parts(content: Any) -> list[Any]:
    parts = content.get("parts") if isinstance(content, dict) else None
    return parts if isinstance(parts, list) else []


class GeminiHistory(RequestHistory):
    """generateContent request: `contents` with roles `user` and `model`."""

    def messages(self) -> list[Any]:
        contents = self.doc.get("contents")
        return contents if isinstance(contents, list) else []

    def role(self, message: Any) -> str:
        return str(message.get("role") or "user") if isinstance(message, dict) else ""

    def pinned(self, message: Any) -> bool:
        return False

    def user_text(self, message: Any) -> list[TextSlot]:
        if self.role(message) != "user":
            return []
        return [
            TextSlot(p, "text")
            for p in _parts(message)
            if isinstance(p, dict) and isinstance(p.get("text"), str) and "functionResponse" not in p
        ]

    @staticmethod
    def _result_parts(message: Any) -> list[tuple[int, dict[str, Any]]]:
        return [
            (i, p["functionResponse"])
            for i, p in enumerate(_parts(message))
            if isinstance(p, dict) and isinstance(p.get("functionResponse"), dict)
        ]

    def tool_results(self, message: Any) -> list[tuple[str | None, TextSlot]]:
        out: list[tuple[str | None, TextSlot]] = []
        for _, fr in self._result_parts(message):
            response = fr.get("response")
            if not isinstance(response, dict):
                continue  # the API requires an object here; nothing sensible to write into
            call_id = fr.get("id") if isinstance(fr.get("id"), str) else fr.get("name")
            # The model reads the response object as JSON: its prose is in the longest string.
            slot = longest_string_slot(response) or TextSlot(response, "content")
            out.append((call_id if isinstance(call_id, str) else None, slot))
        return out

    def parallel_results(self) -> list[ParallelResults]:
        runs: list[ParallelResults] = []
        for i, content in enumerate(self.messages()):
            parts = self._result_parts(content)
            if len(parts) >= 2:
                runs.append(ParallelResults(content["parts"], tuple(j for j, _ in parts), i))
        return runs
