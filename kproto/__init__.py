"""kproto: the Kafka wire protocol for Python data pipelines.

Cython hot paths, Arrow/NumPy columns, a thin readable client and a PySpark
data source. See ``docs/`` for the guide.

>>> from kproto import Producer, Consumer, Admin      # doctest: +SKIP
"""

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

from .errors import KprotoError  # noqa: E402

if TYPE_CHECKING:
    from .admin import Admin
    from .consumer import AcknowledgeType, Consumer, ShareConsumer
    from .producer import Producer, RecordMetadata
    from .structs import (
        ConsumerGroupMetadata,
        OffsetAndMetadata,
        OffsetAndTimestamp,
        TopicPartition,
    )

#: Public names imported on first use (``import kproto`` stays light).
_LAZY = {
    "Producer": "producer", "RecordMetadata": "producer",
    "Consumer": "consumer", "TopicPartition": "structs", "OffsetAndTimestamp": "structs",
    "Admin": "admin", "OffsetAndMetadata": "structs", "ConsumerGroupMetadata": "structs",
    "ShareConsumer": "consumer", "AcknowledgeType": "consumer",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kproto' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


__all__ = ["__version__", "KprotoError", "Producer", "RecordMetadata", "Consumer",
           "TopicPartition", "OffsetAndTimestamp", "Admin", "OffsetAndMetadata",
           "ConsumerGroupMetadata", "ShareConsumer", "AcknowledgeType"]
