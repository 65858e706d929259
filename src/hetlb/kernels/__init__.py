"""The numba event loops (continuous time, slotted time, the bounding systems) with their trees and
key buckets; hetlb.jit lets them run as plain Python too (NUMBA_DISABLE_JIT=1)."""
