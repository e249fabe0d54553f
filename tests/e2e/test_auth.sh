#!/usr/bin/env bash
# The daemon with --token-file: a job whose agents hold the token is
# diagnosed as usual; jobs without it, with another one, or whose token
# file is missing are refused before any of their ranks registers (said in
# the daemon's log and the agents' stderr, counted in /metrics); a HELLO
# captured from one connection and replayed on another is refused, as are
# an old agent's plain HELLO, a connection that never proves anything and
# one that starts with another frame (a python client speaking the
# protocol, with its own HMAC); POST /v1/jobs/<job>/dump needs the bearer
# token (401), names a job that exists (404), and makes every rank dump
# (202); without a token configured it is forbidden (403), and agents
# holding a token refuse that daemon, which cannot prove it (once, said on
# stderr; the application runs on). A token file too short stops the
# daemon; one that others may read is warned about.
. "$(dirname "$0")/lib.sh"
trap '' PIPE

job_known() { http_get /v1/jobs | jq -e --arg j "$1" '.jobs | any(.job == $j)' >/dev/null; }
post_dump() { # post_dump JOB [TOKEN]: prints the status, the body in $T/post.json
	curl -s -o "$T/post.json" -w '%{http_code}' --max-time 10 -X POST \
		${2:+-H "Authorization: Bearer $2"} "$HTTP/v1/jobs/$1/dump"
}
expect_status() { # expect_status WANT JOB [TOKEN]
	local got
	got=$(post_dump "$2" "${3:-}")
	[ "$got" = "$1" ] || fail "POST /v1/jobs/$2/dump: status $got, want $1: $(cat "$T/post.json")"
}

TOKEN_VALUE=flightrec-e2e-$RANDOM$RANDOM-0123456789abcdef
TOKEN=$T/token
printf '%s\n' "$TOKEN_VALUE" >"$TOKEN"
chmod 600 "$TOKEN"
printf 'flightrec-e2e-wrong-token-0123456789\n' >"$T/wrong"
chmod 600 "$T/wrong"

# A token too short stops the daemon before it listens; a readable one is
# used, with a warning.
printf 'short-token\n' >"$T/short"
chmod 600 "$T/short"
timeout 10 "$BIN/flightrecd" --listen 127.0.0.1:0 --http 127.0.0.1:0 --dump-dir "$T/incidents" \
	--token-file "$T/short" >"$T/short.log" 2>&1 && fail "the daemon ran with a 11-byte token"
grep -q "cannot use --token-file $T/short: shorter than 16 bytes" "$T/short.log" ||
	fail "no reason given for refusing the short token: $(cat "$T/short.log")"
cp "$TOKEN" "$T/open-token"
chmod 644 "$T/open-token"
start_daemon --token-file "$T/open-token"
grep -q "warning: --token-file $T/open-token is readable by other users" "$T/daemon.log" ||
	fail "no warning about a token file others can read"
# Manual dumps are never open, not even with the daemon's token as a
# query string or in another scheme.
expect_status 401 "$JOB"
[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -X POST -H "Authorization: Basic $TOKEN_VALUE" \
	"$HTTP/v1/jobs/$JOB/dump")" = 401 ] || fail "a Basic authorization was taken for a bearer token"
stop_daemon

start_daemon --timeout 2 --heartbeat-timeout 10 --dump-deadline 10 --token-file "$TOKEN"
BASE=$JOB
# Reads of the API (ranks_connected, metric, ...) carry the token.
HTTP_TOKEN=$TOKEN_VALUE

# 1. The job holds the token: connected, and its hang diagnosed as usual.
AGENT_ENV="-x FLIGHTREC_TOKEN_FILE=$TOKEN" start_job 3 --scenario compute --culprit 1 --at 20
wait_incident 40
analyze "$INCIDENT"
[ "$RC" -eq 1 ] || fail "fr-analyze exit $RC, want 1: $(cat "$T/analyze.err")"
expect '.verdict == "hang" and [.culprits[].rank] == [1] and .op.seq == 20'
[ "$(metric auth_failures_total)" = 0 ] || fail "the job with the token was refused"

# 2. Manual dumps of that job: the token first, then the job.
expect_status 401 "$JOB"
expect_status 401 "$JOB" "wrong-$TOKEN_VALUE"
expect_status 401 "$JOB" "${TOKEN_VALUE:0:20}"
[ "$(metric http_auth_failures_total)" = 3 ] ||
	fail "http_auth_failures_total $(metric http_auth_failures_total), want 3"
expect_status 404 "no-such-job" "$TOKEN_VALUE"
expect_status 404 ".hidden" "$TOKEN_VALUE"
expect_status 404 "a:b" "$TOKEN_VALUE"
[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$HTTP/v1/jobs/$JOB/dump")" = 405 ] ||
	fail "GET of the dump endpoint was not refused"
[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -X POST "$HTTP/v1/jobs/$JOB")" = 405 ] ||
	fail "POST to a read-only endpoint was not refused"
# A job's data needs the token too; /healthz and /metrics stay open.
[ "$(HTTP_TOKEN= http_status "/v1/jobs/$JOB")" = 401 ] || fail "a job's data was read without the token"
[ "$(HTTP_TOKEN= http_status "/v1/jobs")" = 401 ] || fail "the job list was read without the token"
[ "$(HTTP_TOKEN=wrong-$TOKEN_VALUE http_status "/v1/jobs/$JOB/incidents")" = 401 ] ||
	fail "a job's incidents were read with a wrong token"
[ "$(http_status "/v1/jobs/$JOB")" = 200 ] || fail "a job's data was refused with the token"
[ "$(HTTP_TOKEN= http_status /healthz)" = 200 ] || fail "/healthz needs no token"
[ "$(HTTP_TOKEN= http_status /metrics)" = 200 ] || fail "/metrics needs no token"
# Oversized requests are refused with a status, not read: a body on the
# one POST (announced, or chunked without end), a URL beyond the server's
# request memory.
head -c 100000 /dev/zero >"$T/body"
[ "$(curl -s -o "$T/big.json" -w '%{http_code}' --max-time 5 -X POST \
	-H "Authorization: Bearer $TOKEN_VALUE" --data-binary @"$T/body" \
	"$HTTP/v1/jobs/$JOB/dump")" = 413 ] || fail "a POST with a 100 kB body was not refused with 413"
expect '.error == "this request takes no body"' "$T/big.json"
[ "$(yes | head -c 50000000 | curl -s -o /dev/null -w '%{http_code}' --max-time 5 -X POST \
	-H "Transfer-Encoding: chunked" --data-binary @- "$HTTP/v1/jobs/$JOB/dump")" = 413 ] ||
	fail "a chunked POST body was not refused with 413"
long=$(head -c 100000 /dev/zero | tr '\0' a)
[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$HTTP/v1/jobs/$long")" = 414 ] ||
	fail "a 100 kB URL was not refused with 414"
[ "$(http_status /healthz)" = 200 ] || fail "the daemon is unhealthy after oversized requests"
# The watchdog's incident may still be finishing: a manual one waits (409).
accepted() { [ "$(post_dump "$JOB" "$TOKEN_VALUE")" = 202 ]; }
wait_for 20 accepted || fail "manual dump not accepted: $(cat "$T/post.json")"
expect ".incident != null and .ranks_requested == 3 and
	.path == \"$T/incidents/$JOB/\" + .incident" "$T/post.json"
MANUAL=$(jq -r .path "$T/post.json")
wait_for 20 test -s "$MANUAL/manifest.json" || fail "the manual incident never completed"
expect '.reason == "manual" and .trigger.rank == null' "$MANUAL/manifest.json"
for r in 0 1 2; do
	[ -s "$MANUAL/rank-$r.json" ] || fail "rank $r did not dump for the manual incident: $(ls "$MANUAL")"
done
grep -q "incident $(jq -r .incident "$T/post.json") of job $JOB was asked for over HTTP by 127.0.0.1:" "$T/daemon.log" ||
	fail "the manual incident was not logged"
stop_job

# 3. Jobs without the token, with another token, with a token file that
# does not exist: refused, said on both sides, counted; no rank registered.
refused=0
for how in none wrong missing; do
	JOB=$BASE-$how
	case $how in
	none) AGENT_ENV= ;;
	wrong) AGENT_ENV="-x FLIGHTREC_TOKEN_FILE=$T/wrong" ;;
	missing) AGENT_ENV="-x FLIGHTREC_TOKEN_FILE=$T/missing" ;;
	esac
	: >"$T/job.log"
	start_job 2 --scenario none
	case $how in
	none) want="refused the connection: this daemon requires a token" ;;
	wrong) want="refused the connection: wrong proof of the token" ;;
	missing) want="FLIGHTREC_TOKEN_FILE=$T/missing: No such file or directory; not connecting to the daemon at 127.0.0.1:$LISTEN_PORT until it can be read" ;;
	esac
	wait_for 10 grep -q "$want" "$T/job.log" || fail "job $JOB ($how): the agent did not say \"$want\""
	# A token file that cannot be read fails closed: no connection at all
	# (whoever listens would be obeyed), so nothing for the daemon to refuse.
	[ $how = missing ] || refused=$((refused + 2))
	wait_for 20 metric_at_least auth_failures_total "$refused" ||
		fail "job $JOB ($how): auth_failures_total $(metric auth_failures_total), want $refused"
	if [ $how = missing ]; then
		grep -q "(claims job $JOB rank" "$T/daemon.log" &&
			fail "job $JOB ($how): the agent connected without its token: $(grep "$JOB" "$T/daemon.log")"
		[ "$(grep -c "FLIGHTREC_TOKEN_FILE=$T/missing" "$T/job.log")" = 2 ] ||
			fail "job $JOB ($how): the unreadable token not said once per rank: $(cat "$T/job.log")"
		# The file is read again before each attempt: once it is there,
		# the ranks connect with it.
		install -m 600 "$TOKEN" "$T/missing"
		wait_for 20 job_known "$JOB" || fail "job $JOB: the token file, once readable, was not used"
		rm -f "$T/missing"
	else
		grep -q "refusing the connection from .* (claims job $JOB rank" "$T/daemon.log" ||
			fail "job $JOB ($how): no refusal in the daemon's log"
		job_known "$JOB" && fail "job $JOB ($how) registered: $(http_get /v1/jobs)"
	fi
	stop_job
done
grep -q "no proof of the token" "$T/daemon.log" || fail "the missing proof was not named"
grep -q "wrong proof of the token" "$T/daemon.log" || fail "the wrong proof was not named"
JOB=$BASE

# 4. A client of its own: a replayed HELLO, an old agent, a silent
# connection and a wrong first frame.
cat >"$T/client.py" <<'EOF'
import hashlib, hmac, json, socket, struct, sys, time, urllib.request

port, http, token_file, job = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
token = open(token_file, 'rb').read().rstrip(b'\n')
MAGIC = 0x43455246

def frame(version, type_, payload):
    return struct.pack('<IHHII', MAGIC, version, type_, len(payload), 0) + payload

def s(b):
    return struct.pack('<H', len(b)) + b

def hello_payload(rank, pid):
    return (s(job.encode()) + struct.pack('<III', rank, 1, pid) + s(b'replay-host') +
            struct.pack('<IQ', 64, 1700000000000000000) + s(b'python client'))

def proof(key, nonce, payload):
    k = hmac.new(key, b'flightrec job key\0' + job.encode(), hashlib.sha256).digest()
    return hmac.new(k, b'flightrec hello\0' + nonce + payload, hashlib.sha256).digest()

def recv_exact(sock, n):
    data = b''
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise EOFError('closed after %d of %d bytes' % (len(data), n))
        data += chunk
    return data

def read_frame(sock):
    magic, version, type_, length, flags = struct.unpack('<IHHII', recv_exact(sock, 16))
    assert magic == MAGIC and flags == 0, (magic, flags)
    return version, type_, recv_exact(sock, length)

def connect():
    sock = socket.create_connection(('127.0.0.1', port), timeout=15)
    version, type_, payload = read_frame(sock)
    assert (version, type_, len(payload)) == (2, 8, 32), (version, type_, len(payload))
    return sock, payload

def refused(sock):
    """The ERROR code the daemon answers with, then the connection must end."""
    version, type_, payload = read_frame(sock)
    assert (version, type_) == (2, 10), (version, type_)
    code, = struct.unpack('<H', payload[:2])
    assert sock.recv(1) == b'', 'the connection stayed open after ERROR'
    return code

def rank0(state):
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            req = urllib.request.Request(http + '/v1/jobs/' + job,
                                         headers={'Authorization': 'Bearer ' + token.decode()})
            doc = json.load(urllib.request.urlopen(req, timeout=5))
            if any(r['rank'] == 0 and r['state'] == state and r['pid'] == 4242
                   for r in doc['ranks']):
                return True
        except Exception:
            pass
        time.sleep(0.1)
    return False

out = {}
silent, _ = connect()
silent_since = time.time()

# An honest client: AUTH for its own nonce, then HELLO, then a heartbeat.
a, nonce_a = connect()
hello = hello_payload(0, 4242)
captured = frame(2, 9, proof(token, nonce_a, hello)) + frame(1, 1, hello)
a.sendall(captured + frame(1, 4, struct.pack('<Q', 1700000000000000000)))
out['accepted'] = rank0('connected')

# The same bytes on another connection: another nonce, so a wrong proof,
# while the rank is connected, and again once it is free.
b, nonce_b = connect()
out['nonces_differ'] = nonce_a != nonce_b
b.sendall(captured)
out['replay_code'] = refused(b)
a.close()
out['released'] = rank0('disconnected')
c, _ = connect()
c.sendall(captured)
out['replay_free_code'] = refused(c)

# A version-1 agent: HELLO without AUTH.
d, _ = connect()
d.sendall(frame(1, 1, hello_payload(0, 4243)))
out['no_proof_code'] = refused(d)

# Another token.
e, nonce_e = connect()
e.sendall(frame(2, 9, proof(b'flightrec-e2e-wrong-token-0123456789', nonce_e, hello)) +
          frame(1, 1, hello))
out['wrong_token_code'] = refused(e)

# Anything but AUTH or HELLO first.
f, _ = connect()
f.sendall(frame(1, 4, struct.pack('<Q', 1)))
out['first_frame_code'] = refused(f)

# The silent connection is closed at the deadline.
out['silent_code'] = refused(silent)
out['silent_s'] = round(time.time() - silent_since, 1)
print(json.dumps(out))
EOF
failures=$(metric auth_failures_total)
rejected=$(metric frames_rejected_total)
timeout 60 python3 "$T/client.py" "$LISTEN_PORT" "$HTTP" "$TOKEN" "$BASE-python" >"$T/client.json" \
	2>"$T/client.err" || fail "the python client failed: $(cat "$T/client.err")"
expect '.accepted and .nonces_differ and .released' "$T/client.json"
expect '.replay_code == 2 and .replay_free_code == 2 and .wrong_token_code == 2' "$T/client.json"
expect '.no_proof_code == 1 and .silent_code == 1 and .silent_s >= 9' "$T/client.json"
expect '.first_frame_code == 4' "$T/client.json"
[ "$(metric auth_failures_total)" = $((failures + 5)) ] ||
	fail "auth_failures_total $(metric auth_failures_total), want $((failures + 5))"
[ "$(metric frames_rejected_total)" = $((rejected + 1)) ] || fail "the wrong first frame was not counted"
stop_daemon

# 5. Without a token configured, manual dumps are forbidden, and agents
# that hold one refuse the daemon: it cannot prove the token (it might be
# anyone listening on that port). They say so once each and the
# application runs to its end untouched.
start_daemon
expect_status 403 "$JOB" "$TOKEN_VALUE"
expect '.error | startswith("no token configured")' "$T/post.json"
JOB=$BASE-tokenless
: >"$T/job.log"
AGENT_ENV="-x FLIGHTREC_TOKEN_FILE=$TOKEN" start_job 2 --scenario none --iters 30
wait_job_exit 60
[ "$JOB_RC" -eq 0 ] || fail "the job failed next to a daemon that cannot prove the token ($JOB_RC)"
grep -q "done after 30 iterations" "$T/job.log" || fail "the job's output changed"
[ "$(grep -c 'did not prove it holds the token (it did not ask for the token' "$T/job.log")" = 2 ] ||
	fail "each rank did not say once that it refused the daemon: $(grep flightrec "$T/job.log")"
! job_known "$JOB" || fail "agents with a token registered with a daemon that has none"
echo "PASS auth: token proven and refused, replay refused, manual dumps authorised"
