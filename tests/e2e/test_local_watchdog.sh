#!/usr/bin/env bash
# No daemon reachable: the agents keep recording, and past FLIGHTREC_TIMEOUT
# each waiting rank writes a dump by itself, into one directory named after
# the stuck operation, however many directories earlier runs left;
# fr-analyze names the rank that never dumped.
. "$(dirname "$0")/lib.sh"

# Earlier runs of the same job id (a constant one is common) left many
# incident directories: they must not keep this run's hang from being
# written.
mkdir -p "$T/local/$JOB"
for i in $(seq 1 64); do mkdir "$T/local/$JOB/earlier-$i"; done
# Nothing listens on port 1: every connection attempt is refused.
AGENT_ADDR=127.0.0.1:1 AGENT_ENV="-x FLIGHTREC_TIMEOUT=2" \
	start_job 4 --scenario compute --culprit 2 --at 3
dir=$T/local/$JOB/local-world-3
all_dumped() { for r in 0 1 3; do [ -s "$dir/rank-$r.json" ] || return 1; done; }
wait_for 40 all_dumped || fail "waiting ranks did not dump locally: $(find "$T/local" -type f)"
[ -e "$dir/rank-2.json" ] && fail "the computing rank has nothing in flight and must not dump"
expect '.dump_reason | startswith("local watchdog: all_reduce #3 on world")' "$dir/rank-0.json"

analyze "$dir"
[ "$RC" -eq 1 ] || fail "fr-analyze exit $RC, want 1: $(cat "$T/analyze.err")"
expect '.verdict == "hang" and [.culprits[].rank] == [2]'
expect '.op.type == "all_reduce" and .op.seq == 3 and .op.comm == "world"'
echo "PASS local watchdog: dumps without a daemon, rank 2 named"
