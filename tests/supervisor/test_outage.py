"""The loop never dies of its inputs (supervisor/outage.py, the lease in supervisor/store.py): whole rounds
against a moto bucket with faults injected through fakes. S3 answering 503 for three rounds, billing down
three hours near the cap, a stale lease written by a clock two hours fast, a supervisor killed mid-release
and the release finished by the next one."""

from __future__ import annotations

import json
import os
from datetime import timedelta
from email.utils import formatdate, parsedate_to_datetime
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from supervisor import outage, store
from supervisor.cli import LEASE_LOST, Round
from supervisor.localstore import LOCAL_BUCKET, DirObjects
from supervisor.model import Observation, RoundRecord
from supervisor.observe import Sources
from tests.supervisor.test_round import OUTPUTS, Recorder, bucket, config_of, finished_run, s3

__all__ = ["bucket", "s3"]  # the fixtures, shared with test_round.py

pytestmark = pytest.mark.services  # a moto S3 server beside the test

T0 = 1_800_000_000.0
ROUND_S = 300.0


class Flaky:
    """The stack's bucket, answering 503 to every call while `down`."""

    def __init__(self, s3: Any) -> None:
        self.s3 = s3
        self.down = False

    def __getattr__(self, name: str) -> Any:
        real = getattr(self.s3, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.down:
                error = {"Error": {"Code": "503", "Message": "Service Unavailable"}}
                raise ClientError(error, name)  # type: ignore[arg-type]
            return real(*args, **kwargs)

        return call


class BucketLater:
    """The bucket as it answers `shift_s` later: its Date header moved on (its own clock, not ours)."""

    def __init__(self, s3: Any, shift_s: float) -> None:
        self.s3 = s3
        self.shift_s = shift_s

    def __getattr__(self, name: str) -> Any:
        return getattr(self.s3, name)

    def get_object(self, **kwargs: Any) -> Any:
        answer = self.s3.get_object(**kwargs)
        headers = answer["ResponseMetadata"]["HTTPHeaders"]
        now = parsedate_to_datetime(headers["date"]) if headers.get("date") else answer["LastModified"]
        headers["date"] = formatdate((now + timedelta(seconds=self.shift_s)).timestamp(), usegmt=True)
        return answer


class Clock:
    def __init__(self) -> None:
        self.t = T0

    def __call__(self) -> float:
        return self.t


def rounds(s3: Any, raw: dict[str, Any], actor: Recorder, clock: Clock, billing: Any, **kw: Any) -> Round:
    def state(_s: str, _o: Any) -> dict[str, Any]:  # training on: the step moves with the clock
        step = int((clock.t - T0) / 10)
        return {"time": clock.t, "nodes": [{"node": "pod1", "ok": True, "gpu_util_mean": 0.9, "step": step}]}

    return Round(
        "dev",
        Path("."),
        s3=s3,
        sources=Sources(
            aggregator=state,
            billing=billing,
            s3=s3,
            ssh_key=lambda: True,
            pod_statuses=lambda _ids: {},
            exits=lambda _s, _o, _p: {},
        ),
        actuator=actor,
        read=lambda _w, _s: (OUTPUTS, raw),
        clock=clock,
        log=lambda _l: None,
        **kw,
    )


def test_s3_answering_503_for_three_rounds_never_ends_the_loop(s3: Any, bucket: str, tmp_path: Path) -> None:
    finished_run(s3, bucket, tmp_path)
    flaky, clock, actor = Flaky(s3), Clock(), Recorder()
    sup = rounds(flaky, config_of(bucket), actor, clock, lambda _o, **_k: 12.5)
    shown: list[RoundRecord] = []
    logged: list[str] = []
    n = [0]

    def round_once() -> RoundRecord:
        n[0] += 1
        flaky.down = n[0] <= 3
        clock.t += ROUND_S
        return sup.run_once()

    outage.run_loop(round_once, shown.append, lambda: ROUND_S, logged.append, sleep=lambda _s: None, rounds=5)
    assert n[0] == 5  # every round ran
    assert not any("release" in r.done for r in shown if r.observation.at <= T0 + 3 * ROUND_S)
    first_release = next(i for i, r in enumerate(shown) if "release" in r.done)
    assert shown[first_release].observation.at == T0 + 4 * ROUND_S  # the first round after the outage
    # the outage's rounds are each one line with its reason (or a recorded round that did not act)
    failed = [line for line in logged if line.startswith("round failed:")]
    assert len(failed) + sum(1 for r in shown if r.observation.at <= T0 + 3 * ROUND_S) == 3
    assert all("503" in line or "ClientError" in line for line in failed)


def test_a_round_that_raises_is_one_line_and_the_next_runs() -> None:
    logged: list[str] = []
    calls = [0]

    def round_once() -> RoundRecord:
        calls[0] += 1
        if calls[0] == 1:
            raise RuntimeError("pulumi: state locked")
        raise KeyError("billing")

    def interval() -> float:
        raise OSError("stacks/Pulumi.dev.yaml gone")

    slept: list[float] = []
    outage.run_loop(round_once, lambda _r: None, interval, logged.append, sleep=slept.append, rounds=3)
    assert calls[0] == 3 and slept == [300.0, 300.0]
    assert logged[0].startswith("round failed: RuntimeError: pulumi: state locked at test_outage.py:")
    assert any("keeping 5 min" in line for line in logged)


def test_billing_down_three_hours_near_the_cap_is_released_within_one_round(s3: Any, bucket: str) -> None:
    raw = config_of(bucket)
    cap = 10.0 + 31.92 * 2.5  # the last bill, then 2.5 h at the stack's $/h reach the cap
    raw["trainstack:run"] = {"value": json.dumps({"max_cost_usd": cap})}
    clock, actor = Clock(), Recorder()
    up = [True]

    def billing(_o: Any, **_k: Any) -> float:
        if not up[0]:
            raise ConnectionError("billing: 502")
        return 10.0

    sup = rounds(s3, raw, actor, clock, billing)
    first = sup.run_once()
    assert first.observation.spent_usd == 10.0 and "release" not in first.done
    up[0] = False
    released_at = None
    for _ in range(36):  # three hours of 5-minute rounds
        clock.t += ROUND_S
        record = sup.run_once()
        if "release" in record.done:
            released_at = clock.t
            break
    assert released_at is not None, "the cap did not hold while billing was unreadable"
    bound_then = 10.0 + (released_at - T0) / 3600 * 31.92
    assert bound_then + 31.92 * ROUND_S / 3600 >= cap  # not before the next round would cross it
    assert bound_then <= cap  # and not after: within one round of $/h
    kept = json.loads(s3.get_object(Bucket=bucket, Key=outage.spend_key("dev"))["Body"].read())
    assert kept["billed_usd"] == 10.0 and kept["usd"] == pytest.approx(bound_then)


def test_a_new_compute_never_inherits_the_last_runs_bound(tmp_path: Path) -> None:
    mem = DirObjects(tmp_path)
    billed = Observation(
        at=T0, phase="active", nodes=1, node0_reachable=True, spent_usd=50.0, usd_per_hour=36.0, pods=("a",)
    )
    outage.carry_spend(mem, LOCAL_BUCKET, "dev", billed)
    later = Observation(at=T0 + 3600, phase="active", nodes=1, node0_reachable=False, pods=("a",))
    obs, problem = outage.carry_spend(mem, LOCAL_BUCKET, "dev", later)
    assert problem is None and obs.spend_bound_usd == pytest.approx(86.0)
    other = Observation(at=T0 + 7200, phase="active", nodes=1, node0_reachable=False, pods=("z",))
    assert outage.carry_spend(mem, LOCAL_BUCKET, "dev", other)[0].spend_bound_usd is None
    dry = Observation(at=T0 + 7200, phase="active", nodes=1, node0_reachable=False, pods=("a",))
    before = (tmp_path / outage.spend_key("dev")).read_bytes()
    assert outage.carry_spend(mem, LOCAL_BUCKET, "dev", dry, write=False)[0].spend_bound_usd == 122.0
    assert (tmp_path / outage.spend_key("dev")).read_bytes() == before  # a dry run writes nothing


def _stale_lease(mem: Any, bucket: str, holder: str, holder_clock: float) -> None:
    body = {"holder": holder, "expires_at": holder_clock + store.LEASE_TTL_S, "taken_at": holder_clock}
    mem.put_object(Bucket=bucket, Key=store.lease_key("dev"), Body=json.dumps(body).encode())


def test_a_stale_lease_from_a_clock_two_hours_fast_is_judged_by_the_buckets_clock(
    s3: Any, bucket: str
) -> None:
    _stale_lease(s3, bucket, "fast-clock", T0 + 2 * 3600)  # its holder's clock ran two hours ahead
    ours = store.Lease(BucketLater(s3, 0), bucket, "dev", "ours", clock=lambda: T0)
    assert not ours.acquire() and ours.held_by == "fast-clock"  # just written: held, by the bucket
    later = store.Lease(BucketLater(s3, store.LEASE_TTL_S + 5), bucket, "dev", "ours", clock=lambda: T0)
    assert later.acquire()  # ten minutes later by the bucket's clock, not two hours by the holder's


def test_a_fresh_lease_from_a_clock_behind_is_held(tmp_path: Path) -> None:
    mem = DirObjects(tmp_path)
    _stale_lease(mem, LOCAL_BUCKET, "slow-clock", T0 - 2 * 3600)  # expires_at long past on our clock
    ours = store.Lease(mem, LOCAL_BUCKET, "dev", "ours", clock=lambda: T0)
    assert not ours.acquire()  # written a moment ago: its holder may be acting now
    old = os.stat(tmp_path / store.lease_key("dev")).st_mtime - store.LEASE_TTL_S - 5
    os.utime(tmp_path / store.lease_key("dev"), (old, old))
    assert ours.acquire()


def test_killed_mid_release_the_next_supervisor_finishes_it(s3: Any, bucket: str, tmp_path: Path) -> None:
    finished_run(s3, bucket, tmp_path)
    # the first supervisor took the lease and was killed in its release: no give_back, no audit line
    killed = store.Lease(s3, bucket, "dev", "killed", clock=lambda: T0)
    assert killed.acquire()
    clock, actor = Clock(), Recorder()
    soon = rounds(s3, config_of(bucket), actor, clock, lambda _o, **_k: 12.5).run_once()
    assert soon.done == () and LEASE_LOST in soon.errors  # within the ttl: not twice at once
    later_bucket = BucketLater(s3, store.LEASE_TTL_S + 5)
    record = rounds(later_bucket, config_of(bucket), actor, clock, lambda _o, **_k: 12.5).run_once()
    assert record.decision.kind == "finished" and "release" in record.done


def test_every_round_writes_a_heartbeat_that_watch_reads_by_the_buckets_clock(
    s3: Any, bucket: str, tmp_path: Path
) -> None:
    from supervisor.report import supervisor_line

    finished_run(s3, bucket, tmp_path)
    raw = config_of(bucket)
    clock, actor = Clock(), Recorder()
    rounds(s3, raw, actor, clock, lambda _o, **_k: 12.5, dry_run=True).run_once()
    assert store.read_heartbeat(s3, bucket, "dev", T0) is None  # --dry-run writes nothing
    rounds(s3, raw, actor, clock, lambda _o, **_k: 12.5).run_once()
    read = lambda _w, _s: raw  # noqa: E731
    line, silent = supervisor_line("dev", Path("."), s3=BucketLater(s3, 30), read=read) or ("", True)
    assert not silent and line.startswith("supervisor: finished: ") and "heartbeat 30 s ago" in line
    line, silent = supervisor_line("dev", Path("."), s3=BucketLater(s3, 601), read=read) or ("", False)
    assert silent and line.startswith("supervisor silent: its last heartbeat is 10 min old")


def test_after_the_release_watch_has_the_runs_summary(s3: Any, bucket: str, tmp_path: Path) -> None:
    from supervisor.report import released_summary
    from watch.cli import released_text

    raw = config_of(bucket)
    read = lambda _w, _s: raw  # noqa: E731
    finished_run(s3, bucket, tmp_path)
    assert released_summary("dev", Path("."), s3=s3, read=read) is None  # nothing released yet
    rounds(s3, raw, Recorder(), Clock(), lambda _o, **_k: 12.5).run_once()
    ended = released_summary("dev", Path("."), s3=s3, read=read)
    assert ended is not None and ended["state"] == "released" and ended["ended_as"] == "finished"
    assert ended["steps"] == 50 and ended["spent_usd"] == 12.5 and ended["forecast_usd"] == 64.0
    assert "goodput" in ended["goodput"] and "steps: 50" in ended["summary"]
    assert released_text(ended).startswith("dev: released at ")


def test_a_once_round_that_raises_is_one_line_and_exit_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from supervisor import cli

    def broken(_self: Round) -> RoundRecord:
        raise ClientError({"Error": {"Code": "503", "Message": "Slow Down"}}, "ListObjectsV2")

    monkeypatch.setattr(cli.Round, "run_once", broken)
    assert cli.main(["dev", "--cwd", ".", "--once"]) == cli.EXIT_FAILED
    err = capsys.readouterr().err
    assert err.startswith("scripts/supervise: round failed: ClientError: ") and "503" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
