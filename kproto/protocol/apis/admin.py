"""Topic, record, group and cluster administration: CreateTopics, DeleteTopics,
CreatePartitions, DeleteRecords (to the partitions' leaders), DeleteGroups and
OffsetDelete (to the group's coordinator), DescribeCluster, DescribeLogDirs
(to each broker) and ListPartitionReassignments (to the controller)."""

from ..schema import Api

__all__ = ["CREATE_TOPICS", "DELETE_TOPICS", "CREATE_PARTITIONS", "DELETE_RECORDS",
           "DELETE_GROUPS", "OFFSET_DELETE", "DESCRIBE_CLUSTER", "DESCRIBE_LOG_DIRS",
           "LIST_PARTITION_REASSIGNMENTS"]


CREATE_TOPICS = Api(19, "CreateTopics", "0-7", flexible="5+", request="""
    topics                           []        0+
      name                           string    0+
      # -1 (v4+): the broker's default, or the counts given by assignments.
      num_partitions                 int32     0+
      replication_factor             int16     0+
      assignments                    []        0+
        partition_index              int32     0+
        broker_ids                   [int32]   0+
      configs                        []        0+
        name                         string    0+
        value                        string    0+     null
    timeout_ms                       int32     0+     default=60000
    validate_only                    bool      1+
""", response="""
    throttle_time_ms                 int32     2+     ignorable
    topics                           []        0+
      name                           string    0+
      topic_id                       uuid      7+     ignorable
      error_code                     int16     0+
      error_message                  string    1+     null ignorable
      # Why configs could not be returned (KIP-525), tagged: absent when 0.
      topic_config_error_code        int16     5+     tag=0 ignorable
      num_partitions                 int32     5+     default=-1 ignorable
      replication_factor             int16     5+     default=-1 ignorable
      configs                        []        5+     null=5+ ignorable
        name                         string    5+
        value                        string    5+     null=5+
        read_only                    bool      5+
        config_source                int8      5+     default=-1 ignorable
        is_sensitive                 bool      5+
""")

DELETE_TOPICS = Api(20, "DeleteTopics", "0-6", flexible="4+", request="""
    # v6+ names each topic by name (topic_id zero) or by id (name null).
    topics                           []        6+
      name                           string    6+     null=6+ default=null
      topic_id                       uuid      6+
    topic_names                      [string]  0-5    ignorable
    timeout_ms                       int32     0+
""", response="""
    throttle_time_ms                 int32     1+     ignorable
    responses                        []        0+
      name                           string    0+     null=6+
      topic_id                       uuid      6+     ignorable
      error_code                     int16     0+
      error_message                  string    5+     null=5+ default=null ignorable
""")

CREATE_PARTITIONS = Api(37, "CreatePartitions", "0-3", flexible="2+", request="""
    topics                           []        0+
      name                           string    0+
      # The new total number of partitions.
      count                          int32     0+
      # null: the broker places the new partitions' replicas.
      assignments                    []        0+     null
        broker_ids                   [int32]   0+
    timeout_ms                       int32     0+
    validate_only                    bool      0+
""", response="""
    throttle_time_ms                 int32     0+
    results                          []        0+
      name                           string    0+
      error_code                     int16     0+
      error_message                  string    0+     null default=null
""")

DELETE_RECORDS = Api(21, "DeleteRecords", "0-2", flexible="2+", request="""
    topics                           []        0+
      name                           string    0+
      partitions                     []        0+
        partition_index              int32     0+
        # Delete every record before this offset (-1: the high watermark).
        offset                       int64     0+
    timeout_ms                       int32     0+
""", response="""
    throttle_time_ms                 int32     0+
    topics                           []        0+
      name                           string    0+
      partitions                     []        0+
        partition_index              int32     0+
        # The partition's log start offset after the deletion.
        low_watermark                int64     0+
        error_code                   int16     0+
""")

DELETE_GROUPS = Api(42, "DeleteGroups", "0-2", flexible="2+", request="""
    groups_names                     [string]  0+
""", response="""
    throttle_time_ms                 int32     0+
    results                          []        0+
      group_id                       string    0+
      error_code                     int16     0+
""")

OFFSET_DELETE = Api(47, "OffsetDelete", "0", flexible="none", request="""
    group_id                         string    0+
    topics                           []        0+
      name                           string    0+
      partitions                     []        0+
        partition_index              int32     0+
""", response="""
    error_code                       int16     0+
    throttle_time_ms                 int32     0+     ignorable
    topics                           []        0+
      name                           string    0+
      partitions                     []        0+
        partition_index              int32     0+
        error_code                   int16     0+
""")

DESCRIBE_CLUSTER = Api(60, "DescribeCluster", "0-2", flexible="0+", request="""
    include_cluster_authorized_operations bool 0+
    # 1 brokers, 2 controllers (KIP-919).
    endpoint_type                    int8      1+     default=1
    include_fenced_brokers           bool      2+
""", response="""
    throttle_time_ms                 int32     0+
    error_code                       int16     0+
    error_message                    string    0+     null default=null
    endpoint_type                    int8      1+     default=1
    cluster_id                       string    0+
    controller_id                    int32     0+     default=-1
    brokers                          []        0+
      broker_id                      int32     0+
      host                           string    0+
      port                           int32     0+
      rack                           string    0+     null default=null
      is_fenced                      bool      2+
    cluster_authorized_operations    int32     0+     default=-2147483648
""")

DESCRIBE_LOG_DIRS = Api(35, "DescribeLogDirs", "0-5", flexible="2+", request="""
    # null: every partition the broker has.
    topics                           []        0+     null
      topic                          string    0+
      partitions                     [int32]   0+
""", response="""
    throttle_time_ms                 int32     0+
    error_code                       int16     3+     ignorable
    results                          []        0+
      error_code                     int16     0+
      log_dir                        string    0+
      topics                         []        0+
        name                         string    0+
        partitions                   []        0+
          partition_index            int32     0+
          partition_size             int64     0+
          offset_lag                 int64     0+
          is_future_key              bool      0+
      total_bytes                    int64     4+     default=-1 ignorable
      usable_bytes                   int64     4+     default=-1 ignorable
      is_cordoned                    bool      5+     ignorable
""")

LIST_PARTITION_REASSIGNMENTS = Api(46, "ListPartitionReassignments", "0", flexible="0+",
                                   request="""
    timeout_ms                       int32     0+     default=60000
    # null: every reassignment in progress.
    topics                           []        0+     null default=null
      name                           string    0+
      partition_indexes              [int32]   0+
""", response="""
    throttle_time_ms                 int32     0+
    error_code                       int16     0+
    error_message                    string    0+     null
    topics                           []        0+
      name                           string    0+
      partitions                     []        0+
        partition_index              int32     0+
        replicas                     [int32]   0+
        adding_replicas              [int32]   0+
        removing_replicas            [int32]   0+
""")
