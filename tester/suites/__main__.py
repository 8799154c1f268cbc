"""`python -m mosaic_test`: the `mosaic-test` command, for an environment without its script."""

from .cli import main

main()
