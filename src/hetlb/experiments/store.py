"""The result store: an SQLite file of finished runs keyed by content hash.

A run's key hashes its scenario, replication, seeds and the hetlb version, so a repeated or
interrupted sweep finds what is already done whatever its name or order, and a new hetlb version
recomputes. A second table records which runs make up each named sweep, with each run's point,
axis values and replication; it is written when the sweep starts, so a sweep stopped midway is
listed with the runs it has finished. A third keeps each sweep's spec and the file it came from.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (key TEXT PRIMARY KEY, row TEXT NOT NULL, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS sweeps (name TEXT NOT NULL, key TEXT NOT NULL, position INTEGER NOT NULL,
                                   point INTEGER, replication INTEGER, point_values TEXT,
                                   PRIMARY KEY (name, key));
CREATE TABLE IF NOT EXISTS sweep_specs (name TEXT PRIMARY KEY, spec TEXT, source TEXT, registered REAL NOT NULL);
"""
ADDED_SWEEP_COLUMNS = {"point": "INTEGER", "replication": "INTEGER", "point_values": "TEXT"}
"""Columns of the sweeps table that stores written by hetlb 0.2.0 lack (added on opening)."""


class ResultStore:
    """Finished runs on disk (``path``, an SQLite file created on first use)."""

    def __init__(self, path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.connection = sqlite3.connect(self.path)
        self.connection.executescript(SCHEMA)
        present = {row[1] for row in self.connection.execute("PRAGMA table_info(sweeps)")}
        with self.connection:
            for column, kind in ADDED_SWEEP_COLUMNS.items():
                if column not in present:
                    self.connection.execute(f"ALTER TABLE sweeps ADD COLUMN {column} {kind}")

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

    def register(self, name: str, runs: list, spec: dict | None = None, source: str | None = None) -> None:
        """Record that sweep ``name`` consists of ``runs``, in this order: each a store key, or a
        (key, point index, {axis: value}, replication) tuple. ``spec`` is the sweep's spec as a
        mapping and ``source`` the file it was read from, if any."""
        entries = [(run, None, None, None) if isinstance(run, str) else run for run in runs]
        with self.connection:
            self.connection.execute("DELETE FROM sweeps WHERE name = ?", (name,))
            self.connection.executemany(
                "INSERT OR IGNORE INTO sweeps (name, key, position, point, replication, point_values) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (name, key, i, point, replication, None if values is None else json.dumps(values))
                    for i, (key, point, values, replication) in enumerate(entries)
                ],
            )
            self.connection.execute(
                "INSERT OR REPLACE INTO sweep_specs VALUES (?, ?, ?, ?)",
                (name, None if spec is None else json.dumps(spec), source, time.time()),
            )

    def sweeps(self) -> list[dict]:
        """Each named sweep: its number of runs, how many are finished (fewer when the sweep was
        stopped midway) and the spec file it was run from (None if it was not run from a file)."""
        query = """SELECT s.name, COUNT(*), COUNT(r.key), p.source FROM sweeps s
                   LEFT JOIN runs r ON r.key = s.key LEFT JOIN sweep_specs p ON p.name = s.name
                   GROUP BY s.name ORDER BY s.name"""
        return [
            {"name": name, "runs": total, "finished": done, "source": source}
            for name, total, done, source in self.connection.execute(query)
        ]

    def spec(self, name: str) -> dict | None:
        """The spec of sweep ``name`` as a mapping (hetlb.experiments.SweepSpec.from_mapping), or None."""
        found = self.connection.execute("SELECT spec FROM sweep_specs WHERE name = ?", (name,)).fetchone()
        return None if found is None or found[0] is None else json.loads(found[0])

    def load(self, name: str) -> list[dict]:
        """The finished rows of sweep ``name`` in spec order, each as a row of the sweep's runs
        table: point, the axis values, replication, the run's figures, key."""
        query = """SELECT s.point, s.point_values, s.replication, r.row, s.key FROM sweeps s
                   JOIN runs r ON r.key = s.key WHERE s.name = ? ORDER BY s.position"""
        records = []
        for point, values, replication, row, key in self.connection.execute(query, (name,)):
            head = {} if point is None else {"point": point, **json.loads(values), "replication": replication}
            records.append({**head, **json.loads(row), "key": key})
        return records


def resume_note(entry: dict) -> str:
    """For a sweep of :meth:`ResultStore.sweeps` with unfinished runs, how to resume it, as
    '  (interrupted: `hetlb sweep SPEC` resumes it)' with its spec file when known; '' when it is
    complete."""
    if entry["finished"] >= entry["runs"]:
        return ""
    return f"  (interrupted: `hetlb sweep {entry['source'] or 'SPEC'}` resumes it)"
