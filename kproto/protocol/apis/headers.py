"""Request and response headers, and the consumer group embedded protocol.

Request header v1 (non-flexible APIs) / v2 (flexible): the client_id keeps its
int16 length even in v2, so that any broker can read the header of any
ApiVersions request. Response header v0 / v1 (flexible); ApiVersions always
answers with v0 (KIP-511).

The consumer protocol is what the "consumer" protocol type puts in JoinGroup's
``protocols[].metadata`` and SyncGroup's ``assignment``: an int16 version then
a never-flexible body. Java writes v3 and reads newer versions as v3.

The sticky assignor's user data is what the "sticky" assignor puts in the
subscription's ``user_data``. Unlike the consumer protocol it has no version
prefix: Java writes v1 and reads a blob as v1, then as v0 (see
:mod:`kproto.groups.assignors`).
"""

from ..schema import message

__all__ = [
    "REQUEST_HEADER",
    "RESPONSE_HEADER",
    "CONSUMER_SUBSCRIPTION",
    "CONSUMER_ASSIGNMENT",
    "STICKY_ASSIGNOR_USER_DATA",
]

REQUEST_HEADER = message("RequestHeader", "0-2", "2+", """
    request_api_key                  int16     0+
    request_api_version              int16     0+
    correlation_id                   int32     0+
    # Header v0 (no client_id) is only for ControlledShutdown v0, which kproto never sends.
    client_id                        string    1+     null=1+ noflex
""")

RESPONSE_HEADER = message("ResponseHeader", "0-1", "1+", """
    correlation_id                   int32     0+
""")

CONSUMER_SUBSCRIPTION = message("ConsumerProtocolSubscription", "0-3", "none", """
    topics                           [string]  0+
    # Assignor-specific; the sticky assignor's is STICKY_ASSIGNOR_USER_DATA.
    user_data                        bytes     0+     null default=null
    # What the member owns now (KIP-429, cooperative rebalancing).
    owned_partitions                 []        1+     ignorable
      topic                          string    1+
      partitions                     [int32]   1+
    # The generation of owned_partitions (KIP-792); -1: never assigned.
    generation_id                    int32     2+     default=-1 ignorable
    # The consumer's client.rack, for rack-aware assignment (KIP-881).
    rack_id                          string    3+     null=3+ default=null ignorable
""")

CONSUMER_ASSIGNMENT = message("ConsumerProtocolAssignment", "0-3", "none", """
    assigned_partitions              []        0+
      topic                          string    0+
      partitions                     [int32]   0+
    user_data                        bytes     0+     null default=null
""")

# Kafka declares this only as the Java Schemas STICKY_ASSIGNOR_USER_DATA_V0/V1 of
# clients/src/main/java/org/apache/kafka/clients/consumer/StickyAssignor.java (no JSON
# message file); kafka-python ships the same layout as StickyAssignorUserData.json.
STICKY_ASSIGNOR_USER_DATA = message("StickyAssignorUserData", "0-1", "none", """
    # The member's last assignment, one entry per topic.
    previous_assignment              []        0+
      topic                          string    0+
      partitions                     [int32]   0+
    # The generation of that assignment; a newer claim on a partition wins.
    generation                       int32     1+     default=-1 ignorable
""")
