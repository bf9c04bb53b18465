"""Soft Actor-Critic (``brax.training.agents.sac`` counterpart): an off-policy actor-critic trained from a replay
buffer, with twin critics, target critics and a learned entropy temperature."""
