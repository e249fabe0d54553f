/*
 * flightrecd: options, startup, the ports file, signals and logging.
 */
#include "daemon.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../dumps/dump.h"

#define DEFAULT_LISTEN "127.0.0.1:7420"
#define DEFAULT_HTTP "127.0.0.1:7421"
#define DEFAULT_DUMP_DIR "/var/lib/flightrec"
#define DEFAULT_MAX_DUMP_SIZE (64ull << 20)
#define DEFAULT_MAX_CONNECTIONS 65536u

enum {
	OPT_LISTEN = 256,
	OPT_HTTP,
	OPT_DUMP_DIR,
	OPT_TIMEOUT,
	OPT_HEARTBEAT_TIMEOUT,
	OPT_PORTS_FILE,
	OPT_DUMP_DEADLINE,
	OPT_MAX_DUMP_SIZE,
	OPT_MAX_CONNECTIONS,
};

static const struct option long_options[] = {
	{ "listen", required_argument, NULL, OPT_LISTEN },
	{ "http", required_argument, NULL, OPT_HTTP },
	{ "dump-dir", required_argument, NULL, OPT_DUMP_DIR },
	{ "timeout", required_argument, NULL, OPT_TIMEOUT },
	{ "heartbeat-timeout", required_argument, NULL, OPT_HEARTBEAT_TIMEOUT },
	{ "ports-file", required_argument, NULL, OPT_PORTS_FILE },
	{ "dump-deadline", required_argument, NULL, OPT_DUMP_DEADLINE },
	{ "max-dump-size", required_argument, NULL, OPT_MAX_DUMP_SIZE },
	{ "max-connections", required_argument, NULL, OPT_MAX_CONNECTIONS },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ NULL, 0, NULL, 0 },
};

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: flightrecd [OPTIONS]\n"
		"Collects progress from flightrec agents, detects hangs and gathers\n"
		"every rank's dump into an incident directory.\n"
		"\n"
		"  --listen ADDR:PORT           agent port (default " DEFAULT_LISTEN ")\n"
		"  --http ADDR:PORT             HTTP API (default " DEFAULT_HTTP ")\n"
		"  --dump-dir DIR               incident directories (default " DEFAULT_DUMP_DIR ")\n"
		"  --timeout SECONDS            an operation waiting longer is a hang (default 300)\n"
		"  --heartbeat-timeout SECONDS  a rank silent longer is unresponsive (default 30)\n"
		"  --dump-deadline SECONDS      how long to wait for dumps (default 5)\n"
		"  --max-dump-size BYTES        largest dump accepted (default 67108864)\n"
		"  --max-connections N          agent connections at once (default 65536)\n"
		"  --ports-file FILE            write {\"listen\": N, \"http\": M} once bound\n"
		"  --help, --version\n"
		"\n"
		"Port 0 binds an ephemeral port. IPv6 addresses go in brackets: [::1]:7420.\n");
}

void daemon_log(const char *fmt, ...)
{
	char line[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* One write per line, so lines from the HTTP thread never interleave. */
	fprintf(stderr, "flightrecd: %s\n", line);
}

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

uint64_t daemon_now_ns(void)
{
	return clock_ns(CLOCK_REALTIME);
}

uint64_t daemon_mono_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

int daemon_format_addr(const struct sockaddr *sa, char *buf, size_t cap)
{
	char ip[INET6_ADDRSTRLEN];

	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;

		uv_ip6_name(s6, ip, sizeof(ip));
		snprintf(buf, cap, "[%s]:%u", ip, ntohs(s6->sin6_port));
	} else if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;

		uv_ip4_name(s4, ip, sizeof(ip));
		snprintf(buf, cap, "%s:%u", ip, ntohs(s4->sin_port));
	} else {
		snprintf(buf, cap, "?");
		return -EAFNOSUPPORT;
	}
	return 0;
}

void daemon_set_port(struct sockaddr_storage *ss, uint16_t port)
{
	if (ss->ss_family == AF_INET6)
		((struct sockaddr_in6 *)ss)->sin6_port = htons(port);
	else
		((struct sockaddr_in *)ss)->sin_port = htons(port);
}

/* Parses "1.2.3.4:N" or "[::1]:N" (literal addresses only). */
static int parse_addr(const char *s, struct sockaddr_storage *ss)
{
	char host[INET6_ADDRSTRLEN];
	const char *colon;
	const char *h = s;
	size_t hlen;
	char *end;
	unsigned long port;

	if (s[0] == '[') {
		const char *close = strchr(s, ']');

		if (!close || close[1] != ':')
			return -EINVAL;
		h = s + 1;
		hlen = (size_t)(close - h);
		colon = close + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon)
			return -EINVAL;
		hlen = (size_t)(colon - s);
	}
	if (hlen == 0 || hlen >= sizeof(host))
		return -EINVAL;
	memcpy(host, h, hlen);
	host[hlen] = '\0';
	errno = 0;
	port = strtoul(colon + 1, &end, 10);
	if (colon[1] == '\0' || *end != '\0' || errno || port > 65535)
		return -EINVAL;
	memset(ss, 0, sizeof(*ss));
	if (s[0] == '[')
		return uv_ip6_addr(host, (int)port, (struct sockaddr_in6 *)ss) ? -EINVAL : 0;
	return uv_ip4_addr(host, (int)port, (struct sockaddr_in *)ss) ? -EINVAL : 0;
}

static int parse_seconds(const char *s, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (end == s || *end != '\0' || errno || !isfinite(v) || v <= 0 || v > 1e9)
		return -EINVAL;
	*out = v;
	return 0;
}

static int parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (s[0] == '-')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (end == s || *end != '\0' || errno || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

static int bad_option(const char *name, const char *value)
{
	fprintf(stderr, "flightrecd: invalid value for --%s: '%s'\n", name, value);
	return -EINVAL;
}

/* Returns 0 to run, 1 when --help/--version was answered, or -EINVAL. */
static int parse_options(int argc, char **argv, struct daemon_config *cfg)
{
	uint64_t u;
	int opt;

	*cfg = (struct daemon_config){
		.dump_dir = DEFAULT_DUMP_DIR,
		.timeout_s = 300,
		.heartbeat_timeout_s = 30,
		.dump_deadline_s = 5,
		.max_dump_size = DEFAULT_MAX_DUMP_SIZE,
		.max_connections = DEFAULT_MAX_CONNECTIONS,
	};
	parse_addr(DEFAULT_LISTEN, &cfg->listen_addr);
	parse_addr(DEFAULT_HTTP, &cfg->http_addr);

	while ((opt = getopt_long(argc, argv, "hV", long_options, NULL)) != -1) {
		switch (opt) {
		case OPT_LISTEN:
			if (parse_addr(optarg, &cfg->listen_addr))
				return bad_option("listen", optarg);
			break;
		case OPT_HTTP:
			if (parse_addr(optarg, &cfg->http_addr))
				return bad_option("http", optarg);
			break;
		case OPT_DUMP_DIR:
			if (optarg[0] == '\0')
				return bad_option("dump-dir", optarg);
			cfg->dump_dir = optarg;
			break;
		case OPT_TIMEOUT:
			if (parse_seconds(optarg, &cfg->timeout_s))
				return bad_option("timeout", optarg);
			break;
		case OPT_HEARTBEAT_TIMEOUT:
			if (parse_seconds(optarg, &cfg->heartbeat_timeout_s))
				return bad_option("heartbeat-timeout", optarg);
			break;
		case OPT_DUMP_DEADLINE:
			if (parse_seconds(optarg, &cfg->dump_deadline_s))
				return bad_option("dump-deadline", optarg);
			break;
		case OPT_PORTS_FILE:
			cfg->ports_file = optarg;
			break;
		case OPT_MAX_DUMP_SIZE:
			if (parse_u64(optarg, 1, SIZE_MAX / 2, &cfg->max_dump_size))
				return bad_option("max-dump-size", optarg);
			break;
		case OPT_MAX_CONNECTIONS:
			if (parse_u64(optarg, 1, UINT32_MAX, &u))
				return bad_option("max-connections", optarg);
			cfg->max_connections = (uint32_t)u;
			break;
		case 'h':
			usage(stdout);
			return 1;
		case 'V':
			printf("flightrecd %s\n", FLIGHTREC_VERSION);
			return 1;
		default:
			usage(stderr);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "flightrecd: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return -EINVAL;
	}
	return 0;
}

static int write_ports_file(const struct flightrecd *d)
{
	char body[64];
	int n;

	n = snprintf(body, sizeof(body), "{\"listen\": %u, \"http\": %u}\n", d->listen_port,
		     d->http_port);
	return fr_write_file_atomic(d->cfg.ports_file, body, (size_t)n);
}

static void on_tick(uv_timer_t *t)
{
	struct flightrecd *d = t->data;

	atomic_store(&d->last_tick_ns, daemon_mono_ns());
}

static void on_signal(uv_signal_t *s, int signum)
{
	struct flightrecd *d = s->data;

	daemon_log("received %s, shutting down", signum == SIGTERM ? "SIGTERM" : "SIGINT");
	daemon_stop(d);
}

static void on_handle_closed(uv_handle_t *h)
{
	(void)h;
}

/*
 * Stops accepting work and lets the loop drain: an incident being collected
 * is closed as incomplete (its manifest is written once its pending files
 * are), then every connection and handle is closed, so uv_run() returns.
 */
void daemon_stop(struct flightrecd *d)
{
	if (d->stopping)
		return;
	d->stopping = true;
	pthread_mutex_lock(&d->lock);
	for (struct job *job = d->jobs; job; job = job->next)
		if (job->active)
			incident_close(job->active, true);
	server_close_all(d);
	pthread_mutex_unlock(&d->lock);
	uv_close((uv_handle_t *)&d->tick_timer, on_handle_closed);
	uv_close((uv_handle_t *)&d->watchdog_timer, on_handle_closed);
	uv_close((uv_handle_t *)&d->sigterm, on_handle_closed);
	uv_close((uv_handle_t *)&d->sigint, on_handle_closed);
}

static int start_signals(struct flightrecd *d)
{
	int err;

	uv_signal_init(d->loop, &d->sigterm);
	uv_signal_init(d->loop, &d->sigint);
	d->sigterm.data = d;
	d->sigint.data = d;
	err = uv_signal_start(&d->sigterm, on_signal, SIGTERM);
	if (!err)
		err = uv_signal_start(&d->sigint, on_signal, SIGINT);
	return err;
}

static int start_tick(struct flightrecd *d)
{
	atomic_store(&d->last_tick_ns, daemon_mono_ns());
	uv_timer_init(d->loop, &d->tick_timer);
	d->tick_timer.data = d;
	return uv_timer_start(&d->tick_timer, on_tick, DAEMON_TICK_MS, DAEMON_TICK_MS);
}

static int run(struct flightrecd *d)
{
	char la[INET6_ADDRSTRLEN + 8];
	char ha[INET6_ADDRSTRLEN + 8];
	int err;

	err = fr_mkdir_p(d->cfg.dump_dir);
	if (err) {
		daemon_log("cannot create dump directory %s: %s", d->cfg.dump_dir, strerror(-err));
		return 1;
	}
	err = start_tick(d);
	if (!err)
		err = start_signals(d);
	if (!err)
		err = watchdog_start(d);
	if (err) {
		daemon_log("cannot start the event loop: %s", uv_strerror(err));
		return 1;
	}
	if (server_start(d) || http_start(d))
		return 1;
	if (d->cfg.ports_file) {
		err = write_ports_file(d);
		if (err) {
			daemon_log("cannot write ports file %s: %s", d->cfg.ports_file,
				   strerror(-err));
			return 1;
		}
	}
	daemon_format_addr((const struct sockaddr *)&d->cfg.listen_addr, la, sizeof(la));
	daemon_format_addr((const struct sockaddr *)&d->cfg.http_addr, ha, sizeof(ha));
	daemon_log("%s ready: agents on %s, http on %s, dumps in %s", FLIGHTREC_VERSION, la, ha,
		   d->cfg.dump_dir);
	uv_run(d->loop, UV_RUN_DEFAULT);
	daemon_log("stopped");
	return 0;
}

/* Closes whatever a failed startup left open, so the loop can be closed. */
static void close_leftovers(uv_handle_t *h, void *arg)
{
	(void)arg;
	if (!uv_is_closing(h))
		uv_close(h, on_handle_closed);
}

int main(int argc, char **argv)
{
	struct flightrecd d = { 0 };
	int rc;

	rc = parse_options(argc, argv, &d.cfg);
	if (rc)
		return rc > 0 ? 0 : 2;
	/* A peer that vanishes mid-write must not kill the daemon. */
	signal(SIGPIPE, SIG_IGN);
	json_object_seed(0);
	pthread_mutex_init(&d.lock, NULL);
	d.loop = uv_default_loop();

	rc = run(&d);
	if (rc) {
		pthread_mutex_lock(&d.lock);
		server_close_all(&d);
		pthread_mutex_unlock(&d.lock);
		uv_walk(d.loop, close_leftovers, NULL);
		uv_run(d.loop, UV_RUN_DEFAULT);
	}
	http_stop(&d);
	registry_free(&d);
	uv_loop_close(d.loop);
	pthread_mutex_destroy(&d.lock);
	return rc;
}
