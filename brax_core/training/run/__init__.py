"""What both PPO trainers share around their PPO update, in the standard library and NumPy only.

* ``schedule``: the whole run's plan (compiled calls, resets, evaluation and report points), resumed runs included;
* ``driver``: the loop that trains, saves, calls the user's callbacks, evaluates and reports, over a trainer's
  ``Backend``;
* ``checkpoints``: the checkpoint directory both trainers write (step names, file digests, ``latest_step``,
  ``resolve``, ``max_to_keep``, ``CheckpointError``).
"""
