"""Errors that end a command with one line for the user (exit code 2). Kept import-light on purpose."""


class StartError(Exception):
    """Something the command needs could not be started (e.g. the MQTT bridge refused our credentials)."""
