/*
 * libFuzzer target for the HTTP API as a client meets it: the real
 * libmicrohttpd server of daemon/http.c, with its access decision, router
 * and handlers, over a loopback socket, in front of a fake registry (a job
 * of four ranks built from HELLO, COMM and PROGRESS messages through
 * registry.c, then disconnected, and an incident directory on disk).
 *
 * The input is a request's line and headers, "METHOD URL" (the target
 * adds " HTTP/1.1") then one header a line ('\n' or "\r\n"); the target ends it with "Connection: close"
 * and an empty line, so that
 * every input is a request the server answers rather than one it waits
 * on (an empty line inside the input ends it there). Its first byte, when odd, gives the daemon a token for the request
 * (so that both the open and the token-guarded paths are walked); the rest
 * is sent as it is. The answer is read to its end.
 *
 * Besides memory errors (ASan, in the server's threads too) and undefined
 * behaviour, the target checks that every request is answered: a status
 * line from 100 to 599, within the read's bound, and that /healthz still
 * answers 200 after it.
 *
 * The ranks are disconnected, so that a live look or a manual dump is
 * answered (409) without an agent to ask: the event loop runs in a thread
 * of its own for the requests handed to it.
 */
#include "../../daemon/daemon.h"
#include "../../daemon/clock.h"
#include "../../daemon/http.h"
#include "../../daemon/log.h"
#include "../../daemon/registry.h"
#include "../../daemon/server.h"

#include <microhttpd.h>

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(cond)                                                                    \
	do {                                                                                \
		if (!(cond)) {                                                              \
			fprintf(stderr, "fuzz_http: %s:%d: check failed: %s\n", __FILE__, \
				__LINE__, #cond);                                           \
			abort();                                                            \
		}                                                                           \
	} while (0)

#define REQUEST_MAX 8192
#define ANSWER_MAX (1u << 20)
#define FUZZ_JOB "j1"
#define FUZZ_TOKEN "fuzz-http-token-0123456789abcdef"

/* The daemon's log (log.c), silent here. */
void daemon_log(const char *fmt, ...)
{
	(void)fmt;
}

static struct flightrecd d;
static struct conn conns[4];
static uv_timer_t tick;
static pthread_t loop_thread;

/* The loop ticks for /healthz and carries out what the HTTP threads hand over. */
static void on_tick(uv_timer_t *t)
{
	(void)t;
	atomic_store(&d.last_tick_ns, daemon_mono_ns());
}

static void *loop_main(void *arg)
{
	(void)arg;
	uv_run(d.loop, UV_RUN_DEFAULT);
	return NULL;
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	FUZZ_CHECK(f);
	fputs(text, f);
	FUZZ_CHECK(fclose(f) == 0);
}

/* A job of four ranks: in a collective on "world" but rank 2, then all gone. */
static void fake_registry(void)
{
	uint32_t members[4] = { 0, 1, 2, 3 };
	const char *why;

	for (uint32_t r = 0; r < 4; r++) {
		struct conn *c = &conns[r];
		struct fr_msg_hello h = { .rank = r, .world_size = 4, .pid = 100 + r,
					  .ring_capacity = 64, .start_ns = daemon_now_ns() };
		struct fr_msg_comm cm = { .rank = r, .size = 4, .members = members };
		struct fr_wire_comm_progress cp = { .last_entered = 7, .last_completed = 6 };
		struct fr_wire_inflight op = { .type = 1, .peer = -1, .peer_in_comm = -1,
					       .seq = 7, .count = 1024, .bytes = 4096,
					       .age_ms = 60000 };
		struct fr_msg_progress p = { .ncomms = 1, .comms = &cp, .ninflight = r != 2,
					     .inflight = &op };

		c->d = &d;
		snprintf(c->peer, sizeof(c->peer), "127.0.0.1:%u", 40000 + r);
		snprintf(h.job, sizeof(h.job), FUZZ_JOB);
		snprintf(h.host, sizeof(h.host), "node%u", r);
		snprintf(h.comm_lib, sizeof(h.comm_lib), "fuzz");
		snprintf(cm.id, sizeof(cm.id), "world");
		snprintf(cm.desc, sizeof(cm.desc), "MPI_COMM_WORLD");
		snprintf(cp.comm, sizeof(cp.comm), "world");
		snprintf(op.comm, sizeof(op.comm), "world");
		snprintf(op.dtype, sizeof(op.dtype), "float");
		FUZZ_CHECK(registry_hello(&d, c, &h, &why) == 0);
		FUZZ_CHECK(registry_comm(c, &cm, &why) == 0);
		FUZZ_CHECK(registry_progress(c, &p, &why) == 0);
	}
	for (uint32_t r = 0; r < 4; r++)
		registry_conn_lost(&d, &conns[r]);
}

static void start(void)
{
	char dir[] = "/tmp/fuzz_http.XXXXXX";
	char path[PATH_MAX];
	char *top = mkdtemp(dir);

	FUZZ_CHECK(top);
	snprintf(path, sizeof(path), "%s/" FUZZ_JOB, top);
	FUZZ_CHECK(mkdir(path, 0700) == 0);
	snprintf(path, sizeof(path), "%s/" FUZZ_JOB "/inc-1", top);
	FUZZ_CHECK(mkdir(path, 0700) == 0);
	snprintf(path, sizeof(path), "%s/" FUZZ_JOB "/inc-1/manifest.json", top);
	write_file(path, "{\"format\": 1, \"job\": \"" FUZZ_JOB "\"}\n");
	snprintf(path, sizeof(path), "%s/" FUZZ_JOB "/inc-1/rank-0.json", top);
	write_file(path, "{}\n");

	d.cfg.dump_dir = strdup(top);
	d.cfg.timeout_s = 30;
	d.cfg.heartbeat_timeout_s = 30;
	d.cfg.dump_deadline_s = 5;
	d.cfg.max_dump_size = 1u << 20;
	d.cfg.max_connections = 64;
	d.cfg.max_job_connections = 64;
	d.cfg.max_frame_size = FR_WIRE_MAX_PAYLOAD;
	d.cfg.max_incidents_per_hour = 60;
	d.cfg.http_allowed_hosts = "node1";
	FUZZ_CHECK(uv_ip4_addr("127.0.0.1", 0, (struct sockaddr_in *)&d.cfg.http_addr) == 0);
	pthread_mutex_init(&d.lock, NULL);
	d.loop = uv_default_loop();
	atomic_store(&d.last_tick_ns, daemon_mono_ns());
	fake_registry();
	FUZZ_CHECK(uv_timer_init(d.loop, &tick) == 0);
	FUZZ_CHECK(uv_timer_start(&tick, on_tick, 0, 100) == 0);
	FUZZ_CHECK(http_start(&d) == 0);
	FUZZ_CHECK(pthread_create(&loop_thread, NULL, loop_main, NULL) == 0);
}

/* Sends `req` (len bytes) and reads the answer into `out`; returns its length. */
static size_t ask(const char *req, size_t len, char *out, size_t cap)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(d.http_port) };
	size_t got = 0;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	/* Closed with a reset: two connections an input, and no TIME_WAIT
	 * to run the loopback out of ports. */
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };

	FUZZ_CHECK(fd >= 0);
	FUZZ_CHECK(setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)) == 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	/* libFuzzer's timer (SIGALRM, each second) interrupts system calls. */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		int err = errno;
		socklen_t elen = sizeof(err);

		while (err == EINTR && poll(&p, 1, 4000) < 0 && errno == EINTR)
			;
		if (err == EINTR && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) == 0 && !err)
			err = 0;
		if (err) {
			fprintf(stderr, "fuzz_http: cannot connect to the server: %s\n", strerror(err));
			abort();
		}
	}
	for (size_t sent = 0; sent < len;) {
		ssize_t n = send(fd, req + sent, len - sent, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break; /* the server refused early and closed */
		sent += (size_t)n;
	}
	while (got + 1 < cap) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		uint64_t until = daemon_mono_ns() + 4 * NS_PER_S;
		int ready;
		ssize_t n;

		/* Within the header deadline: a request the server never
		 * answers is a failure. */
		do {
			uint64_t now = daemon_mono_ns();

			ready = now < until ? poll(&p, 1, (int)((until - now) / 1000000) + 1) : 0;
		} while (ready < 0 && errno == EINTR);
		if (ready != 1) {
			fprintf(stderr, "fuzz_http: no answer within 4 s to %.*s (got %zu bytes)\n",
				(int)len, req, got);
			abort();
		}
		n = recv(fd, out + got, cap - 1 - got, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	out[got] = '\0';
	close(fd);
	return got;
}

static unsigned status_of(const char *answer)
{
	unsigned major, minor, status;

	if (sscanf(answer, "HTTP/%u.%u %u", &major, &minor, &status) != 3)
		return 0;
	return status;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool started;
	static char answer[ANSWER_MAX];
	/* The last header: an answered request ends its connection. */
	static const char END[] = "\r\nConnection: close\r\n\r\n";
	static const char VERSION[] = " HTTP/1.1\r\n";
	char req[REQUEST_MAX + sizeof(VERSION) + sizeof(END)];
	const char health[] = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
	size_t len;
	unsigned status;

	if (!started) {
		start();
		started = true;
	}
	if (size < 1 || size > REQUEST_MAX)
		return 0;
	pthread_mutex_lock(&d.lock);
	if (data[0] & 1) {
		d.cfg.token.len = strlen(FUZZ_TOKEN);
		memcpy(d.cfg.token.bytes, FUZZ_TOKEN, d.cfg.token.len);
	} else {
		d.cfg.token.len = 0;
	}
	pthread_mutex_unlock(&d.lock);
	/* "METHOD URL" HTTP/1.1: a line without a version is HTTP/0.9 to
	 * libmicrohttpd, which waits on it until the header deadline. */
	{
		const uint8_t *nl = memchr(data + 1, '\n', size - 1);
		size_t first = nl ? (size_t)(nl - data - 1) : size - 1;

		if (first && data[first] == '\r')
			first--;
		memcpy(req, data + 1, first);
		memcpy(req + first, VERSION, sizeof(VERSION) - 1);
		len = first + sizeof(VERSION) - 1;
		if (nl) {
			memcpy(req + len, nl + 1, size - (size_t)(nl + 1 - data));
			len += size - (size_t)(nl + 1 - data);
		}
	}
	/* One request: an empty line would end it early and leave the rest
	 * as a second one, kept alive, that the server rightly waits on. */
	for (size_t i = 0; i + 1 < len; i++) {
		if (req[i] == '\n' && (req[i + 1] == '\n' ||
				       (req[i + 1] == '\r' && i + 2 < len && req[i + 2] == '\n'))) {
			len = i;
			break;
		}
	}
	while (len && (req[len - 1] == '\n' || req[len - 1] == '\r'))
		len--;
	memcpy(req + len, END, sizeof(END) - 1);
	len += sizeof(END) - 1;
	/* Nothing to say when the server refused at the connection (a request
	 * it cannot parse may be cut at once); otherwise a status line. */
	if (ask(req, len, answer, sizeof(answer)) > 0) {
		status = status_of(answer);
		FUZZ_CHECK(status >= 100 && status <= 599);
	}
	FUZZ_CHECK(ask(health, sizeof(health) - 1, answer, sizeof(answer)) > 0);
	FUZZ_CHECK(status_of(answer) == 200);
	return 0;
}
