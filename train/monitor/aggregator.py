"""The run's watcher on node 0: scrape every node's agent, apply the alert rules, post to the webhook.

    python -m train.monitor.aggregator --rules alerts.json --hostfile hostfile --agent-port 9400 \
        --stack prod --state metrics/aggregator.json

The start script of rank 0 starts it beside training (no laptop needed) and stops it with training. The
webhook URL comes from `$ALERT_WEBHOOK_URL` (a stack secret, delivered like the others); without it alerts
are only written to the state file, which `scripts/watch` reads over SSH. Every round rewrites the state file
atomically (write, fsync, rename), and a restarted aggregator keeps the run's start time from it, so the
cost projection survives a resume.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from train.monitor.evaluate import Evaluator, Money, project
from train.monitor.notify import Notifier, Webhook
from train.monitor.rules import AlertRules, RulesError
from train.monitor.scrape import Fetch, NodeSample, Target, http_fetch, scrape_all
from train.monitor.webhook_url import webhook_url_problem

WEBHOOK_ENV = "ALERT_WEBHOOK_URL"


def targets_from_hostfile(text: str, port: int) -> list[Target]:
    """`<ip> slots=<n>` lines in rank order -> one agent target per node, named `rank-<i> (<ip>)`."""
    hosts = [line.split()[0] for line in text.splitlines() if line.strip() and not line.startswith("#")]
    return [Target(f"rank-{i} ({ip})", f"http://{ip}:{port}/metrics") for i, ip in enumerate(hosts)]


def _node_row(s: NodeSample) -> dict[str, Any]:
    utils = list(s.gpu_util.values())
    return {
        "node": s.node,
        "ok": s.ok,
        "error": s.error,
        "nvml": s.nvml,
        "gpus": len(utils) or len(s.gpu_temp),
        "gpu_util_min": min(utils) if utils else None,
        "gpu_util_mean": sum(utils) / len(utils) if utils else None,
        "gpu_mem_used_bytes_max": max(s.gpu_mem_used.values()) if s.gpu_mem_used else None,
        "gpu_temp_max_c": max(s.gpu_temp.values()) if s.gpu_temp else None,
        "busbw_gb_per_s": None if s.busbw_bytes_per_s is None else s.busbw_bytes_per_s / 1e9,
        "nvme_write_p99_us": None if s.nvme_write_p99_s is None else s.nvme_write_p99_s * 1e6,
        "step": s.step,
        "step_time_s": s.step_time_s,
        "tokens_per_s": s.tokens_per_s,
        "checkpoint_s": s.checkpoint_s,
        "health_s": s.health_s,
    }


@dataclass
class Aggregator:
    """One round at a time; `run_round` is what the loop (and the tests) call."""

    rules: AlertRules
    stack: str
    targets: Sequence[Target]
    state_path: Path
    evaluator: Evaluator
    notifier: Notifier
    fetch: Fetch = http_fetch

    def run_round(self, now: float) -> dict[str, Any]:
        samples = scrape_all(self.targets, now, self.fetch, timeout=min(10.0, self.rules.interval_s))
        steps = [s.step for s in samples if s.ok and s.step is not None]
        money: Money | None = None
        if self.rules.cost_per_hour_usd > 0:
            money = project(self.rules, self.evaluator.started_at, now, max(steps) if steps else None)
        transitions = self.evaluator.evaluate(samples, now, money)
        self.notifier.handle(transitions, now)
        self.notifier.maybe_digest(samples, money, now)
        state = {
            "v": 1,
            "stack": self.stack,
            "time": now,
            "started_at": self.evaluator.started_at,
            "interval_s": self.rules.interval_s,
            "nodes": [_node_row(s) for s in samples],
            "firing": [
                {"rule": a.rule, "severity": a.severity, "node": a.node, "gpu": a.gpu, "summary": a.summary}
                for a in self.evaluator.firing.values()
            ],
            "money": None if money is None else asdict(money),
        }
        write_atomically(self.state_path, json.dumps(state, indent=1) + "\n")
        return state


def write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def previous_start(state_path: Path) -> float | None:
    try:
        value = json.loads(state_path.read_text(encoding="utf-8")).get("started_at")
    except (OSError, ValueError, AttributeError):
        return None
    return float(value) if isinstance(value, int | float) else None


def _args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m train.monitor.aggregator", description=__doc__.splitlines()[0]
    )
    p.add_argument("--rules", type=Path, required=True, help="alerts.json rendered from trainstack:alerts")
    p.add_argument("--hostfile", type=Path, required=True, help="the job's hostfile, rank order")
    p.add_argument("--agent-port", type=int, required=True, help="training.metrics_port of the agents")
    p.add_argument("--stack", required=True, help="the stack's name, shown in every message")
    p.add_argument("--state", type=Path, required=True, help="where each round's state JSON goes")
    p.add_argument("--rounds", type=int, default=0, help="stop after this many rounds (0: until SIGTERM)")
    return p.parse_args(argv)


AGENT_START_S = 30.0  # how long the first round waits for the agents' ports (they start beside it)


def wait_for_agents(targets: Sequence[Target], stop: threading.Event, bound_s: float) -> list[str]:
    """Wait until every target's port accepts a connection, the bound passes, or `stop` is set; the
    targets still not listening (none: all are)."""
    deadline = time.monotonic() + bound_s
    waiting = list(targets)
    while True:
        waiting = [t for t in waiting if not _listening(t.url)]
        if not waiting or stop.is_set() or time.monotonic() >= deadline:
            return [t.node for t in waiting]
        stop.wait(0.5)


def _listening(url: str) -> bool:
    where = urlsplit(url)
    try:
        with socket.create_connection((where.hostname or "127.0.0.1", where.port or 80), timeout=1.0):
            return True
    except OSError:
        return False


def main(argv: Sequence[str] | None = None) -> int:
    args = _args(argv)
    try:
        rules = AlertRules.from_json(args.rules.read_text(encoding="utf-8"))
        targets = targets_from_hostfile(args.hostfile.read_text(encoding="utf-8"), args.agent_port)
    except (OSError, RulesError) as exc:
        print(f"aggregator: {exc}", file=sys.stderr)
        return 2
    args.state.parent.mkdir(parents=True, exist_ok=True)
    url = os.environ.get(WEBHOOK_ENV, "").strip()

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    problem = webhook_url_problem(url) if url else None
    if url and problem is None:
        send = Webhook(url, log=log).send
    else:
        why = "is not set" if not url else problem
        log(f"aggregator: ${WEBHOOK_ENV} {why}; alerts go only to {args.state} (scripts/watch reads it)")

        def send(text: str) -> bool:
            log("alert (no webhook): " + text.replace("\n", " | "))
            return True

    started = previous_start(args.state) or time.time()
    agg = Aggregator(
        rules, args.stack, targets, args.state, Evaluator(rules, started), Notifier(rules, args.stack, send)
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    log(f"aggregator: watching {len(targets)} node(s) every {rules.interval_s:g} s")
    # The agents start beside this process: a first round before they listen would read every node as
    # unreachable and say nothing until the next interval (5 min). Wait for their ports, briefly.
    missing = wait_for_agents(targets, stop, min(rules.interval_s, AGENT_START_S))
    if missing:
        log(f"aggregator: not listening after {AGENT_START_S:g} s: {', '.join(missing)}")
    done = 0
    while not stop.is_set():
        agg.run_round(time.time())
        done += 1
        if args.rounds and done >= args.rounds:
            break
        stop.wait(rules.interval_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
