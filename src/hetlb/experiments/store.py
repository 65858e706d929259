"""The result store: an SQLite file of finished runs keyed by content hash.

A run's key hashes its scenario, replication, seeds and the hetlb version, so a repeated or
interrupted sweep finds what is already done whatever its name or order, and a new hetlb version
recomputes. A second table records which runs make up each named sweep, with each run's point,
axis values and replication; it is written when the sweep starts, so a sweep stopped midway is
listed with the runs it has finished. A third keeps each sweep's spec and the file it came from.

Every write is one transaction, so a sweep killed at any moment leaves the store as it was
before the write or after it, never between. Opening a store checks it (``PRAGMA quick_check``
and the tables and columns above): a file that is not a result store, or a damaged one, gives a
one-line :class:`hetlb.errors.InputError` naming the file, and so does a damaged row.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from urllib.parse import quote

from hetlb import validation
from hetlb.errors import InputError

TABLES = {
    "runs": "CREATE TABLE IF NOT EXISTS runs (key TEXT PRIMARY KEY, row TEXT NOT NULL, created REAL NOT NULL)",
    "sweeps": """CREATE TABLE IF NOT EXISTS sweeps (name TEXT NOT NULL, key TEXT NOT NULL, position INTEGER NOT NULL,
                                   point INTEGER, replication INTEGER, point_values TEXT,
                                   PRIMARY KEY (name, key))""",
    "sweep_specs": "CREATE TABLE IF NOT EXISTS sweep_specs (name TEXT PRIMARY KEY, spec TEXT, source TEXT, "
    "registered REAL NOT NULL)",
}
COLUMNS = {
    "runs": ("key", "row", "created"),
    "sweeps": ("name", "key", "position"),
    "sweep_specs": ("name", "spec", "source", "registered"),
}
"""The columns each table must have (a store of an earlier layout may lack the added ones)."""
ADDED_SWEEP_COLUMNS = {"point": "INTEGER", "replication": "INTEGER", "point_values": "TEXT"}
"""Columns of the sweeps table that stores written by hetlb 0.2.0 lack (added on opening)."""
BUSY_SECONDS = 30.0
"""How long to wait for another process (another sweep on the same store) to finish a write."""
SQLITE_HEADER = b"SQLite format 3\x00"
"""The first bytes of every SQLite database file (an empty file is a new, empty database)."""
DAMAGED_HINT = "move it aside or give another --store"
"""What to do with a damaged store (the next sweep makes a new one at its path)."""


class ResultStore:
    """Finished runs on disk (``path``, an SQLite file created on first use, with its folder).

    ``readonly`` opens an existing store without writing to it (to list it); it must then have
    the current layout.

    Parameters
    ----------
    path
        The SQLite file.
    readonly
        Open an existing store without writing to it.
    """

    def __init__(self, path, *, readonly: bool = False):
        self.connection: sqlite3.Connection | None = None
        if readonly:
            self.path = validation.input_file("store", path)
            if not self.path.is_file():
                raise InputError("store", f"must be a regular file, got {validation.shorten(str(self.path))}")
        else:
            self.path = validation.output_file("store", path, regular=True, parents=True)
        self.name = validation.shorten(str(self.path))
        self.readonly = readonly
        if self.path.is_file():
            with validation.os_errors("store", self.path), self.path.open("rb") as handle:
                head = handle.read(len(SQLITE_HEADER))
            if head and head != SQLITE_HEADER:  # an empty file is a new database
                raise InputError("store", f"{self.name} is not a hetlb result store (not an SQLite database)")
        try:
            with self.guard():
                if readonly:
                    uri = f"file:{quote(str(self.path.resolve()))}?mode=ro"
                    self.connection = sqlite3.connect(uri, uri=True, timeout=BUSY_SECONDS)
                else:
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                    self.connection = sqlite3.connect(self.path, timeout=BUSY_SECONDS)
                self.check()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Close the store's database connection (again: nothing)."""
        if self.connection is not None:
            self.connection.close()
            self.connection = None

    @property
    def db(self) -> sqlite3.Connection:
        """The open connection."""
        if self.connection is None:
            raise RuntimeError("the result store is closed")
        return self.connection

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- checking ---------------------------------------------------------------------------------

    @contextlib.contextmanager
    def guard(self):
        """Turn an SQLite error into an InputError naming the store."""
        try:
            yield
        except sqlite3.Error as error:
            raise InputError("store", self.describe(error)) from None
        except OSError as error:  # making the store's folder
            raise InputError("store", f"cannot use {self.name}: {error.strerror or error}") from None

    def describe(self, error: sqlite3.Error) -> str:
        """What an SQLite error says about the store, in a line.

        Parameters
        ----------
        error
            The SQLite error.
        """
        message = str(error)
        if "not a database" in message:
            return f"{self.name} is not a hetlb result store (not an SQLite database)"
        if "decode" in message:  # a text column that is not UTF-8
            return self.damaged("a stored text is not UTF-8").rule
        if "malformed" in message or "corrupt" in message:
            return self.damaged(message).rule
        return f"{self.name}: {validation.shorten(message)}"

    def damaged(self, what: str, hint: str = DAMAGED_HINT) -> InputError:
        """The error that says the store's file is damaged, naming the store.

        Parameters
        ----------
        what
            What is wrong with it (SQLite's message, shortened).
        hint
            What to do about it.

        Returns
        -------
        InputError
            The error, on the field ``store``, for the caller to raise.
        """
        what = validation.shorten(what.replace("*** in database main ***", "").strip(), 60)
        return InputError("store", f"{self.name} is damaged ({what}); {hint}")

    def tables(self) -> dict:
        """{table: its columns} of the database."""
        names = [row[0] for row in self.db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {
            name: {row[1] for row in self.db.execute(f'PRAGMA table_info("{name}")')}
            for name in names
            if not name.startswith("sqlite_")
        }

    def check(self) -> None:
        """Check the database (quick_check) and its tables, and make or upgrade the tables when
        this is a new store or one of an earlier layout."""
        problems = [row[0] for row in self.db.execute("PRAGMA quick_check(3)")]
        if problems != ["ok"]:
            raise self.damaged("; ".join(map(str, problems)))
        if self.upgrades(self.tables()):
            if self.readonly:
                raise InputError("store", f"{self.name} has the layout of an earlier hetlb; open it writable once")
            with self.db:  # one transaction; IMMEDIATE: another process upgrading waits
                self.db.execute("BEGIN IMMEDIATE")
                for statement in self.upgrades(self.tables()):
                    self.db.execute(statement)

    def upgrades(self, tables: dict) -> list[str]:
        """The statements that give ``tables`` the current layout (none when it has it); raises
        when the database is not a result store.

        Parameters
        ----------
        tables
            The database's tables: name -> their columns.
        """
        if not tables and self.readonly:
            raise InputError("store", f"{self.name} is not a hetlb result store (it is empty)")
        if tables and "runs" not in tables:
            raise InputError("store", f"{self.name} is an SQLite database but not a hetlb result store (no runs table)")
        statements = []
        for table, create in TABLES.items():
            if table not in tables:
                statements.append(create)
                continue
            missing = [column for column in COLUMNS[table] if column not in tables[table]]
            if missing:
                raise self.damaged(f"its {table} table has no column {missing[0]}")
        for column, kind in ADDED_SWEEP_COLUMNS.items():
            if "sweeps" in tables and column not in tables["sweeps"]:
                statements.append(f"ALTER TABLE sweeps ADD COLUMN {column} {kind}")
        return statements

    def decode(self, text, what: str) -> dict:
        """A JSON table stored as text, checked.

        Parameters
        ----------
        text
            The stored text.
        what
            What it is, for the error that says it is damaged.
        """
        try:
            value = json.loads(text)
        except (TypeError, ValueError, RecursionError):
            value = None
        if not isinstance(value, dict):
            raise self.damaged(f"{what} is not a JSON table", "`hetlb sweep --force` rewrites a sweep's runs")
        return value

    # --- reading and writing ----------------------------------------------------------------------

    def existing(self, keys) -> dict:
        """The stored rows among ``keys``, as {key: row}.

        Parameters
        ----------
        keys
            Store keys of runs.
        """
        found: dict[str, dict] = {}
        keys = list(keys)
        with self.guard():
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                query = f"SELECT key, row FROM runs WHERE key IN ({','.join('?' * len(chunk))})"
                for key, row in self.db.execute(query, chunk):
                    found[key] = self.decode(row, f"the run {str(key)[:12]}")
        return found

    def put(self, rows: dict) -> None:
        """Store {key: row} at once (one transaction).

        Parameters
        ----------
        rows
            {key: row} of finished runs.
        """
        now = time.time()
        with self.guard(), self.db:
            self.db.executemany(
                "INSERT OR REPLACE INTO runs VALUES (?, ?, ?)",
                [(key, json.dumps(row), now) for key, row in rows.items()],
            )

    def register(self, name: str, runs: list, spec: dict | None = None, source: str | None = None) -> None:
        """Record that sweep ``name`` consists of ``runs``, in this order: each a store key, or a
        (key, point index, {axis: value}, replication) tuple. ``spec`` is the sweep's spec as a
        mapping and ``source`` the file it was read from, if any (one transaction).

        Parameters
        ----------
        name
            The sweep's name.
        runs
            Its runs, in order.
        spec
            The sweep's spec as a mapping.
        source
            The file the spec was read from.
        """
        entries = [(run, None, None, None) if isinstance(run, str) else run for run in runs]
        with self.guard(), self.db:
            self.db.execute("DELETE FROM sweeps WHERE name = ?", (name,))
            self.db.executemany(
                "INSERT OR IGNORE INTO sweeps (name, key, position, point, replication, point_values) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (name, key, i, point, replication, None if values is None else json.dumps(values))
                    for i, (key, point, values, replication) in enumerate(entries)
                ],
            )
            self.db.execute(
                "INSERT OR REPLACE INTO sweep_specs VALUES (?, ?, ?, ?)",
                (name, None if spec is None else json.dumps(spec), source, time.time()),
            )

    def sweeps(self) -> list[dict]:
        """Each named sweep: its number of runs, how many are finished (fewer when the sweep was
        stopped midway) and the spec file it was run from (None if it was not run from a file)."""
        query = """SELECT s.name, COUNT(*), COUNT(r.key), p.source FROM sweeps s
                   LEFT JOIN runs r ON r.key = s.key LEFT JOIN sweep_specs p ON p.name = s.name
                   GROUP BY s.name ORDER BY s.name"""
        with self.guard():
            return [
                {"name": name, "runs": total, "finished": done, "source": source}
                for name, total, done, source in self.db.execute(query)
            ]

    def spec(self, name: str) -> dict | None:
        """The spec of sweep ``name`` as a mapping (hetlb.experiments.SweepSpec.from_mapping), or None.

        Parameters
        ----------
        name
            The sweep's name.
        """
        with self.guard():
            found = self.db.execute("SELECT spec FROM sweep_specs WHERE name = ?", (name,)).fetchone()
        return None if found is None or found[0] is None else self.decode(found[0], f"the spec of sweep {name}")

    def load(self, name: str) -> list[dict]:
        """The finished rows of sweep ``name`` in spec order, each as a row of the sweep's runs
        table: point, the axis values, replication, the run's figures, key.

        Parameters
        ----------
        name
            The sweep's name.
        """
        query = """SELECT s.point, s.point_values, s.replication, r.row, s.key FROM sweeps s
                   JOIN runs r ON r.key = s.key WHERE s.name = ? ORDER BY s.position"""
        records = []
        with self.guard():
            for point, values, replication, row, key in self.db.execute(query, (name,)):
                what = f"the run {str(key)[:12]}"
                head = {}
                if point is not None:
                    head = {
                        "point": point,
                        **self.decode(values, f"the axis values of {what}"),
                        "replication": replication,
                    }
                records.append({**head, **self.decode(row, what), "key": key})
        return records


def resume_note(entry: dict) -> str:
    """For a sweep of :meth:`ResultStore.sweeps` with unfinished runs, how to resume it, as
    '  (interrupted: `hetlb sweep SPEC` resumes it)' with its spec file when known; '' when it is
    complete."""
    if entry["finished"] >= entry["runs"]:
        return ""
    return f"  (interrupted: `hetlb sweep {entry['source'] or 'SPEC'}` resumes it)"
