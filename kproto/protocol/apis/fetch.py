"""Reading records and offsets."""

from ..schema import Api

__all__ = ["FETCH", "LIST_OFFSETS"]


FETCH = Api(1, "Fetch", "0-18", flexible="12+", request="""
    # KRaft metadata fetches only; consumers leave it null.
    cluster_id                       string    12+    null=12+ tag=0 default=null ignorable
    # -1: a consumer, not a follower broker. From v15 a follower names itself in
    # replica_state instead (KIP-903), so consumers leave that tagged struct out.
    replica_id                       int32     0-14   default=-1
    replica_state                    {}        15+    tag=1
      replica_id                     int32     15+    default=-1
      replica_epoch                  int64     15+    default=-1
    max_wait_ms                      int32     0+
    min_bytes                        int32     0+
    max_bytes                        int32     3+     default=0x7fffffff ignorable
    # 0 read_uncommitted; 1 read_committed: only up to the last stable offset,
    # with the aborted transactions listed so the consumer can drop them.
    isolation_level                  int8      4+     ignorable
    # Incremental fetch sessions (KIP-227). Session 0 with epoch -1 is a full
    # fetch that opens no session (kproto's choice); epoch 0 would open one.
    session_id                       int32     7+     ignorable
    session_epoch                    int32     7+     default=-1 ignorable
    topics                           []        0+
      # From v13 a topic is named by its id only (KIP-516); Java falls back to
      # v12 when any topic id is unknown (all zero).
      topic                          string    0-12   ignorable
      topic_id                       uuid      13+    ignorable
      partitions                     []        0+
        partition                    int32     0+
        # Fencing (KIP-320): the leader epoch the client knows. An older one
        # gets FENCED_LEADER_EPOCH, a newer UNKNOWN_LEADER_EPOCH; -1 skips the check.
        current_leader_epoch         int32     9+     default=-1 ignorable
        fetch_offset                 int64     0+
        # Followers only (truncation detection, diverging_epoch); consumers send -1.
        last_fetched_epoch           int32     12+    default=-1
        # Followers only: their log start offset; consumers send -1.
        log_start_offset             int64     5+     default=-1 ignorable
        partition_max_bytes          int32     0+
        replica_directory_id         uuid      17+    tag=0 ignorable
        # Followers only (KIP-1166); the default (max int64) means "not supported".
        high_watermark               int64     18+    tag=1 default=9223372036854775807 ignorable
    # Partitions to drop from an incremental fetch session.
    forgotten_topics_data            []        7+
      topic                          string    7-12   ignorable
      topic_id                       uuid      13+    ignorable
      partitions                     [int32]   7+
    # The consumer's client.rack, for fetching from the closest replica (KIP-392).
    rack_id                          string    11+    ignorable
""", response="""
    throttle_time_ms                 int32     1+     ignorable
    error_code                       int16     7+     ignorable
    # 0: the fetch is not part of a session.
    session_id                       int32     7+
    responses                        []        0+
      topic                          string    0-12   ignorable
      topic_id                       uuid      13+    ignorable
      partitions                     []        0+
        partition_index              int32     0+
        error_code                   int16     0+
        high_watermark               int64     0+
        last_stable_offset           int64     4+     default=-1 ignorable
        log_start_offset             int64     5+     default=-1 ignorable
        # Tagged, so absent unless set: diverging_epoch only answers a
        # last_fetched_epoch other than -1; current_leader (KIP-951) comes with
        # NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH; snapshot_id is for KRaft.
        diverging_epoch              {}        12+    tag=0
          epoch                      int32     12+    default=-1
          end_offset                 int64     12+    default=-1
        current_leader               {}        12+    tag=1
          leader_id                  int32     12+    default=-1
          leader_epoch               int32     12+    default=-1
        snapshot_id                  {}        12+    tag=2
          end_offset                 int64     0+     default=-1
          epoch                      int32     0+     default=-1
        # Null for read_uncommitted fetches.
        aborted_transactions         []        4+     null=4+ ignorable
          producer_id                int64     4+
          first_offset               int64     4+
        # A follower to fetch from next (KIP-392); -1: keep fetching here.
        preferred_read_replica       int32     11+    default=-1
        records                      records   0+     null
    # The brokers named in current_leader (KIP-951).
    node_endpoints                   []        16+    tag=0
      node_id                        int32     16+
      host                           string    16+
      port                           int32     16+
      rack                           string    16+    null=16+ default=null
""")

LIST_OFFSETS = Api(2, "ListOffsets", "0-11", flexible="6+", request="""
    # -1 for a consumer. Kafka declares no default (so 0, broker 0): callers pass it.
    replica_id                       int32     0+
    # 1 (read_committed): "latest" is the last stable offset, not the high watermark.
    isolation_level                  int8      2+
    topics                           []        0+
      name                           string    0+
      partitions                     []        0+
        partition_index              int32     0+
        # -1: no fencing check (see Fetch).
        current_leader_epoch         int32     4+     default=-1 ignorable
        # A time in ms, or -1 latest, -2 earliest, -3 max timestamp (v7+), -4 earliest
        # local (v8+), -5 latest tiered (v9+), -6 earliest pending upload (v11+).
        timestamp                    int64     0+
        max_num_offsets              int32     0      default=1
    # For offsets read from tiered storage (KIP-1075).
    timeout_ms                       int32     10+    ignorable
""", response="""
    throttle_time_ms                 int32     2+     ignorable
    topics                           []        0+
      name                           string    0+
      partitions                     []        0+
        partition_index              int32     0+
        error_code                   int16     0+
        # v0 answers a list of offsets; v1+ one offset with its timestamp.
        old_style_offsets            [int64]   0
        timestamp                    int64     1+     default=-1
        offset                       int64     1+     default=-1
        leader_epoch                 int32     4+     default=-1
""")
