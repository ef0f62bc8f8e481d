"""The aggregator over real HTTP on loopback: real agents' exposition in, webhook messages out."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Gauge, generate_latest

from train.monitor import aggregator
from train.monitor.aggregator import Aggregator, previous_start, targets_from_hostfile
from train.monitor.evaluate import Evaluator
from train.monitor.notify import Notifier, Webhook
from train.monitor.rules import AlertRules


class FakeAgent:
    """A node agent's exposition with the agent's own metric names, served by prometheus-client."""

    def __init__(self, node: str) -> None:
        self.registry = CollectorRegistry()
        labels = ["node", "rank", "gpu"]
        self.util = Gauge("trainstack_gpu_utilization_ratio", "u", labels, registry=self.registry)
        self.temp = Gauge("trainstack_gpu_temperature_celsius", "t", labels, registry=self.registry)
        self.step = Gauge("trainstack_train_step", "s", ["node", "rank"], registry=self.registry)
        self.node = node
        self.up = True
        for g in ("0", "1"):
            self.util.labels(node, "0", g).set(0.85)
            self.temp.labels(node, "0", g).set(65)
        self.step.labels(node, "0").set(1)

    def body(self) -> bytes:
        return generate_latest(self.registry)


@pytest.fixture
def server() -> Iterator[tuple[str, dict[str, FakeAgent], list[dict[str, str]]]]:
    agents = {"a": FakeAgent("a"), "b": FakeAgent("b")}
    received: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            agent = agents.get(self.path.strip("/").split("/")[0])
            if agent is None or not agent.up:
                self.send_error(503)
                return
            body = agent.body()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            length = int(self.headers["Content-Length"])
            received.append(json.loads(self.rfile.read(length)))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", agents, received
    httpd.shutdown()
    httpd.server_close()


def test_rounds_over_http_send_one_firing_and_one_resolved_message(
    server: tuple[str, dict[str, FakeAgent], list[dict[str, str]]], tmp_path: Path
) -> None:
    base, agents, received = server
    from train.monitor.scrape import Target

    targets = [Target("rank-0 (a)", f"{base}/a/metrics"), Target("rank-1 (b)", f"{base}/b/metrics")]
    rules = replace(AlertRules(), interval_s=60, digest_every_s=0, unreachable_after=2, keep_firing_for_s=60)
    hook = Webhook(f"{base}/hook", sleep=lambda _: None, log=lambda _: None)
    state = tmp_path / "aggregator.json"
    agg = Aggregator(rules, "dev", targets, state, Evaluator(rules, 0.0), Notifier(rules, "dev", hook.send))
    for i in range(3):  # healthy and progressing
        for a in agents.values():
            a.step.labels(a.node, "0").set(i + 2)
        agg.run_round(60.0 * i)
    assert received == []
    agents["b"].temp.labels("b", "0", "1").set(91)
    agents["a"].up = False
    agg.run_round(180)  # b hot: fires at once; a down once: not yet
    agg.run_round(240)  # a down twice: unreachable fires
    agg.run_round(300)  # nothing new while both keep firing
    agents["b"].temp.labels("b", "0", "1").set(70)
    agents["a"].up = True
    for a in agents.values():
        a.step.labels(a.node, "0").set(99)
    agg.run_round(360)  # both fine again: kept firing for keep_firing_for_s
    assert len(received) == 2, received
    agg.run_round(420)  # fine for 60 s: both resolve
    texts = [m["text"] for m in received]
    assert len(texts) == 4, texts
    assert "gpu_temperature_high" in texts[0] and "rank-1 (b) GPU 1: 91 C" in texts[0]
    assert "node_unreachable" in texts[1] and "rank-0 (a)" in texts[1]
    assert sorted(t.split(" ")[3] for t in texts[2:]) == ["gpu_temperature_high:", "node_unreachable:"]
    saved = json.loads(state.read_text())
    assert saved["firing"] == [] and [n["step"] for n in saved["nodes"]] == [99.0, 99.0]
    assert previous_start(state) == 0.0


def test_hostfile_targets_in_rank_order() -> None:
    text = "10.65.0.2 slots=8\n10.65.0.3 slots=8\n"
    assert [(t.node, t.url) for t in targets_from_hostfile(text, 9400)] == [
        ("rank-0 (10.65.0.2)", "http://10.65.0.2:9400/metrics"),
        ("rank-1 (10.65.0.3)", "http://10.65.0.3:9400/metrics"),
    ]


def test_cli_refuses_bad_rules_with_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "alerts.json").write_text('{"temperature_max_c": -3}')
    (tmp_path / "hostfile").write_text("127.0.0.1 slots=1\n")
    rc = aggregator.main(
        [
            "--rules",
            str(tmp_path / "alerts.json"),
            "--hostfile",
            str(tmp_path / "hostfile"),
            "--agent-port",
            "9",
            "--stack",
            "dev",
            "--state",
            str(tmp_path / "s.json"),
        ]
    )
    assert rc == 2 and "alerts.temperature_max_c must be >= 0" in capsys.readouterr().err


def test_the_first_round_waits_for_the_agents_ports_and_names_those_that_never_listen() -> None:
    """The agents start beside the aggregator: its first round waits (bounded) for their ports rather than
    reading every node as unreachable for a whole interval (seen on a pool's pods, issue #42)."""
    import socket
    import threading

    from train.monitor.aggregator import wait_for_agents
    from train.monitor.scrape import Target

    with socket.socket() as listening, socket.socket() as closed:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        closed.bind(("127.0.0.1", 0))  # bound, never listening: refused
        up = Target("rank-0 (up)", f"http://127.0.0.1:{listening.getsockname()[1]}/metrics")
        down = Target("rank-1 (down)", f"http://127.0.0.1:{closed.getsockname()[1]}/metrics")
        stop = threading.Event()
        assert wait_for_agents([up], stop, 5.0) == []
        stop.set()  # a stop (SIGTERM) ends the wait at once, naming who is still missing
        assert wait_for_agents([up, down], stop, 3600.0) == ["rank-1 (down)"]
