"""brax_bridge conversions: zero-copy by DLPack, dtype identity, counted copies, and GPU memory-sharing set-up."""

import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import struct
from tensordict import TensorDict

import brax_bridge
from brax_bridge import device_rule, jax_to_torch, torch_to_jax

SHARED_DTYPES = [
    (jnp.float16, torch.float16),
    (jnp.bfloat16, torch.bfloat16),
    (jnp.float32, torch.float32),
    (jnp.int8, torch.int8),
    (jnp.int16, torch.int16),
    (jnp.int32, torch.int32),
    (jnp.uint8, torch.uint8),
    (jnp.bool_, torch.bool),
]


def _copies() -> int:
    return brax_bridge.stats().copies


@pytest.mark.parametrize(("jdtype", "tdtype"), SHARED_DTYPES, ids=lambda d: str(d))
def test_round_trip_keeps_dtype_and_memory(jdtype, tdtype):
    before = _copies()
    x = jnp.arange(24).reshape(4, 6).astype(jdtype)
    t = jax_to_torch(x)
    assert t.dtype == tdtype and tuple(t.shape) == (4, 6)
    assert t.data_ptr() == x.unsafe_buffer_pointer()
    back = torch_to_jax(t)
    assert back.dtype == jdtype
    assert back.unsafe_buffer_pointer() == t.data_ptr()
    np.testing.assert_array_equal(np.asarray(back), np.asarray(x))
    assert _copies() == before


def test_64_bit_types_need_x64_or_an_explicit_cast():
    for dtype in (torch.int64, torch.float64):
        with pytest.raises(TypeError, match="jax_enable_x64.*allow_cast"):
            torch_to_jax(torch.ones(3, dtype=dtype))
    before = brax_bridge.stats()
    cast = torch_to_jax(torch.arange(3, dtype=torch.int64), allow_cast=True)
    assert cast.dtype == jnp.int32 and cast.tolist() == [0, 1, 2]
    assert brax_bridge.stats().copies == before.copies + 1
    # uint64, which torch cannot take the min or max of, narrows to uint32 when its values fit, and only then.
    fits = torch_to_jax(torch.tensor([1, 2**32 - 1], dtype=torch.uint64), allow_cast=True)
    assert fits.dtype == jnp.uint32 and fits.tolist() == [1, 2**32 - 1]
    for big, described in ((2**32, r"values in \[4294967296, 4294967296\]"), (2**63 + 5, r"values of 2\*\*63 or more")):
        with pytest.raises(ValueError, match=rf"cannot narrow tensor \(torch.uint64, {described}\) to torch.uint32"):
            torch_to_jax(torch.tensor([big], dtype=torch.uint64), allow_cast=True)
    # float64 rounds to float32 (infinities stay), but a finite value float32 cannot hold is refused, not made inf
    rounded = torch_to_jax(torch.tensor([1.0000000001, float("inf")], dtype=torch.float64), allow_cast=True)
    assert rounded.dtype == jnp.float32 and rounded.tolist() == [1.0, float("inf")]
    for huge in (torch.tensor([1e300], dtype=torch.float64), torch.tensor([1 + 1e300j], dtype=torch.complex128)):
        with pytest.raises(ValueError, match="finite values beyond 3.4e\\+38 would become infinite"):
            torch_to_jax(huge, allow_cast=True)
    with jax.enable_x64(True):
        t = torch.arange(5, dtype=torch.int64)
        a = torch_to_jax(t)
        assert a.dtype == jnp.int64 and a.unsafe_buffer_pointer() == t.data_ptr()
        f = jax_to_torch(jnp.ones(3, jnp.float64))
        assert f.dtype == torch.float64


def test_non_compact_strides_copy_and_count_or_raise():
    base = torch.arange(32, dtype=torch.float32).reshape(4, 8)
    strided = base[:, ::2]
    before = brax_bridge.stats()
    a = torch_to_jax(strided)
    after = brax_bridge.stats()
    assert after.copies == before.copies + 1
    assert after.bytes_copied == before.bytes_copied + strided.numel() * 4
    np.testing.assert_array_equal(np.asarray(a), strided.numpy())
    with pytest.raises(ValueError, match="non-compact strides.*copy=False"):
        torch_to_jax(strided, copy=False)


def test_misaligned_storage_is_counted_as_a_copy():
    storage = torch.zeros(64, dtype=torch.float32)
    misaligned = storage[1:9]  # 4 bytes past a 64-byte boundary
    assert misaligned.data_ptr() % 64 != 0
    before = _copies()
    a = torch_to_jax(misaligned)
    assert _copies() == before + 1
    assert a.unsafe_buffer_pointer() != misaligned.data_ptr()
    with pytest.raises(ValueError, match="aligned"):
        torch_to_jax(misaligned, copy=False)


def test_tensor_requiring_grad_is_copied_or_refused():
    w = torch.ones(3, requires_grad=True)
    before = _copies()
    a = torch_to_jax(w)
    assert _copies() == before + 1 and a.tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="requires grad"):
        torch_to_jax(w, copy=False)
    assert torch_to_jax(w.detach()).unsafe_buffer_pointer() == w.data_ptr()


def test_copy_true_always_copies_and_bad_copy_argument():
    x = jnp.arange(4.0)
    t = jax_to_torch(x, copy=True)
    assert t.data_ptr() != x.unsafe_buffer_pointer()
    with pytest.raises(ValueError, match="copy must be None"):
        jax_to_torch(x, copy="yes")


@struct.dataclass
class _Pair:
    a: jax.Array
    b: dict


def test_big_endian_numpy_and_meta_tensors():
    # torch holds native byte order only: a big-endian array converts as a counted copy, or is refused with
    # copy=False; a meta tensor has no values, and says so.
    big_endian = np.arange(4, dtype=">f4")
    before = brax_bridge.stats().copies
    tensor = jax_to_torch(big_endian)
    assert tensor.dtype == torch.float32 and tensor.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert brax_bridge.stats().copies == before + 1
    with pytest.raises(ValueError, match="byte order"):
        jax_to_torch(big_endian, copy=False)
    with pytest.raises(ValueError, match="meta device"):
        torch_to_jax(torch.zeros(2, device="meta"))


def test_nested_pytrees_and_tensordicts_convert_leaf_by_leaf():
    flags = jnp.array([True, False])
    tree = {"x": jnp.ones((2, 3)), "t": (jnp.zeros(2, jnp.int32), flags), "p": _Pair(jnp.ones(1), {})}
    out = jax_to_torch(tree)
    assert isinstance(out["x"], torch.Tensor) and out["t"][0].dtype == torch.int32 and out["t"][1].dtype == torch.bool
    assert isinstance(out["p"], _Pair) and out["p"].a.data_ptr() == tree["p"].a.unsafe_buffer_pointer()
    assert jax_to_torch(None) is None

    td = TensorDict({"obs": torch.ones(4, 2), "nested": {"r": torch.zeros(4, 1)}}, batch_size=[4])
    back = torch_to_jax(td)
    assert set(back) == {"obs", "nested"} and back["nested"]["r"].shape == (4, 1)
    assert back["obs"].unsafe_buffer_pointer() == td["obs"].data_ptr()
    mixed = torch_to_jax({"a": torch.ones(2), "n": 3, "s": "keep"})
    assert isinstance(mixed["a"], jax.Array) and mixed["n"] == 3 and mixed["s"] == "keep"


def test_memory_is_aliased_both_ways():
    t = torch.zeros(4)
    a = torch_to_jax(t)
    t += 2.0  # documented: DLPack shares memory, so JAX sees torch's in-place write
    assert a.tolist() == [2.0] * 4


def test_memory_sharing_respects_user_settings(monkeypatch):
    for knob in device_rule._USER_KNOBS:
        monkeypatch.delenv(knob, raising=False)
    monkeypatch.setattr(device_rule, "_jax_backend_started", lambda: False)
    done = device_rule.configure_memory_sharing()
    assert done.preallocate_disabled and os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"

    monkeypatch.delenv("XLA_PYTHON_CLIENT_PREALLOCATE")
    monkeypatch.setenv("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.5")
    kept = device_rule.configure_memory_sharing()
    assert not kept.preallocate_disabled and kept.user_setting == "XLA_PYTHON_CLIENT_MEM_FRACTION"
    assert "XLA_PYTHON_CLIENT_PREALLOCATE" not in os.environ

    monkeypatch.delenv("XLA_PYTHON_CLIENT_MEM_FRACTION")
    monkeypatch.setattr(device_rule, "_jax_backend_started", lambda: True)
    with pytest.warns(RuntimeWarning, match="before the first JAX computation"):
        late = device_rule.configure_memory_sharing()
    assert late.too_late and "XLA_PYTHON_CLIENT_PREALLOCATE" not in os.environ


def test_importing_the_bridge_first_disables_preallocation_and_loads_nothing_optional():
    code = textwrap.dedent(
        """
        import os, sys
        import brax_bridge
        import jax
        jax.devices()
        optional = ('torchrl', 'torch_ppo', 'brax_bridge_app.cli', 'brax_bridge.torchrl')
        heavy = [m for m in optional if m in sys.modules]
        print(heavy, os.environ.get('XLA_PYTHON_CLIENT_PREALLOCATE'), brax_bridge.MEMORY_SHARING.preallocate_disabled)
        """
    )
    env = {k: v for k, v in os.environ.items() if k not in device_rule._USER_KNOBS}
    env["JAX_PLATFORMS"] = "cpu"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-3:] == ["[]", "false", "True"]  # and no optional part was imported eagerly


def test_device_mapping():
    assert device_rule.torch_device(device_rule.jax_device("cpu")) == torch.device("cpu")
    assert device_rule.jax_device(None).platform == "cpu"
    with pytest.raises(ValueError, match="device must be"):
        device_rule.jax_device(3.5)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="GPU"):
            device_rule.jax_device("cuda:0")


def test_export_waits_for_the_producing_computation():
    heavy = jax.jit(lambda x: jnp.linalg.matrix_power(x, 40).sum(axis=0))
    x = jnp.eye(400) * 1.01
    expected = np.asarray(heavy(x))
    result = heavy(x * 1.0)  # dispatched asynchronously; the export must wait for it
    t = jax_to_torch(result)
    np.testing.assert_allclose(t.numpy(), expected, rtol=1e-6)
