#!/usr/bin/env bash
# fr-analyze reads PyTorch Flight Recorder dumps as PyTorch writes them: one
# file per rank named with the rank, pickles (protocols 2 and 4) and JSON
# mixed. Four ranks of a training job; rank 2 is stuck in its data loader
# and never enqueues all_reduce #9 on the default group, which ranks 0, 1
# and 3 have started. A pickle that would run code is refused, not run.
. "$(dirname "$0")/lib.sh"

mkdir -p "$T/pt" "$T/evil"
python3 - "$T" <<'PY' || fail "could not generate the dumps"
import json, os, pickle, sys

out = sys.argv[1]
base = 1_700_000_000_000_000_000
frames = lambda *fs: [{"name": n, "filename": "/work/" + f, "line": l} for n, f, l in fs]
step = frames(("all_reduce", "torch/distributed/distributed_c10d.py", 2806),
              ("train_step", "train.py", 201), ("main", "train.py", 260))
loader = frames(("load_batch", "data.py", 88), ("train_step", "train.py", 190),
                ("main", "train.py", 260))

def entry(i, seq, state, fr, t):
    return {"record_id": i, "pg_id": 0, "process_group": ("0", "default_pg"),
            "collective_seq_id": seq, "p2p_seq_id": 0, "op_id": seq,
            "profiling_name": "nccl:all_reduce", "time_created_ns": t,
            "input_sizes": [[1024]], "input_dtypes": ["Float"],
            "output_sizes": [[1024]], "output_dtypes": ["Float"], "state": state,
            "time_discovered_started_ns": t + 1000 if state != "scheduled" else None,
            "time_discovered_completed_ns": t + 5000 if state == "completed" else None,
            "retired": state == "completed", "timeout_ms": 600000, "is_p2p": False,
            "frames": fr, "thread_id": 1234, "thread_name": "pt_main_thread"}

for r in range(4):
    ents = [entry(s - 1, s, "completed", step, base + s * 10**9) for s in range(1, 9)]
    if r == 2:
        # Its last operation completed; its stack is where it is now.
        ents[-1]["frames"] = loader
    else:
        ents.append(entry(8, 9, "started", step, base + 9 * 10**9))
    d = {"version": "2.10", "comm_lib_version": "2.21.5",
         "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2, 3]"}},
         "pg_status": {"0": {"last_enqueued_collective": ents[-1]["collective_seq_id"],
                             "last_started_collective": ents[-1]["collective_seq_id"],
                             "last_completed_collective": 8}},
         "entries": ents}
    if r == 3:
        with open(f"{out}/pt/nccl_trace_rank_{r}.json", "w") as f:
            json.dump(d, f)
    else:
        with open(f"{out}/pt/nccl_trace_rank_{r}", "wb") as f:
            pickle.dump(d, f, protocol=2 if r == 1 else 4)
    if r == 0:
        with open(f"{out}/evil/nccl_trace_rank_0", "wb") as f:
            pickle.dump(d, f, protocol=4)
# Unpickling this would run a shell command.
with open(f"{out}/evil/nccl_trace_rank_1", "wb") as f:
    f.write(b"\x80\x04cos\nsystem\n(S'touch " + out.encode() + b"/pwned'\ntR.")

# split_group: ranks 0-1 and ranks 2-3 each have a group named "1"; rank 3
# never enqueues all_reduce #6 of its group. As version 2.7 writes JSON:
# "nccl_version", pg_status keyed by pg_id with its counts as strings,
# 0 for a time not known, no frames.
os.makedirs(f"{out}/split")
for r in range(4):
    ents = []
    for s in range(1, 7):
        if r == 3 and s == 6:
            break
        e = entry(len(ents), s, "completed" if r < 2 or s < 6 else "started", None,
                  base + s * 10**9)
        e["process_group"], e["pg_id"] = ("1", "split"), 1
        del e["frames"], e["thread_id"], e["thread_name"]
        for k in ("time_discovered_started_ns", "time_discovered_completed_ns"):
            e[k] = e[k] or 0
        ents.append(e)
    last = ents[-1]["collective_seq_id"]
    d = {"version": "2.7", "nccl_version": "2.21.5",
         "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2, 3]"},
                       "1": {"name": "1", "desc": "split",
                             "ranks": "[0, 1]" if r < 2 else "[2, 3]"}},
         "pg_status": {"1": {"last_enqueued_collective": str(last),
                             "last_started_collective": str(last),
                             "last_completed_collective": str(6 if r < 2 else 5)}},
         "entries": ents}
    with open(f"{out}/split/nccl_trace_rank_{r}.json", "w") as f:
        json.dump(d, f)
PY
echo "notes, not a dump" >"$T/pt/README"

analyze "$T/pt"
[ "$RC" -eq 1 ] || fail "fr-analyze exit $RC, want 1: $(cat "$T/analyze.err")"
expect '.verdict == "hang"'
expect '[.culprits[] | [.rank, .reason]] == [[2, "not_entered"]]'
expect '.op.comm == "0" and .op.type == "all_reduce" and .op.seq == 9'
expect '.waiting_ranks == [0, 1, 3] and .world_size == 4'
expect '.culprits[0].last_completed.seq == 8'
[ ! -s "$T/analyze.err" ] || fail "warnings on good dumps: $(cat "$T/analyze.err")"
# The report shows where rank 2 is, from its Python frames.
"$BIN/fr-analyze" "$T/pt" >"$T/report.txt"
head -n 1 "$T/report.txt" | grep -q "rank 2 .*never entered all_reduce #9" ||
	fail "summary: $(head -n 1 "$T/report.txt")"
grep -q "load_batch (data.py:88)" "$T/report.txt" || fail "no Python frames: $(cat "$T/report.txt")"
# Ranks merged by identical stack: the odd one out stands alone.
grep -q "^  3 ranks (0-1,3): all_reduce (distributed_c10d.py:2806) <- train_step" "$T/report.txt" &&
	grep -q "^  1 rank (2): load_batch (data.py:88) <- train_step (train.py:190)" "$T/report.txt" ||
	fail "stacks not merged: $(cat "$T/report.txt")"

# The evil pickle: refused with its name and offset, left out, never run.
analyze "$T/evil"
grep -q "nccl_trace_rank_1: offset 2: opcode 0x63 (GLOBAL) is not allowed" "$T/analyze.err" ||
	fail "refusal not reported: $(cat "$T/analyze.err")"
[ ! -e "$T/pwned" ] || fail "the pickle ran code"
expect '.culprits | map(.rank) | index(1) != null'
# split_group's groups of one name told apart: rank 3 is named on ranks
# 2-3's group, not ranks 0-1 on theirs, which completed #6.
analyze "$T/split"
[ "$RC" -eq 1 ] || fail "split: fr-analyze exit $RC, want 1: $(cat "$T/analyze.err")"
expect '[.culprits[] | [.rank, .reason]] == [[3, "not_entered"]]'
expect '.op.comm == "1:2-3" and .op.seq == 6 and .op.comm_ranks == [2, 3]'
expect '.waiting_ranks == [2]'
grep -q "communicator 1 names different groups on different ranks .*told apart as 1:0-1, 1:2-3" \
	"$T/analyze.err" || fail "split: no note of the renaming: $(cat "$T/analyze.err")"

echo "PASS pytorch dumps: rank 2 named from pickles and JSON; a code-running pickle refused; split_group's groups told apart"
