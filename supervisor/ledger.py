"""Where the GPU-hours went: a run's goodput ledger, pure.

Every billed GPU-second of a run goes to exactly one bucket, in this order of precedence (the words follow
Google's ML Goodput measurement, goodput vs. badput, and Meta's effective training time ratio, ETTR):

    recovery       a recovery was under way (from its begun record to the first step after it)
    health         the health gate, the preflight and burn-in (the health records' spans; from the rounds:
                   the nodes' measured health-check seconds, ending where a round first saw a step)
    provisioning   compute billed, but no node has answered yet (boot, image pull, delivery)
    checkpoint     training stood still while a checkpoint was written (the job's checkpoint spans; from
                   the rounds: what the job's measured checkpoint-save seconds grew by between two rounds)
    lost           steps trained a second time: a resume went back to an older checkpoint, so the time
                   of the steps between that checkpoint and the newest step reached before is lost work
    productive     the step advanced
    idle           compute billed with the step standing still (and nothing above explains it), up to
                   the release

goodput = productive / billed. `billed` is the sum of the compute spans x their GPUs; `agreement` compares
it, priced, with what RunPod's billing says the run cost (issue: within 1 %).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise

from supervisor.faults import HALTED, Attempt
from supervisor.firstround import began_stepping
from supervisor.model import RoundRecord

CATEGORIES = ("productive", "provisioning", "health", "checkpoint", "lost", "recovery", "idle")


@dataclass(frozen=True)
class Span:
    start: float
    end: float
    gpus: int = 0  # compute spans only: GPUs billed during it

    @property
    def seconds(self) -> float:
        return max(0.0, self.end - self.start)


@dataclass(frozen=True)
class Point:
    """A progress point: the newest step at a time (the progress contract's lines, or a round's step)."""

    time: float
    step: float


@dataclass(frozen=True)
class Inputs:
    compute: tuple[Span, ...]  # when compute billed and how many GPUs (from the audit and the stack)
    progress: tuple[Point, ...] = ()
    health: tuple[Span, ...] = ()  # gate / preflight / burn-in spans
    checkpoints: tuple[Span, ...] = ()
    recoveries: tuple[Span, ...] = ()  # begun .. the first step after it
    first_answer: tuple[float, ...] = ()  # per compute span: when a node first answered (else its start)
    usd_per_gpu_hour: float = 0.0
    billed_usd: float | None = None  # RunPod's own bill for the run's compute


@dataclass(frozen=True)
class Ledger:
    gpu_seconds: dict[str, float] = field(default_factory=dict)  # category -> GPU-seconds
    billed_gpu_seconds: float = 0.0
    billed_usd: float | None = None
    ledger_usd: float = 0.0

    @property
    def goodput(self) -> float:
        return (
            self.gpu_seconds.get("productive", 0.0) / self.billed_gpu_seconds
            if self.billed_gpu_seconds
            else 0.0
        )

    @property
    def agreement(self) -> float | None:
        """|ledger - RunPod| / RunPod (None without a bill)."""
        if not self.billed_usd:
            return None
        return abs(self.ledger_usd - self.billed_usd) / self.billed_usd

    def line(self) -> str:
        """One line for the run summary message."""
        parts = ", ".join(
            f"{c} {self.gpu_seconds.get(c, 0.0) / 3600:.1f}" for c in CATEGORIES if self.gpu_seconds.get(c)
        )
        bill = (
            "" if self.agreement is None else f"; the ledger is within {self.agreement:.1%} of RunPod's bill"
        )
        return f"goodput {self.goodput:.1%} of {self.billed_gpu_seconds / 3600:.1f} GPU-h ({parts}){bill}"


# scripts/watch's words for the categories (docs/RECOVERY.md): one line, every category, GPU-hours.
WATCH_WORDS = {
    "productive": "productive",
    "provisioning": "boot",
    "health": "gate+burn-in",
    "checkpoint": "checkpoint",
    "lost": "lost",
    "recovery": "recovery",
    "idle": "idle",
}


def watch_line(ledger: Ledger) -> str:
    """The run's ledger in scripts/watch: goodput and every category's GPU-hours, zeros included."""
    parts = " / ".join(f"{WATCH_WORDS[c]} {ledger.gpu_seconds.get(c, 0.0) / 3600:.2f}" for c in CATEGORIES)
    bill = "" if ledger.agreement is None else f"; within {ledger.agreement:.1%} of RunPod's bill"
    return (
        f"ledger: goodput {ledger.goodput:.1%} of {ledger.billed_gpu_seconds / 3600:.2f} GPU-h: "
        f"{parts} GPU-h{bill}"
    )


def _inside(t: float, spans: Sequence[Span]) -> bool:
    return any(s.start <= t < s.end for s in spans)


def _cuts(inputs: Inputs) -> list[float]:
    """Every time at which the category may change, inside the compute spans."""
    times = {t for s in inputs.compute for t in (s.start, s.end)}
    for spans in (inputs.health, inputs.checkpoints, inputs.recoveries):
        times |= {t for s in spans for t in (s.start, s.end)}
    times |= {p.time for p in inputs.progress} | set(inputs.first_answer)
    return sorted(times)


def lost_spans(progress: Sequence[Point]) -> list[Span]:
    """After each resume that went back (a step below the highest reached before), the time until the job
    is back at that highest step: steps trained twice."""
    ordered = sorted(progress, key=lambda p: p.time)
    out: list[Span] = []
    best: float | None = None
    for i, p in enumerate(ordered):
        if best is not None and p.step < best:
            back = next((q.time for q in ordered[i + 1 :] if q.step >= best), ordered[-1].time)
            if not out or out[-1].end <= p.time:
                out.append(Span(p.time, back))
        best = p.step if best is None else max(best, p.step)
    return out


def _category(t0: float, t1: float, inputs: Inputs, span_index: int) -> str:
    mid = (t0 + t1) / 2
    if _inside(mid, inputs.recoveries):
        return "recovery"
    if _inside(mid, inputs.health):  # the checks run before the first step: inside the boot, not beside it
        return "health"
    answered = inputs.first_answer[span_index] if span_index < len(inputs.first_answer) else None
    if answered is not None and mid < answered:
        return "provisioning"
    if _inside(mid, inputs.checkpoints):
        return "checkpoint"
    before = [p for p in inputs.progress if p.time <= t0]
    after = [p for p in inputs.progress if p.time >= t1]
    if before and after:
        a, b = max(before, key=lambda p: p.time), min(after, key=lambda p: p.time)
        if b.step > a.step:
            return "lost" if _inside(mid, lost_spans(inputs.progress)) else "productive"
    if not before and after and answered is None:
        return "provisioning"
    return "idle"


def build(inputs: Inputs) -> Ledger:
    """Split every billed GPU-second of the run into CATEGORIES."""
    seconds = dict.fromkeys(CATEGORIES, 0.0)
    cuts = _cuts(inputs)
    for i, span in enumerate(inputs.compute):
        inner = [span.start, *[t for t in cuts if span.start < t < span.end], span.end]
        for t0, t1 in pairwise(inner):
            seconds[_category(t0, t1, inputs, i)] += (t1 - t0) * span.gpus
    billed = sum(s.seconds * s.gpus for s in inputs.compute)
    usd = billed / 3600 * inputs.usd_per_gpu_hour
    return Ledger(seconds, billed, inputs.billed_usd, round(usd, 4))


def table(ledger: Ledger) -> str:
    """The --report table: GPU-hours and share of the bill per category."""
    rows = ["category       GPU-h    share"]
    for c in CATEGORIES:
        gs = ledger.gpu_seconds.get(c, 0.0)
        share = gs / ledger.billed_gpu_seconds if ledger.billed_gpu_seconds else 0.0
        rows.append(f"{c:<13} {gs / 3600:>7.2f} {share:>7.1%}")
    rows.append(f"{'billed':<13} {ledger.billed_gpu_seconds / 3600:>7.2f} {1:>7.1%}")
    rows.append(f"goodput {ledger.goodput:.1%} (productive / billed)")
    rows.append(f"ledger ${ledger.ledger_usd:,.2f}")
    if ledger.agreement is not None and ledger.billed_usd is not None:
        ok = "agrees" if ledger.agreement <= 0.01 else "DOES NOT agree"
        rows.append(f"RunPod billing ${ledger.billed_usd:,.2f}: {ok} ({ledger.agreement:.2%}, limit 1%)")
    return "\n".join(rows)


def _pods(record: RoundRecord) -> frozenset[str] | None:
    fleet = record.observation.fleet
    return frozenset(n.pod_id for n in fleet.nodes) if fleet and fleet.nodes else None


def _halted(record: RoundRecord) -> frozenset[str]:
    """The pods RunPod reported gone, exited or failed this round: RunPod bills them no GPU any more."""
    fleet = record.observation.fleet
    return frozenset(n.pod_id for n in (fleet.nodes if fleet else ()) if n.status in HALTED)


def _created(record: RoundRecord) -> list[float]:
    fleet = record.observation.fleet
    return [n.created_at for n in (fleet.nodes if fleet else ()) if n.created_at is not None]


def _same_compute(a: RoundRecord, b: RoundRecord) -> bool:
    """The same nodes: as many, and (where both rounds read the pods) the same pod ids. A recovery's replace
    keeps the count and changes every id of a cluster: its compute is billed apart, from its own creation."""
    if a.observation.nodes != b.observation.nodes:
        return False
    pa, pb = _pods(a), _pods(b)
    return (pa is None or pb is None or pa == pb) and _halted(a) == _halted(b)


def _released(
    group: Sequence[RoundRecord], after: Sequence[RoundRecord], attempts: Sequence[Attempt]
) -> float | None:
    """When the compute of `group` stopped billing, replaced by that of `after`: the replace's own record of
    the delete where it has one, else the new pods' creation (a replace deletes before it creates)."""
    lo, hi = group[0].observation.at, after[0].observation.at
    seen = [a.released_at for a in attempts if a.released_at is not None and lo <= a.at <= hi]
    if seen:
        return max(seen)
    created = _created(after[0])
    return min(created) if created and lo <= min(created) <= hi else None


def _measured_spans(
    groups: Sequence[Sequence[RoundRecord]], compute: Sequence[Span], first_answer: Sequence[float]
) -> tuple[list[Span], list[Span]]:
    """Health-check and checkpoint-save time from the durations the nodes measured (never their clocks'
    timestamps: a node's clock need not be the supervisor's), placed at round granularity.

    health       a boot's health checks (the first `health_s` its compute reported) end where the round first
                 saw a step, never before the compute's start
    checkpoints  the growth of the job's `checkpoint_s` between two rounds of the same compute (a smaller
                 value is a new start of the job, counted from 0) ends at the later round, never before the
                 earlier one
    """
    health: list[Span] = []
    checkpoints: list[Span] = []
    live = [g for g in groups if g[0].observation.nodes]
    for group, span, answered in zip(live, compute, first_answer, strict=True):
        said = next((r.observation.health_s for r in group if r.observation.health_s is not None), None)
        if said and answered > span.start:
            health.append(Span(max(span.start, answered - said), answered))
        before: RoundRecord | None = None
        for rec in group:
            now = rec.observation.checkpoint_s
            if now is None:
                continue
            if before is not None and before.observation.checkpoint_s is not None:
                grown = now - before.observation.checkpoint_s
                saved = grown if grown >= 0 else now
                end = rec.observation.at
                if saved > 0 and end > before.observation.at:
                    checkpoints.append(Span(max(before.observation.at, end - saved), end))
            before = rec
    return health, checkpoints


def inputs_from_rounds(
    rounds: Sequence[RoundRecord], attempts: Sequence[Attempt], gpus_per_node: int
) -> Inputs:
    """The ledger's inputs from the supervisor's own audit lines and recovery records (round granularity:
    a span starts at the first round that saw compute, or at its pods' creation where RunPod's listing said
    it, and ends at the first round that saw none, or the last)."""
    ordered = sorted(rounds, key=lambda r: r.observation.at)
    compute: list[Span] = []
    first_answer: list[float] = []
    groups: list[list[RoundRecord]] = []
    for rec in ordered:  # runs of rounds that saw the same compute: as many nodes, and the same pods
        if groups and _same_compute(groups[-1][-1], rec):
            groups[-1].append(rec)
        else:
            groups.append([rec])
    for k, group in enumerate(groups):
        nodes = group[0].observation.nodes
        if nodes == 0:
            continue
        start = group[0].observation.at
        end = group[-1].observation.at
        if k + 1 < len(groups):
            after = groups[k + 1]
            end = after[0].observation.at
            if _pods(after[0]) == _pods(group[0]) and _halted(after[0]) > _halted(group[0]):
                # A pod lost (its host died, a spot pod taken back): RunPod billed it until it went, some time
                # after the last round that saw it running; the ledger stops it there (round granularity).
                end = group[-1].observation.at
            elif after[0].observation.nodes == nodes:  # replaced: the old compute's bill ended at its delete
                end = _released(group, after, attempts) or end
        # RunPod bills from a pod's creation, often minutes before the first round saw it: the span starts
        # there (never before the round that saw the compute gone, or the end of the span it replaced).
        created = _created(group[0])
        before = groups[k - 1] if k > 0 else None
        floor = float("-inf")
        if before is not None:
            floor = before[-1].observation.at if not before[0].observation.nodes else compute[-1].end
            if before[0].observation.nodes and before[0].observation.nodes != nodes:
                floor = start  # more or fewer nodes: the round that saw the change is where it began
        if created:
            start = max(min(start, min(created)), floor)
        pods = _pods(group[0]) or frozenset()
        live = nodes - len(_halted(group[0]) & pods)
        compute.append(Span(start, end, live * gpus_per_node))
        answered = [
            r.observation.at
            for r in group
            if r.observation.node0_reachable and r.observation.step is not None
        ]
        first_answer.append(answered[0] if answered else end)
    progress = tuple(
        Point(r.observation.at, r.observation.step) for r in ordered if r.observation.step is not None
    )
    # The last step: a job that finished between two rounds reached it after the last round that read a
    # step; its own run state says which step and when (issue #68: the timeline's step stopped short of it).
    ends = {
        (run.finished_at, float(run.last_step))
        for r in ordered
        for run in r.observation.runs
        if run.status == "finished" and run.last_step is not None and run.finished_at is not None
    }
    last_read = progress[-1].time if progress else float("-inf")
    finals = [Point(at, step) for at, step in sorted(ends) if at > last_read]
    progress = (*progress, *finals)
    began = began_stepping(groups, compute[0].start if compute else None, first_answer)
    if began is not None:  # the nodes trained before any round saw them: from there, not from the round
        progress = (Point(began, 0.0), *progress)
        first_answer[0] = began
    health, checkpoints = _measured_spans(groups, compute, first_answer)
    recoveries = []
    for a in attempts:
        at_step = next((p.step for p in reversed(progress) if p.time <= a.at), None)
        resumed = next(
            (p.time for p in progress if p.time > a.at and at_step is not None and p.step != at_step), None
        )
        recoveries.append(Span(a.at, resumed if resumed is not None else a.at))
    priced = [r.observation for r in ordered if r.observation.nodes > 0 and r.observation.usd_per_hour]
    gpus_now = priced[-1].nodes * gpus_per_node if priced else 0
    price = priced[-1].usd_per_hour / gpus_now if gpus_now else 0.0
    bills = [r.observation.spent_usd for r in ordered if r.observation.spent_usd is not None]
    return Inputs(
        compute=tuple(compute),
        progress=progress,
        health=tuple(health),
        checkpoints=tuple(checkpoints),
        recoveries=tuple(recoveries),
        first_answer=tuple(first_answer),
        usd_per_gpu_hour=price,
        billed_usd=bills[-1] if bills else None,
    )


def plot_png(inputs: Inputs, ledger: Ledger, path: str, title: str) -> None:
    """The run's timeline: compute spans coloured by category, the step, recoveries marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    colours = dict(
        zip(
            CATEGORIES,
            ("tab:green", "tab:gray", "tab:cyan", "tab:blue", "tab:orange", "tab:red", "tab:olive"),
            strict=True,
        )
    )
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 5), sharex=True, height_ratios=(1, 3))
    cuts = _cuts(inputs)
    t_zero = min((s.start for s in inputs.compute), default=0.0)
    for i, span in enumerate(inputs.compute):
        inner = [span.start, *[t for t in cuts if span.start < t < span.end], span.end]
        for t0, t1 in pairwise(inner):
            cat = _category(t0, t1, inputs, i)
            top.barh(0, (t1 - t0) / 3600, left=(t0 - t_zero) / 3600, color=colours[cat])
    top.set_yticks([])
    top.legend(
        handles=[Rectangle((0, 0), 1, 1, color=colours[c]) for c in CATEGORIES],
        labels=list(CATEGORIES),
        ncol=4,
        fontsize=7,
        loc="upper left",
    )
    bottom.plot(
        [(p.time - t_zero) / 3600 for p in inputs.progress],
        [p.step for p in inputs.progress],
        "k.-",
        markersize=3,
    )
    for r in inputs.recoveries:
        bottom.axvline((r.start - t_zero) / 3600, color="tab:red", linestyle="--")
    bottom.set_xlabel("hours since the compute came up")
    bottom.set_ylabel("training step")
    fig.suptitle(f"{title}: {ledger.line()}", fontsize=8)
    fig.savefig(path, dpi=120)
    plt.close(fig)
