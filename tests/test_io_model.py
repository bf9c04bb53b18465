"""brax_core.io.model: parameter files round-trip and fail clearly."""

import jax.numpy as jnp
import numpy as np
import pytest

from brax_core.io import model


def test_params_round_trip(tmp_path):
    params = ({"w": jnp.arange(6.0).reshape(2, 3)}, [jnp.ones(2, jnp.int32)])
    path = tmp_path / "p.pkl"
    model.save_params(path, params)
    loaded = model.load_params(path)
    np.testing.assert_array_equal(loaded[0]["w"], np.arange(6.0).reshape(2, 3))
    assert loaded[1][0].dtype == np.int32


def test_missing_and_corrupt_files_name_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="nothing"):
        model.load_params(tmp_path / "nothing")
    bad = tmp_path / "bad.pkl"
    bad.write_bytes(b"not a pickle")
    with pytest.raises(ValueError, match="bad.pkl"):
        model.load_params(bad)
