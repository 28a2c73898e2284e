"""`python -m toy_runtime` = the `toy-runtime` command."""

from .cli import entry

entry()
