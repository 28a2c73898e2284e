"""CLI polish (issue 15, items 5 and 7): --version, a closed pipe, `devices` with nothing found, `demo --json`, help
texts, library warnings on stderr in every command, journald priorities. Real subprocesses of the CLI."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys

import pytest

from tests.cli.helpers import clean_env, run_cli
from toy_runtime import __version__
from toy_runtime.testing.cli_forks import ForkedCli
from toy_runtime.testing.scripted_llm import Reply, ScriptedLLMServer


def test_version():
    proc = run_cli("--version")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, f"toy-runtime {__version__}\n", "")


@pytest.mark.parametrize("args,stdin", [
    (("events", "list", "--json"), b""),
    (("chat", "--json"), b"hello\nturn it up\n"),
])
def test_a_reader_that_went_away_ends_the_command_quietly(tmp_path, args, stdin):
    """`events list --json | head` ended in a BrokenPipeError traceback. The read end is closed before the command
    writes anything, so the write always fails (no race with how much fits in the pipe)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run([sys.executable, "-m", "toy_runtime", *args], input=stdin, stdout=write_end,
                              stderr=subprocess.PIPE, env=clean_env(tmp_path), timeout=120)
    finally:
        os.close(write_end)
    assert proc.returncode == 141, proc.stderr  # 128 + SIGPIPE, like any Unix filter
    assert proc.stderr == b""


def test_devices_when_none_is_found_points_to_doctor(tmp_path):
    env = clean_env(tmp_path, PULSE_SERVER=f"unix:{tmp_path}/no-pulse-here")  # ALSA's "pulse" device opens nothing
    proc = run_cli("devices", "--json", env=env)
    if json.loads(proc.stdout):
        pytest.skip(f"this machine has sound cards PortAudio finds without PulseAudio: {proc.stdout[:200]}")
    assert proc.returncode == 1 and "toy-runtime doctor" in proc.stderr
    proc = run_cli("devices", env=env)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith("toy-runtime: no audio devices found; `toy-runtime doctor` says why")
    assert proc.stderr.count("\n") == 1


@pytest.mark.audio
def test_devices_lists_the_virtual_card(tmp_path, sound_card):
    proc = run_cli("devices", "--json", env=clean_env(tmp_path, **sound_card.runtime_env))
    assert proc.returncode == 0, proc.stderr
    assert "pulse" in {d["name"] for d in json.loads(proc.stdout)}


def test_demo_json_prints_only_json_on_stdout(tmp_path):
    proc = run_cli("demo", "--json", "--out", str(tmp_path / "out"), "--say", "turn it up a bit",
                   env=clean_env(tmp_path / "state"), timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines()]  # every stdout line is JSON
    assert [r["type"] for r in rows] == ["voice_turn", "demo_verdict", "demo_summary"]
    assert "loading models" in proc.stderr  # the human progress lines went to stderr


def _commands() -> list[tuple[str, ...]]:
    from toy_runtime.cli.commands import build_parser

    commands = []

    def visit(parser, prefix):
        commands.append(prefix)
        for action in parser._actions:
            for name, sub in getattr(action, "choices", None).items() if hasattr(action, "_name_parser_map") else ():
                visit(sub, prefix + (name,))

    visit(build_parser(), ())
    return commands


def test_help_texts_are_whole(tmp_path):
    """No word is split at a hyphen ("start-" / "up"), a long command name ("schedules") does not push its help onto
    the next line, and every option says what it is for."""
    commands = _commands()
    assert ("config", "check") in commands and ("bench", "voice") in commands and len(commands) > 15
    problems = []
    env = clean_env(tmp_path, COLUMNS="80")
    with ForkedCli() as cli:  # a process per command, forked from one that imported the CLI: not ~1 s of start-up each
        helps = [(command, cli.run(*command, "--help", env=env)) for command in commands]
    spawned = run_cli(*commands[0], "--help", env=env)
    assert (spawned.returncode, spawned.stdout) == (helps[0][1].returncode, helps[0][1].stdout)  # the same text
    for command, proc in helps:
        assert proc.returncode == 0, (command, proc.stderr)
        lines = proc.stdout.splitlines()
        for number, line in enumerate(lines):
            if re.search(r"\w-$", line):
                problems.append(f"{' '.join(command)}: word split at a hyphen: {line!r}")
            if re.fullmatch(r"\s{4}[a-z][\w-]*", line) and number + 1 < len(lines) \
                    and re.match(r"\s{8,}\S", lines[number + 1]):
                problems.append(f"{' '.join(command)}: help pushed below {line.strip()!r}")
            if re.fullmatch(r"\s{2}--[\w-]+( [A-Z_.]+)?", line) and not (
                    number + 1 < len(lines) and re.match(r"\s{8,}\S", lines[number + 1])):
                problems.append(f"{' '.join(command)}: option without help: {line.strip()!r}")
    assert not problems, "\n".join(problems)


def test_library_warnings_reach_stderr_in_chat(tmp_path):
    """`chat` used to install a NullHandler: a server rejecting `stream_options` (or the MQTT link failing) said
    nothing. The warning is one line on stderr; stdout stays the conversation."""
    with ScriptedLLMServer([Reply(text="Hi there!")], reject_fields=("stream_options",)) as server:
        proc = run_cli("chat", "--json", "--llm-base-url", server.url, input_text="hello\n",
                       env=clean_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("WARNING ")]
    assert len(warnings) == 1 and "rejected `stream_options`" in warnings[0], proc.stderr
    assert all(json.loads(line) for line in proc.stdout.splitlines())


def _run_with_journal(args, env, stdin=""):
    """Run with stderr on a file that JOURNAL_STREAM names, as systemd does for StandardError=journal."""
    stderr_path = env["TOY_STATE_DIR"] + "/stderr.txt"
    with open(stderr_path, "w+") as stderr:
        info = os.fstat(stderr.fileno())
        env = {**env, "JOURNAL_STREAM": f"{info.st_dev}:{info.st_ino}"}
        proc = subprocess.run([sys.executable, "-m", "toy_runtime", *args], input=stdin, text=True,
                              stdout=subprocess.PIPE, stderr=stderr, env=env, timeout=120)
        stderr.seek(0)
        return proc, stderr.read()


def test_journald_gets_priorities(tmp_path):
    """Under systemd every log line starts with its sd-daemon priority, so `journalctl -p warning` filters."""
    (tmp_path / "state").mkdir()
    with ScriptedLLMServer([Reply(text="Hi there!")], reject_fields=("stream_options",)) as server:
        proc, err = _run_with_journal(["chat", "--llm-base-url", server.url],
                                      clean_env(tmp_path / "state"), "hello\n")
    assert proc.returncode == 0, err
    assert [line for line in err.splitlines() if line.startswith("<4>WARNING ") and "stream_options" in line], err
    assert not [line for line in err.splitlines() if line and not line.startswith("<")], err

    proc, err = _run_with_journal(["config", "check"], clean_env(tmp_path / "state", TOY_VAD__HANGOVER_MS="5"))
    assert proc.returncode == 2
    assert err.startswith("<3>toy-runtime: vad.hangover_ms: ") and err.count("\n") == 1


def test_no_priority_prefix_when_stderr_is_not_the_journal(tmp_path):
    """JOURNAL_STREAM is inherited by children whose stderr went elsewhere: then no prefix."""
    proc = run_cli("config", "check", env=clean_env(tmp_path, TOY_VAD__HANGOVER_MS="5", JOURNAL_STREAM="8:12345"))
    assert proc.returncode == 2 and proc.stderr.startswith("toy-runtime: vad.hangover_ms: ")


def test_firmware_sim_help_is_whole_and_every_option_says_what_it_is_for(tmp_path):
    # The description used to be the docstring's first line, cut mid-sentence ("…as they arrive and").
    proc = subprocess.run([sys.executable, "-m", "firmware_bridge.simulator", "--help"], capture_output=True,
                          text=True, env=clean_env(tmp_path, COLUMNS="80"), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "sends button presses from the keyboard" in proc.stdout and "exit codes" in proc.stdout
    lines = proc.stdout.split("options:")[1].splitlines()
    bare = [line for n, line in enumerate(lines) if re.fullmatch(r"\s{2}--[\w-]+( [A-Z_.]+)?", line)
            and not (n + 1 < len(lines) and re.match(r"\s{8,}\S", lines[n + 1]))]
    assert not bare, bare


def test_human_lists_have_column_headers_and_turns_print_no_none(tmp_path):
    events = run_cli("events", "list", env=clean_env(tmp_path))
    assert events.stdout.splitlines()[0].split()[:2] == ["EVENT", "TOOL"], events.stdout
    chat = run_cli("chat", input_text="set the volume to 30\n", env=clean_env(tmp_path))
    assert chat.returncode == 0, chat.stderr
    turn = [line for line in chat.stdout.splitlines() if "LLM call(s)" in line]
    assert turn and "None" not in turn[0] and "ttft n/a" in turn[0], chat.stdout


def test_schedules_list_has_column_headers(tmp_path):
    env = clean_env(tmp_path)
    with ScriptedLLMServer([Reply(text="Okay!<agent_events>calendar.schedule.create</agent_events>")]) as server:
        created = run_cli("chat", "--llm-base-url", server.url, env=env,
                          input_text="remind me to feed the cat tomorrow at 7 pm\n")
    assert created.returncode == 0, created.stderr
    listed = run_cli("schedules", "list", env=env)
    lines = listed.stdout.splitlines()
    assert lines[0].split()[:3] == ["ID", "STARTS", "REPEAT"] and "feed the cat" in lines[1], listed.stdout


def test_ctrl_c_at_the_idle_chat_prompt_exits_at_once(tmp_path):
    """Ctrl-C at the prompt hung until Enter: a readline blocked in the loop's executor held up asyncio.run's exit.
    Driven through a real terminal (a pty), as a person types it."""
    import pty
    import select
    import signal
    import time

    pid, fd = pty.fork()
    if pid == 0:  # the child: the command on the pty's terminal
        # As a shell starts a command in the foreground: SIGINT at its default. Started from a background job
        # (`.ci/run … &`), this process ignores SIGINT, the child would inherit that across exec, and Ctrl-C would
        # rightly do nothing (a CI run failed so).
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.execve(sys.executable, [sys.executable, "-m", "toy_runtime", "chat"], clean_env(tmp_path))
    seen = b""
    exit_code = None
    try:
        deadline = time.monotonic() + 120  # a safety net for a slow start, not the thing measured
        while b"Ctrl-D to quit" not in seen and time.monotonic() < deadline:
            if select.select([fd], [], [], 0.5)[0]:
                seen += os.read(fd, 4096)
        assert b"Ctrl-D to quit" in seen, seen
        os.write(fd, b"\x03")  # the terminal turns it into SIGINT for the foreground process
        deadline = time.monotonic() + 60  # hung = never; nothing else is typed that could release it
        while exit_code is None and time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                exit_code = os.waitstatus_to_exitcode(status)
            elif select.select([fd], [], [], 0.2)[0]:
                with contextlib.suppress(OSError):
                    seen += os.read(fd, 4096)
    finally:
        if exit_code is None:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        os.close(fd)
    assert exit_code == 130, (exit_code, seen)
    assert b"Traceback" not in seen, seen


def test_a_dead_llm_endpoint_is_named_once_on_stderr(tmp_path):
    """A dead --llm-base-url used to exit 0 with nothing on stderr: the owner only heard offline answers."""
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    proc = run_cli("chat", "--llm-base-url", url, input_text="tell me a story\nand another one\n",
                   env=clean_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    said = [line for line in proc.stderr.splitlines() if "cannot connect to" in line]
    assert len(said) == 1 and url in said[0] and "offline" in said[0], proc.stderr
    assert "Traceback" not in proc.stderr
