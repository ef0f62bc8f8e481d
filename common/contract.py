"""Names of docs/ARCHITECTURE.md's resource contract that several parts read (standard library only)."""

from __future__ import annotations

from typing import Final

# What every RunPod provider's check() adds, so policies and the preview report can price a plan at preview.
COST_KEYS: Final = ("cost_per_hour", "storage_cost_per_month", "price_source")
