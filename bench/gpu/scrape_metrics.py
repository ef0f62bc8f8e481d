"""Scrape a Prometheus endpoint every few seconds while a process lives; keep the scrapes that matter.

    python3 bench/gpu/scrape_metrics.py URL PID OUT_DIR [INTERVAL_S]

Writes OUT_DIR/scrape-last.txt (the newest scrape), OUT_DIR/scrape-training.txt (the newest one that shows
training progress) and OUT_DIR/scrapes.log (one line per attempt: time, bytes or the error).
"""

from __future__ import annotations

import os
import sys
import time
import urllib.request
from pathlib import Path


def main() -> int:
    url, pid, out = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
    interval = float(sys.argv[4]) if len(sys.argv) > 4 else 5.0
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "scrapes.log", "a", encoding="utf-8") as log:
        while os.path.exists(f"/proc/{pid}"):
            time.sleep(interval)  # a scraper's fixed period, as Prometheus's own
            stamp = time.strftime("%H:%M:%S", time.gmtime())
            try:
                with urllib.request.urlopen(url, timeout=5) as answer:  # noqa: S310 (loopback URL)
                    text = answer.read().decode()
            except OSError as exc:
                log.write(f"{stamp} {type(exc).__name__}: {exc}\n")
                continue
            log.write(f"{stamp} {len(text)} bytes\n")
            (out / "scrape-last.txt").write_text(text)
            if "\ntrainstack_train_step{" in text:
                (out / "scrape-training.txt").write_text(text)
            log.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
