"""`python -m wb_core.cli` runs the `wb` command."""

from wb_core.cli import main

main()
