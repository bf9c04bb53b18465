"""The application layer behind the ``brax-bridge`` command: hyperparameters, runs and their folders, evaluation,
plots, reports and benchmarks. It is the top layer (see ARCHITECTURE.md): it may import brax_core, the bridge
and torch_ppo, and nothing below imports it."""
