"""What ``kproto consume`` and ``produce`` show and write besides the records: the
progress line (tqdm, on a terminal only), values decoded from Confluent's wire
format (``--format avro|json|protobuf --registry URL``) and the Parquet file of
``-o``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from typing import Any

from .cli_args import CliError, UsageError

__all__ = ["progress_bar", "typed_decoder", "write_parquet", "jsonable"]


def progress_bar(total: int | None, enabled: bool, unit: str = "rec") -> Any:
    """A tqdm line on stderr: count, rate and (against ``total``) the ETA; nothing
    unless ``enabled`` (the default on a terminal)."""
    from tqdm import tqdm

    return tqdm(total=total, unit=unit, unit_scale=True, disable=not enabled,
                file=sys.stderr, mininterval=0.2, dynamic_ncols=True)


#: --format values that decode Confluent-framed values (json: with --registry)
_TYPED = ("avro", "protobuf", "json")


def typed_decoder(args: argparse.Namespace) -> Any:
    """A function decoding each batch's values (--format avro|protobuf|json with
    --registry), or None: the values stay bytes."""
    fmt = args.format
    if fmt not in _TYPED or (fmt == "json" and not args.registry):
        if args.registry:
            raise UsageError(f"--registry is for --format avro, json or protobuf, not {fmt}")
        return None
    if not args.registry:
        raise UsageError(f"--format {fmt} needs --registry URL (the Schema Registry)")
    import pyarrow as pa

    from . import formats
    from .schema_registry import SchemaRegistryClient

    client = SchemaRegistryClient(args.registry)

    def decode(batch: Any) -> Any:
        i = batch.schema.get_field_index("value")
        return pa.RecordBatch.from_arrays(
            [*batch.columns[:i], formats.decode(batch.column(i), fmt, registry=client),
             *batch.columns[i + 1:]], names=batch.schema.names)

    return decode


def write_parquet(path: str, batches: Iterator[Any]) -> None:
    import pyarrow.parquet as pq

    from . import records

    writer = None
    written = 0
    try:
        for batch in batches:
            if writer is None:
                writer = pq.ParquetWriter(path, batch.schema)
            elif batch.schema != writer.schema.to_arrow_schema():
                raise CliError(f"{path}: the values' type changed mid-range (from "
                               f"{writer.schema.to_arrow_schema().field('value').type} to "
                               f"{batch.schema.field('value').type}): consume the ranges "
                               "of each schema apart")
            writer.write_batch(batch)
            written += batch.num_rows
        if writer is None:          # no records: a file of Kafka's columns
            writer = pq.ParquetWriter(path, records.decode(b"").to_arrow().schema)
    finally:
        if writer is not None:
            writer.close()
    print(f"wrote {written:,} records to {path}", file=sys.stderr)


def jsonable(value: Any) -> Any:
    """A decoded value JSON cannot hold as is: bytes as text, the rest as str()."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    return str(value)
