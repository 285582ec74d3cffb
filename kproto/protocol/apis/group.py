"""Consumer groups: coordinators, membership, offsets; the classic and the KIP-848 protocol."""

from ..schema import Api

__all__ = [
    "OFFSET_COMMIT",
    "OFFSET_FETCH",
    "FIND_COORDINATOR",
    "JOIN_GROUP",
    "HEARTBEAT",
    "LEAVE_GROUP",
    "SYNC_GROUP",
    "DESCRIBE_GROUPS",
    "LIST_GROUPS",
    "CONSUMER_GROUP_HEARTBEAT",
    "CONSUMER_GROUP_DESCRIBE",
]


OFFSET_COMMIT = Api(8, "OffsetCommit", "0-10", flexible="8+", request="""
    group_id                         string    0+
    # The classic group's generation (or a KIP-848 member epoch). -1 with an
    # empty member_id commits from outside the group (manual assignment).
    generation_id_or_member_epoch    int32     1+     default=-1 ignorable
    member_id                        string    1+     ignorable
    group_instance_id                string    7+     null=7+ default=null
    # -1: the broker's offsets.retention.minutes (from v5 always that).
    retention_time_ms                int64     2-4    default=-1 ignorable
    topics                           []        0+
      # From v10 a topic is named by its id only (KIP-848).
      name                           string    0-9    ignorable
      topic_id                       uuid      10+    ignorable
      partitions                     []        0+
        partition_index              int32     0+
        committed_offset             int64     0+
        # The leader epoch of the last consumed record, or -1 (KIP-320).
        committed_leader_epoch       int32     6+     default=-1 ignorable
        # -1: the broker's clock.
        commit_timestamp             int64     1      default=-1
        committed_metadata           string    0+     null
""", response="""
    throttle_time_ms                 int32     3+     ignorable
    topics                           []        0+
      name                           string    0-9    ignorable
      topic_id                       uuid      10+    ignorable
      partitions                     []        0+
        partition_index              int32     0+
        error_code                   int16     0+
""")

OFFSET_FETCH = Api(9, "OffsetFetch", "0-10", flexible="6+", request="""
    group_id                         string    0-7
    # Null (v2+): every topic the group has committed offsets for.
    topics                           []        0-7    null=2-7
      name                           string    0-7
      partition_indexes              [int32]   0-7
    # v8+ asks for several groups at once (KIP-709).
    groups                           []        8+
      group_id                       string    8+
      # Only for KIP-848 (consumer protocol) members; classic clients send null / -1.
      member_id                      string    9+     null=9+ default=null ignorable
      member_epoch                   int32     9+     default=-1 ignorable
      topics                         []        8+     null=8+
        name                         string    8-9    ignorable
        topic_id                     uuid      10+    ignorable
        partition_indexes            [int32]   8+
    # Answer UNSTABLE_OFFSET_COMMIT (retriable) while a transactional offset
    # commit to the partition is pending, rather than the older offset (KIP-447).
    require_stable                   bool      7+
""", response="""
    throttle_time_ms                 int32     3+     ignorable
    topics                           []        0-7
      name                           string    0-7
      partitions                     []        0-7
        partition_index              int32     0-7
        # -1: nothing committed.
        committed_offset             int64     0-7
        committed_leader_epoch       int32     5-7    default=-1 ignorable
        metadata                     string    0-7    null=0-7
        error_code                   int16     0-7
    # The group-level error (v2+); v0-1 carry it in each partition's error_code.
    error_code                       int16     2-7    ignorable
    groups                           []        8+
      group_id                       string    8+
      topics                         []        8+
        name                         string    8-9    ignorable
        topic_id                     uuid      10+    ignorable
        partitions                   []        8+
          partition_index            int32     8+
          committed_offset           int64     8+
          committed_leader_epoch     int32     8+     default=-1 ignorable
          metadata                   string    8+     null=8+
          error_code                 int16     8+
      error_code                     int16     8+
""")

FIND_COORDINATOR = Api(10, "FindCoordinator", "0-6", flexible="3+", request="""
    key                              string    0-3
    # 0 group, 1 transaction, 2 share group.
    key_type                         int8      1+
    # v4+ looks up several keys at once (KIP-699) and answers in coordinators.
    coordinator_keys                 [string]  4+
""", response="""
    throttle_time_ms                 int32     1+     ignorable
    error_code                       int16     0-3
    error_message                    string    1-3    null=1-3 ignorable
    node_id                          int32     0-3
    host                             string    0-3
    port                             int32     0-3
    coordinators                     []        4+
      key                            string    4+
      node_id                        int32     4+
      host                           string    4+
      port                           int32     4+
      error_code                     int16     4+
      error_message                  string    4+     null=4+ ignorable
""")

JOIN_GROUP = Api(11, "JoinGroup", "0-9", flexible="6+", request="""
    group_id                         string    0+
    session_timeout_ms               int32     0+
    # v0 has none: the session timeout is used.
    rebalance_timeout_ms             int32     1+     default=-1 ignorable
    # "" on the first join; from v4 the broker then answers MEMBER_ID_REQUIRED
    # with the id to join again with (KIP-394).
    member_id                        string    0+
    # Static membership (KIP-345): group.instance.id.
    group_instance_id                string    5+     null=5+ default=null
    # "consumer" for the consumer protocol: metadata is a ConsumerProtocolSubscription.
    protocol_type                    string    0+
    # One per assignor, in order of preference.
    protocols                        []        0+
      name                           string    0+
      metadata                       bytes     0+
    reason                           string    8+     null=8+ default=null ignorable
""", response="""
    throttle_time_ms                 int32     2+     ignorable
    error_code                       int16     0+
    generation_id                    int32     0+     default=-1
    protocol_type                    string    7+     null=7+ default=null ignorable
    protocol_name                    string    0+     null=7+
    leader                           string    0+
    # A static leader rejoining (KIP-814): it must not compute a new assignment.
    skip_assignment                  bool      9+
    member_id                        string    0+
    # Only the leader gets the members (with their subscriptions); others get [].
    members                          []        0+
      member_id                      string    0+
      group_instance_id              string    5+     null=5+ default=null ignorable
      metadata                       bytes     0+
""")

HEARTBEAT = Api(12, "Heartbeat", "0-4", flexible="4+", request="""
    group_id                         string    0+
    generation_id                    int32     0+
    member_id                        string    0+
    group_instance_id                string    3+     null=3+ default=null
""", response="""
    throttle_time_ms                 int32     1+     ignorable
    error_code                       int16     0+
""")

LEAVE_GROUP = Api(13, "LeaveGroup", "0-5", flexible="4+", request="""
    group_id                         string    0+
    member_id                        string    0-2
    members                          []        3+
      member_id                      string    3+
      group_instance_id              string    3+     null=3+ default=null
      reason                         string    5+     null=5+ default=null ignorable
""", response="""
    throttle_time_ms                 int32     1+     ignorable
    error_code                       int16     0+
    members                          []        3+
      member_id                      string    3+
      group_instance_id              string    3+     null=3+
      error_code                     int16     3+
""")

SYNC_GROUP = Api(14, "SyncGroup", "0-5", flexible="4+", request="""
    group_id                         string    0+
    generation_id                    int32     0+
    member_id                        string    0+
    group_instance_id                string    3+     null=3+ default=null
    protocol_type                    string    5+     null=5+ default=null ignorable
    protocol_name                    string    5+     null=5+ default=null ignorable
    # Only the leader sends assignments (ConsumerProtocolAssignment bytes); others send [].
    assignments                      []        0+
      member_id                      string    0+
      assignment                     bytes     0+
""", response="""
    throttle_time_ms                 int32     1+     ignorable
    error_code                       int16     0+
    protocol_type                    string    5+     null=5+ default=null ignorable
    protocol_name                    string    5+     null=5+ default=null ignorable
    assignment                       bytes     0+
""")

DESCRIBE_GROUPS = Api(15, "DescribeGroups", "0-6", flexible="5+", request="""
    groups                           [string]  0+
    include_authorized_operations    bool      3+
""", response="""
    throttle_time_ms                 int32     1+     ignorable
    groups                           []        0+
      error_code                     int16     0+
      error_message                  string    6+     null=6+ default=null
      group_id                       string    0+
      group_state                    string    0+
      protocol_type                  string    0+
      protocol_data                  string    0+
      members                        []        0+
        member_id                    string    0+
        group_instance_id            string    4+     null=4+ default=null ignorable
        client_id                    string    0+
        client_host                  string    0+
        member_metadata              bytes     0+
        member_assignment            bytes     0+
      # A bit field of ACL operations; INT32_MIN: not requested.
      authorized_operations          int32     3+     default=-2147483648
""")

LIST_GROUPS = Api(16, "ListGroups", "0-5", flexible="3+", request="""
    # Empty filters list every group.
    states_filter                    [string]  4+
    types_filter                     [string]  5+
""", response="""
    throttle_time_ms                 int32     1+     ignorable
    error_code                       int16     0+
    groups                           []        0+
      group_id                       string    0+
      protocol_type                  string    0+
      group_state                    string    4+     ignorable
      group_type                     string    5+     ignorable
""")

# KIP-848: the consumer group protocol. The broker computes the assignment; a
# member heartbeats its state and gets its partitions back by topic id.
CONSUMER_GROUP_HEARTBEAT = Api(68, "ConsumerGroupHeartbeat", "0-1", flexible="0+", request="""
    group_id                         string    0+
    # v1+: generated by the member (a UUID, KIP-1082) and kept for the process's life;
    # v0: "" on the first heartbeat, then the coordinator's.
    member_id                        string    0+
    # 0 joins, -1 leaves, -2 leaves as a static member that will come back.
    member_epoch                     int32     0+
    # Fields defaulting to null / -1 mean "unchanged since the last heartbeat".
    instance_id                      string    0+     null default=null
    rack_id                          string    0+     null default=null
    rebalance_timeout_ms             int32     0+     default=-1
    subscribed_topic_names           [string]  0+     null default=null
    # A broker-side RE2J regular expression (KIP-848), instead of names.
    subscribed_topic_regex           string    1+     null=1+ default=null
    server_assignor                  string    0+     null default=null
    # The partitions the member owns (after revoking what it was told to).
    topic_partitions                 []        0+     null default=null
      topic_id                       uuid      0+
      partitions                     [int32]   0+
""", response="""
    throttle_time_ms                 int32     0+
    error_code                       int16     0+
    error_message                    string    0+     null default=null
    member_id                        string    0+     null default=null
    member_epoch                     int32     0+
    heartbeat_interval_ms            int32     0+
    # Null: no change. Otherwise the member's whole target assignment.
    assignment                       {}        0+     null default=null
      topic_partitions               []        0+
        topic_id                     uuid      0+
        partitions                   [int32]   0+
""")

CONSUMER_GROUP_DESCRIBE = Api(69, "ConsumerGroupDescribe", "0-1", flexible="0+", request="""
    group_ids                        [string]  0+
    include_authorized_operations    bool      0+
""", response="""
    throttle_time_ms                 int32     0+
    groups                           []        0+
      error_code                     int16     0+
      error_message                  string    0+     null default=null
      group_id                       string    0+
      group_state                    string    0+
      group_epoch                    int32     0+
      assignment_epoch               int32     0+
      assignor_name                  string    0+
      members                        []        0+
        member_id                    string    0+
        instance_id                  string    0+     null default=null
        rack_id                      string    0+     null default=null
        member_epoch                 int32     0+
        client_id                    string    0+
        client_host                  string    0+
        subscribed_topic_names       [string]  0+
        subscribed_topic_regex       string    0+     null default=null
        assignment                   {}        0+
          topic_partitions           []        0+
            topic_id                 uuid      0+
            topic_name               string    0+
            partitions               [int32]   0+
        target_assignment            {}        0+
          topic_partitions           []        0+
            topic_id                 uuid      0+
            topic_name               string    0+
            partitions               [int32]   0+
        # -1 unknown, 0 classic member (of an upgraded group), 1 consumer member (KIP-1099).
        member_type                  int8      1+     default=-1 ignorable
      authorized_operations          int32     0+     default=-2147483648
""")
