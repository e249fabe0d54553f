#!/usr/bin/env bash
# The agent is self-contained and inert outside MPI programs: it loads into any process (even
# with eager binding) without libmpi, starts nothing, and references no MPI
# symbol at all (the hooks find libmpi at run time: agent/mpi_real.h).
. "$(dirname "$0")/lib.sh"

mpi_refs=$(nm -D --undefined-only "$AGENT" | awk '$2 ~ /^(P?MPI_|ompi_)/ {print $2}')
[ -z "$mpi_refs" ] ||
	fail "MPI references bound at load time (use the table of agent/mpi_real.h): $mpi_refs"
# The hooks, and _exit/_Exit, which the agent interposes to tell its
# daemon how a rank left (EXIT) before the process ends.
exported=$(nm -D --defined-only "$AGENT" | awk '$2 ~ /[TDB]/ {sub(/@.*/, "", $3); print $3}' |
	grep -vE '^(MPI_|nccl[A-Z]|dlsym$|_exit$|_Exit$|fr_version$|fr_dump_now$|FLIGHTREC_)' || true)
[ -z "$exported" ] || fail "symbols leak out of the agent: $exported"

# It carries its libraries inside (training containers have none of them):
# it needs the C runtime's own libraries only. A sanitizer build also needs
# the sanitizer's runtime.
needed=$(ldd "$AGENT" | awk '{print $1}' |
	grep -vE '^(linux-vdso\.so|/lib(64)?/ld-linux|ld-linux|lib(c|m|dl|pthread|rt)\.so)' |
	grep -vE '^lib(a|ub|t)san\.so|^lib(stdc\+\+|gcc_s)\.so' || true)
if [ -n "$needed" ] && ! ldd "$AGENT" | grep -qE 'lib(a|t|ub)san\.so'; then
	fail "the agent needs libraries a container may lack: $(echo $needed)"
fi
# ... and it loads into a root file system holding nothing but the C library
# and a program, as a minimal container would (chroot needs root; a
# sanitizer build needs its runtime, which such a root does not have).
if [ "$(id -u)" = 0 ] && [ -z "$sanitizer_rt" ]; then
	mkdir -p "$T/bare/bin"
	for f in $(ldd /bin/true | grep -o '/[^ ]*'); do
		mkdir -p "$T/bare$(dirname "$f")" && cp -L "$f" "$T/bare$f"
	done
	# The agent at the same path inside as outside, since chroot itself
	# starts under LD_PRELOAD too.
	agent=$(readlink -f "$AGENT")
	mkdir -p "$T/bare$(dirname "$agent")"
	cp /bin/true "$T/bare/bin/" && cp "$agent" "$T/bare$agent"
	out=$(LD_PRELOAD=$agent chroot "$T/bare" /bin/true 2>&1) ||
		fail "agent does not load in a root with only the C library: $out"
	[ -z "$out" ] || fail "agent complained in a bare root: $out"
fi

start_daemon --timeout 2 --heartbeat-timeout 10
out=$(LD_PRELOAD=$PRELOAD FLIGHTREC_ADDR=127.0.0.1:$LISTEN_PORT sh -c 'echo inert') ||
	fail "a non-MPI program failed under the agent"
[ "$out" = inert ] || fail "output changed under the agent: $out"
LD_BIND_NOW=1 LD_PRELOAD=$PRELOAD /bin/true || fail "agent does not load with LD_BIND_NOW"
conns=$(http_get /metrics | awk '$1 == "flightrec_connections" {print $2}')
[ "$conns" = 0 ] || fail "a non-MPI process connected to the daemon ($conns)"

# A healthy MPI job under the agent produces the same output and exit code;
# each rank forks a child (as a data-loader would), which finds the agent
# inert and never shows up at the daemon.
start_job 3 --scenario none --iters 20 --fork
wait_job_exit 30
[ "$JOB_RC" -eq 0 ] || fail "healthy job exited $JOB_RC under the agent"
grep -q "done after 20 iterations" "$T/job.log" || fail "healthy job output changed"
http_get "/v1/jobs/$JOB" >"$T/job.json"
expect '.world_size == 3 and (.ranks | length) == 3' "$T/job.json"
# 20 allreduces, then MPI_Finalize (recorded as world's 21st collective).
expect '[.ranks[] | .comms.world.last_completed] == [21,21,21]' "$T/job.json"
[ "$(grep -c 'fr_dump_now -> -107$' "$T/job.log")" -eq 3 ] ||
	fail "a forked child found the agent active: $(grep child "$T/job.log")"
parents=$(sed -n 's/^child [0-9]* of rank [0-9]* (pid \([0-9]*\)).*/\1/p' "$T/job.log" | sort -n | tr '\n' ' ')
seen=$(jq -r '[.ranks[].pid] | sort | map(tostring) | join(" ")' "$T/job.json")
[ "$parents" = "$seen " ] || fail "daemon saw pids '$seen', the ranks are '$parents'"
echo "PASS preload: inert outside MPI, transparent inside"
