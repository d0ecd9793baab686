"""A price-table price set as per-token rates, read once, so an exchange is priced with a few multiplications.

genai-prices prices a usage through a general unit engine that costs a few hundred microseconds a
call, as much as the rest of an exchange's checks together. Yet a price set is affine in the token
counts of each kind (uncached input, cache reads, cache writes kept 5 minutes and 1 hour, output)
wherever its tiers do not change: a tier applies to all tokens once the prompt's input tokens pass its
start. So a price set's input-token range is cut into bands at its tiers' starts, and each band's
rates are read from the table itself by pricing one token of each kind on top of a prompt in that
band. Rates are trusted only once the table agrees with them at both ends of their band and on the
exchange that first needed them; a price set holding anything else than rates and tiers, or a band
too narrow to read, is priced by the table every time.
"""

from __future__ import annotations

import bisect
import logging
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from brownout.core.exchange import Usage

__all__ = ["Amounts", "Counts", "RateTable"]

log = logging.getLogger(__name__)

Amounts = tuple[Decimal, Decimal, Decimal]  # input, output, total prices
_KINDS = 5  # uncached input, cache read, 5-minute cache write, 1-hour cache write, output
_PROBE_OUTPUT = 7  # output tokens of the points checked at a band's ends


@dataclass(frozen=True, slots=True)
class Counts:
    """An exchange's tokens as the table splits a prompt: its cache reads and writes apart, so each is
    priced at its own rate.

    Both are parts of `input`; counts that claim more than the whole (a provider's or a proxy's bug)
    are capped to it, since the table refuses them and the call would go unpriced.
    """

    input: int
    output: int
    cache_read: int = 0
    cache_write: int = 0
    cache_write_1h: int = 0

    @classmethod
    def of(cls, usage: Usage) -> Counts:
        inp = usage.input_tokens or 0
        read = min(usage.cache_read_tokens or 0, inp)
        write = min(usage.cache_write_tokens or 0, inp - read)
        return cls(inp, usage.output_tokens or 0, read, write, min(usage.cache_write_1h_tokens or 0, write))

    @classmethod
    def by_kinds(cls, uncached: int, read: int, write_5m: int, write_1h: int, output: int) -> Counts:
        return cls(uncached + read + write_5m + write_1h, output, read, write_5m + write_1h, write_1h)

    def usage(self, prices: Any) -> Any:
        """The table's usage."""
        return prices.Usage(
            input_tokens=self.input,
            output_tokens=self.output,
            cache_read_tokens=self.cache_read,
            cache_write_tokens=self.cache_write,
            cache_write_1h_tokens=self.cache_write_1h,
        )

    def kinds(self) -> tuple[int, int, int, int, int]:
        """Tokens of each kind (the kinds do not overlap)."""
        uncached = self.input - self.cache_read - self.cache_write
        return uncached, self.cache_read, self.cache_write - self.cache_write_1h, self.cache_write_1h, self.output


@dataclass(frozen=True, slots=True)
class _Rates:
    """Prices as an affine function of the token kinds within one band: the prices at `origin`, and per
    token of each kind away from it."""

    origin: tuple[int, ...]
    at_origin: Amounts
    per_token: tuple[Amounts, ...]

    def price(self, counts: Counts) -> Amounts:
        inp, out, total = self.at_origin
        for n, o, (di, do, dt) in zip(counts.kinds(), self.origin, self.per_token, strict=True):
            if n != o:
                inp, out, total = inp + (n - o) * di, out + (n - o) * do, total + (n - o) * dt
        return inp, out, total


@dataclass(slots=True)
class RateTable:
    """One price set's rates, band by band as exchanges need them (None: that band is priced by the table)."""

    price_set: Any  # kept, so its id (the cache key) cannot be reused while the table lives
    starts: tuple[int, ...]  # tier starts: a tier applies once input tokens exceed its start
    bands: dict[int, _Rates | None] = field(default_factory=dict)

    @classmethod
    def of(cls, prices: Any, price_set: Any) -> RateTable | None:
        """The price set's table, or None when it holds anything but rates and tiers."""
        starts: set[int] = set()
        for key, value in vars(price_set).items():
            if key.startswith("_") or value is None or type(value) is Decimal:
                continue
            if not isinstance(value, prices.types.TieredPrices):
                return None
            starts.update(tier.start for tier in value.tiers)
        return cls(price_set, tuple(sorted(starts)))

    def band(self, counts: Counts) -> int:
        return bisect.bisect_left(self.starts, counts.input)  # the starts the input tokens exceed

    def price(self, counts: Counts) -> Amounts | None:
        """The prices of `counts` from rates read earlier; None when their band has none (yet)."""
        rates = self.bands.get(self.band(counts))
        return None if rates is None else rates.price(counts)

    def learn(self, prices: Any, counts: Counts, priced: Amounts) -> None:
        """Read the rates of the band of `counts` (which the table priced `priced`), unless tried before."""
        band = self.band(counts)
        if band in self.bands:
            return
        rates = self._read(prices, band)
        if rates is not None and rates.price(counts) != priced:
            rates = None
        if rates is None:
            log.debug("price set %s: band %d priced by the table (its rates do not hold)", self.price_set, band)
        self.bands[band] = rates

    def _read(self, prices: Any, band: int) -> _Rates | None:
        low = self.starts[band - 1] + 1 if band else 0
        high = self.starts[band] if band < len(self.starts) else None
        if high is not None and high < low + 1:
            return None  # no room for one more token in the band
        origin = Counts(low, 0)
        at_origin = self._table(prices, origin)
        per_token = []
        for kind in range(_KINDS):
            step = [0] * _KINDS
            step[kind] = 1
            moved = Counts.by_kinds(*(a + b for a, b in zip(origin.kinds(), step, strict=True)))
            at = self._table(prices, moved)
            per_token.append((at[0] - at_origin[0], at[1] - at_origin[1], at[2] - at_origin[2]))
        rates = _Rates(origin.kinds(), at_origin, tuple(per_token))
        # The band's other end, every kind present: tiers selected some other way would show here.
        top = high if high is not None else low + 1_000_000
        quarter = max(0, (top - low) // 4)
        far = Counts(top, _PROBE_OUTPUT, quarter, quarter, quarter // 2)
        return rates if rates.price(far) == self._table(prices, far) else None

    def _table(self, prices: Any, counts: Counts) -> Amounts:
        calc = self.price_set.calc_price(counts.usage(prices))
        return calc["input_price"], calc["output_price"], calc["total_price"]
