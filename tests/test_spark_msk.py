"""The Spark sink and source with AWS MSK IAM, configured only as Spark jobs on
Databricks configure MSK IAM today (``kafka.sasl.mechanism=AWS_MSK_IAM``, the
shaded ``IAMLoginModule`` JAAS line, ``kafka.sasl.client.callback.handler.class``),
on a real local Spark.

There is no MSK here: a real TLS terminator -> the in-test gateway checking the
AWS_MSK_IAM payload (or OAUTHBEARER token) as MSK does (tests/msk_support.py) ->
a real Tansu advertising the terminator. The executors find their credentials
and region in their environment (``spark.executorEnv.*`` here, an instance or
container role on a real cluster), as Java's library does: nothing secret is in
the options or in what is pickled to them.
"""

from __future__ import annotations

import os
import pickle
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from .msk_support import IamAccount, MskIamChecker

pytest.importorskip("botocore", reason="the aws extra (pip install 'kproto[aws]') is missing")
pytest.importorskip("aws_msk_iam_sasl_signer",
                    reason="the aws extra (pip install 'kproto[aws]') is missing")
pytestmark = pytest.mark.broker

KEY = "AKIAKPROTOSPARK00001"
SECRET = "kProto/Spark+Secret=Example0123456789abcd"
TOKEN = "IQoJb3JpZ2luX2VjEKPROTO/Spark+Session=="
ARN = "arn:aws:iam::123456789012:role/spark-etl"
REGION = "eu-west-1"
_IAM = "shadedmskiam.software.amazon.msk.auth.iam."


@pytest.fixture(scope="module")
def checker() -> MskIamChecker:
    return MskIamChecker(REGION, {KEY: IamAccount(SECRET, ARN, TOKEN)})


@pytest.fixture(scope="module")
def chain(checker: MskIamChecker, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[dict[str, Any]]:
    """TLS terminator -> MSK-checking gateway -> Tansu advertising the terminator."""
    import ssl

    trustme = pytest.importorskip("trustme")
    from kproto.testing import TansuBroker

    from .oauth_support import ReauthGateway
    from .test_security import TlsProxy

    ca = trustme.CA()
    ca_file = tmp_path_factory.mktemp("msk") / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1", "localhost").configure_cert(ctx)
    gateway = ReauthGateway(("127.0.0.1", 1), validator=checker.oauthbearer,
                            mechanisms={"AWS_MSK_IAM": checker.stepper})
    front = TlsProxy(ctx, ("127.0.0.1", gateway.port))
    tansu = TansuBroker(advertised_port=front.port)
    try:
        tansu.start()
    except RuntimeError as exc:
        front.stop()
        gateway.stop()
        pytest.fail(f"could not start the Tansu broker: {exc}", pytrace=False)
    gateway.upstream = (tansu.host, tansu.port)
    yield {"bootstrap": f"127.0.0.1:{front.port}", "ca": str(ca_file), "gateway": gateway}
    front.stop()
    gateway.stop()
    tansu.stop()


#: The environment an executor on AWS would have (a role's credentials, its region).
ENV = {"AWS_ACCESS_KEY_ID": KEY, "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_SESSION_TOKEN": TOKEN,
       "AWS_REGION": REGION, "AWS_EC2_METADATA_DISABLED": "true",
       "AWS_CONFIG_FILE": "/nonexistent/kproto-aws-config",
       "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/kproto-aws-credentials"}


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import kproto.spark

    with pytest.MonkeyPatch.context() as env:
        for name in [n for n in os.environ if n.startswith("AWS_")]:
            env.delenv(name)
        for name, value in ENV.items():
            env.setenv(name, value)              # the driver's own Python process
        builder = (SparkSession.builder.master("local[2]").appName("kproto-msk-tests")
                   .config("spark.ui.enabled", "false")
                   .config("spark.sql.shuffle.partitions", "2"))
        for name, value in ENV.items():          # the Python workers Spark starts
            builder = builder.config(f"spark.executorEnv.{name}", value)
        session = builder.getOrCreate()
        if session.conf.get("spark.executorEnv.AWS_ACCESS_KEY_ID", None) != KEY:
            session.stop()                       # another module's session: start ours
            session = builder.getOrCreate()
        session.sparkContext.setLogLevel("ERROR")
        kproto.spark.register(session)
        yield session
        session.stop()


def options(chain: dict[str, Any], mechanism: str = "AWS_MSK_IAM") -> dict[str, str]:
    """What a Spark job on Databricks has for MSK IAM (+ the test CA: MSK's certificates
    chain to public CAs, so real jobs need no trust store)."""
    opts = {"kafka.bootstrap.servers": chain["bootstrap"],
            "kafka.security.protocol": "SASL_SSL",
            "kafka.ssl.truststore.location": chain["ca"],
            "kafka.ssl.truststore.type": "PEM"}
    if mechanism == "AWS_MSK_IAM":
        opts.update({"kafka.sasl.mechanism": "AWS_MSK_IAM",
                     "kafka.sasl.jaas.config": _IAM + "IAMLoginModule required;",
                     "kafka.sasl.client.callback.handler.class":
                         _IAM + "IAMClientCallbackHandler"})
    else:
        opts.update({"kafka.sasl.mechanism": "OAUTHBEARER",
                     "kafka.sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer."
                                               "OAuthBearerLoginModule required;",
                     "kafka.sasl.login.callback.handler.class":
                         _IAM + "IAMOAuthBearerLoginCallbackHandler"})
    return opts


def test_spark_writes_and_reads_with_msk_iam(spark: Any, chain: dict[str, Any],
                                             checker: MskIamChecker) -> None:
    topic = "spark-msk-iam"
    rows = [(f"k{i}", f"value {i}") for i in range(300)]
    df = spark.createDataFrame(rows, "key string, value string")
    df.write.format("kproto").mode("append").options(**options(chain)) \
        .option("topic", topic).save()
    for mechanism in ("AWS_MSK_IAM", "OAUTHBEARER"):
        got = (spark.read.format("kproto").options(**options(chain, mechanism))
               .option("subscribe", topic).load()
               .selectExpr("CAST(key AS STRING) k", "CAST(value AS STRING) v").collect())
        assert sorted((r.k, r.v) for r in got) == sorted(rows), mechanism
    sessions = chain["gateway"].sessions
    assert {s.mechanism for s in sessions if s.logins} == {"AWS_MSK_IAM", "OAUTHBEARER"}
    assert all(s.principal == ARN for s in sessions if s.logins)


def test_a_credential_problem_fails_the_query_clearly(spark: Any,
                                                      chain: dict[str, Any]) -> None:
    opts = options(chain)
    opts["kafka.sasl.jaas.config"] = (_IAM + 'IAMLoginModule required awsProfileName="nosuch" '
                                      "awsAddDefaultProviders=false;")
    with pytest.raises(Exception) as info:
        spark.read.format("kproto").options(**opts).option("subscribe", "spark-msk-iam") \
            .load().count()
    text = str(info.value)
    assert "no usable AWS credentials" in text and "'nosuch'" in text
    assert SECRET not in text and TOKEN not in text


def test_what_executors_get_holds_no_credentials(chain: dict[str, Any], spark: Any) -> None:
    """The reader, writer and ranges are pickled to the executors with the options
    (mechanism, JAAS line, handler class): no credentials, no token; each executor
    signs with its own."""
    from pyspark.sql.types import BinaryType, StructField, StructType

    from kproto.spark.sink import KprotoWriter
    from kproto.spark.source import KprotoBatchReader

    for mechanism in ("AWS_MSK_IAM", "OAUTHBEARER"):
        opts = {**options(chain, mechanism), "subscribe": "spark-msk-iam", "topic": "t"}
        reader = KprotoBatchReader(opts, None)
        ranges = reader.partitions()
        writer = KprotoWriter(opts, StructType([StructField("value", BinaryType())]))
        assert ranges
        for obj in (reader, writer, *ranges):
            blob = pickle.dumps(obj)
            for secret in (SECRET, TOKEN, KEY, "X-Amz-Signature", "x-amz-signature"):
                assert secret.encode() not in blob, (mechanism, secret)
            assert SECRET not in repr(obj)
