"""Request and response headers, and the consumer group embedded protocol.

Request header v1 (non-flexible APIs) / v2 (flexible): the client_id keeps its
int16 length even in v2, so that any broker can read the header of any
ApiVersions request. Response header v0 / v1 (flexible); ApiVersions always
answers with v0 (KIP-511).

The consumer protocol is what the "consumer" protocol type puts in JoinGroup's
``protocols[].metadata`` and SyncGroup's ``assignment``: an int16 version then
a never-flexible body. Java writes v3 and reads newer versions as v3.
"""

from ..schema import message

__all__ = ["REQUEST_HEADER", "RESPONSE_HEADER", "CONSUMER_SUBSCRIPTION", "CONSUMER_ASSIGNMENT"]

REQUEST_HEADER = message("RequestHeader", "0-2", "2+", """
    request_api_key                  int16     0+
    request_api_version              int16     0+
    correlation_id                   int32     0+
    client_id                        string    1+     null=1+ noflex
""")

RESPONSE_HEADER = message("ResponseHeader", "0-1", "1+", """
    correlation_id                   int32     0+
""")

CONSUMER_SUBSCRIPTION = message("ConsumerProtocolSubscription", "0-3", "none", """
    topics                           [string]  0+
    user_data                        bytes     0+     null default=null
    owned_partitions                 []        1+     ignorable
      topic                          string    1+
      partitions                     [int32]   1+
    generation_id                    int32     2+     default=-1 ignorable
    rack_id                          string    3+     null=3+ default=null ignorable
""")

CONSUMER_ASSIGNMENT = message("ConsumerProtocolAssignment", "0-3", "none", """
    assigned_partitions              []        0+
      topic                          string    0+
      partitions                     [int32]   0+
    user_data                        bytes     0+     null default=null
""")
