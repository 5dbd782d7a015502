"""Tests of runner.control.backoff: per-key exponential backoff with jitter."""

from __future__ import annotations

import random
from typing import Any

import pytest

from runner.control.backoff import Backoff


def no_jitter() -> float:
    """A random source that makes jitter remove nothing."""
    return 0.0


def full_jitter() -> float:
    """A random source that makes jitter remove as much as allowed."""
    return 1.0


def test_delays_grow_exponentially() -> None:
    backoff = Backoff(base=0.5, factor=2, cap=300, jitter=0.1, rng=no_jitter)
    delays = [backoff.next_delay("a") for _ in range(5)]
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0]
    assert backoff.failures("a") == 5


def test_defaults() -> None:
    backoff = Backoff(rng=no_jitter)
    assert [backoff.next_delay("a") for _ in range(3)] == [0.5, 1.0, 2.0]
    assert (backoff.base, backoff.factor, backoff.cap, backoff.jitter) == (0.5, 2.0, 300.0, 0.1)


def test_delays_stop_at_cap() -> None:
    backoff = Backoff(base=1, factor=3, cap=10, jitter=0, rng=no_jitter)
    assert [backoff.next_delay("a") for _ in range(5)] == [1, 3, 9, 10, 10]


def test_many_failures_neither_overflow_nor_exceed_cap() -> None:
    backoff = Backoff(base=0.5, factor=2, cap=300, jitter=0.1, rng=no_jitter)
    for _ in range(5000):
        delay = backoff.next_delay("a")
    assert delay == 300


def test_factor_one_is_constant() -> None:
    backoff = Backoff(base=2, factor=1, cap=10, jitter=0, rng=no_jitter)
    assert [backoff.next_delay("a") for _ in range(3)] == [2, 2, 2]


def test_jitter_only_shortens() -> None:
    backoff = Backoff(base=10, factor=2, cap=100, jitter=0.1, rng=full_jitter)
    delays = [backoff.next_delay("a") for _ in range(6)]
    assert delays == pytest.approx([9.0, 18.0, 36.0, 72.0, 90.0, 90.0])


def test_jitter_from_seeded_random_is_deterministic_and_bounded() -> None:
    first = Backoff(jitter=0.2, rng=random.Random(42))
    second = Backoff(jitter=0.2, rng=random.Random(42))
    reference = Backoff(jitter=0.2, rng=no_jitter)
    delays = [first.next_delay("a") for _ in range(20)]
    assert delays == [second.next_delay("a") for _ in range(20)]
    for delay in delays:
        undithered = reference.next_delay("a")
        assert undithered * 0.8 <= delay <= undithered
    assert len(set(delays[-5:])) == 5  # capped delays still spread out


def test_out_of_range_random_values_are_clamped() -> None:
    assert Backoff(base=1, jitter=0.5, rng=lambda: 7.0).next_delay("a") == 0.5
    assert Backoff(base=1, jitter=0.5, rng=lambda: -3.0).next_delay("a") == 1.0


def test_reset_starts_over() -> None:
    backoff = Backoff(base=1, factor=2, cap=100, rng=no_jitter)
    backoff.next_delay("a")
    backoff.next_delay("a")
    backoff.reset("a")
    assert backoff.failures("a") == 0
    assert backoff.next_delay("a") == 1
    backoff.reset("never seen")  # no error


def test_keys_are_independent() -> None:
    backoff = Backoff(base=1, factor=2, cap=100, rng=no_jitter)
    key_a = ("ns", "a")
    key_b = ("ns", "b")
    assert [backoff.next_delay(key_a) for _ in range(3)] == [1, 2, 4]
    assert backoff.next_delay(key_b) == 1
    backoff.reset(key_a)
    assert backoff.failures(key_a) == 0
    assert backoff.failures(key_b) == 1
    assert backoff.next_delay(key_b) == 2


@pytest.mark.parametrize(
    "kwargs",
    [
        {"base": 0},
        {"base": -1},
        {"factor": 0.5},
        {"cap": 0.1, "base": 1},
        {"jitter": -0.1},
        {"jitter": 1},
    ],
)
def test_invalid_parameters_are_rejected(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        Backoff(**kwargs)
