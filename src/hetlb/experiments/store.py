"""The result store: an SQLite file of finished runs keyed by content hash.

A run's key hashes its scenario, replication, seeds and the hetlb version, so a repeated or
interrupted sweep finds what is already done whatever its name or order, and a new hetlb version
recomputes. A second table records which runs make up each named sweep.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (key TEXT PRIMARY KEY, row TEXT NOT NULL, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS sweeps (name TEXT NOT NULL, key TEXT NOT NULL, position INTEGER NOT NULL,
                                   PRIMARY KEY (name, key));
"""


class ResultStore:
    """Finished runs on disk (``path``, an SQLite file created on first use)."""

    def __init__(self, path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.connection = sqlite3.connect(self.path)
        self.connection.executescript(SCHEMA)

    def close(self) -> None:
        self.connection.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def existing(self, keys) -> dict:
        """The stored rows among ``keys``, as {key: row}."""
        found: dict[str, dict] = {}
        keys = list(keys)
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            query = f"SELECT key, row FROM runs WHERE key IN ({','.join('?' * len(chunk))})"
            found.update((key, json.loads(row)) for key, row in self.connection.execute(query, chunk))
        return found

    def put(self, rows: dict) -> None:
        """Store {key: row} at once (one transaction)."""
        now = time.time()
        with self.connection:
            self.connection.executemany(
                "INSERT OR REPLACE INTO runs VALUES (?, ?, ?)",
                [(key, json.dumps(row), now) for key, row in rows.items()],
            )

    def register(self, name: str, keys: list) -> None:
        """Record that sweep ``name`` consists of the runs ``keys``, in this order."""
        with self.connection:
            self.connection.execute("DELETE FROM sweeps WHERE name = ?", (name,))
            self.connection.executemany(
                "INSERT INTO sweeps VALUES (?, ?, ?)", [(name, key, i) for i, key in enumerate(keys)]
            )

    def sweeps(self) -> list[dict]:
        """Each named sweep with its number of runs and how many are finished."""
        query = """SELECT s.name, COUNT(*), COUNT(r.key) FROM sweeps s LEFT JOIN runs r ON r.key = s.key
                   GROUP BY s.name ORDER BY s.name"""
        return [{"name": name, "runs": total, "finished": done} for name, total, done in self.connection.execute(query)]

    def load(self, name: str) -> list[dict]:
        """The finished rows of sweep ``name`` in spec order."""
        query = """SELECT r.row FROM sweeps s JOIN runs r ON r.key = s.key WHERE s.name = ?
                   ORDER BY s.position"""
        return [json.loads(row) for (row,) in self.connection.execute(query, (name,))]
