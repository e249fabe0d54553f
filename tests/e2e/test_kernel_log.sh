#!/usr/bin/env bash
# The node's own evidence: rank 2 of 4 never returns from a computation
# before all_reduce #4, and while the job hangs the GPU "falls off the bus":
# a synthetic Xid line naming rank 2's pid is written into /dev/kmsg. The
# daemon reads the kernel log when it writes the incident's manifest, keeps
# that line (kind xid, rank 2) and leaves out one naming a pid that is not
# the job's; fr-analyze prints it under culprit rank 2 and --json carries
# it. Lines of other tests or of earlier boots cannot make it pass or fail:
# both lines carry this run's job name, and only they are looked at.
# Skipped where /dev/kmsg cannot be both read and written (not root, a
# container without it).
. "$(dirname "$0")/lib.sh"

{ printf '' >/dev/kmsg && dd if=/dev/kmsg iflag=nonblock bs=8192 count=1 of=/dev/null; } \
	2>/dev/null || skip "/dev/kmsg is not readable and writable here (needs root)"

start_daemon --timeout 6 --heartbeat-timeout 30
start_job 4 --scenario compute --culprit 2 --at 4
wait_for 20 ranks_connected 4 || fail "ranks did not connect: $(http_get "/v1/jobs/$JOB")"
pid=$(http_get "/v1/jobs/$JOB" | jq -r '.ranks[] | select(.rank == 2) | .pid')
[ -n "$pid" ] && [ "$pid" -gt 1 ] || fail "no pid for rank 2"
# Before the watchdog's 6 s are up: in the window the manifest reads.
plant_xid "$pid"
wait_incident 60
M=$INCIDENT/manifest.json

expect '.version == "2.1" and (.kernel_log | length) == 1' "$M"
expect '.kernel_log[0].available == true and .kernel_log[0].error == null' "$M"
expect_xid_kept "$M" 2 "$pid"

analyze "$INCIDENT"
[ "$RC" -eq 1 ] || fail "fr-analyze exit $RC, want 1: $(cat "$T/analyze.err")"
expect '.verdict == "hang" and [.culprits[].rank] == [2]'
jq -e --arg m "$KMSG_MARK" --argjson pid "$pid" \
	'[.culprits[0].kernel_log[] | select(.text | endswith($m))] | length == 1 and
	 (.[0] | .kind == "xid" and .rank == 2 and .pid == $pid and (.node | length) > 0 and
	  (.before_s | type) == "number")' "$T/verdict.json" >/dev/null ||
	fail "the culprit's kernel_log lacks the line: $(jq -c .culprits "$T/verdict.json")"
expect '.kernel_log[0].available == true'

"$BIN/fr-analyze" "$INCIDENT" >"$T/analyze.txt" 2>&1
line=$(grep -F "$KMSG_MARK" "$T/analyze.txt")
case $line in
"  kernel: "*": NVRM: Xid (PCI:0000:3b:00): 79, pid=$pid, GPU has fallen off the bus. $KMSG_MARK, "*" rank 2 stopped") ;;
*) fail "the report does not tell the line under rank 2: $(cat "$T/analyze.txt")" ;;
esac
# Under the culprit: after its heading, before anything else's.
awk -v m="$KMSG_MARK" '/^Culprit rank 2/ {c = 1} c && index($0, m) {found = 1} /^Kernel log/ {c = 0}
	END {exit !found}' "$T/analyze.txt" || fail "the line is not under culprit rank 2: $(cat "$T/analyze.txt")"
echo "PASS kernel log: an Xid naming rank 2's pid is kept in the manifest and told under culprit rank 2"
