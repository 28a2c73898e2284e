"""The one error base, and the errors that end a command with one line for the user (exit code 2).

The lowest floor: imports nothing of the package, so every module may raise and catch these.
"""

from __future__ import annotations


class ToyError(Exception):
    """The base of every error the package raises on purpose: `except ToyError` catches ours and nothing else.

    `code` is stable and machine-readable (an audit line, a test, a doctor hint may key on it): each class names its
    own, and an error that carries a code per failure ("http_404", "device-not-found") sets it on the instance.
    `message` is the line for a person. The exception's `args` (and so `str()`) are exactly what the raiser passed:
    a subclass that also derives from a builtin (`class X(ToyError, ValueError)`) still reads and catches as that
    builtin.
    """

    code: str = "toy_error"
    message: str

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        # the first argument is the line for a person by convention; a subclass with its own fields sets its own
        self.message = str(args[0]) if args else ""


class StartError(ToyError):
    """Something the command needs could not be started (e.g. the MQTT bridge refused our credentials)."""

    code = "start_failed"


class CliError(ToyError):
    """A user-facing error in what the command was asked (a bad flag value, an unknown id): one line, exit code 2."""

    code = "usage"
