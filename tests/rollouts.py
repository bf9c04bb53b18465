"""A synthetic training batch with the keys torch_ppo's collector stores, and torch_ppo's loss of such a batch, for
tests that drive its update directly."""

import dataclasses

import torch
from tensordict import TensorDict


def synthetic_batch(
    rows: int, steps: int, obs: int, act: int, seed: int, end_probability: float, behaviour: bool = False
) -> TensorDict:
    """A batch ``[rows, steps]`` fixed by ``seed``; episodes end (terminated or truncated) with ``end_probability``
    each; ``behaviour`` adds the behaviour policy's ``loc``/``scale``."""
    g = torch.Generator().manual_seed(seed)
    n = lambda *shape: torch.randn(rows, steps, *shape, generator=g)
    flag = lambda p: torch.rand(rows, steps, 1, generator=g) < p
    raw = n(act)
    truncated = flag(end_probability)
    terminated = flag(end_probability) & ~truncated
    data = {
        "observation": 2.0 * n(obs) + 1.0,
        "raw_action": raw,
        "action": torch.tanh(raw),
        "action_log_prob": n(),
        "next": {
            "final_observation": 2.0 * n(obs) + 1.0,
            "reward": n(1),
            "terminated": terminated,
            "truncated": truncated,
            "done": terminated | truncated,
        },
    }
    if behaviour:
        data["loc"], data["scale"] = n(act), torch.rand(rows, steps, act, generator=g) + 0.5
    return TensorDict(data, batch_size=[rows, steps])


def torch_ppo_loss(modules, batch: TensorDict, entropy_noise: torch.Tensor, **hyperparameters):
    """torch_ppo's loss of a ``[rows, steps]`` TensorDict as the update computes it (``Batch.of``, time-major), with
    the collection-time values under ``state_value`` where the batch holds them; keyword arguments are
    ``LossConfig``'s."""
    from torch_ppo.losses import Batch, LossConfig, ppo_loss

    inputs = Batch.of(batch)
    if "state_value" in batch.keys():
        inputs = dataclasses.replace(inputs, old_value=batch.get("state_value").squeeze(-1))
    return ppo_loss(modules, LossConfig(**hyperparameters), inputs.time_major(), entropy_noise)
