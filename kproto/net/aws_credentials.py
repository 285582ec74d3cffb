"""AWS credentials for AWS MSK IAM (kproto/net/msk.py), as AWS's Java library finds them.

:class:`AwsCredentialSource` reads the options of Java's ``MSKCredentialProvider``
(``awsProfileName``, ``awsRoleArn`` with ``awsRoleSessionName``, ``awsStsRegion``,
``awsRoleExternalId`` and the ``awsRole*`` keys, ``awsAddDefaultProviders``,
``awsMaxRetries``, ``awsMaxBackOffTimeMs``, ``awsShouldUseFips``, ``awsDebugCreds``)
and gets the credentials through botocore: a named profile, a role assumed through
STS (refreshed by botocore before it expires), else botocore's default chain
(environment, shared files, web identity, container, instance metadata).

botocore comes with ``pip install 'kproto[aws]'`` and is imported when first
needed (:func:`import_botocore`: a ConfigError naming the extra without it).
Credentials never appear in a repr, an error or what it chains to, kproto's logs,
or the debug records botocore makes on a thread while kproto signs or calls STS
(:func:`quiet` drops them: they hold the canonical request with the session
token, signatures, and STS answers with new secret keys); pickling drops them.
"""

from __future__ import annotations

import logging
import random
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from .._registry_http import Secret
from ..errors import ConfigError, KprotoError, SaslAuthenticationFailedError

__all__ = ["AwsCredentialSource", "check_region", "import_botocore", "quiet", "reason",
           "credentials_provider", "EXTRA"]

log = logging.getLogger("kproto.msk")

EXTRA = "pip install 'kproto[aws]'"
_REGION = re.compile(r"[a-z]{2}(?:-[a-z]+)+-\d{1,2}")
_TRANSIENT_CODES = frozenset({"Throttling", "ThrottlingException", "RequestLimitExceeded",
                              "ServiceUnavailable", "InternalFailure", "InternalError",
                              "IDPCommunicationError", "RequestTimeout"})


def check_region(value: Any, what: str) -> str:  # noqa: ANN401
    """``value`` as an AWS region name, else a ConfigError naming ``what``."""
    text = str(value).strip().lower()
    if not _REGION.fullmatch(text):
        raise ConfigError(f"{what} {str(value)[:40]!r} is not an AWS region name (such as "
                          "us-east-1)")
    return text


# --------------------------------------------------------------------------- botocore


def import_botocore() -> Any:  # noqa: ANN401
    """botocore (imported), or a ConfigError naming the extra."""
    try:
        import botocore.auth
        import botocore.awsrequest
        import botocore.config
        import botocore.credentials
        import botocore.exceptions
        import botocore.session
    except ImportError as exc:
        raise ConfigError(f"AWS MSK IAM needs botocore and AWS's signer: {EXTRA} "
                          f"({exc.__class__.__name__}: {exc})") from exc
    return botocore


_local = threading.local()


class _HideWhileSigning(logging.Filter):
    """Drops botocore's records made on a thread while kproto signs or calls STS: at
    DEBUG they hold the canonical request (with the session token), signatures and
    STS answers (new secret keys)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(_local, "quiet", False)


_HIDE = _HideWhileSigning()


@contextmanager
def quiet() -> Iterator[None]:
    manager = logging.Logger.manager
    for name in list(manager.loggerDict):
        if name.startswith(("botocore", "urllib3", "aws_msk_iam_sasl_signer")):
            logger = logging.getLogger(name)
            if _HIDE not in logger.filters:
                logger.addFilter(_HIDE)
    before = getattr(_local, "quiet", False)
    _local.quiet = True
    try:
        yield
    finally:
        _local.quiet = before


def reason(exc: BaseException, *secrets: str | None) -> str:
    """``exc`` as ``Class: message``, any of ``secrets`` cut out, shortened."""
    text = str(exc)
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return f"{type(exc).__name__}: {text[:300]}"


def _transient(exc: BaseException) -> bool:
    bc = import_botocore()
    errors = bc.exceptions
    if isinstance(exc, (errors.EndpointConnectionError, errors.ConnectTimeoutError,
                        errors.ReadTimeoutError, errors.ConnectionClosedError)):
        return True
    if isinstance(exc, errors.ClientError):
        error = exc.response.get("Error", {})
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
        return error.get("Code") in _TRANSIENT_CODES or status >= 500
    return False


# --------------------------------------------------------------------------- credentials


class AwsCredentialSource:
    """Where the AWS credentials come from, as Java's ``MSKCredentialProvider`` reads
    its JAAS options: ``profile`` (``awsProfileName``), a role assumed through STS
    (``awsRoleArn``, ``awsRoleSessionName`` (default ``aws-msk-iam-auth``),
    ``awsStsRegion`` (default the global endpoint), ``awsRoleExternalId``, and the
    keys to assume it with, ``awsRoleAccessKeyId`` / ``SecretAccessKey`` /
    ``SessionToken``), else botocore's default chain. As in Java, a profile or role
    that yields nothing falls back to the default chain unless
    ``add_default_providers`` is False (the fallback is logged), and a transient
    failure (STS unreachable, throttled) is tried again ``max_retries`` times with
    full-jitter backoff up to ``max_backoff_ms``. STS calls end after ``timeout``
    seconds. The credentials are loaded at the first login and kept (botocore
    refreshes temporary ones before they expire); they never leave this object's
    process (pickling drops them)."""

    def __init__(self, *, profile: str | None = None, role_arn: str | None = None,
                 role_session_name: str | None = None, sts_region: str | None = None,
                 role_external_id: str | None = None, role_access_key_id: str | None = None,
                 role_secret_access_key: str | None = None,
                 role_session_token: str | None = None, add_default_providers: bool = True,
                 max_retries: int = 3, max_backoff_ms: int = 5000, use_fips: bool = False,
                 debug_creds: bool = False, timeout: float = 30.0) -> None:
        self.profile = profile or None
        self.role_arn = role_arn or None
        self.role_session_name = role_session_name or "aws-msk-iam-auth"
        self.sts_region = check_region(sts_region, "awsStsRegion") \
            if sts_region and sts_region != "aws-global" else None
        self.role_access_key_id = role_access_key_id or None
        self._role_external_id = Secret(role_external_id) if role_external_id else None
        self._role_secret = Secret(role_secret_access_key) if role_secret_access_key else None
        self._role_token = Secret(role_session_token) if role_session_token else None
        if (self.role_access_key_id is None) != (self._role_secret is None) or \
                (self._role_token is not None and self._role_secret is None):
            raise ConfigError("awsRoleAccessKeyId and awsRoleSecretAccessKey go together (and "
                              "awsRoleSessionToken needs both)")
        if (self.role_access_key_id or role_external_id or role_session_name) \
                and not self.role_arn:
            raise ConfigError("awsRoleSessionName, awsRoleExternalId and the awsRole* keys need "
                              "awsRoleArn (the role to assume)")
        for name, value, high in (("awsMaxRetries", max_retries, 20),
                                  ("awsMaxBackOffTimeMs", max_backoff_ms, 600_000)):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high:
                raise ConfigError(f"{name} must be a whole number in 0..{high}, not {value!r}")
        if not isinstance(timeout, (int, float)) or not 0 < timeout <= 3600:
            raise ConfigError(f"the AWS STS timeout must be in (0, 3600] s, not {timeout!r}")
        self.add_default_providers = bool(add_default_providers)
        self.max_retries, self.max_backoff = max_retries, max_backoff_ms / 1000
        self.use_fips, self.debug_creds, self.timeout = bool(use_fips), bool(debug_creds), timeout
        self._lock = threading.Lock()
        self._creds: Any = None
        #: Which source gave the credentials in use (for logs), None before the first login.
        self.source: str | None = None

    def __repr__(self) -> str:
        parts = [f"profile={self.profile!r}"] if self.profile else []
        if self.role_arn:
            parts += [f"role_arn={self.role_arn!r}", f"session={self.role_session_name!r}"]
        return f"AwsCredentialSource({', '.join(parts) or 'the default chain'})"

    __str__ = __repr__

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for name in ("_lock", "_creds", "source"):
            state.pop(name)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock, self._creds, self.source = threading.Lock(), None, None

    def describe(self) -> str:
        """Where the credentials come from, in words (no secret)."""
        if self.role_arn:
            return f"the role {self.role_arn} (session {self.role_session_name})"
        if self.profile:
            return f"the AWS profile {self.profile!r}"
        return "the default AWS credentials"

    def _secrets(self) -> tuple[str | None, ...]:
        return tuple(s.value if s else None for s in (self._role_secret, self._role_token,
                                                     self._role_external_id))

    def credentials(self) -> Any:  # noqa: ANN401
        """The current credentials (botocore's frozen ``access_key``, ``secret_key``,
        ``token``), loaded at the first call; a SaslAuthenticationFailedError saying
        what is missing when there are none."""
        with self._lock:
            if self._creds is None:
                self._creds = self._load()
            creds = self._creds
        failure = None
        try:
            with quiet():
                frozen = creds.get_frozen_credentials()
        except Exception as exc:  # noqa: BLE001 - botocore's refresh errors, any
            failure = reason(exc, *self._secrets())
        if failure is not None:
            with self._lock:
                self._creds = None            # the next login starts from the sources again
            raise SaslAuthenticationFailedError(
                f"AWS MSK IAM: the temporary credentials from {self.source or self.describe()} "
                f"are at or near their end and could not be renewed: {failure}")
        if not frozen.access_key or not frozen.secret_key:
            raise SaslAuthenticationFailedError(
                f"AWS MSK IAM: the credentials from {self.source} have an empty access key "
                "or secret key")
        return frozen

    def _load(self) -> Any:  # noqa: ANN401
        attempt = 0
        while True:
            creds, failures, transient = self._chain()
            if creds is not None:
                return creds
            if not transient or attempt >= self.max_retries:
                break
            attempt += 1
            time.sleep(random.uniform(0, min(self.max_backoff, 0.5 * 2 ** (attempt - 1))))
        raise SaslAuthenticationFailedError(
            "AWS MSK IAM found no usable AWS credentials: " + "; ".join(failures) + " (give "
            "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN), a profile in "
            "~/.aws/credentials or ~/.aws/config (AWS_PROFILE, or awsProfileName in "
            "sasl.jaas.config), awsRoleArn, or run where a container, instance or web "
            "identity role is available)")

    def _chain(self) -> tuple[Any, list[str], bool]:
        steps: list[tuple[str, Callable[[], Any]]] = []
        if self.profile:
            steps.append((f"the AWS profile {self.profile!r}", self._from_profile))
        if self.role_arn:
            steps.append((f"the role {self.role_arn}", self._from_role))
        if not steps or self.add_default_providers:
            steps.append(("the default chain (environment, shared files, web identity, "
                          "container, instance metadata)", self._from_default))
        failures: list[str] = []
        transient = False
        for what, load in steps:
            creds, failure = None, None
            try:
                with quiet():
                    creds = load()
                    if creds is not None:
                        creds.get_frozen_credentials()       # a role is assumed here
            except KprotoError:
                raise
            except Exception as exc:  # noqa: BLE001 - botocore's errors, any
                failure, creds = f"{what}: {reason(exc, *self._secrets())}", None
                transient = transient or _transient(exc)
            if creds is not None:
                if failures:
                    log.warning("AWS MSK IAM: %s; using %s (Java's fallback: "
                                "awsAddDefaultProviders=false turns it off)",
                                "; ".join(failures), what)
                self.source = what
                if self.debug_creds and log.isEnabledFor(logging.DEBUG):
                    self._log_identity(creds)
                return creds, failures, transient
            failures.append(failure or f"{what}: none there")
        return None, failures, transient

    def _from_default(self) -> Any:  # noqa: ANN401
        return import_botocore().session.Session().get_credentials()

    def _from_profile(self) -> Any:  # noqa: ANN401
        return import_botocore().session.Session(profile=self.profile).get_credentials()

    def _sts(self, session: Any, **keys: Any) -> Any:  # noqa: ANN401
        bc = import_botocore()
        config = bc.config.Config(connect_timeout=self.timeout, read_timeout=self.timeout,
                                  retries={"total_max_attempts": 1},
                                  use_fips_endpoint=self.use_fips)
        return session.create_client("sts", region_name=self.sts_region or "aws-global",
                                     config=config, **keys)

    def _from_role(self) -> Any:  # noqa: ANN401
        bc = import_botocore()
        session = bc.session.Session()
        if self._role_secret is not None:
            source = bc.credentials.Credentials(self.role_access_key_id, self._role_secret.value,
                                                self._role_token.value if self._role_token
                                                else None)
        else:
            source = session.get_credentials()
            if source is None:
                raise bc.exceptions.NoCredentialsError()
        extra = {"RoleSessionName": self.role_session_name}
        if self._role_external_id is not None:
            extra["ExternalId"] = self._role_external_id.value
        fetcher = bc.credentials.AssumeRoleCredentialFetcher(
            lambda service, **keys: self._sts(session, **keys), source, self.role_arn,
            extra_args=extra)
        return bc.credentials.DeferredRefreshableCredentials(
            refresh_using=fetcher.fetch_credentials, method="assume-role")

    def _log_identity(self, creds: Any) -> None:  # noqa: ANN401
        """awsDebugCreds: who the credentials are (STS GetCallerIdentity), at DEBUG."""
        failure = None
        try:
            with quiet():
                frozen = creds.get_frozen_credentials()
                who = self._sts(import_botocore().session.Session(),
                                aws_access_key_id=frozen.access_key,
                                aws_secret_access_key=frozen.secret_key,
                                aws_session_token=frozen.token).get_caller_identity()
        except Exception as exc:  # noqa: BLE001 - a debugging aid only
            failure = reason(exc, *self._secrets())
        if failure is not None:
            log.warning("AWS MSK IAM: could not tell the credentials' identity (awsDebugCreds; "
                        "can this host reach STS?): %s", failure)
            return
        log.debug("AWS MSK IAM credentials from %s are %s (account %s)", self.source,
                  who.get("Arn"), who.get("Account"))


def credentials_provider(frozen: Any) -> Any:  # noqa: ANN401
    """``frozen`` as the botocore CredentialProvider the signer takes."""
    bc = import_botocore()

    class Fixed(bc.credentials.CredentialProvider):  # type: ignore[name-defined]
        METHOD = "kproto"

        def load(self) -> Any:  # noqa: ANN401
            return bc.credentials.Credentials(frozen.access_key, frozen.secret_key,
                                              frozen.token)

    return Fixed()


