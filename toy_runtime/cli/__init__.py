"""The `toy-runtime` command line: argument parsing only. `commands.COMMANDS` names each command's module, imported
only when that command runs; the work itself is done in `toy_runtime.app`."""

from .commands import entry, main

__all__ = ["entry", "main"]
