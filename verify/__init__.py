"""Reference simulators, checks, reports and benchmarks.

The certificate checker's rules for obligations proved in modules of their own register with it
on import (``verify.certify.RULES``): importing them here makes every use of the checker see them."""

from verify import recency  # noqa: F401  (registers Match and Races)
