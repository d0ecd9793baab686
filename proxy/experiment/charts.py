"""Geometry of the report's inline-SVG charts; templates/charts.html.j2 draws them (no scripts, fonts or network).

Every function returns plain numbers (formatted) and raw strings: the template escapes the strings.
"""

from __future__ import annotations

from typing import Any

from brownout.proxy.experiment.stats import percentile

__all__ = ["bars_with_intervals", "box_plots", "hbars", "timeline"]

W, H, PAD_L, PAD_B, PAD_T = 560, 220, 44, 40, 14
LABEL_Y = H - PAD_B + 14
SEVERITY_COLORS = {"info": "#6b8fb3", "warning": "#d9a300", "error": "#d9534f", "critical": "#7b1fa2"}

Chart = dict[str, Any]


def _f(v: float) -> str:
    return f"{v:.1f}"


def _chart(kind: str, title: str, height: int = H, **parts: Any) -> Chart:
    return {"kind": kind, "title": title, "width": W, "height": height, **parts}


def _axis(lo: float, hi: float, ticks: int = 4, fmt: str = "{:.0%}") -> Chart:
    rows = []
    for i in range(ticks + 1):
        y = H - PAD_B - (H - PAD_B - PAD_T) * i / ticks
        rows.append({"y": _f(y), "text_y": _f(y + 4), "label": fmt.format(lo + (hi - lo) * i / ticks)})
    return {"x1": PAD_L, "x2": W - 8, "text_x": PAD_L - 4, "ticks": rows}


def _y(v: float, lo: float, hi: float) -> float:
    span = (hi - lo) or 1.0
    return H - PAD_B - (H - PAD_B - PAD_T) * (v - lo) / span


def bars_with_intervals(items: list[tuple[str, float | None, float, float, bool]], title: str) -> Chart:
    """(label, rate, ci_low, ci_high, chaos) per bar, 0..1 scale, with interval whiskers."""
    slot = (W - PAD_L - 8) / max(1, len(items))
    bars = []
    for i, (label, rate, lo, hi, chaos) in enumerate(items):
        x = PAD_L + i * slot + slot * 0.2
        w = slot * 0.6
        rect = None
        if rate is not None:
            y = _y(rate, 0, 1)
            rect = {
                "x": _f(x),
                "y": _f(y),
                "width": _f(w),
                "height": _f(H - PAD_B - y),
                "fill": "#e07b39" if chaos else "#4a90d9",
                "tip": f"{label}: {rate:.1%} [{lo:.1%}, {hi:.1%}]",
            }
        cx = x + w / 2
        bars.append(
            {
                "label": label,
                "rect": rect,
                "cx": _f(cx),
                "left": _f(cx - 6),
                "right": _f(cx + 6),
                "lo": _f(_y(lo, 0, 1)),
                "hi": _f(_y(hi, 0, 1)),
            }
        )
    return _chart("bars", title, axis=_axis(0.0, 1.0), bars=bars, label_y=LABEL_Y)


def box_plots(items: list[tuple[str, list[float]]], title: str) -> Chart:
    """Per label: whiskers min..max, box p25..p75, median line, points as dots (seconds)."""
    values = [v for _, vs in items for v in vs]
    top = max(values) * 1.1 if values else 1.0
    slot = (W - PAD_L - 8) / max(1, len(items))
    boxes = []
    for i, (label, vs) in enumerate(items):
        cx = PAD_L + i * slot + slot / 2
        box = None
        if vs:
            q = {k: percentile(vs, k) or 0.0 for k in (0, 25, 50, 75, 100)}
            box = {
                "min": _f(_y(q[0], 0, top)),
                "max": _f(_y(q[100], 0, top)),
                "left": _f(cx - 14),
                "right": _f(cx + 14),
                "q75": _f(_y(q[75], 0, top)),
                "height": _f(max(1.0, _y(q[25], 0, top) - _y(q[75], 0, top))),
                "median": _f(_y(q[50], 0, top)),
                "tip": f"p50 {q[50]:.2f}s",
                "dots": [{"cx": _f(cx + 20 + (j % 7) * 2), "cy": _f(_y(v, 0, top))} for j, v in enumerate(vs[:400])],
            }
        boxes.append({"label": label, "cx": _f(cx), "box": box})
    return _chart("boxes", title, axis=_axis(0.0, top, fmt="{:.1f}s"), boxes=boxes, label_y=LABEL_Y)


def timeline(points: list[tuple[float, str, str]], duration_s: float, title: str) -> Chart:
    """Violations over time: (seconds since start, severity, label) as cumulative steps per severity."""
    end = max([duration_s] + [t for t, _, _ in points]) or 1.0
    total = max(1, len(points))
    lines = []
    for sev, color in SEVERITY_COLORS.items():
        ts = sorted(t for t, s, _ in points if s == sev)
        if not ts:
            continue
        path, count = [f"M{PAD_L},{_y(0, 0, total):.1f}"], 0
        for t in ts:
            count += 1
            path += [f"H{PAD_L + (W - PAD_L - 8) * t / end:.1f}", f"V{_y(count, 0, total):.1f}"]
        path.append(f"H{W - 8}")
        lines.append({"d": " ".join(path), "color": color, "tip": f"{sev}: {count}"})
    legend = [{"name": s, "color": c} for s, c in SEVERITY_COLORS.items()]
    return _chart(
        "timeline",
        title,
        # integer counts: no more ticks than violations, so no label repeats
        axis=_axis(0.0, float(total), ticks=min(4, total), fmt="{:.0f}"),
        lines=lines,
        legend=legend,
        legend_x=PAD_L,
        legend_y=H - 8,
        end=f"{end:.0f}",
    )


def hbars(items: list[tuple[str, float | None, str]], title: str) -> Chart:
    """Horizontal bars 0..1: (label, rate, note)."""
    row, left = 22, 200
    rows = []
    for i, (label, rate, note) in enumerate(items):
        y = PAD_T + i * row
        width = (W - left - 60) * (rate or 0.0)
        rows.append(
            {
                "label": label[:34],
                "note": note,
                "text_y": y + 14,
                "bar_y": y + 3,
                "width": _f(width),
                "note_x": _f(left + width + 4),
            }
        )
    height = max(60, PAD_T + row * len(items) + 20)
    return _chart(
        "hbars",
        title,
        height,
        rows=rows,
        left=left,
        label_x=left - 6,
        bar_height=row - 6,
        empty_x=PAD_L,
        empty_y=PAD_T + 16,
    )
