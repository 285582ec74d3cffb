"""Moved to :mod:`kproto.fetched`, a leaf the Cython core imports without going
through this package; ``kproto.records.fetched`` is that same module."""

import sys

from .. import fetched

sys.modules[__name__] = fetched
