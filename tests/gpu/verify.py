#!/usr/bin/env python3
"""Judges one run of tests/gpu/run and prints its summary line.

    verify.py RUNDIR

RUNDIR holds what tests/gpu/run collected: for each step (events, stuck,
overhead-without-N, overhead-with-N) the program's facts (STEP.txt, key=value
lines), its stderr (STEP.err) and its exit status (STEP.rc); the facts name
the agent's dump files, which are read here with the json module only (no
fr-analyze: it may not run where this does).

Prints one line on stdout, e.g.

    gpu: completed-with-events ok, stuck-on-gpu ok (rank 0 all_reduce #4
    scheduled, 2.1 s), overhead +850 ns/call (5400 -> 6250 ns) on NVIDIA H200, NCCL 2.28.9

and, on stderr, what each check saw. Exit status 0 when every check
passed, 1 otherwise.
"""
import json
import os
import statistics
import sys

# Clock conversions and the agent's 100 ms poll: tolerances, in ns, far
# below the 1 s the collective is held on the device.
CLOCK_SLACK_NS = 50 * 1000 * 1000
LATE_SLACK_NS = 1000 * 1000 * 1000


# What a dump calls an operation in flight: "entered" up to format 1.3;
# from 1.4 a GPU operation is "scheduled" until the device reaches it, then
# "started" (dumps/FORMAT.md).
IN_FLIGHT = ("entered", "scheduled", "started")


class CheckFailed(Exception):
    pass


def say(msg):
    print("  " + msg, file=sys.stderr)


def step_output(rundir, step):
    """The facts of a step that ran to its end; CheckFailed otherwise."""
    def read(ext):
        try:
            with open(os.path.join(rundir, step + ext)) as f:
                return f.read()
        except OSError:
            return None

    rc = (read(".rc") or "").strip()
    err = (read(".err") or "").strip().splitlines()
    facts = {}
    for line in (read(".txt") or "").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            facts[key] = value
    if rc != "0":
        if rc in ("124", "137"):
            why = "timed out"
        elif rc == "":
            why = "did not run"
        else:
            why = "exit " + rc
        last = err[-1] if err else "no message"
        raise CheckFailed("gpu_check %s %s: %s" % (step, why, last))
    return facts


def load_dump(path):
    try:
        with open(path) as f:
            d = json.load(f)
    except (OSError, ValueError) as e:
        raise CheckFailed("cannot read dump %s: %s" % (path, e))
    if d.get("format") != "flightrec-dump":
        raise CheckFailed("%s is not a flightrec dump" % path)
    return d


def the_comm(d, path):
    """The dump's one communicator: ours, NCCL, one member."""
    comms = d.get("pg_config", {})
    if len(comms) != 1:
        raise CheckFailed("%s: %d communicators, want the one NCCL communicator"
                          % (os.path.basename(path), len(comms)))
    cid, c = next(iter(comms.items()))
    if not cid.startswith("nccl-") or c.get("size", len(c.get("ranks", []))) != 1:
        raise CheckFailed("%s: communicator %s (size %s) is not the one-rank NCCL "
                          "communicator" % (os.path.basename(path), cid, c.get("size")))
    return cid


def all_reduces(d, cid):
    """seq -> entry for the all_reduce entries on communicator cid."""
    out = {}
    for e in d.get("entries", []):
        if e.get("pg_id") == cid and e.get("op") == "all_reduce":
            out[e.get("collective_seq_id")] = e
    return out


def gpu_states(d):
    """Whether the writer tells scheduled from started (format 1.4 on)."""
    try:
        major, minor = (int(x) for x in d.get("version", "").split("."))
    except ValueError:
        return False
    return (major, minor) >= (1, 4)


def ms(ns):
    return "%.0f ms" % (ns / 1e6)


def check_events(rundir):
    f = step_output(rundir, "events")
    ops, held = int(f["ops"]), int(f["held_seq"])
    t_return, t_release = int(f["t_return_ns"]), int(f["t_release_ns"])
    t_synced = int(f["t_synced_ns"])

    mid = load_dump(f["mid_dump"])
    cid = the_comm(mid, f["mid_dump"])
    ar = all_reduces(mid, cid)
    if held not in ar:
        raise CheckFailed("the dump taken while the device spun lacks all_reduce #%d" % held)
    state = ar[held]["state"]
    if state not in IN_FLIGHT:
        raise CheckFailed(
            "all_reduce #%d is %s in the dump taken while the device was still spinning "
            "ahead of it: completion is taken at the call's return, not from a CUDA event "
            "(FLIGHTREC_GPU_EVENTS=0, or no libcudart the agent can load?)" % (held, state))
    if state == "started":
        raise CheckFailed("all_reduce #%d is started in the dump taken while the device was "
                          "still spinning ahead of it: the device had not reached it" % held)
    early = [s for s, e in ar.items() if s < held and e["state"] != "completed"]
    if early:
        raise CheckFailed("all_reduce #%s not completed in the mid dump, though synchronised"
                          % early)
    say("while the device spun: all_reduce #%d %s, #1-#%d completed" % (held, state, held - 1))

    final = load_dump(f["final_dump"])
    cid = the_comm(final, f["final_dump"])
    ar = all_reduces(final, cid)
    if sorted(ar) != list(range(1, ops + 1)):
        raise CheckFailed("final dump has all_reduce %s, want #1-#%d" % (sorted(ar), ops))
    pending = [s for s, e in ar.items() if e["state"] != "completed"]
    if pending:
        raise CheckFailed("all_reduce %s not completed after the stream was synchronised "
                          "and the agent polled" % pending)
    last = final.get("pg_status", {}).get(cid, {}).get("last_completed_collective")
    if last != ops:
        raise CheckFailed("pg_status last_completed_collective is %s, want %d" % (last, ops))
    done = ar[held].get("time_discovered_completed_ns")
    if not isinstance(done, int):
        raise CheckFailed("all_reduce #%d has no completion time" % held)
    if done < t_release - CLOCK_SLACK_NS:
        raise CheckFailed(
            "all_reduce #%d completed %s after its call returned but %s before the device "
            "was let past the spin: not from a CUDA event"
            % (held, ms(done - t_return), ms(t_release - done)))
    if done > t_synced + LATE_SLACK_NS:
        raise CheckFailed("all_reduce #%d completed %s after the stream was synchronised: "
                          "the agent polls every 100 ms" % (held, ms(done - t_synced)))
    started = ar[held].get("time_discovered_started_ns")
    # From format 1.4 a GPU operation's start is when the device reached
    # it; the agent keeps it only while the operation is in flight.
    if gpu_states(final) and isinstance(started, int):
        if started < t_release - CLOCK_SLACK_NS:
            raise CheckFailed("all_reduce #%d started %s before the device was let past the "
                              "spin: not from a CUDA event" % (held, ms(t_release - started)))
        say("#%d recorded started %s after the release" % (held, ms(started - t_release)))
    say("all %d all_reduce completed; #%d held %s on the device, recorded completed %s "
        "after its release" % (ops, held, ms(t_release - t_return), ms(done - t_release)))
    return "completed-with-events ok"


def check_stuck(rundir):
    f = step_output(rundir, "stuck")
    seq, timeout_s = int(f["stuck_seq"]), float(f["timeout_s"])
    t_call, t_return = int(f["t_call_ns"]), int(f["t_return_ns"])
    path = f["local_dump"]

    if t_return - t_call > timeout_s * 1e9 / 2:
        raise CheckFailed("ncclAllReduce blocked the host for %s: not a collective stuck on "
                          "the device" % ms(t_return - t_call))
    if path == "none":
        raise CheckFailed("no local watchdog dump within %s s (timeout %g s) for "
                          "all_reduce #%d held on the device" % (f["wait_s"], timeout_s, seq))
    d = load_dump(path)
    cid = the_comm(d, path)
    want_dir = "local-%s-%d" % (cid, seq)
    if os.path.basename(os.path.dirname(path)) != want_dir:
        raise CheckFailed("local dump in %s, want %s" % (os.path.dirname(path), want_dir))
    reason = d.get("dump_reason", "")
    if not reason.startswith("local watchdog: all_reduce #%d on %s" % (seq, cid)):
        raise CheckFailed("local dump's reason is %r" % reason)
    ar = all_reduces(d, cid)
    state = ar[seq]["state"] if seq in ar else "missing"
    if state not in IN_FLIGHT:
        raise CheckFailed("all_reduce #%d is %s in the local dump, not in flight" % (seq, state))
    if gpu_states(d) and state != "scheduled":
        raise CheckFailed("all_reduce #%d is %s in the local dump, though the device never "
                          "got past the spin ahead of it" % (seq, state))
    if any(ar.get(s, {}).get("state") != "completed" for s in range(1, seq)):
        raise CheckFailed("the collectives before #%d are not all completed" % seq)
    waited = (d["time_dumped_ns"] - ar[seq]["time_created_ns"]) / 1e9
    if waited < timeout_s - CLOCK_SLACK_NS / 1e9:
        raise CheckFailed("dumped after %.2f s, before the %g s timeout" % (waited, timeout_s))
    say("host call returned in %s; local watchdog dumped all_reduce #%d (%s) after %.2f s: %s"
        % (ms(t_return - t_call), seq, state, waited, reason))
    return "stuck-on-gpu ok (rank %d all_reduce #%d %s, %.1f s)" % (d["rank"], seq, state, waited)


def check_overhead(rundir):
    runs = sorted(n[:-3] for n in os.listdir(rundir)
                  if n.startswith("overhead-") and n.endswith(".rc"))
    rounds = {"without": [], "with": []}
    for step in runs:
        f = step_output(rundir, step)
        kind = "with" if step.startswith("overhead-with-") else "without"
        if f.get("agent") != ("1" if kind == "with" else "0"):
            raise CheckFailed("%s: the agent %s loaded" % (step, "was not" if kind == "with"
                                                            else "was"))
        with open(os.path.join(rundir, step + ".txt")) as fh:
            rounds[kind] += [float(line.split("=", 1)[1]) for line in fh
                             if line.startswith("round_ns=")]
    if not rounds["without"] or not rounds["with"]:
        raise CheckFailed("no timed rounds")
    x, y = statistics.median(rounds["without"]), statistics.median(rounds["with"])
    say("ns per ncclAllReduce, without the agent: %s; with: %s"
        % (" ".join("%.0f" % v for v in rounds["without"]),
           " ".join("%.0f" % v for v in rounds["with"])))
    return "overhead %+.0f ns/call (%.0f -> %.0f ns)" % (y - x, x, y)


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    rundir = sys.argv[1]
    parts, ok = [], True
    for name, check in (("completed-with-events", check_events),
                        ("stuck-on-gpu", check_stuck),
                        ("overhead", check_overhead)):
        print("%s:" % name, file=sys.stderr)
        try:
            parts.append(check(rundir))
        except CheckFailed as e:
            say("FAILED: %s" % e)
            parts.append("%s FAILED (%s)" % (name, e))
            ok = False
        except (KeyError, ValueError, TypeError) as e:
            say("FAILED: unexpected output: %r" % e)
            parts.append("%s FAILED (unexpected output: %r)" % (name, e))
            ok = False
    ident = {}
    for step in ("probe", "events", "stuck"):
        try:
            with open(os.path.join(rundir, step + ".txt")) as f:
                for line in f:
                    k, _, v = line.rstrip("\n").partition("=")
                    ident.setdefault(k, v)
        except OSError:
            pass
    label = "gpu (stand-in)" if os.path.exists(os.path.join(rundir, "stand-in")) else "gpu"
    print("%s: %s on %s, NCCL %s" % (label, ", ".join(parts), ident.get("device", "?"),
                                     ident.get("nccl", "?")))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
