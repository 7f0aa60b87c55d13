"""`python -m gradlab`: the CLI."""

from gradlab.cli import main

main()
