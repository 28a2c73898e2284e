"""The command table: a command whose module cannot be imported is one line naming the module, not a vanished
command ("invalid choice")."""

from __future__ import annotations

import pytest

from toy_runtime.cli import commands as cli_main


def test_a_command_whose_module_fails_to_import_is_one_line_naming_it(monkeypatch, capsys):
    monkeypatch.setitem(cli_main.COMMANDS, "schedules", ("toy_runtime.no_such_module", "register"))
    assert cli_main.main(["schedules", "list"]) == cli_main.EXIT_BROKEN
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "schedules" in err[0] and "toy_runtime.no_such_module" in err[0]
    assert "invalid choice" not in err[0]


def test_the_listing_keeps_an_unavailable_command_and_says_why(monkeypatch, capsys):
    monkeypatch.setitem(cli_main.COMMANDS, "schedules", ("toy_runtime.no_such_module", "register"))
    with pytest.raises(SystemExit):
        cli_main.main(["--help"])
    out = capsys.readouterr().out
    assert "schedules" in out and "unavailable" in out and "chat" in out


@pytest.mark.slow  # real waits (timeouts, deadlines, subprocesses): outside the fast lane
def test_running_one_command_imports_only_its_module():
    import subprocess
    import sys

    code = ("import sys; from toy_runtime.cli.commands import build_parser; build_parser('chat'); "
            "print(sorted(m for m in sys.modules if m.startswith('toy_runtime.cli.') or m == 'toy_runtime.doctor'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "toy_runtime.cli.turns" in out
    assert "toy_runtime.cli.voice" not in out and "toy_runtime.doctor" not in out
