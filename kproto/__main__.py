"""``python -m kproto``: the ``kproto`` command."""

import sys

from .cli import main

sys.exit(main())
