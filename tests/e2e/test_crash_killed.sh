#!/usr/bin/env bash
# One rank says CRASH and the launcher kills the others before any dumps:
# the incident is still written, from what the daemon holds, and its
# manifest says why each dump is missing (the crashed rank crashed, the
# others were killed by the launcher).
. "$(dirname "$0")/lib.sh"

start_daemon --timeout 30 --heartbeat-timeout 30
python3 "$ROOT/tests/e2e/crash_agents.py" "$LISTEN_PORT" "$JOB" 4 1 >"$T/agents.log" 2>&1 &
track_pid $!
wait_for 15 grep -q '^killed' "$T/agents.log" || fail "the stand-in agents: $(cat "$T/agents.log")"
wait_incident 15
M=$INCIDENT/manifest.json
expect '.reason == "crash" and .verdict.verdict == "crash"' "$M"
expect '[.ranks[] | select(.rank == 1)][0] | .dump == null and (.error | startswith("crashed: SIGSEGV at 0xdead"))' "$M"
expect '[.ranks[] | select(.rank != 1)] | length == 3 and all(.dump == null and (.error | startswith("killed by the launcher")))' "$M"

analyze "$INCIDENT"
[ "$RC" -eq 1 ] || fail "fr-analyze exit $RC, want 1: $(cat "$T/analyze.err")"
expect '.verdict == "crash" and [.culprits[].rank] == [1]'
expect '.culprits[0].signal == "SIGSEGV" and .culprits[0].fault_addr == "0xdead"'
expect '[.culprits[0].stack[].name] == ["load_shard", "train_step", "main"]'
expect '.summary | contains("crashed (SIGSEGV at 0xdead in load_shard)")'
echo "PASS crash_killed: a crash whose peers are killed at once still gets its incident, and says why dumps are missing"
