"""The ``brax-bridge`` command and what it is made of: every algorithm's configuration and presets as flags, every
(algorithm, trainer) behind one interface, runs and their folders, evaluation, plots, reports and benchmarks.

The top layer (see ARCHITECTURE.md): it may import brax_core, brax_bridge, torch_training, torch_ppo,
torch_analytic and torch_sac, and none of them imports it. Importing this package loads nothing;
``brax_bridge_app.cli`` loads only the configurations until a command runs.
"""
