"""`python -m wb_core` runs the `wb` command."""

from wb_core.cli import main

main()
