"""`toy-runtime bench fleet`: a fleet of virtual toys (firmware_bridge.fleet_sim) on its own mosquitto, with per-toy
accounts and the shipped fleet ACL; measures command → result latency, lost and duplicated commands, a broker
restart (time until every toy is back and subscribed, connections per second, retained state correct) and the
broker's CPU and RSS.

    toy-runtime bench fleet --toys 1000 --rate 10 --duration 300            # latency under load
    toy-runtime bench fleet --toys 5000 --rate 0 --idle 60                  # idle fleet: broker RSS/CPU
    toy-runtime bench fleet --toys 1000 --rate 0 --restart                  # broker restart storm
    toy-runtime bench fleet --toys 1000 --runtimes 2                        # real runtimes commanded beside them

With `--runtimes K`, K real `toy-runtime chat` processes (offline defaults, no audio) join the same broker with their
own accounts (`rt-<n>`); the commander sends each one a command a second beside the virtual toys and reports their
round trips, and each runtime's CPU and RSS, apart.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

FLEET_PASSWORD = "pw-fleet"


def add_fleet_parser(bench_sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """The `fleet` command parser."""
    p = bench_sub.add_parser("fleet", help="virtual toys on a private mosquitto: latency, restart storm, broker cost",
                             description=__doc__.splitlines()[0])
    p.add_argument("--toys", type=int, default=100, help="virtual toys (default 100)")
    p.add_argument("--rate", type=float, default=10.0, help="commands per second to random toys (0: none)")
    p.add_argument("--duration", type=float, default=30.0, help="seconds of commands (default 30)")
    p.add_argument("--idle", type=float, default=0.0, help="seconds to watch the connected fleet idle (broker CPU)")
    p.add_argument("--restart", action="store_true", help="kill and restart the broker, measure the way back")
    p.add_argument("--down", type=float, default=1.0, help="seconds the broker stays down on --restart")
    p.add_argument("--runtimes", type=int, default=0,
                   help="real toy-runtime processes (chat, offline, no audio) commanded beside the virtual toys")
    p.add_argument("--seed", type=int, default=None,
                   help="random seed for the reconnect jitter and the command targets (default: unseeded)")
    p.add_argument("--json", metavar="FILE", help="also write the summary here")
    p.set_defaults(func=_run_cli)
    return p


def process_usage(pid: int) -> dict[str, float]:
    """CPU seconds (user + system) and RSS / peak RSS (MiB) of a process, from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu_s = (int(fields[11]) + int(fields[12])) / ticks  # utime, stime (fields 14 and 15 of proc(5))
    status = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                status[key] = int(value.split()[0]) / 1024
    return {"cpu_s": round(cpu_s, 2), "rss_mib": round(status.get("VmRSS", 0.0), 1),
            "peak_rss_mib": round(status.get("VmHWM", 0.0), 1)}


def cpu_pct(pids: list[int], before: list[dict[str, float]], elapsed_s: float) -> list[float]:
    """Each process's CPU since `before` (process_usage of each), as % of one core over `elapsed_s`."""
    return [round(100 * (process_usage(pid)["cpu_s"] - b["cpu_s"]) / elapsed_s, 2) for pid, b in zip(pids, before)]


def runtime_ids(runtimes: int) -> tuple[str, ...]:
    """The device ids (and broker accounts) of the real runtimes of a run."""
    return tuple(f"rt-{i:05d}" for i in range(runtimes))


def start_fleet_broker(toys: int, prefix: str = "sim", runtimes: int = 0) -> Any:
    """A private mosquitto with an account per toy and per real runtime (password `pw-<id>`), the `fleet` account
    and the shipped fleet ACL; no persistence (a restart is a crash that forgets everything: the hardest case for
    retained state)."""
    from firmware_bridge.acl import render_fleet_acl

    from ..testing.broker import MosquittoBroker

    users = {f"{prefix}-{i:05d}": f"pw-{prefix}-{i:05d}" for i in range(toys)}
    users.update({name: f"pw-{name}" for name in runtime_ids(runtimes)})
    users["fleet"] = FLEET_PASSWORD
    broker = MosquittoBroker(users=users, acl=render_fleet_acl({}), start_timeout_s=30.0,
                             extra_config="max_connections -1\nmax_queued_messages 1000")
    return broker.start()


def start_runtime(broker: Any, device_id: str, state_dir: Path) -> subprocess.Popen[str]:
    """One real `toy-runtime chat` (offline defaults, no audio) on the fleet broker as `device_id` with its own
    account and state dir (its log: `<state_dir>.log`); it runs until its standard input closes."""
    from ..testing.services import child_env

    env = child_env()
    env.update(TOY_MQTT__USERNAME=device_id, TOY_MQTT__PASSWORD=f"pw-{device_id}", TOY_STATE_DIR=str(state_dir))
    with open(state_dir.with_suffix(".log"), "w") as log_file:  # a file, not a pipe nobody reads while it runs
        return subprocess.Popen([sys.executable, "-m", "toy_runtime", "chat", "--json", "--mqtt-url", broker.url,
                                 "--device-id", device_id], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=log_file, text=True, env=env)


def stop_runtimes(processes: list[subprocess.Popen[str]]) -> list[int | None]:
    """End each runtime as a user would (end of input) and return the exit codes (None: had to be killed)."""
    codes: list[int | None] = []
    for proc in processes:
        try:
            proc.communicate(timeout=30)
            codes.append(proc.returncode)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            codes.append(None)
    return codes


def run_fleet(toys: int, *, rate: float = 10.0, duration: float = 30.0, idle: float = 0.0, restart: bool = False,
              down_s: float = 1.0, seed: int | None = None, broker: Any = None, runtimes: int = 0,
              log=lambda line: None) -> dict[str, Any]:
    """Run the whole measurement; returns the summary (numbers in seconds, ms, MiB). A given `broker` must hold
    the accounts of `runtimes` real runtimes (start_fleet_broker(..., runtimes=))."""
    from firmware_bridge.fleet_sim import FleetSim, connections_per_second_peak, raise_fd_limit

    fd_limit = raise_fd_limit(2 * toys + 512)  # the broker inherits it: one socket per toy on each side
    own_broker = broker is None
    t_start = time.perf_counter()
    if own_broker:
        broker = start_fleet_broker(toys, runtimes=runtimes)
    log(f"broker up with {toys + runtimes + 1} accounts in {time.perf_counter() - t_start:.1f} s (pid {broker.pid})")
    summary: dict[str, Any] = {"toys": toys, "fd_limit": fd_limit}
    real = runtime_ids(runtimes)
    state_root = Path(tempfile.mkdtemp(prefix="fleet-runtimes-"))
    processes = [start_runtime(broker, name, state_root / name) for name in real]
    sim = FleetSim(broker.host, broker.port, toys, seed=seed, commander_password=FLEET_PASSWORD, real_toys=real)
    try:
        summary["connect_all_s"] = round(sim.connect_all(timeout_s=max(60.0, toys / 20)), 2)
        if real:
            if not sim.wait_real_online(60.0):
                gone = [f"{name}: exit {proc.poll()}" for name, proc in zip(real, processes) if proc.poll() is not None]
                raise RuntimeError(f"real runtimes not online after 60 s ({'; '.join(gone) or 'still starting'}; "
                                   f"their logs: {state_root})")
            summary["runtimes"] = {"count": runtimes}
            log(f"{runtimes} real runtimes online")
        summary["broker_connected"] = process_usage(broker.pid)
        log(f"{toys} toys connected and subscribed in {summary['connect_all_s']} s; broker {summary['broker_connected']}")
        if idle > 0:
            before, t0 = process_usage(broker.pid), time.monotonic()
            runtimes_before = [process_usage(proc.pid) for proc in processes]
            sim.run_for(idle)
            elapsed = time.monotonic() - t0
            summary["idle"] = {"seconds": idle, "broker_cpu_pct": cpu_pct([broker.pid], [before], elapsed)[0],
                               "broker_rss_mib": process_usage(broker.pid)["rss_mib"]}
            if processes:
                summary["idle"]["runtime_cpu_pct_each"] = cpu_pct([p.pid for p in processes], runtimes_before,
                                                                  elapsed)
            log(f"idle {idle:g} s: {summary['idle']}")
        if rate > 0 and duration > 0:
            before, t0 = process_usage(broker.pid), time.monotonic()
            runtimes_before = [process_usage(proc.pid) for proc in processes]
            own_before = resource.getrusage(resource.RUSAGE_SELF)
            summary["commands"] = {"rate_per_s": rate, "seconds": duration,
                                   **sim.command_at_rate(rate, duration)}
            own_after = resource.getrusage(resource.RUSAGE_SELF)
            elapsed = time.monotonic() - t0
            summary["commands"]["broker_cpu_pct"] = cpu_pct([broker.pid], [before], elapsed)[0]
            summary["commands"]["sim_cpu_pct"] = round(100 * ((own_after.ru_utime + own_after.ru_stime) -
                                                              (own_before.ru_utime + own_before.ru_stime)) / elapsed, 2)
            summary["commands"]["broker_rss_mib"] = process_usage(broker.pid)["rss_mib"]
            if processes:
                summary["runtimes"]["cpu_pct_each"] = cpu_pct([p.pid for p in processes], runtimes_before, elapsed)
                summary["runtimes"]["rss_mib_each"] = [process_usage(proc.pid)["rss_mib"] for proc in processes]
            log(f"commands: {summary['commands']}")
        if restart:
            summary["restart"] = _restart(sim, broker, down_s, connections_per_second_peak)
            log(f"restart: {summary['restart']}")
        summary["broker_end"] = process_usage(broker.pid)
    finally:
        sim.close()
        codes = stop_runtimes(processes)
        if processes:
            summary.setdefault("runtimes", {"count": runtimes})["exit_codes"] = codes
        if all(code == 0 for code in codes):  # otherwise the runtimes' logs stay for whoever reads the error
            shutil.rmtree(state_root, ignore_errors=True)
        if own_broker:
            broker.close()
    return summary


def _restart(sim: Any, broker: Any, down_s: float, peak_of: Any) -> dict[str, Any]:
    """Kill the broker (a crash), start it again after `down_s`, and measure the way back."""
    expected = sim.set_states()
    if sim.pending:
        raise RuntimeError(f"{len(sim.pending)} state commands unanswered before the restart")
    killed_at = time.monotonic()
    connects_before = len(sim.stats.connects)
    sim.real_online = dict.fromkeys(sim.real_online, False)  # the crash forgets their retained `online`
    restarter = threading.Thread(target=broker.restart, kwargs={"kill": True, "down_s": down_s}, name="restart")
    restarter.start()
    sim.run_until(lambda: not restarter.is_alive() and not any(t.subscribed for t in sim.toys), down_s + 60)
    listening_at = time.monotonic()
    back = sim.run_until(sim.all_subscribed, 120.0)
    back_at = time.monotonic()
    real_back = sim.wait_real_online(60.0) if sim.real_toys else None
    # when the commander saw each one `online` again: an upper bound (the commander itself reconnects with jitter)
    real_back_at = max((sim.real_online_at.get(name, killed_at) for name in sim.real_toys), default=killed_at)
    restarter.join()
    reconnects = sim.stats.connects[connects_before:]
    states = sim.read_retained_states("fleet", FLEET_PASSWORD)
    correct = sum(states.get(name) == state for name, state in expected.items())
    return {"down_s": down_s, "all_back": back, "back_after_kill_s": round(back_at - killed_at, 2),
            "back_after_listening_s": round(back_at - listening_at, 2),
            "reconnects": len(reconnects), "peak_connections_per_s": peak_of(reconnects, killed_at),
            "refused_connacks": sim.stats.refused,
            "retained_state_correct_pct": round(100 * correct / len(expected), 2),
            **({"runtimes_back": real_back, "runtimes_seen_back_after_kill_s": round(real_back_at - killed_at, 2)}
               if real_back is not None else {})}


def _run_cli(args: argparse.Namespace) -> int:
    if args.toys < 1 or args.rate < 0 or args.duration < 0 or args.runtimes < 0:
        print("bench fleet: --toys must be ≥ 1, --rate, --duration and --runtimes ≥ 0", file=sys.stderr)
        return 2
    from ..testing.broker import BrokerError

    try:
        summary = run_fleet(args.toys, rate=args.rate, duration=args.duration, idle=args.idle, restart=args.restart,
                            down_s=args.down, seed=args.seed, runtimes=args.runtimes,
                            log=lambda line: print(line, file=sys.stderr))
    except BrokerError as exc:
        print(f"bench fleet: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:  # real runtimes that did not come online, state commands unanswered
        print(f"bench fleet: {exc}", file=sys.stderr)
        return 1
    text = json.dumps(summary, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    return 0
