"""Transactions: the producer's coordinator requests, and their admin views.

A transactional producer finds its transaction coordinator (FindCoordinator
with key type 1), gets a producer id and epoch (InitProducerId, in produce.py),
names each partition it writes to (AddPartitionsToTxn) and each group whose
offsets it commits (AddOffsetsToTxn, then TxnOffsetCommit to the group's
coordinator), and ends the transaction (EndTxn). DescribeProducers,
DescribeTransactions and ListTransactions are the admin views (KIP-664).
"""

from ..schema import Api

__all__ = [
    "ADD_PARTITIONS_TO_TXN",
    "ADD_OFFSETS_TO_TXN",
    "END_TXN",
    "TXN_OFFSET_COMMIT",
    "DESCRIBE_PRODUCERS",
    "DESCRIBE_TRANSACTIONS",
    "LIST_TRANSACTIONS",
]


ADD_PARTITIONS_TO_TXN = Api(24, "AddPartitionsToTxn", "0-5", flexible="3+", request="""
    # v4+ batches several transactions (sent by brokers verifying a client's
    # writes, KIP-890); a client sends one, with verify_only false.
    transactions                     []        4+
      transactional_id               string    4+
      producer_id                    int64     4+
      producer_epoch                 int16     4+
      # Only check that the partitions are in the transaction; add nothing.
      verify_only                    bool      4+
      topics                         []        4+
        name                         string    0+
        partitions                   [int32]   0+
    # v0-3: the one transaction, at the top level.
    v3_and_below_transactional_id    string    0-3
    v3_and_below_producer_id         int64     0-3
    v3_and_below_producer_epoch      int16     0-3
    v3_and_below_topics              []        0-3
      name                           string    0+
      partitions                     [int32]   0+
""", response="""
    throttle_time_ms                 int32     0+
    # v4+: an error for the whole request (each transaction has its own too).
    error_code                       int16     4+     ignorable
    results_by_transaction           []        4+
      transactional_id               string    4+
      topic_results                  []        4+
        name                         string    0+
        results_by_partition         []        0+
          partition_index            int32     0+
          partition_error_code       int16     0+
    results_by_topic_v3_and_below    []        0-3
      name                           string    0+
      results_by_partition           []        0+
        partition_index              int32     0+
        # OPERATION_NOT_ATTEMPTED: another partition of the request failed.
        partition_error_code         int16     0+
""")

ADD_OFFSETS_TO_TXN = Api(25, "AddOffsetsToTxn", "0-4", flexible="3+", request="""
    transactional_id                 string    0+
    producer_id                      int64     0+
    producer_epoch                   int16     0+
    # The group whose offsets TxnOffsetCommit will commit in this transaction.
    group_id                         string    0+
""", response="""
    throttle_time_ms                 int32     0+
    error_code                       int16     0+
""")

END_TXN = Api(26, "EndTxn", "0-5", flexible="3+", request="""
    transactional_id                 string    0+
    producer_id                      int64     0+
    producer_epoch                   int16     0+
    # True: commit; false: abort.
    committed                        bool      0+
""", response="""
    throttle_time_ms                 int32     0+
    error_code                       int16     0+
    # v5 (transaction version 2, KIP-890): every EndTxn bumps the epoch; the
    # producer goes on with these.
    producer_id                      int64     5+     default=-1 ignorable
    producer_epoch                   int16     5+     default=-1 ignorable
""")

TXN_OFFSET_COMMIT = Api(28, "TxnOffsetCommit", "0-5", flexible="3+", request="""
    transactional_id                 string    0+
    group_id                         string    0+
    producer_id                      int64     0+
    producer_epoch                   int16     0+
    # v3+ (KIP-447): the consumer's group generation and member, so the group
    # coordinator fences a commit from a member that lost its partitions; -1
    # and "" for a plain group id (no check).
    generation_id                    int32     3+     default=-1
    member_id                        string    3+
    group_instance_id                string    3+     null=3+ default=null
    topics                           []        0+
      name                           string    0+
      partitions                     []        0+
        partition_index              int32     0+
        committed_offset             int64     0+
        committed_leader_epoch       int32     2+     default=-1 ignorable
        # Stored with the offset; OffsetFetch returns it.
        committed_metadata           string    0+     null
""", response="""
    throttle_time_ms                 int32     0+
    topics                           []        0+
      name                           string    0+
      partitions                     []        0+
        partition_index              int32     0+
        error_code                   int16     0+
""")

DESCRIBE_PRODUCERS = Api(61, "DescribeProducers", "0", flexible="0+", request="""
    topics                           []        0+
      name                           string    0+
      partition_indexes              [int32]   0+
""", response="""
    throttle_time_ms                 int32     0+
    topics                           []        0+
      name                           string    0+
      partitions                     []        0+
        partition_index              int32     0+
        error_code                   int16     0+
        error_message                string    0+     null default=null
        # The producers with state on the partition (its leader's view).
        active_producers             []        0+
          producer_id                int64     0+
          producer_epoch             int32     0+
          last_sequence              int32     0+     default=-1
          last_timestamp             int64     0+     default=-1
          coordinator_epoch          int32     0+
          # The first offset of the producer's open transaction, or -1.
          current_txn_start_offset   int64     0+     default=-1
""")

DESCRIBE_TRANSACTIONS = Api(65, "DescribeTransactions", "0", flexible="0+", request="""
    # Sent to each transactional id's coordinator.
    transactional_ids                [string]  0+
""", response="""
    throttle_time_ms                 int32     0+
    transaction_states               []        0+
      error_code                     int16     0+
      transactional_id               string    0+
      # Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, ...
      transaction_state              string    0+
      transaction_timeout_ms         int32     0+
      # -1 when no transaction is open.
      transaction_start_time_ms      int64     0+
      producer_id                    int64     0+
      producer_epoch                 int16     0+
      topics                         []        0+
        topic                        string    0+
        partitions                   [int32]   0+
""")

LIST_TRANSACTIONS = Api(66, "ListTransactions", "0-2", flexible="0+", request="""
    # Empty filters match everything.
    state_filters                    [string]  0+
    producer_id_filters              [int64]   0+
    # v1+: only transactions open longer than this many ms (-1: any).
    duration_filter                  int64     1+     default=-1
    # v2+: a regular expression the transactional id must match.
    transactional_id_pattern         string    2+     null=2+ default=null
""", response="""
    throttle_time_ms                 int32     0+
    error_code                       int16     0+
    # The state filters this broker does not know.
    unknown_state_filters            [string]  0+
    transaction_states               []        0+
      transactional_id               string    0+
      producer_id                    int64     0+
      transaction_state              string    0+
""")
