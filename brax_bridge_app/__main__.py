"""``python -m brax_bridge_app``: the ``brax-bridge`` command."""

from brax_bridge_app.cli import main

main()
