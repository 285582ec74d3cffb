"""Produce and transactional producer ids."""

from ..schema import Api

__all__ = ["PRODUCE", "INIT_PRODUCER_ID"]


PRODUCE = Api(0, "Produce", "0-13", flexible="9+", request="""
    # Null unless the batches belong to a transaction.
    transactional_id                 string    3+     null=3+ default=null
    # 0: no response at all; 1: the leader has written; -1: all in-sync replicas.
    acks                             int16     0+
    timeout_ms                       int32     0+
    topic_data                       []        0+
      # From v13 a topic is named by its id only (KIP-516).
      name                           string    0-12   ignorable
      topic_id                       uuid      13+    ignorable
      partition_data                 []        0+
        index                        int32     0+
        records                      records   0+     null
""", response="""
    responses                        []        0+
      name                           string    0-12   ignorable
      topic_id                       uuid      13+    ignorable
      partition_responses            []        0+
        index                        int32     0+
        error_code                   int16     0+
        base_offset                  int64     0+
        # -1 unless the topic uses LogAppendTime.
        log_append_time_ms           int64     2+     default=-1 ignorable
        log_start_offset             int64     5+     default=-1 ignorable
        record_errors                []        8+     ignorable
          batch_index                int32     8+
          batch_index_error_message  string    8+     null=8+ default=null
        error_message                string    8+     null=8+ default=null ignorable
        # Tagged (KIP-951): the new leader, with NOT_LEADER_OR_FOLLOWER, so the
        # client can move without a Metadata round trip; node_endpoints has its address.
        current_leader               {}        10+    tag=0
          leader_id                  int32     10+    default=-1
          leader_epoch               int32     10+    default=-1
    throttle_time_ms                 int32     1+     ignorable
    node_endpoints                   []        10+    tag=0
      node_id                        int32     10+
      host                           string    10+
      port                           int32     10+
      rack                           string    10+    null=10+ default=null
""")

INIT_PRODUCER_ID = Api(22, "InitProducerId", "0-6", flexible="2+", request="""
    # Null: an idempotent, non-transactional producer.
    transactional_id                 string    0+     null
    transaction_timeout_ms           int32     0+
    # -1/-1 asks for a new producer id; the current pair bumps its epoch (KIP-360).
    producer_id                      int64     3+     default=-1
    producer_epoch                   int16     3+     default=-1
    # Two-phase commit (KIP-939); Kafka's "Enable2Pc" in snake case.
    enable2_pc                       bool      6+
    keep_prepared_txn                bool      6+
""", response="""
    throttle_time_ms                 int32     0+     ignorable
    error_code                       int16     0+
    producer_id                      int64     0+     default=-1
    producer_epoch                   int16     0+
    ongoing_txn_producer_id          int64     6+     default=-1
    ongoing_txn_producer_epoch       int16     6+     default=-1
""")
