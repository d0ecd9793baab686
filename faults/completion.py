"""Per-provider locations of the assistant's text, for injecting text into completions.

Recognised by shape: OpenAI chat `choices[].message.content` (streams: `delta.content`),
OpenAI Responses `output_text` parts (streams: `response.output_text.delta`), Anthropic
`text` blocks (`text_delta`), Gemini `candidates[].content.parts[].text`, Ollama
`message.content` (chat) or `response` (generate).
"""

from __future__ import annotations

from typing import Any

__all__ = ["inject_completion", "inject_completion_event"]


def _join(old: str, text: str, at_start: bool, sep: str) -> str:
    if not old:
        return text
    return text + sep + old if at_start else old + sep + text


def _objs(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def inject_completion(doc: Any, text: str, *, at_start: bool = False, sep: str = "\n\n") -> bool:
    """Put `text` into a whole response's assistant text; True when it found a place."""
    if not isinstance(doc, dict):
        return False
    done = False
    for choice in _objs(doc.get("choices")):  # OpenAI chat
        msg = choice.get("message")
        if isinstance(msg, dict):
            msg["content"] = _join(msg.get("content") or "", text, at_start, sep)
            done = True
    messages = [i for i in _objs(doc.get("output")) if i.get("type") == "message"]  # OpenAI Responses
    for item in messages[:1]:
        parts = [p for p in _objs(item.get("content")) if p.get("type") == "output_text"]
        if parts:
            parts[0]["text"] = _join(parts[0].get("text") or "", text, at_start, sep)
        else:
            item.setdefault("content", []).append({"type": "output_text", "text": text, "annotations": []})
        done = True
    if doc.get("type") == "message" and isinstance(doc.get("content"), list):  # Anthropic
        blocks = [b for b in _objs(doc["content"]) if b.get("type") == "text"]
        if blocks:
            blocks[0]["text"] = _join(blocks[0].get("text") or "", text, at_start, sep)
        else:
            doc["content"].insert(0, {"type": "text", "text": text})  # a tool_use-only answer
        done = True
    for cand in _objs(doc.get("candidates"))[:1]:  # Gemini
        content = cand.setdefault("content", {"role": "model", "parts": []})
        parts = content.setdefault("parts", [])
        texts = [p for p in _objs(parts) if isinstance(p.get("text"), str) and not p.get("thought")]
        if texts:
            texts[0]["text"] = _join(texts[0]["text"], text, at_start, sep)
        else:
            parts.insert(0, {"text": text})
        done = True
    if isinstance(doc.get("message"), dict) and "done" in doc:  # Ollama chat
        doc["message"]["content"] = _join(doc["message"].get("content") or "", text, at_start, sep)
        done = True
    elif isinstance(doc.get("response"), str) and "done" in doc:  # Ollama generate
        doc["response"] = _join(doc["response"], text, at_start, sep)
        done = True
    return done


def inject_completion_event(doc: Any, text: str, *, at_start: bool = False, sep: str = "\n\n") -> bool:
    """Put `text` into this stream event when it carries assistant text; True when it did."""
    if not isinstance(doc, dict):
        return False
    kind = doc.get("type")
    if kind == "response.output_text.delta" and isinstance(doc.get("delta"), str):  # OpenAI Responses
        doc["delta"] = _join(doc["delta"], text, at_start, sep)
        return True
    if kind == "content_block_delta":  # Anthropic
        delta = doc.get("delta")
        if isinstance(delta, dict) and delta.get("type") == "text_delta" and isinstance(delta.get("text"), str):
            delta["text"] = _join(delta["text"], text, at_start, sep)
            return True
        return False
    for choice in _objs(doc.get("choices")):  # OpenAI chat chunks
        delta = choice.get("delta")
        if isinstance(delta, dict) and isinstance(delta.get("content"), str) and delta["content"]:
            delta["content"] = _join(delta["content"], text, at_start, sep)
            return True
    for cand in _objs(doc.get("candidates"))[:1]:  # Gemini
        content = cand.get("content")
        parts = content.get("parts") if isinstance(content, dict) else None
        for part in _objs(parts):
            if isinstance(part.get("text"), str) and part["text"] and not part.get("thought"):
                part["text"] = _join(part["text"], text, at_start, sep)
                return True
    if "done" in doc:  # Ollama
        msg = doc.get("message")
        if isinstance(msg, dict) and isinstance(msg.get("content"), str) and msg["content"]:
            msg["content"] = _join(msg["content"], text, at_start, sep)
            return True
        if isinstance(doc.get("response"), str) and doc["response"]:
            doc["response"] = _join(doc["response"], text, at_start, sep)
            return True
    return False
