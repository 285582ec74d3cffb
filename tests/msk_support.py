"""Real parts for the AWS MSK IAM tests (tests/test_msk.py, tests/test_spark_msk.py).

There is no MSK here. What an MSK IAM listener checks is done by
:class:`MskIamChecker`, IN THE TEST, NOT AWS: it knows IAM's side of some
credentials (:class:`IamAccount`: the secret key, a session token and when it
expires, the principal) and validates what arrives

- as OAUTHBEARER (``oauthbearer``: a validator for tests/oauth_support.py's
  ReauthGateway): the token is the unpadded base64url of a presigned
  ``https://kafka.<region>.amazonaws.com/?Action=kafka-cluster%3AConnect&X-Amz-...``;
- as AWS_MSK_IAM (``stepper``: a mechanism for that gateway): the JSON of such a
  request's parameters, lower-cased, signed for the broker's host, answered with
  ``{"version": "2020_10_22", "request-id": ...}``.

Both are checked the same way: the action, algorithm, signed headers, the
credential scope (date, region, ``kafka-cluster``), the signing time (not after
now + 5 minutes, not older than its X-Amz-Expires, at most 900 s), the session
token (known, not expired), and the signature, recomputed twice from the
secret key: by :func:`spec_signature`, written from AWS's SigV4 documentation
(hashlib/hmac only), and by botocore's own ``SigV4QueryAuth`` (its canonical
request, string to sign and signature) - two implementations that must agree
with each other and with what the client sent.

:class:`FakeSts` is a local STS endpoint (``AWS_ENDPOINT_URL_STS``) answering
AssumeRole with temporary credentials it registers with the checker, for the
``awsRoleArn`` tests.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.server
import json
import secrets
import threading
import time
import urllib.parse
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

SERVICE = "kafka-cluster"
ACTION = "kafka-cluster:Connect"
ALGORITHM = "AWS4-HMAC-SHA256"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
#: The AWS_MSK_IAM payload's lower-cased keys -> the query parameters that were signed.
SIGNED_NAMES = {"action": "Action", "x-amz-algorithm": "X-Amz-Algorithm",
                "x-amz-credential": "X-Amz-Credential", "x-amz-date": "X-Amz-Date",
                "x-amz-expires": "X-Amz-Expires", "x-amz-signedheaders": "X-Amz-SignedHeaders",
                "x-amz-security-token": "X-Amz-Security-Token"}


@dataclass
class IamAccount:
    """IAM's side of one access key."""

    secret: str
    arn: str
    token: str | None = None            # a session token (temporary credentials)
    expires_at: float | None = None     # when the session token expires


def _enc(text: str) -> str:
    """SigV4's URI encoding: unreserved characters kept, the rest %XX (upper case)."""
    return urllib.parse.quote(text, safe="-_.~")


def _netloc(host: str) -> str:
    """The Host header of a request to ``host`` (an IPv6 address in brackets)."""
    return f"[{host}]" if ":" in host else host


def spec_signature(params: dict[str, str], host: str, secret: str) -> str:
    """The SigV4 signature of a presigned GET https://<host>/ with ``params`` (the
    query parameters but X-Amz-Signature), written from AWS's documentation."""
    scope = params["X-Amz-Credential"].split("/", 1)[1]
    date, region, service, _ = scope.split("/")
    query = "&".join(f"{k}={v}" for k, v in sorted((_enc(k), _enc(v))
                                                    for k, v in params.items()))
    canonical = "\n".join(["GET", "/", query, f"host:{_netloc(host)}\n", "host", EMPTY_SHA256])
    to_sign = "\n".join([ALGORITHM, params["X-Amz-Date"], scope,
                         hashlib.sha256(canonical.encode()).hexdigest()])
    key = ("AWS4" + secret).encode()
    for part in (date, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


def botocore_signature(params: dict[str, str], host: str, secret: str) -> str:
    """The same signature through botocore's SigV4QueryAuth (canonical request, string
    to sign, signature), at the request's own X-Amz-Date."""
    from botocore.auth import SigV4QueryAuth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    access_key, _, scope = params["X-Amz-Credential"].partition("/")
    region = scope.split("/")[1]
    auth = SigV4QueryAuth(Credentials(access_key, secret, params.get("X-Amz-Security-Token")),
                          SERVICE, region, expires=int(params["X-Amz-Expires"]))
    query = urllib.parse.urlencode(params, quote_via=urllib.parse.quote)
    request = AWSRequest(method="GET", url=f"https://{_netloc(host)}/?{query}")
    request.context["timestamp"] = params["X-Amz-Date"]
    canonical = auth.canonical_request(request)
    return str(auth.signature(auth.string_to_sign(request, canonical), request))


class Refused(Exception):
    """What the checker found wrong (the gateway records it; MSK says only "Access denied")."""


@dataclass
class MskIamChecker:
    """IN THE TEST, NOT AWS: an MSK IAM listener's checks (see the module docstring).
    ``hosts``: the host names AWS_MSK_IAM payloads may be signed for (the broker's)."""

    region: str
    accounts: dict[str, IamAccount] = field(default_factory=dict)
    hosts: tuple[str, ...] = ("127.0.0.1", "localhost")
    clock: Any = time.time
    #: every refusal's reason, and every accepted principal
    refusals: list[str] = field(default_factory=list)
    accepted: list[str] = field(default_factory=list)

    def check(self, params: dict[str, str], host: str, signature: str) -> tuple[str, float]:
        """(principal, expiry) of a signed request, or :class:`Refused`."""
        if params.get("Action") != ACTION:
            raise Refused(f"action {params.get('Action')!r} is not {ACTION}")
        if params.get("X-Amz-Algorithm") != ALGORITHM or \
                params.get("X-Amz-SignedHeaders") != "host":
            raise Refused("not a SigV4 request signing the host header alone")
        access_key, _, scope = params.get("X-Amz-Credential", "").partition("/")
        stamp = params.get("X-Amz-Date", "")
        try:
            signed = datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(
                tzinfo=timezone.utc).timestamp()
            expires = int(params["X-Amz-Expires"])
        except (KeyError, ValueError):
            raise Refused("no valid X-Amz-Date / X-Amz-Expires") from None
        if scope != f"{stamp[:8]}/{self.region}/{SERVICE}/aws4_request":
            raise Refused(f"credential scope {scope!r} is not this cluster's "
                          f"({stamp[:8]}/{self.region}/{SERVICE}/aws4_request)")
        now = self.clock()
        if not 0 < expires <= 900:
            raise Refused(f"X-Amz-Expires {expires} is not in 1..900")
        if signed > now + 300:
            raise Refused("signed in the future (clock skew over 5 minutes)")
        if now > signed + expires:
            raise Refused(f"the signed request expired {now - signed - expires:.0f} s ago")
        account = self.accounts.get(access_key)
        if account is None:
            raise Refused("InvalidClientTokenId: unknown access key")
        if account.token is not None or "X-Amz-Security-Token" in params:
            if params.get("X-Amz-Security-Token") != account.token:
                raise Refused("InvalidToken: the security token is not this key's")
            if account.expires_at is not None and now > account.expires_at:
                raise Refused("ExpiredToken: the security token included in the request is "
                              "expired")
        by_spec = spec_signature(params, host, account.secret)
        by_botocore = botocore_signature(params, host, account.secret)
        assert by_spec == by_botocore, ("SigV4 from the spec and botocore's disagree", params)
        if not hmac.compare_digest(by_spec, signature):
            raise Refused("SignatureDoesNotMatch: the request signature we calculated does "
                          "not match the signature provided")
        self.accepted.append(account.arn)
        return account.arn, signed + expires

    # -- OAUTHBEARER

    def oauthbearer(self, token: str) -> dict[str, Any]:
        """ReauthGateway's validator: the token's claims, or an exception (refused)."""
        try:
            url = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode("utf-8")
            parts = urllib.parse.urlsplit(url)
            pairs = urllib.parse.parse_qsl(parts.query, keep_blank_values=True, strict_parsing=True)
            if parts.scheme != "https" or parts.netloc != f"kafka.{self.region}.amazonaws.com" \
                    or parts.path != "/":
                raise Refused(f"not a request to https://kafka.{self.region}.amazonaws.com/")
            params = dict(pairs)
            if len(params) != len(pairs):
                raise Refused("a parameter given twice")
            signature = params.pop("X-Amz-Signature", "")
            params.pop("User-Agent", None)         # appended after signing by both libraries
            principal, expiry = self.check(params, parts.netloc, signature)
        except (Refused, ValueError, UnicodeDecodeError) as exc:
            self.refusals.append(f"{type(exc).__name__}: {exc}")
            raise
        return {"sub": principal, "exp": expiry}

    # -- AWS_MSK_IAM

    def stepper(self) -> Any:  # noqa: ANN401
        """ReauthGateway mechanism factory: one login's step function."""
        def step(token: bytes) -> tuple[str, Any]:
            request_id = uuid.uuid4().hex
            try:
                payload = json.loads(token)
                if not isinstance(payload, dict) or payload.get("version") != "2020_10_22":
                    raise Refused("not an AWS_MSK_IAM payload of version 2020_10_22")
                if payload.get("host") not in self.hosts:
                    raise Refused(f"signed for host {payload.get('host')!r}, not this broker")
                params = {SIGNED_NAMES[k]: v for k, v in payload.items() if k in SIGNED_NAMES}
                principal, expiry = self.check(params, payload["host"],
                                               str(payload.get("x-amz-signature", "")))
            except (Refused, ValueError, KeyError) as exc:
                self.refusals.append(f"{type(exc).__name__}: {exc}")
                return "error", f"[{request_id}]: Access denied"
            answer = json.dumps({"version": "2020_10_22", "request-id": request_id}).encode()
            return "done", (principal, 0, answer)
        return step


class FakeSts:
    """A local STS endpoint (IN THE TEST): AssumeRole issues temporary credentials (valid
    ``lifetime`` s) registered with ``checker``; ``refuse`` answers AccessDenied."""

    def __init__(self, checker: MskIamChecker, *, lifetime: float = 3600) -> None:
        self.checker, self.lifetime = checker, lifetime
        self.refuse = False
        self.requests: list[dict[str, str]] = []
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # noqa: ANN401
                pass

            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                form = dict(urllib.parse.parse_qsl(self.rfile.read(size).decode()))
                form["authorization"] = self.headers.get("Authorization", "")
                status, body = owner.answer(form)
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/xml")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True,
                                        name="FakeSts")
        self._thread.start()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)

    def answer(self, form: dict[str, str]) -> tuple[int, str]:
        self.requests.append(form)
        ns = "https://sts.amazonaws.com/doc/2011-06-15/"
        if form.get("Action") == "GetCallerIdentity" and not self.refuse:   # awsDebugCreds
            key = form["authorization"].partition("Credential=")[2].partition("/")[0]
            account = self.checker.accounts.get(key)
            arn = account.arn if account else "unknown"
            return 200, (f'<GetCallerIdentityResponse xmlns="{ns}"><GetCallerIdentityResult>'
                         f"<Arn>{arn}</Arn><UserId>AIDAEXAMPLE</UserId><Account>123456789012"
                         "</Account></GetCallerIdentityResult><ResponseMetadata><RequestId>"
                         f"{uuid.uuid4()}</RequestId></ResponseMetadata>"
                         "</GetCallerIdentityResponse>")
        if self.refuse or form.get("Action") != "AssumeRole":
            return 403, (f'<ErrorResponse xmlns="{ns}"><Error><Type>Sender</Type>'
                         "<Code>AccessDenied</Code><Message>User is not authorized to perform: "
                         f"sts:AssumeRole on resource: {form.get('RoleArn')}</Message></Error>"
                         f"<RequestId>{uuid.uuid4()}</RequestId></ErrorResponse>")
        role = form["RoleArn"].rpartition("/")[2]
        arn = f"arn:aws:sts::123456789012:assumed-role/{role}/{form['RoleSessionName']}"
        key, secret = "ASIA" + secrets.token_hex(8).upper(), secrets.token_urlsafe(30)
        token = "IQoJb3JpZ2luX2Vj" + secrets.token_urlsafe(60)
        expires = self.checker.clock() + self.lifetime
        self.checker.accounts[key] = IamAccount(secret, arn, token, expires)
        stamp = datetime.fromtimestamp(expires, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        return 200, (f'<AssumeRoleResponse xmlns="{ns}"><AssumeRoleResult><Credentials>'
                     f"<AccessKeyId>{key}</AccessKeyId><SecretAccessKey>{secret}"
                     f"</SecretAccessKey><SessionToken>{token}</SessionToken>"
                     f"<Expiration>{stamp}</Expiration></Credentials><AssumedRoleUser>"
                     f"<AssumedRoleId>AROAEXAMPLE:{form['RoleSessionName']}</AssumedRoleId>"
                     f"<Arn>{arn}</Arn></AssumedRoleUser></AssumeRoleResult><ResponseMetadata>"
                     f"<RequestId>{uuid.uuid4()}</RequestId></ResponseMetadata>"
                     "</AssumeRoleResponse>")
