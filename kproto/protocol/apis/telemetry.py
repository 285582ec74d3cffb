"""Client metrics (KIP-714): the broker's subscription, and pushing metrics to it."""

from ..schema import Api

__all__ = ["GET_TELEMETRY_SUBSCRIPTIONS", "PUSH_TELEMETRY"]


GET_TELEMETRY_SUBSCRIPTIONS = Api(71, "GetTelemetrySubscriptions", "0", flexible="0+", request="""
    # All zero on the first request: the broker assigns one.
    client_instance_id               uuid      0+
""", response="""
    throttle_time_ms                 int32     0+
    error_code                       int16     0+
    client_instance_id               uuid      0+
    subscription_id                  int32     0+
    accepted_compression_types       [int8]    0+
    push_interval_ms                 int32     0+
    telemetry_max_bytes              int32     0+
    # Whether counters are pushed as deltas (true) or cumulative values.
    delta_temporality                bool      0+
    # Metric name prefixes; [] none, [""] all.
    requested_metrics                [string]  0+
""")

PUSH_TELEMETRY = Api(72, "PushTelemetry", "0", flexible="0+", request="""
    client_instance_id               uuid      0+
    subscription_id                  int32     0+
    terminating                      bool      0+
    compression_type                 int8      0+
    # OpenTelemetry MetricsData v1 protobuf, compressed with compression_type.
    metrics                          bytes     0+
""", response="""
    throttle_time_ms                 int32     0+
    error_code                       int16     0+
""")
