"""Topic administration."""

from ..schema import Api

__all__ = ["CREATE_TOPICS", "DELETE_TOPICS"]


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
