"""``python -m servicebroker.cli``: the command line."""

from . import main

main()
