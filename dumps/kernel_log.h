/*
 * The node's own evidence: the kernel log lines of an incident's window
 * that concern the job's devices and processes (GPU errors, NIC link
 * changes, OOM kills and segfaults of its ranks, hung tasks), as the daemon
 * collects them from /dev/kmsg (daemon/kmsg.c) and writes them into the
 * incident's manifest ("kernel_log", dumps/FORMAT.md), and as fr-analyze
 * reads them back and prints them under the culprit they concern.
 */
#ifndef FR_KERNEL_LOG_H
#define FR_KERNEL_LOG_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "trace.h"

/* What a kept line is about; the names are the manifest's and --json's. */
#define FR_KLOG_KINDS(X)                                                        \
	X(FR_KLOG_XID, "xid")             /* NVRM: Xid, a GPU error */          \
	X(FR_KLOG_NIC, "nic")             /* a NIC's link went down or up */    \
	X(FR_KLOG_OOM, "oom")             /* the OOM killer killed a rank */    \
	X(FR_KLOG_HUNG_TASK, "hung_task") /* a rank blocked in the kernel */    \
	X(FR_KLOG_SEGFAULT, "segfault")   /* a rank's segfault, as the kernel saw it */

enum fr_klog_kind {
#define FR_KLOG_ENUM(e, name) e,
	FR_KLOG_KINDS(FR_KLOG_ENUM)
#undef FR_KLOG_ENUM
	FR_KLOG__KINDS
};

/* A line's text is cut to this many bytes (the kernel's are at most 1 KiB). */
#define FR_KLOG_TEXT_MAX 511
#define FR_KLOG_ERROR_MAX 255
/* Lines one node keeps of one incident; the rest are counted in `dropped`. */
#define FR_KLOG_LINES_MAX 256

struct fr_klog_line {
	uint64_t time_ns;           /* CLOCK_REALTIME, from the record's monotonic stamp */
	enum fr_klog_kind kind;
	uint32_t pid;               /* the rank's pid it names; 0 when it names none */
	uint32_t rank;              /* the rank of that pid; FR_RANK_UNKNOWN when none */
	char text[FR_KLOG_TEXT_MAX + 1];
};

/*
 * One node's kernel log over an incident's window [from_ns, to_ns]: the
 * lines kept, or why there are none (`available` false: /dev/kmsg could
 * not be read, `error` says why).
 */
struct fr_klog {
	char node[FR_HOST_MAX + 1];
	bool available;
	char error[FR_KLOG_ERROR_MAX + 1];
	uint64_t from_ns;
	uint64_t to_ns;
	uint64_t dropped;           /* lines that matched past FR_KLOG_LINES_MAX */
	size_t nlines;
	struct fr_klog_line *lines; /* owned, oldest first */
};

const char *fr_klog_kind_name(enum fr_klog_kind k);
/* The kind named `name`; false when none is. */
bool fr_klog_kind_parse(const char *name, enum fr_klog_kind *out);

/* Appends a line to `k` (a copy of `l`), or counts it dropped past the
 * limit. Returns 0 or -ENOMEM. */
int fr_klog_add(struct fr_klog *k, const struct fr_klog_line *l);
/* Frees what each of the `n` logs owns, then the array itself. */
void fr_klogs_free(struct fr_klog *k, size_t n);

/* A node's object of the manifest's "kernel_log" array; a new reference,
 * NULL when out of memory. */
json_t *fr_klog_to_json(const struct fr_klog *k);
/*
 * The same object as JSON text (`len` bytes, as a node daemon sends it in
 * NODE_KERNEL_LOG) into `k` (zeroed by the caller; free k->lines after,
 * also after an error), read as a manifest's is. Returns 0, -ENOMEM, or
 * -EPROTO with `err` saying why ("node_kernel_log: kernel_log.node:
 * missing (expected a string)").
 */
int fr_klog_parse(const char *buf, size_t len, struct fr_klog *k, char *err, size_t errlen);

struct fr_verdict;
struct fr_culprit;

/*
 * fr-analyze's part. The lines a culprit's are: those naming its pid, and
 * those of its node that name no rank's. Its reference time is when it
 * crashed or exited when it did, else its last progress (the latest time
 * any of its operations was entered or completed).
 *
 * fr_klog_print_culprit() prints the culprit's lines, one a line under it
 * ("  kernel: node17: NVRM: Xid 79, ..., 2.0 s before rank 5 stopped");
 * fr_klog_print_rest() the lines none of the first `shown` culprits took
 * and the nodes whose log could not be read. Neither prints anything when `v` holds no kernel log.
 */
void fr_klog_print_culprit(FILE *out, const struct fr_verdict *v, const struct fr_culprit *cu,
			   const struct fr_trace *t);
void fr_klog_print_rest(FILE *out, const struct fr_verdict *v, size_t shown);

/*
 * A culprit `killed` (its connection dropped, its process gone) whom a
 * node's kernel log shows the OOM killer killing (a line of kind "oom"
 * naming its pid) was killed by the OOM killer: marks it (oom_killed) and
 * says so in the summary instead of "killed or lost". Call it once the
 * verdict holds the kernel logs.
 */
void fr_klog_name_oom(struct fr_verdict *v);

/*
 * --json: the verdict's "kernel_log" (every node's, as the manifest has it,
 * each line with its node) and each culprit's (its lines, with "before_s",
 * how long before its reference time, negative after, null when unknown).
 * `o` is fr_verdict_to_json()'s object of `v`, `traces` the evidence it
 * was judged on. Returns 0 or -ENOMEM; nothing is added when `v` holds no
 * kernel log, so that other output stays as it was.
 */
int fr_klog_add_json(json_t *o, const struct fr_verdict *v, const struct fr_trace *const *traces,
		     size_t ntraces);

#endif
