"""Geometry of the report's inline-SVG charts; templates/charts.html.j2 draws them (no scripts, fonts or network).

Every function returns plain numbers (formatted) and raw strings: the template escapes the strings.
Per-phase charts are laid out horizontally, a row per phase with its label on the left, so any number
of phases (a discovered experiment has ten) stays readable: rows add height, never squeeze labels
together. A label wider than the label column is cut with an ellipsis; its <title> holds it whole.
"""

from __future__ import annotations

from typing import Any

from brownout.proxy.experiment.stats import percentile
from brownout.proxy.experiment.textfit import fit, text_width

__all__ = ["FONT_PX", "bars_with_intervals", "box_plots", "hbars", "series", "timeline"]

W, H, PAD_L, PAD_B, PAD_T = 560, 220, 44, 40, 14
FONT_PX = 11  # charts.html.j2 sets font-size="11" on every chart
ROW = 24  # the thinnest row: room for an 11 px label and a 14 px bar
ROW_MAX = 40  # few phases get thicker rows, up to the height of the other charts
LABEL_MAX_PX = 220  # the widest label column; the plot keeps the rest of the width
GAP = 8  # between a label and the plot, and at the chart's edges
AXIS_BAND = 20  # below the rows: the value axis' tick labels
SEVERITY_COLORS = {"info": "#6b8fb3", "warning": "#d9a300", "error": "#d9534f", "critical": "#7b1fa2"}
LINE_COLORS = ("#4a90d9", "#2e7d32", "#7b1fa2", "#d9a300", "#00838f", "#6d4c41")

Chart = dict[str, Any]


def _f(v: float) -> str:
    return f"{v:.1f}"


def _chart(kind: str, title: str, height: float = H, **parts: Any) -> Chart:
    return {"kind": kind, "title": title, "width": W, "height": _f(height), **parts}


def _axis(lo: float, hi: float, ticks: int = 4, fmt: str = "{:.0%}") -> Chart:
    rows = []
    for i in range(ticks + 1):
        y = H - PAD_B - (H - PAD_B - PAD_T) * i / ticks
        rows.append({"y": _f(y), "text_y": _f(y + 4), "label": fmt.format(lo + (hi - lo) * i / ticks)})
    return {"x1": PAD_L, "x2": W - 8, "text_x": PAD_L - 4, "ticks": rows}


def _y(v: float, lo: float, hi: float) -> float:
    span = (hi - lo) or 1.0
    return H - PAD_B - (H - PAD_B - PAD_T) * (v - lo) / span


class _Rows:
    """A label column and a plot to its right; row i spans [top(i), top(i) + row)."""

    def __init__(self, labels: list[str], right_pad: float = GAP, *, fill: bool = False) -> None:
        # fill: rows share the plot height of the vertical charts (timeline) while they can, so a
        # report with three phases does not get flat charts
        self.row = max(ROW, min(ROW_MAX, (H - PAD_B - PAD_T) / max(1, len(labels)))) if fill else ROW
        shown = [fit(label, LABEL_MAX_PX, FONT_PX) for label in labels]
        widest = max((text_width(s, FONT_PX) for s in shown), default=0.0)
        self.label_x = GAP + widest
        self.left = self.label_x + GAP
        self.right = W - right_pad
        self.labels = [
            {"text": s, "full": label if s != label else None} for s, label in zip(shown, labels, strict=True)
        ]
        self.bottom = PAD_T + self.row * len(labels)

    def top(self, i: int) -> float:
        return PAD_T + i * self.row

    def mid(self, i: int) -> float:
        return self.top(i) + self.row / 2

    def bar(self, i: int) -> tuple[float, float]:
        """(top, height) of a bar or box centred in row i."""
        height = ROW - 10 + (self.row - ROW) / 2
        return self.mid(i) - height / 2, height

    def x(self, v: float, lo: float, hi: float) -> float:
        return self.left + (self.right - self.left) * (v - lo) / ((hi - lo) or 1.0)

    def label(self, i: int) -> Chart:
        return {**self.labels[i], "x": _f(self.label_x), "y": _f(self.mid(i) + FONT_PX * 0.35)}


def _value_axis(lo: float, hi: float, fmt: str, labels: list[str], ticks: int = 4) -> tuple[_Rows, Chart]:
    """The rows, and vertical grid lines with their values under the rows."""
    texts = [fmt.format(lo + (hi - lo) * i / ticks) for i in range(ticks + 1)]
    # The last tick's label is centred on the plot's right edge: keep its right half inside the chart.
    rows = _Rows(labels, right_pad=max(GAP, text_width(texts[-1], FONT_PX) / 2 + 2), fill=True)
    grid = [{"x": _f(rows.x(lo + (hi - lo) * i / ticks, lo, hi)), "label": t} for i, t in enumerate(texts)]
    axis = {"y1": _f(PAD_T - 4), "y2": _f(rows.bottom), "text_y": _f(rows.bottom + 14), "ticks": grid}
    return rows, axis


def bars_with_intervals(items: list[tuple[str, float | None, float, float, bool]], title: str) -> Chart:
    """(label, rate, ci_low, ci_high, chaos) per row, 0..1 scale, with interval whiskers."""
    rows, axis = _value_axis(0.0, 1.0, "{:.0%}", [label for label, *_ in items])
    bars = []
    for i, (label, rate, lo, hi, chaos) in enumerate(items):
        mid, (bar_top, bar_height) = rows.mid(i), rows.bar(i)
        rect = None
        if rate is not None:
            rect = {
                "x": _f(rows.left),
                "y": _f(bar_top),
                "width": _f(rows.x(rate, 0, 1) - rows.left),
                "height": _f(bar_height),
                "fill": "#e07b39" if chaos else "#4a90d9",
                "tip": f"{label}: {rate:.1%} [{lo:.1%}, {hi:.1%}]",
            }
        bars.append(
            {
                "label": rows.label(i),
                "rect": rect,
                "mid": _f(mid),
                "cap_top": _f(mid - 5),
                "cap_bottom": _f(mid + 5),
                "lo": _f(rows.x(lo, 0, 1)),
                "hi": _f(rows.x(hi, 0, 1)),
            }
        )
    return _chart("bars", title, rows.bottom + AXIS_BAND, axis=axis, bars=bars)


def box_plots(items: list[tuple[str, list[float]]], title: str) -> Chart:
    """Per row: whiskers min..max, box p25..p75, median line, points as dots (seconds)."""
    values = [v for _, vs in items for v in vs]
    top_s = max(values) * 1.1 if values else 1.0
    rows, axis = _value_axis(0.0, top_s, "{:.1f}s", [label for label, _ in items])
    boxes = []
    for i, (_, vs) in enumerate(items):
        mid, (box_top, box_height) = rows.mid(i), rows.bar(i)
        box = None
        if vs:
            q = {k: rows.x(percentile(vs, k) or 0.0, 0, top_s) for k in (0, 25, 50, 75, 100)}
            box = {
                "min": _f(q[0]),
                "max": _f(q[100]),
                "top": _f(box_top),
                "bottom": _f(box_top + box_height),
                "q25": _f(q[25]),
                "width": _f(max(1.0, q[75] - q[25])),
                "height": _f(box_height),
                "median": _f(q[50]),
                "tip": f"p50 {percentile(vs, 50) or 0.0:.2f}s",
                "dots": [
                    {"cx": _f(rows.x(v, 0, top_s)), "cy": _f(mid + ((j % 5) - 2) * 2)} for j, v in enumerate(vs[:400])
                ],
            }
        boxes.append({"label": rows.label(i), "mid": _f(mid), "box": box})
    return _chart("boxes", title, rows.bottom + AXIS_BAND, axis=axis, boxes=boxes)


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
    """Horizontal bars 0..1: (label, rate, note), the note after the bar."""
    notes = [note for _, _, note in items]
    rows = _Rows(
        [label for label, _, _ in items], right_pad=GAP + max((text_width(n, FONT_PX) for n in notes), default=0)
    )
    out = []
    for i, (_, rate, note) in enumerate(items):
        width = rows.x(rate or 0.0, 0, 1) - rows.left
        out.append(
            {
                "label": rows.label(i),
                "note": note,
                "bar_y": _f(rows.bar(i)[0]),
                "width": _f(width),
                "note_x": _f(rows.left + width + 4),
            }
        )
    return _chart(
        "hbars",
        title,
        max(60, rows.bottom + GAP),
        rows=out,
        left=_f(rows.left),
        bar_height=ROW - 10,
        empty_x=PAD_L,
        empty_y=PAD_T + 16,
    )


def series(
    lines: list[tuple[str, list[tuple[float, float | None]]]],
    phases: list[tuple[str, float, float, bool]],
    end_s: float,
    title: str,
    *,
    abort_s: float | None = None,
    threshold: float | None = None,
) -> Chart:
    """Time series over an experiment (seconds since its start): a band per phase (chaos shaded), the
    abort moment as a red line, a check's threshold dashed; a gap where a point has no value."""
    end = max(end_s, 1e-9)
    values = [v for _, pts in lines for _, v in pts if v is not None]
    top = max([*values, threshold or 0.0, 0.0]) * 1.1 or 1.0
    left, right = PAD_L, W - 8

    def x(t: float) -> float:
        return left + (right - left) * min(max(t, 0.0), end) / end

    paths = []
    for i, (name, pts) in enumerate(lines):
        d, pen = [], "M"
        for t, v in pts:
            if v is None:
                pen = "M"
                continue
            d.append(f"{pen}{x(t):.1f},{_y(v, 0.0, top):.1f}")
            pen = "L"
        paths.append({"d": " ".join(d), "color": LINE_COLORS[i % len(LINE_COLORS)], "tip": name, "name": name})
    bands = [
        {
            "x": _f(x(a)),
            "width": _f(max(0.5, x(b) - x(a))),
            "fill": "#fbe3d3" if chaos else "#f2f2f2",
            "label": name,
            "text_x": _f(x(a) + 3),
        }
        for name, a, b, chaos in phases
    ]
    marks = {"y1": _f(PAD_T), "y2": _f(H - PAD_B), "text_y": _f(PAD_T + 10)}
    return _chart(
        "series",
        title,
        H + 16,
        axis=_axis(0.0, top, fmt="{:.3g}"),
        bands=bands,
        band_top=_f(PAD_T),
        band_height=_f(H - PAD_B - PAD_T),
        lines=[p for p in paths if p["d"]],
        abort=None if abort_s is None else {"x": _f(x(abort_s)), **marks},
        threshold=None if threshold is None else {"y": _f(_y(threshold, 0.0, top)), "x1": left, "x2": right},
        legend=[{"name": p["name"], "color": p["color"]} for p in paths],
        legend_x=PAD_L,
        legend_y=H + 8,
        axis_label_y=_f(H - PAD_B + 14),
        end=f"{end_s:.0f}",
        empty=not any(p["d"] for p in paths),
    )
