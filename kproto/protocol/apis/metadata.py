"""Cluster discovery and version negotiation."""

from ..schema import Api

__all__ = ["METADATA", "API_VERSIONS"]


METADATA = Api(3, "Metadata", "0-13", flexible="9+", request="""
    # Null (v1+): every topic; [] none (in v0, [] meant every topic).
    topics                           []        0+     null=1+
      # Look up by id with a null name (brokers answer it from v12).
      topic_id                       uuid      10+    ignorable
      name                           string    0+     null=10+
    allow_auto_topic_creation        bool      4+     default=true
    # Moved to DescribeCluster in v11.
    include_cluster_authorized_operations bool      8-10
    include_topic_authorized_operations bool      8+
""", response="""
    throttle_time_ms                 int32     3+     ignorable
    brokers                          []        0+
      node_id                        int32     0+
      host                           string    0+
      port                           int32     0+
      rack                           string    1+     null=1+ default=null ignorable
    cluster_id                       string    2+     null=2+ default=null ignorable
    # -1: no controller known.
    controller_id                    int32     1+     default=-1 ignorable
    topics                           []        0+
      error_code                     int16     0+
      name                           string    0+     null=12+
      topic_id                       uuid      10+    ignorable
      is_internal                    bool      1+     ignorable
      partitions                     []        0+
        error_code                   int16     0+
        partition_index              int32     0+
        # -1: no leader (LEADER_NOT_AVAILABLE).
        leader_id                    int32     0+
        # Send it back as Fetch/ListOffsets current_leader_epoch (KIP-320).
        leader_epoch                 int32     7+     default=-1 ignorable
        replica_nodes                [int32]   0+
        isr_nodes                    [int32]   0+
        offline_replicas             [int32]   5+     ignorable
      # A bit field of ACL operations; INT32_MIN: not requested.
      topic_authorized_operations    int32     8+     default=-2147483648
    cluster_authorized_operations    int32     8-10   default=-2147483648
    # A whole-request error, e.g. REBOOTSTRAP_REQUIRED (KIP-1102).
    error_code                       int16     13+    ignorable
""")

API_VERSIONS = Api(18, "ApiVersions", "0-4", flexible="3+", request="""
    # For the broker's metrics and logs (KIP-511).
    client_software_name             string    3+     ignorable
    client_software_version          string    3+     ignorable
""", response="""
    # UNSUPPORTED_VERSION: the body is v0 and api_keys holds ApiVersions' own
    # range, so the client can retry with a version the broker speaks.
    error_code                       int16     0+
    api_keys                         []        0+
      api_key                        int16     0+
      min_version                    int16     0+
      max_version                    int16     0+
    throttle_time_ms                 int32     1+     ignorable
    # Feature flags (KIP-584), tagged: brokers send them, clients may ignore them.
    supported_features               []        3+     tag=0 ignorable
      name                           string    3+
      min_version                    int16     3+
      max_version                    int16     3+
    finalized_features_epoch         int64     3+     tag=1 default=-1 ignorable
    finalized_features               []        3+     tag=2 ignorable
      name                           string    3+
      max_version_level              int16     3+
      min_version_level              int16     3+
    zk_migration_ready               bool      3+     tag=3 ignorable
""")
