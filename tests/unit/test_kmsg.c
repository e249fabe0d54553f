/*
 * daemon/kmsg.c and dumps/kernel_log.c: /dev/kmsg records are parsed
 * (fields, dictionary lines, \xNN escapes), the lines that concern a job
 * are told apart from the rest (kinds, pids of its ranks, the window), an
 * unreadable log is said once, the manifest's "kernel_log" reads back, and
 * fr-analyze puts each line under the culprit it concerns. daemon_log is
 * stubbed: its lines are counted here.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../daemon/kmsg.h"
#include "../../daemon/log.h"
#include "../../dumps/correlate.h"
#include "../../dumps/dump.h"
#include "../../protocol/node_wire.h"

static unsigned nlogged;
static char last_log[512];

void daemon_log(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_log, sizeof(last_log), fmt, ap);
	va_end(ap);
	nlogged++;
}

static int parse(const char *s, struct kmsg_record *r)
{
	return kmsg_parse(s, strlen(s), r);
}

static void test_parse_fields(void **state)
{
	struct kmsg_record r;

	(void)state;
	assert_int_equal(parse("6,5222,36793573314,-;fr4295br: port 1 entered disabled state\n",
			       &r), 0);
	assert_int_equal(r.prio, 6);
	assert_int_equal(r.seq, 5222);
	assert_int_equal(r.usec, 36793573314ull);
	assert_int_equal(r.flag, '-');
	assert_string_equal(r.text, "fr4295br: port 1 entered disabled state");

	/* A user's line (facility 1), fields a later kernel adds, a continued
	 * record, and its dictionary lines, which are not the message. */
	assert_int_equal(parse("12,7,100,c,caller=T42;NVRM: Xid 79\n SUBSYSTEM=pci\n"
			       " DEVICE=+pci:0000:3b:00.0\n", &r), 0);
	assert_int_equal(r.prio, 12);
	assert_int_equal(r.flag, 'c');
	assert_string_equal(r.text, "NVRM: Xid 79");
	/* Without the final newline, as a short read would leave it. */
	assert_int_equal(parse("4,1,2,+;fragment", &r), 0);
	assert_string_equal(r.text, "fragment");
	assert_int_equal(parse("4,1,2,-;", &r), 0);
	assert_string_equal(r.text, "");
}

static void test_parse_escapes(void **state)
{
	struct kmsg_record r;
	char big[4096];

	(void)state;
	/* A backslash, a newline and a tab (control bytes become blanks), a
	 * UTF-8 é, and what only looks like an escape. */
	assert_int_equal(parse("6,1,1,-;a\\x5cb\\x0ac\\x09d \\xc3\\xa9 \\xg1 \\x4\n", &r), 0);
	assert_string_equal(r.text, "a\\b c d \xc3\xa9 \\xg1 \\x4");

	/* A line longer than a kept one is cut. */
	memset(big, 'x', sizeof(big));
	memcpy(big, "6,1,1,-;", 8);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(parse(big, &r), 0);
	assert_int_equal(strlen(r.text), FR_KLOG_TEXT_MAX);
}

static void test_parse_refuses_malformed(void **state)
{
	static const char *const bad[] = {
		"", "no semicolon at all\n", ";text\n", "6;text\n", "6,1;text\n", "6,1,2;text\n",
		"6,1,2,;text\n", "x,1,2,-;text\n", "6,-1,2,-;text\n", "6,1,2x,-;text\n",
		"6,1,99999999999999999999999,-;text\n", "2000,1,2,-;text\n",
	};
	struct kmsg_record r;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		assert_int_equal(parse(bad[i], &r), -EPROTO);
}

static void assert_class(const char *text, enum fr_klog_kind kind, uint32_t pid)
{
	enum fr_klog_kind k = FR_KLOG__KINDS;
	uint32_t p = 99;

	if (!kmsg_classify(text, &k, &p))
		fail_msg("not kept: %s", text);
	assert_int_equal(k, kind);
	assert_int_equal(p, pid);
}

static void test_classify(void **state)
{
	static const char *const other[] = {
		"fr4295br: port 1(fr4295v0) entered disabled state",
		"IPv6: ADDRCONF(NETDEV_CHANGE): veth0: link becomes ready",
		"mlx5_core 0000:3b:00.0: firmware version: 16.35.2000",
		"python3 invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE), order=0",
		"NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.104.05",
		"",
	};
	enum fr_klog_kind k;
	uint32_t p;

	(void)state;
	assert_class("NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, GPU has fallen off the bus.",
		     FR_KLOG_XID, 4242);
	assert_class("NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has "
		     "fallen off the bus.", FR_KLOG_XID, 0);
	assert_class("NVRM: Xid (PCI:0000:18:00): 13, Graphics SM Warp Exception", FR_KLOG_XID, 0);
	assert_class("Out of memory: Killed process 4242 (python3) total-vm:1024kB, anon-rss:0kB",
		     FR_KLOG_OOM, 4242);
	assert_class("Memory cgroup out of memory: Killed process 17 (a.out)", FR_KLOG_OOM, 17);
	assert_class("oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,"
		     "global_oom,task_memcg=/user.slice,task=python3,pid=4242,uid=1000",
		     FR_KLOG_OOM, 4242);
	assert_class("oom_reaper: reaped process 4242 (python3), now anon-rss:0kB", FR_KLOG_OOM,
		     4242);
	assert_class("INFO: task python3:4242 blocked for more than 120 seconds.",
		     FR_KLOG_HUNG_TASK, 4242);
	/* A command name may hold a colon; the pid is after the last. */
	assert_class("INFO: task kworker/u8:3:181 blocked for more than 122 seconds.",
		     FR_KLOG_HUNG_TASK, 181);
	assert_class("python3[4242]: segfault at 0 ip 00007f0 sp 00007ffd error 4 in libc.so.6",
		     FR_KLOG_SEGFAULT, 4242);
	assert_class("mlx5_core 0000:3b:00.0 ib0: Link down", FR_KLOG_NIC, 0);
	assert_class("e1000e 0000:00:19.0 eth0: NIC Link is Down", FR_KLOG_NIC, 0);
	assert_class("mlx5_core 0000:3b:00.0: mlx5_health_try_recover: health recovery flow aborted",
		     FR_KLOG_NIC, 0);
	assert_class("mlx5_core 0000:3b:00.0: poll_health: Fatal error 1 detected", FR_KLOG_NIC, 0);
	for (size_t i = 0; i < sizeof(other) / sizeof(*other); i++)
		if (kmsg_classify(other[i], &k, &p))
			fail_msg("kept: %s", other[i]);
}

/* A query for ranks 5 (pid 4242) and 2 (pid 17) from t = 1000 s. */
static void make_query(struct kmsg_query *q, struct kmsg_pid *pids)
{
	memset(q, 0, sizeof(*q));
	pids[0] = (struct kmsg_pid){ 17, 2 };
	pids[1] = (struct kmsg_pid){ 4242, 5 };
	q->path = "/nonexistent/kmsg";
	snprintf(q->node, sizeof(q->node), "node17");
	q->from_ns = 1000000000000ull;
	q->npids = 2;
	q->pids = pids;
}

static bool keep(const struct kmsg_query *q, uint64_t usec, const char *text,
		 struct fr_klog_line *l)
{
	struct kmsg_record r;

	memset(&r, 0, sizeof(r));
	r.usec = usec;
	snprintf(r.text, sizeof(r.text), "%s", text);
	/* Monotonic 0 is wall time 900 s. */
	return kmsg_keep(q, &r, 900000000000ll, l);
}

static void test_keep_pids_and_window(void **state)
{
	struct kmsg_pid pids[2];
	struct kmsg_query q;
	struct fr_klog_line l;

	(void)state;
	make_query(&q, pids);
	/* 100 s after boot is 1000 s: in the window, rank 5's. */
	assert_true(keep(&q, 100000000, "NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, GPU has fallen "
			 "off the bus.", &l));
	assert_int_equal(l.time_ns, 1000000000000ull);
	assert_int_equal(l.kind, FR_KLOG_XID);
	assert_int_equal(l.pid, 4242);
	assert_int_equal(l.rank, 5);
	assert_string_equal(l.text, "NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, GPU has fallen off "
			    "the bus.");
	/* A microsecond before the window is out. */
	assert_false(keep(&q, 99999999, "NVRM: Xid (PCI:0000:3b:00): 79", &l));
	/* The node's devices: no pid, no rank. */
	assert_true(keep(&q, 200000000, "mlx5_core 0000:3b:00.0 ib0: Link down", &l));
	assert_int_equal(l.kind, FR_KLOG_NIC);
	assert_int_equal(l.pid, 0);
	assert_int_equal(l.rank, FR_RANK_UNKNOWN);
	/* Another process's: not the job's. */
	assert_false(keep(&q, 200000000, "NVRM: Xid (PCI:0000:3b:00): 79, pid=4243, ...", &l));
	assert_false(keep(&q, 200000000, "Out of memory: Killed process 4243 (other)", &l));
	assert_false(keep(&q, 200000000, "bash[18]: segfault at 0 ip 0 sp 0 error 4", &l));
	assert_true(keep(&q, 200000000, "a.out[17]: segfault at 0 ip 0 sp 0 error 4", &l));
	assert_int_equal(l.rank, 2);
	assert_true(keep(&q, 200000000, "INFO: task a.out:17 blocked for more than 120 seconds.",
			 &l));
	assert_int_equal(l.kind, FR_KLOG_HUNG_TASK);
	/* An OOM kill or hang of whom it does not say concerns no rank. */
	assert_false(keep(&q, 200000000, "Out of memory: Killed process (gone)", &l));
	/* Lines of no kind kept. */
	assert_false(keep(&q, 200000000, "usb 1-1: new high-speed USB device number 2", &l));
	/* No ranks on this node: only the node's devices. */
	q.npids = 0;
	assert_false(keep(&q, 200000000, "NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, ...", &l));
	assert_true(keep(&q, 200000000, "NVRM: Xid (PCI:0000:3b:00): 48, DBE", &l));
}

static void test_unavailable_said_once(void **state)
{
	struct kmsg_pid pids[2];
	struct kmsg_query q;
	struct fr_klog k;

	(void)state;
	make_query(&q, pids);
	nlogged = 0;
	for (int i = 0; i < 3; i++) {
		memset(&k, 0, sizeof(k));
		assert_int_equal(kmsg_collect(&q, &k), 0);
		assert_false(k.available);
		assert_string_equal(k.node, "node17");
		assert_string_equal(k.error, "cannot open /nonexistent/kmsg: No such file or directory");
		assert_int_equal(k.nlines, 0);
		free(k.lines);
	}
	assert_int_equal(nlogged, 1);
	assert_non_null(strstr(last_log, "kernel log unavailable: cannot open /nonexistent/kmsg"));
}

static void test_lines_bounded(void **state)
{
	struct fr_klog k;
	struct fr_klog_line l;

	(void)state;
	memset(&k, 0, sizeof(k));
	memset(&l, 0, sizeof(l));
	for (unsigned i = 0; i < FR_KLOG_LINES_MAX + 5; i++) {
		l.time_ns = i;
		assert_int_equal(fr_klog_add(&k, &l), 0);
	}
	assert_int_equal(k.nlines, FR_KLOG_LINES_MAX);
	assert_int_equal(k.dropped, 5);
	assert_int_equal(k.lines[FR_KLOG_LINES_MAX - 1].time_ns, FR_KLOG_LINES_MAX - 1);
	free(k.lines);
}

/* A manifest of one rank with `klog` as its "kernel_log", as text. */
static char *manifest_with(json_t *klog)
{
	json_t *doc = fr_manifest_to_json("j", "i", "timeout", 8, 1, 2, NULL, 0, NULL);
	char *text;

	assert_non_null(doc);
	if (klog)
		json_object_set_new(doc, "kernel_log", klog);
	json_object_set_new(doc, "version", json_string(FR_MANIFEST_VERSION_KLOG));
	text = json_dumps(doc, 0);
	json_decref(doc);
	return text;
}

static void test_manifest_reads_back(void **state)
{
	struct fr_klog k;
	struct fr_klog_line l = { 1000000000000ull, FR_KLOG_XID, 4242, 5,
				  "NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, GPU has fallen off the bus." };
	struct fr_manifest m;
	char err[512];
	json_t *arr;
	char *text;

	(void)state;
	memset(&k, 0, sizeof(k));
	snprintf(k.node, sizeof(k.node), "node17");
	k.available = true;
	k.from_ns = 1;
	k.to_ns = 2;
	assert_int_equal(fr_klog_add(&k, &l), 0);
	l.kind = FR_KLOG_NIC;
	l.pid = 0;
	l.rank = FR_RANK_UNKNOWN;
	snprintf(l.text, sizeof(l.text), "mlx5_core 0000:3b:00.0 ib0: Link down");
	assert_int_equal(fr_klog_add(&k, &l), 0);
	arr = json_array();
	json_array_append_new(arr, fr_klog_to_json(&k));
	/* A node that could not read its log, a kind of a later version. */
	json_array_append_new(arr, json_pack("{s:s, s:b, s:s, s:[{s:i, s:s, s:s}]}", "node", "n2",
					     "available", 0, "error",
					     "cannot open /dev/kmsg: Permission denied", "lines",
					     "time_ns", 5, "kind", "thermal", "text", "too hot"));
	free(k.lines);
	text = manifest_with(arr);
	assert_int_equal(fr_manifest_parse(text, strlen(text), "manifest.json", &m, err,
					   sizeof(err)), 0);
	free(text);
	assert_int_equal(m.nklogs, 2);
	assert_string_equal(m.klogs[0].node, "node17");
	assert_true(m.klogs[0].available);
	assert_int_equal(m.klogs[0].to_ns, 2);
	assert_int_equal(m.klogs[0].nlines, 2);
	assert_int_equal(m.klogs[0].lines[0].rank, 5);
	assert_int_equal(m.klogs[0].lines[0].pid, 4242);
	assert_int_equal(m.klogs[0].lines[0].time_ns, 1000000000000ull);
	assert_int_equal(m.klogs[0].lines[1].kind, FR_KLOG_NIC);
	assert_int_equal(m.klogs[0].lines[1].rank, FR_RANK_UNKNOWN);
	assert_false(m.klogs[1].available);
	assert_string_equal(m.klogs[1].error, "cannot open /dev/kmsg: Permission denied");
	assert_int_equal(m.klogs[1].nlines, 0);
	fr_manifest_free(&m);

	/* Without one, as before. */
	text = manifest_with(NULL);
	assert_int_equal(fr_manifest_parse(text, strlen(text), "manifest.json", &m, err,
					   sizeof(err)), 0);
	free(text);
	assert_int_equal(m.nklogs, 0);
	fr_manifest_free(&m);

	/* A broken one names the field. */
	text = manifest_with(json_pack("[{s:s, s:b, s:[{s:s, s:s}]}]", "node", "n", "available", 1,
				       "lines", "kind", "xid", "text", "t"));
	assert_int_equal(fr_manifest_parse(text, strlen(text), "manifest.json", &m, err,
					   sizeof(err)), -EPROTO);
	free(text);
	assert_non_null(strstr(err, "kernel_log[0].lines[0]"));
	assert_non_null(strstr(err, "time_ns"));
	text = manifest_with(json_pack("[{s:s}]", "node", "n"));
	assert_int_equal(fr_manifest_parse(text, strlen(text), "manifest.json", &m, err,
					   sizeof(err)), -EPROTO);
	free(text);
	assert_non_null(strstr(err, "available"));
}

/*
 * What a node daemon sends its central daemon (NODE_KERNEL_LOG): its
 * object as compact text, at most FR_NODE_KERNEL_LOG_MAX bytes however
 * long its lines, the latest left out and counted; the central daemon
 * reads it back as a manifest's.
 */
static void test_node_text_bounded_and_read_back(void **state)
{
	struct fr_klog k, back;
	struct fr_klog_line l = { 7, FR_KLOG_XID, 4242, 5, "" };
	char err[512];
	size_t len;
	char *text;

	(void)state;
	memset(&k, 0, sizeof(k));
	snprintf(k.node, sizeof(k.node), "node17");
	k.available = true;
	k.dropped = 3;
	/* 256 lines of 511 quotes: about 260 KiB of JSON as they are. */
	memset(l.text, '"', FR_KLOG_TEXT_MAX);
	for (unsigned i = 0; i < FR_KLOG_LINES_MAX; i++)
		assert_int_equal(fr_klog_add(&k, &l), 0);
	text = kmsg_text(&k, FR_NODE_KERNEL_LOG_MAX, &len);
	assert_non_null(text);
	assert_true(len <= FR_NODE_KERNEL_LOG_MAX && len == strlen(text));
	assert_int_equal(k.nlines, FR_KLOG_LINES_MAX);
	assert_int_equal(k.dropped, 3);
	memset(&back, 0, sizeof(back));
	assert_int_equal(fr_klog_parse(text, len, &back, err, sizeof(err)), 0);
	free(text);
	assert_string_equal(back.node, "node17");
	assert_true(back.nlines > 0 && back.nlines < FR_KLOG_LINES_MAX);
	assert_int_equal(back.dropped, 3 + FR_KLOG_LINES_MAX - back.nlines);
	assert_int_equal(back.lines[0].pid, 4242);
	assert_int_equal(back.lines[0].rank, 5);
	assert_int_equal(strlen(back.lines[0].text), FR_KLOG_TEXT_MAX);
	free(back.lines);

	/* A few lines go whole. */
	k.nlines = 2;
	text = kmsg_text(&k, FR_NODE_KERNEL_LOG_MAX, &len);
	memset(&back, 0, sizeof(back));
	assert_int_equal(fr_klog_parse(text, len, &back, err, sizeof(err)), 0);
	free(text);
	assert_int_equal(back.nlines, 2);
	assert_int_equal(back.dropped, 3);
	free(back.lines);
	free(k.lines);

	/* Not JSON, and an object without its node, are refused with why. */
	memset(&back, 0, sizeof(back));
	assert_int_equal(fr_klog_parse("{\"node\":", 8, &back, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "node_kernel_log: "));
	free(back.lines);
	memset(&back, 0, sizeof(back));
	assert_int_equal(fr_klog_parse("{\"available\":true}", 18, &back, err, sizeof(err)),
			 -EPROTO);
	assert_non_null(strstr(err, "kernel_log.node"));
	free(back.lines);
}

/* fr-analyze: rank 5 stopped at 1002 s on node17; an Xid of its pid at
 * 1000 s, a link down on node17 at 1001 s, and a line of rank 2 (not a
 * culprit) on node18. */
static void test_lines_under_their_culprit(void **state)
{
	struct fr_klog_line lines[2] = {
		{ 1000000000000ull, FR_KLOG_XID, 4242, 5, "NVRM: Xid 79, GPU has fallen off the bus" },
		{ 1001000000000ull, FR_KLOG_NIC, 0, FR_RANK_UNKNOWN, "mlx5_core ib0: Link down" },
	};
	struct fr_klog_line other = { 1000500000000ull, FR_KLOG_OOM, 17, 2,
				      "Out of memory: Killed process 17 (a.out)" };
	struct fr_klog klogs[3];
	struct fr_culprit cu;
	struct fr_verdict v;
	struct fr_trace t;
	struct fr_op op;
	const struct fr_trace *traces[1] = { &t };
	char *buf = NULL;
	size_t len = 0;
	FILE *f;
	json_t *o, *mine;

	(void)state;
	memset(klogs, 0, sizeof(klogs));
	snprintf(klogs[0].node, sizeof(klogs[0].node), "node17");
	klogs[0].available = true;
	klogs[0].nlines = 2;
	klogs[0].lines = lines;
	snprintf(klogs[1].node, sizeof(klogs[1].node), "node18");
	klogs[1].available = true;
	klogs[1].nlines = 1;
	klogs[1].lines = &other;
	snprintf(klogs[2].node, sizeof(klogs[2].node), "node19");
	snprintf(klogs[2].error, sizeof(klogs[2].error), "cannot open /dev/kmsg: Permission denied");
	memset(&cu, 0, sizeof(cu));
	cu.rank = 5;
	cu.reason = FR_REASON_NOT_ENTERED;
	snprintf(cu.host, sizeof(cu.host), "node17");
	memset(&t, 0, sizeof(t));
	memset(&op, 0, sizeof(op));
	t.rank = 5;
	t.nops = 1;
	t.ops = &op;
	op.t_entered_ns = 1001900000000ull;
	op.t_completed_ns = 1002000000000ull;
	memset(&v, 0, sizeof(v));
	v.nculprits = 1;
	v.culprits = &cu;
	v.klogs = klogs;
	v.nklogs = 3;

	f = open_memstream(&buf, &len);
	assert_non_null(f);
	fr_klog_print_culprit(f, &v, &cu, &t);
	fr_klog_print_rest(f, &v, 1);
	fclose(f);
	assert_non_null(strstr(buf, "  kernel: node17: NVRM: Xid 79, GPU has fallen off the bus, "
				    "2.0 s before rank 5 stopped\n"));
	assert_non_null(strstr(buf, "  kernel: node17: mlx5_core ib0: Link down, 1.0 s before "
				    "rank 5 stopped\n"));
	assert_non_null(strstr(buf, "Kernel log unavailable on 1 node (cannot open /dev/kmsg: "
				    "Permission denied): node19\n"));
	assert_non_null(strstr(buf, "node18: Out of memory: Killed process 17 (a.out) (rank 2)"));
	/* The culprit's lines are not told again among the rest. */
	assert_null(strstr(strstr(buf, "Kernel log ("), "Xid"));
	free(buf);

	o = json_pack("{s:[{s:i}]}", "culprits", "rank", 5);
	assert_int_equal(fr_klog_add_json(o, &v, traces, 1), 0);
	assert_int_equal(json_array_size(json_object_get(o, "kernel_log")), 3);
	mine = json_object_get(json_array_get(json_object_get(o, "culprits"), 0), "kernel_log");
	assert_int_equal(json_array_size(mine), 2);
	assert_string_equal(json_string_value(json_object_get(json_array_get(mine, 0), "kind")),
			    "xid");
	assert_string_equal(json_string_value(json_object_get(json_array_get(mine, 0), "node")),
			    "node17");
	assert_int_equal(json_integer_value(json_object_get(json_array_get(mine, 0), "rank")), 5);
	assert_true(json_real_value(json_object_get(json_array_get(mine, 0), "before_s")) > 1.99);
	assert_true(json_real_value(json_object_get(json_array_get(mine, 0), "before_s")) < 2.01);
	json_decref(o);

	/* No kernel log: nothing added. */
	v.nklogs = 0;
	o = json_pack("{s:[{s:i}]}", "culprits", "rank", 5);
	assert_int_equal(fr_klog_add_json(o, &v, traces, 1), 0);
	assert_null(json_object_get(o, "kernel_log"));
	json_decref(o);
}

/* A rank killed (its connection dropped, its process gone) whose node's
 * kernel log shows the OOM killer killing its pid was killed by the OOM
 * killer; a line of another pid, or a culprit of another reason, is not
 * taken for it. */
static void test_oom_named(void **state)
{
	struct fr_klog_line lines[2] = {
		{ 1000000000000ull, FR_KLOG_OOM, 4243, 6, "Out of memory: Killed process 4243 (python3)" },
		{ 1000100000000ull, FR_KLOG_OOM, 4242, 5, "Out of memory: Killed process 4242 (python3)" },
	};
	struct fr_klog k;
	struct fr_culprit cu[2];
	struct fr_verdict v;

	(void)state;
	memset(&k, 0, sizeof(k));
	snprintf(k.node, sizeof(k.node), "node17");
	k.available = true;
	k.nlines = 1;
	k.lines = lines;
	memset(cu, 0, sizeof(cu));
	cu[0].rank = 5;
	cu[0].pid = 4242;
	cu[0].reason = FR_REASON_KILLED;
	snprintf(cu[0].host, sizeof(cu[0].host), "node17");
	cu[1] = cu[0];
	cu[1].rank = 7;
	cu[1].pid = 4244;
	memset(&v, 0, sizeof(v));
	v.kind = FR_VERDICT_CRASH;
	v.nculprits = 2;
	v.culprits = cu;
	v.klogs = &k;
	v.nklogs = 1;
	snprintf(v.summary, sizeof(v.summary), "rank 5 (node17, pid 4242) was killed or lost (its "
		 "connection dropped without a goodbye) during all_reduce #9 on world; ranks 0-4 wait for it");

	/* Another rank's OOM kill only. */
	fr_klog_name_oom(&v);
	assert_false(cu[0].oom_killed);
	assert_non_null(strstr(v.summary, "was killed or lost"));

	k.nlines = 2;
	fr_klog_name_oom(&v);
	assert_true(cu[0].oom_killed);
	assert_false(cu[1].oom_killed);
	assert_string_equal(v.summary, "rank 5 (node17, pid 4242) was killed by the OOM killer (the "
			    "kernel log of its node says so) during all_reduce #9 on world; ranks 0-4 "
			    "wait for it");

	/* Only a killed culprit is. */
	cu[0].oom_killed = false;
	cu[0].reason = FR_REASON_EXITED;
	fr_klog_name_oom(&v);
	assert_false(cu[0].oom_killed);
}

/* Thousands of nodes without a kernel log say so in a line per reason,
 * a few named, the node's own name taken out of the reason. */
static void test_unavailable_grouped(void **state)
{
	struct fr_klog k[12];
	struct fr_verdict v;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	(void)state;
	memset(k, 0, sizeof(k));
	for (int i = 0; i < 12; i++) {
		snprintf(k[i].node, sizeof(k[i].node), "n%d", i);
		if (i < 10)
			snprintf(k[i].error, sizeof(k[i].error), "node n%d sent no kernel log (old)", i);
		else
			snprintf(k[i].error, sizeof(k[i].error), "cannot open /dev/kmsg: Permission denied");
	}
	memset(&v, 0, sizeof(v));
	v.klogs = k;
	v.nklogs = 12;
	f = open_memstream(&buf, &len);
	assert_non_null(f);
	fr_klog_print_rest(f, &v, 0);
	fclose(f);
	assert_string_equal(buf, "\nKernel log unavailable on 10 nodes (sent no kernel log (old)): n0, n1, n2, n3, ...\n"
				 "\nKernel log unavailable on 2 nodes (cannot open /dev/kmsg: Permission denied): n10, n11\n");
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_fields),
		cmocka_unit_test(test_parse_escapes),
		cmocka_unit_test(test_parse_refuses_malformed),
		cmocka_unit_test(test_classify),
		cmocka_unit_test(test_keep_pids_and_window),
		cmocka_unit_test(test_unavailable_said_once),
		cmocka_unit_test(test_lines_bounded),
		cmocka_unit_test(test_manifest_reads_back),
		cmocka_unit_test(test_node_text_bounded_and_read_back),
		cmocka_unit_test(test_lines_under_their_culprit),
		cmocka_unit_test(test_oom_named),
		cmocka_unit_test(test_unavailable_grouped),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
