"""The hyperparameter flags of ``train`` and ``compare``: one flag per configuration field name across the
algorithms (``hparams.FIELDS``), each in the ``--help`` section of its group, its help giving the default each
algorithm really uses (the preset's where there is one, else the command line's, and Python's where that differs)
and which algorithms take it.

Plain Python, like the configurations: the command line builds its flags from here before any command runs.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Annotated, Any

import typer

from brax_bridge_app import algorithms, helpformat, hparams
from brax_core.training.validation import FieldSpec

HP_PANEL = "Hyperparameters: {}"
_METAVARS = {"int": "INT", "float": "FLOAT", "sizes": "SIZES", "betas": "BETAS", "name": "KEY"}
_ONLY = {("jax",): " (JAX trainer only)", ("torch",): " (torch trainer only)"}
# A set of choices longer than this is listed in the help text, under a NAME metavar.
_METAVAR_CHOICES = 24


def flag_value(spec: FieldSpec, value: Any) -> str:
    """A value as the flag writes it: a switch by its flag, sizes comma-separated, None by what it means."""
    if value is None:
        if spec.name in hparams.NONE_WORDS:
            return hparams.NONE_WORDS[spec.name]
        if spec.kind == "choice":
            return "NONE"  # the choice that stands for None
        meaning = hparams.unset_meaning(spec)
        if meaning is None:
            raise ValueError(f"{spec.flag}: the schema's help says nothing of what None means, so --help cannot")
        return f"automatic ({meaning})" if spec.kind == "bool" else meaning
    if spec.kind == "bool":
        return spec.flag if value else f"--no-{spec.flag[2:]}"
    return ",".join(map(str, value)) if isinstance(value, tuple) else str(value)


def _by_value(values: dict[str, str], every: tuple[str, ...]) -> str:
    """``{algo: text}`` as "X" where every algorithm of ``every`` has the same, else "X (ppo), Y (apg, shac)"."""
    groups: dict[str, list[str]] = {}
    for algo, text in values.items():
        groups.setdefault(text, []).append(algo)
    if len(groups) == 1 and list(values) == list(every):
        return next(iter(groups))
    return ", ".join(f"{text} ({', '.join(algos)})" for text, algos in groups.items())


def _by_help(helps: dict[str, str]) -> str:
    """Each algorithm's description of one flag: one text where they agree, else "X (ppo); Y (sac)"."""
    groups: dict[str, list[str]] = {}
    for algo, text in helps.items():
        groups.setdefault(text, []).append(algo)
    if len(groups) == 1:
        return next(iter(groups))
    return "; ".join(f"{text} ({', '.join(algos)})" for text, algos in groups.items())


def default_text(spec: FieldSpec) -> str:
    """A flag's default: the preset's, else the command line's for each algorithm that takes it, and Python's
    (the trainers' keyword defaults) where that differs."""
    algos = algorithms.algos_of(spec.name)
    command_line, python = {}, {}
    for algo in algos:
        own = hparams.spec_of(spec.name, algo)
        value = algorithms.default(algo, spec.name)
        command_line[algo] = flag_value(own, value)
        python_default = algorithms.CONFIGS[algo].defaults().get(spec.name, value)
        if spec.name in algorithms.COMMAND_LINE_DEFAULTS[algo] and python_default != value:
            python[algo] = f"{spec.name}={python_default!r}"
    text = f"the preset's, else {_by_value(command_line, algos)}"
    if python:
        text += f"; in Python: {_by_value(python, algos)}"
    return text


def _annotation(spec: FieldSpec, panel: str) -> Any:
    algos = algorithms.algos_of(spec.name)
    text = _by_help({algo: hparams.flag_help(hparams.spec_of(spec.name, algo)) for algo in algos})
    text += _ONLY.get(spec.trainers, "")
    if algos != algorithms.ALGOS:
        text += f" (--algo {'|'.join(algos)})"
    choices = "|".join(spec.choices)
    word = hparams.NONE_WORDS.get(spec.name)
    if word is not None:
        text += f"; an integer {spec.accepted(flags=True)}, or {word}"
    elif spec.kind in ("int", "float") and spec.accepted(flags=True):
        zero = ""
        if spec.name in hparams.ZERO_MEANS_NONE:
            takers = [a for a in algos if hparams.spec_of(spec.name, a).optional]
            only = "" if takers == list(algos) else f" ({', '.join(takers)})"
            zero = f", or 0: {hparams.unset_meaning(spec)}{only}"
        text += f"; {spec.accepted(flags=True)}{zero}"
    elif spec.choices and len(choices) > _METAVAR_CHOICES:
        text += f"; one of {', '.join(spec.choices)}"
    elif spec.kind == "choice" and len({hparams.spec_of(spec.name, a).choices for a in algos}) > 1:
        # one flag, each algorithm's own values
        text += "; " + "; ".join(f"{'|'.join(hparams.spec_of(spec.name, a).choices)} ({a})" for a in algos)
    text = helpformat.with_default(text, default_text(spec))
    if spec.kind == "bool":
        option = typer.Option(f"{spec.flag}/--no-{spec.flag[2:]}", help=text, rich_help_panel=panel)
        return Annotated[bool | None, option]
    if word is not None:  # the word or an integer, read by hparams.from_flags
        option = typer.Option(spec.flag, help=text, rich_help_panel=panel, metavar=f"INT|{word}")
        return Annotated[str | None, option]
    all_choices = sorted({c for a in algos for c in hparams.spec_of(spec.name, a).choices}, key=str.lower)
    choices = "|".join(all_choices) if spec.kind == "choice" else choices
    metavar = _METAVARS.get(spec.kind) or (choices if len(choices) <= _METAVAR_CHOICES else "NAME")
    option = typer.Option(spec.flag, help=text, rich_help_panel=panel, metavar=metavar)
    return Annotated[{"int": int | None, "float": float | None}.get(spec.kind, str | None), option]


def _parameters() -> list[inspect.Parameter]:
    """One keyword parameter (and so one flag) per field, in the ``--help`` section of its group
    (``hparams.GROUPS``); ``None`` means "keep the preset's value"."""
    params = []
    for group, specs in hparams.grouped().items():
        for spec in specs:
            params.append(inspect.Parameter(spec.name, inspect.Parameter.KEYWORD_ONLY, default=None,
                                            annotation=_annotation(spec, HP_PANEL.format(group))))
    return params


def with_hparams(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Adds the hyperparameter flags to a command; the command receives them as one dict ``flag_values``."""
    signature = inspect.signature(fn, eval_str=True)
    own = [p for name, p in signature.parameters.items() if name != "flag_values"]

    @functools.wraps(fn)
    def command(**kwargs: Any) -> Any:
        overrides = {spec.name: kwargs.pop(spec.name) for spec in hparams.FIELDS}
        return fn(flag_values=overrides, **kwargs)

    command.__signature__ = signature.replace(parameters=own + _parameters())
    command.__annotations__ = {p.name: p.annotation for p in command.__signature__.parameters.values()}
    del command.__wrapped__  # typer must read the new signature, not the wrapped function's
    return command
