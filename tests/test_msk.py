"""AWS MSK IAM (kproto.net.msk) against real parts.

There is no MSK here. The parts: AWS's own signer (``aws-msk-iam-sasl-signer-python``,
signing locally with static credentials from environment variables: no network),
botocore, and tests/msk_support.py's checker, which validates what arrives as an
MSK IAM listener does (the presigned request decoded, its action, scope, time and
session token, and the SigV4 signature recomputed from the secret key by an
implementation written from AWS's documentation and by botocore's signer, which
must agree), inside the in-test gateway in front of a real Tansu
(tests/oauth_support.py); STS is a local fake answering AssumeRole.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import pickle
import sys
import time
import traceback
import urllib.parse
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kproto.errors import ConfigError, SaslAuthenticationFailedError
from kproto.net import BrokerConnection
from kproto.net.msk import MskIamTokenProvider, SaslAwsMskIam, region_from_host
from kproto.net.oauth import SaslOauthBearer
from kproto.net.security import sasl_from_config
from kproto.protocol import ApiKey

from .msk_support import FakeSts, IamAccount, MskIamChecker

pytest.importorskip("botocore", reason="the aws extra (pip install 'kproto[aws]') is missing")
pytest.importorskip("aws_msk_iam_sasl_signer",
                    reason="the aws extra (pip install 'kproto[aws]') is missing")

KEY = "AKIAKPROTOTEST000001"
SECRET = "kProto/Secret+Key=Example0123456789abcdef"      # looked for in errors, logs, pickles
TOKEN = "IQoJb3JpZ2luX2VjEKPROTO/Session+Token=="
ARN = "arn:aws:iam::123456789012:user/kproto-etl"
REGION = "eu-west-1"
MSK = "b-1.kproto.abc123.c2.kafka.eu-west-1.amazonaws.com"
_IAM = "software.amazon.msk.auth.iam."
JAVA_IAM = {"security.protocol": "SASL_SSL", "sasl.mechanism": "AWS_MSK_IAM",
            "sasl.jaas.config": _IAM + "IAMLoginModule required;",
            "sasl.client.callback.handler.class": _IAM + "IAMClientCallbackHandler"}
JAVA_OAUTH = {"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
              "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer."
                                  "OAuthBearerLoginModule required;",
              "sasl.login.callback.handler.class": _IAM + "IAMOAuthBearerLoginCallbackHandler",
              "sasl.client.callback.handler.class": _IAM + "IAMOAuthBearerLoginCallbackHandler"}


@pytest.fixture()
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Any:  # noqa: ANN401
    """An environment with no AWS settings: files in tmp_path, no instance metadata."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    return tmp_path


@pytest.fixture()
def creds(aws_env: Any, monkeypatch: pytest.MonkeyPatch) -> MskIamChecker:  # noqa: ANN401
    """Static temporary credentials in the environment, and IAM's side of them."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_SESSION_TOKEN", TOKEN)
    return MskIamChecker(REGION, {KEY: IamAccount(SECRET, ARN, TOKEN)}, hosts=(MSK,))


def _exchange(step: Callable[[bytes], tuple[str, Any]]) -> Callable[[bytes], bytes]:
    """A broker's SaslAuthenticate around a gateway stepper (no network)."""
    def exchange(data: bytes) -> bytes:
        kind, detail = step(data)
        if kind == "error":
            raise SaslAuthenticationFailedError(f"SASL AWS_MSK_IAM authentication failed: "
                                                f"{detail}")
        return bytes(detail[2])
    return exchange


def _url(token: str) -> urllib.parse.SplitResult:
    return urllib.parse.urlsplit(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
                                 .decode())


def _no_secret(exc: BaseException | None, logs: str, *secrets: str) -> None:
    seen = [logs]
    while exc is not None:
        seen += [str(exc), repr(exc), "".join(traceback.format_exception(exc)), repr(vars(exc))]
        exc = exc.__cause__ or exc.__context__
    for secret in secrets:
        assert not any(secret in text for text in seen), secret


# --------------------------------------------------------------------------- regions


@pytest.mark.parametrize("host, region", [
    (MSK, "eu-west-1"),
    ("b-2-public.kproto.abc123.c2.kafka.us-east-1.amazonaws.com", "us-east-1"),
    ("boot-abcd1234.c1.kafka-serverless.ap-southeast-2.amazonaws.com", "ap-southeast-2"),
    ("b-1.x.y.c3.kafka.cn-north-1.amazonaws.com.cn", "cn-north-1"),
    ("B-1.X.KAFKA.US-GOV-WEST-1.AMAZONAWS.COM.", "us-gov-west-1"),
    ("kafka.il-central-1.amazonaws.com", "il-central-1"),
    ("kafka.eu-west-1.amazonaws.com.evil.example", None),      # look-alikes
    ("evilkafka.eu-west-1.amazonaws.com", None),
    ("b-1.kafka.not-a-region.amazonaws.com", None),
    ("b-1.kafka.eu-west-1.amazonaws.co", None),
    ("kafka.mycorp.internal", None), ("127.0.0.1", None), ("::1", None), ("localhost", None),
])
def test_region_from_host(host: str, region: str | None) -> None:
    assert region_from_host(host) == region


# --------------------------------------------------------------------------- tokens


def test_oauthbearer_token_is_the_signers_and_verifies(creds: MskIamChecker) -> None:
    mech = sasl_from_config({"bootstrap.servers": f"{MSK}:9098", **JAVA_OAUTH})
    assert isinstance(mech, SaslOauthBearer) and isinstance(mech.provider, MskIamTokenProvider)
    token = mech.provider.token()
    assert creds.oauthbearer(token.value) == {"sub": ARN, "exp": token.expires_at}
    url = _url(token.value)
    query = dict(urllib.parse.parse_qsl(url.query))
    assert url.netloc == "kafka.eu-west-1.amazonaws.com"          # region from the host
    assert query["X-Amz-Security-Token"] == TOKEN and query["X-Amz-Expires"] == "900"
    assert query["User-Agent"].startswith("aws-msk-iam-sasl-signer-python/")
    assert token.issued_at is not None and token.expires_at == token.issued_at + 900
    assert abs(token.issued_at - time.time()) < 5
    assert mech.provider.token() is token and mech.provider.fetched == 1     # kept
    for text in (repr(mech), repr(token), str(mech.provider)):
        assert SECRET not in text and TOKEN not in text and token.value not in text


def test_one_token_per_client_made_again_after_ten_minutes(creds: MskIamChecker) -> None:
    offset = [0.0]
    provider = MskIamTokenProvider(REGION, clock=lambda: time.time() + offset[0])
    first = provider.token()
    offset[0] = 590                     # the buffer: 300 s before the 900 s token ends
    assert provider.token() is first
    offset[0] = 610
    provider.token()                    # (a refresh may run on a thread of its own)
    deadline = time.monotonic() + 10
    while provider.fetched < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    second = provider.token()
    assert second is not first and provider.fetched == 2
    assert creds.oauthbearer(second.value)["sub"] == ARN


def test_aws_msk_iam_payload_is_javas(creds: MskIamChecker) -> None:
    mech = sasl_from_config({"bootstrap.servers": f"{MSK}:9098", **JAVA_IAM})
    assert isinstance(mech, SaslAwsMskIam)
    bound = mech.for_host(MSK)
    sent: list[bytes] = []
    step = creds.stepper()
    bound.authenticate(_exchange(lambda data: (sent.append(data), step(data))[1]))
    payload = json.loads(sent[0])
    # the 10 keys of AWS4SignedPayloadGenerator (+ the session token), Java's test's checks
    assert set(payload) == {"version", "host", "user-agent", "action", "x-amz-algorithm",
                            "x-amz-credential", "x-amz-date", "x-amz-expires",
                            "x-amz-signedheaders", "x-amz-signature", "x-amz-security-token"}
    assert payload["version"] == "2020_10_22" and payload["host"] == MSK
    assert payload["action"] == "kafka-cluster:Connect" and payload["x-amz-signedheaders"] == "host"
    assert payload["x-amz-credential"].split("/")[2:] == [REGION, "kafka-cluster", "aws4_request"]
    assert bound.request_id and creds.accepted == [ARN]
    assert mech.host is None and mech.credentials is bound.credentials     # one cache


@settings(max_examples=60, deadline=None, database=None, derandomize=True)
@given(key=st.from_regex(r"(AKIA|ASIA)[A-Z0-9]{16}", fullmatch=True),
       secret=st.text(st.sampled_from("abcXYZ0189+/="), min_size=1, max_size=60),
       token=st.none() | st.text(st.sampled_from("aZ09+/=%&?#é "), min_size=1, max_size=80),
       region=st.sampled_from(["us-east-1", "eu-west-1", "ap-southeast-2", "cn-north-1",
                               "us-gov-west-1", "il-central-1"]),
       host=st.sampled_from([MSK, "127.0.0.1", "broker.example", "::1"]))
def test_signatures_agree_with_the_spec_and_botocore(key: str, secret: str, token: str | None,
                                                     region: str, host: str) -> None:
    """Differential: what kproto (AWS_MSK_IAM, botocore) and AWS's signer (OAUTHBEARER)
    send verifies against SigV4 from the spec and botocore's, which agree; a changed
    signature, secret, region or host does not."""
    frozen = SimpleNamespace(access_key=key, secret_key=secret, token=token)
    source = SimpleNamespace(credentials=lambda: frozen, describe=lambda: "test", source="test")
    checker = MskIamChecker(region, {key: IamAccount(secret, ARN, token)}, hosts=(host,))
    mech = SaslAwsMskIam(source, region=region, host=host)       # type: ignore[arg-type]
    payload = json.loads(mech.payload(host, region, frozen))
    assert checker.stepper()(json.dumps(payload).encode())[0] == "done"
    provider = MskIamTokenProvider(region, source)                # type: ignore[arg-type]
    assert checker.oauthbearer(provider.token().value)["sub"] == ARN
    wrong = {**payload, "x-amz-signature": payload["x-amz-signature"][::-1]}
    assert checker.stepper()(json.dumps(wrong).encode())[0] == "error"
    other = MskIamChecker(region, {key: IamAccount(secret + "x", ARN, token)}, hosts=(host,))
    assert other.stepper()(json.dumps(payload).encode())[0] == "error"
    moved = MskIamChecker("us-west-2", checker.accounts, hosts=(host,))
    assert moved.stepper()(json.dumps(payload).encode())[0] == "error"
    assert "SignatureDoesNotMatch" in other.refusals[0] and "scope" in moved.refusals[0]


def test_region_sources_and_their_order(creds: MskIamChecker, monkeypatch: pytest.MonkeyPatch,
                                        caplog: pytest.LogCaptureFixture) -> None:
    def token_host(**cfg: Any) -> str:  # noqa: ANN401
        mech = sasl_from_config({**JAVA_OAUTH, **cfg})
        return _url(mech.provider.token().value).netloc   # type: ignore[union-attr]

    # the option wins over the host name, which wins over the environment
    monkeypatch.setenv("AWS_REGION", "ap-south-1")
    assert token_host(**{"bootstrap.servers": f"{MSK}:9098", "sasl.aws.region": "us-east-2"}) \
        == "kafka.us-east-2.amazonaws.com"
    assert token_host(**{"bootstrap.servers": f"{MSK}:9098"}) == "kafka.eu-west-1.amazonaws.com"
    assert token_host(**{"bootstrap.servers": "127.0.0.1:9098"}) == \
        "kafka.ap-south-1.amazonaws.com"
    monkeypatch.delenv("AWS_REGION")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "sa-east-1")
    assert token_host(**{"bootstrap.servers": "kafka.mycorp.internal:9098"}) == \
        "kafka.sa-east-1.amazonaws.com"
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    with pytest.raises(ConfigError, match="needs the AWS region.*sasl.aws.region"):
        sasl_from_config({"bootstrap.servers": "127.0.0.1:9098", **JAVA_OAUTH})
    with pytest.raises(ConfigError, match="eu-west-1, us-east-1: set sasl.aws.region"):
        sasl_from_config({**JAVA_OAUTH, "bootstrap.servers":
                          f"{MSK}:9098,b-2.x.y.kafka.us-east-1.amazonaws.com:9098"})
    with pytest.raises(ConfigError, match="not an AWS region name"):
        sasl_from_config({**JAVA_IAM, "sasl.aws.region": "us-east-1.evil/x"})
    # AWS_MSK_IAM: each broker's own region; the option wins (a warning when they differ)
    mech = sasl_from_config({"bootstrap.servers": "127.0.0.1:9098", **JAVA_IAM})
    assert isinstance(mech, SaslAwsMskIam)
    assert mech.region_for(MSK) == REGION
    with pytest.raises(ConfigError, match="region of the broker '127.0.0.1'.*sasl.aws.region"):
        mech.for_host("127.0.0.1").authenticate(_exchange(creds.stepper()))
    pinned = sasl_from_config({**JAVA_IAM, "sasl.aws.region": "us-east-1"})
    with pytest.raises(SaslAuthenticationFailedError, match="Access denied.*region us-east-1"):
        pinned.for_host(MSK).authenticate(_exchange(creds.stepper()))    # type: ignore[union-attr]
    assert "scope" in creds.refusals[-1] and "is in eu-west-1" in caplog.text


def test_the_profiles_region_and_credentials(aws_env: Any) -> None:  # noqa: ANN401
    (aws_env / "config").write_text("[profile etl]\nregion = ca-central-1\n")
    (aws_env / "credentials").write_text(f"[etl]\naws_access_key_id = {KEY}\n"
                                         f"aws_secret_access_key = {SECRET}\n")
    checker = MskIamChecker("ca-central-1", {KEY: IamAccount(SECRET, ARN)})
    mech = sasl_from_config({**JAVA_OAUTH, "bootstrap.servers": "127.0.0.1:9098",
                             "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer."
                             'OAuthBearerLoginModule required awsProfileName="etl" '
                             'awsStsRegion="eu-west-1";'})     # (Java's debug STS region)
    assert checker.oauthbearer(mech.provider.token().value)["sub"] == ARN  # type: ignore


# --------------------------------------------------------------------------- mistakes


def test_missing_credentials_say_what_is_missing(aws_env: Any,  # noqa: ANN401
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    oauth = sasl_from_config({**JAVA_OAUTH, "sasl.aws.region": REGION})
    with pytest.raises(SaslAuthenticationFailedError, match="no usable AWS credentials.*"
                       "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"):
        oauth.provider.token()                                   # type: ignore[union-attr]
    mech = sasl_from_config({**JAVA_IAM, "sasl.aws.region": REGION}).for_host(MSK)  # type: ignore
    with pytest.raises(SaslAuthenticationFailedError, match="no usable AWS credentials"):
        mech.authenticate(_exchange(MskIamChecker(REGION).stepper()))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY)                  # the secret forgotten
    with pytest.raises(SaslAuthenticationFailedError, match="missing: AWS_SECRET_ACCESS_KEY"):
        sasl_from_config({**JAVA_IAM, "sasl.aws.region": REGION}).for_host(MSK).authenticate(
            _exchange(MskIamChecker(REGION).stepper()))           # type: ignore[union-attr]
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    jaas = _IAM + 'IAMLoginModule required awsProfileName="nosuch" awsAddDefaultProviders=false;'
    strict = sasl_from_config({**JAVA_IAM, "sasl.aws.region": REGION, "sasl.jaas.config": jaas})
    with pytest.raises(SaslAuthenticationFailedError, match="profile 'nosuch'.*ProfileNotFound"):
        strict.for_host(MSK).authenticate(_exchange(MskIamChecker(REGION).stepper()))  # type: ignore
    # Java's fallback to the default chain (the environment's keys), with a warning
    loose = sasl_from_config({**JAVA_IAM, "sasl.aws.region": REGION,
                              "sasl.jaas.config": jaas.replace("false", "true")})
    checker = MskIamChecker(REGION, {KEY: IamAccount(SECRET, ARN)}, hosts=(MSK,))
    loose.for_host(MSK).authenticate(_exchange(checker.stepper()))   # type: ignore[union-attr]
    assert checker.accepted == [ARN] and "'nosuch'" in caplog.text and "default chain" in \
        caplog.text


def test_without_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "botocore" or m.startswith("botocore.")] + \
            ["aws_msk_iam_sasl_signer"]:
        monkeypatch.setitem(sys.modules, name, None)
    for cfg in (JAVA_IAM, JAVA_OAUTH):
        with pytest.raises(ConfigError, match=r"pip install 'kproto\[aws\]'"):
            sasl_from_config({**cfg, "sasl.aws.region": REGION})


@pytest.mark.parametrize("cfg, words", [
    ({**JAVA_IAM, "sasl.jaas.config": _IAM + 'IAMLoginModule required awsRegion="x";'},
     "unknown IAMLoginModule option 'awsRegion'"),
    ({**JAVA_IAM, "sasl.jaas.config": _IAM + 'IAMLoginModule required awsMskRegionProvider='
                                            '"com.acme.Regions";'}, "give the region as"),
    ({**JAVA_IAM, "sasl.mechanism": "OAUTHBEARER"}, "does not go with sasl_mechanism OAUTHBEARER"),
    ({**JAVA_IAM, "sasl.client.callback.handler.class": "com.acme.Handler"}, "Java class"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER", "oauth_cb": print,
      "sasl.jaas.config": JAVA_OAUTH["sasl.jaas.config"][:-1] + ' awsProfileName="etl";'},
     "sasl_aws_profile_name, sasl_aws_region: AWS MSK IAM settings"),
    ({**JAVA_IAM, "security.protocol": "SASL_PLAINTEXT"}, "signed request .* in clear"),
    ({**JAVA_IAM, "sasl.jaas.config": _IAM + 'IAMLoginModule required awsMaxRetries="many";'},
     "awsMaxRetries must be a whole number"),
    ({**JAVA_IAM, "sasl.jaas.config": _IAM + 'IAMLoginModule required awsRoleSessionName="p";'},
     "need awsRoleArn"),
    ({**JAVA_IAM, "sasl.jaas.config": _IAM + 'IAMLoginModule required awsRoleArn="r" '
                                            'awsRoleAccessKeyId="AKIA";'}, "go together"),
    ({**JAVA_IAM, "sasl.login.callback.handler.class": _IAM + "IAMOAuthBearerLoginCallbackHandler"},
     "no part in AWS_MSK_IAM"),
    ({**JAVA_OAUTH, "sasl.oauthbearer.token.endpoint.url": "https://idp/token"},
     "one token source"),
])
def test_config_mistakes(cfg: dict[str, Any], words: str, creds: MskIamChecker) -> None:
    cfg = {"sasl.aws.region": REGION, **cfg}
    with pytest.raises(ConfigError, match=words) as info:
        sasl_from_config(cfg)
    assert SECRET not in str(info.value)


def test_databricks_shaded_names(creds: MskIamChecker) -> None:
    mech = sasl_from_config({**JAVA_IAM, "sasl.aws.region": REGION,
                             "sasl.jaas.config": "shadedmskiam." + JAVA_IAM["sasl.jaas.config"],
                             "sasl.client.callback.handler.class":
                                 "shadedmskiam." + _IAM + "IAMClientCallbackHandler"})
    mech.for_host(MSK).authenticate(_exchange(creds.stepper()))   # type: ignore[union-attr]
    assert creds.accepted == [ARN]


# --------------------------------------------------------------------------- secrets


def test_secrets_never_in_reprs_pickles_or_logs(creds: MskIamChecker,
                                                caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)            # botocore's signing logs too
    mech = sasl_from_config({**JAVA_IAM, "sasl.aws.region": REGION})
    bound = mech.for_host(MSK)                                     # type: ignore[union-attr]
    bound.authenticate(_exchange(creds.stepper()))
    oauth = sasl_from_config({**JAVA_OAUTH, "sasl.aws.region": REGION})
    token = oauth.provider.token()                                 # type: ignore[union-attr]
    blobs = [pickle.dumps(m) for m in (mech, bound, oauth)]
    for text in [repr(mech), repr(bound), repr(oauth), repr(bound.credentials), caplog.text,
                 *map(repr, blobs)]:
        assert SECRET not in text and TOKEN not in text and token.value not in text
    assert "Calculating signature" not in caplog.text          # botocore's, while kproto signs
    again = pickle.loads(blobs[1])
    assert again.credentials._creds is None                        # loaded again where it lands
    again.authenticate(_exchange(creds.stepper()))
    assert creds.accepted == [ARN, ARN]


def test_what_an_attacker_found(creds: MskIamChecker, monkeypatch: pytest.MonkeyPatch) -> None:
    # a secret key that is not valid text (a lone surrogate, as os.environ holds undecodable
    # bytes): the UnicodeEncodeError's repr would hold the whole key
    bad = SECRET + "\udc80"
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", bad)
    for cfg in (JAVA_IAM, JAVA_OAUTH):
        mech = sasl_from_config({**cfg, "sasl.aws.region": REGION})
        with pytest.raises(SaslAuthenticationFailedError) as info:
            if isinstance(mech, SaslAwsMskIam):
                mech.for_host(MSK).authenticate(_exchange(creds.stepper()))
            else:
                mech.provider.token()                              # type: ignore[union-attr]
        assert info.value.__cause__ is None and info.value.__context__ is None
        _no_secret(info.value, "", SECRET, TOKEN)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    # an expired session token: refused, and the error says what the broker checks
    creds.accounts[KEY].expires_at = time.time() - 60
    mech = sasl_from_config({**JAVA_IAM, "sasl.aws.region": REGION})
    with pytest.raises(SaslAuthenticationFailedError, match="session token has not expired"):
        mech.for_host(MSK).authenticate(_exchange(creds.stepper()))   # type: ignore[union-attr]
    assert creds.refusals[-1].startswith("Refused: ExpiredToken")
    # a broker that echoes the signature (or anything secret) in its error: cut out
    creds.accounts[KEY].expires_at = None

    def echo(data: bytes) -> bytes:
        raise SaslAuthenticationFailedError(f"refused {data.decode()}")

    with pytest.raises(SaslAuthenticationFailedError) as info:
        mech.for_host(MSK).authenticate(echo)                     # type: ignore[union-attr]
    assert '"x-amz-signature":"***"' in str(info.value)
    assert '"x-amz-security-token":"***"' in str(info.value)
    # a broker host that no URL can hold
    with pytest.raises((ConfigError, SaslAuthenticationFailedError), match="cannot sign"):
        mech.for_host("b-1]x").authenticate(echo)                 # type: ignore[union-attr]


def test_expired_temporary_credentials(creds: MskIamChecker, monkeypatch: pytest.MonkeyPatch
                                      ) -> None:
    # from the environment, with AWS_CREDENTIAL_EXPIRATION past: refused before any login
    monkeypatch.setenv("AWS_CREDENTIAL_EXPIRATION", "2020-01-01T00:00:00Z")
    mech = sasl_from_config({**JAVA_IAM, "sasl.aws.region": REGION}).for_host(MSK)  # type: ignore
    with pytest.raises(SaslAuthenticationFailedError, match="still expired") as info:
        mech.authenticate(_exchange(creds.stepper()))
    assert not creds.accepted and info.value.__context__ is None
    monkeypatch.delenv("AWS_CREDENTIAL_EXPIRATION")
    # an assumed role near its end, and STS refusing to renew it
    sts = FakeSts(creds, lifetime=120)          # within botocore's 10-minute refresh window
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", sts.url)
    try:
        jaas = (_IAM + 'IAMLoginModule required awsRoleArn="arn:aws:iam::123456789012:role/r" '
                "awsAddDefaultProviders=false;")
        mech = sasl_from_config({**JAVA_IAM, "sasl.aws.region": REGION,
                                 "sasl.jaas.config": jaas}).for_host(MSK)  # type: ignore
        mech.authenticate(_exchange(creds.stepper()))
        sts.refuse = True
        with pytest.raises(SaslAuthenticationFailedError, match="role arn:aws:iam::123456789012"
                           ":role/r are at or near their end.*AccessDenied") as info:
            mech.authenticate(_exchange(creds.stepper()))
        _no_secret(info.value, "", *(a.secret for a in creds.accounts.values()))
        assert mech.credentials._creds is None            # the next login starts over
    finally:
        sts.stop()


def test_an_msk_answer_that_is_not_msks(creds: MskIamChecker) -> None:
    mech = sasl_from_config({**JAVA_IAM, "sasl.aws.region": REGION}).for_host(MSK)  # type: ignore
    for answer in (b"", b"{}", b'{"version": "1999", "request-id": "r"}', b"[" * 100000):
        with pytest.raises(SaslAuthenticationFailedError, match="not MSK's"):
            mech.authenticate(lambda data, a=answer: a)


# --------------------------------------------------------------------------- a broker


@pytest.fixture(scope="module")
def checker() -> MskIamChecker:
    return MskIamChecker(REGION, {KEY: IamAccount(SECRET, ARN, TOKEN)})


@pytest.fixture(scope="module")
def gateway(checker: MskIamChecker) -> Iterator[Any]:
    """IN-TEST gateway (tests/oauth_support.py) checking as MSK, in front of Tansu."""
    from .oauth_support import ReauthGateway, in_front_of_tansu

    gw = ReauthGateway(("127.0.0.1", 1), validator=checker.oauthbearer,
                       mechanisms={"AWS_MSK_IAM": checker.stepper})
    with in_front_of_tansu(gw):
        yield gw


def _java(gateway: Any, base: dict[str, Any], **more: Any) -> dict[str, Any]:  # noqa: ANN401
    """A Java client's MSK settings, pointed at the gateway (plaintext, so the flag)."""
    return {**base, "bootstrap.servers": gateway.address, "security.protocol": "SASL_PLAINTEXT",
            "sasl_allow_plaintext_plain": True, "sasl.aws.region": REGION, **more}


@pytest.mark.broker
@pytest.mark.parametrize("base", [JAVA_IAM, JAVA_OAUTH], ids=["AWS_MSK_IAM", "OAUTHBEARER"])
def test_producer_consumer_admin_end_to_end(gateway: Any, checker: MskIamChecker,  # noqa: ANN401
                                            creds: MskIamChecker, base: dict[str, Any]) -> None:
    from kproto import Admin, Consumer, Producer

    topic = f"msk-{base['sasl.mechanism'].lower()}-{time.monotonic_ns()}"
    before = len(gateway.sessions)
    cfg = _java(gateway, base)
    with Admin(cfg) as admin:
        admin.create_topics({topic: 1})
    with Producer(cfg) as producer:
        for i in range(20):
            producer.send(topic, f"v{i}".encode(), key=b"k")
        producer.flush(30)
    with Consumer({**cfg, "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([(topic, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 20 and time.monotonic() < deadline:
            got += [r.value for r in consumer.poll(1000)]
    assert got == [f"v{i}".encode() for i in range(20)]
    mine = gateway.sessions[before:]
    assert len(mine) >= 4 and all(s.principal == ARN and s.mechanism == base["sasl.mechanism"]
                                  for s in mine if s.logins)


@pytest.mark.broker
@pytest.mark.parametrize("base", [JAVA_IAM, JAVA_OAUTH], ids=["AWS_MSK_IAM", "OAUTHBEARER"])
def test_wrong_secret_is_refused_clearly(gateway: Any, checker: MskIamChecker,  # noqa: ANN401
                                         creds: MskIamChecker, base: dict[str, Any],
                                         monkeypatch: pytest.MonkeyPatch,
                                         caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = "Wrong" + SECRET
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", wrong)
    conn = BrokerConnection(gateway.address, sasl=sasl_from_config(_java(gateway, base)),
                            timeout=10)
    with pytest.raises(SaslAuthenticationFailedError) as info:
        conn.connect()
    assert "SignatureDoesNotMatch" in checker.refusals[-1] and not conn.connected
    text = str(info.value)
    assert ("Access denied" in text and "secret key" in text) if base is JAVA_IAM else \
        "invalid_token" in text
    _no_secret(info.value, caplog.text, wrong, SECRET, TOKEN)


@pytest.mark.broker
def test_reauthentication_signs_again(gateway: Any, checker: MskIamChecker,  # noqa: ANN401
                                      creds: MskIamChecker) -> None:
    gateway.max_reauth_ms = 1500
    try:
        accepted = len(checker.accepted)
        mech = sasl_from_config(_java(gateway, JAVA_IAM))
        with BrokerConnection(gateway.address, sasl=mech, timeout=10) as conn:
            conn.request(ApiKey.METADATA, {"topics": None})
            time.sleep(1.5 + gateway.grace + 0.3)           # past the session's end
            assert conn.request(ApiKey.METADATA, {"topics": None})["brokers"]
            assert conn.reauthentications == 1
        assert len(checker.accepted) - accepted == 2 and gateway.expired_kills == 0
    finally:
        gateway.max_reauth_ms = 0


@pytest.mark.broker
def test_a_role_assumed_through_sts(gateway: Any, checker: MskIamChecker,  # noqa: ANN401
                                    creds: MskIamChecker, monkeypatch: pytest.MonkeyPatch,
                                    caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    sts = FakeSts(checker)
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", sts.url)
    try:
        jaas = (_IAM + 'IAMLoginModule required awsRoleArn="arn:aws:iam::123456789012:role/'
                'msk_client_role" awsRoleSessionName="producer" awsStsRegion="eu-west-1" '
                "awsDebugCreds=true;")
        mech = sasl_from_config(_java(gateway, JAVA_IAM, **{"sasl.jaas.config": jaas}))
        with BrokerConnection(gateway.address, sasl=mech, timeout=10) as conn:
            assert conn.request(ApiKey.METADATA, {"topics": None})["brokers"]
        role = "arn:aws:sts::123456789012:assumed-role/msk_client_role/producer"
        assert gateway.sessions[-1].principal == role
        assume = [r for r in sts.requests if r["Action"] == "AssumeRole"]
        assert assume[0]["RoleSessionName"] == "producer" and KEY in assume[0]["authorization"]
        issued = next(a for a in checker.accounts.values() if a.arn == role)
        _no_secret(None, caplog.text, issued.secret, str(issued.token), SECRET, TOKEN)
        assert f"credentials from the role arn:aws:iam::123456789012:role/msk_client_role are " \
               f"{role} (account 123456789012)" in caplog.text            # awsDebugCreds
        # STS refuses: without the fallback, an error naming the role and STS's answer
        sts.refuse = True
        strict = jaas.replace("awsDebugCreds=true", "awsAddDefaultProviders=false")
        mech = sasl_from_config(_java(gateway, JAVA_IAM, **{"sasl.jaas.config": strict}))
        conn = BrokerConnection(gateway.address, sasl=mech, timeout=10)
        with pytest.raises(SaslAuthenticationFailedError, match="msk_client_role.*AccessDenied"):
            conn.connect()
    finally:
        sts.stop()
