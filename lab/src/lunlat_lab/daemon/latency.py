"""Service time of one I/O: a lognormal latency draw plus transfer time, minus the I/O path's cost."""

from __future__ import annotations

import math
import random

MIB = 1024 * 1024


def lognormal_params(mean: float, cv: float) -> tuple[float, float]:
    """mu and sigma of the lognormal with this mean and coefficient of variation."""
    sigma2 = math.log1p(cv * cv)
    return math.log(mean) - sigma2 / 2, math.sqrt(sigma2)


def sample_latency_ms(mean_ms: float, jitter: float, rng: random.Random) -> float:
    """One latency draw: lognormal with mean `mean_ms` and coefficient of variation `jitter`.

    Lognormal because storage latency is positive and right-skewed; mu is shifted by -sigma^2/2 so
    the mean stays `mean_ms` whatever the jitter (the averages the exporter shows are the target).
    """
    if mean_ms <= 0:
        return 0.0
    if jitter <= 0:
        return mean_ms
    mu, sigma = lognormal_params(mean_ms, jitter)
    # normalvariate, not gauss: gauss caches a second value and is not safe across threads.
    return math.exp(rng.normalvariate(mu, sigma))


def service_seconds(latency_ms: float, nbytes: int, bandwidth_mib_s: float, overhead_ms: float) -> float:
    """How long an I/O holds its slot: latency plus transfer time, minus what the I/O path costs
    anyway (FUSE round trip, Python, the loop driver), so diskstats shows the target, not target +
    overhead. Never negative: a target below the overhead comes out at the overhead."""
    transfer_ms = nbytes / (bandwidth_mib_s * MIB) * 1000 if bandwidth_mib_s > 0 else 0.0
    return max(0.0, latency_ms + transfer_ms - overhead_ms) / 1000
