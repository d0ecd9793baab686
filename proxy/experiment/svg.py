"""Tiny inline-SVG charts for the HTML report: no scripts, no fonts, no network."""

from __future__ import annotations

from html import escape

__all__ = ["bars_with_intervals", "box_plots", "hbars", "timeline"]

W, H, PAD_L, PAD_B, PAD_T = 560, 220, 44, 40, 14
SEVERITY_COLORS = {"info": "#6b8fb3", "warning": "#d9a300", "error": "#d9534f", "critical": "#7b1fa2"}


def _svg(body: str, title: str, height: int = H) -> str:
    return (
        f'<svg role="img" aria-label="{escape(title)}" viewBox="0 0 {W} {height}" width="{W}" height="{height}" '
        f'font-family="sans-serif" font-size="11"><title>{escape(title)}</title>{body}</svg>'
    )


def _y_axis(lo: float, hi: float, ticks: int = 4, fmt: str = "{:.0%}") -> str:
    out = []
    for i in range(ticks + 1):
        v = lo + (hi - lo) * i / ticks
        y = H - PAD_B - (H - PAD_B - PAD_T) * i / ticks
        out.append(
            f'<line x1="{PAD_L}" x2="{W - 8}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e5e5e5"/>'
            f'<text x="{PAD_L - 4}" y="{y + 4:.1f}" text-anchor="end" fill="#555">{fmt.format(v)}</text>'
        )
    return "".join(out)


def _y(v: float, lo: float, hi: float) -> float:
    span = (hi - lo) or 1.0
    return H - PAD_B - (H - PAD_B - PAD_T) * (v - lo) / span


def bars_with_intervals(items: list[tuple[str, float | None, float, float, bool]], title: str) -> str:
    """(label, rate, ci_low, ci_high, chaos) per bar, 0..1 scale, with interval whiskers."""
    n = max(1, len(items))
    slot = (W - PAD_L - 8) / n
    body = [_y_axis(0.0, 1.0)]
    for i, (label, rate, lo, hi, chaos) in enumerate(items):
        x = PAD_L + i * slot + slot * 0.2
        w = slot * 0.6
        if rate is not None:
            y = _y(rate, 0, 1)
            body.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{H - PAD_B - y:.1f}" '
                f'fill="{"#e07b39" if chaos else "#4a90d9"}"><title>{escape(label)}: {rate:.1%} '
                f"[{lo:.1%}, {hi:.1%}]</title></rect>"
            )
        cx = x + w / 2
        body.append(
            f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{_y(lo, 0, 1):.1f}" y2="{_y(hi, 0, 1):.1f}" stroke="#222"/>'
            f'<line x1="{cx - 6:.1f}" x2="{cx + 6:.1f}" y1="{_y(lo, 0, 1):.1f}" y2="{_y(lo, 0, 1):.1f}" stroke="#222"/>'
            f'<line x1="{cx - 6:.1f}" x2="{cx + 6:.1f}" y1="{_y(hi, 0, 1):.1f}" y2="{_y(hi, 0, 1):.1f}" stroke="#222"/>'
            f'<text x="{cx:.1f}" y="{H - PAD_B + 14}" text-anchor="middle">{escape(label)}</text>'
        )
    return _svg("".join(body), title)


def box_plots(items: list[tuple[str, list[float]]], title: str) -> str:
    """Per label: whiskers min..max, box p25..p75, median line, points as dots (seconds)."""
    from brownout.proxy.experiment.stats import percentile

    values = [v for _, vs in items for v in vs]
    hi = max(values) * 1.1 if values else 1.0
    n = max(1, len(items))
    slot = (W - PAD_L - 8) / n
    body = [_y_axis(0.0, hi, fmt="{:.1f}s")]
    for i, (label, vs) in enumerate(items):
        cx = PAD_L + i * slot + slot / 2
        body.append(f'<text x="{cx:.1f}" y="{H - PAD_B + 14}" text-anchor="middle">{escape(label)}</text>')
        if not vs:
            continue
        q = {k: percentile(vs, k) or 0.0 for k in (0, 25, 50, 75, 100)}
        body.append(
            f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{_y(q[0], 0, hi):.1f}" y2="{_y(q[100], 0, hi):.1f}" stroke="#444"/>'
            f'<rect x="{cx - 14:.1f}" y="{_y(q[75], 0, hi):.1f}" width="28" '
            f'height="{max(1.0, _y(q[25], 0, hi) - _y(q[75], 0, hi)):.1f}" fill="#cfe0f3" stroke="#444"/>'
            f'<line x1="{cx - 14:.1f}" x2="{cx + 14:.1f}" y1="{_y(q[50], 0, hi):.1f}" y2="{_y(q[50], 0, hi):.1f}" '
            f'stroke="#c0392b" stroke-width="2"><title>p50 {q[50]:.2f}s</title></line>'
        )
        for j, v in enumerate(vs[:400]):
            body.append(f'<circle cx="{cx + 20 + (j % 7) * 2:.1f}" cy="{_y(v, 0, hi):.1f}" r="1.5" fill="#888"/>')
    return _svg("".join(body), title)


def timeline(points: list[tuple[float, str, str]], duration_s: float, title: str) -> str:
    """Violations over time: (seconds since start, severity, label) as cumulative steps per severity."""
    end = max([duration_s] + [t for t, _, _ in points]) or 1.0
    total = max(1, len(points))
    body = [_y_axis(0.0, float(total), ticks=min(4, total), fmt="{:.0f}")]  # integer counts: no repeated labels
    for sev, color in SEVERITY_COLORS.items():
        ts = sorted(t for t, s, _ in points if s == sev)
        if not ts:
            continue
        path, count = [f"M{PAD_L},{_y(0, 0, total):.1f}"], 0
        for t in ts:
            x = PAD_L + (W - PAD_L - 8) * t / end
            path.append(f"H{x:.1f}")
            count += 1
            path.append(f"V{_y(count, 0, total):.1f}")
        path.append(f"H{W - 8}")
        body.append(
            f'<path d="{" ".join(path)}" fill="none" stroke="{color}" stroke-width="2"><title>{sev}: {count}</title></path>'
        )
    legend = " ".join(f'<tspan fill="{c}">■ {s}</tspan>' for s, c in SEVERITY_COLORS.items())
    body.append(f'<text x="{PAD_L}" y="{H - 8}">{legend} · 0 … {end:.0f} s</text>')
    return _svg("".join(body), title)


def hbars(items: list[tuple[str, float | None, str]], title: str) -> str:
    """Horizontal bars 0..1: (label, rate, note)."""
    row = 22
    height = max(60, PAD_T + row * len(items) + 20)
    left = 200
    body = []
    for i, (label, rate, note) in enumerate(items):
        y = PAD_T + i * row
        width = (W - left - 60) * (rate or 0.0)
        body.append(
            f'<text x="{left - 6}" y="{y + 14}" text-anchor="end">{escape(label[:34])}</text>'
            f'<rect x="{left}" y="{y + 3}" width="{width:.1f}" height="{row - 6}" fill="#d9534f"/>'
            f'<text x="{left + width + 4:.1f}" y="{y + 14}" fill="#333">{escape(note)}</text>'
        )
    if not items:
        body.append(f'<text x="{PAD_L}" y="{PAD_T + 16}" fill="#777">no faults were injected</text>')
    return _svg("".join(body), title, height)
