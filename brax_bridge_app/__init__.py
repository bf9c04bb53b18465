"""The ``brax-bridge`` command and what it is made of: hyperparameters and presets as flags, the two trainers
behind one interface, runs and their folders, evaluation, plots, reports and benchmarks.

The top layer (see ARCHITECTURE.md): it may import brax_core, brax_bridge and torch_ppo, and none of them imports
it. Importing this package loads nothing; ``brax_bridge_app.cli`` loads only the hyperparameter schema until a
command runs.
"""
