"""Command line: `python -m emulator serve --port N --state-dir DIR [--offer-spot] ...`."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from emulator.config import (
    DEFAULT_API_KEY,
    DEFAULT_RATE_PER_MINUTE,
    DEFAULT_READ_ONLY_KEY,
    DEFAULT_SPEND_LIMIT,
    Settings,
    Timing,
    default_spec_path,
)


def _env_float(name: str, default: float) -> float:
    return float(os.environ.get(name, default))


def _env_int(name: str) -> int | None:
    raw = os.environ.get(name, "").strip()
    return int(raw) if raw else None


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m emulator", description="Local RunPod (REST v2 + GraphQL subset)."
    )
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="serve on a loopback port until SIGTERM/SIGINT")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8787, help="0 picks a free port (see STATE_DIR/server.json)")
    s.add_argument("--state-dir", type=Path, default=Path(".state/local-runpod/emulator"))
    s.add_argument(
        "--spec", type=Path, default=None, help="RunPod openapi-v2.json (env TRAINSTACK_OPENAPI_V2)"
    )
    s.add_argument(
        "--api-key-env",
        default="RUNPOD_API_KEY",
        help=f"env var holding the accepted key (default key: {DEFAULT_API_KEY})",
    )
    s.add_argument("--offer-spot", action="store_true", help="accept podRentInterruptable again")
    s.add_argument(
        "--time-scale", type=float, default=1.0, help="emulated seconds per real second; 0 freezes"
    )
    s.add_argument("--provisioning-s", type=float, default=10.0)
    s.add_argument("--starting-s", type=float, default=5.0)
    s.add_argument("--runtime-lag-s", type=float, default=3.0, help="RUNNING before runtime/ports appear")
    s.add_argument("--preempt-notice-s", type=float, default=5.0)
    s.add_argument(
        "--latency-model",
        choices=("fixed", "image"),
        default="fixed",
        help="image: first boots take ~33-170 s by image size and cache (emulator/latency.py)",
    )
    s.add_argument("--image-gb", type=float, default=16.0, help="size of images the latency model lacks")
    s.add_argument("--spend-limit", type=float, default=_env_float("RUNPOD_SPEND_LIMIT", DEFAULT_SPEND_LIMIT))
    s.add_argument("--balance", type=float, default=_env_float("RUNPOD_BALANCE", 1000.0))
    s.add_argument(
        "--rate-per-minute",
        type=int,
        default=int(_env_float("RUNPOD_RATE_PER_MINUTE", DEFAULT_RATE_PER_MINUTE)),
    )
    s.add_argument("--rate-per-hour", type=int, default=_env_int("RUNPOD_RATE_PER_HOUR"))
    s.add_argument("--rate-per-day", type=int, default=_env_int("RUNPOD_RATE_PER_DAY"))
    s.add_argument(
        "--graphql",
        choices=["on", "gone", "limited"],
        default=os.environ.get("RUNPOD_GRAPHQL", "on"),
        help="the legacy GraphQL API: on, gone (410 Gone) or limited (429, Retry-After; env RUNPOD_GRAPHQL)",
    )
    s.add_argument("--graphql-retry-after-s", type=int, default=3600, help="Retry-After of a limited GraphQL")
    s.add_argument("--no-capacity", action="store_true", help="refuse every create for capacity")
    s.add_argument("--error-rate", type=float, default=0.0, help="share of API requests answered 503")
    s.add_argument("--latency-ms", type=int, default=0)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--log-level", default="warning")
    s.add_argument("--access-log", action="store_true", help="log request lines (never headers or bodies)")
    h = s.add_argument_group("emulated hosts (root only; see emulator/hosts.py)")
    h.add_argument(
        "--hosts",
        choices=["auto", "on", "off"],
        default=os.environ.get("TRAINSTACK_HOSTS", "auto"),
        help="RUNNING pods become SSH-able network namespaces: auto (when root), on (or fail), off",
    )
    h.add_argument(
        "--hosts-bridge",
        default=os.environ.get("TRAINSTACK_HOSTS_BRIDGE", ""),
        help="bridge the hosts join (default: this server's own, tsbrN; see emulator/netslot.py)",
    )
    h.add_argument(
        "--hosts-bridge-cidr",
        default=os.environ.get("TRAINSTACK_HOSTS_BRIDGE_CIDR", ""),
        help="host-side address of the bridge, used only when it is created here (default 10.250.N.1/24)",
    )
    h.add_argument(
        "--hosts-path",
        action="append",
        default=[p for p in os.environ.get("TRAINSTACK_NODE_PATH", "").split(":") if p],
        help="directory prepended to PATH on every node (repeatable; env TRAINSTACK_NODE_PATH)",
    )
    h.add_argument("--hosts-env", action="append", default=[], metavar="KEY=VALUE", help="node login env")
    h.add_argument(
        "--hosts-ssh-key",
        action="append",
        type=Path,
        default=[Path(k) for k in [os.environ.get("TRAINSTACK_SSH_PUBLIC_KEY", "")] if k],
        help="public key file nodes accept besides the account's keys (env TRAINSTACK_SSH_PUBLIC_KEY)",
    )
    return p


def _pairs(items: list[str]) -> dict[str, str]:
    bad = [i for i in items if "=" not in i]
    if bad:
        raise SystemExit(f"--hosts-env wants KEY=VALUE, got {bad}")
    return dict(i.split("=", 1) for i in items)


def settings_from(args: argparse.Namespace) -> Settings:
    timing = Timing(
        provisioning_s=args.provisioning_s,
        starting_s=args.starting_s,
        runtime_lag_s=args.runtime_lag_s,
        preempt_notice_s=args.preempt_notice_s,
    )
    return Settings(
        host=args.host,
        port=args.port,
        state_dir=args.state_dir,
        spec_path=args.spec or default_spec_path(),
        api_key=os.environ.get(args.api_key_env) or DEFAULT_API_KEY,
        time_scale=args.time_scale,
        timing=timing,
        latency_model=args.latency_model,
        image_gb=args.image_gb,
        offer_spot=args.offer_spot,
        graphql=args.graphql,
        graphql_retry_after_s=args.graphql_retry_after_s,
        no_capacity=args.no_capacity,
        spend_limit=args.spend_limit,
        balance=args.balance,
        rate_per_minute=args.rate_per_minute,
        rate_per_hour=args.rate_per_hour,
        rate_per_day=args.rate_per_day,
        read_only_key=os.environ.get("RUNPOD_READ_ONLY_API_KEY") or DEFAULT_READ_ONLY_KEY,
        restricted_keys=json.loads(os.environ.get("RUNPOD_RESTRICTED_API_KEYS") or "{}"),
        error_rate=args.error_rate,
        latency_ms=args.latency_ms,
        seed=args.seed,
        log_level=args.log_level,
        hosts=args.hosts,
        hosts_bridge=args.hosts_bridge,
        hosts_bridge_cidr=args.hosts_bridge_cidr,
        hosts_node_path=tuple(args.hosts_path),
        hosts_env=_pairs(args.hosts_env),
        hosts_ssh_keys=tuple(k.read_text().strip() for k in args.hosts_ssh_key),
    )


def main() -> None:
    args = parser().parse_args()
    from common.imports import collector_paused

    with collector_paused():  # FastAPI, uvicorn, pydantic (common/imports.py: 0.95 -> 0.72 CPU-s a server)
        from emulator.app import serve  # imported late so `--help` stays fast

    serve(settings_from(args), access_log=args.access_log)


if __name__ == "__main__":
    main()
