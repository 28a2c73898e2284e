"""Runs the doctor's checks in order, each under its own time bound, and prints them (lines or JSON)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from typing import Any, Awaitable, Callable, Iterable, Mapping, TextIO

from ..config import ConfigError, Settings, load_settings
from .ears import check_ears
from .engines import check_asr, check_tts
from .host import check_alsa_control, check_audio_input, check_audio_output, check_state_dir
from .search import check_search
from .llm import check_llm
from .services import check_broker
from .verdict import CheckResult, Verdict, fail, ok

__all__ = ["CHECKS", "DEFAULT_TIMEOUTS_S", "diagnose", "register", "run_doctor"]

CHECKS = ("config", "state-dir", "audio-input", "audio-output", "ears", "asr", "tts", "alsa-control", "broker", "llm",
          "search")
DEFAULT_TIMEOUTS_S: dict[str, float] = {
    "state-dir": 10.0, "audio-input": 10.0, "audio-output": 10.0, "ears": 20.0,
    "asr": 120.0, "tts": 120.0,  # a large vosk model on a Pi takes tens of seconds
    "alsa-control": 10.0, "broker": 10.0, "llm": 30.0, "search": 40.0,  # searxng max timeout is 30 s
}

_CHECK_FUNCS: dict[str, Callable[[Settings], Awaitable[Verdict]]] = {
    "state-dir": check_state_dir, "audio-input": check_audio_input, "audio-output": check_audio_output,
    "ears": check_ears,
    "asr": check_asr, "tts": check_tts, "alsa-control": check_alsa_control, "broker": check_broker, "llm": check_llm,
    "search": check_search,
}


def _config_summary(settings: Settings, config: str | os.PathLike[str] | None) -> str:
    source = f"{config} + environment" if config else "defaults + environment"
    llm = "llm online" if settings.llm_online else "llm offline"
    mqtt = "mqtt on" if settings.mqtt.url else "mqtt off"
    search = "search searxng" if settings.search.url else f"search {settings.search.provider}"
    return (f"{source}: {llm}, asr {settings.asr.engine}, volume {settings.volume.backend}, {mqtt}, {search}, "
            f"time zone {settings.session.timezone}, state {settings.state_dir}")


# -- running them ----------------------------------------------------------------------------------------


def _timeout_for(name: str, settings: Settings, timeouts: Mapping[str, float]) -> float:
    if name in timeouts:
        return timeouts[name]
    if name == "llm":  # the client's own timeouts decide first; this only bounds a pathological case
        return max(DEFAULT_TIMEOUTS_S["llm"], settings.llm.connect_timeout_s
                   + max(settings.llm.first_token_timeout_s, settings.llm.read_timeout_s) + 5)
    return DEFAULT_TIMEOUTS_S[name]


async def _run_check(name: str, settings: Settings, timeout_s: float) -> CheckResult:
    t0 = time.perf_counter()
    try:
        async with asyncio.timeout(timeout_s):
            verdict = await _CHECK_FUNCS[name](settings)
    except TimeoutError:
        verdict = fail(f"no result within {timeout_s:g} s", "something hangs here: run the check again with the "
                       "service stopped, and see the journal (`journalctl -u toy-runtime`)")
    except Exception as exc:  # a bug or an unforeseen library error: report it, go on with the other checks
        verdict = fail(f"unexpected {type(exc).__name__}: {exc}", "please report this with the output of "
                       "`toy-runtime doctor --json`")
    return CheckResult(name, verdict.status, verdict.detail, verdict.fix, round((time.perf_counter() - t0) * 1000, 1))


async def diagnose(settings: Settings | None = None, *, config: str | os.PathLike[str] | None = None,
                   skip: Iterable[str] = (), timeouts: Mapping[str, float] | None = None,
                   on_start: Callable[[str], None] | None = None,
                   on_result: Callable[[CheckResult], None] | None = None) -> list[CheckResult]:
    """Run every check in order and return the results. Without `settings` they are loaded from `config` (and
    the environment); a ConfigError is the `config` FAIL and the other checks are then SKIP."""
    skipped = set(skip)
    unknown = skipped - set(CHECKS)
    if unknown:
        raise ValueError(f"unknown check(s): {', '.join(sorted(unknown))}; known: {', '.join(CHECKS)}")
    timeouts = dict(timeouts or {})
    results: list[CheckResult] = []

    def done(result: CheckResult) -> None:
        results.append(result)
        if on_result is not None:
            on_result(result)

    t0 = time.perf_counter()
    if settings is None:
        try:
            settings = load_settings(config)
            from ..app.preflight import check_settings

            check_settings(settings)  # files, folders and event names; on failure the other checks still run
            config_result = ok(_config_summary(settings, config))
        except ConfigError as exc:
            config_result = fail(str(exc), "fix that key in the TOML profile or the TOY_* environment "
                                 "(`toy-runtime doctor --config FILE` checks a profile)")
    else:
        config_result = ok(_config_summary(settings, config))
    done(CheckResult("config", config_result.status, config_result.detail, config_result.fix,
                     round((time.perf_counter() - t0) * 1000, 1)))
    for name in CHECKS[1:]:
        if settings is None:
            done(CheckResult(name, "SKIP", "the configuration is invalid"))
        elif name in skipped:
            done(CheckResult(name, "SKIP", "skipped (--skip)"))
        else:
            if on_start is not None:
                on_start(name)
            done(await _run_check(name, settings, _timeout_for(name, settings, timeouts)))
    return results


def _is_tty(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if callable(isatty) else False
    except (OSError, ValueError):
        return False


async def run_doctor(settings: Settings | None = None, *, stream: TextIO | None = None,
                     config: str | os.PathLike[str] | None = None, as_json: bool = False, skip: Iterable[str] = (),
                     timeouts: Mapping[str, float] | None = None) -> int:
    """Run the checks, print them to `stream` (lines, or JSON with `as_json`); 1 when any check failed, else 0."""
    out = stream if stream is not None else sys.stdout
    tty = not as_json and _is_tty(out)
    width = max(len(n) for n in CHECKS) + 2

    def on_start(name: str) -> None:
        if tty:  # a slow check (a model on a Pi) must not look like a hang
            out.write(f"…     {name}\r")
            out.flush()

    def on_result(result: CheckResult) -> None:
        if as_json:
            return
        out.write(("\r\033[K" if tty else "") + f"{result.status:<5} {result.name:<{width}} {result.detail}\n")
        if result.fix and result.status in ("WARN", "FAIL"):
            out.write(f"{'':<5} {'':<{width}} fix: {result.fix}\n")
        out.flush()

    t0 = time.perf_counter()
    results = await diagnose(settings, config=config, skip=skip, timeouts=timeouts, on_start=on_start,
                             on_result=on_result)
    failed = sum(r.status == "FAIL" for r in results)
    if as_json:
        out.write(json.dumps([r.as_dict() for r in results], ensure_ascii=False, indent=2) + "\n")
    else:
        counts = {s: sum(r.status == s for r in results) for s in ("OK", "WARN", "FAIL", "SKIP")}
        out.write(f"\n{counts['OK']} ok, {counts['WARN']} warning(s), {counts['FAIL']} failed, {counts['SKIP']} "
                  f"skipped in {(time.perf_counter() - t0):.1f} s"
                  + (": the toy cannot run like this" if failed else "") + "\n")
    out.flush()
    return 1 if failed else 0


def cmd_doctor(args: argparse.Namespace) -> int:
    return asyncio.run(run_doctor(config=args.config, as_json=args.json, skip=args.skip or ()))


def register(subparsers: Any) -> None:
    """Add `toy-runtime doctor` to the CLI's subparsers."""
    from ..cli.common import add_config as _add_config

    p = subparsers.add_parser(
        "doctor", help="check config, audio devices, models, mixer, broker, LLM and disk; explain fixes",
        description="Exit code 1 when a check fails (WARN and SKIP do not fail), else 0.")
    _add_config(p)
    p.add_argument("--json", action="store_true", help="print a JSON list of {name, status, detail, fix, ms}")
    p.add_argument("--skip", action="append", choices=CHECKS[1:], metavar="CHECK",
                   help=f"skip a check (repeatable): {', '.join(CHECKS[1:])}")
    p.set_defaults(func=cmd_doctor)
