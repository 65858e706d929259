"""hetlb's version: part of every result's metadata and of the result store's run keys."""

__version__ = "0.4.0"
