#!/usr/bin/env bash
# CPythons other than Debian's /usr/bin/python3 (found on PATH or under
# pyenv; PYTHONS="path ..." names them instead), each running a stuck
# ctypes MPI job under the agent: 3.11 (another build, with a shared
# libpython), 3.12 and 3.13 give the stuck rank's Python frames, with the
# frame where the interpreter's loop was entered marked (<module>, as
# main and stuck_in_compute are Python calls of Python) and shown among
# the native frames by fr-analyze; any other version gives native frames
# and one python_note naming the version.
. "$(dirname "$0")/lib.sh"

SCRIPT=$ROOT/tests/python/ctypes_hang.py
found=
for p in ${PYTHONS:-$(command -v python3.10 python3.12 python3.13 2>/dev/null)} \
	$([ -z "${PYTHONS:-}" ] && command -v pyenv >/dev/null &&
		ls "$(pyenv root)"/versions/3.1[0-3]*/bin/python3.1[0-3] 2>/dev/null); do
	[ -x "$p" ] && "$p" -c 'import ctypes' 2>/dev/null && found="$found $p"
done
SLEEP_LINE=$(grep -n 'time.sleep(0.1)' "$SCRIPT" | head -n 1 | cut -d: -f1)
[ -n "$found" ] || skip "no CPython other than /usr/bin/python3 here (set PYTHONS)"

start_daemon --timeout 2 --heartbeat-timeout 10
base=$JOB n=0
for py in $found; do
	n=$((n + 1))
	ver=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
	JOB=$base-$n
	start_mpi_program 2 "$py" "$SCRIPT" 1 3 100
	wait_incident 40
	D=$INCIDENT/rank-1.json
	case $ver in
	3.11 | 3.12 | 3.13)
		expect "[.threads[] | select(.python_frames) | .python_frames] |
			any(map(.function) == [\"stuck_in_compute\", \"main\", \"<module>\"] and
			    .[0].line == $SLEEP_LINE and .[0].file == \"$SCRIPT\")" "$D"
		expect "[.threads[] | select(.python_frames) | .python_frames] |
			any(map(.function) == [\"stuck_in_compute\", \"main\", \"<module>\"] and
			    map(.entry // false) == [false, false, true])" "$D"
		"$BIN/fr-analyze" "$INCIDENT" >"$T/report-$n.txt"
		grep -A 1 "py#2 <module> " "$T/report-$n.txt" | grep -qE "^    #[0-9]+ _PyEval_EvalFrameDefault\+" ||
			fail "python $ver: the Python frames are not among the native ones: $(cat "$T/report-$n.txt")"
		;;
	*)
		expect "(.python_note | contains(\"Python $ver\") or contains(\"older than 3.11\")) and
			([.threads[] | select(.python_frames)] | length == 0) and
			([.threads[].frames[]] | length > 0)" "$D"
		;;
	esac
	stop_job
	echo "python $ver ($py): as expected"
done
echo "PASS python versions:$found"
