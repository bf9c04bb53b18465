"""The persistent compile cache: on by default in a per-user folder, movable, and off on request."""

import os
import subprocess
import sys
import threading

import jax
import pytest

from brax_core import compile as compile_options


@pytest.fixture
def jax_cache_settings():
    """Restores the session's cache settings after a test changes them."""
    saved = (jax.config.jax_compilation_cache_dir, jax.config.jax_persistent_cache_min_compile_time_secs)
    yield
    jax.config.update("jax_compilation_cache_dir", saved[0])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", saved[1])


def test_the_environment_variable_moves_the_cache(jax_cache_settings, monkeypatch, tmp_path):
    monkeypatch.setenv(compile_options.CACHE_ENV_VAR, str(tmp_path / "moved"))
    assert compile_options.enable_persistent_cache() == str(tmp_path / "moved")
    assert jax.config.jax_compilation_cache_dir == str(tmp_path / "moved")


def test_an_empty_environment_variable_leaves_jax_alone(jax_cache_settings, monkeypatch):
    jax.config.update("jax_compilation_cache_dir", None)
    monkeypatch.setenv(compile_options.CACHE_ENV_VAR, "")
    assert compile_options.enable_persistent_cache() is None
    assert jax.config.jax_compilation_cache_dir is None


def test_a_folder_the_program_chose_is_kept(jax_cache_settings, monkeypatch, tmp_path):
    monkeypatch.delenv(compile_options.CACHE_ENV_VAR, raising=False)
    jax.config.update("jax_compilation_cache_dir", str(tmp_path / "mine"))
    assert compile_options.enable_persistent_cache() == str(tmp_path / "mine")
    assert jax.config.jax_compilation_cache_dir == str(tmp_path / "mine")


def test_unset_means_the_per_user_folder(jax_cache_settings, monkeypatch, tmp_path):
    monkeypatch.delenv(compile_options.CACHE_ENV_VAR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    jax.config.update("jax_compilation_cache_dir", None)
    expected = str(tmp_path / "brax_bridge" / "jax")
    assert compile_options.enable_persistent_cache() == expected
    assert jax.config.jax_compilation_cache_dir == expected
    assert jax.config.jax_persistent_cache_min_compile_time_secs == 0.5


def test_importing_the_environments_turns_the_cache_on(tmp_path):
    """A library user who never touches JAX's settings gets the cache."""
    env = {k: v for k, v in os.environ.items() if k not in (compile_options.CACHE_ENV_VAR, "JAX_COMPILATION_CACHE_DIR")}
    env["XDG_CACHE_HOME"] = str(tmp_path)
    code = "import jax, brax_core.envs; print(jax.config.jax_compilation_cache_dir)"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == str(tmp_path / "brax_bridge" / "jax")


def _compiles_while_lowering(compile_all, timeout: float) -> bool:
    """Whether ``compile_all`` (``compile_side_by_side``'s signature) compiles the first program while the second is
    being lowered: the first program's compile waits, up to ``timeout``, for the second's lowering to start, which
    only a compile running beside the generator lets happen; a sequential compile times out."""
    compiling, lowering_second = threading.Event(), threading.Event()

    class First:  # stands for a jax.stages.Lowered
        def compile(self):
            compiling.set()
            if not lowering_second.wait(timeout):
                raise TimeoutError("the second program was not lowered while the first compiled")
            return "first"

    def lowered():
        yield First()
        compiling.wait(timeout)
        lowering_second.set()
        yield jax.jit(lambda x: x + 1.0).lower(1.0)

    try:
        first, second = compile_all(lowered())
    except TimeoutError:
        return False
    assert first == "first" and float(second(2.0)) == 3.0
    return True


def test_each_program_compiles_while_the_next_is_lowered():
    """``compile_side_by_side`` hands each program to XLA as soon as it is lowered: on a 2-core CPU the first
    programs compile while the next are traced."""
    assert _compiles_while_lowering(compile_options.compile_side_by_side, timeout=20)
    assert compile_options.compile_side_by_side([]) == []


def test_the_overlap_check_fails_a_sequential_compile():
    sequential = lambda programs: [program.compile() for program in programs]  # noqa: E731
    assert not _compiles_while_lowering(sequential, timeout=0.5)
