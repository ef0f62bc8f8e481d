"""Faults injected on demand: 5xx answers, latency, dropped connections and lost responses."""

from __future__ import annotations

import random
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class FaultConfig(BaseModel):
    """What the admin API sets. `match*` narrow every fault to matching requests."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    errorRate: float = Field(default=0.0, ge=0, le=1)
    errorNext: int = Field(default=0, ge=0)
    errorStatus: int = Field(default=503, ge=500, le=599)
    latencyMs: int = Field(default=0, ge=0, le=60_000)
    # Close the socket before the request reaches the API: nothing changed.
    dropNext: int = Field(default=0, ge=0)
    # Let the API commit the change, then close the socket: the reply is lost, the pod is billed.
    loseNext: int = Field(default=0, ge=0)
    # The k-th state write from now (1 = the next) fails as a full disk would: the request that made it
    # answers 500 and must leave nothing behind (the admission layer's per-request transaction).
    failWrite: int = Field(default=0, ge=0)
    # The next k requests to /graphql answer `graphqlStatus`: 410 Gone, or 429 with Retry-After
    # `graphqlRetryAfterS` (RunPod's migration notes: GraphQL rate-limited in stages, then retired).
    graphqlNext: int = Field(default=0, ge=0)
    graphqlStatus: Literal[410, 429] = 410
    graphqlRetryAfterS: int = Field(default=3600, ge=0)
    matchMethod: str | None = None
    matchPath: str | None = None
    seed: int = 0


class Faults:
    """The live fault state; the RNG is seeded so an error-rate run is reproducible."""

    def __init__(self, config: FaultConfig) -> None:
        self.set(config)

    def set(self, config: FaultConfig) -> None:
        self.config = config
        self._rng = random.Random(config.seed)

    def applies(self, endpoint: str) -> bool:
        method, _, template = endpoint.partition(" ")
        cfg = self.config
        if cfg.matchMethod and cfg.matchMethod.upper() != method:
            return False
        return not (cfg.matchPath and not template.startswith(cfg.matchPath))

    def _take(self, field: str) -> bool:
        left = getattr(self.config, field)
        if left <= 0:
            return False
        self.config = self.config.model_copy(update={field: left - 1})
        return True

    def take_drop(self) -> bool:
        return self._take("dropNext")

    def take_write_failure(self) -> bool:
        """Count one state write; True when it is the one `failWrite` names."""
        if self.config.failWrite <= 0:
            return False
        self.config = self.config.model_copy(update={"failWrite": self.config.failWrite - 1})
        return self.config.failWrite == 0

    def take_graphql(self) -> bool:
        return self._take("graphqlNext")

    def take_lose(self) -> bool:
        return self._take("loseNext")

    def take_error(self) -> bool:
        if self._take("errorNext"):
            return True
        return self.config.errorRate > 0 and self._rng.random() < self.config.errorRate
