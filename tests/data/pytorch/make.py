#!/usr/bin/env python3
"""Writes the PyTorch Flight Recorder dumps that the pickle reader's tests use.

A small dump of one rank, in the schema of PyTorch's Flight Recorder
(version "2.10"), pickled with protocols 2, 4 and 5 and written as JSON
(the reader must turn each pickle into exactly that JSON), the same dump
with no entries yet (fr-empty.pickle), and cases.json,
the unit test's table of small pickles with the JSON or the error each must
give. The output is the same on every run, so the committed files can be
checked with

    python3 tests/data/pytorch/make.py && git diff --exit-code tests/data/pytorch

With --bench N FILE it writes instead a dump of N entries shaped the same
way (protocol 2, as PyTorch's C++ writer uses, or --protocol P), for
benchmarks.
"""

import argparse
import datetime
import json
import os
import pickle
import pickletools

BASE_NS = 1_700_000_000_000_000_000

# Stack frames are shared between entries, as in PyTorch's dumps, where the
# pickler writes each frame once and refers back to it.
FRAMES = [
    {"name": "all_reduce", "filename": "/opt/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", "line": 2806},
    {"name": "wrapper", "filename": "/opt/venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py", "line": 81},
    {"name": "_reduce_grads", "filename": "/home/jürgen/train.py", "line": 142},
    {"name": "train_step", "filename": "/home/jürgen/train.py", "line": 201},
    {"name": "main", "filename": "/home/jürgen/train.py", "line": 260},
    {"name": "<module>", "filename": "/home/jürgen/train.py", "line": 275},
    {"name": "send", "filename": "/opt/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", "line": 2360},
    {"name": "recv", "filename": "/opt/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", "line": 2417},
    {"name": "_pipeline_stage", "filename": "/home/jürgen/train.py", "line": 173},
    {"name": "broadcast", "filename": "/opt/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", "line": 2694},
]

STACKS = {
    "nccl:all_reduce": [0, 1, 2, 3, 4, 5],
    "nccl:broadcast": [9, 1, 3, 4, 5],
    "nccl:send 0->1": [6, 1, 8, 3, 4, 5],
    "nccl:recv 1->0": [7, 1, 8, 3, 4, 5],
}


def entry(i, n, rank):
    """The i-th of n entries: mostly completed all_reduces, then p2p, the last still running."""
    p2p = i % 7 == 5
    if p2p:
        name = "nccl:send 0->1" if i % 2 else "nccl:recv 1->0"
        pg = ("1", "pipeline")
    elif i % 11 == 3:
        name = "nccl:broadcast"
        pg = ("0", "default_pg")
    else:
        name = "nccl:all_reduce"
        pg = ("0", "default_pg")
    created = BASE_NS + i * 2_500_000 + rank * 1_000
    if i == n - 1:
        state, started, completed = "started", created + 40_000, None
    elif i == n - 2:
        state, started, completed = "scheduled", None, None
    else:
        state, started, completed = "completed", created + 40_000, created + 900_000
    numel = 1 << (10 + i % 12)
    return {
        "record_id": i,
        "pg_id": int(pg[0]),
        "process_group": pg,
        "collective_seq_id": 0 if p2p else i + 1,
        "p2p_seq_id": i + 1 if p2p else 0,
        "op_id": i + 1,
        "profiling_name": name,
        "time_created_ns": created,
        "duration_ms": 0.8125 if state == "completed" else None,
        "input_sizes": [[numel]] if p2p else [[4, numel // 4]],
        "input_dtypes": ["Float"] if i % 3 else ["BFloat16"],
        "output_sizes": [[numel]] if p2p else [[4, numel // 4]],
        "output_dtypes": ["Float"] if i % 3 else ["BFloat16"],
        "state": state,
        "time_discovered_started_ns": started,
        "time_discovered_completed_ns": completed,
        "retired": state == "completed",
        "timeout_ms": 600_000,
        "is_p2p": p2p,
        "frames": [FRAMES[k] for k in STACKS[name]],
        "thread_id": 140_245_318_461_248,
        "thread_name": "pt_main_thread",
    }


def dump(n, rank=0):
    """A rank's dump with n entries."""
    entries = [entry(i, n, rank) for i in range(n)]
    last = [e["collective_seq_id"] for e in entries if not e["is_p2p"]]
    done = [e["collective_seq_id"] for e in entries
            if not e["is_p2p"] and e["state"] == "completed"]
    started = [e["collective_seq_id"] for e in entries
               if not e["is_p2p"] and e["state"] != "scheduled"]
    return {
        "version": "2.10",
        "comm_lib_version": "2.21.5",
        "pg_config": {
            # Dumps write ranks as a string; older ones as a list.
            "0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2, 3]"},
            "1": {"name": "1", "desc": "pipeline", "ranks": [0, 1]},
        },
        "pg_status": {
            "0": {
                "last_enqueued_collective": max(last, default=-1),
                "last_started_collective": max(started, default=-1),
                "last_completed_collective": max(done, default=-1),
            },
            "1": {
                "last_enqueued_collective": -1,
                "last_started_collective": -1,
                "last_completed_collective": -1,
            },
        },
        "entries": entries,
    }


# ---------------------------------------------------------------------------
# One dump as each version of the schema writes it (versions/), for the
# reader's test of every version's quirks. The same operations in each:
# dump(9) with its entries #1 and #2 made an all_gather_into_tensor and a
# reduce_scatter_tensor over the four ranks of group "0" (the output four
# times the input, and the other way round), and a pg_status that knows
# three collectives of group "1" which the ring lost.
#
#   2.3 .. 2.5  no library version; pg_status (new in 2.3) keyed by pg_id
#   2.6, 2.7    "nccl_version"
#   2.8         + "thread_id" (a string) and "thread_name" per entry
#   2.9         "xccl_version" (an XCCL build)
#   2.10        "comm_lib_version"
#
# Pickles (protocol 2, as PyTorch's C++ pickler writes): None for a time not
# known, "duration_ms" only for timed operations, "frames". JSON: the same
# times as 0, pg_status counts as strings ("-1"), no frames, keys sorted,
# "entries" left out when there are none. v2.10-split.json names its groups
# apart from their pg_ids ("group_name_0" is pg_id 0), has a pg_status no
# entry tells the group of, and writes ranks without spaces, as torchcomms
# does.
# ---------------------------------------------------------------------------

LIB_KEY = {"2.6": "nccl_version", "2.7": "nccl_version", "2.8": "nccl_version",
           "2.9": "xccl_version", "2.10": "comm_lib_version"}


def versioned(version, as_json=False, names=None):
    d = dump(9)
    for i, name, shape_in, shape_out in ((1, "nccl:_allgather_base", [256], [1024]),
                                         (2, "nccl:_reduce_scatter_base", [1024], [256])):
        e = d["entries"][i]
        e["profiling_name"] = name
        e["input_sizes"], e["output_sizes"] = [shape_in], [shape_out]
    d["pg_status"]["1"] = {"last_enqueued_collective": 3, "last_started_collective": 3,
                           "last_completed_collective": 3}
    del d["comm_lib_version"]
    if version in LIB_KEY:
        d[LIB_KEY[version]] = "2.21.5"
    d["version"] = version
    minor = int(version.split(".")[1])
    for e in d["entries"]:
        if e["duration_ms"] is None:
            del e["duration_ms"]
        if minor < 8:
            del e["thread_id"], e["thread_name"]
        else:
            e["thread_id"] = str(e["thread_id"])
        if as_json:
            del e["frames"]
            for k in ("time_discovered_started_ns", "time_discovered_completed_ns"):
                e[k] = e[k] or 0
    if as_json:
        d["pg_status"] = {g: {k: str(v) for k, v in st.items()}
                          for g, st in d["pg_status"].items()}
    # Every version writes ranks as a string.
    for c in d["pg_config"].values():
        c["ranks"] = str(c["ranks"])
    if names:
        d["pg_config"] = {names[g]: dict(c, name=names[g], ranks=c["ranks"].replace(" ", ""))
                          for g, c in d["pg_config"].items()}
        for e in d["entries"]:
            e["process_group"] = (names[e["process_group"][0]], e["process_group"][1])
    return d


def write_versions(here):
    out = os.path.join(here, "versions")
    os.makedirs(out, exist_ok=True)
    for v in ("2.3", "2.4", "2.5", "2.6", "2.7", "2.8", "2.9", "2.10"):
        write(os.path.join(out, f"v{v}.pickle"), pickle.dumps(versioned(v), protocol=2))
    for v in ("2.4", "2.7", "2.10"):
        text = json.dumps(versioned(v, as_json=True), sort_keys=True)
        write(os.path.join(out, f"v{v}.json"), text.encode())
    split = versioned("2.10", as_json=True, names={"0": "group_name_0", "1": "group_name_1"})
    # A group named "2" with no entries, and pg_status of pg_id 2, which no
    # entry carries: with names apart from pg_ids, not the same group.
    split["pg_config"]["2"] = {"name": "2", "desc": "other", "ranks": "[0,1,2,3]"}
    split["pg_status"]["2"] = {"last_enqueued_collective": "50", "last_started_collective": "50",
                               "last_completed_collective": "50"}
    write(os.path.join(out, "v2.10-split.json"), json.dumps(split, sort_keys=True).encode())
    empty = versioned("2.10", as_json=True)
    del empty["entries"]
    write(os.path.join(out, "v2.10-empty.json"), json.dumps(empty, sort_keys=True).encode())


# ---------------------------------------------------------------------------
# Unit test cases for dumps/pickle.c: cases.json holds, for each case, the
# pickle (hex), where it came from, and either the JSON value the reader must
# produce ("json") or a piece of the error message it must give ("error").
# ---------------------------------------------------------------------------

def ref_text(s):
    """A str as the reader gives it: lone surrogates become U+FFFD."""
    return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in s)


def ref_float(f):
    if f != f:
        return "NaN"
    if f in (float("inf"), float("-inf")):
        return "Infinity" if f > 0 else "-Infinity"
    return f


def ref(obj):
    """The JSON value the reader must make of obj (the mapping in pickle.h)."""
    if obj is None or isinstance(obj, bool):
        return obj
    if isinstance(obj, int):
        return obj if -(1 << 63) <= obj < (1 << 63) else str(obj)
    if isinstance(obj, float):
        return ref_float(obj)
    if isinstance(obj, str):
        return ref_text(obj)
    if isinstance(obj, (bytes, bytearray)):
        return obj.hex()
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [ref(x) for x in obj]
    if isinstance(obj, dict):
        return {ref_key(k): ref(v) for k, v in obj.items()}
    raise TypeError(type(obj))


def ref_key(k):
    if isinstance(k, str):
        return ref_text(k)
    if k is None or isinstance(k, bool):
        return json.dumps(k)
    if isinstance(k, int):
        return str(k)
    if isinstance(k, float):
        v = ref_float(k)
        return v if isinstance(v, str) else repr(v)
    if isinstance(k, (bytes, bytearray)):
        return k.hex()
    return json.dumps(ref(k), ensure_ascii=False)


OK_OPCODES = {
    "MARK", "STOP", "POP", "POP_MARK", "DUP", "INT", "BININT", "BININT1", "LONG",
    "BININT2", "NONE", "BINUNICODE", "APPEND", "DICT", "EMPTY_DICT", "APPENDS",
    "GET", "BINGET", "LONG_BINGET", "LIST", "EMPTY_LIST", "PUT", "BINPUT",
    "LONG_BINPUT", "SETITEM", "TUPLE", "EMPTY_TUPLE", "SETITEMS", "BINFLOAT",
    "PROTO", "TUPLE1", "TUPLE2", "TUPLE3", "NEWTRUE", "NEWFALSE", "LONG1", "LONG4",
    "BINBYTES", "SHORT_BINBYTES", "SHORT_BINUNICODE", "BINUNICODE8", "BINBYTES8",
    "EMPTY_SET", "ADDITEMS", "FROZENSET", "MEMOIZE", "FRAME", "BYTEARRAY8",
}

DENIED = {
    "PERSID": 0x50, "BINPERSID": 0x51, "REDUCE": 0x52, "BUILD": 0x62,
    "GLOBAL": 0x63, "INST": 0x69, "OBJ": 0x6F, "NEWOBJ": 0x81, "EXT1": 0x82,
    "EXT2": 0x83, "EXT4": 0x84, "NEWOBJ_EX": 0x92, "STACK_GLOBAL": 0x93,
    "NEXT_BUFFER": 0x97, "READONLY_BUFFER": 0x98,
}

UNSUPPORTED = {"FLOAT": 0x46, "STRING": 0x53, "BINSTRING": 0x54,
               "SHORT_BINSTRING": 0x55, "UNICODE": 0x56}


class Thing:
    """A class instance, which no plain-data reader may build."""

    def __init__(self):
        self.x = 1


class Persistent(pickle.Pickler):
    def persistent_id(self, obj):
        return "p" if obj == "persist me" else None


def persistent_pickle(obj, proto):
    import io
    buf = io.BytesIO()
    Persistent(buf, protocol=proto).dump(obj)
    return buf.getvalue()


def cases():
    """(name, source, pickle bytes, expected JSON value or None, error or None)."""
    out = []

    def good(name, obj, *protos, expect=None):
        for proto in protos or (2, 4):
            data = pickle.dumps(obj, protocol=proto)
            out.append((f"{name} p{proto}", f"pickle.dumps({name}, protocol={proto})",
                        data, ref(obj) if expect is None else expect, None))

    def raw(name, data, expect=None, error=None, source="hand-assembled"):
        out.append((name, source, data, expect, error))

    # Scalars.
    for name, obj in [
        ("None", None), ("True", True), ("False", False),
        ("0", 0), ("255", 255), ("256", 256), ("65535", 65535), ("65536", 65536),
        ("-1", -1), ("-2**31", -(1 << 31)), ("2**31-1", (1 << 31) - 1),
        ("2**31", 1 << 31), ("-2**31-1", -(1 << 31) - 1),
        ("2**63-1", (1 << 63) - 1), ("-2**63", -(1 << 63)),
        ("2**63", 1 << 63), ("-2**63-1", -(1 << 63) - 1), ("2**64", 1 << 64),
        ("-2**64", -(1 << 64)), ("10**100", 10 ** 100), ("-10**100", -(10 ** 100)),
        ("2**2039", 1 << 2039), ("-2**2040", -(1 << 2040)),
        ("2**2400", 1 << 2400), ("-(2**8191)", -(1 << 8191)), ("2**8191-1", (1 << 8191) - 1),
        ("1.5", 1.5), ("-0.0", -0.0), ("1e300", 1e300), ("5e-324", 5e-324),
        ("nan", float("nan")), ("inf", float("inf")), ("-inf", float("-inf")),
        ("''", ""), ("'abc'", "abc"), ("'jürgen'", "jürgen"), ("'a\\0b'", "a\0b"),
        ("'x'*300", "x" * 300), ("'10 \u20ac'", "10 \u20ac"), ("'\\ud800'", "\ud800"),
        ("'a\\udc80b\\U0001f600'", "a\udc80b\U0001f600"),
        ("b''", b""), ("b'\\x00\\xff'", b"\x00\xff"), ("b'q'*300", b"q" * 300),
    ]:
        good(name, obj, *((2, 4) if not isinstance(obj, bytes) else (3, 4)))
    good("bytearray(b'ab')", bytearray(b"ab"), 5)

    # Containers and sharing.
    shared = [1]
    for name, obj in [
        ("[]", []), ("[1]", [1]), ("[1, 2]", [1, 2]), ("list(range(1001))", list(range(1001))),
        ("()", ()), ("(1,)", (1,)), ("(1, 2)", (1, 2)), ("(1, 2, 3)", (1, 2, 3)),
        ("(1, 2, 3, 4)", (1, 2, 3, 4)), ("{}", {}), ("{'a': 1}", {"a": 1}),
        ("{'a': 1, 'b': [2]}", {"a": 1, "b": [2]}),
        ("{'a': 1, 'a2': None} * dup keys", {"k": 1, "k2": 2}),
        ("[shared, shared]", [shared, shared]),
        ("(shared, [shared])", (shared, [shared])),
        ("['s%d' % i for i in range(300)] * 2", ["s%d" % i for i in range(300)] * 2),
        ("{1: 'a', -5: 'b', 2**70: 'c'}", {1: "a", -5: "b", 1 << 70: "c"}),
        ("{True: 1, False: 2, None: 3}", {True: 1, False: 2, None: 3}),
        ("{2.5: 1, -0.0: 2, 1e300: 3, 0.1: 4}", {2.5: 1, -0.0: 2, 1e300: 3, 0.1: 4}),
        ("{(0, 1): 'x', (): 'y', ('a', (1, 'b')): 'z'}", {(0, 1): "x", (): "y", ("a", (1, "b")): "z"}),
        ("[[[[[[]]]]]]", [[[[[[]]]]]]),
    ]:
        good(name, obj)
    for name, obj in [("set()", set()), ("{1, 2, 3}", {1, 2, 3}),
                      ("frozenset()", frozenset()), ("frozenset({1, 2})", frozenset({1, 2})),
                      ("{b'\\x01': b'\\x02'}", {b"\x01": b"\x02"}),
                      ("{b'\\x01': 1}", {b"\x01": 1}),
                      ("{frozenset(): 1, frozenset({3}): 2}", {frozenset(): 1, frozenset({3}): 2})]:
        good(name, obj, 4)
    deep = []
    for _ in range(255):
        deep = [deep]
    good("[[...]] 256 deep", deep)
    dict_deep = {}
    for _ in range(255):
        dict_deep = {"k": dict_deep}
    good("{'k': ...} 256 deep", dict_deep, 4)

    # Protocol 0 and 1 opcodes, behind a protocol 2 header (the reader wants one).
    x = [1]
    for name, obj in [("[x, x] with x = [1]", [x, x]), ("[True, False, None]", [True, False, None]),
                      ("[2**70, -2**70, 5]", [1 << 70, -(1 << 70), 5]),
                      ("{1: (2, 3)}", {1: (2, 3)}), ("[[]] * 3", [[]] * 3)]:
        for proto in (0, 1):
            data = b"\x80\x02" + pickle.dumps(obj, protocol=proto)
            raw(f"{name} p{proto}", data, ref(obj), source=f"b'\\x80\\x02' + pickle.dumps({name}, protocol={proto})")
    raw("INT with sign", b"\x80\x02(I+7\nI-7\nI0\nI70\nl.", [7, -7, 0, 70])
    raw("INT with a leading zero", b"\x80\x02I007\n.", error="offset 2: INT argument \"007\" is not a decimal integer")
    raw("LONG of int64 edges", b"\x80\x02(L9223372036854775807L\nL-9223372036854775808\n"
        b"L9223372036854775808L\nL-9223372036854775809\nL0L\nl.",
        [(1 << 63) - 1, -(1 << 63), str(1 << 63), str(-(1 << 63) - 1), 0])

    # Opcodes no pickler of protocols 2 to 5 writes for plain data.
    raw("BINUNICODE8", b"\x80\x04\x8d\x03\x00\x00\x00\x00\x00\x00\x00abc.", "abc")
    raw("BINBYTES8", b"\x80\x04\x8e\x02\x00\x00\x00\x00\x00\x00\x00\x01\xfe.", "01fe")
    raw("DUP", b"\x80\x02K\x012\x86.", [1, 1])
    raw("POP", b"\x80\x02K\x01K\x020.", 1)
    raw("POP of a MARK", b"\x80\x02K\x01(0.", 1)
    raw("POP_MARK", b"\x80\x02K\x01(K\x02K\x031.", 1)
    raw("PROTO again", b"\x80\x02\x80\x05K\x01.", 1)
    raw("FRAME of 0 bytes", b"\x80\x04\x95\x00\x00\x00\x00\x00\x00\x00\x00K\x01.", 1)
    raw("LONG1 of 0 bytes", b"\x80\x02\x8a\x00.", 0)
    raw("LONG1 of 9 bytes that fits", b"\x80\x02\x8a\x09" + (-5).to_bytes(9, "little", signed=True) + b".", -5)
    raw("LONG4 of 1024 bytes", b"\x80\x02\x8b\x00\x04\x00\x00" + (1 << 8183).to_bytes(1024, "little", signed=True) + b".",
        str(1 << 8183))
    raw("memo key replaced", b"\x80\x02K\x01q\x00K\x02q\x00\x86h\x00\x86.", [[1, 2], 2])
    raw("str not UTF-8", b"\x80\x04\x8c\x06a\xff\xc3(\xe0\x80.", "a\ufffd\ufffd(\ufffd\ufffd")
    raw("str with bad 3- and 4-byte forms",
        b"\x80\x04\x8c\x0e\xe0\x80\x80\xf0\x80\x80\x80\xf4\x90\x80\x80\xf0\x9f\x98.",
        "\ufffd" * 14 + "")
    raw("key not UTF-8", b"\x80\x04}\x8c\x02\xc3(Ns.", {"\ufffd(": None})

    # Refused: object-building opcodes, each named with its offset.
    for name, op in DENIED.items():
        raw(f"{name} refused", b"\x80\x04K\x01" + bytes([op]) + b"\x00\x00\x00\x00.",
            error=f"offset 4: opcode 0x{op:02x} ({name}) is not allowed: this reader only reads plain data")
    for name, op in UNSUPPORTED.items():
        raw(f"{name} refused", b"\x80\x04K\x01" + bytes([op]) + b"1\n.",
            error=f"offset 4: opcode 0x{op:02x} ({name}) is not supported")
    raw("unknown opcode", b"\x80\x04N\xff.", error="offset 3: unknown opcode 0xff")
    # Objects as Python pickles them: the first object-building opcode is refused.
    for name, obj, proto, op in [
        ("set()", set(), 2, "GLOBAL"),
        ("b'ab'", b"ab", 2, "GLOBAL"),
        ("bytearray(b'ab')", bytearray(b"ab"), 4, "STACK_GLOBAL"),
        ("datetime.date(2024, 1, 2)", datetime.date(2024, 1, 2), 4, "STACK_GLOBAL"),
        ("Thing()", Thing(), 2, "GLOBAL"),
        ("Thing()", Thing(), 4, "STACK_GLOBAL"),
        ("{'k': Thing()}", {"k": Thing()}, 5, "STACK_GLOBAL"),
    ]:
        data = pickle.dumps(obj, protocol=proto)
        first, at = next((o.name, pos) for o, a, pos in pickletools.genops(data) if o.name in DENIED)
        assert first == op, (name, first)
        raw(f"{name} p{proto}", data, source=f"pickle.dumps({name}, protocol={proto})",
            error=f"offset {at}: opcode 0x{DENIED[op]:02x} ({op}) is not allowed")
    data = persistent_pickle(["persist me"], 2)
    raw("persistent id p2", data, source="Pickler.persistent_id, protocol 2",
        error="(BINPERSID) is not allowed")
    data = pickle.dumps(pickle.PickleBuffer(b"ab"), protocol=5, buffer_callback=lambda b: False)
    raw("out-of-band buffer p5", data, source="PickleBuffer with buffer_callback",
        error="offset 2: opcode 0x97 (NEXT_BUFFER) is not allowed")

    # Refused: not a pickle this reader reads.
    raw("empty", b"", error="offset 0: not a pickle (empty input)")
    raw("JSON", b'{"version": "2.10"}', error="offset 0: not a pickle of protocol 2 to 5 (first byte 0x7b")
    raw("protocol 6", b"\x80\x06K\x01.", error="offset 0: not a pickle (protocol 6 unknown)")
    raw("protocol 1", b"\x80\x01K\x01.", error="offset 0: pickle protocol 1 is not read")
    raw("protocol 0 (no PROTO)", pickle.dumps([1], protocol=0), error="offset 0: not a pickle of protocol 2 to 5")
    raw("PROTO 6 later", b"\x80\x02\x80\x06K\x01.", error="offset 2: protocol 6 unknown")

    # Refused: malformed.
    raw("bytes after STOP", b"\x80\x02K\x01.K", error="offset 5: 1 bytes after STOP")
    raw("STOP with two items", b"\x80\x02K\x01K\x02.", error="offset 6: STOP with 2 items on the stack")
    raw("STOP on empty stack", b"\x80\x02.", error="offset 2: STOP with 0 items on the stack")
    raw("STOP with a MARK", b"\x80\x02K\x01(.", error="offset 5: STOP with 1 MARK open")
    raw("APPEND on empty stack", b"\x80\x02a.", error="offset 2: stack underflow: APPEND needs 2 items, 0 above the bottom")
    raw("APPEND across a MARK", b"\x80\x02](K\x01a.", error="offset 6: stack underflow: APPEND needs 2 items, 1 above the last MARK")
    raw("APPENDS without MARK", b"\x80\x02]K\x01e.", error="offset 5: APPENDS without a MARK")
    raw("APPENDS with no list", b"\x80\x02(K\x01e.", error="offset 5: stack underflow: APPENDS has no list below its items")
    raw("APPEND to an int", b"\x80\x02K\x01K\x02a.", error="offset 6: APPEND needs a list below its items, found an int")
    raw("APPEND to a tuple", b"\x80\x02)K\x02a.", error="offset 5: APPEND needs a list below its items, found a tuple")
    raw("SETITEM to a list", b"\x80\x02]K\x01K\x02s.", error="offset 7: SETITEM needs a dict below its items, found a list")
    raw("ADDITEMS to a frozenset", b"\x80\x04(\x91(K\x01\x90.", error="offset 7: ADDITEMS needs a set below its items, found a frozenset")
    raw("SETITEMS odd", b"\x80\x02}(K\x01u.", error="offset 6: SETITEMS with an odd number of items (1)")
    raw("DICT odd", b"\x80\x02(K\x01d.", error="offset 5: DICT with an odd number of items (1)")
    raw("TUPLE3 short", b"\x80\x02K\x01K\x02\x87.", error="offset 6: stack underflow: TUPLE3 needs 3 items, 2 above the bottom")
    raw("POP on empty stack", b"\x80\x020.", error="offset 2: stack underflow: POP needs 1 item")
    raw("DUP on empty stack", b"\x80\x022.", error="offset 2: stack underflow: DUP needs 1 item")
    raw("BINPUT on empty stack", b"\x80\x02q\x00.", error="offset 2: stack underflow: BINPUT needs 1 item")
    raw("BINGET unset", b"\x80\x02h\x03.", error="offset 2: memo key 3 is not set")
    raw("LONG_BINGET unset", b"\x80\x02N\x94j\x01\x00\x00\x00.", error="offset 4: memo key 1 is not set")
    raw("LONG_BINPUT out of order", b"\x80\x02Nr\x05\x00\x00\x00.", error="offset 3: memo key 5 is out of order (next is 0)")
    raw("LONG_BINPUT huge", b"\x80\x02Nr\xff\xff\xff\xff.", error="offset 3: memo key 4294967295 is out of order")
    raw("PUT not a number", b"\x80\x02Np1x\n.", error="offset 3: PUT argument \"1x\" is not a memo key")
    raw("GET without newline", b"\x80\x02Ng0", error="offset 3: truncated GET (no end of line)")
    raw("INT not a number", b"\x80\x02I12a\n.", error="offset 2: INT argument \"12a\" is not a decimal integer")
    raw("LONG of no digits", b"\x80\x02LL\n.", error="offset 2: LONG argument \"\" is not a decimal integer")
    raw("LONG of too many digits", b"\x80\x02L" + b"9" * 2468 + b"\n.", error="offset 2: LONG of 2468 digits is longer than 2467 digits")
    raw("LONG4 negative length", b"\x80\x02\x8b\xff\xff\xff\xff.", error="offset 2: LONG4 with a negative length")
    raw("LONG4 too long", b"\x80\x02\x8b\x01\x04\x00\x00" + b"\x01" * 1025 + b".",
        error="offset 2: LONG4 of 1025 bytes is longer than 1024 bytes")
    raw("BINUNICODE8 huge", b"\x80\x04\x8d\xff\xff\xff\xff\xff\xff\xff\xffabc.",
        error="offset 2: truncated BINUNICODE8 (needed 18446744073709551615 bytes, 4 left)")
    raw("FRAME longer than input", b"\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00N.",
        error="offset 2: truncated FRAME (needed 16 bytes, 2 left)")
    raw("BINFLOAT short", b"\x80\x02G\x00\x00\x00", error="offset 2: truncated BINFLOAT (needed 8 bytes, 3 left)")
    raw("no STOP", b"\x80\x02K\x01", error="offset 4: truncated (the input ends before STOP)")

    # Refused: cycles, changes to a container already inside another, depth.
    lst = []
    lst.append(lst)
    good_cycle = [("l = []; l.append(l)", lst)]
    d = {}
    d["self"] = d
    good_cycle.append(("d = {}; d['self'] = d", d))
    a = []
    a.append([a])
    good_cycle.append(("a = []; a.append([a])", a))
    t = ([],)
    t[0].append(t)
    good_cycle.append(("t = ([],); t[0].append(t)", t))
    for name, obj in good_cycle:
        for proto in (2, 4):
            data = pickle.dumps(obj, protocol=proto)
            raw(f"{name} p{proto}", data, source=f"pickle.dumps({name}, protocol={proto})", error="cycle")
    raw("DUP then APPEND", b"\x80\x02]2a.", error="offset 4: APPEND puts a list inside itself (cycles are refused)")
    raw("SETITEM of a dict into itself", b"\x80\x02}q\x00K\x01h\x00s.",
        error="offset 9: SETITEM puts a dict inside itself (cycles are refused)")
    # Lists 0..3 in the memo, then each appended into the one before: the
    # chain would be deeper than any height recorded when it was stored.
    chain = b"\x80\x02" + b"]q\x00]q\x01]q\x020" + b"0" + b"0"
    chain += b"h\x00h\x01a0" + b"h\x01h\x02a0" + b"N."
    raw("chain through the memo", chain, error="offset 24: APPEND changes a list that is already inside another container (refused: ")
    doubling = [0]
    for _ in range(40):
        doubling = [doubling, doubling]
    data = pickle.dumps(doubling, protocol=4)
    raw("x = [x, x] forty times p4", data, source="x = [0]; x = [x, x] 40 times, protocol 4",
        error=f"the data, its shared parts written out in full, has more than "
        f"{64 * len(data) + (1 << 20)} values (64 per byte of pickle)")
    key = ("k" * 1000,)
    for _ in range(18):
        key = (key, key)
    raw("{t: 1}, t a tuple of 2**18 shared strs p4", pickle.dumps({key: 1}, protocol=4),
        source="t = ('k' * 1000,); t = (t, t) 18 times; pickle.dumps({t: 1}, protocol=4)",
        error="dict keys copy more than 32 bytes per byte of pickle (a long key used many times)")
    raw("list as a dict key", b"\x80\x02}]Ns.", error="offset 5: SETITEM uses a list as a set element or key (unhashable)")
    raw("dict as a set element", b"\x80\x04\x8f(}\x90.", error="offset 5: ADDITEMS uses a dict as a set element or key (unhashable)")
    too_deep = []
    for _ in range(256):
        too_deep = [too_deep]
    data = pickle.dumps(too_deep, protocol=4)
    raw("[[...]] 257 deep p4", data, source="257 nested lists, protocol 4",
        error="containers nested deeper than 256 levels")
    tuple_deep = ()
    for _ in range(256):
        tuple_deep = (tuple_deep,)
    data = pickle.dumps(tuple_deep, protocol=2)
    raw("((...),) 257 deep p2", data, source="257 nested tuples, protocol 2",
        error="containers nested deeper than 256 levels")
    return out


def write_cases(path):
    covered = set()
    table = []
    for name, source, data, expect, error in cases():
        item = {"name": name, "source": source, "pickle": data.hex()}
        if error is None:
            item["json"] = expect
            try:
                for op, arg, pos in pickletools.genops(data):
                    if op.name not in OK_OPCODES:
                        raise SystemExit(f"case {name}: Python wrote {op.name}")
                    covered.add(op.name)
                # Python itself must read the case as the reference says.
                if ref(pickle.loads(data)) != expect:
                    raise SystemExit(f"case {name}: Python reads {pickle.loads(data)!r}")
            except UnicodeDecodeError:
                pass  # the cases of bytes that are not UTF-8
        else:
            item["error"] = error
        table.append(item)
    missing = OK_OPCODES - covered
    if missing:
        raise SystemExit(f"no valid case uses {sorted(missing)}")
    # One case a line, so that a diff shows which cases changed.
    lines = [json.dumps(item, ensure_ascii=False, allow_nan=False) for item in table]
    write(path, ("[\n" + ",\n".join(lines) + "\n]\n").encode("utf-8"))


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", nargs=2, metavar=("N", "FILE"),
                    help="write an N-entry dump to FILE instead")
    ap.add_argument("--protocol", type=int, default=2,
                    help="pickle protocol for --bench (default 2)")
    args = ap.parse_args()

    if args.bench:
        write(args.bench[1], pickle.dumps(dump(int(args.bench[0])), protocol=args.protocol))
        return

    here = os.path.dirname(os.path.abspath(__file__))
    d = dump(9)
    for proto in (2, 4, 5):
        write(os.path.join(here, f"fr-rank0-p{proto}.pickle"), pickle.dumps(d, protocol=proto))
    text = json.dumps(d, indent=1, ensure_ascii=False) + "\n"
    write(os.path.join(here, "fr-rank0.json"), text.encode("utf-8"))
    # A rank dumped before its first collective: no entries at all.
    write(os.path.join(here, "fr-empty.pickle"), pickle.dumps(dump(0), protocol=2))
    write_versions(here)
    write_cases(os.path.join(here, "cases.json"))


if __name__ == "__main__":
    main()
