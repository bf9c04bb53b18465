"""The brax-bridge command line run in-process, and the tiny sizes its training tests use (on the `fast` env)."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from brax_bridge_app import cli

runner = CliRunner()

TINY = ["--num-timesteps", "800", "--num-envs", "8", "--batch-size", "8", "--num-minibatches", "2",
        "--unroll-length", "5", "--num-evals", "3", "--num-eval-envs", "8", "--episode-length", "20",
        "--policy-hidden-layer-sizes", "8,8", "--value-hidden-layer-sizes", "8,8"]


def invoke(*args: str):
    return runner.invoke(cli.app, list(args), catch_exceptions=False)


def error_text(result) -> str:
    """click prints usage errors inside a box; collapsed to one line for matching."""
    return re.sub(r"[\s│╭╮╰╯─]+", " ", result.output)
