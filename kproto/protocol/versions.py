"""API version negotiation, as pure functions of a broker's ApiVersions answer.

Every connection asks the broker which versions it speaks (ApiVersions) and
then uses, per API, the highest version both sides support. Ranges are per
connection: ask again after every reconnect.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from typing import Any

from ..errors import ErrorCode, UnsupportedVersionError
from .apis import APIS
from .keys import ApiKey
from .schema import Field

#: The versions kproto can encode and decode, per API key: (min, max).
API_VERSIONS: dict[int, tuple[int, int]] = {
    key: (api.versions.lo, api.versions.hi) for key, api in sorted(APIS.items())
}

PRODUCE, FETCH, API_VERSIONS_KEY = ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.API_VERSIONS
UNSUPPORTED_VERSION = ErrorCode.UNSUPPORTED_VERSION
#: Kafka 4.0 removed Produce v0-2 (KIP-896) but still advertises min 0
#: (KAFKA-18659, for librdkafka); v3 is the real floor on such brokers.
_PRODUCE_FLOOR_4X = 3
_FIRST_4X_PRODUCE_MAX = 12


def broker_ranges(api_versions: Mapping[Any, Any]) -> dict[int, tuple[int, int]]:
    """Normalise a decoded ApiVersions response (or a ``{key: (min, max)}`` map)
    into ``{key: (min, max)}``, applying known broker quirks."""
    if "api_keys" in api_versions:
        ranges = {int(a["api_key"]): (int(a["min_version"]), int(a["max_version"]))
                  for a in api_versions["api_keys"]}
    else:
        ranges = {int(k): (int(v[0]), int(v[1])) for k, v in api_versions.items()}
    produce = ranges.get(PRODUCE)
    if produce and produce[1] >= _FIRST_4X_PRODUCE_MAX and produce[0] < _PRODUCE_FLOOR_4X:
        ranges[PRODUCE] = (_PRODUCE_FLOOR_4X, produce[1])
    return ranges


def common_ranges(broker: Mapping[Any, Any],
                  ours: Mapping[int, tuple[int, int]] = API_VERSIONS) -> dict[int, tuple[int, int]]:
    """Per API, the versions both sides support (APIs without overlap are left out)."""
    out = {}
    for key, (blo, bhi) in broker_ranges(broker).items():
        if key in ours:
            lo, hi = max(blo, ours[key][0]), min(bhi, ours[key][1])
            if lo <= hi:
                out[key] = (lo, hi)
    return out


def negotiate(broker: Mapping[Any, Any],
              ours: Mapping[int, tuple[int, int]] = API_VERSIONS) -> dict[int, int]:
    """Pick, per API, the highest version both kproto and the broker support.

    ``broker`` is a decoded ApiVersions response body or ``{api_key: (min, max)}``.

    >>> negotiate({3: (0, 12), 1: (4, 17)})
    {3: 12, 1: 17}
    """
    return {key: hi for key, (lo, hi) in common_ranges(broker, ours).items()}


def pick(negotiated: Mapping[int, int], api_key: int) -> int:
    """The negotiated version of ``api_key``; raises if the broker lacks the API."""
    try:
        return negotiated[api_key]
    except KeyError:
        name = APIS[api_key].name if api_key in APIS else f"API {api_key}"
        raise UnsupportedVersionError(
            f"the broker supports no version of {name} that kproto speaks "
            f"(kproto: {API_VERSIONS.get(api_key)})") from None


def api_versions_retry(response: Mapping[str, Any], requested: int) -> int | None:
    """After an ApiVersions request at ``requested`` got UNSUPPORTED_VERSION,
    the version to retry with (the broker lists its own ApiVersions range in
    the error response; without it, fall back to v0). None if no retry applies."""
    if response.get("error_code") != UNSUPPORTED_VERSION or requested == 0:
        return None
    for entry in response.get("api_keys") or ():
        if entry["api_key"] == API_VERSIONS_KEY:
            ours = API_VERSIONS[API_VERSIONS_KEY][1]
            return max(0, min(requested - 1, entry["max_version"], ours))
    return 0


# --------------------------------------------------------------------------- topic ids

def _id_for_name(fields: tuple[Field, ...]) -> Iterator[tuple[str, int]]:
    """(array, first version) for each request array of ``fields`` (at any depth)
    whose entries name their topic by ``topic_id`` from the version where the
    name field (``topic``/``name``) ends: from then on an id is all there is."""
    for f in fields:
        if not f.fields:
            continue
        names = {c.name: c for c in f.fields}
        topic_id = names.get("topic_id")
        name = names.get("topic") or names.get("name")
        if topic_id is not None and name is not None and name.type == "string" \
                and name.versions.hi + 1 == topic_id.versions.lo:
            yield f.name, topic_id.versions.lo
        yield from _id_for_name(f.fields)


#: api key -> first request version that names topics by id alone (Fetch v13,
#: Produce v13, OffsetCommit/OffsetFetch v10), derived from the declarations.
TOPIC_ID_VERSIONS: dict[int, int] = {
    key: min(v for _, v in found) for key, api in APIS.items()
    if (found := list(_id_for_name(api.request.fields)))
}


def _id_paths(fields: tuple[Field, ...], above: tuple[str, ...] = ()
              ) -> Iterator[tuple[str, ...]]:
    """The paths (array names from the top) of the request arrays whose entries
    have a ``topic_id``: where :func:`fillable` looks, not in every partition."""
    for f in fields:
        if f.type == "struct_array":
            path = (*above, f.name)
            if any(c.name == "topic_id" for c in f.fields):
                yield path
            yield from _id_paths(f.fields, path)


#: api key -> the paths of its request's arrays of entries with a topic_id
#: (() : the request itself)
TOPIC_ID_PATHS: dict[int, tuple[tuple[str, ...], ...]] = {
    key: ((), *_id_paths(APIS[key].request.fields)) for key in TOPIC_ID_VERSIONS}


def _unknown_topic_ids(value: Any, path: tuple[str, ...]) -> bool:
    """Whether a ``topic_id`` of an entry at ``path`` of the request fields
    ``value`` is missing or zero."""
    if isinstance(value, list):
        return any(_unknown_topic_ids(v, path) for v in value)
    if not isinstance(value, dict):
        return False
    if path:
        return _unknown_topic_ids(value.get(path[0]), path[1:])
    if "topic_id" not in value:
        return False
    tid = value["topic_id"]
    return tid is None or (isinstance(tid, uuid.UUID) and not tid.int)


def fillable(api_key: int, version: int, fields: Any,
             broker: Mapping[int, tuple[int, int]] | None = None) -> int:
    """The version to send ``fields`` with: ``version`` (the negotiated one), or
    the newest before topic ids replaced names when a topic in the request has
    no id (all-zero: a broker that does not assign ids, or a topic that predates
    them) - the rule of Kafka's Java client (e.g. FetchRequest.Builder uses
    topic-id versions only when every topic has an id). Raises
    UnsupportedVersionError when the broker (``broker``: its ranges) speaks no
    version that names topics."""
    first = TOPIC_ID_VERSIONS.get(api_key)
    if first is None or version < first or not isinstance(fields, dict) \
            or not any(_unknown_topic_ids(fields, p) for p in TOPIC_ID_PATHS[api_key]):
        return version
    lowest = (broker or {}).get(api_key, (0, 0))[0]
    if first - 1 < max(lowest, API_VERSIONS[api_key][0]):
        raise UnsupportedVersionError(
            f"{APIS[api_key].name}: a topic in the request has no topic id, and the broker "
            f"speaks only versions {lowest}+, which name topics by id (from v{first})")
    return first - 1
