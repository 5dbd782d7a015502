"""Exponential backoff with jitter, counted per key (for example per custom resource)."""

from __future__ import annotations

import random
from collections.abc import Callable, Hashable

#: A source of uniform random numbers in [0, 1): a ``random.Random`` or a plain function.
RandomSource = random.Random | Callable[[], float]


class Backoff:
    """Delays that grow exponentially with the number of consecutive failures of a key.

    The n-th :meth:`next_delay` for a key (n = 1, 2, ...) is ``base * factor ** (n - 1)``,
    capped at ``cap``, then reduced by a random fraction of at most ``jitter``: the delay lies in
    ``[d * (1 - jitter), d]``. Jitter only ever shortens the delay, so ``cap`` is a hard maximum
    and delays of keys that all reached the cap still spread out.

    Keys are independent. A key is remembered until :meth:`reset`; call it on success and when
    the object is gone. Not thread-safe (meant for one asyncio event loop).
    """

    def __init__(
        self,
        base: float = 0.5,
        factor: float = 2.0,
        cap: float = 300.0,
        jitter: float = 0.1,
        rng: RandomSource | None = None,
    ) -> None:
        """Validate the parameters; ``rng`` defaults to a fresh ``random.Random()``."""
        if base <= 0:
            raise ValueError(f"base must be > 0, not {base}")
        if factor < 1:
            raise ValueError(f"factor must be >= 1, not {factor}")
        if cap < base:
            raise ValueError(f"cap ({cap}) must be >= base ({base})")
        if not 0 <= jitter < 1:
            raise ValueError(f"jitter must be in [0, 1), not {jitter}")
        self.base = base
        self.factor = factor
        self.cap = cap
        self.jitter = jitter
        source = rng if rng is not None else random.Random()
        self._random: Callable[[], float] = (
            source.random if isinstance(source, random.Random) else source
        )
        self._failures: dict[Hashable, int] = {}

    def next_delay(self, key: Hashable) -> float:
        """Count one more failure of ``key`` and return how long to wait before retrying it."""
        count = self._failures.get(key, 0) + 1
        self._failures[key] = count
        return self._jittered(self._undithered(count))

    def reset(self, key: Hashable) -> None:
        """Forget the failures of ``key`` (after a success); unknown keys are fine."""
        self._failures.pop(key, None)

    def failures(self, key: Hashable) -> int:
        """Return the number of :meth:`next_delay` calls for ``key`` since its last reset."""
        return self._failures.get(key, 0)

    def _undithered(self, count: int) -> float:
        """Return the capped delay of the ``count``-th failure, before jitter."""
        delay = self.base
        if self.factor == 1:
            return delay
        for _ in range(count - 1):
            delay *= self.factor
            if delay >= self.cap:
                return self.cap
        return min(delay, self.cap)

    def _jittered(self, delay: float) -> float:
        """Shorten ``delay`` by a random fraction of at most ``jitter``."""
        fraction = min(max(self._random(), 0.0), 1.0)
        return delay * (1.0 - self.jitter * fraction)
