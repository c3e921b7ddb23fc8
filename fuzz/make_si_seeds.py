#!/usr/bin/env python3
"""Writes the raw-mode seeds of the si_requests target (fuzz/corpus/si_requests/).

A seed is a header byte (bit 3 set: raw mode; bits 0-1 the config; bit 2
predicates) then frames [kind, len_lo, len_hi, protobuf bytes], kind 0
AllocationRequest, 1 NodeRequest, 2 ApplicationRequest, 3 register. The
protobuf is encoded here by hand from si-proto/si.proto's field numbers.
Run from anywhere: python3 fuzz/make_si_seeds.py
"""
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "si_requests")


def varint(n):
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def key(num, wire):
    return varint(num << 3 | wire)


def f_int(num, v):
    return key(num, 0) + varint(v) if v else b""


def f_bytes(num, b):
    return key(num, 2) + varint(len(b)) + b


def f_str(num, s):
    return f_bytes(num, s.encode()) if s else b""


def f_msg(num, m):
    return f_bytes(num, m)


def f_map(num, entries):
    return b"".join(f_msg(num, k + v) for k, v in entries)


def resource(**q):
    # Resource{1: map<string, Quantity{1: int64}>}
    return f_map(1, [(f_str(1, k), f_msg(2, f_int(1, v))) for k, v in q.items()])


def node(node_id, action, mem, vcore, partition=None, existing=()):
    attrs = [(f_str(1, "si/node-partition"), f_str(2, partition))] if partition else []
    return (f_str(1, node_id) + f_int(2, action) + f_map(3, attrs)
            + f_msg(4, resource(memory=mem, vcore=vcore))
            + b"".join(f_msg(6, a) for a in existing))


def node_request(*nodes):
    return b"".join(f_msg(1, n) for n in nodes) + f_str(2, "rm-fuzz")


def add_app(app, queue, user="alice", partition=""):
    ugi = f_str(1, user) + f_str(2, "dev")
    return f_str(1, app) + f_str(2, queue) + f_str(3, partition) + f_msg(4, ugi)


def app_request(new=(), remove=()):
    rm = b"".join(f_msg(2, f_str(1, a)) for a in remove)
    return b"".join(f_msg(1, a) for a in new) + rm + f_str(3, "rm-fuzz")


def ask(key_, app, mem, vcore, max_=1, priority=0, placeholder=False):
    return (f_str(1, key_) + f_str(2, app) + f_msg(4, resource(memory=mem, vcore=vcore))
            + f_int(5, max_) + f_int(6, priority) + f_int(10, int(placeholder)))


def allocation(key_, app, node_id, alloc_id, mem, vcore):
    return (f_str(1, key_) + f_msg(5, resource(memory=mem, vcore=vcore))
            + f_str(8, node_id) + f_str(9, app) + f_str(13, alloc_id))


def alloc_request(asks=(), releases=b"", allocations=()):
    return (b"".join(f_msg(1, a) for a in asks)
            + (f_msg(2, releases) if releases else b"")
            + f_str(3, "rm-fuzz") + b"".join(f_msg(4, a) for a in allocations))


def release_alloc(app, key_="", alloc_id="", termination=1):
    return f_msg(1, f_str(2, app) + f_int(4, termination) + f_str(6, key_) + f_str(7, alloc_id))


def release_ask(app, key_=""):
    return f_msg(2, f_str(2, app) + f_str(3, key_) + f_int(4, 1))


def register(config):
    return f_str(1, "rm-fuzz") + f_str(3, "queues") + f_str(5, config)


def frame(kind, payload):
    return bytes([kind]) + struct.pack("<H", len(payload)) + payload


def seed(name, head, *frames):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(bytes([head | 8]) + b"".join(frames))


ALLOC, NODE, APP, REG = 0, 1, 2, 3
CREATE, UPDATE, DRAIN, DECOM, UNDRAIN, CREATE_DRAIN = 1, 2, 3, 4, 5, 6
os.makedirs(OUT, exist_ok=True)
two_nodes = frame(NODE, node_request(node("node-0", CREATE, 100_000_000, 10_000),
                                     node("node-1", CREATE, 50_000_000, 4_000)))
app0 = frame(APP, app_request(new=[add_app("app-0", "root.a")]))
seed("raw-allocate", 0, two_nodes, app0,
     frame(ALLOC, alloc_request(asks=[ask("ask-0", "app-0", 10_000_000, 1_000, max_=3)])))
seed("raw-release", 0, two_nodes, app0,
     frame(ALLOC, alloc_request(asks=[ask("ask-1", "app-0", 10_000_000, 1_000, max_=2)])),
     frame(ALLOC, alloc_request(releases=release_alloc("app-0", "ask-1", "ask-1-0"))),
     frame(ALLOC, alloc_request(releases=release_ask("app-0", "ask-1"))),
     frame(APP, app_request(remove=["app-0"])))
seed("raw-queue-max", 0, two_nodes, app0,
     frame(ALLOC, alloc_request(asks=[ask("ask-2", "app-0", 60_000_000, 6_000, max_=4, priority=5)])))
seed("raw-recovery", 1,
     frame(NODE, node_request(node("node-2", CREATE, 100_000_000, 10_000,
                                   existing=[allocation("ask-3", "app-1", "node-2", "ask-3-0",
                                                        5_000_000, 500)]))),
     frame(APP, app_request(new=[add_app("app-1", "root.a", "bob")])),
     frame(ALLOC, alloc_request(allocations=[allocation("ask-3", "app-1", "node-2", "ask-3-1",
                                                        5_000_000, 500)])),
     frame(ALLOC, alloc_request(asks=[ask("ask-3", "app-1", 5_000_000, 500, max_=3)])))
seed("raw-drain", 4, two_nodes, app0,
     frame(ALLOC, alloc_request(asks=[ask("ask-4", "app-0", 90_000_000, 9_000)])),
     frame(NODE, node_request(node("node-0", DRAIN, 100_000_000, 10_000))),
     frame(NODE, node_request(node("node-0", UNDRAIN, 100_000_000, 10_000))),
     frame(NODE, node_request(node("node-1", UPDATE, 10_000_000, 1_000))),
     frame(NODE, node_request(node("node-1", DECOM, 0, 0))))
seed("raw-gpu-partition", 1,
     frame(NODE, node_request(node("node-3", CREATE_DRAIN, 10_000_000, 1_000, partition="gpu"))),
     frame(APP, app_request(new=[add_app("app-2", "root.a", partition="gpu"),
                                 add_app("app-3", "", "carol")])),
     frame(ALLOC, alloc_request(asks=[ask("ask-5", "app-3", 1_000_000, 100)])))
seed("raw-bad-input", 2, two_nodes,
     frame(APP, app_request(new=[add_app("app-4", "root.unknown"), add_app("app-5", "root.b", "")])),
     frame(ALLOC, alloc_request(asks=[ask("ask-6", "app-9", -1, 100),
                                      ask("", "app-4", 1, 1, max_=-2)])),
     frame(ALLOC, alloc_request(releases=release_alloc("app-4", alloc_id="nope-0"))),
     frame(NODE, node_request(node("node-0", CREATE, 1, 1), node("node-7", 9, 1, 1))))
seed("raw-register", 0, two_nodes, app0,
     frame(REG, register("partitions:\n  - name: default\n    queues:\n      - name: root\n"
                         "        submitacl: '*'\n        queues:\n          - name: a\n")),
     frame(ALLOC, alloc_request(asks=[ask("ask-7", "app-0", 1_000_000, 100)])),
     frame(REG, register("partitions: [")))
# Structured-mode seeds: arbitrary reads these as operation lists.
for i, body in enumerate([bytes(range(0, 200, 3)), bytes(range(255, 0, -2)),
                          b"\x01\x00\x00\x00" * 40, bytes((i * 37 + 11) % 256 for i in range(300))]):
    with open(os.path.join(OUT, f"ops-{i}"), "wb") as f:
        f.write(bytes([i & 7]) + body)
