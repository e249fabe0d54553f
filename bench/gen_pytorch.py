#!/usr/bin/env python3
"""Writes the PyTorch Flight Recorder dumps of a synthetic hung training job.

    gen_pytorch.py DIR RANKS ENTRIES [--protocol 2|4|5] [--json] [--seed N] [--jobs N]

DIR/nccl_trace_rank_<N> for every rank N, as PyTorch's Flight Recorder
writes them on a timeout (schema version "2.10", the fields that
dumps/FORMAT.md maps): a pickle (protocol 2 by default, like PyTorch's C++
pickler) or, with --json, the JSON dump (which PyTorch writes without stack
frames).

The job is the one bench/gen_dumps.c writes, in PyTorch's words: the
default process group "0" (all ranks), tensor-parallel groups of up to 8
consecutive ranks and data-parallel groups across them (made by new_group on
every rank, so numbered in creation order), activations sent to the next
rank and received from the previous one on the default group, bfloat16
tensor-parallel collectives, float gradient reduce-scatter/all-reduce and
parameter all-gather, a broadcast and a barrier every few dozen steps, and a
loss all_reduce on the default group ending each step of about 100 ms. Each
rank keeps the last ENTRIES entries of a run several times longer.

The planted hang: rank (RANKS/2 + 5) mod RANKS never enters the last
all_reduce on group "0", which every other rank has "started".

The output depends only on RANKS, ENTRIES, the seed and the format; each
file's modification time is when that rank dumped (a few seconds after the
hang began), since fr-analyze takes a PyTorch dump's time from it.
"""

import argparse
import json
import multiprocessing
import os
import pickle
import sys
import time

MS = 1_000_000
STEP_NS = 100 * MS
BASE_NS = 1_749_988_800_000_000_000  # 2025-06-15T12:00:00Z
HISTORY_RINGS = 3
DUMP_DELAY_NS = 5000 * MS
ENTER_SPREAD_NS = 300_000
TIMEOUT_MS = 600_000
THREAD_ID = 140_245_318_461_248
THREAD_NAME = "pt_main_thread"

WORLD, TP, DP = 0, 1, 2

TORCH = "/opt/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"
LOGGER = "/opt/venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py"
TRAIN = "/workspace/train.py"
MODEL = "/workspace/model/parallel.py"


def frame(name, filename, line):
    return {"name": name, "filename": filename, "line": line}


# Frames are shared between entries, as PyTorch's pickler writes each frame
# once and refers back to it; innermost first.
F = {
    "all_reduce": frame("all_reduce", TORCH, 2806),
    "all_gather": frame("all_gather_into_tensor", TORCH, 3712),
    "reduce_scatter": frame("reduce_scatter_tensor", TORCH, 4196),
    "broadcast": frame("broadcast", TORCH, 2694),
    "barrier": frame("barrier", TORCH, 4562),
    "send": frame("send", TORCH, 2360),
    "recv": frame("recv", TORCH, 2417),
    "wrapper": frame("wrapper", LOGGER, 81),
    "forward_layer": frame("forward", MODEL, 118),
    "backward_layer": frame("backward", MODEL, 164),
    "reduce_grads": frame("reduce_grads", TRAIN, 142),
    "gather_params": frame("gather_params", TRAIN, 156),
    "clip_grad_norm": frame("clip_grad_norm", TRAIN, 171),
    "sync_schedule": frame("sync_schedule", TRAIN, 183),
    "save_checkpoint": frame("save_checkpoint", TRAIN, 190),
    "reduce_loss": frame("reduce_loss", TRAIN, 197),
    "pipeline": frame("pipeline_exchange", TRAIN, 128),
    "train_step": frame("train_step", TRAIN, 221),
    "main": frame("main", TRAIN, 260),
    "module": frame("<module>", TRAIN, 275),
}
OUTER = [F["wrapper"]]
BOTTOM = [F["train_step"], F["main"], F["module"]]

# (group, profiling name, input shape, group factor of the output,
#  dtype, computation before it, every N steps, torch call, caller)
# An output factor of k: the output is k times the input (all_gather);
# 1/k: k times smaller (reduce_scatter). The loss all_reduce ends a step.
SCHEDULE = [
    (TP, "nccl:all_reduce", (4, 1024, 1024), 1, "BFloat16", 2 * MS, 1, "all_reduce", "forward_layer"),
    (TP, "nccl:_allgather_base", (8, 1024, 1024), "up", "BFloat16", 3 * MS, 1, "all_gather", "forward_layer"),
    (TP, "nccl:all_reduce", (16, 1024, 1024), 1, "BFloat16", 3 * MS, 1, "all_reduce", "forward_layer"),
    (TP, "nccl:all_reduce", (1024, 1024), 1, "BFloat16", 2 * MS, 1, "all_reduce", "forward_layer"),
    (TP, "nccl:_reduce_scatter_base", (8, 1024, 1024), "down", "BFloat16", 6 * MS, 1, "reduce_scatter", "backward_layer"),
    (TP, "nccl:all_reduce", (512, 1024), 1, "BFloat16", 5 * MS, 1, "all_reduce", "backward_layer"),
    (DP, "nccl:_reduce_scatter_base", (32 << 20,), "down", "Float", 4 * MS, 1, "reduce_scatter", "reduce_grads"),
    (DP, "nccl:all_reduce", (64 << 20,), 1, "Float", 1 * MS, 1, "all_reduce", "reduce_grads"),
    (DP, "nccl:_allgather_base", (32 << 20,), "up", "Float", 3 * MS, 1, "all_gather", "gather_params"),
    (WORLD, "nccl:all_reduce", (1,), 1, "Float", 1 * MS, 1, "all_reduce", "clip_grad_norm"),
    (WORLD, "nccl:broadcast", (16,), 1, "Int", 1 * MS, 25, "broadcast", "sync_schedule"),
    # A barrier is an all_reduce of one element in ProcessGroupNCCL.
    (WORLD, "nccl:all_reduce", (1,), 1, "Float", 1 * MS, 50, "barrier", "save_checkpoint"),
    (WORLD, "nccl:all_reduce", (1,), 1, "Float", 1 * MS, 1, "all_reduce", "reduce_loss"),
]
DTYPE_SIZE = {"BFloat16": 2, "Float": 4, "Int": 4}
P2P_SHAPE = (4, 512, 1024)
P2P_DTYPE = "BFloat16"


def mix(x):
    """splitmix64: the deterministic randomness, as in gen_dumps.c."""
    x = (x + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return x ^ (x >> 31)


def draw(seed, a, b, c, n):
    return mix(mix(mix(seed ^ a) ^ b) ^ c) % n


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def transfer_ns(group, nbytes):
    return 20_000 + nbytes // (150 if group == TP else 20 if group == DP else 10)


class Job:
    """The job's shape and its timeline, the same on every rank: one event
    per operation every rank records, in order, with its sequence numbers
    and when it is due and done."""

    def __init__(self, ranks, entries, seed):
        self.ranks, self.entries, self.seed = ranks, entries, seed
        self.tp = next((k for k in (8, 4, 2) if ranks % k == 0 and ranks > k), 1)
        self.dp = ranks // self.tp
        self.planted = (ranks // 2 + 5) % ranks
        ops_per_step = len(SCHEDULE) - 1
        self.steps = (entries * HISTORY_RINGS + draw(seed, 1, 0, 0, entries)) // ops_per_step + 2
        # Group names in creation order: "0" the default group, then
        # every tensor-parallel group, then every data-parallel one.
        self.tp_base = 1
        self.dp_base = 1 + (self.dp if self.tp > 1 else 0)
        self.events = []
        self._timeline()

    def used(self, group):
        return group == WORLD or (group == TP and self.tp > 1) or (group == DP and self.dp > 1)

    def _timeline(self):
        seq = [0, 0, 0]      # collective_seq_id per group
        op_id = [0, 0, 0]    # op_id per group: collectives and p2p alike
        p2p = 0              # p2p_seq_id on the default group
        ev = self.events
        seed = self.seed
        for step in range(self.steps):
            t = BASE_NS + step * STEP_NS + draw(seed, 6, step, 0, 2 * MS)
            t += 20 * MS + draw(seed, 7, step, 0, 2 * MS)
            if self.ranks > 1:
                done = t + ENTER_SPREAD_NS + transfer_ns(WORLD, numel(P2P_SHAPE) * 2)
                for half in (0, 1):
                    p2p += 1
                    op_id[WORLD] += 1
                    # ("p2p", first or second of the exchange, seq, op_id, due, done)
                    ev.append(("p2p", half, p2p, op_id[WORLD], t, done, step))
                t = done
            for k, s in enumerate(SCHEDULE):
                group, _, shape, _, dtype, gap, every = s[:7]
                if step % every or not self.used(group):
                    continue
                due = t + gap + draw(seed, 8, step, k, gap // 4 + 1)
                done = due + ENTER_SPREAD_NS + transfer_ns(group, numel(shape) * DTYPE_SIZE[dtype])
                t = done
                seq[group] += 1
                op_id[group] += 1
                ev.append(("coll", k, seq[group], op_id[group], due, done, step))
        self.last_due = ev[-1][4]

    def members(self, group, rank):
        if group == WORLD:
            return list(range(self.ranks))
        if group == TP:
            first = rank // self.tp * self.tp
            return list(range(first, first + self.tp))
        return list(range(rank % self.tp, self.ranks, self.tp))

    def pg_name(self, group, rank):
        if group == WORLD:
            return "0"
        if group == TP:
            return str(self.tp_base + rank // self.tp)
        return str(self.dp_base + rank % self.tp)


def intern_all(obj):
    """The same str objects everywhere, so that the pickler memoizes them
    as PyTorch's C++ pickler does."""
    if isinstance(obj, str):
        return sys.intern(obj)
    if isinstance(obj, tuple):
        return tuple(intern_all(x) for x in obj)
    if isinstance(obj, list):
        return [intern_all(x) for x in obj]
    if isinstance(obj, dict):
        return {intern_all(k): intern_all(v) for k, v in obj.items()}
    return obj


def rank_dump(job, rank, with_frames):
    """The dump document of one rank, and the time it was written."""
    seed = job.seed
    names = {g: job.pg_name(g, rank) for g in (WORLD, TP, DP) if job.used(g)}
    descs = {WORLD: "default_pg", TP: "mesh_tp", DP: "mesh_dp"}
    pgs = {g: (names[g], descs[g]) for g in names}
    n = job.ranks
    right, left = (rank + 1) % n, (rank - 1) % n
    # Send first on even ranks, receive first on odd ones.
    sending_first = rank % 2 == 0
    send_name = intern_all(f"nccl:send {rank}->{right}")
    recv_name = intern_all(f"nccl:recv {rank}<-{left}")
    p2p_size = [list(P2P_SHAPE)]
    p2p_dtype = [P2P_DTYPE]
    stacks = {}
    for s in SCHEDULE:
        call, caller = s[7], s[8]
        stacks[(call, caller)] = [F[call]] + OUTER + [F[caller]] + BOTTOM
    stacks["send"] = [F["send"]] + OUTER + [F["pipeline"]] + BOTTOM
    stacks["recv"] = [F["recv"]] + OUTER + [F["pipeline"]] + BOTTOM
    shapes = []
    for s in SCHEDULE:
        group, shape, factor = s[0], list(s[2]), s[3]
        size = job.tp if group == TP else job.dp if group == DP else n
        if factor == "up":
            out = [shape[0] * size] + shape[1:]
        elif factor == "down":
            out = [max(1, shape[0] // size)] + shape[1:]
        else:
            out = shape
        shapes.append(([shape], [out], [s[4]]))

    events = job.events
    if rank == job.planted:
        events = events[:-1]
    total = len(events)
    first = max(0, total - job.entries)
    last_index = len(job.events) - 1
    entries = []
    for i in range(first, total):
        kind, k, sq, oid, due, done, step = events[i]
        jit = draw(seed, 2, rank << 32 | k, step, ENTER_SPREAD_NS)
        created = due + jit
        fin = done + draw(seed, 3, rank, i, 20_000)
        if kind == "p2p":
            send = (k == 0) == sending_first
            pg, p2p_seq, coll_seq = pgs[WORLD], sq, 0
            name = send_name if send else recv_name
            ins, outs, dts = p2p_size, p2p_size, p2p_dtype
            frames = stacks["send" if send else "recv"]
        else:
            s = SCHEDULE[k]
            pg, p2p_seq, coll_seq = pgs[s[0]], 0, sq
            name = s[1]
            ins, outs, dts = shapes[k]
            frames = stacks[(s[7], s[8])]
        if i == last_index:
            state, started, completed = "started", created + 15_000, None
        else:
            state, started, completed = "completed", created + 15_000, fin
        # Containers are new per entry, as PyTorch builds them; only the
        # strings (and the frames) are shared.
        e = {
            "record_id": i,
            "pg_id": int(pg[0]),
            "process_group": (pg[0], pg[1]),
            "collective_seq_id": coll_seq,
            "p2p_seq_id": p2p_seq,
            "op_id": oid,
            "profiling_name": name,
            "time_created_ns": created,
            "input_sizes": [list(ins[0])],
            "input_dtypes": list(dts),
            "output_sizes": [list(outs[0])],
            "output_dtypes": list(dts),
            "state": state,
            "time_discovered_started_ns": started,
            "time_discovered_completed_ns": completed,
            "retired": completed is not None,
            "timeout_ms": TIMEOUT_MS,
            "is_p2p": kind == "p2p",
        }
        if with_frames:
            e["frames"] = list(frames)
        e["thread_id"] = THREAD_ID
        e["thread_name"] = THREAD_NAME
        entries.append(e)

    # Progress per group, over the whole run (dropped entries included).
    status = {}
    for g, name in names.items():
        status[name] = {"last_enqueued_collective": -1, "last_started_collective": -1,
                        "last_completed_collective": -1}
    for i, (kind, k, sq, _, _, _, _) in enumerate(events):
        if kind != "coll":
            continue
        st = status[names[SCHEDULE[k][0]]]
        st["last_enqueued_collective"] = st["last_started_collective"] = sq
        if i != last_index:
            st["last_completed_collective"] = sq
    config = {}
    for g, name in names.items():
        members = job.members(g, rank)
        config[name] = {"name": name, "desc": descs[g],
                        "ranks": "[" + ", ".join(map(str, members)) + "]"}
    doc = {
        "version": "2.10",
        "comm_lib_version": "2.21.5",
        "pg_config": config,
        "pg_status": status,
        "entries": entries,
    }
    dumped = job.last_due + DUMP_DELAY_NS + draw(seed, 10, rank, 0, 200 * MS)
    return doc, dumped


_JOB = None
_ARGS = None


def _init(job, args):
    global _JOB, _ARGS
    _JOB, _ARGS = job, args


def write_rank(rank):
    job, args = _JOB, _ARGS
    doc, dumped = rank_dump(job, rank, not args.json)
    if args.json:
        data = json.dumps(doc).encode()
    else:
        data = pickle.dumps(doc, protocol=args.protocol)
    path = os.path.join(args.dir, f"nccl_trace_rank_{rank}")
    with open(path, "wb") as f:
        f.write(data)
    os.utime(path, ns=(dumped, dumped))
    return len(data)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("ranks", type=int)
    ap.add_argument("entries", type=int)
    ap.add_argument("--protocol", type=int, choices=(2, 4, 5), default=2,
                    help="pickle protocol (default 2, as PyTorch's C++ writer)")
    ap.add_argument("--json", action="store_true", help="write PyTorch's JSON dumps instead")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=2, help="processes writing (default 2)")
    args = ap.parse_args()
    if args.ranks < 2 or args.entries < 1 or args.jobs < 1 or args.seed < 0:
        ap.error("RANKS must be at least 2, ENTRIES and --jobs at least 1, --seed not negative")

    start = time.monotonic()
    os.makedirs(args.dir, exist_ok=True)
    job = Job(args.ranks, args.entries, args.seed & 0xFFFFFFFFFFFFFFFF)
    jobs = min(args.jobs, args.ranks)
    if jobs == 1:
        _init(job, args)
        sizes = [write_rank(r) for r in range(args.ranks)]
    else:
        # Forked workers inherit the job's timeline rather than rebuild it.
        ctx = multiprocessing.get_context("fork")
        with ctx.Pool(jobs, initializer=_init, initargs=(job, args)) as pool:
            sizes = pool.map(write_rank, range(args.ranks), chunksize=8)
    total = sum(sizes)
    kind = "JSON" if args.json else f"pickle protocol {args.protocol}"
    print(f"{args.dir}: {args.ranks} files ({kind}), {args.ranks} ranks x {args.entries} entries, "
          f"{total} bytes ({total / (1 << 30):.2f} GiB), planted rank {job.planted}, "
          f"{time.monotonic() - start:.1f} s")


if __name__ == "__main__":
    main()
