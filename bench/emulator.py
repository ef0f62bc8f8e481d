"""Benchmark (not a test): idle RSS of a local RunPod and the requests per second it serves on loopback."""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from harness.local import start_local_runpod

POD = {"name": "bench", "image": "runpod/pytorch:2.8.0", "gpu": {"id": "NVIDIA H100 80GB HBM3", "count": 1}}


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def rate(client_factory: object, requests: int, workers: int, call: str) -> float:
    """Requests per second for `requests` calls of one kind spread over `workers` keep-alive clients."""
    assert callable(client_factory)
    clients: list[httpx.Client] = [client_factory() for _ in range(workers)]

    def batch(client: httpx.Client) -> None:
        for _ in range(requests // workers):
            if call == "get":
                client.get("/v2/pods").raise_for_status()
            else:
                pod = client.post("/v2/pods", json=POD)
                pod.raise_for_status()
                client.delete(f"/v2/pods/{pod.json()['id']}").raise_for_status()

    started = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(batch, clients))
    elapsed = time.perf_counter() - started
    for client in clients:
        client.close()
    return (requests // workers) * workers * (1 if call == "get" else 2) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(prog="scripts/bench-emulator", description=__doc__)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--idle-s", type=float, default=2.0, help="settle time before RSS is read")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as state:
        server = start_local_runpod(Path(state), "--rate-per-minute", "100000000", "--spend-limit", "1000000")
        try:
            time.sleep(args.idle_s)
            idle = rss_mb(server.process.pid)
            with server.client() as api:
                for _ in range(20):  # a realistic listing: a few dozen pods
                    api.post("/v2/pods", json=POD).raise_for_status()
            results = {
                "idle_rss_mb": round(idle, 1),
                "get_pods_1_client_rps": round(rate(server.client, args.requests, 1, "get")),
                "get_pods_4_clients_rps": round(rate(server.client, args.requests, 4, "get")),
                "create_delete_1_client_rps": round(rate(server.client, args.requests // 4, 1, "create")),
                "rss_after_mb": round(rss_mb(server.process.pid), 1),
            }
        finally:
            server.stop()
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
