"""The model zoo: many small compiled models, each verified, with ground-truth circuits and traces.

``shortcut zoo CONFIG -o DIR`` or :func:`run_zoo`; the config format is in
:mod:`compiler.zoo.config`, the manifest's schema in ``docs/zoo.md``.
"""

from .config import Config, jobs, load, parse
from .run import ZooSummary, run_zoo

__all__ = ["Config", "ZooSummary", "jobs", "load", "parse", "run_zoo"]
