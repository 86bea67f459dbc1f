"""`python -m warpvm`: the same as the `warpvm` command."""

from warpvm.cli import app

app(prog_name="warpvm")
