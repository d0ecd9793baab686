"""The search's coordinate: u in [0, 1] from the safe end of the range (0) to its harsh end (1).

Bisection, the sequential tests and the dose-response fit all work in u, so a log scale is searched
geometrically and a parameter that is harsher when lower (a stream cut after fewer events) is searched
the same way as one that is harsher when higher (more latency). Integer parameters get integer levels.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Literal

__all__ = ["LOG_FLOOR", "Scale"]

logger = logging.getLogger(__name__)

LOG_FLOOR = 1e-3  # a log range from 0 starts at this fraction of its upper end (a log scale has no room for 0)


@dataclass(frozen=True)
class Scale:
    """Maps u to the parameter's value and back; `resolution` is the precision asked of the search."""

    low: float
    high: float
    kind: Literal["linear", "log"] = "linear"
    harsher: Literal["higher", "lower"] = "higher"
    integer: bool = False
    resolution: float | None = None  # parameter units (linear) or a ratio (log: 0.05 is 5%); None: the default

    @property
    def bottom(self) -> float:
        """The range's lower end as searched (a log range from 0 starts above it)."""
        if self.kind == "log" and self.low <= 0:
            floor = self.high * LOG_FLOOR
            return max(1.0, floor) if self.integer else floor
        return self.low

    def at(self, u: float) -> float:
        """The parameter's value at u, unrounded (a fitted curve, an estimate between integer levels)."""
        t = u if self.harsher == "higher" else 1.0 - u
        a, b = self.bottom, self.high
        x = a + t * (b - a) if self.kind == "linear" else math.exp(math.log(a) + t * (math.log(b) - math.log(a)))
        return min(max(x, a), b)  # float error at the ends

    def value(self, u: float) -> float:
        """The level's value at u: rounded for an integer parameter."""
        x = self.at(u)
        return float(round(x)) if self.integer else x

    def u(self, x: float) -> float:
        """The coordinate of a value inside the range."""
        a, b = self.bottom, self.high
        t = (x - a) / (b - a) if self.kind == "linear" else (math.log(x) - math.log(a)) / (math.log(b) - math.log(a))
        t = min(max(t, 0.0), 1.0)
        return t if self.harsher == "higher" else 1.0 - t

    @property
    def step(self) -> float:
        """The resolution as a width in u; the search stops refining below it."""
        a, b = self.bottom, self.high
        if self.kind == "linear":
            res = self.resolution if self.resolution is not None else (b - a) / 50
            if self.integer:
                res = max(res, 1.0)
            return min(1.0, res / (b - a))
        ratio = 1.0 + (self.resolution if self.resolution is not None else 0.05)
        return min(1.0, math.log(ratio) / (math.log(b) - math.log(a)))

    @property
    def grid_levels(self) -> int:
        """Levels of a fixed grid over the range, spaced at the resolution (both ends included)."""
        levels = math.ceil(1.0 / self.step - 1e-9) + 1
        if self.integer:
            levels = min(levels, int(self.high - self.bottom) + 1)
        return levels
