"""trainstack Pulumi program: reads the stack config and declares the cluster."""

from __future__ import annotations

import os
from pathlib import Path

# pydantic looks for plugins among every installed package's entry points when it builds its first model
# (~30 ms of a preview); trainstack uses none.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

import pulumi

from common.imports import collector_paused
from providers.preload import request_preload

# Start the dynamic-provider process now, on the other core, instead of after the imports below and the
# component code have run (providers/preload.py explains; ~0.3 s of every preview and up).
request_preload()

# The program's own imports with the garbage collector paused (common/imports.py: 0.61 -> 0.41 CPU-s in
# every preview, up, refresh and destroy).
with collector_paused():
    from common.outputs import BilledIds
    from components.cluster import (  # after the early provider start, on purpose
        H100Cluster,
        H100ClusterArgs,
        read_registry_password,
        read_secret_values,
        read_stack_config,
        write_artifacts,
    )
    from components.guards import (
        check_before_registering,
        forecast_problems,
        run_cost_problems,
        slurm_job_problems,
    )
    from stackconfig.config import ConfigError
    from stackconfig.derived import cap_notice, webhook_notice
    from stackconfig.model import parameter_notice
    from stackconfig.rules import unverified_spend_limit_notice

REPO = Path(__file__).resolve().parent
OUT_DIR = Path(os.environ.get("TRAINSTACK_OUT_DIR", REPO / "out"))


def main() -> None:
    stack = pulumi.get_stack()
    try:
        # First: a bad stack name or a plain-text credential is refused before any other check can echo
        # a value, and before anything is registered.
        check_before_registering(stack)
        config = read_stack_config()
        # Before the first resource: a forecast that cannot be computed fails closed, and a run forecast over
        # the run's one cost cap is refused (components/guards.py); `up --skip-preview` runs no policy first.
        problems = slurm_job_problems(stack, config) + (
            forecast_problems(config) or run_cost_problems(config)
        )
        if problems:
            raise ConfigError(problems)
        secrets = read_secret_values(config)
        registry_password = read_registry_password(config)
    except ConfigError as err:
        # RunError prints without a Python traceback; nothing has been registered yet, so nothing is created.
        raise pulumi.RunError(f"stacks/Pulumi.{stack}.yaml: {err}") from None
    # Warnings about the config are said once per command: in the preview, which `pulumi up` runs first too
    # (the update pass would say each again, and the engine repeats every one in its summary).
    warn = pulumi.log.warn if pulumi.runtime.is_dry_run() else (lambda _message: None)
    alerts_notice = webhook_notice(config)
    if alerts_notice:  # alerts that reach no chat are worth one line at every preview
        warn(alerts_notice)
    renamed_cap = cap_notice(config)
    if renamed_cap:
        warn(renamed_cap)
    notice = unverified_spend_limit_notice(config)
    if notice:  # on preview and up alike: the one thing about money no check here can confirm
        warn(notice)
    shapes = parameter_notice(config.training.model) if config.training.model is not None else None
    if shapes:  # a parameter count the shapes contradict makes a forecast that is wrong one way or the other
        warn(shapes)
    cluster = H100Cluster(stack, H100ClusterArgs(config, secrets, config.s3_endpoint_url, registry_password))
    if not pulumi.runtime.is_dry_run():
        # Artifacts are files for people and delivery; written on `up` only, never on preview.
        cluster.artifacts.apply(lambda a: write_artifacts(OUT_DIR / stack, a))
    pulumi.export("nodes", cluster.nodes)
    pulumi.export("hostfile", cluster.hostfile)
    pulumi.export("hosts", cluster.hosts)
    pulumi.export("cost_per_hour", cluster.cost_per_hour)
    pulumi.export("cost_per_run", cluster.cost_per_run)
    pulumi.export("cost_per_run_basis", cluster.cost_per_run_basis)
    pulumi.export("forecast", cluster.forecast)
    pulumi.export("alerts", cluster.alert_rules.as_output())  # thresholds, for the PR report's diff
    pulumi.export("artifacts_dir", str(OUT_DIR / stack))
    billed = cluster.billed_ids.apply(BilledIds.from_output)  # for scripts/watch, at the stack's top level
    pulumi.export("cluster_id", billed.apply(lambda ids: ids.cluster_id))
    pulumi.export("volume_id", billed.apply(lambda ids: ids.volume_id))
    pulumi.export("workdir", config.training.workdir)  # where scripts/watch finds the aggregator's state
    pulumi.export("topology", config.cluster.topology)  # a pool: each pod its own job and aggregator


main()
