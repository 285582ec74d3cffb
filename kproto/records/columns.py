"""Moved to :mod:`kproto.columns`, a leaf the Cython core imports without going
through this package; ``kproto.records.columns`` is that same module."""

import sys

from .. import columns

sys.modules[__name__] = columns
