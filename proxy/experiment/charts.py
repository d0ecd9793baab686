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

__all__ = [
    "FONT_PX",
    "Chart",
    "bars_with_intervals",
    "box_plots",
    "fmt_px",
    "hbars",
    "make_chart",
    "series",
    "timeline",
    "y_axis",
    "y_of",
]

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


def fmt_px(v: float) -> str:
    """A coordinate as the SVG gets it: one decimal."""
    return f"{v:.1f}"


def make_chart(kind: str, title: str, height: float = H, **parts: Any) -> Chart:
    """One chart for charts.html.j2: its `kind` (the template's macro), title, size and drawing parts."""
    return {"kind": kind, "title": title, "width": W, "height": fmt_px(height), **parts}


def y_axis(lo: float, hi: float, ticks: int = 4, fmt: str = "{:.0%}") -> Chart:
    """A vertical value axis from `lo` to `hi` on the standard plot: `ticks` + 1 labelled grid lines."""
    rows = []
    for i in range(ticks + 1):
        y = H - PAD_B - (H - PAD_B - PAD_T) * i / ticks
        rows.append({"y": fmt_px(y), "text_y": fmt_px(y + 4), "label": fmt.format(lo + (hi - lo) * i / ticks)})
    return {"x1": PAD_L, "x2": W - 8, "text_x": PAD_L - 4, "ticks": rows}


def y_of(v: float, lo: float, hi: float) -> float:
    """Where `v` sits on the standard plot's vertical axis from `lo` to `hi`."""
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
        return {**self.labels[i], "x": fmt_px(self.label_x), "y": fmt_px(self.mid(i) + FONT_PX * 0.35)}


def _value_axis(lo: float, hi: float, fmt: str, labels: list[str], ticks: int = 4) -> tuple[_Rows, Chart]:
    """The rows, and vertical grid lines with their values under the rows."""
    texts = [fmt.format(lo + (hi - lo) * i / ticks) for i in range(ticks + 1)]
    # The last tick's label is centred on the plot's right edge: keep its right half inside the chart.
    rows = _Rows(labels, right_pad=max(GAP, text_width(texts[-1], FONT_PX) / 2 + 2), fill=True)
    grid = [{"x": fmt_px(rows.x(lo + (hi - lo) * i / ticks, lo, hi)), "label": t} for i, t in enumerate(texts)]
    axis = {"y1": fmt_px(PAD_T - 4), "y2": fmt_px(rows.bottom), "text_y": fmt_px(rows.bottom + 14), "ticks": grid}
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
                "x": fmt_px(rows.left),
                "y": fmt_px(bar_top),
                "width": fmt_px(rows.x(rate, 0, 1) - rows.left),
                "height": fmt_px(bar_height),
                "fill": "#e07b39" if chaos else "#4a90d9",
                "tip": f"{label}: {rate:.1%} [{lo:.1%}, {hi:.1%}]",
            }
        bars.append(
            {
                "label": rows.label(i),
                "rect": rect,
                "mid": fmt_px(mid),
                "cap_top": fmt_px(mid - 5),
                "cap_bottom": fmt_px(mid + 5),
                "lo": fmt_px(rows.x(lo, 0, 1)),
                "hi": fmt_px(rows.x(hi, 0, 1)),
            }
        )
    return make_chart("bars", title, rows.bottom + AXIS_BAND, axis=axis, bars=bars)


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
                "min": fmt_px(q[0]),
                "max": fmt_px(q[100]),
                "top": fmt_px(box_top),
                "bottom": fmt_px(box_top + box_height),
                "q25": fmt_px(q[25]),
                "width": fmt_px(max(1.0, q[75] - q[25])),
                "height": fmt_px(box_height),
                "median": fmt_px(q[50]),
                "tip": f"p50 {percentile(vs, 50) or 0.0:.2f}s",
                "dots": [
                    {"cx": fmt_px(rows.x(v, 0, top_s)), "cy": fmt_px(mid + ((j % 5) - 2) * 2)}
                    for j, v in enumerate(vs[:400])
                ],
            }
        boxes.append({"label": rows.label(i), "mid": fmt_px(mid), "box": box})
    return make_chart("boxes", title, rows.bottom + AXIS_BAND, axis=axis, boxes=boxes)


def timeline(points: list[tuple[float, str, str]], duration_s: float, title: str) -> Chart:
    """Violations over time: (seconds since start, severity, label) as cumulative steps per severity."""
    end = max([duration_s] + [t for t, _, _ in points]) or 1.0
    total = max(1, len(points))
    lines = []
    for sev, color in SEVERITY_COLORS.items():
        ts = sorted(t for t, s, _ in points if s == sev)
        if not ts:
            continue
        path, count = [f"M{PAD_L},{y_of(0, 0, total):.1f}"], 0
        for t in ts:
            count += 1
            path += [f"H{PAD_L + (W - PAD_L - 8) * t / end:.1f}", f"V{y_of(count, 0, total):.1f}"]
        path.append(f"H{W - 8}")
        lines.append({"d": " ".join(path), "color": color, "tip": f"{sev}: {count}"})
    legend = [{"name": s, "color": c} for s, c in SEVERITY_COLORS.items()]
    return make_chart(
        "timeline",
        title,
        # integer counts: no more ticks than violations, so no label repeats
        axis=y_axis(0.0, float(total), ticks=min(4, total), fmt="{:.0f}"),
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
                "bar_y": fmt_px(rows.bar(i)[0]),
                "width": fmt_px(width),
                "note_x": fmt_px(rows.left + width + 4),
            }
        )
    return make_chart(
        "hbars",
        title,
        max(60, rows.bottom + GAP),
        rows=out,
        left=fmt_px(rows.left),
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
            d.append(f"{pen}{x(t):.1f},{y_of(v, 0.0, top):.1f}")
            pen = "L"
        paths.append({"d": " ".join(d), "color": LINE_COLORS[i % len(LINE_COLORS)], "tip": name, "name": name})
    bands = [
        {
            "x": fmt_px(x(a)),
            "width": fmt_px(max(0.5, x(b) - x(a))),
            "fill": "#fbe3d3" if chaos else "#f2f2f2",
            "label": name,
            "text_x": fmt_px(x(a) + 3),
        }
        for name, a, b, chaos in phases
    ]
    marks = {"y1": fmt_px(PAD_T), "y2": fmt_px(H - PAD_B), "text_y": fmt_px(PAD_T + 10)}
    return make_chart(
        "series",
        title,
        H + 16,
        axis=y_axis(0.0, top, fmt="{:.3g}"),
        bands=bands,
        band_top=fmt_px(PAD_T),
        band_height=fmt_px(H - PAD_B - PAD_T),
        lines=[p for p in paths if p["d"]],
        abort=None if abort_s is None else {"x": fmt_px(x(abort_s)), **marks},
        threshold=None if threshold is None else {"y": fmt_px(y_of(threshold, 0.0, top)), "x1": left, "x2": right},
        legend=[{"name": p["name"], "color": p["color"]} for p in paths],
        legend_x=PAD_L,
        legend_y=H + 8,
        axis_label_y=fmt_px(H - PAD_B + 14),
        end=f"{end_s:.0f}",
        empty=not any(p["d"] for p in paths),
    )
