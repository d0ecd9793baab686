"""How wide a chart label may render, without a font: an upper bound, so labels placed by it never collide.

The widths are em fractions rounded up from DejaVu Sans, the widest of the usual `sans-serif` fonts
(Liberation Sans, Arial, Helvetica and Segoe UI are narrower), by class of character.
"""

from __future__ import annotations

import logging

__all__ = ["ELLIPSIS", "fit", "text_width"]

logger = logging.getLogger(__name__)

ELLIPSIS = "…"
_NARROW = frozenset(" !'(),-./:;I[\\]`fijlrt|")  # DejaVu Sans: at most 0.40 em
_WIDE = frozenset("#%+<=>@MW^m~w")  # up to 1.0 em
_EM = {"narrow": 0.42, "lower": 0.66, "upper": 0.80, "wide": 1.0, "other": 1.3}  # "other": CJK, emoji


def _em(ch: str) -> float:
    if ch in _NARROW:
        return _EM["narrow"]
    if ch in _WIDE:
        return _EM["wide"]
    if not ch.isascii():
        return _EM["other"]
    if ch.isupper() or ch == "&":
        return _EM["upper"]
    return _EM["lower"]


def text_width(text: str, font_px: float) -> float:
    """An upper bound of the rendered width of `text` in pixels."""
    return font_px * sum(_em(ch) for ch in text)


def fit(text: str, max_px: float, font_px: float) -> str:
    """`text`, or its longest prefix that fits `max_px` with an ellipsis after it."""
    if text_width(text, font_px) <= max_px:
        return text
    budget, used, keep = max_px - text_width(ELLIPSIS, font_px), 0.0, 0
    while keep < len(text) and used + text_width(text[keep], font_px) <= budget:
        used += text_width(text[keep], font_px)
        keep += 1
    return text[:keep].rstrip() + ELLIPSIS
