import cProfile, pstats, sys, time
sys.path.insert(0, sys.argv[1])
import pyarrow as pa
from kproto import Admin, Consumer, Producer
from kproto.testing import TansuBroker
n = 300_000
t = pa.table({"key": pa.array([b"k%015d" % i for i in range(n)], pa.binary()),
              "value": pa.array([b"x" * 100] * n, pa.binary())})
with TansuBroker() as b:
    with Admin(bootstrap_servers=b.bootstrap) as a:
        a.create_topics({"t": 4})
    with Producer(bootstrap_servers=b.bootstrap, compression_type="lz4") as p:
        p.send_batch("t", t).result(300)
    with Consumer(bootstrap_servers=b.bootstrap) as c:
        ends = c.end_offsets([("t", p) for p in range(4)])
        rng = {tp.partition: (0, e) for tp, e in ends.items()}
        c.read_range("t", rng)
        best = 1e9
        for _ in range(3):
            t0 = time.perf_counter(); c.read_range("t", rng); best = min(best, time.perf_counter() - t0)
        print("best", round(n / best / 1e6, 2), "M/s")
        pr = cProfile.Profile(); pr.enable()
        for _ in range(3):
            c.read_range("t", rng)
        pr.disable()
        pstats.Stats(pr).sort_stats("tottime").print_stats(14)
