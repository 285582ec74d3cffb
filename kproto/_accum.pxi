# ---------------------------------------------------------------- the producer's send() path
#
# Producer.send() -> RecordAccumulator.append() -> RecordFuture, in C: the classes here are
# the bases of kproto.producer.Producer, kproto.producer.accumulator.RecordAccumulator and
# ProducerBatch, and kproto.producer.RecordFuture, which add everything off the hot path in
# Python. Per record: one lock, murmur2 (or the sticky partition), one dict lookup, the
# record encoded into its partition's open batch (RecordsBuilder), one small future. Rare
# cases (no open batch, a full batch, buffer_memory full, values that are neither bytes nor
# str, headers, callbacks, a topic not in the metadata yet) call the Python methods named.
# Twin: kproto/_pure/accum.py (same fields, same behaviour; tests run both).

import logging as _logging
import time as _time_module

cdef object _now = _time_module.time
cdef object _tuple_new = tuple.__new__
cdef object _log = _logging.getLogger("kproto.producer")

from kproto.structs import RecordMetadata as _RecordMetadata

#: records/batch.py's RECORD_OVERHEAD and HEADER_SIZE (a test checks they agree)
SEND_RECORD_OVERHEAD = 12
SEND_BATCH_OVERHEAD = 61


cdef class BatchCore:
    """The fields of a producer batch and its records' metadata (``ProducerBatch`` adds the
    rest)."""

    cdef public object topic, partition, records, created, payload, table, sequence
    cdef public object producer_id, producer_epoch, sequence_reset, stamped, attempts
    cdef public object next_try, base_offset, log_append_time, error, event, callbacks
    cdef public object done, split_into, deliveries
    cdef public Py_ssize_t size, charged, count

    cpdef int64_t timestamp(self, Py_ssize_t index) except? -2:
        """The timestamp of send()'s record ``index`` (-1 for send_batch's batches)."""
        built = self.records
        if built is None or index >= (<RecordsBuilder> built).count:
            return -1
        return (<RecordsBuilder> built).timestamp(index)

    cpdef metadata(self, Py_ssize_t index):
        """Where send()'s record ``index`` was written, once the batch is done: a
        RecordMetadata (the broker's time on LogAppendTime topics)."""
        cdef int64_t base = self.base_offset, append_time = self.log_append_time
        return _tuple_new(_RecordMetadata, (
            self.topic, self.partition, -1 if base < 0 else base + index,
            append_time if append_time >= 0 else self.timestamp(index)))


def deliver(BatchCore batch, list items, error):
    """Run send()'s ``on_delivery`` callbacks of a batch that is done: ``items[i]`` is
    record i's callback (None: it has none); each ``fn(error, None)``, or
    ``fn(None, batch.metadata(i))``. A callback that raises is logged, not raised."""
    cdef Py_ssize_t index
    for index in range(len(items)):
        fn = items[index]
        if fn is None:
            continue
        try:
            fn(error, None if error is not None else batch.metadata(index))
        except Exception:       # a user callback must not kill the sender
            _log.exception("delivery callback raised")


cdef class FutureCore:
    """A record's batch and index in it (``RecordFuture`` adds the methods)."""

    cdef public object _batch
    cdef public Py_ssize_t _index

    def __init__(self, batch, Py_ssize_t index):
        self._batch = batch
        self._index = index


cdef class AccumulatorCore:
    """The fields ``append`` needs and ``append`` itself (``RecordAccumulator`` adds the
    rest). Subclasses provide ``check_usable()``, ``_wait_for_buffer(size)``,
    ``_seal(tp)`` and ``_open_batch(topic, partition)`` (a new open batch)."""

    cdef public object lock, cond, partitioner, fatal, future_type
    cdef public dict _open
    cdef public Py_ssize_t queued_bytes, buffer_memory, batch_size
    cdef public bint closing
    cdef object _acquire, _release

    def __init__(self, config, partitioner):
        import threading

        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self._acquire = self.lock.acquire
        self._release = self.lock.release
        self.partitioner = partitioner
        self.batch_size = config["batch_size"]
        self.buffer_memory = config["buffer_memory"]
        self._open = {}
        self.queued_bytes = 0
        self.closing = False
        self.fatal = None
        self.future_type = None

    def append(self, topic, partition, key, value, int64_t timestamp, headers,
               Py_ssize_t size, list partitions, on_done=None, delivery=None):
        """Add a record of about ``size`` bytes to its partition's open batch (a new
        one once that is full); returns the batch and the record's index in it.

        ``partition`` None: sticky for a null key (KIP-480: the partitioner moves
        on when the sticky partition's batch is full), else murmur2 of ``key``
        over ``partitions``. ``on_done(batch, index)`` runs once the record is
        written or failed; ``delivery(error, metadata)`` likewise (send()'s
        ``on_delivery``). Blocks while ``buffer_memory`` is full.
        """
        cdef Py_ssize_t index = 0
        batch = self._append(topic, partition, key, value, timestamp, headers, size,
                             partitions, on_done, delivery, &index)
        return batch, index

    cdef BatchCore _append(self, topic, partition, key, value, int64_t timestamp, headers,
                           Py_ssize_t size, list partitions, on_done, delivery,
                           Py_ssize_t *index):
        cdef bint sticky = partition is None and key is None
        cdef BatchCore batch
        cdef RecordsBuilder records
        cdef Py_ssize_t n = len(partitions)
        cdef int32_t h
        self._acquire()
        try:
            if self.closing or self.fatal is not None:
                self.check_usable()
            if self.queued_bytes + size > self.buffer_memory:
                self._wait_for_buffer(size)
            if partition is None:
                if sticky:
                    partition = self.partitioner.sticky.get(topic)
                    if partition is None:
                        partition = self.partitioner.partition(topic, key, partitions)
                else:
                    h = murmur2_c(<const unsigned char *> PyBytes_AS_STRING(key),
                                  PyBytes_GET_SIZE(key))
                    partition = partitions[(h & 0x7FFFFFFF) % n]
            tp = (topic, partition)
            found = self._open.get(tp)
            if found is not None and (<BatchCore> found).size + size > self.batch_size:
                self._seal(tp)
                found = None
                if sticky:   # the sticky partition's batch is full: move on (KIP-480)
                    self.partitioner.new_batch(topic, partitions)
                    partition = self.partitioner.partition(topic, key, partitions)
                    tp = (topic, partition)
                    found = self._open.get(tp)
            if found is None:
                found = self._open_batch(topic, partition)
            batch = <BatchCore> found
            records = <RecordsBuilder> batch.records
            index[0] = records.append(key, value, timestamp, headers)
            batch.count = index[0] + 1
            batch.size += size
            batch.charged += size
            self.queued_bytes += size
            if on_done is not None:
                batch.callbacks.append((index[0], on_done))
            if delivery is not None:     # record i's callback at deliveries[i]
                while len(batch.deliveries) < index[0]:
                    batch.deliveries.append(None)
                batch.deliveries.append(delivery)
        finally:
            self._release()
        return batch


cdef inline object _record_bytes(object v, object producer, str what):
    if v is None or PyBytes_CheckExact(v):
        return v
    if isinstance(v, str):
        return (<str> v).encode("utf-8")
    return producer._as_bytes(v, what)


cdef class ProducerCore:
    """``send()`` (``Producer`` adds the rest). Subclasses provide ``_partitions(topic)``,
    ``_as_bytes(v, what)`` and ``_header_pairs(headers)`` -> (pairs, bytes)."""

    cdef public object _txn, _cluster, _parts_cache
    cdef public AccumulatorCore _accumulator
    cdef public Py_ssize_t _max_request_size

    def send(self, topic, value=None, key=None, headers=None, partition=None,
             timestamp=None, on_delivery=None):
        """Queue one record; returns a :class:`RecordFuture`.

        ``value``/``key``: bytes or str (UTF-8) or None; ``headers``: a list of
        ``(str, bytes | None)`` or a dict; ``partition``: explicit, else
        murmur2 of the key (Java's choice) or sticky for null keys;
        ``timestamp``: ms since the epoch (default now). ``on_delivery(error,
        metadata)`` runs on the sender thread once the record is written or failed.
        """
        cdef Py_ssize_t size, index = 0
        cdef int64_t ts
        cdef FutureCore future
        cdef AccumulatorCore acc = self._accumulator
        if self._txn is not None:
            self._txn.check_send()
        v = _record_bytes(value, self, "value")
        k = _record_bytes(key, self, "key")
        size = SEND_RECORD_OVERHEAD + (PyBytes_GET_SIZE(v) if v is not None else 0) \
            + (PyBytes_GET_SIZE(k) if k is not None else 0)
        pairs = None
        if headers:
            pairs, extra = self._header_pairs(headers)
            size += extra
        if size + SEND_BATCH_OVERHEAD > self._max_request_size:
            raise _EncodeError(f"record of ~{size} bytes is larger than max_request_size "
                               f"({self._max_request_size})")
        ts = <int64_t> (<double> _now() * 1000) if timestamp is None else int(timestamp)
        snapshot, cache = self._parts_cache
        partitions = (<dict> cache).get(topic) if snapshot is self._cluster.metadata else None
        if not partitions:
            partitions = self._partitions(topic)
        if partition is not None and partition not in partitions:
            raise ValueError(f"topic {topic!r} has no partition {partition} "
                             f"(it has {len(partitions)})")
        batch = acc._append(topic, partition, k, v, ts, pairs, size, partitions, None,
                            on_delivery, &index)
        future = FutureCore.__new__(acc.future_type)
        future._batch = batch
        future._index = index
        return future
