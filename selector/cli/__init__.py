"""The command line, one module per command group (pick, machine, check and matrix, guide, labels,
install, verify) over a small core (options, errors, inputs) and the app (router, group, exit
path).  ``pick-backend`` is ``selector.cli:main``."""

from selector.cli.app import main  # noqa: F401
