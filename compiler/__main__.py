"""``python -m compiler`` = the ``shortcut`` command."""

import sys

from .cli import main

sys.exit(main())
