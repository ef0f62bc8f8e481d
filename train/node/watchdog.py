"""The node's own recovery: a hung job or an XID a restart clears, handled on the node in seconds.

The metrics agent (train/node/agent.py) calls `Watchdog.tick` every sample with the newest progress line and
the GPUs' XIDs. When the job is hung by its own pace (train/node/hang.py) the watchdog takes the diagnostics
bundle (every rank's py-spy stack and NCCL's flight recorder, train/node/diagnostics.py) and then ends this
node's ranks with SIGKILL (a SIGSTOPped rank cannot take a SIGTERM); torchrun sees its workers fail and its
own restart (`--max-restarts`, rendered by the start script) brings every rank of the job back from the
newest checkpoint (the other nodes' torchrun restart theirs when the rendezvous changes). An XID of the
restart class (train/node/xid.py) ends the ranks the same way, without a bundle; an XID of the replace class
is the supervisor's (the agent serves it as `trainstack_gpu_xid_errors_total`, the aggregator alerts).

Each restart is recorded where the supervisor counts it against `max_recoveries`:
`<metrics dir>/node-restarts-<node>.jsonl` on the node and `run/<run id>/node-restarts/<time>-<node>.json`
in the stack's bucket (when it has one). The bound is torchrun's `--max-restarts`: past it torchrun fails,
the start script ends, and the supervisor's `job_failed` takes over.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from train.node import diagnostics, hang, xid
from train.node.progress import Progress

PACE_NAME = "pace.{node}.json"
# The share of the hang bound at which the stacks are taken (train/node/hang.py), ahead of any kill.
EARLY_BUNDLE_SHARE = 0.7  # in the node's .run folder: what train/node/launch.py reads at a (re)start


@dataclass
class Restart:
    """One node-side restart, as recorded."""

    at: float  # the node's clock (shown, never compared with the supervisor's)
    node: str
    cause: str  # hang | xid
    reason: str  # one line
    ranks: list[int] = field(default_factory=list)  # the ranks ended
    bundle: str | None = None  # the diagnostics bundle's folder on the node


def _kill(pids: Sequence[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):  # ended meanwhile
            os.kill(pid, signal.SIGKILL)


class Watchdog:
    """The hang and XID decisions over time (pure: train/node/hang.py, xid.py) and the one place they act."""

    def __init__(
        self,
        node: str,
        bounds: hang.Bounds,
        busy_file: Path | None,
        records: Path,
        pace_file: Path | None = None,
        bundles: Path | None = None,
        trace_prefix: str | None = None,
        find_ranks: Callable[[], list[diagnostics.Rank]] = diagnostics.ranks,
        kill: Callable[[Sequence[int]], None] = _kill,
        upload: Callable[[Restart, Path | None], None] | None = None,
        log: Callable[[str], None] = print,
        host_failed: Callable[[Sequence[Any], str], None] | None = None,
    ) -> None:
        self.node, self.bounds, self.busy_file, self.records = node, bounds, busy_file, records
        self.pace_file, self.bundles, self.trace_prefix = pace_file, bundles, trace_prefix
        self.find_ranks, self.kill, self.upload, self.log = find_ranks, kill, upload, log
        self.host_failed = host_failed  # (the GPUs, why): the host recorded as failed (train/node/hostid.py)
        self.pace = hang.Pace()
        self.restarts = 0
        self._xids_seen: dict[int, int] = {}  # gpu -> how many of its xid_events were already judged
        self._pace_written: float | None = None
        self._start_seen: tuple[int, int] | None = None  # the launch's start marker (mtime_ns, inode)
        self._bundle_for: float | None = None  # the silence (its step_at) the early bundle was taken in
        self._bundle: Path | None = None

    def busy(self) -> bool:
        return self.busy_file is not None and self.busy_file.exists()

    def tick(self, line: Progress | None, gpus: Sequence[Any], now: float) -> Restart | None:
        """One sample: learn the pace, then act on a restart-class XID or a hang (at most one action)."""
        if self._group_started():
            self.pace = hang.restarted(self.pace, now)
        self.pace = hang.advance(self.pace, line, self.busy(), now)
        self._write_pace()
        restartable, needs_replace = self._new_xids(gpus)
        if needs_replace and self.host_failed is not None:  # the supervisor replaces; no host gets it again
            codes = ", ".join(f"GPU {g}: XID {c}" for g, c in needs_replace)
            self.host_failed(list(gpus), codes)  # at once: the agent puts it in the bucket from a thread
        if restartable:
            codes = ", ".join(f"GPU {g}: XID {c} ({xid.TABLE[c][1]})" for g, c in restartable)
            return self._restart(now, "xid", f"{codes}: a process restart clears it", bundle=False)
        self._early_bundle(now)
        silent = hang.hung_for(self.pace, self.bounds, now)
        if silent is not None:
            limit = hang.limit_s(self.pace, self.bounds)
            why = f"no new step for {silent:.0f} s (step {self.pace.step}; this run's bound {limit:.0f} s)"
            return self._restart(now, "hang", why, bundle=True)
        return None

    def _early_bundle(self, now: float) -> None:
        """The stacks at EARLY_BUNDLE_SHARE of the bound, before any node ends its ranks: every node sees the
        same silence, and the first to act gets its peers' ranks restarted by torchrun's rendezvous before
        their own bound; the node whose rank is stopped must have its bundle by then."""
        p = self.pace
        if p.step_at is None or self._bundle_for == p.step_at or self.bundles is None:
            return
        if now - p.step_at <= EARLY_BUNDLE_SHARE * hang.limit_s(p, self.bounds):
            return
        self._bundle_for = p.step_at
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
        folder = self.bundles / f"node-{stamp}" / self.node
        try:
            diagnostics.bundle(folder, self.node, self.find_ranks(), self.trace_prefix)
            self._bundle = folder
        except OSError as exc:
            self.log(f"diagnostics bundle not written: {exc}")

    def _group_started(self) -> bool:
        """Whether the worker group (re)started since the last tick (train/node/launch.py mark_start)."""
        if self.pace_file is None:
            return False
        try:
            st = Path(f"{self.pace_file}.start").stat()
        except OSError:
            return False
        seen, self._start_seen = self._start_seen, (st.st_mtime_ns, st.st_ino)
        # Before the first step a start is the boot's (the supervisor's bound), not a restart's.
        return seen != self._start_seen and self.pace.step is not None

    def _new_xids(self, gpus: Sequence[Any]) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
        """(restart-class, replace-class) XIDs not judged before, as (gpu, code)."""
        restart: list[tuple[int, int]] = []
        replace: list[tuple[int, int]] = []
        for g in gpus:
            events = tuple(getattr(g, "xid_events", ()) or ())
            for code in events[self._xids_seen.get(g.index, 0) :]:
                (restart if xid.action(code) == "restart" else replace).append((g.index, code))
            self._xids_seen[g.index] = len(events)
        return restart, replace

    def _restart(self, now: float, cause: str, reason: str, bundle: bool) -> Restart:
        ranks = self.find_ranks()
        folder = self._bundle if bundle and self._bundle_for == self.pace.step_at else None
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
        if bundle and folder is None and self.bundles is not None:
            folder = self.bundles / f"node-{stamp}" / self.node
            try:  # the stacks first, while the ranks still hang where they hang
                diagnostics.bundle(folder, self.node, ranks, self.trace_prefix)
            except OSError as exc:
                self.log(f"diagnostics bundle not written: {exc}")
                folder = None
        self.kill([r.pid for r in ranks])
        self.pace = hang.restarted(self.pace, now)
        self.restarts += 1
        rec = Restart(now, self.node, cause, reason, [r.rank for r in ranks if r.rank is not None])
        rec.bundle = str(folder) if folder else None
        self.log(f"node restart ({cause}): {reason}; ended {len(ranks)} rank(s), torchrun restarts them")
        try:
            with open(self.records, "a", encoding="utf-8") as f:
                f.write(json.dumps(rec.__dict__, separators=(",", ":")) + "\n")
        except OSError as exc:
            self.log(f"node restart not recorded on the node: {exc}")
        if self.upload is not None:  # after the kill: the bucket never delays the restart
            threading.Thread(target=self.upload, args=(rec, folder), daemon=True).start()
        return rec

    def _write_pace(self) -> None:
        """The process group's timeout for the next (re)start, when it changed (train/node/launch.py)."""
        if self.pace_file is None:
            return
        timeout = hang.pg_timeout_s(self.pace, self.bounds)
        if timeout == self._pace_written:
            return
        tmp = self.pace_file.with_name(self.pace_file.name + ".tmp")
        try:
            tmp.write_text(
                json.dumps({"pg_timeout_s": timeout, "limit_s": hang.limit_s(self.pace, self.bounds)})
            )
            os.replace(tmp, self.pace_file)
            self._pace_written = timeout
        except OSError as exc:
            self.log(f"pace not written: {exc}")


def bucket_upload(bucket: str, run_id: str) -> Callable[[Restart, Path | None], None]:
    """The record (and the bundle, when there is one) to the bucket, through boto3 as transfer.py."""

    def put(rec: Restart, folder: Path | None) -> None:
        try:
            import boto3

            s3 = boto3.client("s3", endpoint_url=os.environ.get("AWS_ENDPOINT_URL_S3") or None)
            stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(rec.at))
            body = json.dumps(rec.__dict__).encode()
            s3.put_object(Bucket=bucket, Key=f"run/{run_id}/node-restarts/{stamp}-{rec.node}.json", Body=body)
            if folder is not None and folder.is_dir():
                diagnostics.upload(s3, bucket, f"run/{run_id}/diagnostics/node-{stamp}/{rec.node}/", folder)
        except Exception as exc:  # a thread's last word: logged, never raised into the agent
            print(f"[trainstack agent] node restart not put in the bucket: {type(exc).__name__}: {exc}")

    return put


def read_timeout(pace_file: Path, bounds: hang.Bounds) -> float:
    """The process group's timeout a (re)starting job gets: the agent's newest, else an unlearned pace's."""
    try:
        return float(json.loads(pace_file.read_text())["pg_timeout_s"])
    except (OSError, ValueError, KeyError, TypeError):
        return hang.pg_timeout_s(hang.Pace(), bounds)
