"""Subcommands of the ``skewlab`` CLI, one module each (registered in :mod:`skewlab.cli`)."""
