"""fleet-sim on a real mosquitto with per-toy accounts and the fleet ACL: commands at a rate come back, none lost or
duplicated; a broker crash brings every toy back subscribed with its retained state; a redelivered command runs once;
a real runtime beside the virtual toys answers its commands and comes back too.
The full-size figures (1,000-5,000 toys) are in docs/benchmarks.md (`toy-runtime bench fleet`)."""

from __future__ import annotations

import pytest

from toy_runtime.bench.fleet import FLEET_PASSWORD, run_fleet, start_fleet_broker
from toy_runtime.testing.broker import BrokerError


@pytest.fixture
def fleet_broker():
    try:
        broker = start_fleet_broker(20)
    except (BrokerError, OSError) as exc:
        from toy_runtime.testing.services import service_unavailable

        service_unavailable("mosquitto", exc)
        raise
    try:
        yield broker
    finally:
        broker.close()


def test_twenty_toys_answer_twenty_commands_and_come_back_after_a_broker_crash(fleet_broker):
    summary = run_fleet(20, rate=20, duration=1.0, restart=True, down_s=0.5, seed=3, broker=fleet_broker)
    commands = summary["commands"]
    assert commands["sent"] == 20 and commands["results"] == 20
    assert commands["lost"] == 0 and commands["duplicated"] == 0
    assert commands["p50_ms"] is not None and commands["p99_ms"] >= commands["p50_ms"]
    restart = summary["restart"]
    assert restart["all_back"] and restart["reconnects"] == 20
    assert restart["retained_state_correct_pct"] == 100.0
    assert 1 <= restart["peak_connections_per_s"] <= 20
    assert summary["broker_end"]["rss_mib"] > 0


def test_a_virtual_toy_runs_a_redelivered_command_once(fleet_broker):
    from firmware_bridge import protocol as p
    from firmware_bridge.fleet_sim import FleetSim

    sim = FleetSim(fleet_broker.host, fleet_broker.port, 2, commander_password=FLEET_PASSWORD, seed=1)
    try:
        sim.connect_all(10)
        toy = sim.toys[0]
        command_id = sim.send_command(toy, name="state.set", arguments={"state": "speaking"})
        sim.run_until(lambda: not sim.pending, 5)
        again = p.Command(command_id=command_id, name="state.set", arguments={"state": "thinking"}, actor="fleet")
        sim.commander.client.publish(f"toy/{toy.name}/command", p.encode(again), qos=1)  # a redelivery
        sim.run_until(lambda: sim.stats.duplicated == 1, 5)
    finally:
        sim.close()
    assert toy.state == "speaking" and toy.redelivered == 1  # answered again, not run again
    assert sim.stats.results == 1 and sim.stats.duplicated == 1
    assert sim.toys[1].answered == set()  # nobody else got it


def test_a_real_runtime_beside_the_virtual_toys_answers_every_command_and_comes_back_after_a_crash():
    try:
        broker = start_fleet_broker(10, runtimes=1)
    except (BrokerError, OSError) as exc:
        from toy_runtime.testing.services import service_unavailable

        service_unavailable("mosquitto", exc)
        raise
    try:
        summary = run_fleet(10, rate=10, duration=2.0, restart=True, down_s=0.5, seed=4, broker=broker, runtimes=1)
    finally:
        broker.close()
    real = summary["commands"]["real"]
    assert real["toys"] == 1 and real["sent"] >= 1 and real["results"] == real["sent"]  # one a second to it
    assert real["lost"] == 0 and real["duplicated"] == 0 and real["p50_ms"] is not None
    commands = summary["commands"]
    assert commands["sent"] >= 10 and commands["results"] == commands["sent"]  # the virtual ones, counted apart
    assert summary["restart"]["runtimes_back"] is True
    assert summary["runtimes"]["exit_codes"] == [0]  # ended by end of input, as a user ends `chat`
    assert summary["runtimes"]["rss_mib_each"][0] > 20
