"""Geometry of the dose-response chart in a search's report.html (drawn by templates/charts.html.j2).

The parameter runs left to right (on a log axis for a log search), the share of good runs bottom to
top: the fitted curve, the goal's target dashed, the breaking point's interval shaded with the estimate
as a line, and every level the search ran as a dot at its observed share with its Wilson interval.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from brownout.proxy.experiment.charts import FONT_PX, PAD_B, PAD_L, PAD_T, Chart, fmt_px, make_chart, y_axis, y_of
from brownout.proxy.experiment.charts import H as HEIGHT
from brownout.proxy.experiment.charts import W as WIDTH
from brownout.proxy.experiment.textfit import text_width

__all__ = ["dose_response", "value_ticks"]

logger = logging.getLogger(__name__)

RIGHT = WIDTH - 8
BOTTOM = HEIGHT - PAD_B


def value_ticks(low: float, high: float, log: bool, most: int = 7) -> list[float]:
    """Round values to label the axis: 1-2-5 steps on a log axis, even steps on a linear one."""
    if log:
        ticks = [
            m * 10.0**e
            for e in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
            for m in (1, 2, 5)
            if low <= m * 10.0**e <= high
        ]
        while len(ticks) > most:
            ticks = ticks[::2]
        return ticks
    raw = (high - low) / (most - 1)
    step = min(
        m * 10.0 ** math.floor(math.log10(raw))
        for m in (1, 2, 2.5, 5, 10)
        if m * 10.0 ** math.floor(math.log10(raw)) >= raw
    )
    return [i * step for i in range(math.ceil(low / step), math.floor(high / step) + 1)]


def _label(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:g}"


def dose_response(report: dict[str, Any]) -> Chart:
    """The chart of a search report (report.json's document)."""
    s = report["search"]
    low, high, log = float(s["searched_from"]), float(s["range"][1]), s["scale"] == "log"

    def x(v: float) -> float:
        v = min(max(v, low), high)
        t = math.log(v / low) / math.log(high / low) if log else (v - low) / (high - low)
        return PAD_L + (RIGHT - PAD_L) * t

    def y(p: float) -> float:
        return y_of(p, 0.0, 1.0)

    ticks, last = [], -math.inf
    for v in value_ticks(low, high, log):
        label = _label(v)
        half = text_width(label, FONT_PX) / 2
        if x(v) - half > last + 4 and x(v) + half <= WIDTH:  # no two tick labels touch
            ticks.append({"x": fmt_px(x(v)), "label": label})
            last = x(v) + half
    fit = report.get("fit") or {}
    curve = " ".join(f"{'M' if i == 0 else 'L'}{x(v):.1f},{y(p):.1f}" for i, (v, p) in enumerate(fit.get("curve", [])))
    bp = report["breaking_point"]
    band = None
    if bp["estimate"] is not None or any(e is not None for e in bp["interval"]):
        a = low if bp["interval"][0] is None else bp["interval"][0]
        b = high if bp["interval"][1] is None else bp["interval"][1]
        band = {"x": fmt_px(x(a)), "width": fmt_px(max(1.0, x(b) - x(a))), "y": PAD_T, "height": fmt_px(BOTTOM - PAD_T)}
    levels = [
        {
            "cx": fmt_px(x(lv["value"])),
            "cy": fmt_px(y(lv["share"])),
            "lo": fmt_px(y(lv["wilson"][0])),
            "hi": fmt_px(y(lv["wilson"][1])),
            "left": fmt_px(x(lv["value"]) - 3),
            "right": fmt_px(x(lv["value"]) + 3),
            "fill": {"holds": "#2e7d32", "fails": "#c62828"}.get(lv["decision"] or "", "#777"),
            "tip": f"{s['parameter']} = {lv['value']:.4g}: {lv['good']}/{lv['runs']} good "
            f"({lv['share']:.0%}; Wilson [{lv['wilson'][0]:.0%}, {lv['wilson'][1]:.0%}]), {lv['decision'] or 'undecided'}",
        }
        for lv in report["levels"]
        if lv["runs"]
    ]
    estimate = None if bp["estimate"] is None else {"x": fmt_px(x(bp["estimate"])), "y1": PAD_T, "y2": fmt_px(BOTTOM)}
    return make_chart(
        "dose",
        f"Share of good runs against {s['parameter']}",
        HEIGHT + 20,
        axis=y_axis(0.0, 1.0),
        x_ticks=ticks,
        x_tick_y=fmt_px(BOTTOM + 14),
        x_label=f"{s['parameter']} ({'log' if log else 'linear'} scale)",
        x_label_x=fmt_px((PAD_L + RIGHT) / 2),
        x_label_y=fmt_px(BOTTOM + 30),
        curve=curve,
        goal={"y": fmt_px(y(float(s["target"]))), "x1": PAD_L, "x2": RIGHT, "tip": f"goal: {s['goal_label']}"},
        band=band,
        estimate=estimate,
        levels=levels,
        legend_y=fmt_px(HEIGHT + 14),
        legend_x=PAD_L,
    )
