"""The producer: records in, batches out, idempotent and transactional.

The entry is :class:`~kproto.producer.producer.Producer` (``from kproto import
Producer``). What it is built from, one concern a module:

- ``producer``: the facade: settings, ``send`` / ``send_batch`` / ``flush`` /
  ``close``, the futures; its hot path is C (``kproto/_accum.pxi``).
- ``columns``: the record table ``send_batch`` takes, checked before anything
  is sent.
- ``partitioner``: murmur2 and the sticky partitioner (Java's defaults).
- ``accumulator``: per-partition queues of batches (Java's RecordAccumulator).
- ``sender``: the thread that owns the sockets (Java's Sender).
- ``idempotence``: producer id, epoch and sequences per partition.
- ``transaction_manager`` / ``transaction_requests``: Java's TransactionManager
  and what each coordinator request carries and does to its state.
- ``transactions``: ending a transaction another process began
  (:func:`commit_transaction`), the coordinator links transactions use.
"""

from .producer import BatchFuture, BatchMetadata, Producer, RecordFuture, RecordMetadata
from .transactions import PreparedTransaction, abort_transaction, commit_transaction

__all__ = ["Producer", "RecordMetadata", "BatchMetadata", "RecordFuture", "BatchFuture",
           "PreparedTransaction", "commit_transaction", "abort_transaction"]
