"""`scripts/supervise STACK [--once] [--dry-run] [--json] [--log]`: release a run's compute when it is done,
idle or over budget (docs/SUPERVISOR.md).

scripts/supervise prod             # a round every trainstack:supervisor.interval_min (5), until Ctrl-C;
                                   # a round that fails is one line and the next one runs
scripts/supervise prod --once      # one round, then exit (what .github/workflows/supervise.yml runs)
scripts/supervise prod --dry-run   # decide and print, change nothing (no message, sync, release, audit line)
scripts/supervise prod --json      # one JSON object per round
scripts/supervise prod --log       # the audit lines of past rounds, from the bucket, then exit
scripts/supervise prod --report    # the run's goodput ledger: where the GPU-hours went (--png FILE: a plot)

Exit 0 after the rounds; 2 when the stack's outputs or config cannot be read (it never acts on such a stack)
or on bad use; 1 when an action failed (the next round tries again).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from common.stackname import stack_name_problem
from ops import backend_repair
from stackconfig.config import ConfigError, StackConfig
from stackconfig.derived import run_cost_cap
from supervisor import outage, store
from supervisor.act import (
    Actuator,
    RecoveryError,
    ReleaseError,
    failed_hosts_note,
    recover_with,
    summary_text,
)
from supervisor.decide import Policy, decide, look_back_min
from supervisor.localstore import LOCAL_BUCKET, DirObjects
from supervisor.model import Decision, Observation, Plan, RoundRecord
from supervisor.observe import Sources, StackUnreadable, observe, read_config, read_stack, stack_config
from supervisor.report import ledger_note
from supervisor.store import make_s3
from train.monitor.webhook_url import webhook_url_problem

EXIT_FAILED = 1
EXIT_UNREADABLE = 2
WEBHOOK_ENV = "ALERT_WEBHOOK_URL"
LEASE_LOST = "lease held by another supervisor"
# The workflow that runs a round every 5 minutes on a runner that forgets everything after it
# (.github/workflows/supervise.yml's `name`).
CI_WORKFLOW = "supervise"


def forgetful_runner(env: Mapping[str, str] | None = None) -> bool:
    """This round runs on a CI runner of the supervise workflow: its disk is gone after the round."""
    env = os.environ if env is None else env
    return env.get("GITHUB_ACTIONS") == "true" and env.get("GITHUB_WORKFLOW") == CI_WORKFLOW


def no_memory_problem(stack: str) -> str:
    return (
        f"stack '{stack}' has no bucket (trainstack:bucket), and this CI runner forgets the supervisor's "
        "records after the round: nothing would count its recoveries or remember its messages (a pod that "
        "fails after every replace would be replaced every round until the cap). Fix: give the stack a "
        "bucket (scripts/pulumi config set --path trainstack:bucket.name NAME), or run `scripts/supervise "
        f"{stack}` in a loop on a machine that keeps ~/.cache/trainstack, and drop it from "
        ".github/workflows/supervise.yml"
    )


def policy_of(config: StackConfig) -> Policy:
    """The stack's parsed supervisor and recovery sections, its cost cap and burn-in, as they are."""
    return Policy.of(config.supervisor, run_cost_cap(config), config.recovery, config.training.burn_in_min)


def history_window_s(config: StackConfig) -> float:
    """How far back a decision looks: the longest look-back a rule declares, plus two rounds."""
    return look_back_min(policy_of(config)) * 60


@dataclass
class Round:
    """One supervisor process for one stack; `run_once` is a whole round (observe, decide, act, record)."""

    stack: str
    workspace: Path
    dry_run: bool = False
    holder: str = field(
        default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    )
    clock: Callable[[], float] = time.time
    log: Callable[[str], None] = lambda line: print(line, file=sys.stderr)
    s3: Any = None  # injected in tests; else built from the stack's config
    sources: Sources | None = None
    actuator: Actuator | None = None
    read: Callable[[Path, str], tuple[dict[str, Any], dict[str, Any]]] = read_stack
    recoverer: Any = None  # a supervisor.act.Recoverer (tests inject a recording one)
    memory: Any = None  # where a stack without a bucket keeps its records (tests inject one; localstore.py)

    def run_once(self) -> RoundRecord:
        backend_repair.repair(log=self.log)  # what a round killed mid-update tore in a file backend
        outputs, raw = self.read(self.workspace, self.stack)
        try:
            config = stack_config(raw, warn=self.log)
        except ConfigError as exc:
            raise StackUnreadable(f"stacks/Pulumi.{self.stack}.yaml: {exc}") from None
        now = self.clock()
        dry = self.dry_run or config.supervisor.dry_run
        bucket = config.bucket.name if config.bucket else None
        s3 = self.s3 if self.s3 is not None else (make_s3(config) if bucket else None)
        # The supervisor's own records (audit lines, notices, lease, recoveries): in the bucket, or without
        # one in a directory of this machine (with no memory nothing could be counted or bounded).
        if not bucket and self.memory is None and forgetful_runner():
            raise StackUnreadable(no_memory_problem(self.stack))  # exit 2: never act without memory
        mem, mem_bucket = (s3, bucket) if bucket else (self._local_memory(), LOCAL_BUCKET)
        src = self.sources or Sources(s3=s3)
        src = replace(src, memory=(mem, mem_bucket))
        # the supervisor's own records failing are this round's problems, never its end
        unread: list[str] = []
        try:
            history = store.read_audit(mem, mem_bucket, self.stack, since=now - history_window_s(config))
        except Exception as exc:
            history = []
            unread.append(f"audit lines: not read ({outage.why(exc)}); deciding without past rounds")
        obs = observe(self.stack, config, outputs, now, src)
        obs, spend_problem = outage.carry_spend(mem, mem_bucket, self.stack, obs, write=not dry)
        unread += [spend_problem] if spend_problem else []
        if unread:
            obs = replace(obs, problems=obs.problems + tuple(unread))
        if obs.job_ids:  # the one-time messages this run already sent
            obs = replace(obs, notices=store.read_notices(mem, mem_bucket, self.stack, obs.job_ids))
        if (obs.nodes == 0 or obs.phase == "released") and not dry:
            try:  # no compute: the stack's run is over, the next one is warned anew (store.end_run)
                store.end_run(mem, mem_bucket, self.stack, now)
            except Exception as exc:  # at worst the next run's first warning is not sent: said here
                obs = replace(obs, problems=(*obs.problems, f"notices: run not ended ({outage.why(exc)})"))
        policy = policy_of(config)
        if config.supervisor.enabled:
            decision = decide(obs, history, policy)
        else:  # observed and recorded, never acted on
            decision = Decision(
                "none",
                f"trainstack:supervisor.enabled is false; {decide(obs, history, policy, rules=()).reason}",
            )
        done: list[str] = []
        errors: list[str] = []
        if decision.actions and not dry:
            self._act(
                config,
                outputs,
                obs,
                decision.actions,
                decision.message,
                decision.reason,
                s3,
                bucket,
                done,
                errors,
                plan=decision.plan,
                memory=(mem, mem_bucket),
                trials=decision.trials,
            )
        if decision.once and "notify" in done:
            try:
                store.write_notice(mem, mem_bucket, self.stack, obs.job_ids, decision.once, now)
            except Exception as exc:  # at worst the message goes once more
                errors.append(f"notice: not recorded ({outage.why(exc)})")
        record = RoundRecord(self.stack, obs, decision, tuple(done), self.holder, dry, tuple(errors))
        if self.dry_run:  # `--dry-run` changes nothing: no audit line, so no ledger entry and no history
            return record
        try:  # the sign of life scripts/watch and scripts/status read (its age by the bucket's clock)
            store.write_heartbeat(mem, mem_bucket, record, config.supervisor.interval_min * 60)
        except Exception as exc:
            self.log(f"heartbeat: not written ({outage.why(exc)})")
        try:
            store.write_audit(mem, mem_bucket, record)
        except Exception as exc:
            self.log(f"audit line: not written ({outage.why(exc)})")
            record = replace(record, errors=(*record.errors, f"audit line: not written ({outage.why(exc)})"))
        return record

    def _local_memory(self) -> Any:
        if self.memory is None:
            from common.cachedir import cache_dir

            self.memory = DirObjects(cache_dir() / "supervisor" / self.stack)
        return self.memory

    def _act(
        self,
        config: StackConfig,
        outputs: dict[str, Any],
        obs: Observation,
        actions: Sequence[str],
        message: str,
        reason: str,
        s3: Any,
        bucket: str | None,
        done: list[str],
        errors: list[str],
        plan: Plan | None = None,
        memory: tuple[Any, str] | None = None,
        trials: Sequence[int] = (),
    ) -> None:
        mem, mem_bucket = memory or (s3, bucket)
        lease = (
            store.Lease(mem, mem_bucket, self.stack, self.holder, clock=self.clock) if mem_bucket else None
        )
        try:
            taken = lease is None or lease.acquire()
        except Exception as exc:  # no word from the lease: never act (another supervisor may be acting)
            self.log(f"lease: not read ({outage.why(exc)}); not acting this round")
            errors.append(f"lease: not read ({outage.why(exc)})")
            return
        if lease is not None and not taken:
            self.log(f"lease held by {lease.held_by}: another supervisor acts on {self.stack}; not acting")
            errors.append(LEASE_LOST)
            return
        actor = self.actuator or Actuator(
            self.stack,
            self.workspace,
            protect=config.protect,
            webhook_url=os.environ.get(WEBHOOK_ENV) or None,
            log=self.log,
            sync_grace_s=config.supervisor.sync_grace_s,
        )
        try:
            for action in actions:
                if action == "notify":
                    self.log(actor.notify(message))
                elif action == "sync":
                    actor.sync(outputs)
                elif action == "release":
                    self.log(actor.release())
                    actor.notify(f"released compute: {message or reason}{failed_hosts_note(obs)}")
                elif action == "summary":
                    text = summary_text(obs, config.training.max_run_hours, reason)
                    actor.notify(text + ledger_note(s3, bucket, self.stack, config, obs))
                elif action == "end_trials" and trials:  # a pool's ended trials: their pods alone
                    self.log(actor.end_trials(trials))
                elif action == "recover" and plan is not None:  # supervisor/act.py Recoverer
                    line = recover_with(self, config, outputs, obs, plan, s3, bucket, actor, memory)
                    self.log(line)
                    actor.notify(f"{message or reason} -> {line}")
                done.append(action)
        except (ReleaseError, RecoveryError) as exc:
            errors.append(str(exc))
        finally:
            if lease is not None:
                lease.give_back()


def line_of(record: RoundRecord) -> dict[str, Any]:
    """The object `--json` prints for a round."""
    o, d = record.observation, record.decision
    return {
        "stack": record.stack,
        "round_at": o.at,
        "state": {
            "phase": o.phase,
            "nodes": o.nodes,
            "step": o.step,
            "node0_reachable": o.node0_reachable,
            "runs": [r.__dict__ for r in o.runs],
            "problems": list(o.problems),
        },
        "decision": d.kind,
        "reason": d.reason,
        "actions": list(record.done),
        "planned": list(d.actions),
        "errors": list(record.errors),
        "dry_run": record.dry_run,
        "spent_usd": o.spent_usd,
        "usd_per_hour": o.usd_per_hour,
    }


def _print(record: RoundRecord, as_json: bool) -> None:
    if as_json:
        print(json.dumps(line_of(record), default=str), flush=True)
        return
    o, d = record.observation, record.decision
    when = time.strftime("%H:%M:%S", time.gmtime(o.at))
    acted = ", ".join(record.done) or ("none (dry run)" if record.dry_run and d.actions else "none")
    print(f"{when} {record.stack}: {d.kind}: {d.reason} [actions: {acted}]", flush=True)
    for err in record.errors:
        print(f"  error: {err}", flush=True)


def show_log(stack: str, workspace: Path) -> int:
    config = stack_config(read_config(workspace, stack))
    if config.bucket is None:
        print(f"scripts/supervise: stack '{stack}' has no bucket, so no audit lines", file=sys.stderr)
        return EXIT_UNREADABLE
    for record in store.read_audit(make_s3(config), config.bucket.name, stack):
        print(json.dumps(record.to_json(), sort_keys=True, default=str))
    return 0


# The usage line and its sentence, whole (the first line of the docstring stopped mid-sentence), and the
# examples under the options.
DESCRIPTION = " ".join((__doc__ or "").split("\n\n")[0].split()).split(": ", 1)[1]
EXAMPLES = "examples:\n" + (__doc__ or "").split("\n\n")[1]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="scripts/supervise", description=DESCRIPTION, epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    p.add_argument("stack", metavar="STACK", help="a stack of stacks/ (its compute up or released)")
    # The workspace: scripts/supervise finds it (ops/cli.py); a bare `python -m supervisor.cli` the same way.
    p.add_argument("--cwd", type=Path, default=None, help=argparse.SUPPRESS)
    p.add_argument("--once", action="store_true", help="one round, then exit")
    p.add_argument("--dry-run", action="store_true", help="decide and print; change nothing")
    p.add_argument("--json", action="store_true", help="one JSON object per round")
    p.add_argument("--log", action="store_true", help="print the audit lines of past rounds and exit")
    p.add_argument(
        "--report", action="store_true", help="print the run's goodput ledger (where the GPU-hours went)"
    )
    p.add_argument("--png", type=Path, help="with --report: also write the run's timeline to this PNG file")
    args = p.parse_args(argv)
    problem = stack_name_problem(args.stack)  # before any path is built from it
    if problem is not None:
        p.error(problem)
    from ops.cli import found_workspace

    found = found_workspace("scripts/supervise", args.stack, args.cwd, required=False)
    if isinstance(found, int):
        return found
    args.cwd = found
    webhook = os.environ.get(WEBHOOK_ENV)
    bad_webhook = webhook_url_problem(webhook) if webhook else None  # never quotes the URL: the secret
    if bad_webhook:
        print(f"scripts/supervise: {WEBHOOK_ENV} {bad_webhook}", file=sys.stderr)
        return EXIT_UNREADABLE
    try:
        if args.log:
            return show_log(args.stack, args.cwd)
        if args.report or args.png:  # supervisor/report.py
            from supervisor.report import show_report

            return show_report(args.stack, args.cwd, args.png)
        sup = Round(args.stack, args.cwd, dry_run=args.dry_run)
        if args.once:
            try:
                record = sup.run_once()
            except StackUnreadable:
                raise
            except Exception as exc:  # one line for CI's log, not a traceback; the next schedule tries again
                print(f"scripts/supervise: {outage.failed_line(exc)}", file=sys.stderr)
                return EXIT_FAILED
            _print(record, args.json)
            return EXIT_FAILED if any(e != LEASE_LOST for e in record.errors) else 0
        outage.run_loop(
            sup.run_once,
            lambda record: _print(record, args.json),
            lambda: stack_config(read_config(args.cwd, args.stack)).supervisor.interval_min * 60,
            sup.log,
        )
        return 0
    except StackUnreadable as exc:
        print(f"scripts/supervise: not acting on '{args.stack}': {exc}", file=sys.stderr)
        return EXIT_UNREADABLE
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
