"""A client for the Confluent Schema Registry REST API (v1).

It speaks the documented subset a pipeline needs: schemas by id, subjects and
their versions (``latest`` included), registering a schema, looking one up
under a subject, checking compatibility, and the compatibility level. It works
the same on the driver and on Spark executors, and it pickles with its caches:
a client whose schemas were resolved on the driver ships them to the executors,
which then ask nothing.

>>> from kproto.schema_registry import SchemaRegistryClient   # doctest: +SKIP
>>> registry = SchemaRegistryClient("https://registry:8081",
...                                 basic_auth="key:secret",
...                                 ssl_ca_location="/etc/ca.pem")
>>> registry.register("events-value", '{"type": "string"}')
1
>>> registry.get_schema(1).schema
'{"type": "string"}'

Caching: a schema by id never changes, nor the id of a schema registered
under a subject, nor a numbered version; these are kept (up to
``cache_capacity`` entries each, least recently used dropped first).
``latest`` is asked every time unless ``latest_ttl`` (seconds) is set.

Every failure raises :class:`kproto.errors.SchemaRegistryError` naming the
URL, the subject, version and id the request was about, the HTTP status and
the registry's ``error_code`` and message; so does an answer of another shape
than the endpoint's (``"schema"`` not a string, a list for an object...), one
about another id, subject or version than asked, and one over
``max_answer_bytes`` (16 MiB). Unreachable registries, 429 and 5xx
answers and attempts past their deadline are retried (``max_retries`` times,
``retry_backoff`` seconds apart, doubling, then the next URL of a
comma-separated list); other errors are final.

Time: ``timeout`` is the deadline of one attempt, from the connect to the last
byte of the answer (redirects included), however slowly the answer comes. A
call therefore ends within ``len(urls) * ((max_retries + 1) * timeout +
retry_backoff * (2 ** max_retries - 1))`` seconds (plus name resolution, the
system resolver's).

HTTP is urllib3's (kept-alive connections per origin); redirects are followed
(at most 5), the credentials dropped at the first hop to another origin
(scheme, host or port) and a redirect from https to http refused. Why urllib3
and how the deadline is kept: ``kproto/_registry_http.py``.

Secrets: the password (``basic_auth``, or in the URL) and ``ssl_key_password``
never appear in an error, a repr or a log line (URLs are shown without their
user info, answer text is scrubbed of the password in any spelling). Credentials
in one URL of a comma-separated list are sent to that URL only; ``basic_auth``
to all. A pickled client carries its credentials, as Spark's own options
do: executors authenticate with them; ship it only where the options could go.
"""

from __future__ import annotations

import json
import math
import numbers
import re
import threading
import time
import urllib.parse
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._registry_http import MAX_ANSWER_BYTES, Auth, Secret, Transport, log, redact
from .errors import ConfigError, SchemaRegistryError

__all__ = ["MAX_ANSWER_BYTES", "RegisteredSchema", "SchemaReference", "SchemaRegistryClient",
           "as_client"]

#: The schemaType the registry assumes when a request or an answer names none.
AVRO = "AVRO"


@dataclass(frozen=True)
class SchemaReference:
    """A schema's reference to another registered schema: the ``name`` it is
    imported by (a Protobuf file name, an Avro full name, a JSON Schema URL)
    and the ``subject`` and ``version`` it is registered under."""

    name: str
    subject: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True)
class RegisteredSchema:
    """A schema as the registry answers it: the schema text, its type (``AVRO``,
    ``JSON``, ``PROTOBUF``), its references and, where the answer says so, its
    globally unique id and its subject and version."""

    schema: str
    schema_type: str = AVRO
    schema_id: int | None = None
    subject: str | None = None
    version: int | None = None
    references: tuple[SchemaReference, ...] = field(default_factory=tuple)

    @classmethod
    def from_json(cls, answer: Any, *, schema_id: int | None = None,  # noqa: ANN401
                  subject: str | None = None, version: int | None = None) -> RegisteredSchema:
        """From a registry answer (``GET /schemas/ids/{id}``, ``GET /subjects/{s}/versions/{v}``,
        ``POST /subjects/{s}``); fields the answer leaves out are taken from the request.
        A SchemaRegistryError if the answer is of another shape, or about another
        ``schema_id``, ``subject`` or ``version`` than the request's."""
        answer = _object(answer)
        refs = answer.get("references")
        if refs is not None and not isinstance(refs, list):
            raise _Unexpected(f'"references" is {_kind(refs)}, not a list')
        found_id = _member(answer, "id", int)
        found_subject = _member(answer, "subject", str)
        found_version = _member(answer, "version", int)
        for what, asked, found in (("id", schema_id, found_id),
                                   ("version", version, found_version),
                                   ("subject", subject, found_subject)):
            if asked is None or found is None or asked == found or (
                    what == "subject" and _same_subject(str(asked), str(found))):
                continue
            raise _Unexpected(f"asked for {what} {asked!r}, the answer is about {what} "
                              f"{found!r}")
        return cls(schema=_member(answer, "schema", str, required=True),
                   schema_type=(_member(answer, "schemaType", str) or AVRO).upper(),
                   schema_id=schema_id if found_id is None else found_id,
                   subject=found_subject or subject, version=found_version,
                   references=tuple(_reference(r) for r in refs or ()))


class _Lru:
    """A small thread-safe LRU map (the client is shared by a task's threads)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.items: OrderedDict[Any, Any] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: Any) -> Any:  # noqa: ANN401 - any cached value
        with self.lock:
            value = self.items.get(key)
            if value is not None:
                self.items.move_to_end(key)
            return value

    def put(self, key: Any, value: Any) -> None:
        with self.lock:
            self.items[key] = value
            self.items.move_to_end(key)
            while len(self.items) > self.capacity:
                self.items.popitem(last=False)

    def __getstate__(self) -> dict[str, Any]:
        return {"capacity": self.capacity, "items": list(self.items.items())}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.capacity = state["capacity"]
        self.items = OrderedDict(state["items"])
        self.lock = threading.Lock()


def _schema_text(schema: str | Mapping[str, Any] | list[Any]) -> str:
    return schema if isinstance(schema, str) else json.dumps(schema)


class SchemaRegistryClient:
    """A Confluent Schema Registry client (see the module).

    ``url``: one URL or a comma-separated list (tried in order when one is
    unreachable or failing); credentials in a URL (``https://user:pw@host``)
    are that URL's basic auth, sent to it alone (the others send their own, or
    none). ``basic_auth``: ``"user:password"`` or a pair, sent to every URL
    (then no URL may hold credentials).
    TLS: ``ssl_ca_location`` (a CA file or directory; default: the system's),
    ``ssl_certificate_location`` / ``ssl_key_location`` / ``ssl_key_password``
    for a client certificate, ``ssl_verify=False`` to skip verification.
    ``timeout``: the deadline of one attempt (seconds, connect to last byte, at
    most a day); ``max_retries`` (0 to 20) and ``retry_backoff`` (0 to 3600 s):
    see the module. ``cache_capacity``: entries per cache (at least 1).
    ``max_answer_bytes``: the largest answer read (:data:`MAX_ANSWER_BYTES`,
    16 MiB); a larger one is a SchemaRegistryError. A setting out of range is a
    ConfigError naming it.
    """

    def __init__(self, url: str, *, basic_auth: str | tuple[str, str] | None = None,
                 ssl_ca_location: str | None = None,
                 ssl_certificate_location: str | None = None,
                 ssl_key_location: str | None = None, ssl_key_password: str | None = None,
                 ssl_verify: bool = True, timeout: float = 30.0, max_retries: int = 2,
                 retry_backoff: float = 0.2, cache_capacity: int = 1000,
                 latest_ttl: float | None = None,
                 max_answer_bytes: int = MAX_ANSWER_BYTES) -> None:
        if not isinstance(url, str) or not url.strip():
            shown = repr(url) if isinstance(url, str) else type(url).__name__
            raise ConfigError(f"schema registry url must be a non-empty string, not {shown}")
        self.timeout: float = _setting("timeout", timeout)
        self.max_retries: int = _setting("max_retries", max_retries)
        self.retry_backoff: float = _setting("retry_backoff", retry_backoff)
        self.latest_ttl = None if latest_ttl is None else _setting("latest_ttl", latest_ttl)
        self.max_answer_bytes: int = _setting("max_answer_bytes", max_answer_bytes)
        cache_capacity = _setting("cache_capacity", cache_capacity)
        #: The base URLs, without user info; ``_auths[i]`` is what ``urls[i]`` is sent.
        self.urls: list[str] = []
        self._auths: list[Auth | None] = []
        for one in url.split(","):
            one = one.strip().rstrip("/")
            parts, netloc = _split(one)
            if parts is None:
                # a password may hold a comma: show the whole list, redacted
                shown = redact(url) if "@" in url else one
                raise ConfigError(f"schema registry url {shown!r} is not an http(s) URL")
            auth = None
            if parts.username is not None:
                auth = (urllib.parse.unquote(parts.username),
                        Secret(urllib.parse.unquote(parts.password or "")))
                one = urllib.parse.urlunsplit(parts._replace(netloc=netloc))
            self.urls.append(one)
            self._auths.append(auth)
        if basic_auth is not None:
            if any(self._auths):
                raise ConfigError("schema registry credentials given twice (in the url and "
                                  "as basic_auth)")
            self._auths = [_basic_auth(basic_auth)] * len(self.urls)
        if ssl_key_location and not ssl_certificate_location:
            raise ConfigError("ssl_key_location needs ssl_certificate_location")
        if ssl_ca_location and not ssl_verify:
            raise ConfigError("ssl_ca_location given with ssl_verify=False")
        self._http = Transport([a for a in self._auths if a is not None], (
            ssl_ca_location, ssl_certificate_location, ssl_key_location,
            None if ssl_key_password is None else Secret(str(ssl_key_password)), ssl_verify))
        self._by_id = _Lru(cache_capacity)          # (id, format) -> RegisteredSchema
        self._ids = _Lru(cache_capacity)            # (subject, type, text, refs) -> id
        self._versions = _Lru(cache_capacity)       # (subject, version, format) -> schema
        self._latest = _Lru(cache_capacity)         # (subject, format) -> (time, schema)

    @classmethod
    def from_config(cls, conf: Mapping[str, Any]) -> SchemaRegistryClient:
        """From confluent-kafka's configuration names (``url``,
        ``basic.auth.user.info``, ``ssl.ca.location``, ``ssl.certificate.location``,
        ``ssl.key.location``, ``ssl.key.password``, ``timeout``, ``max.retries``,
        ``cache.capacity``, ``cache.latest.ttl.sec``); unknown names are refused."""
        names = {"url": "url", "basic.auth.user.info": "basic_auth",
                 "ssl.ca.location": "ssl_ca_location",
                 "ssl.certificate.location": "ssl_certificate_location",
                 "ssl.key.location": "ssl_key_location", "ssl.key.password": "ssl_key_password",
                 "timeout": "timeout", "max.retries": "max_retries",
                 "cache.capacity": "cache_capacity", "cache.latest.ttl.sec": "latest_ttl",
                 "basic.auth.credentials.source": None}
        kwargs: dict[str, Any] = {}
        for key, value in conf.items():
            if key not in names:
                raise ConfigError(f"unknown schema registry setting {key!r} (known: "
                                  f"{', '.join(sorted(names))})")
            name = names[key]
            if name is None:
                if str(value).upper() not in ("USER_INFO", "URL"):
                    raise ConfigError(f"basic.auth.credentials.source {value!r} is not "
                                      "supported (USER_INFO or URL)")
                continue
            if name in _SETTINGS:
                value = _setting(name, value, key)
            if name == "ssl_ca_location" and str(value).lower() == "false":
                kwargs["ssl_verify"] = False
                continue
            kwargs[name] = value
        if "url" not in kwargs:
            raise ConfigError("schema registry setting 'url' is required")
        return cls(kwargs.pop("url"), **kwargs)

    def __repr__(self) -> str:
        return f"SchemaRegistryClient({redact(','.join(self.urls))!r})"

    # ------------------------------------------------------------------ schemas

    def get_schema(self, schema_id: int, *, subject: str | None = None,
                   format: str | None = None) -> RegisteredSchema:
        """The schema with this globally unique id (``GET /schemas/ids/{id}``).
        ``format``: ``"serialized"`` asks for a Protobuf schema as a base64
        FileDescriptorProto, ``"resolved"`` for an Avro schema with its
        references inlined. Cached."""
        schema_id = int(schema_id)
        key = (schema_id, format)
        found = self._by_id.get(key)
        if found is None:
            query = {"subject": subject, "format": format}
            found = self._request(
                "GET", f"schemas/ids/{schema_id}", query=query, schema_id=schema_id,
                subject=subject, parse=lambda a: RegisteredSchema.from_json(a, schema_id=schema_id))
            self._by_id.put(key, found)
        return found

    def get_subjects(self) -> list[str]:
        """Every registered subject (``GET /subjects``)."""
        return self._request("GET", "subjects", parse=lambda a: _list(a, str))

    def get_versions(self, subject: str) -> list[int]:
        """The versions registered under ``subject`` (``GET /subjects/{subject}/versions``)."""
        return self._request("GET", f"subjects/{_quote(subject)}/versions", subject=subject,
                             parse=lambda a: _list(a, int))

    def get_version(self, subject: str, version: int | str = "latest", *,
                    format: str | None = None) -> RegisteredSchema:
        """One version of ``subject`` (a number or ``"latest"``), with its id
        (``GET /subjects/{subject}/versions/{version}``). Numbered versions are
        cached; ``latest`` only for ``latest_ttl`` seconds when that is set."""
        latest = str(version) == "latest" or str(version) == "-1"
        if latest:
            hit = self._latest.get((subject, format))
            if hit is not None and self.latest_ttl is not None \
                    and time.monotonic() - hit[0] < self.latest_ttl:
                return hit[1]
        else:
            version = int(version)
            hit = self._versions.get((subject, version, format))
            if hit is not None:
                return hit
        number = None if latest else int(version)
        found = self._request("GET", f"subjects/{_quote(subject)}/versions/{version}",
                              query={"format": format}, subject=subject, version=version,
                              parse=lambda a: RegisteredSchema.from_json(
                                  a, subject=subject, version=number))
        if found.version is not None:
            self._versions.put((subject, found.version, format), found)
        if latest:
            self._latest.put((subject, format), (time.monotonic(), found))
        if found.schema_id is not None and found.version is not None:
            self._by_id.put((found.schema_id, format), found)
        return found

    def get_latest(self, subject: str, *, format: str | None = None) -> RegisteredSchema:
        """The latest version of ``subject`` (see :meth:`get_version`)."""
        return self.get_version(subject, "latest", format=format)

    def register(self, subject: str, schema: str | Mapping[str, Any],
                 schema_type: str = AVRO, *, references: tuple[SchemaReference, ...] = (),
                 normalize: bool = False) -> int:
        """Register ``schema`` under ``subject`` and return its id
        (``POST /subjects/{subject}/versions``); the registry answers the
        existing id when the schema is there already. Cached per subject."""
        text = _schema_text(schema)
        schema_type = schema_type.upper()
        key = (subject, schema_type, text, tuple(references))
        found = self._ids.get(key)
        if found is None:
            body = self._body(text, schema_type, references)
            found = self._request("POST", f"subjects/{_quote(subject)}/versions",
                                  query={"normalize": "true"} if normalize else None,
                                  body=body, subject=subject,
                                  parse=lambda a: _member(_object(a), "id", int, required=True))
            self._ids.put(key, found)
            self._by_id.put((found, None), RegisteredSchema(
                text, schema_type, found, subject, None, tuple(references)))
        return int(found)

    def lookup(self, subject: str, schema: str | Mapping[str, Any], schema_type: str = AVRO,
               *, references: tuple[SchemaReference, ...] = (),
               normalize: bool = False) -> RegisteredSchema:
        """Is ``schema`` registered under ``subject``? Its id and version if so
        (``POST /subjects/{subject}``); a SchemaRegistryError with error_code
        40401 (no such subject) or 40403 (not registered there) otherwise."""
        text = _schema_text(schema)
        body = self._body(text, schema_type.upper(), references)
        found = self._request("POST", f"subjects/{_quote(subject)}",
                              query={"normalize": "true"} if normalize else None,
                              body=body, subject=subject,
                              parse=lambda a: RegisteredSchema.from_json(a, subject=subject))
        if found.schema_id is not None:
            self._ids.put((subject, schema_type.upper(), text, tuple(references)),
                          found.schema_id)
        return found

    def test_compatibility(self, subject: str, schema: str | Mapping[str, Any],
                           schema_type: str = AVRO, *, version: int | str = "latest",
                           references: tuple[SchemaReference, ...] = ()) -> bool:
        """Could ``schema`` be registered as a new version of ``subject``, under the
        subject's compatibility level (``POST /compatibility/subjects/{subject}/versions/{v}``)?"""
        body = self._body(_schema_text(schema), schema_type.upper(), references)
        return self._request("POST", f"compatibility/subjects/{_quote(subject)}/versions/"
                             f"{version}", body=body, subject=subject, version=version,
                             parse=_is_compatible)

    def get_compatibility(self, subject: str | None = None) -> str:
        """The compatibility level of ``subject``, or the global one (``GET /config``)."""
        path = "config" if subject is None else f"config/{_quote(subject)}"
        return self._request("GET", path, subject=subject, parse=_level)

    def set_compatibility(self, level: str, subject: str | None = None) -> str:
        """Set the compatibility level (``BACKWARD``, ``FORWARD``, ``FULL``, their
        ``_TRANSITIVE`` forms, ``NONE``) of ``subject``, or the global one."""
        path = "config" if subject is None else f"config/{_quote(subject)}"
        return self._request("PUT", path, body={"compatibility": level.upper()},
                             subject=subject, parse=_level)

    def delete_subject(self, subject: str, *, permanent: bool = False) -> list[int]:
        """Delete ``subject`` (soft, or ``permanent`` after a soft delete); the
        versions it had. Ids stay readable (``DELETE /subjects/{subject}``)."""
        return self._request("DELETE", f"subjects/{_quote(subject)}",
                             query={"permanent": "true"} if permanent else None,
                             subject=subject, parse=lambda a: _list(a, int))

    # ------------------------------------------------------------------ HTTP

    @staticmethod
    def _body(text: str, schema_type: str, references: tuple[SchemaReference, ...]
              ) -> dict[str, Any]:
        body: dict[str, Any] = {"schema": text}
        if schema_type != AVRO:             # the registry's default; older ones know no other
            body["schemaType"] = schema_type
        if references:
            body["references"] = [r.to_json() for r in references]
        return body

    def _request(self, method: str, path: str, *, query: Mapping[str, Any] | None = None,
                 body: Any = None, subject: str | None = None, schema_id: int | None = None,
                 version: int | str | None = None,
                 parse: Callable[[Any], Any] = lambda answer: answer) -> Any:
        """``parse`` of the registry's JSON answer, from the first URL that gives one
        (each tried ``max_retries + 1`` times while it fails retriably)."""
        params = {k: v for k, v in (query or {}).items() if v is not None}
        suffix = f"?{urllib.parse.urlencode(params)}" if params else ""
        data = None if body is None else json.dumps(body).encode()
        where = {"subject": subject, "schema_id": schema_id, "version": version}
        failure: SchemaRegistryError | None = None
        for base, auth in zip(self.urls, self._auths, strict=True):
            url = f"{base}/{path}{suffix}"
            for attempt in range(self.max_retries + 1):
                if attempt:
                    delay = self.retry_backoff * (2 ** (attempt - 1))
                    log.info("%s; retry %d of %d in %.2f s", failure, attempt,
                             self.max_retries, delay)
                    time.sleep(delay)
                try:
                    answer = self._http.request(method, url, data, self.timeout, auth=auth,
                                                limit=self.max_answer_bytes)
                except SchemaRegistryError as exc:
                    failure = _with_context(exc, where)
                    if not failure.retriable:
                        raise failure from None
                    continue
                try:
                    return parse(answer)
                except _Unexpected as exc:
                    why = f" ({self._http.scrub(exc._message)})"
                except (KeyError, IndexError, TypeError, ValueError, AttributeError):
                    why = ""
                raise SchemaRegistryError(f"{method}: unexpected answer{why}: "
                                          f"{self._http.show(answer)}", url=redact(url),
                                          status=200, subject=subject, schema_id=schema_id,
                                          version=version) from None
        assert failure is not None
        raise failure


def _with_context(exc: SchemaRegistryError, where: Mapping[str, Any]) -> SchemaRegistryError:
    """The same error, its message naming the request's subject, version and id."""
    return SchemaRegistryError(exc._message, url=exc.url, status=exc.status,
                               error_code=exc.error_code, **where)


def _split(url: str) -> tuple[urllib.parse.SplitResult | None, str]:
    """``url`` parsed and its host[:port] (no user info), or None when it is no http(s) URL."""
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port                                  # noqa: B018 - ValueError: no number
    except ValueError:
        return None, ""
    if parts.scheme not in ("http", "https") or not parts.hostname \
            or "@" in url.partition(parts.netloc)[2]:   # a password with "/", "?" or "#"
        return None, ""
    return parts, parts.netloc.rpartition("@")[2]


def _basic_auth(given: Any) -> tuple[str, Secret]:  # noqa: ANN401 - checked here
    if isinstance(given, str):
        user, sep, password = given.partition(":")
        if sep:
            return user, Secret(password)
    elif isinstance(given, (tuple, list)) and len(given) == 2:
        return str(given[0]), Secret(str(given[1]))
    raise ConfigError(f"basic_auth must be 'user:password' or a (user, password) pair "
                      f"(a {type(given).__name__} was given)")


# ---------------------------------------------------------------------- answers

class _Unexpected(SchemaRegistryError):
    """An answer of another shape than the endpoint's, or about something else."""


def _kind(value: Any) -> str:  # noqa: ANN401 - any JSON value
    """The JSON type of ``value``, as an error names it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object"


_WANTED = {str: "a string", int: "an integer", dict: "an object", list: "a list"}


def _fits(value: Any, kind: type) -> bool:  # noqa: ANN401 - any JSON value
    return isinstance(value, kind) and not (kind is int and isinstance(value, bool))


def _object(answer: Any) -> dict[str, Any]:  # noqa: ANN401 - checked here
    if not isinstance(answer, dict):
        raise _Unexpected(f"{_kind(answer)}, not an object")
    return answer


def _member(answer: Mapping[str, Any], name: str, kind: type, *, required: bool = False
            ) -> Any:  # noqa: ANN401 - of the type ``kind``
    """``answer[name]``, of ``kind`` (JSON null: None), or an _Unexpected."""
    value = answer.get(name)
    if value is None:
        if required:
            raise _Unexpected(f'no "{name}"')
        return None
    if not _fits(value, kind):
        raise _Unexpected(f'"{name}" is {_kind(value)}, not {_WANTED[kind]}')
    return value


def _list(answer: Any, kind: type) -> list[Any]:  # noqa: ANN401 - checked here
    """``answer``, a list of ``kind`` items (subject names, version numbers)."""
    if not isinstance(answer, list):
        raise _Unexpected(f"{_kind(answer)}, not a list")
    for item in answer:
        if not _fits(item, kind):
            raise _Unexpected(f"an item is {_kind(item)}, not {_WANTED[kind]}")
    return answer


def _reference(item: Any) -> SchemaReference:  # noqa: ANN401 - checked here
    if not isinstance(item, dict):
        raise _Unexpected(f"a reference is {_kind(item)}, not an object")
    return SchemaReference(_member(item, "name", str, required=True),
                           _member(item, "subject", str, required=True),
                           _member(item, "version", int, required=True))


def _is_compatible(answer: Any) -> bool:  # noqa: ANN401 - checked here
    value = _object(answer).get("is_compatible")
    if isinstance(value, str):            # the documentation shows both true and "true"
        value = {"true": True, "false": False}.get(value.lower(), value)
    if not isinstance(value, bool):
        raise _Unexpected(f'"is_compatible" is {_kind(value)}, not true or false')
    return value


def _level(answer: Any) -> str:  # noqa: ANN401 - checked here
    """The compatibility level of a ``/config`` answer (GET names it compatibilityLevel,
    PUT compatibility)."""
    answer = _object(answer)
    for name in ("compatibilityLevel", "compatibility"):
        level = _member(answer, name, str)
        if level:
            return level
    raise _Unexpected('no "compatibilityLevel" or "compatibility"')


_CONTEXT = re.compile(r":\.[^:]*:")


def _same_subject(asked: str, found: str) -> bool:
    """Is ``found`` (an answer's subject) the subject asked? The registry may qualify
    it with a context (``:.ctx:name``, the context of a URL ending in
    ``/contexts/.ctx``) or drop the default context's ``:.:``; two contexts differ."""
    if asked == found:
        return True
    a, f = _CONTEXT.match(asked), _CONTEXT.match(found)
    if a and f:
        return False
    return asked[a.end() if a else 0:] == found[f.end() if f else 0:]


# ---------------------------------------------------------------------- settings

#: name: (an integer?, in range?, what it must be). Bounds: a socket timeout or a
#: sleep past them overflows, and none is a wait anyone means.
_SETTINGS: dict[str, tuple[bool, Callable[[Any], bool], str]] = {
    "timeout": (False, lambda v: 0 < v <= 86400,
                "a number of seconds above 0 and at most 86400 (the deadline of one attempt)"),
    "max_retries": (True, lambda v: 0 <= v <= 20, "an integer from 0 to 20"),
    "retry_backoff": (False, lambda v: 0 <= v <= 3600, "a number of seconds from 0 to 3600"),
    "cache_capacity": (True, lambda v: v >= 1, "an integer of at least 1"),
    "latest_ttl": (False, lambda v: v >= 0, "a finite number of seconds, at least 0"),
    "max_answer_bytes": (True, lambda v: v >= 1, "an integer of at least 1 (bytes)"),
}


def _setting(name: str, value: Any, key: str | None = None) -> Any:  # noqa: ANN401
    """``value`` of the setting ``name`` as an int or a float, checked; a ConfigError
    naming it (as ``key``, its confluent-kafka name, when it came by that) otherwise.
    Under a confluent name a string is read as a number (Spark options are strings)."""
    integer, in_range, what = _SETTINGS[name]
    given: Any = value
    if key is not None and isinstance(value, str):
        try:
            given = int(value) if integer else float(value)
        except ValueError:
            given = None
    is_number = isinstance(given, numbers.Integral if integer else numbers.Real) \
        and not isinstance(given, bool)
    if is_number:
        try:
            number = int(given) if integer else float(given)
        except OverflowError:                   # an int past a float's range
            number = math.inf
        if (integer or math.isfinite(number)) and in_range(number):
            return number
    raise ConfigError(f"schema registry setting {key or name} must be {what}, not {value!r}")


def _quote(subject: str) -> str:
    return urllib.parse.quote(subject, safe="")


def as_client(registry: str | Mapping[str, Any] | SchemaRegistryClient | None
              ) -> SchemaRegistryClient | None:
    """A client from a URL, a confluent-style settings dict, or a client (as is)."""
    if registry is None or isinstance(registry, SchemaRegistryClient):
        return registry
    if isinstance(registry, str):
        return SchemaRegistryClient(registry)
    if isinstance(registry, Mapping):
        return SchemaRegistryClient.from_config(registry)
    raise TypeError(f"registry must be a URL, a settings dict or a SchemaRegistryClient, "
                    f"not {type(registry).__name__}")
