"""The demo: a mock LLM + tool upstream, a small tool-using agent, and `brownout demo`."""

from __future__ import annotations

__all__: list[str] = []
