"""``python -m compiler.cli``: the commands, as ``python -m compiler`` runs them (kept from when
the CLI was one module)."""

import sys

from . import main

sys.exit(main())
