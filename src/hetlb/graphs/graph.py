"""Compatibility graphs between job types (ports, the left nodes L of paper 000) and servers.

A graph is kept in compressed sparse row (CSR) form: the servers a type-``k`` job may use are
``indices[indptr[k]:indptr[k + 1]]`` (N_L(l) in 000), sorted and without repeats.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hetlb.errors import InputError


@dataclass(frozen=True, eq=False)
class CompatibilityGraph:
    """Bipartite graph job types x servers in CSR form; see the module docstring.

    Parameters
    ----------
    indptr
        Row pointers, length K + 1: job type k's servers are indices[indptr[k]:indptr[k + 1]].
    indices
        The compatible servers of every job type, each row sorted.
    n_servers
        N, the number of servers.
    """

    indptr: np.ndarray
    indices: np.ndarray
    n_servers: int

    def __repr__(self) -> str:
        kind = "complete" if self.is_complete() else "sparse"
        return f"<CompatibilityGraph {kind}: {self.n_types} job types, {self.n_servers} servers, {self.n_edges} edges>"

    @property
    def n_types(self) -> int:
        """The number of job types K (rows of the graph)."""
        return len(self.indptr) - 1

    @property
    def n_edges(self) -> int:
        """The number of edges: (job type, server) pairs that may serve each other."""
        return int(self.indptr[-1])

    def degree(self) -> np.ndarray:
        """Number of compatible servers of each job type, |N_L(l)|."""
        return np.diff(self.indptr)

    def server_degree(self) -> np.ndarray:
        """Number of job types each server may serve, |N_R(r)|."""
        return np.bincount(self.indices, minlength=self.n_servers)

    def servers_of(self, job_type: int) -> np.ndarray:
        """The servers compatible with one job type, in increasing order.

        Parameters
        ----------
        job_type
            k, the job type's index (0 <= k < n_types).

        Returns
        -------
        numpy.ndarray
            The server indices s with an edge (k, s): a view of ``indices``.
        """
        return self.indices[self.indptr[job_type] : self.indptr[job_type + 1]]

    def is_complete(self) -> bool:
        """Whether every job type may go to every server (the complete bipartite graph)."""
        return bool(np.all(self.degree() == self.n_servers))

    def complete_types(self) -> np.ndarray:
        """Boolean mask of the job types that may use every server."""
        return self.degree() == self.n_servers

    def to_lists(self) -> list[list[int]]:
        """The graph as one list of compatible servers per job type (the form ``from_lists`` reads)."""
        return [self.servers_of(k).tolist() for k in range(self.n_types)]

    def describe(self) -> dict:
        """Graph statistics for result metadata."""
        degree = self.degree()
        server_degree = self.server_degree()
        if self.is_complete():
            return {"kind": "complete", "n_types": self.n_types, "n_edges": self.n_edges}
        return {
            "kind": "explicit",
            "n_types": self.n_types,
            "n_edges": self.n_edges,
            "type_degree_min": int(degree.min()),
            "type_degree_mean": float(degree.mean()),
            "type_degree_max": int(degree.max()),
            "servers_without_type": int(np.count_nonzero(server_degree == 0)),
        }

    @classmethod
    def complete(cls, n_types: int, n_servers: int) -> CompatibilityGraph:
        """Every job type may use every server.

        Parameters
        ----------
        n_types
            K, the number of job types.
        n_servers
            N, the number of servers.
        """
        indptr = np.arange(n_types + 1, dtype=np.int64) * n_servers
        indices = np.tile(np.arange(n_servers, dtype=np.int64), n_types)
        return cls(indptr, indices, n_servers)

    @classmethod
    def from_lists(cls, servers_by_type, n_servers: int) -> CompatibilityGraph:
        """From one list of server indices per job type.

        Parameters
        ----------
        servers_by_type
            For each job type k, the indices of the servers it may use.
        n_servers
            N, the number of servers.
        """
        lists = [np.asarray(servers, dtype=np.int64).ravel() for servers in servers_by_type]
        return cls.from_csr(
            np.concatenate([[0], np.cumsum([len(s) for s in lists])]).astype(np.int64),
            np.concatenate(lists) if lists else np.zeros(0, np.int64),
            n_servers,
        )

    @classmethod
    def from_edges(cls, edges, n_types: int, n_servers: int) -> CompatibilityGraph:
        """From (job type, server) pairs.

        Parameters
        ----------
        edges
            (job type, server) pairs.
        n_types
            K, the number of job types.
        n_servers
            N, the number of servers.
        """
        edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
        check_index_range("graph.edges job type", edges[:, 0], n_types)
        order = np.lexsort((edges[:, 1], edges[:, 0]))
        edges = edges[order]
        indptr = np.zeros(n_types + 1, dtype=np.int64)
        np.cumsum(np.bincount(edges[:, 0], minlength=n_types), out=indptr[1:])
        return cls.from_csr(indptr, edges[:, 1], n_servers)

    @classmethod
    def from_csr(cls, indptr, indices, n_servers: int) -> CompatibilityGraph:
        """From CSR arrays; checks them and sorts each type's servers.

        Parameters
        ----------
        indptr
            Row pointers, length K + 1.
        indices
            The servers of each job type, row after row.
        n_servers
            N, the number of servers.
        """
        indptr = np.asarray(indptr, dtype=np.int64)
        indices = np.asarray(indices, dtype=np.int64)
        if indptr.ndim != 1 or len(indptr) < 2 or indptr[0] != 0 or np.any(np.diff(indptr) < 0):
            raise InputError("graph.indptr", "must start at 0 and be non-decreasing, one entry per job type plus one")
        if indptr[-1] != len(indices):
            raise InputError("graph.indices", f"must have indptr[-1] = {indptr[-1]} entries, has {len(indices)}")
        check_index_range("graph server index", indices, n_servers)
        empty = np.flatnonzero(np.diff(indptr) == 0)
        if len(empty):
            raise InputError(
                "graph", f"job type {int(empty[0])} has no compatible server (every type needs at least one)"
            )
        rows = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
        indices = indices[np.lexsort((indices, rows))]
        repeated = np.flatnonzero((rows[1:] == rows[:-1]) & (indices[1:] == indices[:-1]))
        if len(repeated):
            at = repeated[0] + 1
            raise InputError("graph", f"job type {int(rows[at])} lists server {int(indices[at])} twice")
        return cls(indptr, indices, int(n_servers))


def check_index_range(field: str, values: np.ndarray, size: int) -> None:
    bad = values[(values < 0) | (values >= size)]
    if len(bad):
        raise InputError(field, f"must lie in 0..{size - 1}, got {int(bad[0])}")
