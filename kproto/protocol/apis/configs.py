"""Configs of topics and brokers: DescribeConfigs, AlterConfigs (the whole set,
replaced) and IncrementalAlterConfigs (KIP-339: set, delete, append, subtract
one key at a time).

A resource is named by type and name (Java's ``ConfigResource``): type 2 a
topic, 4 a broker (its id as text; "" for the cluster-wide default), 8 a
broker logger, 16 a client metrics subscription, 32 a group.
"""

from ..schema import Api

__all__ = ["DESCRIBE_CONFIGS", "ALTER_CONFIGS", "INCREMENTAL_ALTER_CONFIGS"]


DESCRIBE_CONFIGS = Api(32, "DescribeConfigs", "0-4", flexible="4+", request="""
    resources                        []        0+
      resource_type                  int8      0+
      resource_name                  string    0+
      # null: every key of the resource.
      configuration_keys             [string]  0+     null
    include_synonyms                 bool      1+
    include_documentation            bool      3+
""", response="""
    throttle_time_ms                 int32     0+
    results                          []        0+
      error_code                     int16     0+
      error_message                  string    0+     null
      resource_type                  int8      0+
      resource_name                  string    0+
      configs                        []        0+
        name                         string    0+
        # null for a sensitive value (a password) and for a key without a value.
        value                        string    0+     null
        read_only                    bool      0+
        # Where the value comes from (Java's ConfigEntry.ConfigSource): 1 a topic's
        # own, 2 a broker's dynamic, 3 the cluster's dynamic default, 4 the broker's
        # static file, 5 Kafka's default, 6 a dynamic broker logger, 8 a group's.
        config_source                int8      1+     default=-1 ignorable
        is_default                   bool      0
        is_sensitive                 bool      0+
        # The values this one overrides, highest priority first.
        synonyms                     []        1+     ignorable
          name                       string    1+
          value                      string    1+     null
          source                     int8      1+
        config_type                  int8      3+     ignorable
        documentation                string    3+     null ignorable
""")

ALTER_CONFIGS = Api(33, "AlterConfigs", "0-2", flexible="2+", request="""
    # Each resource's configs replace every dynamic config it had.
    resources                        []        0+
      resource_type                  int8      0+
      resource_name                  string    0+
      configs                        []        0+
        name                         string    0+
        value                        string    0+     null
    validate_only                    bool      0+
""", response="""
    throttle_time_ms                 int32     0+
    responses                        []        0+
      error_code                     int16     0+
      error_message                  string    0+     null
      resource_type                  int8      0+
      resource_name                  string    0+
""")

INCREMENTAL_ALTER_CONFIGS = Api(44, "IncrementalAlterConfigs", "0-1", flexible="1+", request="""
    resources                        []        0+
      resource_type                  int8      0+
      resource_name                  string    0+
      configs                        []        0+
        name                         string    0+
        # 0 set, 1 delete (back to the default), 2 append to a list, 3 subtract.
        config_operation             int8      0+
        value                        string    0+     null
    validate_only                    bool      0+
""", response="""
    throttle_time_ms                 int32     0+
    responses                        []        0+
      error_code                     int16     0+
      error_message                  string    0+     null
      resource_type                  int8      0+
      resource_name                  string    0+
""")
