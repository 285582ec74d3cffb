"""Moved to :mod:`kproto.compression`, a leaf the Cython core imports without going
through this package; ``kproto.records.compression`` is that same module."""

import sys

from .. import compression

sys.modules[__name__] = compression
