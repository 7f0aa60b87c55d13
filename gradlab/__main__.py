"""`python -m gradlab`: the CLI."""

from gradlab.cli import main

# the guard matters: worker processes are spawned, and spawn imports the parent's main module
if __name__ == "__main__":
    main()
