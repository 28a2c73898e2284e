"""The `toy-runtime` command line: argument parsing only. `main.COMMANDS` names each command's module, imported
only when that command runs; the work itself is done in `toy_runtime.app`. The entry point is `cli.main:main`."""
