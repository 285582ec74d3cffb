"""No public name lost: what each public module documents (its ``__all__``).

``BEFORE`` is every module's ``__all__`` as it was before the client modules
moved into the producer/, consumer/ and groups/ packages (issue 28), each under
the module it lives in now (``kproto.errors``' generated list is checked by
tests/test_errors.py). Each name must still be documented there and importable;
``kproto.__all__`` must be exactly what it was.
"""

from __future__ import annotations

import importlib

import pytest

import kproto

BEFORE: dict[str, list[str]] = {k: v.split() for k, v in {
    "kproto": (
        "__version__ KprotoError Producer RecordMetadata Consumer TopicPartition "
        "OffsetAndTimestamp Admin OffsetAndMetadata ConsumerGroupMetadata"),
    "kproto.admin": (
        "Admin GroupListing GroupDescription MemberDescription TransactionListing "
        "TransactionDescription ProducerState"),
    "kproto.bench": "run_decode_bench",
    "kproto.cli": "main",
    "kproto.cli_args": "CliError UsageError parser secrets mask",
    "kproto.config": "resolve OPTIONS Option",
    "kproto.consumer": "Consumer TopicPartition OffsetAndTimestamp",
    "kproto.consumer.fetch_buffer": "CompletedFetch FetchBuffer Collected",
    "kproto.consumer.fetcher": (
        "FetchRequest fetch_request answer_partitions outcome watermark "
        "decode_partition list_offsets check_partitions_exist RECORDS "
        "OUT_OF_RANGE RETRY"),
    "kproto.consumer.reader": (
        "read_ranges read_ranges_result iter_ranges list_offsets ReadResult "
        "Bound bound_offset"),
    "kproto.formats": (
        "FORMATS STRATEGIES Decoded decode decode_with_bad_rows encode reader_type "
        "record_name resolve_schema subject_name"),
    "kproto.formats.avro": "AvroSchema arrow_type decode encode parse_schema unroll",
    "kproto.formats.json": "arrow_type bundle decode encode json_schema",
    "kproto.formats.protobuf": "arrow_type decode encode message_descriptor",
    "kproto.groups.assignors": (
        "ASSIGNORS DEFAULT_GENERATION Assignor MemberSubscription "
        "RangeAssignor RoundRobinAssignor StickyAssignor "
        "decode_sticky_user_data encode_sticky_user_data get_assignor "
        "java_string_key"),
    "kproto.groups.classic": "CommitFailedError GroupCoordinator RebalanceListener",
    "kproto.groups.member": "GroupMember RebalanceListener",
    "kproto.net": (
        "BrokerConnection Connection Request Response parse_address MAX_RESPONSE_BYTES "
        "SaslPlain SaslScram make_ssl_context"),
    "kproto.net.cluster": "Cluster ClusterMetadata BrokerInfo PartitionInfo TopicInfo",
    "kproto.net.security": (
        "SECURITY_PROTOCOLS SASL_MECHANISMS SaslPlain SaslScram "
        "make_ssl_context ssl_context_from_config sasl_from_config"),
    "kproto.producer": "Producer RecordMetadata BatchMetadata RecordFuture BatchFuture",
    "kproto.producer.accumulator": (
        "ProducerBatch RecordAccumulator BATCH_OVERHEAD "
        "RECORD_OVERHEAD leaves wait_done row_sizes chunks"),
    "kproto.producer.columns": "COLUMNS check_names checked_table",
    "kproto.producer.idempotence": "IdempotenceState next_sequence",
    "kproto.producer.partitioner": (
        "murmur2 partition_for_key partitions_for_keys "
        "StickyPartitioner"),
    "kproto.producer.sender": "Sender",
    "kproto.producer.transaction_manager": "TransactionManager TxnResult State",
    "kproto.producer.transaction_requests": "TxnRequests TxnResult State",
    "kproto.producer.transactions": (
        "PreparedTransaction commit_transaction abort_transaction "
        "CoordinatorLinks TRANSACTION_VERSION_2 end_txn_version"),
    "kproto.protocol": (
        "API_VERSIONS ApiKey UNKNOWN_TAGS encode decode encode_request "
        "decode_request encode_response decode_response response_header_size "
        "request_header_version response_header_version negotiate common_ranges "
        "broker_ranges pick fillable api_versions_retry encode_subscription "
        "decode_subscription encode_assignment decode_assignment get_api codec"),
    "kproto.protocol.apis": (
        "APIS REQUEST_HEADER RESPONSE_HEADER CONSUMER_SUBSCRIPTION "
        "CONSUMER_ASSIGNMENT STICKY_ASSIGNOR_USER_DATA"),
    "kproto.protocol.apis.admin": "CREATE_TOPICS DELETE_TOPICS",
    "kproto.protocol.apis.fetch": "FETCH LIST_OFFSETS",
    "kproto.protocol.apis.group": (
        "OFFSET_COMMIT OFFSET_FETCH FIND_COORDINATOR JOIN_GROUP "
        "HEARTBEAT LEAVE_GROUP SYNC_GROUP DESCRIBE_GROUPS LIST_GROUPS"),
    "kproto.protocol.apis.headers": (
        "REQUEST_HEADER RESPONSE_HEADER CONSUMER_SUBSCRIPTION "
        "CONSUMER_ASSIGNMENT STICKY_ASSIGNOR_USER_DATA"),
    "kproto.protocol.apis.metadata": "METADATA API_VERSIONS",
    "kproto.protocol.apis.produce": "PRODUCE INIT_PRODUCER_ID",
    "kproto.protocol.apis.sasl": "SASL_HANDSHAKE SASL_AUTHENTICATE",
    "kproto.protocol.apis.transactions": (
        "ADD_PARTITIONS_TO_TXN ADD_OFFSETS_TO_TXN END_TXN "
        "TXN_OFFSET_COMMIT DESCRIBE_PRODUCERS "
        "DESCRIBE_TRANSACTIONS LIST_TRANSACTIONS"),
    "kproto.protocol.keys": "ApiKey",
    "kproto.protocol.requests": "find_coordinator_fields offset_fetch_fields GROUP TRANSACTION",
    "kproto.records": (
        "decode encode encode_legacy slice_fetch decode_fetch_response "
        "RecordColumns BinaryColumn BinaryViewColumn HeaderColumn Record "
        "FetchedPartition FetchSlice COLUMNS arrow_schema compression concat "
        "buffer_pool Rows"),
    "kproto.records.batch": (
        "HEADER_SIZE RECORD_OVERHEAD TRANSACTIONAL_BIT CONTROL_BIT "
        "stamp_batch"),
    "kproto.schema_registry": (
        "MAX_ANSWER_BYTES RegisteredSchema SchemaReference "
        "SchemaRegistryClient as_client"),
    "kproto.spark": (
        "KprotoDataSource register KafkaRange SCHEMA_DDL DataLossError OffsetSpec "
        "offset_options"),
    "kproto.spark.exactly_once": (
        "ExactlyOnce TaskTransaction TransactionCommitMessage "
        "ExactlyOnceCommitError commit_all abort_all MARKER "
        "DEFAULT_TRANSACTION_TIMEOUT_MS"),
    "kproto.spark.limits": "byte_limit bytes_per_offset SAMPLE_OFFSETS",
    "kproto.structs": (
        "TopicPartition OffsetAndTimestamp OffsetAndMetadata RecordMetadata "
        "ConsumerGroupMetadata EARLIEST LATEST NO_TOPIC_ID SubscriptionState as_tp "
        "topic_id_of topic_of"),
    "kproto.testing": (
        "BrokerProbeError FaultProxy LOOPBACK MockCluster NoidaBroker "
        "SchemaRegistryServer TansuBroker find_noida find_tansu free_port "
        "probe_api_versions proxy_cluster"),
}.items()}

#: What the packages add: the names users reach them by.
ADDED: dict[str, list[str]] = {
    "kproto.producer": ["PreparedTransaction", "commit_transaction", "abort_transaction"],
    "kproto.groups": ["GroupCoordinator", "GroupMember", "RebalanceListener", "CommitFailedError",
                      "new_member"],
    "kproto.net.driver": ["Wait", "Offload", "Steps", "Driver", "SelectorDriver"],
    "kproto.aio": ["AIOAdmin", "AIOConsumer", "AIOProducer", "AIOShareConsumer",
                   "AsyncioDriver"],
    "kproto.producer.handoff": ["LoopHandoff", "for_running_loop"],
    "kproto.aio.driver": ["AsyncioDriver"],
    "kproto.consumer.fetches": ["Fetches"],
    "kproto": ["ShareConsumer", "AcknowledgeType"],
    "kproto.consumer": ["ShareConsumer", "AcknowledgeType"],
    "kproto.consumer.share": ["ShareConsumer", "AcknowledgeType", "ShareRecord",
                              "AcknowledgementCommitCallback"],
    "kproto.groups.share": ["ShareMembership"],
}


@pytest.mark.parametrize("module", sorted(set(BEFORE) | set(ADDED)))
def test_documented_names_are_still_there(module: str) -> None:
    mod = importlib.import_module(module)
    names = BEFORE.get(module, []) + ADDED.get(module, [])
    documented = set(getattr(mod, "__all__", ()))
    assert not [n for n in names if n not in documented], f"{module}.__all__ lost names"
    assert not [n for n in names if not hasattr(mod, n)], f"{module} lost names"


def test_the_top_level_names_are_exactly_as_before() -> None:
    assert kproto.__all__ == BEFORE["kproto"] + ADDED["kproto"]
    for name in kproto.__all__:
        assert getattr(kproto, name) is not None
    assert kproto.Producer is importlib.import_module("kproto.producer").Producer
    assert kproto.TopicPartition is importlib.import_module("kproto.structs").TopicPartition
