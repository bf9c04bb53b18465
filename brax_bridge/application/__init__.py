"""The pieces behind the ``brax-bridge`` command line: hyperparameters, run folders, plots, reports."""
