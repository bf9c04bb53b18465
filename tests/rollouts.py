"""A synthetic training batch with the keys torch_ppo's collector stores, for tests that drive its update directly."""

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
