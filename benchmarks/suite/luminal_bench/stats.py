"""The statistics every path's samples go through, in one place (the paths report raw
samples; medians and spread are computed here, never taken from a path's own summary)."""
from __future__ import annotations

import statistics


def median(samples: list[float]) -> float | None:
    return statistics.median(samples) if samples else None


def spread(samples: list[float]) -> tuple[float, float] | None:
    """(min, max) of the samples: what the report's whiskers show."""
    return (min(samples), max(samples)) if samples else None


def after_warmup(samples: list[float], warmups: int) -> list[float]:
    """Drops the first `warmups` samples (every path runs warmups + iters prefills)."""
    return list(samples[warmups:])


def ratio(ours: float | None, peer: float | None) -> float | None:
    return ours / peer if ours and peer else None
