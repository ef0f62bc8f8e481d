"""scripts/watch: joining the sources, the critical verdict, the table, RunPod billing and pod logs."""

from __future__ import annotations

import json
import os
from collections.abc import Callable

import httpx
import pytest
from rich.console import Console

from providers.runpod.client import RunPodClient
from providers.runpod.ratelimit import TokenBucket
from stackview import snapshot, sources
from tests.polling import scaled
from watch.render import render

OUTPUTS = {
    "nodes": [
        {"rank": 0, "ip": "10.1.0.2", "pod_id": "pod-a", "ssh_endpoint": "127.0.0.1:2201"},
        {"rank": 1, "ip": "10.1.0.3", "pod_id": "pod-b", "ssh_endpoint": "127.0.0.1:2202"},
    ],
    "cost_per_hour": 63.84,
    "cluster_id": "cl-1",
}
STATE = {
    "time": 1000.0,
    "started_at": 0.0,
    "nodes": [
        {
            "node": "rank-0 (10.0.0.2)",
            "ok": True,
            "gpu_util_mean": 0.9,
            "gpu_mem_used_bytes_max": 61e9,
            "gpu_temp_max_c": 71.0,
            "busbw_gb_per_s": 310.0,
            "nvme_write_p99_us": 45.0,
            "step": 120,
            "step_time_s": 0.5,
        },
        {"node": "rank-1 (10.0.0.3)", "ok": False, "error": "agent unreachable (ConnectionRefusedError)"},
    ],
    "firing": [
        {
            "rule": "node_unreachable",
            "severity": "critical",
            "node": "rank-1 (10.0.0.3)",
            "summary": "rank-1 (10.0.0.3): metrics agent unreachable for 2 rounds",
        }
    ],
    "money": {"spent_usd": 17.7, "burn_usd_per_h": 63.84, "projected_usd": 900.0, "budget_usd": 1000.0},
}


def _snap(**kw: object) -> snapshot.WatchSnapshot:
    args: dict[str, object] = dict(
        stack="search",
        now=1030.0,
        outputs=OUTPUTS,
        aggregator=STATE,
        billed_usd=18.12,
        forecast_usd=850.0,
        logs={"pod-b": ["sshd: listening", "start-node: preflight failed"]},
    )
    args.update(kw)
    return snapshot.build(**args)  # type: ignore[arg-type]


def test_rows_join_outputs_and_the_aggregators_rows_by_rank() -> None:
    s = _snap()
    a, b = s.nodes
    assert (a.pod_id, a.reachable, a.gpu_util_mean, a.gpu_mem_max_gb, a.step) == (
        "pod-a",
        True,
        0.9,
        61.0,
        120,
    )
    assert (b.pod_id, b.reachable, b.alerts) == ("pod-b", False, ("node_unreachable",))
    assert b.log_tail == ("sshd: listening", "start-node: preflight failed")
    assert s.money.spent_usd == 18.12 and s.money.source == "RunPod billing"
    assert s.aggregator_age_s == 30.0
    assert s.critical and s.to_json()["critical"] is True


def test_healthy_is_not_critical_and_money_falls_back_to_price_times_time() -> None:
    state = {**STATE, "nodes": [STATE["nodes"][0], {**STATE["nodes"][0], "node": "rank-1"}], "firing": []}
    s = _snap(aggregator=state, billed_usd=None, now=3600.0)
    assert not s.critical
    assert s.money.spent_usd == pytest.approx(63.84) and "price x time" in s.money.source


def test_node_0_out_of_reach_is_critical_and_the_others_unknown() -> None:
    s = _snap(aggregator=None, billed_usd=None)
    assert [n.reachable for n in s.nodes] == [False, None]
    assert s.critical and s.money.spent_usd is None


def test_node_0_answering_without_aggregator_state_is_unknown_not_unreachable() -> None:
    s = _snap(aggregator=None, billed_usd=None, node0_answered=True)
    assert [n.reachable for n in s.nodes] == [None, None]
    assert not s.critical and all(n.note == "no aggregator state" for n in s.nodes)


def test_aggregator_state_tells_a_missing_state_file_from_an_unreachable_node() -> None:
    from providers.delivery.ssh import SshTarget, UnreachableError

    commands: list[str] = []

    def answers(text: str) -> Callable[[SshTarget, str], str]:
        def run(target: SshTarget, command: str) -> str:
            assert (target.host, target.port, target.user) == ("127.0.0.1", 2201, "root")
            commands.append(command)
            return text

        return run

    def unreachable(target: SshTarget, command: str) -> str:
        raise UnreachableError("ssh to root@127.0.0.1:2201 failed 3 times in 10 s")

    outputs = {**OUTPUTS, "workdir": "/workspace/my run"}
    assert sources.aggregator_state("search", outputs, run=answers(json.dumps(STATE))) == STATE
    assert "'/workspace/my run/metrics/aggregator.json'" in commands[0]  # quoted for the remote shell
    with pytest.raises(sources.NoStateError, match=r"no /workspace/my run/metrics/aggregator\.json"):
        sources.aggregator_state("search", outputs, run=answers(""))
    with pytest.raises(sources.WatchError) as err:
        sources.aggregator_state("search", outputs, run=unreachable)
    assert not isinstance(err.value, sources.NoStateError) and "pod-a" in str(err.value)


def test_collect_reads_no_pod_logs_for_a_node_0_that_answered(monkeypatch: pytest.MonkeyPatch) -> None:
    from pathlib import Path

    from watch import cli

    def no_state(stack: str, outputs: object, run: object) -> dict[str, object]:
        raise sources.NoStateError("node 0 (pod-a) answered but has no state")

    def no_logs(pod_ids: object) -> dict[str, list[str]]:
        raise AssertionError(f"pod logs read for {pod_ids}")

    monkeypatch.setattr(sources, "aggregator_state", no_state)
    monkeypatch.setattr(sources, "billed_usd", lambda outputs: 1.0)
    monkeypatch.setattr(sources, "pod_logs", no_logs)
    snap = cli.collect("search", Path("."), outputs_of=lambda cwd, stack: OUTPUTS)
    assert [n.reachable for n in snap.nodes] == [None, None] and not snap.critical
    assert snap.problems == ("aggregator: node 0 (pod-a) answered but has no state",)


def test_collect_reads_the_runpod_logs_of_a_node_0_out_of_reach(monkeypatch: pytest.MonkeyPatch) -> None:
    from pathlib import Path

    from watch import cli

    def out_of_reach(stack: str, outputs: object, run: object) -> dict[str, object]:
        raise sources.WatchError("node 0 (pod-a): ssh failed 3 times in 10 s")

    asked: list[list[str]] = []

    def logs(pod_ids: list[str]) -> dict[str, list[str]]:
        asked.append(pod_ids)
        return {"pod-a": ["sshd: no hostkeys available"]}

    monkeypatch.setattr(sources, "aggregator_state", out_of_reach)
    monkeypatch.setattr(sources, "billed_usd", lambda outputs: 1.0)
    monkeypatch.setattr(sources, "pod_logs", logs)
    monkeypatch.setattr(sources, "training_log_tails", lambda stack, outputs, pods, run: {})  # SSH fails too
    snap = cli.collect("search", Path("."), outputs_of=lambda cwd, stack: OUTPUTS)
    assert asked == [["pod-a"]] and snap.critical
    assert snap.nodes[0].log_tail == ("sshd: no hostkeys available",) and snap.nodes[1].log_tail == ()
    assert snap.nodes[0].log_source == "RunPod log"


def test_an_unreachable_agent_shows_the_training_log_not_the_containers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Node 0's agent is down but SSH answers: the start script's log is read, RunPod's (sshd's) is not."""
    from pathlib import Path

    from watch import cli

    commands: list[tuple[str, str]] = []

    def ssh(target: object, command: str) -> str:
        commands.append((str(getattr(target, "alias", "")), command))
        return "step 1350 loss 0.0398\n[trainstack 09:26 node 0] checkpoint synced\n"

    state = dict(
        STATE, nodes=[{"node": "rank-0", "ok": False, "error": "agent unreachable"}, STATE["nodes"][0]]
    )
    monkeypatch.setattr(sources, "aggregator_state", lambda stack, outputs, run: state)
    monkeypatch.setattr(sources, "billed_usd", lambda outputs: 1.0)
    monkeypatch.setattr(sources, "pod_logs", lambda pods: pytest.fail(f"RunPod logs read for {pods}"))
    real = sources.training_log_tails
    monkeypatch.setattr(
        sources, "training_log_tails", lambda stack, outputs, pods, run: real(stack, outputs, pods, run=ssh)
    )
    outputs = dict(OUTPUTS, workdir="/workspace/trainstack")
    snap = cli.collect("search", Path("."), outputs_of=lambda cwd, stack: outputs)
    assert commands and commands[0][0] == "pod-a"
    assert "/workspace/trainstack/logs/start-node-0.pod-a.log" in commands[0][1]
    assert snap.nodes[0].log_tail == ("step 1350 loss 0.0398", "[trainstack 09:26 node 0] checkpoint synced")
    assert snap.nodes[0].log_source == "training log"
    console = Console(width=200, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    console.print(render(snap))
    text = console.export_text()
    assert "rank 0 training log | step 1350 loss 0.0398" in text


@pytest.mark.slow  # runs scripts/watch (a subprocess of the real entry point)
def test_a_stack_that_is_not_up_is_one_line_and_exit_3(tmp_path: object) -> None:
    import subprocess
    from pathlib import Path

    from harness.pulumi_cli import REPO

    proc = subprocess.run(
        [str(REPO / "scripts/watch"), "search", "--once"],
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TRAINSTACK_LOCAL": "1",
             "RUNPOD_API_URL": "http://127.0.0.1:9", "TRAINSTACK_LOCAL_WORKSPACES": str(Path(str(tmp_path)))},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == "" and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "stack 'search' is not up here" in proc.stderr and "scripts/up search" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_q_leaves_the_live_view(tmp_path: object) -> None:
    """The live view on a terminal: `q` (no Enter) ends it with exit 0, instead of being echoed."""
    import os
    import pty
    import subprocess
    import sys
    import time as _time

    driver = (
        "import sys\n"
        "from stackview import snapshot\n"
        "from watch import cli\n"
        "snap = snapshot.build(stack='s', now=0.0, outputs={'nodes': []}, aggregator=None, billed_usd=None,"
        " forecast_usd=None, logs={})\n"
        "cli.collect = lambda stack, cwd, **_kw: snap\n"
        "sys.exit(cli.main(['s', '--cwd', '.', '--every', '3600']))\n"
    )
    main_fd, node_fd = pty.openpty()
    from harness.pulumi_cli import REPO

    proc = subprocess.Popen(
        [sys.executable, "-c", driver], cwd=REPO, stdin=node_fd, stdout=node_fd, stderr=node_fd
    )
    os.close(node_fd)
    seen = b""
    deadline = _time.monotonic() + scaled(60)
    while b"money" not in seen and _time.monotonic() < deadline:  # the first frame is drawn
        seen += os.read(main_fd, 4096)
    os.write(main_fd, b"q")
    try:
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
        os.close(main_fd)


def test_the_table_shows_every_column_the_operator_needs() -> None:
    console = Console(record=True, width=160)
    console.print(render(_snap()))
    text = console.export_text()
    for needle in (
        "pod-a",
        "90%",
        "61.0",
        "310.0",
        "45",
        "120",
        "2.00",
        "UNREACHABLE",
        "start-node: preflight failed",
        "CRITICAL node_unreachable",
        "$63.84/h",
        "spent $18.12",
        "forecast $850",
        "budget $1,000",
        "30 s ago",
    ):
        assert needle in text, needle


def _client(handler: object) -> RunPodClient:
    return RunPodClient(
        "https://api.runpod.test",
        "rpa_test",
        transport=httpx.MockTransport(handler),  # type: ignore[arg-type]
        limiter=TokenBucket(1000, burst=100),
        sleep=lambda _: None,
    )


def test_billing_sums_the_stacks_pods_and_cluster_in_one_request_each() -> None:
    seen: list[tuple[str, dict[str, str]]] = []
    pods = {str(n["pod_id"]) for n in OUTPUTS["nodes"]}
    assert len(pods) >= 2

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.url.path, dict(request.url.params)))
        if request.url.path == "/v2/billing/pods":  # unfiltered: a record per pod and day, ours and others'
            owners = [*sorted(pods), "someone-elses-pod"]
            records = [{"podId": p, "totalAmount": 1.25} for p in owners for _day in range(2)]
        else:
            records = [{"clusterId": "cl-1", "totalAmount": 10.0}] * 2
        return httpx.Response(200, json={"records": records, "metadata": {}})

    assert sources.billed_usd(OUTPUTS, client=_client(handler)) == pytest.approx(len(pods) * 2.5 + 20)
    assert seen == [
        ("/v2/billing/pods", {"bucketSize": "day"}),
        ("/v2/billing/clusters", {"clusterId": "cl-1", "bucketSize": "day"}),
    ]


def test_pod_logs_read_the_sse_backfill() -> None:
    lines = [
        f"id: {i}\ndata: {json.dumps({'ts': 't', 'source': 'container', 'line': f'line {i}'})}\n\n"
        for i in range(3)
    ]

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/v2/pods/pod-b/logs" and request.url.params["tail"] == "3"
        assert request.headers["Authorization"] == "Bearer rpa_test"
        return httpx.Response(200, text="".join(lines), headers={"Content-Type": "text/event-stream"})

    assert sources.pod_logs(["pod-b"], lines=3, client=_client(handler)) == {
        "pod-b": ["line 0", "line 1", "line 2"]
    }


def test_pod_logs_error_is_mapped_and_names_no_key() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(404, json={"title": "Not Found", "detail": "no pod rpa_test"})

    with pytest.raises(Exception) as err:
        sources.pod_logs(["gone"], client=_client(handler))
    assert "rpa_test" not in str(err.value)


# Issue #34, classes 3 and 5: what RunPod, a node or the state may put on the operator's terminal, and a
# RunPod that does not answer.
OSC_TITLE, CLEAR, OSC8 = (
    "\x1b]0;pwned\x07",
    "\x1b[2J",
    "\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\",
)
HOSTILE_TERMINAL = [
    (
        "alert summary",
        {"aggregator": {**STATE, "firing": [{**STATE["firing"][0], "summary": f"x{OSC_TITLE}{CLEAR}"}]}},
    ),  # type: ignore[dict-item]
    ("pod log line", {"logs": {"pod-b": [f"line {OSC8}", f"{CLEAR}clear"]}}),
    (
        "pod id",
        {
            "outputs": {
                **OUTPUTS,
                "nodes": [
                    {
                        "rank": 0,
                        "ip": "10.1.0.2",
                        "pod_id": f"[link=https://evil.example]pod{OSC_TITLE}[/link]",
                        "ssh_endpoint": "h:1",
                    }
                ],
            }
        },
    ),
    (
        "alert markup",
        {"aggregator": {**STATE, "firing": [{**STATE["firing"][0], "summary": "[/bold] [blink]x"}]}},
    ),  # type: ignore[dict-item]
]


@pytest.mark.parametrize(("where", "over"), HOSTILE_TERMINAL, ids=[r[0] for r in HOSTILE_TERMINAL])
def test_no_control_sequence_or_markup_from_a_source_reaches_the_terminal(
    where: str, over: dict[str, object]
) -> None:
    console = Console(record=True, width=200, force_terminal=True, color_system="truecolor")
    console.print(render(_snap(**over)))
    raw = console.export_text(styles=True)
    assert "\x1b]" not in raw, f"{where}: an OSC sequence (title, hyperlink) reached the terminal"
    assert "\x1b[2J" not in raw, f"{where}: a clear-screen reached the terminal"
    assert "\x07" not in raw


def test_a_fresh_clone_without_a_workspace_is_one_line(
    tmp_path: object, capsys: pytest.CaptureFixture[str]
) -> None:
    from watch.cli import EXIT_NOT_UP, main

    assert main(["dev", "--cwd", "/nonexistent/trainstack/.state/local/dev", "--once"]) == EXIT_NOT_UP
    err = capsys.readouterr().err
    assert "is not up here (no workspace at" in err and "run scripts/up dev" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_billing_from_a_runpod_that_does_not_answer_gives_up_within_the_watch_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import socket
    import threading

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: connections are refused
    monkeypatch.setenv("RUNPOD_API_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("RUNPOD_API_KEY", "rpa_test")
    outcome: list[str] = []

    def read() -> None:
        try:
            sources.billed_usd(OUTPUTS)
            outcome.append("answered")
        except Exception as exc:
            outcome.append(type(exc).__name__)

    worker = threading.Thread(target=read, daemon=True)
    worker.start()
    worker.join(90)  # the providers' own deadline is 180 s; the watch's is WATCH_DEADLINE_S
    assert outcome and outcome[0] != "answered", "billing from a stopped RunPod did not give up"


def test_the_run_ledger_is_one_line_of_the_table_and_of_the_json(monkeypatch: pytest.MonkeyPatch) -> None:
    from pathlib import Path

    from watch import cli

    monkeypatch.setattr(sources, "aggregator_state", lambda stack, outputs, run: {"time": 1.0, "nodes": []})
    monkeypatch.setattr(sources, "billed_usd", lambda outputs: 1.0)
    line = "ledger: goodput 93.0% of 10.00 GPU-h: productive 9.30 / boot 0.20 / gate+burn-in 0.10 / ..."
    snap = cli.collect(
        "search", Path("."), outputs_of=lambda cwd, stack: OUTPUTS, ledger_of=lambda s, c: line
    )
    assert snap.to_json()["ledger"] == line
    console = Console(width=200, record=True)
    console.print(render(snap))
    assert "ledger: goodput 93.0% of 10.00 GPU-h" in console.export_text()

    def unreadable(stack: str, cwd: Path) -> str | None:
        raise OSError("no bucket endpoint")

    broken = cli.collect("search", Path("."), outputs_of=lambda cwd, stack: OUTPUTS, ledger_of=unreadable)
    assert broken.ledger is None and "ledger: OSError: no bucket endpoint" in broken.problems


def test_a_pools_aggregators_are_read_pod_by_pod_and_joined_in_node_order() -> None:
    """A pool (issue #42): every pod runs its own trial's aggregator, whose state carries the pod's index
    (the pods may share one volume); the join keeps node order, an empty row for a pod that did not answer,
    and the newest round (a pool's aggregation has stopped only when every pod's has)."""
    from providers.delivery.ssh import SshTarget, UnreachableError

    pool = {
        "topology": "pods",
        "nodes": [
            {"rank": 0, "ip": "10.1.0.2", "pod_id": "pod-a", "ssh_endpoint": "127.0.0.1:2201"},
            # trial 1 ended: a gap
            {"rank": 2, "ip": "10.1.0.4", "pod_id": "pod-c", "ssh_endpoint": "127.0.0.1:2203"},
            {"rank": 3, "ip": "10.1.0.5", "pod_id": "pod-d", "ssh_endpoint": "127.0.0.1:2204"},
        ],
    }
    own = {
        2201: {"time": 900.0, "started_at": 5.0, "nodes": [{"node": "a", "ok": True, "step": 40}]},
        2203: {"time": 1000.0, "started_at": 9.0, "nodes": [{"node": "c", "ok": True, "step": 70}]},
    }
    asked: dict[int, str] = {}

    def run(target: SshTarget, command: str) -> str:
        asked[target.port] = command
        if target.port not in own:
            raise UnreachableError("ssh to root@127.0.0.1:2204 failed")
        return json.dumps(own[target.port])

    state = sources.aggregator_state("search", pool, run=run)
    assert [r.get("step") for r in state["nodes"]] == [40, 70, None]
    assert (state["time"], state["started_at"]) == (1000.0, 5.0)
    assert len(state["unread"]) == 1 and "pod-d" in state["unread"][0]
    assert "metrics/aggregator-pod-0.json" in asked[2201] and "metrics/aggregator-pod-2.json" in asked[2203]
    snap = snapshot.build(
        stack="search",
        now=1010.0,
        outputs=pool,
        aggregator=state,
        billed_usd=None,
        forecast_usd=None,
        logs={},
    )
    assert [(v.rank, v.step) for v in snap.nodes] == [(0, 40.0), (2, 70.0), (3, None)]

    def down(target: SshTarget, command: str) -> str:
        raise UnreachableError(f"ssh to root@127.0.0.1:{target.port} failed")

    with pytest.raises(sources.WatchError, match="pod-a"):  # none answers: the first error says why
        sources.aggregator_state("search", pool, run=down)
