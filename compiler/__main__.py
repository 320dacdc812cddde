"""``python -m compiler`` = the ``shortcut`` command."""

import sys

from .command import main

sys.exit(main())
