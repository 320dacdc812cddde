"""The tool's version: one place, read by the package metadata and by reports."""

__version__ = "0.1.0"
