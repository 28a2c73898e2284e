"""A bad `[events] idempotency_path` file stops the start with one line naming the key (exit 2), and leaves the file
as it was. Real subprocesses of the CLI, as a user starts them."""

from __future__ import annotations

from tests.cli.helpers import clean_env, one_line_error, run_cli


def chat(tmp_path, **env: str):
    return run_cli("chat", env=clean_env(tmp_path / "state", **env), input_text="hello\n")


def test_an_idempotency_file_that_is_not_sqlite(tmp_path):
    path = tmp_path / "idem.db"
    path.write_text("my shopping list\n")
    line = one_line_error(chat(tmp_path, TOY_EVENTS__IDEMPOTENCY_PATH=str(path)))
    assert line.startswith(f"events.idempotency_path: {path} is not an SQLite database")
    assert path.read_text() == "my shopping list\n"


def test_a_damaged_idempotency_file_in_the_state_dir(tmp_path):
    state = tmp_path / "state"
    first = run_cli("chat", env=clean_env(state), input_text="hello\n")
    assert first.returncode == 0, first.stderr
    path = state / "idempotency.sqlite3"
    raw = bytearray(path.read_bytes())
    raw[100:4096] = b"\xff" * (4096 - 100)  # the SQLite magic stays; the schema page is ruined
    path.write_bytes(bytes(raw))
    for suffix in ("-wal", "-shm"):
        (state / f"idempotency.sqlite3{suffix}").unlink(missing_ok=True)
    line = one_line_error(chat(tmp_path))
    assert line.startswith(f"events.idempotency_path: {path}") and "move it away" in line
    assert path.read_bytes() == bytes(raw)


def test_an_idempotency_path_that_is_a_folder(tmp_path):
    (tmp_path / "idem").mkdir()
    line = one_line_error(chat(tmp_path, TOY_EVENTS__IDEMPOTENCY_PATH=str(tmp_path / "idem")))
    assert line == f"events.idempotency_path: {tmp_path}/idem is a folder, not a file"
