"""Config providers: ``${provider:path:key}`` in settings, read where the client runs.

Kafka's clients let a setting name where a value is kept instead of holding it
(KIP-297, KIP-887), and kproto reads the same settings::

    config.providers=env,file
    config.providers.env.class=org.apache.kafka.common.config.provider.EnvVarConfigProvider
    config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider
    sasl.jaas.config=...PlainLoginModule required username="etl" password="${env:KAFKA_PASSWORD}";
    ssl.truststore.password=${file:/etc/kafka/secrets.properties:truststore.password}

The providers (Java's class names, or just ``env``, ``file``, ``directory``):

- ``EnvVarConfigProvider``: ``${env:NAME}``, an environment variable (KIP-887;
  ``config.providers.<name>.param.allowlist.pattern`` limits which);
- ``FileConfigProvider``: ``${file:PATH:KEY}``, KEY of the Java properties file PATH;
- ``DirectoryConfigProvider``: ``${dir:DIR:FILE}``, the text of the file FILE in DIR
  (Kubernetes secrets mounted as files).

``config.providers.<name>.param.allowed.paths`` (KIP-993) limits the files and
directories read. A placeholder whose provider is not configured stays as it
is (as in Java: a password may contain ``${``); one whose provider is
configured but has no such value is a ConfigError naming the placeholder.

Secrets stay placeholders in resolved settings (:func:`kproto.config.resolve`)
and are read only when a connection's TLS and SASL are built
(:func:`expand_secrets`), so the settings a Spark driver ships to its executors
carry ``${env:KAFKA_PASSWORD}``, not the password: each executor reads it from
its own environment or files.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from .errors import ConfigError

__all__ = ["ConfigProviders", "PROVIDER_CLASSES"]

#: Java's ConfigTransformer pattern: ${provider:[path:]key}
_PLACEHOLDER = re.compile(r"\$\{([^}]*?):(?:([^}]*?):)?([^}]*?)\}")
_JAVA = "org.apache.kafka.common.config.provider."
#: Provider class names (Java's, and short ones) -> kind.
PROVIDER_CLASSES = {
    _JAVA + "EnvVarConfigProvider": "env", "EnvVarConfigProvider": "env", "env": "env",
    _JAVA + "FileConfigProvider": "file", "FileConfigProvider": "file", "file": "file",
    _JAVA + "DirectoryConfigProvider": "directory", "DirectoryConfigProvider": "directory",
    "directory": "directory", "dir": "directory",
}
_MAX_FILE = 1 << 20


class ConfigProviders:
    """The providers named by ``config.providers`` and their classes and params
    (``{"names": "env,file", "env.class": ..., "file.param.allowed.paths": ...}``,
    the part after ``config.providers.``)."""

    def __init__(self, spec: Mapping[str, str]) -> None:
        self.kinds: dict[str, str] = {}
        self.params: dict[str, dict[str, str]] = {}
        names = [n.strip() for n in str(spec.get("names") or "").split(",") if n.strip()]
        for name in names:
            cls = spec.get(f"{name}.class")
            if not cls:
                raise ConfigError(f"config.providers names {name!r} but "
                                  f"config.providers.{name}.class is not set")
            kind = PROVIDER_CLASSES.get(str(cls).strip())
            if kind is None:
                raise ConfigError(f"config.providers.{name}.class {cls!r} is not a provider "
                                  "kproto has (EnvVarConfigProvider, FileConfigProvider, "
                                  "DirectoryConfigProvider)")
            self.kinds[name] = kind
            prefix = f"{name}.param."
            self.params[name] = {k[len(prefix):]: str(v) for k, v in spec.items()
                                 if k.startswith(prefix)}
        for key in spec:
            if key != "names" and key.split(".", 1)[0] not in self.kinds:
                raise ConfigError(f"config.providers.{key} is set but config.providers does "
                                  "not name that provider")

    def __bool__(self) -> bool:
        return bool(self.kinds)

    def expand(self, option: str, value: Any) -> Any:
        """``value`` with every placeholder of a configured provider replaced."""
        if not isinstance(value, str) or "${" not in value or not self.kinds:
            return value

        def one(m: re.Match[str]) -> str:
            name, path, key = m.group(1), m.group(2), m.group(3)
            kind = self.kinds.get(name)
            if kind is None:
                return m.group(0)        # not a provider of ours: left as written (Java)
            where = f"{option}'s ${{{name}:{path + ':' if path else ''}{key}}}"
            params = self.params[name]
            if kind == "env":
                if path:
                    raise ConfigError(f"{where}: the env provider takes ${{{name}:NAME}}")
                allow = params.get("allowlist.pattern")
                if allow is not None and not re.fullmatch(allow, key):
                    raise ConfigError(f"{where}: {key} is not allowed by "
                                      f"config.providers.{name}.param.allowlist.pattern")
                found = os.environ.get(key)
                if found is None:
                    raise ConfigError(f"{where}: no environment variable {key}")
                return found
            if not path:
                raise ConfigError(f"{where}: the {kind} provider takes "
                                  f"${{{name}:{'FILE' if kind == 'file' else 'DIR'}:KEY}}")
            target = Path(path) if kind == "file" else Path(path) / key
            self._check_allowed(name, target, where)
            text = _read(target, where)
            if kind == "directory":
                return text
            props = parse_properties(text)
            if key not in props:
                raise ConfigError(f"{where}: {path} has no key {key!r}")
            return props[key]

        return _PLACEHOLDER.sub(one, value)

    def _check_allowed(self, name: str, target: Path, where: str) -> None:
        allowed = self.params[name].get("allowed.paths")
        if allowed is None:
            return
        real = os.path.realpath(target)
        roots = [os.path.realpath(p.strip()) for p in allowed.split(",") if p.strip()]
        if not any(real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in roots):
            raise ConfigError(f"{where}: {target} is outside "
                              f"config.providers.{name}.param.allowed.paths")


def _read(path: Path, where: str) -> str:
    try:
        if not path.is_file():
            raise ConfigError(f"{where}: {path} is not a file")
        if path.stat().st_size > _MAX_FILE:
            raise ConfigError(f"{where}: {path} is larger than {_MAX_FILE} bytes")
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ConfigError(f"{where}: cannot read {path}: {reason}") from None


def parse_properties(text: str) -> dict[str, str]:
    """A Java ``.properties`` text (``key=value``, ``key: value`` or ``key value``;
    ``#``/``!`` comments; a trailing backslash continues the line; ``\\t \\n \\uXXXX``
    escapes), as ``java.util.Properties.load`` reads it (its LineReader, ported)."""
    out: dict[str, str] = {}
    for line in _logical_lines(text):
        key, value = _split_property(line)
        out[_unescape(key)] = _unescape(value)
    return out


def _logical_lines(text: str) -> Iterator[str]:
    """Java's ``Properties.LineReader``: logical lines, continuations joined, leading
    white space, blank and comment lines skipped."""
    i, n = 0, len(text)
    while True:
        buf: list[str] = []
        skip_white, appended, backslash = True, False, False
        while True:
            if i >= n:
                if buf:
                    yield "".join(buf[:-1] if backslash else buf)
                return
            c = text[i]
            i += 1
            if skip_white:
                if c in " \t\f" or (not appended and c in "\r\n"):
                    continue
                skip_white = appended = False
            if not buf and c in "#!":              # a comment: to the end of its line
                while i < n and text[i] not in "\r\n":
                    i += 1
                if i >= n:
                    return
                i += 1
                skip_white = True
                continue
            if c not in "\r\n":
                buf.append(c)
                backslash = not backslash if c == "\\" else False
                continue
            if not buf:
                skip_white = True
                continue
            if i >= n:
                yield "".join(buf[:-1] if backslash else buf)
                return
            if not backslash:
                yield "".join(buf)
                break
            buf.pop()                              # line\ + line break: continued
            skip_white = appended = True
            backslash = False
            if c == "\r" and text[i] == "\n":
                i += 1


def _split_property(line: str) -> tuple[str, str]:
    i, n = 0, len(line)
    while i < n:
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=: \t\f":
            break
        i += 1
    key, rest = line[:i], line[i:]
    rest = rest.lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return key, rest


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c != "\\" or i + 1 == len(text):
            out.append(c)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2:i + 6]):
            out.append(chr(int(text[i + 2:i + 6], 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)
