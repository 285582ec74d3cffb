"""AWS MSK IAM: logging in to Amazon MSK with AWS credentials, both ways MSK takes.

Amazon MSK's IAM listeners (port 9098, 9198 public) take two SASL mechanisms:

- ``OAUTHBEARER`` with the token AWS's signer for non-Java clients makes
  (``aws-msk-iam-sasl-signer-python``): the unpadded base64url of a SigV4
  presigned ``GET https://kafka.<region>.amazonaws.com/?Action=kafka-cluster%3AConnect``
  that is good for 15 minutes. :class:`MskIamTokenProvider` has that package make
  it; :class:`~kproto.net.oauth.SaslOauthBearer` sends it, one token per client,
  made again before it expires (Java's ``IAMOAuthBearerLoginCallbackHandler``).
- ``AWS_MSK_IAM``, the mechanism of AWS's Java library ``aws-msk-iam-auth``
  (``IAMLoginModule`` with ``IAMClientCallbackHandler``): one client message, a
  JSON object of such a presigned request's parameters signed for the broker's
  own host name (``version``, ``host``, ``user-agent``, ``action``,
  ``x-amz-algorithm``, ``-credential``, ``-date``, ``-expires``,
  ``-signedheaders``, ``-signature`` and ``-security-token`` with temporary
  credentials), answered by the broker's JSON (``version``, ``request-id``).
  :class:`SaslAwsMskIam` signs it with botocore's SigV4 (the signer's own
  dependency), anew for every login.

Credentials come from :class:`~kproto.net.aws_credentials.AwsCredentialSource`,
which reads the options of Java's ``MSKCredentialProvider``: a named profile, a
role assumed through STS, else the default chain (environment, shared files, web
identity, container and instance roles). The region is ``sasl.aws.region`` when
given, else read from the broker's host name
(``b-1.<cluster>.<id>.c2.kafka.<region>.amazonaws.com``; for OAUTHBEARER the
bootstrap servers'), else ``AWS_REGION``, ``AWS_DEFAULT_REGION`` or the profile's
region.

botocore and the signer come with ``pip install 'kproto[aws]'`` and are imported
when first needed; without them the mechanism is a ConfigError naming the extra.
Credentials and tokens never appear in a repr, an error or what it chains to,
kproto's logs, or botocore's debug records made while kproto signs or calls
STS (they are dropped). A pickled mechanism keeps its settings only and loads
credentials again where it is unpickled.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import re
import time
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import ConfigError, KprotoError, SaslAuthenticationFailedError
from .aws_credentials import (
    EXTRA,
    AwsCredentialSource,
    check_region,
    credentials_provider,
    import_botocore,
    quiet,
    reason,
)
from .oauth import OAuthToken, RefreshPolicy, _CachedProvider

__all__ = ["SaslAwsMskIam", "MskIamTokenProvider", "AwsCredentialSource", "region_from_host",
           "aws_msk_iam_from_config", "msk_token_provider_from_config", "check_client_handler",
           "java_class", "IAM_LOGIN_MODULE", "IAM_CLIENT_HANDLER", "IAM_OAUTH_HANDLER"]

log = logging.getLogger("kproto.msk")

ACTION = "kafka-cluster:Connect"
SERVICE = "kafka-cluster"
#: Seconds a signed request is good for (both AWS libraries sign for 15 minutes).
EXPIRES = 900
PAYLOAD_VERSION = "2020_10_22"

_IAM = "software.amazon.msk.auth.iam."
IAM_LOGIN_MODULE = _IAM + "IAMLoginModule"
IAM_CLIENT_HANDLER = _IAM + "IAMClientCallbackHandler"
IAM_OAUTH_HANDLER = _IAM + "IAMOAuthBearerLoginCallbackHandler"
#: Kafka's own default client callback handler (naming it changes nothing).
_KAFKA_CLIENT_HANDLER = "org.apache.kafka.common.security.authenticator.SaslClientCallbackHandler"
#: Databricks' runtime ships AWS's Java library shaded under this prefix.
SHADED_PREFIX = "shadedmskiam."

_MSK_HOST = re.compile(r"(?:.+\.)?kafka(?:-serverless)?\.([a-z]{2}(?:-[a-z]+)+-\d{1,2})"
                       r"\.amazonaws\.com(?:\.cn)?\.?")


def java_class(name: Any) -> str:  # noqa: ANN401
    """A Java class name without Databricks' ``shadedmskiam.`` prefix."""
    text = str(name or "").strip()
    return text[len(SHADED_PREFIX):] if text.startswith(SHADED_PREFIX) else text


def region_from_host(host: str) -> str | None:
    """The region of an MSK broker's host name (``...kafka.<region>.amazonaws.com``,
    serverless ``...kafka-serverless.<region>...``, China's ``.amazonaws.com.cn``),
    or None for any other host (an alias, an IP address, a look-alike)."""
    match = _MSK_HOST.fullmatch(str(host).strip().lower())
    return match.group(1) if match else None


def _host_of(address: str) -> str:
    host, sep, port = address.strip().rpartition(":")
    if not sep or "]" in port:
        return address.strip().strip("[]")
    return host.strip("[]")


def _signer() -> Any:  # noqa: ANN401
    """AWS's MSK token signer module, or a ConfigError naming the extra."""
    try:
        from aws_msk_iam_sasl_signer import MSKAuthTokenProvider
    except ImportError as exc:
        raise ConfigError(f"AWS MSK IAM over OAUTHBEARER needs AWS's signer "
                          f"(aws-msk-iam-sasl-signer-python): {EXTRA} "
                          f"({exc.__class__.__name__}: {exc})") from exc
    return MSKAuthTokenProvider


# --------------------------------------------------------------------------- OAUTHBEARER


class MskIamTokenProvider(_CachedProvider):
    """OAUTHBEARER tokens for Amazon MSK's IAM listener, made by AWS's signer
    (``MSKAuthTokenProvider.generate_auth_token_from_credentials_provider``) for
    ``region`` with the credentials of ``credentials`` (an
    :class:`AwsCredentialSource`; default: the default chain). A token is good for
    15 minutes; with the default :class:`~kproto.net.oauth.RefreshPolicy` a new one
    is made after 10. Pass it as ``sasl_oauth_token_provider=``."""

    def __init__(self, region: str, credentials: AwsCredentialSource | None = None, *,
                 policy: RefreshPolicy | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__(policy, clock)
        self.region = check_region(region, "sasl.aws.region")
        self.credentials = credentials or AwsCredentialSource()
        _signer()                   # a ConfigError now when the extra is missing

    def __repr__(self) -> str:
        return f"MskIamTokenProvider(region={self.region!r}, {self.credentials!r})"

    __str__ = __repr__

    def _fetch(self, *, retry: bool) -> OAuthToken:
        frozen = self.credentials.credentials()
        signer = _signer()
        failure = None
        try:
            with quiet():
                value, expiry_ms = signer.generate_auth_token_from_credentials_provider(
                    self.region, credentials_provider(frozen))
            expires = float(expiry_ms) / 1000
        except Exception as exc:  # noqa: BLE001 - the signer's and botocore's errors
            failure = reason(exc, frozen.secret_key, frozen.token)
        if failure is not None:
            raise SaslAuthenticationFailedError(f"AWS MSK IAM: the signer could not make the "
                                                f"OAUTHBEARER token: {failure}")
        return OAuthToken(str(value), expires, self.credentials.describe(), None,
                          expires - EXPIRES)


# --------------------------------------------------------------------------- AWS_MSK_IAM


class SaslAwsMskIam:
    """SASL ``AWS_MSK_IAM`` as AWS's Java library (``aws-msk-iam-auth``) speaks it:
    the JSON of a SigV4 presigned ``kafka-cluster:Connect`` request for the broker's
    host, good for 15 minutes, signed anew for every login (also KIP-368
    re-authentications); the broker answers ``{"version", "request-id"}``.

    The region: ``region`` when given, else the broker host's
    (``...kafka.<region>.amazonaws.com``), else ``default_region``. The connection
    binds the mechanism to the host it connected to (:meth:`for_host`)."""

    name = "AWS_MSK_IAM"

    def __init__(self, credentials: AwsCredentialSource | None = None, *,
                 region: str | None = None, default_region: str | None = None,
                 host: str | None = None, user_agent: str | None = None) -> None:
        from .. import __version__

        import_botocore()                 # a ConfigError now when the extra is missing
        self.credentials = credentials or AwsCredentialSource()
        self.region = check_region(region, "sasl.aws.region") if region else None
        self.default_region = check_region(default_region, "the AWS region") \
            if default_region else None
        self.host = host
        self.user_agent = user_agent or f"kproto/{__version__}"
        #: The request id of the broker's last answer (MSK's logs know it).
        self.request_id: str | None = None

    def __repr__(self) -> str:
        where = f", host={self.host!r}" if self.host else ""
        return f"SaslAwsMskIam({self.credentials!r}, region={self.region!r}{where})"

    __str__ = __repr__

    def for_host(self, host: str) -> SaslAwsMskIam:
        """This mechanism for the broker at ``host`` (what it signs for)."""
        if host == self.host:
            return self
        bound = copy.copy(self)         # shares the credentials (and their cache)
        bound.host = host
        return bound

    def region_for(self, host: str) -> str:
        """The region to sign for at ``host`` (a ConfigError when none is known)."""
        found = region_from_host(host)
        if self.region:
            if found and found != self.region:
                log.warning("AWS MSK IAM: signing for sasl.aws.region %s, but the broker %s "
                            "is in %s", self.region, host, found)
            return self.region
        region = found or self.default_region
        if region is None:
            raise ConfigError(f"AWS MSK IAM cannot tell the AWS region of the broker {host!r} "
                              "(not an MSK host name, ...kafka.<region>.amazonaws.com): set "
                              "sasl.aws.region, or AWS_REGION")
        return region

    def payload(self, host: str, region: str, frozen: Any) -> bytes:  # noqa: ANN401
        """The client message: the JSON of the presigned request for ``host``. A
        SaslAuthenticationFailedError (chained to nothing: a UnicodeEncodeError's repr
        holds the text it failed on) when it cannot be made."""
        bc = import_botocore()
        netloc = f"[{host}]" if ":" in host else host
        failure = None
        try:
            if urllib.parse.urlsplit(f"https://{netloc}/").hostname != host.lower():
                raise ValueError("not a host name a URL can hold")
            request = bc.awsrequest.AWSRequest(method="GET", url=f"https://{netloc}/",
                                               params={"Action": ACTION})
            auth = bc.auth.SigV4QueryAuth(
                bc.credentials.Credentials(frozen.access_key, frozen.secret_key, frozen.token),
                SERVICE, region, expires=EXPIRES)
            with quiet():
                auth.add_auth(request)
            query = urllib.parse.urlsplit(request.url).query
            fields = {k.lower(): v for k, v in urllib.parse.parse_qsl(query,
                                                                       keep_blank_values=True)}
            fields.update({"version": PAYLOAD_VERSION, "host": host,
                           "user-agent": self.user_agent})
            return json.dumps(fields, separators=(",", ":")).encode("utf-8")
        except (ValueError, TypeError) as exc:   # UnicodeEncodeError is a ValueError
            failure = reason(exc, frozen.secret_key, frozen.token) \
                if not isinstance(exc, UnicodeError) else \
                f"{type(exc).__name__} (the credentials or the host are not valid text)"
        raise SaslAuthenticationFailedError(f"AWS MSK IAM cannot sign for the broker "
                                            f"{host[:100]!r}: {failure}")

    def authenticate(self, exchange: Callable[[bytes], bytes]) -> None:
        """Send the signed payload; check the broker's answer."""
        host = self.host
        if not host:
            raise ConfigError("SaslAwsMskIam signs for the broker's host: use it through "
                              "BrokerConnection (which binds it), or for_host(host)")
        region = self.region_for(host)
        frozen = self.credentials.credentials()
        payload = self.payload(host, region, frozen)
        signature = json.loads(payload)["x-amz-signature"]
        refused = None
        try:
            answer = exchange(payload)
        except SaslAuthenticationFailedError as exc:
            refused = str(exc.message or exc)
            for secret in (signature, frozen.secret_key, frozen.token):
                if secret:
                    refused = refused.replace(secret, "***")
        if refused is not None:
            raise SaslAuthenticationFailedError(
                f"{refused} (AWS MSK IAM login with {self.credentials.source or 'credentials'} "
                f"for {host}, region {region}. The broker checks the SigV4 signature (the "
                "secret key), the signing time against its clock (15 minutes, 5 of skew), "
                "that a session token has not expired, and an IAM policy allowing "
                "kafka-cluster:Connect on the cluster)",
                host=host, region=region)
        self.request_id = _answer(answer, host)
        log.debug("AWS_MSK_IAM login at %s with %s, request id %s", host,
                  self.credentials.source, self.request_id)


def _answer(answer: bytes, host: str) -> str:
    """The request id of MSK's answer, checked as Java's ``AuthenticationResponse``."""
    body = None
    try:
        body = json.loads(answer.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        pass
    if not isinstance(body, dict) or body.get("version") != PAYLOAD_VERSION or \
            not isinstance(body.get("request-id"), str):
        what = "nothing" if not answer else f"{len(answer)} bytes"
        raise SaslAuthenticationFailedError(
            f"AWS MSK IAM: the broker {host} accepted the login but answered {what} that are "
            f"not MSK's {{\"version\": \"{PAYLOAD_VERSION}\", \"request-id\": ...}} (is it an "
            "MSK IAM listener?)")
    return str(body["request-id"])[:100]


# --------------------------------------------------------------------------- settings


def check_client_handler(mechanism: str, value: Any) -> None:  # noqa: ANN401
    """Java's ``sasl.client.callback.handler.class``: the AWS handler that goes with
    ``mechanism`` (or Kafka's default) is accepted, any other Java class refused."""
    name = java_class(value)
    if not name or name == _KAFKA_CLIENT_HANDLER or \
            (mechanism, name) in (("AWS_MSK_IAM", IAM_CLIENT_HANDLER),
                                  ("OAUTHBEARER", IAM_OAUTH_HANDLER)):
        return
    wanted = {"AWS_MSK_IAM": IAM_CLIENT_HANDLER, "OAUTHBEARER": IAM_OAUTH_HANDLER}
    hint = f" (with {mechanism} kproto knows {wanted[mechanism]})" if mechanism in wanted else ""
    raise ConfigError(f"sasl.client.callback.handler.class {str(value)[:120]!r} is a Java "
                      f"class kproto cannot run with sasl_mechanism {mechanism}{hint}")


def _flag(c: Mapping[str, Any], key: str, java: str, default: bool) -> bool:
    value = c.get(key)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise ConfigError(f"{java} must be true or false, not {str(value)[:20]!r}")
    return text == "true"


def _whole(c: Mapping[str, Any], key: str, java: str, default: int) -> int:
    value = c.get(key)
    if value is None:
        return default
    try:
        return int(str(value).strip())
    except ValueError:
        raise ConfigError(f"{java} must be a whole number, not {str(value)[:20]!r}") from None


def credential_source_from_config(c: Mapping[str, Any]) -> AwsCredentialSource:
    """The :class:`AwsCredentialSource` for normalized settings ``c`` (the
    ``sasl_aws_*`` keys, from options or the JAAS line's ``aws*`` options)."""
    def text(key: str) -> str | None:
        value = c.get(key)
        return None if value is None or not str(value).strip() else str(value).strip()

    timeout = c.get("request_timeout_ms")
    try:
        seconds = float(timeout) / 1000 if timeout not in (None, "") else 30.0
    except (TypeError, ValueError):
        raise ConfigError(f"request_timeout_ms must be a number, not {timeout!r}") from None
    if text("sasl_aws_region_provider"):
        raise ConfigError("awsMskRegionProvider in sasl.jaas.config names a Java class kproto "
                          "cannot run: give the region as sasl.aws.region (sasl_aws_region)")
    return AwsCredentialSource(
        profile=text("sasl_aws_profile_name"), role_arn=text("sasl_aws_role_arn"),
        role_session_name=text("sasl_aws_role_session_name"),
        sts_region=text("sasl_aws_sts_region"),
        role_external_id=text("sasl_aws_role_external_id"),
        role_access_key_id=text("sasl_aws_role_access_key_id"),
        role_secret_access_key=text("sasl_aws_role_secret_access_key"),
        role_session_token=text("sasl_aws_role_session_token"),
        add_default_providers=_flag(c, "sasl_aws_add_default_providers",
                                    "awsAddDefaultProviders", True),
        max_retries=_whole(c, "sasl_aws_max_retries", "awsMaxRetries", 3),
        max_backoff_ms=_whole(c, "sasl_aws_max_back_off_time_ms", "awsMaxBackOffTimeMs", 5000),
        use_fips=_flag(c, "sasl_aws_should_use_fips", "awsShouldUseFips", False),
        debug_creds=_flag(c, "sasl_aws_debug_creds", "awsDebugCreds", False),
        timeout=seconds)


def _bootstrap_region(c: Mapping[str, Any]) -> str | None:
    servers = c.get("bootstrap_servers") or []
    if isinstance(servers, str):
        servers = servers.split(",")
    found = {r for s in servers if str(s).strip()
             if (r := region_from_host(_host_of(str(s)))) is not None}
    if len(found) > 1:
        raise ConfigError(f"the bootstrap servers are MSK brokers in {', '.join(sorted(found))}: "
                          "set sasl.aws.region")
    return found.pop() if found else None


def _default_region(profile: str | None) -> str | None:
    """Java's DefaultAwsRegionProviderChain without the instance metadata: AWS_REGION,
    then AWS_DEFAULT_REGION or the profile's ``region`` (botocore's)."""
    env = os.environ.get("AWS_REGION", "").strip()
    if env:
        return check_region(env, "AWS_REGION")
    found = None
    try:
        found = import_botocore().session.Session(profile=profile).get_config_variable("region")
    except KprotoError:
        raise
    except Exception:  # noqa: BLE001,S110 - no such profile: the login says so
        pass
    return check_region(found, "the region of the AWS configuration") if found else None


def msk_token_provider_from_config(c: Mapping[str, Any],
                                   policy: RefreshPolicy | None = None) -> MskIamTokenProvider:
    """The OAUTHBEARER token provider Java's ``IAMOAuthBearerLoginCallbackHandler``
    stands for: the region from ``sasl_aws_region``, else the bootstrap servers' host
    names, else the AWS configuration; credentials as
    :func:`credential_source_from_config`."""
    credentials = credential_source_from_config(c)
    explicit = c.get("sasl_aws_region")
    region = check_region(explicit, "sasl.aws.region") if explicit else \
        _bootstrap_region(c) or _default_region(credentials.profile)
    if region is None:
        raise ConfigError("AWS MSK IAM (OAUTHBEARER) needs the AWS region the cluster is in: "
                          "set sasl.aws.region (sasl_aws_region) or AWS_REGION (the bootstrap "
                          "servers are not MSK host names, ...kafka.<region>.amazonaws.com)")
    return MskIamTokenProvider(region, credentials, policy=policy)


def aws_msk_iam_from_config(c: Mapping[str, Any]) -> SaslAwsMskIam:
    """The ``AWS_MSK_IAM`` mechanism for normalized client settings ``c``:
    ``sasl_aws_region`` (else each broker host's region, else the bootstrap servers'
    or the AWS configuration's), credentials from the JAAS line's
    ``IAMLoginModule`` options (:func:`credential_source_from_config`)."""
    if c.get("sasl_login_callback_handler_class"):
        raise ConfigError("sasl.login.callback.handler.class has no part in AWS_MSK_IAM (its "
                          "handler is sasl.client.callback.handler.class="
                          f"{IAM_CLIENT_HANDLER})")
    credentials = credential_source_from_config(c)
    explicit = c.get("sasl_aws_region")
    region = check_region(explicit, "sasl.aws.region") if explicit else None
    default = None if region else _bootstrap_region(c) or _default_region(credentials.profile)
    return SaslAwsMskIam(credentials, region=region, default_region=default)
