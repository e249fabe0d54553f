/*
 * The node's own evidence of an incident (kmsg.c): the kernel log lines of
 * the incident's window that concern the job's devices and processes, read
 * from /dev/kmsg, which the daemon (root under systemd) can read where the
 * agents usually cannot. The lines go into the manifest's "kernel_log"
 * (dumps/kernel_log.h, dumps/FORMAT.md).
 *
 * A line is kept when it falls in the window and is one of
 * (kmsg_classify()):
 *   xid        "NVRM: Xid ..." (a GPU error);
 *   nic        a link going down or up ("link down", "Link is Down", ...),
 *              or an mlx5 error;
 *   oom        "Out of memory: Killed process <pid>", "oom-kill:...,pid=<pid>";
 *   hung_task  "INFO: task <comm>:<pid> blocked for more than N seconds";
 *   segfault   "<comm>[<pid>]: segfault at ...".
 * A line that names a pid is kept only when the pid is one of the job's
 * ranks on this node (from their HELLO), and says which rank; oom,
 * hung_task and segfault lines always name one. Xid and NIC lines that
 * name none concern the node's devices, which the job uses.
 *
 * Reading is bounded (KMSG_READ_MAX_NS, KMSG_RECORDS_MAX, FR_KLOG_LINES_MAX
 * lines kept) and runs on the thread pool with the manifest.
 */
#ifndef FR_DAEMON_KMSG_H
#define FR_DAEMON_KMSG_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../dumps/kernel_log.h"

#define KMSG_PATH "/dev/kmsg"
/* The window starts when the job's first rank started, but no more than
 * this long before the incident was detected. */
#define KMSG_LOOKBACK_NS (3600ull * 1000000000ull)
/* What one incident's read may cost at most. */
#define KMSG_READ_MAX_NS (2ull * 1000000000ull)
#define KMSG_RECORDS_MAX (1u << 20)

/* One record of /dev/kmsg, as kmsg_parse() reads it. */
struct kmsg_record {
	unsigned prio;              /* facility * 8 + level */
	uint64_t seq;
	uint64_t usec;              /* CLOCK_MONOTONIC, microseconds */
	char flag;                  /* '-', 'c' (continued) or '+' (fragment) */
	/* The message, \xNN escapes decoded, control bytes as ' ', cut to
	 * FR_KLOG_TEXT_MAX; the dictionary lines after it are left out. */
	char text[FR_KLOG_TEXT_MAX + 1];
};

/* A rank of the job on this node, by the pid it said in its HELLO. */
struct kmsg_pid {
	uint32_t pid;
	uint32_t rank;
};

/* What one incident collects; made on the loop, read on the thread pool. */
struct kmsg_query {
	const char *path;           /* KMSG_PATH; a test's file */
	char node[FR_HOST_MAX + 1];
	uint64_t from_ns;           /* CLOCK_REALTIME */
	size_t npids;
	struct kmsg_pid *pids;      /* owned, sorted by pid */
	/*
	 * A node daemon's incident for its central daemon sets `keep_text`:
	 * kmsg_add_to_manifest() then leaves the node's object in `text`
	 * (owned, compact JSON of `text_len` bytes, at most
	 * FR_NODE_KERNEL_LOG_MAX: the latest lines are left out, counted in
	 * `dropped`, to fit), for NODE_KERNEL_LOG; NULL when out of memory.
	 */
	bool keep_text;
	char *text;
	size_t text_len;
};

/* Parses one record as read() returns it ("6,5222,36793573314,-;text\n",
 * dictionary lines " KEY=value" after). Returns 0 or -EPROTO. */
int kmsg_parse(const char *buf, size_t len, struct kmsg_record *r);

/* Whether `text` is a line of a kind kept (above): its kind, and the pid it
 * names at *pid (0 for none). */
bool kmsg_classify(const char *text, enum fr_klog_kind *kind, uint32_t *pid);

/*
 * Whether record `r` is kept for query `q`, with `mono_to_real_ns` added to
 * its monotonic time to make it CLOCK_REALTIME; fills *l when it is.
 */
bool kmsg_keep(const struct kmsg_query *q, const struct kmsg_record *r,
	       int64_t mono_to_real_ns, struct fr_klog_line *l);

/* Reads q->path from its first record to its last into `k` (zeroed by the
 * caller; its lines owned by it): the kept lines, or why none could be
 * read (k->available false, k->error). Logs the first failure to read it,
 * once for the daemon's life. Returns 0 or -ENOMEM. */
int kmsg_collect(const struct kmsg_query *q, struct fr_klog *k);

/*
 * A query for the job of live view `lv`, from the ranks it knew on this
 * host (by host name, or connected over the Unix socket) and the window
 * from their start (at most KMSG_LOOKBACK_NS before `detected_ns`). NULL
 * when out of memory. Owned by the caller: kmsg_query_free().
 */
struct live_view;
struct kmsg_query *kmsg_query_of_view(const struct live_view *lv, uint64_t detected_ns);
void kmsg_query_free(struct kmsg_query *q);

/* Collects `q` and adds it to manifest `doc` as "kernel_log" (version
 * 2.1), and to q->text when q->keep_text. Runs on the thread pool.
 * Returns 0 or -ENOMEM. */
int kmsg_add_to_manifest(json_t *doc, struct kmsg_query *q);

/*
 * `k` as compact JSON of at most `max` bytes (*len of them), its latest
 * lines left out and counted in `dropped` when it would be longer; `k`
 * is as it was on return. NULL when out of memory. Owned by the caller.
 */
char *kmsg_text(struct fr_klog *k, size_t max, size_t *len);

#endif
