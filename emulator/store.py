"""SQLite persistence: resource documents, account settings and the append-only audit log."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

_SCHEMA = """
CREATE TABLE IF NOT EXISTS resources (kind TEXT NOT NULL, id TEXT NOT NULL, doc TEXT NOT NULL,
                                      PRIMARY KEY (kind, id));
CREATE TABLE IF NOT EXISTS settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS audit (seq INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL,
                                  wall REAL NOT NULL, event TEXT NOT NULL, kind TEXT NOT NULL,
                                  resource_id TEXT, name TEXT, detail TEXT NOT NULL);
"""


class Store:
    """One SQLite file per state dir. Outside `begin()` every write commits at once; the admission layer
    wraps each API request in `begin()`/`commit()` so a request that fails half-way leaves nothing behind."""

    def __init__(self, state_dir: Path) -> None:
        state_dir.mkdir(parents=True, exist_ok=True)
        self.path = state_dir / "runpod.sqlite3"
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        # WAL + NORMAL keeps a commit durable across process restarts at a fraction of FULL's cost.
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)

    def begin(self) -> None:
        """Open a transaction: the writes of one request commit together or not at all."""
        self._db.execute("BEGIN")

    def commit(self) -> None:
        self._db.execute("COMMIT")

    def rollback(self) -> None:
        self._db.execute("ROLLBACK")

    def close(self) -> None:
        self._db.close()

    def put(self, kind: str, ident: str, doc: dict[str, Any]) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO resources (kind, id, doc) VALUES (?, ?, ?)",
            (kind, ident, json.dumps(doc)),
        )

    def delete(self, kind: str, ident: str) -> None:
        self._db.execute("DELETE FROM resources WHERE kind = ? AND id = ?", (kind, ident))

    def load(self, kind: str) -> list[dict[str, Any]]:
        rows = self._db.execute("SELECT doc FROM resources WHERE kind = ? ORDER BY rowid", (kind,))
        return [json.loads(doc) for (doc,) in rows]

    def clear_resources(self) -> None:
        self._db.execute("DELETE FROM resources")

    def get_setting(self, key: str) -> Any:
        row = self._db.execute("SELECT value FROM settings WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def set_setting(self, key: str, value: Any) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO settings (key, value) VALUES (?, ?)", (key, json.dumps(value))
        )

    def audit(
        self, at: float, event: str, kind: str, ident: str | None, name: str | None, detail: dict[str, Any]
    ) -> None:
        """Append one event. Callers pass names and ids only: never headers or secret values."""
        self._db.execute(
            "INSERT INTO audit (at, wall, event, kind, resource_id, name, detail) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (at, time.time(), event, kind, ident, name, json.dumps(detail, sort_keys=True)),
        )

    def audit_of(self, resource_id: str) -> list[tuple[int, float, str]]:
        """(seq, at, event) of one resource, oldest first: the pod's system log."""
        rows = self._db.execute(
            "SELECT seq, at, event FROM audit WHERE resource_id = ? ORDER BY seq", (resource_id,)
        )
        return [(int(seq), float(at), str(event)) for seq, at, event in rows]

    def audit_since(self, seq: int, limit: int) -> list[dict[str, Any]]:
        rows = self._db.execute(
            "SELECT seq, at, wall, event, kind, resource_id, name, detail FROM audit WHERE seq > ? "
            "ORDER BY seq LIMIT ?",
            (seq, limit),
        )
        keys = ("seq", "at", "wall", "event", "kind", "resourceId", "name", "detail")
        entries = [dict(zip(keys, row, strict=True)) for row in rows]
        for entry in entries:
            entry["detail"] = json.loads(entry["detail"])
        return entries
