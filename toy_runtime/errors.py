"""Errors that end a command with one line for the user (exit code 2). Kept import-light on purpose."""


class StartError(Exception):
    """Something the command needs could not be started (e.g. the MQTT bridge refused our credentials)."""


class CliError(Exception):
    """A user-facing error in what the command was asked (a bad flag value, an unknown id): one line, exit code 2."""
