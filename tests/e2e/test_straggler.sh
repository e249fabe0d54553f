#!/usr/bin/env bash
# A job that does not hang, dumped on demand: four ranks of a PyTorch job,
# forty all_reduces on the default group, rank 1 entering each 12 ms after
# the others. fr-analyze says "ok" (exit status 0) and names rank 1 as a
# straggler, as information. Rank 3's ring kept fewer entries (#5-#40):
# the windows differ, which the report says, and nothing is missing or
# mismatched for it.
. "$(dirname "$0")/lib.sh"

mkdir -p "$T/pt"
python3 - "$T" <<'PY' || fail "could not generate the dumps"
import json, sys

out = sys.argv[1]
base = 1_700_000_000_000_000_000

def entry(rank, seq):
    # Ranks enter within 0.3 ms of each other, rank 1 12 ms later.
    t = base + seq * 10**9 + (rank * 97_000) % 300_000 + (12_000_000 if rank == 1 else 0)
    return {"record_id": seq - 1, "pg_id": 0, "process_group": ("0", "default_pg"),
            "collective_seq_id": seq, "p2p_seq_id": 0, "op_id": seq,
            "profiling_name": "nccl:all_reduce", "time_created_ns": t,
            "input_sizes": [[1024]], "input_dtypes": ["Float"],
            "output_sizes": [[1024]], "output_dtypes": ["Float"], "state": "completed",
            "time_discovered_started_ns": t + 1000,
            "time_discovered_completed_ns": base + seq * 10**9 + 20_000_000,
            "retired": True, "timeout_ms": 600000, "is_p2p": False,
            "thread_id": 1234, "thread_name": "pt_main_thread"}

for r in range(4):
    ents = [entry(r, s) for s in range(5 if r == 3 else 1, 41)]
    d = {"version": "2.10", "comm_lib_version": "2.21.5",
         "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2, 3]"}},
         "pg_status": {"0": {"last_enqueued_collective": 40, "last_started_collective": 40,
                             "last_completed_collective": 40}},
         "entries": ents}
    with open(f"{out}/pt/nccl_trace_rank_{r}.json", "w") as f:
        json.dump(d, f)
PY

analyze "$T/pt"
[ "$RC" -eq 0 ] || fail "fr-analyze exit $RC, want 0: $(cat "$T/analyze.err")"
expect '.verdict == "ok" and .culprits == [] and .op == null'
expect '[.stragglers[] | [.rank, .comm, .late_count, .matched]] == [[1, "0", 36, 36]]'
expect '.stragglers[0].median_late_s > 0.0115 and .stragglers[0].median_late_s < 0.0125'
expect '.aligned.comms == 1 and .aligned.latest.rank == 3 and .aligned.latest.first == 5'
expect '.aligned.common_first == 5 and .aligned.common_last == 40'

"$BIN/fr-analyze" "$T/pt" >"$T/report.txt"
[ $? -eq 0 ] || fail "fr-analyze (text) did not exit 0"
grep -q "^Stragglers (information, not a hang): rank 1 entered last in 36 of 36 collectives on 0, by 1[12]\.[0-9] ms (median)$" "$T/report.txt" ||
	fail "no straggler line in the report: $(cat "$T/report.txt")"
grep -q "^Ring windows differ (rank 3 kept seq 5-40 of 0, rank 0 kept 1-40); compared on the common range 5-40$" "$T/report.txt" ||
	fail "no ring window line in the report: $(cat "$T/report.txt")"
echo "PASS straggler: ok, rank 1 named as late in 36 of 36 collectives, windows aligned"
