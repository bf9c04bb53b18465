"""``walker2d``: make a planar two-legged robot walk forward (+x).

* Observation (17), as Brax's and Gym's versions (``qpos[0]``, the forward position, is left out unless
  ``exclude_current_positions_from_observation=False``, which prepends it and makes 18):

  ====== =====================================================
  index  meaning
  ====== =====================================================
  0      torso height z (``qpos[1]``, m; ``rootz`` has ``ref`` 1.25 so it is the world height)
  1      torso pitch angle (``qpos[2]``, rad)
  2-4    right thigh, leg (knee), foot (ankle) joint angles (``qpos[3:6]``)
  5-7    left thigh, leg, foot joint angles (``qpos[6:9]``)
  8-16   ``qvel`` (x, z velocity of the torso, pitch rate, six joint rates), each clipped to [-10, 10]
  ====== =====================================================
* Action (6): torques at the right thigh, knee, ankle, then the left ones, each in ``[-1, 1]`` (motor gear 100).
* Reward: ``reward_forward + reward_healthy + reward_ctrl`` with

  - ``reward_forward`` = 1.0 * forward velocity of the torso, ``(x_after - x_before) / dt``,
  - ``reward_healthy`` = 1.0 on every step (also the terminating one, as in Brax and Gym; with
    ``terminate_when_unhealthy=False`` only on healthy steps),
  - ``reward_ctrl`` = -1e-3 * ``sum(action**2)``.

  ``metrics`` holds these three terms plus ``x_position`` and ``x_velocity``.
* Termination (``terminate_when_unhealthy=True``): the torso height is not in (0.8, 2.0) m or the torso angle is
  not in (-1, 1) rad (Brax's ranges), or the state stops being finite.
* Reset: ``qpos`` (around the standing pose, torso at 1.25 m) and ``qvel`` uniform in ``[-0.005, 0.005]``.
* Defaults: ``episode_length`` 1000, ``n_frames`` 4, timestep 0.002 s (``dt`` 0.008 s).
* Model (``assets/walker2d.xml``): only feet-vs-floor contacts (2 contact points per foot), Euler integration,
  6 Newton iterations / 12 line-search steps (the fewest with which native MuJoCo matches its fully converged
  solver over 4 x 100 random-control steps; 4 drifted by 0.04).
* Physics check (``tests/test_envs_planar.py``): MJX agrees with native ``mujoco.mj_step`` on the same model, same
  controls, over 25 env steps (100 physics steps, foot contacts included) to ``qpos`` atol 2e-4, ``qvel`` atol 2e-3
  (float32 vs float64).

Differences from Brax 0.14's ``walker2d`` (deliberate; ``tests/test_env_definitions.py`` checks the rest against
Brax's formulas): as for ``hopper``, the forward velocity, the observed height and the health test read the state
the step reached, as Brax's default ``generalized`` pipeline does (its ``mjx`` backend reads body poses one physics
step late); ``metrics['x_position']`` is the torso's position at reset too (Brax reports 0 there); the step also
ends an episode whose state stops being finite.
"""

from __future__ import annotations

from brax_core.envs.hopper import Hopper


class Walker2d(Hopper):
    """Planar biped walker on MuJoCo MJX: the hopper's step, reward and observation with two legs."""

    default_episode_length = 1000
    _asset = "walker2d"

    def __init__(
        self,
        forward_reward_weight: float = 1.0,
        ctrl_cost_weight: float = 1e-3,
        healthy_reward: float = 1.0,
        terminate_when_unhealthy: bool = True,
        healthy_z_range: tuple[float, float] = (0.8, 2.0),
        healthy_angle_range: tuple[float, float] = (-1.0, 1.0),
        reset_noise_scale: float = 5e-3,
        exclude_current_positions_from_observation: bool = True,
        n_frames: int = 4,
        backend: str = "mjx",
        **kwargs,
    ):
        super().__init__(
            forward_reward_weight=forward_reward_weight,
            ctrl_cost_weight=ctrl_cost_weight,
            healthy_reward=healthy_reward,
            terminate_when_unhealthy=terminate_when_unhealthy,
            healthy_state_range=None,
            healthy_z_range=healthy_z_range,
            healthy_angle_range=healthy_angle_range,
            reset_noise_scale=reset_noise_scale,
            exclude_current_positions_from_observation=exclude_current_positions_from_observation,
            n_frames=n_frames,
            backend=backend,
            **kwargs,
        )
