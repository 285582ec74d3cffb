"""kproto: the Kafka wire protocol for Python data pipelines.

Cython hot paths, Arrow/NumPy columns, a thin readable client and a PySpark
data source. See ``docs/`` for the guide.
"""

__version__ = "0.1.0"

from .errors import KprotoError  # noqa: E402

__all__ = ["__version__", "KprotoError"]
