"""A small Schema Registry for tests: the documented REST subset, in memory.

No Confluent Schema Registry server installs from PyPI or Debian here, so the
tests run this one: a threaded ``http.server`` on 127.0.0.1 serving the
endpoints of Confluent's API reference that kproto's client and
confluent-kafka's serializers use, with the documented answers and error
codes (40401 subject not found, 40402 version not found, 40403 schema not
found, 42201 invalid schema, 42202 invalid version, 42203 invalid
compatibility level, 409 incompatible schema, 401 unauthorized).

>>> with SchemaRegistryServer() as registry:                  # doctest: +SKIP
...     client = SchemaRegistryClient(registry.url)
...     client.register("events-value", '{"type": "string"}')
1

What it does not do: it keeps schema texts as given (a Protobuf schema
registered as a base64 FileDescriptorProto, as confluent-kafka's serializer
registers it, is answered as that, with or without ``format=serialized``; it
never converts between .proto text and descriptors), and its compatibility
check for Avro is a simplified version of Avro's resolution rules (record
fields added or removed with defaults, numeric promotions, unions that grow);
JSON Schema and Protobuf schemas are always compatible. ``canned`` answers
replace any endpoint with a fixed answer (tests replay the JSON quoted in
Confluent's documentation that way), and ``requests`` lists what was asked.
"""

from __future__ import annotations

import base64
import json
import re
import ssl
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

LOOPBACK = "127.0.0.1"
_LEVELS = {"BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL",
           "FULL_TRANSITIVE", "NONE"}
_PROMOTIONS = {("int", "long"), ("int", "float"), ("int", "double"), ("long", "float"),
               ("long", "double"), ("float", "double"), ("string", "bytes"),
               ("bytes", "string")}


class _Error(Exception):
    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class SchemaRegistryServer:
    """An in-memory Schema Registry on a free loopback port (see the module).

    ``users``: ``{"user": "password"}`` turns on basic auth (401 without it);
    ``ssl_context``: a server-side ``ssl.SSLContext`` serves HTTPS;
    ``canned``: ``{("GET", "/schemas/ids/1"): (200, {...})}`` fixed answers.
    """

    def __init__(self, *, users: dict[str, str] | None = None,
                 ssl_context: ssl.SSLContext | None = None,
                 canned: dict[tuple[str, str], tuple[int, Any]] | None = None,
                 compatibility: str = "BACKWARD") -> None:
        self.users = users
        self.canned = dict(canned or {})
        self.requests: list[tuple[str, str]] = []
        #: the client's (host, port) of each of ``requests``: one keep-alive connection
        #: per client process tells processes apart
        self.peers: list[tuple[str, int]] = []
        self.lock = threading.Lock()
        self.schemas: list[dict[str, Any]] = []         # id - 1 -> {"schema", "schemaType", ...}
        self.subjects: dict[str, list[int]] = {}         # subject -> ids, version = index + 1
        self.deleted: set[str] = set()
        self.config: dict[str | None, str] = {None: compatibility}
        self.fail_next: list[tuple[int, int, str]] = []  # answers to give before any other
        handler = type("Handler", (_Handler,), {"registry": self})
        self._server = ThreadingHTTPServer((LOOPBACK, 0), handler)
        self._server.daemon_threads = True
        if ssl_context is not None:
            self._server.socket = ssl_context.wrap_socket(self._server.socket, server_side=True)
        scheme = "https" if ssl_context is not None else "http"
        host, port = str(self._server.server_address[0]), self._server.server_address[1]
        #: The base URL to give a client.
        self.url = f"{scheme}://{host}:{port}"
        self._thread: threading.Thread | None = None

    def start(self) -> SchemaRegistryServer:
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name="schema-registry", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> SchemaRegistryServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ the API

    def answer(self, method: str, path: str, query: dict[str, str], body: Any) -> Any:
        parts = [urllib.parse.unquote(p) for p in path.strip("/").split("/")]
        with self.lock:
            return self._route(method, parts, query, body)

    def _route(self, method: str, parts: list[str], query: dict[str, str], body: Any) -> Any:
        n = len(parts)
        if parts[:2] == ["schemas", "ids"] and n >= 3:
            schema_id = _int(parts[2], 40403, "Schema not found")
            entry = self._schema(schema_id)
            if n == 3 and method == "GET":
                return _schema_json(entry)
            if n == 4 and parts[3] == "versions" and method == "GET":
                return [{"subject": s, "version": i + 1} for s, ids in self.subjects.items()
                        for i, x in enumerate(ids) if x == schema_id]
            if n == 4 and parts[3] == "schema" and method == "GET":
                return _RawSchema(entry["schema"])
        if parts == ["schemas", "types"] and method == "GET":
            return ["JSON", "PROTOBUF", "AVRO"]
        if parts == ["subjects"] and method == "GET":
            return sorted(s for s in self.subjects if s not in self.deleted)
        if parts[0] == "subjects" and n >= 2:
            subject = parts[1]
            if n == 2 and method == "POST":
                return self._lookup(subject, body)
            if n == 2 and method == "DELETE":
                versions = self._versions(subject)
                if query.get("permanent") == "true":
                    del self.subjects[subject]
                    self.deleted.discard(subject)
                else:
                    self.deleted.add(subject)
                return versions
            if n == 3 and parts[2] == "versions" and method == "GET":
                return self._versions(subject)
            if n == 3 and parts[2] == "versions" and method == "POST":
                return {"id": self._register(subject, body)}
            if n >= 4 and parts[2] == "versions" and method == "GET":
                version, schema_id = self._version(subject, parts[3])
                entry = self._schema(schema_id)
                if n == 5 and parts[4] == "schema":
                    return _RawSchema(entry["schema"])
                return {"subject": subject, "version": version, "id": schema_id,
                        **_schema_json(entry)}
        if parts[0] == "compatibility" and n == 5 and parts[1] == "subjects" \
                and parts[3] == "versions" and method == "POST":
            subject = parts[2]
            _, old_id = self._version(subject, parts[4])
            entry = _entry(body)
            return {"is_compatible": self._compatible(subject, entry, [old_id])}
        if parts[0] == "config" and n <= 2:
            name = parts[1] if n == 2 else None
            if method == "GET":
                if name is not None and name not in self.config:
                    if name not in self.subjects:
                        raise _Error(404, 40401, f"Subject '{name}' not found.")
                    return {"compatibilityLevel": self.config[None]}
                return {"compatibilityLevel": self.config[name]}
            if method == "PUT":
                level = str((body or {}).get("compatibility", "")).upper()
                if level not in _LEVELS:
                    raise _Error(422, 42203, "Invalid compatibility level")
                self.config[name] = level
                return {"compatibility": level}
        raise _Error(404, 404, f"HTTP 404 Not Found: {method} /{'/'.join(parts)}")

    def _schema(self, schema_id: int) -> dict[str, Any]:
        if not 1 <= schema_id <= len(self.schemas):
            raise _Error(404, 40403, "Schema not found")
        return self.schemas[schema_id - 1]

    def _versions(self, subject: str) -> list[int]:
        if subject not in self.subjects or subject in self.deleted:
            raise _Error(404, 40401, f"Subject '{subject}' not found.")
        return list(range(1, len(self.subjects[subject]) + 1))

    def _version(self, subject: str, text: str) -> tuple[int, int]:
        versions = self._versions(subject)
        if text in ("latest", "-1"):
            version = versions[-1]
        else:
            try:
                version = int(text)
            except ValueError:
                raise _Error(422, 42202, f"The specified version '{text}' is not a valid version "
                             "id. Allowed values are between [1, 2^31-1] and the string "
                             "\"latest\"") from None
            if version not in versions:
                raise _Error(404, 40402, f"Version {version} not found.")
        return version, self.subjects[subject][version - 1]

    def _register(self, subject: str, body: Any) -> int:
        entry = _entry(body)
        ids = self.subjects.get(subject, []) if subject not in self.deleted else []
        for schema_id in ids:
            if _same(self.schemas[schema_id - 1], entry):
                return schema_id
        if ids and not self._compatible(subject, entry, ids):
            raise _Error(409, 409, "Schema being registered is incompatible with an earlier "
                         f"schema for subject \"{subject}\"")
        for i, known in enumerate(self.schemas):
            if _same(known, entry):
                schema_id = i + 1
                break
        else:
            self.schemas.append(entry)
            schema_id = len(self.schemas)
        if subject in self.deleted:
            self.deleted.discard(subject)
            self.subjects[subject] = []
        self.subjects.setdefault(subject, []).append(schema_id)
        return schema_id

    def _lookup(self, subject: str, body: Any) -> Any:
        entry = _entry(body)
        self._versions(subject)
        for i, schema_id in enumerate(self.subjects[subject]):
            if _same(self.schemas[schema_id - 1], entry):
                return {"subject": subject, "id": schema_id, "version": i + 1,
                        **_schema_json(self.schemas[schema_id - 1])}
        raise _Error(404, 40403, "Schema not found")

    def _compatible(self, subject: str, entry: dict[str, Any], ids: list[int]) -> bool:
        level = self.config.get(subject, self.config[None])
        if level == "NONE" or entry["schemaType"] != "AVRO":
            return True
        against = ids if level.endswith("TRANSITIVE") else ids[-1:]
        new = json.loads(entry["schema"])
        for schema_id in against:
            old = json.loads(self.schemas[schema_id - 1]["schema"])
            if level.startswith(("BACKWARD", "FULL")) and not _reads(new, old):
                return False
            if level.startswith(("FORWARD", "FULL")) and not _reads(old, new):
                return False
        return True


class _RawSchema(str):
    """An answer that is the schema text itself (``.../schema`` endpoints)."""


def _int(text: str, code: int, message: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise _Error(404, code, message) from None


def _entry(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict) or not isinstance(body.get("schema"), str) \
            or not body["schema"]:
        raise _Error(422, 42201, "Either the input schema or one of its references is invalid")
    schema_type = str(body.get("schemaType") or "AVRO").upper()
    if schema_type not in ("AVRO", "JSON", "PROTOBUF"):
        raise _Error(422, 42201, f"Invalid schema type {schema_type}")
    text = body["schema"]
    if schema_type in ("AVRO", "JSON"):
        try:
            json.loads(text)
        except ValueError:
            raise _Error(422, 42201, f"Invalid schema: {text[:60]!r} is not JSON") from None
    elif not re.fullmatch(r"[A-Za-z0-9+/=\s]+", text) and "message" not in text:
        raise _Error(422, 42201, "Invalid schema: neither .proto text nor base64")
    return {"schema": text, "schemaType": schema_type,
            "references": [dict(r) for r in body.get("references") or ()]}


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    if a["schemaType"] != b["schemaType"] or a["references"] != b["references"]:
        return False
    if a["schemaType"] == "PROTOBUF":
        return bool(a["schema"] == b["schema"])
    return bool(json.loads(a["schema"]) == json.loads(b["schema"]))


def _schema_json(entry: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"schema": entry["schema"]}
    if entry["schemaType"] != "AVRO":
        out["schemaType"] = entry["schemaType"]
    if entry["references"]:
        out["references"] = entry["references"]
    return out


def _type_name(schema: Any) -> str:
    if isinstance(schema, str):
        return schema
    if isinstance(schema, list):
        return "union"
    return str(schema.get("type"))


def _reads(reader: Any, writer: Any) -> bool:
    """Can data written with ``writer`` be read with ``reader`` (simplified Avro rules)?"""
    if isinstance(writer, list):
        return all(_reads(reader, branch) for branch in writer)
    if isinstance(reader, list):
        return any(_reads(branch, writer) for branch in reader)
    r, w = _type_name(reader), _type_name(writer)
    if r != w:
        return (w, r) in _PROMOTIONS
    if r == "record":
        written = {f["name"]: f for f in writer.get("fields", [])}
        for f in reader.get("fields", []):
            if f["name"] in written:
                if not _reads(f["type"], written[f["name"]]["type"]):
                    return False
            elif "default" not in f:
                return False
        return True
    if r == "array":
        return _reads(reader["items"], writer["items"])
    if r == "map":
        return _reads(reader["values"], writer["values"])
    if r == "enum":
        return set(writer["symbols"]) <= set(reader["symbols"]) or "default" in reader
    if r == "fixed":
        return bool(reader.get("size") == writer.get("size"))
    return True


class _Handler(BaseHTTPRequestHandler):
    registry: SchemaRegistryServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet tests
        pass

    def _handle(self, method: str) -> None:
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        registry = self.registry
        with registry.lock:
            registry.requests.append((method, self.path))
            registry.peers.append(self.client_address[:2])
            failure = registry.fail_next.pop(0) if registry.fail_next else None
        try:
            if failure is not None:
                raise _Error(*failure)
            if registry.users is not None and not self._authorized(registry.users):
                raise _Error(401, 40101, "Unauthorized")
            if (method, url.path) in registry.canned:
                status, answer = registry.canned[(method, url.path)]
                self._send(status, answer)
                return
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                raise _Error(422, 422, "Unrecognized request body (not JSON)") from None
            self._send(200, registry.answer(method, url.path, query, body))
        except _Error as exc:
            self._send(exc.status, {"error_code": exc.code, "message": exc.message})

    def _authorized(self, users: dict[str, str]) -> bool:
        header = self.headers.get("Authorization") or ""
        if not header.startswith("Basic "):
            return False
        try:
            user, _, password = base64.b64decode(header[6:]).decode().partition(":")
        except ValueError:
            return False
        return users.get(user) == password

    def _send(self, status: int, answer: Any) -> None:
        data = (answer if isinstance(answer, _RawSchema) else json.dumps(answer)).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - http.server's names
        self._handle("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._handle("POST")

    def do_PUT(self) -> None:  # noqa: N802
        self._handle("PUT")

    def do_DELETE(self) -> None:  # noqa: N802
        self._handle("DELETE")
