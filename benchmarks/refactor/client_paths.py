"""One tree's client paths on a Tansu broker: send_batch, poll_batch, read_range (M records/s)."""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import pyarrow as pa
from kproto import Admin, Consumer, Producer
from kproto.testing import TansuBroker
n = int(sys.argv[2]) if len(sys.argv) > 2 else 500_000
t = pa.table({"key": pa.array([b"k%015d" % i for i in range(n)], pa.binary()),
              "value": pa.array([b"x" * 100] * n, pa.binary())})
out = {}
with TansuBroker() as b:
    with Admin(bootstrap_servers=b.bootstrap) as a:
        a.create_topics({"t": 4})
    with Producer(bootstrap_servers=b.bootstrap, compression_type="lz4") as p:
        t0 = time.perf_counter(); p.send_batch("t", t).result(300); out["send_batch"] = n / (time.perf_counter() - t0) / 1e6
    with Consumer(bootstrap_servers=b.bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=50) as c:
        c.assign([("t", p) for p in range(4)])
        got = 0; t0 = time.perf_counter()
        while got < n:
            got += c.poll_batch(1000).num_rows
        out["poll_batch"] = n / (time.perf_counter() - t0) / 1e6
        ends = c.end_offsets([("t", p) for p in range(4)])
        t0 = time.perf_counter()
        rows = c.read_range("t", {tp.partition: (0, e) for tp, e in ends.items()}).num_rows
        assert rows == n
        out["read_range"] = n / (time.perf_counter() - t0) / 1e6
print(json.dumps(out))
