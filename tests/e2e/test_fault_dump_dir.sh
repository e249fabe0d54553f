#!/usr/bin/env bash
# The dump directory fails the daemon. Unwritable: a file stands where the
# job's directory should be, so the incident directory cannot be made (as
# root, permissions would not stop the daemon). Full: a tiny tmpfs, filled
# up, so that no dump fits (skipped where mount is not permitted). Either
# way the daemon says so per incident in its log, counts it in /metrics
# (flightrec_incident_write_errors_total), keeps running and serving
# /healthz, and the ranks still keep their local copies
# (FLIGHTREC_DUMP_DIR), from which fr-analyze finds the culprit. Once the
# path is cleared, the same hang is collected by the daemon after all.
. "$(dirname "$0")/lib.sh"

MOUNTED=
fault_exit() {
	local status=$?
	stop_helpers
	stop_job
	stop_daemon
	[ -n "$MOUNTED" ] && umount "$MOUNTED"
	(exit "$status")
	cleanup
}
trap fault_exit EXIT

healthy() {
	[ "$(http_status /healthz)" = 200 ] && kill -0 "$DAEMON_PID" 2>/dev/null
}
# local_copies N: a local dump directory of $JOB holds ranks 0..N-1; sets LOCAL.
local_copies() {
	local d r
	for d in "$T/local/$JOB"/*/; do
		for ((r = 0; r < $1; r++)); do
			[ -s "$d/rank-$r.json" ] || continue 2
		done
		LOCAL=${d%/}
		return 0
	done
	return 1
}
# check_local: fr-analyze on the local copies names rank 1 at all_reduce #300.
check_local() {
	analyze "$LOCAL"
	[ "$RC" -eq 1 ] || fail "fr-analyze of the local copies: exit $RC, want 1: $(cat "$T/analyze.err")"
	expect '.verdict == "hang" and [.culprits[].rank] == [1] and .culprits[0].reason == "not_entered"'
	expect '.op.type == "all_reduce" and .op.seq == 300'
}

BASE=$JOB

# 1. Unwritable: a regular file named like the job's directory.
JOB=$BASE-blocked
mkdir -p "$T/incidents"
echo "not a directory" >"$T/incidents/$JOB"
start_daemon --timeout 2 --heartbeat-timeout 10 --dump-deadline 5
start_job 3 --scenario compute --culprit 1 --at 300
wait_for 40 grep -q "cannot create the incident directory for job $JOB under $T/incidents: " "$T/daemon.log" ||
	fail "no error about the incident directory in the log"
wait_for 10 metric_at_least incident_write_errors_total 1 || fail "the write error was not counted in /metrics"
healthy || fail "the daemon stopped serving /healthz"
wait_for 20 local_copies 3 || fail "the ranks wrote no local copies: $(ls -R "$T/local" 2>&1)"
check_local
expect '.jobs[] | select(.job == "'"$JOB"'") | .status == "hung"' <(http_get /v1/jobs)
# The path cleared, the daemon collects the hang at its next attempt.
rm "$T/incidents/$JOB"
wait_incident 40
for r in 0 1 2; do
	[ -s "$INCIDENT/rank-$r.json" ] || fail "rank $r's dump is missing once the path cleared: $(ls "$INCIDENT")"
done
analyze "$INCIDENT"
expect '.verdict == "hang" and [.culprits[].rank] == [1] and .op.seq == 300'
stop_job
stop_daemon

# 2. Full: a tmpfs of 64 KiB, filled.
JOB=$BASE-full
rm -rf "$T/incidents" "$T/local"
mkdir -p "$T/incidents"
if ! mount -t tmpfs -o size=64k tmpfs "$T/incidents" 2>"$T/mount.err"; then
	echo "SKIP full dump directory: cannot mount a tmpfs ($(cat "$T/mount.err"))"
	echo "PASS fault_dump_dir: unwritable dump directory reported, counted, local copies kept (full: skipped)"
	exit 0
fi
MOUNTED=$T/incidents
dd if=/dev/zero of="$T/incidents/filler" bs=4k 2>/dev/null
start_daemon --timeout 2 --heartbeat-timeout 10 --dump-deadline 5
start_job 3 --scenario compute --culprit 1 --at 300
wait_for 40 grep -q "incident .* of job $JOB closed" "$T/daemon.log" ||
	fail "the incident on a full disk never closed"
for f in rank-0.json rank-1.json rank-2.json manifest.json; do
	grep -q "cannot write $T/incidents/$JOB/[^/]*/$f: No space left on device" "$T/daemon.log" ||
		fail "no error about $f on the full disk in the log"
done
# Three dumps and the manifest, each refused by the disk.
wait_for 10 metric_at_least incident_write_errors_total 4 ||
	fail "the write errors were not counted in /metrics: $(metric incident_write_errors_total)"
healthy || fail "the daemon stopped serving /healthz"
wait_for 20 local_copies 3 || fail "the ranks wrote no local copies: $(ls -R "$T/local" 2>&1)"
check_local
ls "$T/incidents/$JOB"/*/manifest.json >/dev/null 2>&1 && fail "a manifest was written on a full disk"
stop_job
stop_daemon
echo "PASS fault_dump_dir: unwritable and full dump directories reported, counted, local copies kept"
