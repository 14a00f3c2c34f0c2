#!/usr/bin/env python3
"""One TCP stream between two emulated nodes of scripts/cluster.sh, to compare
the link's achieved rate with its tbf rate without MPI. Run as root with a
cluster up; prints Gbit/s. Usage: bench/cluster_tcp.py [MIB] [CLUSTER_NAME]
Node 2 listens on 10.77.0.2:5201, node 1 sends MIB MiB (default 256)."""
import subprocess
import sys
import time

mib = int(sys.argv[1]) if len(sys.argv) > 1 else 256
name = sys.argv[2] if len(sys.argv) > 2 else "scaleout"
RECV = """
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.77.0.2", 5201)); s.listen(1); print("ready", flush=True)
c, _ = s.accept(); n = 0
while True:
    b = c.recv(1 << 20)
    if not b: break
    n += len(b)
print(n, flush=True)
"""
SEND = """
import socket, sys, time
buf = b"x" * (1 << 20); s = socket.create_connection(("10.77.0.2", 5201))
t = time.perf_counter()
for _ in range(int(sys.argv[1])): s.sendall(buf)
s.shutdown(socket.SHUT_WR); s.recv(1); print(time.perf_counter() - t)
"""
rx = subprocess.Popen(["ip", "netns", "exec", name + "-node2", sys.executable, "-c", RECV],
                      stdout=subprocess.PIPE, text=True)
assert rx.stdout.readline().strip() == "ready"
secs = float(subprocess.check_output(["ip", "netns", "exec", name + "-node1", sys.executable, "-c", SEND,
                                      str(mib)], text=True))
got = int(rx.stdout.readline())
rx.wait()
assert got == mib << 20, got
print("%.3f Gbit/s (%d MiB in %.3f s)" % (got * 8 / secs / 1e9, mib, secs))
