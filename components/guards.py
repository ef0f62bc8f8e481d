"""Checks the program runs before it registers anything: the stack's name, no credential in plain text, and
a forecast that can be computed.

Each is refused before the first resource so a bad value can never rent a pod first and fail later:
- the stack name becomes part of every RunPod name and rendered path, so it is held to `[a-z0-9-]`;
- `trainstack:secrets.*` and `runpod:apiKey` must be Pulumi secrets (the engine tells the program which
  keys are: `pulumi.runtime.config.is_config_secret`), and no other config value may hold a credential
  (stackconfig/credentials.py lists the shapes). Problems name the key path, never the value;
- a Slurm stack's job takes the stack's name unless `cluster.slurm.job` names it, and must meet the job-name
  rule (64 characters, where a stack name may have 100);
- the forecast (the component's `forecast` output, which the policy pack's money checks read) must compute
  to finite figures. Pulumi runs stack policies only after an update's resources exist, so under
  `pulumi up --skip-preview` a forecast that failed inside the component would have left pods renting
  with no budget check: it fails here, closed, before anything is registered;
- the forecast run cost (`forecast.stack.run_cost`) must fit the run's one cost cap
  (`trainstack:run.max_cost_usd`) when the stack sets one and its run is `active`: the policy pack's
  run-cost checks would only see it after `pulumi up --skip-preview` had created the resources. The one
  hourly price against the declared `trainstack:runpod_spend_limit_per_hour` is already refused by
  `read_stack_config` (stackconfig/rules.py).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

from common.stackname import RULE_TEXT, shown, stack_name_problem
from components.slurm import slurm_job_name
from forecast.stack import run_cost, stack_forecast
from stackconfig.alerts import WEBHOOK_SECRET
from stackconfig.config import NAMESPACE, SECRETS_KEY, ConfigError, ConfigProblem, StackConfig
from stackconfig.credentials import find_credentials
from stackconfig.derived import run_cost_cap
from stackconfig.slurm import job_name_problem
from stackconfig.supervisor import RUN_CAP_KEY
from train.monitor.webhook_url import webhook_url_problem

SECRET_ONLY_KEYS = frozenset({"runpod:apiKey"})  # besides every trainstack:secrets.<NAME>


def stack_name_problems(stack: str) -> list[ConfigProblem]:
    """The stack name is part of every RunPod resource name (`trainstack-<stack>-pod-0`), secret name and
    rendered script; refuse what those cannot hold before anything is rented."""
    if stack_name_problem(stack) is None:  # the one rule (common/stackname.py), as every script holds it
        return []
    return [ConfigProblem(f"stack {shown(stack)}", f"{RULE_TEXT}: `pulumi stack init <name>`")]


def _must_be_secret(key: str) -> bool:
    namespace, _, name = key.partition(":")
    return key in SECRET_ONLY_KEYS or (namespace == NAMESPACE and name.startswith(f"{SECRETS_KEY}."))


def _parsed(value: str) -> Any:
    """Objects and lists arrive as JSON text; scan their parts so the problem names the exact path."""
    if value[:1] in "[{":
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def plaintext_problems(config: Mapping[str, str], is_secret: Callable[[str], bool]) -> list[ConfigProblem]:
    """Secret-only keys stored in plain text, and credential shapes in any other plain-text value."""
    problems: list[ConfigProblem] = []
    for key in sorted(config):
        if is_secret(key):
            continue
        if _must_be_secret(key):
            fix = (
                f"is stored in plain text in the stack file; remove it with `pulumi config rm {key}`, set it "
                f"with `pulumi config set --secret {key} <value>`, and rotate it (the plain value is in the "
                "file's history)"
            )
            problems.append(ConfigProblem(key, fix))
            continue
        for path, kind in find_credentials(_parsed(config[key]), key):
            fix = (
                f"holds what looks like a {kind} in plain text; remove it from the stack file and rotate it, "
                "then pass it as a secret: add its env name to trainstack:training.secrets and set "
                f"`pulumi config set --secret {NAMESPACE}:{SECRETS_KEY}.<NAME> <value>`"
            )
            problems.append(ConfigProblem(path, fix))
    return problems


WEBHOOK_KEY = f"{NAMESPACE}:{SECRETS_KEY}.{WEBHOOK_SECRET}"


def webhook_problems(config: Mapping[str, str]) -> list[ConfigProblem]:
    """The alert webhook's URL (a secret) is one the aggregator will post to: https, no user:password. The
    problem names the key, never the value (scheme-less, file:// and http:// previewed clean)."""
    url = config.get(WEBHOOK_KEY)
    problem = webhook_url_problem(url) if url else None
    if problem is None:
        return []
    return [
        ConfigProblem(WEBHOOK_KEY, f"{problem}; set it with `pulumi config set --secret {WEBHOOK_KEY} <url>`")
    ]


def check_before_registering(stack: str) -> None:
    """Raise ConfigError for a bad stack name or a plain-text credential in this program's config."""
    import pulumi.runtime.config as runtime_config

    config = dict(runtime_config.CONFIG.get())
    problems = stack_name_problems(stack) + plaintext_problems(config, runtime_config.is_config_secret)
    problems += webhook_problems(config)
    if problems:
        raise ConfigError(problems)


def _non_finite(value: Any, path: str) -> list[str]:
    if isinstance(value, float) and not math.isfinite(value):
        return [path]
    if isinstance(value, Mapping):
        return [p for k, v in value.items() for p in _non_finite(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _non_finite(v, f"{path}[{i}]")]
    return []


def forecast_problems(config: StackConfig) -> list[ConfigProblem]:
    """The stack's forecast computes, and every figure of it is finite; else a problem at its model key."""
    where = f"{NAMESPACE}:training.model"
    try:
        prediction = stack_forecast(config)
        output = None if prediction is None else prediction.to_output()
    except (ArithmeticError, ValueError) as exc:
        fix = (
            f"the forecast cannot be computed from it ({type(exc).__name__}), so no budget could be checked; "
            "give the model's real sizes and a measured or typical mfu (docs/FORECAST.md)"
        )
        return [ConfigProblem(where, fix)]
    bad = _non_finite(output, "forecast")
    if bad:
        fix = (
            f"the forecast's {', '.join(bad)} is not a finite number, so no budget could be checked; give "
            "the model's real sizes and a measured or typical mfu (docs/FORECAST.md)"
        )
        return [ConfigProblem(where, fix)]
    return []


def slurm_job_problems(stack: str, config: StackConfig) -> list[ConfigProblem]:
    """A Slurm stack without `cluster.slurm.job` names its job after the stack (components/slurm.py), and a
    stack name may have 100 characters where a job name has 64 (stackconfig/slurm.py): refuse that default
    before anything is rented, with the key that sets another."""
    if config.cluster.scheduler != "slurm" or config.cluster.slurm.job is not None:
        return []
    problem = job_name_problem(slurm_job_name(stack, config))
    if problem is None:
        return []
    fix = (
        f"is not set, so the Slurm job takes the stack's name, and {problem}; name the job: "
        f"`pulumi config set --path {NAMESPACE}:cluster.slurm.job <name>`"
    )
    return [ConfigProblem(f"{NAMESPACE}:cluster.slurm.job", fix)]


OLD_CAP_KEY = f"{NAMESPACE}:alerts.budget_usd"  # the cap's deprecated name, used while run.max_cost_usd is 0


def run_cost_problems(config: StackConfig) -> list[ConfigProblem]:
    """The stack's forecast run cost stays within the run's one cost cap when one is set; else a problem at
    the cap's key. Call it after `forecast_problems` found none (the run cost needs a computable forecast).

    Only for `run.phase: active`, the phase a rental starts in: `releasing` and `released` are how the
    supervisor takes compute away from a run over its cap and must never be refused, and `recovering`
    replaces the nodes of a run already admitted (stackconfig/supervisor.py)."""
    cap = run_cost_cap(config)
    if not cap or config.run.phase != "active":
        return []
    cost = run_cost(config)
    if cost.usd <= cap:
        return []
    key = RUN_CAP_KEY if config.run.max_cost_usd else OLD_CAP_KEY
    fix = (
        f"the run would cost about ${cost.usd:,.2f} ({cost.label}), ${cost.usd - cap:,.2f} over this cap of "
        f"${cap:,.2f}, so nothing is rented; train on fewer tokens, use fewer GPUs or a shorter "
        f"training.max_run_hours, or raise the cap if the budget allows it: "
        f"`pulumi config set --path {RUN_CAP_KEY} <usd>`"
    )
    return [ConfigProblem(key, fix)]
