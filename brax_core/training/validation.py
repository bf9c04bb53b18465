"""Argument checks shared by both trainers and the hyperparameter schema (``ppo.config.PPOConfig``), so every
entry point fails with the same messages: each names the argument and what it accepts.

Standard library only: the command line's ``--help`` imports this through the schema without loading JAX.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Callable, Iterable
from typing import Any

TRAINERS = ("jax", "torch")
KINDS = ("int", "float", "bool", "sizes", "betas", "activation", "choice", "name", "device")


@dataclasses.dataclass(frozen=True)
class FieldSpec:
    """What one hyperparameter accepts, and its help text.

    ``kind``: 'int', 'float', 'bool', 'sizes' (a sequence of positive ints), 'betas' (Adam's two decay rates, each
    in ``[0, 1)``), 'activation' (a name in
    ``choices`` or a callable), 'choice' (a name in ``choices``, any case, or an enum member whose value is one;
    with ``optional``, the choice 'NONE' stands for ``None``), 'name' (any non-empty string) or 'device' ('cpu',
    'cuda' or 'cuda:<index>', or a ``torch.device`` of one; with ``optional``, 'auto' stands for ``None``).
    ``minimum``/``maximum`` bound numbers (``min_open``: the minimum itself is
    refused). ``optional``: ``None`` is accepted. ``trainers``: which trainers' keyword arguments carry it.
    ``command_line``: whether the command line has a flag of this name (``seed`` has its own ``--seed``).
    ``section``: the ``PPOConfig`` section that holds the field.
    """

    kind: str
    help: str
    minimum: float | None = None
    maximum: float | None = None
    min_open: bool = False
    optional: bool = False
    choices: tuple[str, ...] = ()
    trainers: tuple[str, ...] = TRAINERS
    command_line: bool = True
    name: str = ""
    section: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {self.kind!r}")

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def accepted(self, flags: bool = False) -> str:
        """What the field accepts: 'a number > 0.0 and <= 1.0, or None'; for a flag, its range ('> 0 and <= 1')
        or choices, or '' when the flag's metavar says it all."""
        if flags:
            if self.kind in ("int", "float"):
                return _bounds(self, flags=True)
            return ", ".join(self.choices)
        if self.kind == "float":
            text = " ".join(["a number", _bounds(self, flags=False)]).strip()
        else:
            text = _requirement(self, None, flags=False)
        return text + (", or None" if self.optional else "")


class ConfigError(ValueError):
    """A hyperparameter (or a combination of them) outside what it accepts.

    ``fields`` names the fields involved; ``str(error)`` uses their keyword names, ``flag_message`` their flags.
    """

    def __init__(self, message: str, flag_message: str, fields: tuple[str, ...]):
        super().__init__(message)
        self.flag_message = flag_message
        self.fields = fields


# ------------------------------------------------------------------------------------------------ checks


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not _is_bool(value)


def _is_bool(value: Any) -> bool:
    # numpy's bool is no numbers.Integral; recognised by name so this module needs no numpy.
    return isinstance(value, bool) or (type(value).__module__ == "numpy" and type(value).__name__ in ("bool", "bool_"))


def _is_finite(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not _is_bool(value) and math.isfinite(value)


def _sizes(value: Any) -> tuple[int, ...] | None:
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        return None
    sizes = tuple(value)
    if any(not _is_int(v) or v <= 0 for v in sizes):
        return None
    return tuple(int(v) for v in sizes)


def _betas(value: Any) -> tuple[float, float] | None:
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        return None
    pair = tuple(value)
    if len(pair) != 2 or not all(_is_finite(b) and 0.0 <= b < 1.0 for b in pair):
        return None
    return float(pair[0]), float(pair[1])


def _in_range(spec: FieldSpec, value: float) -> bool:
    low, high = spec.minimum, spec.maximum
    if low is not None and (value < low or (spec.min_open and value == low)):
        return False
    return high is None or value <= high


def check(spec: FieldSpec, value: Any) -> Any:
    """``value`` normalised (numpy scalars to Python, sizes to a tuple), or ``ConfigError`` naming the field."""
    if value is None and spec.optional:
        return None
    if spec.kind == "int" and _is_int(value) and _in_range(spec, value):
        return int(value)
    if spec.kind == "float" and _is_finite(value) and _in_range(spec, value):
        return float(value)
    if spec.kind == "bool" and _is_bool(value):
        return bool(value)
    if spec.kind == "sizes" and (sizes := _sizes(value)) is not None:
        return sizes
    if spec.kind == "betas" and (betas := _betas(value)) is not None:
        return betas
    if spec.kind == "choice" and (chosen := _choice(spec, value)) is not None:
        return None if chosen == "NONE" and spec.optional else chosen
    if spec.kind == "activation":
        if isinstance(value, str) and value.lower() in spec.choices:
            return value.lower()
        if callable(value) and not isinstance(value, str):
            return value
    if spec.kind == "name" and isinstance(value, str) and value:
        return value
    if spec.kind == "device" and (device := _device(value)) is not None:
        return None if device == "auto" and spec.optional else device
    raise ConfigError(
        f"{spec.name} must be {_requirement(spec, value, flags=False)}, got {value!r}",
        f"{spec.flag} must be {_requirement(spec, value, flags=True)}; got {value!r}",
        (spec.name,),
    )


def _device(value: Any) -> str | None:
    """``value`` as a device's name ('cpu', 'cuda', 'cuda:0', 'auto'), or ``None`` when it names none; a
    ``torch.device`` by its text (recognised by name so this module needs no torch)."""
    if type(value).__name__ == "device" and type(value).__module__.split(".")[0] == "torch":
        value = str(value)
    if not isinstance(value, str):
        return None
    text = value.strip().lower()
    kind, _, index = text.partition(":")
    if text in ("auto", "cpu", "cuda") or (kind == "cuda" and index.isdigit()):
        return text
    return None


def _choice(spec: FieldSpec, value: Any) -> str | None:
    """The entry of ``spec.choices`` that ``value`` names (case-insensitively; an enum member by its string value,
    so Brax's own enums are accepted), or ``None``."""
    name = getattr(value, "value", value)
    if not isinstance(name, str):
        return None
    return next((c for c in spec.choices if c.lower() == name.lower()), None)


def _requirement(spec: FieldSpec, value: Any, flags: bool) -> str:
    """What ``spec`` accepts, phrased for the value that failed (for a flag: the rule it broke)."""
    if spec.kind == "int":
        if flags and _is_int(value):
            return _bounds(spec, flags, value)
        if flags:
            return "an integer"
        words = "a positive integer" if spec.minimum == 1 else "a non-negative integer"
        return words if spec.maximum is None else f"an integer in [{spec.minimum}, {spec.maximum}]"
    if spec.kind == "float":
        if not _is_finite(value):
            return "a number" if flags else "a finite number"
        return _bounds(spec, flags, value)
    if spec.kind == "bool":
        return "true or false" if flags else "True or False"
    if spec.kind == "sizes":
        return "one or more positive integers like 64,64" if flags else "a sequence of positive integers"
    if spec.kind == "betas":
        return "two numbers in [0, 1) like 0.9,0.999" if flags else "a pair (b1, b2) of numbers in [0, 1)"
    if spec.kind == "name":
        return "a non-empty string"
    if spec.kind == "device":
        return "auto, cpu, cuda or cuda:<index>" if flags else "'auto', 'cpu', 'cuda' or 'cuda:<index>'"
    if flags:
        return f"one of: {', '.join(spec.choices)}"
    if spec.kind == "choice":
        return f"one of {', '.join(repr(c) for c in spec.choices)}"
    return f"a callable or one of {', '.join(spec.choices)}"


def _bounds(spec: FieldSpec, flags: bool, value: float | None = None) -> str:
    """The bounds as "> 0.0 and <= 1.0"; given the value that broke them, only the broken one for a flag."""
    low, high = spec.minimum, spec.maximum
    fmt = (lambda b: f"{b:g}") if flags else (lambda b: str(float(b) if spec.kind == "float" else b))
    low_text = None if low is None else f"{'>' if spec.min_open else '>='} {fmt(low)}"
    high_text = None if high is None else f"<= {fmt(high)}"
    if value is not None and high is not None and value > high:
        return high_text
    if value is not None and flags:
        return low_text
    return " and ".join(t for t in (low_text, high_text) if t)


# ---- one-off checks of trainer arguments outside the schema (device counts, threads, flags)


def positive_int(name: str, value: Any) -> int:
    return check(FieldSpec("int", "", minimum=1, name=name), value)


def real(name: str, value: Any, low: float | None = None, high: float | None = None, open_low: bool = False) -> float:
    return check(FieldSpec("float", "", minimum=low, maximum=high, min_open=open_low, name=name), value)


def boolean(name: str, value: Any) -> bool:
    return check(FieldSpec("bool", "", name=name), value)


def callable_arg(name: str, value: Any) -> Callable[..., Any]:
    if not callable(value):
        raise TypeError(f"{name} must be callable, got {value!r}")
    return value
