#!/usr/bin/env bash
# Per-job keys and token rotation. `flightrecd --job-key JOB` prints the
# key PROTOCOL.md's formula gives (checked against python's hmac), and
# refuses a bad job id or a missing token (exit 2). A job whose agents hold
# only its key (FLIGHTREC_JOB_KEY_FILE) registers and its hang is diagnosed
# as usual; another job given that key is refused, even with the cluster
# token beside it (the key wins, and the agent says so and names the key
# file), and none of its ranks registers. After the token file is rotated
# and the daemon gets SIGHUP, a job with a key made from the old token is
# refused and the same job with the new key is accepted, the first job's
# ranks (authenticated with the old key) stay connected, and manual dumps
# need the new bearer token. A token file broken on reload keeps the token
# in effect. Over HTTP a job's key reads that job's data and lists that job
# only, and reads nothing of another job.
. "$(dirname "$0")/lib.sh"
trap '' PIPE

# Hung ranks busy-poll: let them yield the two cores to the rest.
export OMPI_MCA_mpi_yield_when_idle=1

job_known() { http_get /v1/jobs | jq -e --arg j "$1" '.jobs | any(.job == $j)' >/dev/null; }
post_dump() { # post_dump JOB TOKEN: prints the status, the body in $T/post.json
	curl -s -o "$T/post.json" -w '%{http_code}' --max-time 10 -X POST \
		-H "Authorization: Bearer $2" "$HTTP/v1/jobs/$1/dump"
}
post_taken() { # post_taken JOB TOKEN: the bearer token was accepted
	case $(post_dump "$1" "$2") in 202 | 409) return 0 ;; *) return 1 ;; esac
}
logged() { grep -qF -- "$1" "$T/daemon.log"; }
# job_key JOB FILE: the key of JOB from the token in $TOKEN, written to FILE.
job_key() {
	"$BIN/flightrecd" --job-key "$1" --token-file "$TOKEN" >"$2" 2>"$T/job-key.err" ||
		fail "flightrecd --job-key $1 failed: $(cat "$T/job-key.err")"
	chmod 600 "$2"
}

# The job that stays connected across the rotation runs in a session of its
# own, killed at exit like the others.
A_SESSION=
stop_job_a() {
	local other=$JOB_PID
	[ -n "$A_SESSION" ] || return 0
	JOB_PID=$A_SESSION
	stop_job
	JOB_PID=$other
	A_SESSION=
}
trap 'status=$?; stop_job_a; (exit $status); cleanup' EXIT

TOKEN=$T/token
OLD_TOKEN=flightrec-e2e-old-$RANDOM$RANDOM-0123456789abcdef
NEW_TOKEN=flightrec-e2e-new-$RANDOM$RANDOM-0123456789abcdef
printf '%s\n' "$OLD_TOKEN" >"$TOKEN"
chmod 600 "$TOKEN"
BASE=$JOB
JOB_A=$BASE-a
JOB_B=$BASE-b
JOB_C=$BASE-c

# 1. The key: 64 lowercase hex digits, the documented HMAC; bad requests exit 2.
job_key "$JOB_A" "$T/key-a"
grep -qxE '[0-9a-f]{64}' "$T/key-a" || fail "--job-key printed $(cat "$T/key-a")"
want=$(python3 -c 'import hashlib, hmac, sys
token = open(sys.argv[1], "rb").read().rstrip(b"\n")
print(hmac.new(token, b"flightrec job key\0" + sys.argv[2].encode(), hashlib.sha256).hexdigest())' \
	"$TOKEN" "$JOB_A")
[ "$(cat "$T/key-a")" = "$want" ] || fail "--job-key printed $(cat "$T/key-a"), the formula gives $want"
"$BIN/flightrecd" --job-key 'a/b' --token-file "$TOKEN" >"$T/out" 2>"$T/err"
[ $? -eq 2 ] && [ ! -s "$T/out" ] && grep -q "'a/b' is not a job id" "$T/err" ||
	fail "a bad job id was not refused with exit 2: $(cat "$T/out" "$T/err")"
"$BIN/flightrecd" --job-key "$JOB_A" >"$T/out" 2>"$T/err"
[ $? -eq 2 ] && [ ! -s "$T/out" ] && grep -q -- "--job-key needs the token" "$T/err" ||
	fail "--job-key without a token was not refused with exit 2: $(cat "$T/out" "$T/err")"
job_key "$JOB_C" "$T/key-c-old"

start_daemon --timeout 2 --heartbeat-timeout 30 --dump-deadline 10 --token-file "$TOKEN"
# The API's reads (ranks_connected, job_known) carry the cluster token.
HTTP_TOKEN=$OLD_TOKEN

# 2. Job A holds only its key: registered, and its hang diagnosed as usual.
JOB=$JOB_A
AGENT_ENV="-x FLIGHTREC_JOB_KEY_FILE=$T/key-a" start_job 2 --scenario compute --culprit 1 --at 20
A_SESSION=$JOB_PID
JOB_PID=
wait_incident 60
analyze "$INCIDENT"
[ "$RC" -eq 1 ] || fail "fr-analyze exit $RC, want 1: $(cat "$T/analyze.err")"
expect '.verdict == "hang" and [.culprits[].rank] == [1] and .op.seq == 20'
[ "$(metric auth_failures_total)" = 0 ] || fail "job A with its own key was refused"
ranks_connected "$JOB_A" 2 || fail "job A's ranks are not connected: $(http_get "/v1/jobs/$JOB_A")"
# A's key reads A's data (state, incidents, their files, a live look), and
# lists A alone; without a bearer token nothing of it is read.
INCIDENT_A=$(basename "$INCIDENT")
for url in "/v1/jobs/$JOB_A" "/v1/jobs/$JOB_A/incidents" "/v1/jobs/$JOB_A/incidents/$INCIDENT_A" \
	"/v1/jobs/$JOB_A/incidents/$INCIDENT_A/manifest.json" "/v1/jobs/$JOB_A/analysis" \
	"/v1/jobs/$JOB_A/ranks/0/stacks"; do
	[ "$(HTTP_TOKEN=$(cat "$T/key-a") http_status "$url")" = 200 ] || fail "job A's key cannot read $url"
	[ "$(HTTP_TOKEN= http_status "$url")" = 401 ] || fail "$url was read without a bearer token"
done
HTTP_TOKEN=$(cat "$T/key-a") http_get /v1/jobs >"$T/jobs-a.json"
expect "[.jobs[].job] == [\"$JOB_A\"]" "$T/jobs-a.json"
# fr-analyze --live: refused without a token, the verdict with the job's key.
"$BIN/fr-analyze" --live "$HTTP/$JOB_A" --json >"$T/live.json" 2>"$T/live.err"
rc=$?
[ "$rc" = 2 ] && grep -q "wants a bearer token for job $JOB_A (401: .*set FLIGHTREC_JOB_KEY_FILE" "$T/live.err" ||
	fail "fr-analyze --live without a token: exit $rc, $(cat "$T/live.err")"
FLIGHTREC_JOB_KEY_FILE=$T/key-a "$BIN/fr-analyze" --live "$HTTP/$JOB_A" --json >"$T/live.json" 2>"$T/live.err"
rc=$?
[ "$rc" = 1 ] || fail "fr-analyze --live with job A's key: exit $rc, want 1 (a hang): $(cat "$T/live.err")"
expect '.verdict == "hang"' "$T/live.json"

# 3. Job B with A's key, and the cluster token beside it: the key wins,
# and proves nothing for B.
JOB=$JOB_B
AGENT_ENV="-x FLIGHTREC_JOB_KEY_FILE=$T/key-a -x FLIGHTREC_TOKEN_FILE=$TOKEN" \
	start_job 2 --scenario none --step-ms 50
wait_for 30 metric_at_least auth_failures_total 2 ||
	fail "job B: auth_failures_total $(metric auth_failures_total), want 2"
logged "(claims job $JOB_B rank" || fail "job B's refusal is not in the daemon's log"
logged "the key of another job" || fail "the daemon's log does not name a key of another job"
wait_for 10 grep -q "FLIGHTREC_JOB_KEY_FILE=$T/key-a proves one job only: is it the key of job $JOB_B" \
	"$T/job.log" || fail "job B's agents did not name the job key file"
grep -q "refused the connection: wrong proof of the token" "$T/job.log" ||
	fail "job B's agents did not say they were refused"
grep -q "both FLIGHTREC_JOB_KEY_FILE and FLIGHTREC_TOKEN_FILE are set; using the job key of $T/key-a" \
	"$T/job.log" || fail "the agent did not say the job key wins over the token"
[ "$(grep -c 'both FLIGHTREC_JOB_KEY_FILE' "$T/job.log")" = 1 ] || fail "the key's precedence was said more than once"
job_known "$JOB_B" && fail "job B registered with A's key: $(http_get /v1/jobs)"
stop_job

# 4. The token is rotated: SIGHUP reads the file again.
printf '%s\n' "$NEW_TOKEN" >"$T/token.new"
chmod 600 "$T/token.new"
mv -f "$T/token.new" "$TOKEN"
kill -HUP "$DAEMON_PID"
wait_for 10 logged "reload: the token of $TOKEN changed" || fail "the rotated token was not read"
HTTP_TOKEN=$NEW_TOKEN
job_key "$JOB_C" "$T/key-c-new"
cmp -s "$T/key-c-old" "$T/key-c-new" && fail "the rotated token gave job C the same key"

# A job with a key made from the old token is refused...
failures=$(metric auth_failures_total)
JOB=$JOB_C
: >"$T/job.log"
AGENT_ENV="-x FLIGHTREC_JOB_KEY_FILE=$T/key-c-old" start_job 2 --scenario none --step-ms 50
wait_for 30 metric_at_least auth_failures_total $((failures + 2)) ||
	fail "job C with the old key: auth_failures_total $(metric auth_failures_total), want $((failures + 2))"
wait_for 10 grep -q "FLIGHTREC_JOB_KEY_FILE=$T/key-c-old proves one job only" "$T/job.log" ||
	fail "job C's agents did not name the job key file"
job_known "$JOB_C" && fail "job C registered with a key of the old token: $(http_get /v1/jobs)"
stop_job
# ...the same job with the new key is accepted...
failures=$(metric auth_failures_total)
AGENT_ENV="-x FLIGHTREC_JOB_KEY_FILE=$T/key-c-new" start_job 2 --scenario none --step-ms 50
wait_for 30 ranks_connected "$JOB_C" 2 || fail "job C with the new key did not connect: $(http_get "/v1/jobs/$JOB_C")"
[ "$(metric auth_failures_total)" = "$failures" ] || fail "job C with the new key was refused"
# C's key reads C, and nothing of job A: not its state, its incidents, its
# files or its stacks; the list shows C alone. A manual dump needs the
# daemon's token itself.
KEY_C=$(cat "$T/key-c-new")
[ "$(HTTP_TOKEN=$KEY_C http_status "/v1/jobs/$JOB_C")" = 200 ] || fail "job C's key cannot read job C"
for url in "/v1/jobs/$JOB_A" "/v1/jobs/$JOB_A/incidents" "/v1/jobs/$JOB_A/incidents/$INCIDENT_A" \
	"/v1/jobs/$JOB_A/incidents/$INCIDENT_A/manifest.json" "/v1/jobs/$JOB_A/analysis" \
	"/v1/jobs/$JOB_A/ranks/0/stacks" "/v1/jobs/$JOB_A/stacks" "/v1/jobs/$JOB_A/ranks/0/trace"; do
	[ "$(HTTP_TOKEN=$KEY_C http_status "$url")" = 401 ] || fail "job C's key read job A's $url"
done
HTTP_TOKEN=$KEY_C http_get /v1/jobs >"$T/jobs-c.json"
expect "[.jobs[].job] == [\"$JOB_C\"]" "$T/jobs-c.json"
[ "$(post_dump "$JOB_C" "$KEY_C")" = 401 ] || fail "a job's key opened a manual dump: $(cat "$T/post.json")"
stop_job
# ...and job A, authenticated with the old token's key, stays connected.
ranks_connected "$JOB_A" 2 || fail "job A's ranks were dropped by the rotation: $(http_get "/v1/jobs/$JOB_A")"
grep -q "job $JOB_A rank .* disconnected" "$T/daemon.log" && fail "a rank of job A disconnected"

# 5. Manual dumps take the new bearer token at once, and the old one no more.
[ "$(post_dump "$JOB_A" "$OLD_TOKEN")" = 401 ] || fail "the old token still opens manual dumps: $(cat "$T/post.json")"
wait_for 20 post_taken "$JOB_A" "$NEW_TOKEN" || fail "the new token was refused: $(cat "$T/post.json")"

# 6. A token file broken on reload leaves the token in effect.
printf 'short-token\n' >"$TOKEN"
kill -HUP "$DAEMON_PID"
wait_for 10 logged "reload: cannot use --token-file $TOKEN: shorter than 16 bytes; the token in effect stays" ||
	fail "the broken token file on reload was not reported"
post_taken "$JOB_A" "$NEW_TOKEN" || fail "the token in effect was lost on a bad reload: $(cat "$T/post.json")"
[ "$(post_dump "$JOB_A" short-token)" = 401 ] || fail "the broken file's contents were taken as the token"
ranks_connected "$JOB_A" 2 || fail "job A's ranks were dropped by the bad reload"
stop_job_a
echo "PASS job_key: a job's key proves that job only; a rotated token applies to new connections"
