"""torch_analytic.shac: the lambda-returns against their definition, the actor loss's gradient cut at window starts
and episode ends, its terminal-value rule against a hand computation, a short run that learns and repeats itself,
the policy's actions, and bad arguments named before any env is built."""

import itertools

import jax
import jax.numpy as jnp
import pytest
import torch

from brax_bridge import TorchEnv
from brax_core.envs import Env, State
from brax_core.training.config import ConfigError
from brax_core.training.run import checkpoints
from torch_analytic import common, shac
from torch_analytic.networks import APGPolicy, SHACCritic


class Glide(Env):
    """A damped point mass in the plane, paid ``1 - |position|`` per step (the torch APG tests' env): smooth in the
    action, so every reward's gradient reaches every earlier action of its episode. Starts uniformly in
    ``[-1, 1]^2`` at rest; only the time limit ends an episode."""

    default_episode_length = 40

    def reset(self, rng: jax.Array) -> State:
        position = jax.random.uniform(rng, (2,), jnp.float32, -1.0, 1.0)
        obs = jnp.concatenate([position, jnp.zeros((2,), jnp.float32)])
        zero = jnp.zeros((), jnp.float32)
        return State(pipeline_state=obs, obs=obs, reward=zero, done=zero)

    def step(self, state: State, action: jax.Array) -> State:
        position, velocity = state.obs[:2], state.obs[2:]
        velocity = 0.9 * velocity + 0.5 * action
        position = position + 0.1 * velocity
        obs = jnp.concatenate([position, velocity])
        return state.replace(pipeline_state=obs, obs=obs, reward=1.0 - jnp.sqrt(jnp.sum(position**2) + 1e-6))

    @property
    def observation_size(self) -> int:
        return 4

    @property
    def action_size(self) -> int:
        return 2


class Tick(Env):
    """A clock: the observation counts the steps since the reset, each step pays ``1 + clock`` (the clock after
    it) whatever the action, and the episode terminates when the clock reaches 3."""

    default_episode_length = 5

    def reset(self, rng: jax.Array) -> State:
        zero = jnp.zeros((), jnp.float32)
        return State(
            pipeline_state=jnp.zeros((1,), jnp.float32), obs=jnp.zeros((1,), jnp.float32), reward=zero, done=zero
        )

    def step(self, state: State, action: jax.Array) -> State:
        clock = state.obs + 1.0
        done = (clock[0] >= 3.0).astype(jnp.float32)
        return state.replace(pipeline_state=clock, obs=clock, reward=1.0 + clock[0], done=done)

    @property
    def observation_size(self) -> int:
        return 1

    @property
    def action_size(self) -> int:
        return 1


def _window_flags(steps: int, envs: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``(terminated, done)`` ``[steps, envs]`` with episode ends mid-window, both kinds, about one step in three."""
    ends = torch.rand(steps, envs, generator=generator) < 0.35
    terminated = ends & (torch.rand(steps, envs, generator=generator) < 0.5)
    return terminated, ends


def _lambda_return(rewards, bootstrap, done, gamma, lam, t):
    """One env's lambda-return at ``t`` by its definition: ``(1 - lam) * sum_n lam^(n-1) G^(n) + lam^(N-1) G^(N)``
    over the n-step returns ``G^(n) = sum_(i<n) gamma^i r_(t+i) + gamma^n bootstrap_(t+n-1)`` up to the ``N`` steps
    left before the episode or the window closes."""
    steps = len(rewards)
    close = next((k for k in range(t, steps) if done[k]), steps - 1)
    horizon = close - t + 1
    n_step = []
    for n in range(1, horizon + 1):
        n_step.append(sum(gamma**i * rewards[t + i] for i in range(n)) + gamma**n * bootstrap[t + n - 1])
    mixture = sum((1 - lam) * lam ** (n - 1) * n_step[n - 1] for n in range(1, horizon))
    return mixture + lam ** (horizon - 1) * n_step[-1]


def test_td_lambda_targets_are_the_lambda_returns():
    """Against the definition on random windows with terminations and time limits mid-window, and the limits:
    lambda = 1 the discounted return to the close plus the bootstrap there, lambda = 0 the one-step target."""
    steps, envs, gamma = 9, 6, 0.9
    generator = torch.Generator().manual_seed(5)
    rewards = torch.randn(steps, envs, generator=generator, dtype=torch.float64)
    next_values = torch.randn(steps, envs, generator=generator, dtype=torch.float64) * 3.0
    terminated, done = _window_flags(steps, envs, generator)
    assert terminated.any() and (done & ~terminated).any() and (~done).any()
    bootstrap = torch.where(terminated, 0.0, next_values)
    for lam in (0.0, 0.7, 0.95, 1.0):
        targets = shac.td_lambda_targets(rewards, next_values, terminated, done, gamma, lam)
        for env in range(envs):
            r, b, d = rewards[:, env].tolist(), bootstrap[:, env].tolist(), done[:, env].tolist()
            expected = [_lambda_return(r, b, d, gamma, lam, t) for t in range(steps)]
            assert targets[:, env].tolist() == pytest.approx(expected, rel=1e-9, abs=1e-9), (lam, env)

    one_step = shac.td_lambda_targets(rewards, next_values, terminated, done, gamma, 0.0)
    torch.testing.assert_close(one_step, rewards + gamma * bootstrap)
    monte_carlo = shac.td_lambda_targets(rewards, next_values, terminated, done, gamma, 1.0)
    for env, t in itertools.product(range(envs), range(steps)):
        close = next((k for k in range(t, steps) if done[k, env]), steps - 1)
        total = sum(gamma ** (k - t) * rewards[k, env] for k in range(t, close + 1))
        total = total + gamma ** (close - t + 1) * bootstrap[close, env]
        assert float(monte_carlo[t, env]) == pytest.approx(float(total), rel=1e-9, abs=1e-9)


def _glide(num_envs: int, episode_length: int, steps_run: torch.Tensor | None = None):
    """A fresh differentiable ``Glide`` env (seed 3) after its reset, its episode clocks set to ``steps_run``; the
    observation, and a small policy and critic of fixed weights."""
    env = TorchEnv(Glide(), num_envs, episode_length=episode_length, differentiable=True, seed=3)
    observation = env.reset().get("observation")
    if steps_run is not None:
        env.set_episode_steps(steps_run)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        policy, critic = APGPolicy(4, 2, hidden_layer_sizes=(8,)), SHACCritic(4, (8,)).requires_grad_(False)
    return env, observation, policy, critic


def test_the_actor_gradient_stops_at_the_window_start():
    """A window's loss takes no gradient to the actions of the window before once ``env.detach()`` cut there; without
    the cut it does (so the check can fail)."""
    for cut in (False, True):
        first = torch.randn(4, 3, 2, generator=torch.Generator().manual_seed(1)).requires_grad_(True)
        second = torch.randn(4, 3, 2, generator=torch.Generator().manual_seed(2)).requires_grad_(True)
        env, observation, policy, critic = _glide(3, episode_length=40)
        _, window = shac.shac_actor_loss(env, policy, critic, observation, first, 0.99)
        if cut:
            env.detach()
        loss, _ = shac.shac_actor_loss(env, policy, critic, window.observation, second, 0.99)
        loss.backward()
        assert second.grad is not None and float(second.grad.abs().max()) > 1e-4
        if cut:
            assert first.grad is None or not first.grad.any()
        else:
            assert first.grad is not None and float(first.grad.abs().max()) > 1e-6


def test_the_actor_gradient_stops_at_an_episode_end():
    """The envs' time limit ends their episodes at the window's second step; the rewards and values after the reset
    add nothing to the gradient at the two actions before it: it is the gradient of the two-step window alone (the
    loss being a mean over steps, scaled by the window's length)."""
    num_envs, gamma = 2, 0.9
    noise = torch.randn(6, num_envs, 2, generator=torch.Generator().manual_seed(4))
    clocks = torch.full((num_envs,), 3.0)
    long_noise = noise.clone().requires_grad_(True)
    env, observation, policy, critic = _glide(num_envs, 5, clocks)
    long_loss, window = shac.shac_actor_loss(env, policy, critic, observation, long_noise, gamma)
    long_loss.backward()
    assert window.done[1].all() and not window.done[0].any() and not window.terminated.any()

    short_noise = noise[:2].clone().requires_grad_(True)
    env, observation, policy, critic = _glide(num_envs, 5, clocks)
    short_loss, _ = shac.shac_actor_loss(env, policy, critic, observation, short_noise, gamma)
    short_loss.backward()
    torch.testing.assert_close(long_noise.grad[:2] * 6, short_noise.grad * 2, rtol=1e-4, atol=1e-6)
    assert float(long_noise.grad[2:].abs().max()) > 1e-4  # the later actions do get their rewards' gradient
    assert float(short_noise.grad.abs().max()) > 1e-4


def test_the_terminal_value_rule_matches_a_hand_computation():
    """``Tick`` envs, gamma 0.9, a critic worth ``10 + clock``, six steps. Env 0 starts its time limit afresh and
    terminates at steps 2 and 5 (no value); env 1 has run 3 of its 5 steps, so the time limit ends its episode at
    step 1 (the value of the clock it reached, 2, not of the reset), then it terminates at step 4 and the window
    ends at step 5 one step into its third episode (the value of clock 1). Rewards are ``1 + clock``."""
    env = TorchEnv(Tick(), 2, episode_length=5, differentiable=True, seed=0)
    observation = env.reset().get("observation")
    env.set_episode_steps(torch.tensor([0.0, 3.0]))
    policy = APGPolicy(1, 1, hidden_layer_sizes=(4,))
    critic = lambda normalised: 10.0 + normalised
    noise = torch.randn(6, 2, 1, generator=torch.Generator().manual_seed(0))
    loss, window = shac.shac_actor_loss(env, policy, critic, observation, noise, 0.9)

    first_three = 2 + 0.9 * 3 + 0.81 * 4  # rewards of clocks 1, 2, 3, the discount restarting at each reset
    env_0 = first_three + first_three
    env_1 = (2 + 0.9 * 3 + 0.81 * (10 + 2)) + first_three + (2 + 0.9 * (10 + 1))
    assert float(loss.detach()) == pytest.approx(-(env_0 + env_1) / (6 * 2), rel=1e-6)
    assert window.rewards.T.tolist() == [[2, 3, 4, 2, 3, 4], [2, 3, 2, 3, 4, 2]]
    assert window.terminated.T.tolist() == [[False, False, True, False, False, True], [False] * 4 + [True, False]]
    assert window.done.T.tolist() == [
        [False, False, True, False, False, True],
        [False, True, False, False, True, False],
    ]
    assert window.final_observations[1, 1].item() == 2.0 and window.observations[2, 1].item() == 0.0


def _training_metrics(metrics):
    return {
        k: m for k, m in metrics.items() if k.startswith("training/") and k not in ("training/sps", "training/walltime")
    }


def test_a_short_run_learns_and_reports_its_metrics():
    reports = []
    _, policy, metrics = shac.train(
        Glide(),
        episode_length=40,
        policy_updates=40,
        horizon_length=10,
        num_envs=16,
        num_evals=3,
        num_eval_envs=16,
        critic_iterations=4,
        seed=0,
        progress_fn=lambda epoch, m: reports.append((epoch, m)),
    )
    assert [epoch for epoch, _ in reports] == [0, 1, 2]
    untrained, trained = reports[0][1]["eval/episode_reward"], metrics["eval/episode_reward"]
    assert trained > untrained + 10.0, (untrained, trained)
    names = {"actor_loss", "critic_loss", "grad_norm", "value_mean", "sps", "walltime"}
    assert {f"training/{name}" for name in names} | {"eval/episode_reward"} <= set(metrics)
    assert metrics["training/value_mean"] > 0.0  # the critic learnt that the rewards are positive
    assert isinstance(policy, APGPolicy)


def test_a_seeded_run_repeats_itself_and_its_policy_acts_in_bounds():
    arguments = dict(
        environment=Glide(),
        episode_length=20,
        policy_updates=4,
        horizon_length=5,
        num_envs=4,
        num_evals=2,
        num_eval_envs=4,
        critic_iterations=2,
        num_critic_batches=2,
        policy_hidden_layer_sizes=(16,),
        value_hidden_layer_sizes=(16,),
    )
    make_policy, policy, metrics = shac.train(**arguments, seed=7)
    _, _, again = shac.train(**arguments, seed=7)
    _, _, other = shac.train(**arguments, seed=8)
    assert _training_metrics(metrics) == _training_metrics(again)
    assert metrics["eval/episode_reward"] == again["eval/episode_reward"]
    assert _training_metrics(metrics) != _training_metrics(other)

    observations = 100.0 * torch.randn(32, 4, generator=torch.Generator().manual_seed(0))
    act = make_policy(policy, deterministic=True)
    actions = act(observations)
    assert actions.shape == (32, 2) and actions.dtype == torch.float32
    assert float(actions.abs().max()) <= 1.0 and float(actions.abs().max()) > 0.0
    torch.testing.assert_close(act(observations), actions)  # the mode: no noise


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (dict(horizon_length=0), "horizon_length must be a positive integer"),
        (dict(td_lambda=1.5), r"td_lambda must be <= 1.0"),
        (dict(discounting=-1), r"discounting must be >= 0.0"),
        (dict(critic_iterations=0), "critic_iterations must be a positive integer"),
        (dict(num_critic_batches=100, horizon_length=4, num_envs=2), r"num_critic_batches \(100\) must be at most"),
        (dict(target_critic_alpha=2.0), "target_critic_alpha must be"),
        (dict(learning_rate_schedule="cosine"), "learning_rate_schedule must be one of .linear., .constant."),
        (dict(value_hidden_layer_sizes=(64, 0)), "value_hidden_layer_sizes must be a sequence of positive"),
        (dict(activation="no_such_activation"), "activation must be a callable or one of"),
        (dict(environment="no_such_env"), "no_such_env"),
        (dict(progress_fn=lambda: None), "progress_fn"),
    ],
)
def test_bad_arguments_are_named_before_any_env_is_built(monkeypatch, changes, message):
    def no_env(*args, **kwargs):
        raise AssertionError("an env was built before the arguments were checked")

    monkeypatch.setattr(common, "TorchEnv", no_env)
    arguments = {"environment": Glide(), "episode_length": 10, "policy_updates": 2, **changes}
    with pytest.raises((ValueError, TypeError), match=message):
        shac.train(**arguments)


def test_the_adaptive_horizon_follows_ahacs_rule_and_stays_within_its_bounds():
    horizon = shac.AdaptiveHorizon(minimum=4, maximum=16, learning_rate=0.5, dual_learning_rate=0.1)
    assert horizon.steps() == 4 and float(horizon.dual) == 0.0
    returns = torch.tensor([8.0, 16.0])  # mean(R / H) = 3 at H = 4, no dual yet: H grows by 0.5 * 3
    horizon.update(returns)
    assert float(horizon.horizon) == pytest.approx(5.5) and float(horizon.dual) == pytest.approx(0.15)
    horizon.update(torch.tensor([1e6, 1e6]))  # a large return pushes it to its maximum, and no further
    assert float(horizon.horizon) == 16.0 and horizon.steps() == 16
    for _ in range(200):  # the dual grows while H is above its minimum, and brings it down with no return to gain
        horizon.update(torch.zeros(2))
    assert float(horizon.horizon) == 4.0
    assert set(dict(horizon.named_buffers())) == {"horizon", "dual"}  # what a checkpoint keeps


def test_shac_with_the_adaptive_horizon_counts_env_steps_as_without_and_resumes_exactly(tmp_path):
    arguments = dict(environment=Glide(), episode_length=10, policy_updates=4, horizon_length=8, num_envs=4,
                     num_evals=3, num_eval_envs=4, critic_iterations=2, num_critic_batches=2, adaptive_horizon=True,
                     horizon_min=2, horizon_learning_rate=0.5)
    reports = []
    _, policy, metrics = shac.train(**arguments, save_checkpoint_path=tmp_path / "run",
                                    progress_fn=lambda epoch, m: reports.append(m))
    assert 2.0 <= metrics["training/horizon"] <= 8.0
    assert checkpoints.latest_step(tmp_path / "run") == 4 * 4 * 8  # env steps as a fixed horizon's
    first = checkpoints.step_directories(tmp_path / "run")[0]
    _, resumed, again = shac.train(**arguments, restore_checkpoint_path=first)
    for (name, a), (_, b) in zip(policy.state_dict().items(), resumed.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
    assert again["training/horizon"] == metrics["training/horizon"]
    with pytest.raises(ConfigError, match=r"horizon_min \(9\) must be at most the policy steps"):
        shac.train(**{**arguments, "horizon_min": 9})
