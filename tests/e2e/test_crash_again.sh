#!/usr/bin/env bash
# Every crash of a job gets its incident, not just the first: a rank that
# says CRASH early (a hostile rank, or the first of a job that is then
# restarted) does not silence the crash of another rank of the restarted
# job, and the job's incident rate limit still holds for crashes.
# Stand-in agents (crash_agents.py): each run is the job's processes anew.
. "$(dirname "$0")/lib.sh"

start_daemon --timeout 30 --heartbeat-timeout 30 --max-incidents-per-hour 2

incidents() { ls -d "$T/incidents/$JOB"/*/manifest.json 2>/dev/null | wc -l; }
incidents_are() { [ "$(incidents)" -eq "$1" ]; }

# round N RANK [SECONDS]: the job's processes, rank RANK crashing; waits
# until they are done (asked for dumps and killed, or given up).
round() {
	python3 "$ROOT/tests/e2e/crash_agents.py" "$LISTEN_PORT" "$JOB" 4 "$2" ${3:-} >"$T/agents-$1.log" 2>&1 &
	track_pid $!
	wait_for 20 grep -q '^killed\|^never asked\|^not welcomed' "$T/agents-$1.log" ||
		fail "round $1: the stand-in agents: $(cat "$T/agents-$1.log")"
}

round 1 1
grep -q '^killed' "$T/agents-1.log" || fail "round 1: $(cat "$T/agents-1.log")"
wait_for 15 incidents_are 1 || fail "round 1: no incident"

round 2 3
grep -q '^killed' "$T/agents-2.log" ||
	fail "the second crash of the job opened no incident: $(cat "$T/agents-2.log")"
wait_for 15 incidents_are 2 || fail "round 2: $(incidents) complete incidents, want 2"
second=$(ls -d "$T/incidents/$JOB"/*/ | sort | tail -n 1)
expect '.reason == "crash" and .trigger.rank == 3 and .verdict.verdict == "crash"' "$second/manifest.json"
expect '[.ranks[] | select(.rank == 3)][0].error | startswith("crashed: SIGSEGV at 0xdead")' "$second/manifest.json"

# A third crash within the hour is over --max-incidents-per-hour 2.
round 3 2 3
grep -q '^never asked' "$T/agents-3.log" || fail "round 3: over the rate limit, yet: $(cat "$T/agents-3.log")"
grep -q "job $JOB: incident (crash) suppressed: over --max-incidents-per-hour 2" "$T/daemon.log" ||
	fail "the third crash was not suppressed by the rate limit"
incidents_are 2 || fail "$(incidents) incidents, want 2"
echo "PASS crash_again: a later crash of the job (another rank, the job restarted) opens its own incident, within the rate limit"
