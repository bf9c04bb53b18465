"""Argument checks shared by both trainers (brax_core's JAX PPO and torch_ppo), so they fail with the same
messages: each names the argument and what it accepts."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np


def positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def non_negative_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return int(value)


def real(name: str, value: Any, low: float | None = None, high: float | None = None, open_low: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.number) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    value = float(value)
    if low is not None and (value < low or (open_low and value == low)):
        bound = f"> {low}" if open_low else f">= {low}"
        raise ValueError(f"{name} must be {bound}{'' if high is None else f' and <= {high}'}, got {value!r}")
    if high is not None and value > high:
        raise ValueError(f"{name} must be <= {high}, got {value!r}")
    return value


def boolean(name: str, value: Any) -> bool:
    if not isinstance(value, bool | np.bool_):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def callable_arg(name: str, value: Any) -> Callable[..., Any]:
    if not callable(value):
        raise TypeError(f"{name} must be callable, got {value!r}")
    return value
