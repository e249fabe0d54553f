#!/usr/bin/env bash
# A reduced size of bench/central.sh (in make bench at 65,536 ranks): 2,048
# ranks behind 16 fake node daemons, then 5,000 behind 625 (8 a node, as
# on a GPU cluster), answer a dump request with their
# summaries at once; the central daemon writes them to one file per node,
# judges the incident, fetches the culprit's full dump, and fr-analyze on
# the incident names the planted rank. bench/central.sh fails (exits
# non-zero) on a missing incident or a wrong verdict.
. "$(dirname "$0")/lib.sh"

RANKS=2048 NODES=16 ENTRIES=32 timeout -k 5 120 "$ROOT/bench/central.sh" >"$T/central.out" 2>&1 ||
	fail "bench/central.sh at 2,048 ranks: $(tail -n 20 "$T/central.out")"
grep -q "^== central: incident complete .* 2048 of 2048 ranks answered" "$T/central.out" ||
	fail "not every rank answered: $(cat "$T/central.out")"
grep -q "^== central: fr-analyze on the incident (1[78] files" "$T/central.out" ||
	fail "the incident is not 16 node files, the culprit's full dump and the manifest: $(cat "$T/central.out")"
grep -q "^== central: full dumps fetched: 1$" "$T/central.out" || fail "the culprit's full dump was not fetched: $(cat "$T/central.out")"
first=$(grep -o 'incident complete [0-9.]* s' "$T/central.out")

# The shape of a GPU cluster: 8 ranks a node, 625 nodes (a manifest made
# in two parts of 4,096 ranks and one of 904). Each node's
# messages find it by name, and a node that answered for all its ranks
# is not a line of the log; past 256 nodes, a file holds a group of them.
RANKS=5000 NODES=625 ENTRIES=16 timeout -k 5 180 "$ROOT/bench/central.sh" >"$T/many.out" 2>&1 ||
	fail "bench/central.sh at 5,000 ranks behind 625 nodes: $(tail -n 20 "$T/many.out")"
grep -q "^== central: incident complete .* 5000 of 5000 ranks answered" "$T/many.out" ||
	fail "not every rank answered behind 625 nodes: $(cat "$T/many.out")"
grep -q "^== central: fr-analyze on the incident (211 files" "$T/many.out" ||
	fail "the incident is not 209 files of up to 3 nodes, the culprit's full dump and the manifest: $(cat "$T/many.out")"
lines=$(sed -n 's/^== central: daemon log: \([0-9]*\) lines.*/\1/p' "$T/many.out")
[ -n "$lines" ] && [ "$lines" -lt 32 ] || fail "the daemon logged ${lines:-?} lines for one incident of 625 nodes: $(cat "$T/many.out")"
echo "PASS central_scale: $first at 2,048 ranks behind 16 node daemons, \
$(grep -o 'incident complete [0-9.]* s' "$T/many.out") at 5,000 behind 625 ($lines log lines); \
$(grep '^== central: verdict' "$T/central.out" | cut -c 22-90)"
