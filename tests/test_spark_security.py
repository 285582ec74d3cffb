"""The Spark source and sink through TLS (client certificate required) + SASL,
configured only with Spark-style options: ``kafka.security.protocol``, a JKS
trust store, a key store and ``kafka.sasl.jaas.config``, on a real local Spark.

The chain (tests/tls_support.py): a real TLS terminator -> the in-test SASL
gateway (NOT a broker; SCRAM-SHA-512) -> a real Tansu advertising the
terminator, so every request of the driver and of the executors goes through
TLS and SASL.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import Any

import pytest

from .spark_support import local_spark
from .tls_support import JAAS, KS_PASS, SECRETS, TS_PASS, Pki, SecureChain, java_settings

pytestmark = pytest.mark.broker


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    from .tls_support import need_keytool

    need_keytool()
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def chain(pki: Pki) -> Iterator[SecureChain]:
    front = SecureChain(pki)
    yield front
    front.stop()


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    yield from local_spark("kproto-tls-tests")


def spark_options(chain: SecureChain, pki: Pki) -> dict[str, str]:
    """What a Spark Kafka job already has: kafka.-prefixed Java options only."""
    return {"kafka.bootstrap.servers": chain.bootstrap,
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.jaas.config": JAAS,
            "kafka.ssl.truststore.location": pki.trust_jks,
            "kafka.ssl.truststore.password": TS_PASS,
            "kafka.ssl.keystore.location": pki.key_p12,
            "kafka.ssl.keystore.type": "PKCS12",
            "kafka.ssl.keystore.password": KS_PASS}


def test_spark_writes_and_reads_through_tls_and_sasl(spark: Any, chain: SecureChain,
                                                     pki: Pki) -> None:
    from kproto import Admin

    topic = "spark-tls-sasl"
    with Admin({"bootstrap.servers": chain.bootstrap, **java_settings(pki)}) as admin:
        admin.create_topics({topic: 2}, exist_ok=True)
    opts = spark_options(chain, pki)
    rows = [(f"k{i}", f"value {i}") for i in range(500)]
    df = spark.createDataFrame(rows, "key string, value string")
    df.write.format("kproto").mode("append").options(**opts).option("topic", topic).save()
    got = (spark.read.format("kproto").options(**opts).option("subscribe", topic)
           .load().selectExpr("CAST(key AS STRING) k", "CAST(value AS STRING) v").collect())
    assert sorted((r.k, r.v) for r in got) == sorted(rows)


def test_a_wrong_jaas_password_fails_the_query_without_showing_it(spark: Any,
                                                                 chain: SecureChain,
                                                                 pki: Pki) -> None:
    opts = spark_options(chain, pki)
    wrong = "Wrong-" + SECRETS[-1]
    opts["kafka.sasl.jaas.config"] = JAAS.replace(SECRETS[-1], wrong)
    with pytest.raises(Exception) as info:
        spark.read.format("kproto").options(**opts).option("subscribe", "spark-tls-sasl") \
            .load().count()
    text = str(info.value)
    assert "Authentication failed" in text
    assert wrong not in text and not any(s in text for s in SECRETS)


def test_what_executors_get_holds_no_key_material(chain: SecureChain, pki: Pki) -> None:
    """The reader and each KafkaRange are pickled to the executors with the client
    settings: the store passwords and the JAAS line travel as the options gave
    them (the executors connect with them, as Spark's own Kafka source ships its
    kafka.* parameters), but no key, store bytes, SSL context or decrypted
    material; and no repr shows a password."""
    from kproto import Admin, Producer
    from kproto.spark.sink import KprotoWriter
    from kproto.spark.source import KafkaRange, KprotoBatchReader

    settings = {"bootstrap.servers": chain.bootstrap, **java_settings(pki)}
    with Admin(settings) as admin:
        admin.create_topics({"spark-tls-pickles": 1}, exist_ok=True)
    with Producer(settings) as producer:
        producer.send("spark-tls-pickles", b"x").result(30)
    opts = {**spark_options(chain, pki), "subscribe": "spark-tls-pickles", "topic": "t"}
    reader = KprotoBatchReader(opts, None)
    ranges = reader.partitions()
    from pyspark.sql.types import BinaryType, StructField, StructType

    writer = KprotoWriter(opts, StructType([StructField("value", BinaryType())]))
    assert ranges and all(isinstance(r, KafkaRange) for r in ranges)
    for obj in (reader, writer, *ranges):
        blob = pickle.dumps(obj)
        assert b"PRIVATE KEY" not in blob and b"SSLContext" not in blob
        assert b"ClientIdentity" not in blob
        with open(pki.key_p12, "rb") as f:
            assert f.read()[-64:] not in blob
    for r in ranges:
        assert not any(s in repr(r) for s in SECRETS)
        assert dict(r.settings)["ssl_keystore_location"] == pki.key_p12


def test_secrets_named_by_config_providers_are_read_by_each_executor_not_shipped(
        spark: Any, chain: SecureChain, pki: Pki, tmp_path: Any) -> None:
    """With Kafka's config providers (KIP-297) the options name where the secrets are
    (a properties file every executor can read: a mounted secret), the job reads and
    writes through TLS + SASL, and nothing pickled for the executors holds a secret."""
    from pyspark.sql.types import BinaryType, StructField, StructType

    from kproto.spark.sink import KprotoWriter
    from kproto.spark.source import KprotoBatchReader

    from .tls_support import PASSWORD

    secrets = tmp_path / "kafka-secrets.properties"
    secrets.write_text(f"password={PASSWORD}\ntruststore={TS_PASS}\nkeystore={KS_PASS}\n")
    secrets.chmod(0o600)
    ref = f"${{file:{secrets}:%s}}"
    opts = {**spark_options(chain, pki),
            "kafka.config.providers": "file",
            "kafka.config.providers.file.class":
                "org.apache.kafka.common.config.provider.FileConfigProvider",
            "kafka.sasl.jaas.config": JAAS.replace(PASSWORD, ref % "password"),
            "kafka.ssl.truststore.password": ref % "truststore",
            "kafka.ssl.keystore.password": ref % "keystore"}
    assert not any(s in str(opts) for s in SECRETS)
    topic = "spark-config-providers"
    rows = [(f"k{i}", f"v{i}") for i in range(50)]
    spark.createDataFrame(rows, "key string, value string").write.format("kproto") \
        .mode("append").options(**opts).option("topic", topic).save()
    got = (spark.read.format("kproto").options(**opts).option("subscribe", topic).load()
           .selectExpr("CAST(key AS STRING) k", "CAST(value AS STRING) v").collect())
    assert sorted((r.k, r.v) for r in got) == sorted(rows)
    reader = KprotoBatchReader({**opts, "subscribe": topic}, None)
    writer = KprotoWriter({**opts, "topic": topic}, StructType([StructField("value",
                                                                            BinaryType())]))
    for obj in (reader, writer, *reader.partitions()):
        blob = pickle.dumps(obj)
        assert not any(s.encode() in blob for s in SECRETS), type(obj).__name__
        assert b"${file:" in blob
