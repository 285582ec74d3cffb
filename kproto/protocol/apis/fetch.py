"""Reading records and offsets."""

from ..schema import Api

__all__ = ["FETCH", "LIST_OFFSETS"]


FETCH = Api(1, "Fetch", "0-18", flexible="12+", request="""
    cluster_id                       string    12+    null=12+ tag=0 default=null ignorable
    replica_id                       int32     0-14   default=-1
    replica_state                    {}        15+    tag=1
      replica_id                     int32     15+    default=-1
      replica_epoch                  int64     15+    default=-1
    max_wait_ms                      int32     0+
    min_bytes                        int32     0+
    max_bytes                        int32     3+     default=0x7fffffff ignorable
    isolation_level                  int8      4+     ignorable
    session_id                       int32     7+     ignorable
    session_epoch                    int32     7+     default=-1 ignorable
    topics                           []        0+
      topic                          string    0-12   ignorable
      topic_id                       uuid      13+    ignorable
      partitions                     []        0+
        partition                    int32     0+
        current_leader_epoch         int32     9+     default=-1 ignorable
        fetch_offset                 int64     0+
        last_fetched_epoch           int32     12+    default=-1
        log_start_offset             int64     5+     default=-1 ignorable
        partition_max_bytes          int32     0+
        replica_directory_id         uuid      17+    tag=0 ignorable
        high_watermark               int64     18+    tag=1 default=9223372036854775807 ignorable
    forgotten_topics_data            []        7+
      topic                          string    7-12   ignorable
      topic_id                       uuid      13+    ignorable
      partitions                     [int32]   7+
    rack_id                          string    11+    ignorable
""", response="""
    throttle_time_ms                 int32     1+     ignorable
    error_code                       int16     7+     ignorable
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
        diverging_epoch              {}        12+    tag=0
          epoch                      int32     12+    default=-1
          end_offset                 int64     12+    default=-1
        current_leader               {}        12+    tag=1
          leader_id                  int32     12+    default=-1
          leader_epoch               int32     12+    default=-1
        snapshot_id                  {}        12+    tag=2
          end_offset                 int64     0+     default=-1
          epoch                      int32     0+     default=-1
        aborted_transactions         []        4+     null=4+ ignorable
          producer_id                int64     4+
          first_offset               int64     4+
        preferred_read_replica       int32     11+    default=-1
        records                      records   0+     null
    node_endpoints                   []        16+    tag=0
      node_id                        int32     16+
      host                           string    16+
      port                           int32     16+
      rack                           string    16+    null=16+ default=null
""")

LIST_OFFSETS = Api(2, "ListOffsets", "0-11", flexible="6+", request="""
    replica_id                       int32     0+
    isolation_level                  int8      2+
    topics                           []        0+
      name                           string    0+
      partitions                     []        0+
        partition_index              int32     0+
        current_leader_epoch         int32     4+     default=-1 ignorable
        timestamp                    int64     0+
        max_num_offsets              int32     0      default=1
    timeout_ms                       int32     10+    ignorable
""", response="""
    throttle_time_ms                 int32     2+     ignorable
    topics                           []        0+
      name                           string    0+
      partitions                     []        0+
        partition_index              int32     0+
        error_code                   int16     0+
        old_style_offsets            [int64]   0
        timestamp                    int64     1+     default=-1
        offset                       int64     1+     default=-1
        leader_epoch                 int32     4+     default=-1
""")
