"""Compatibility graphs: the bipartite graph type, its constructions and its checks."""

from hetlb.graphs.graph import CompatibilityGraph

__all__ = ["CompatibilityGraph"]
