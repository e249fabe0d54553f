/*
 * flightrecd: options (the command line over the --config file), startup,
 * the ports file and signals (SIGTERM/SIGINT stop, SIGHUP reloads).
 */
#include "daemon.h"
#include "access.h"
#include "addr.h"
#include "budget.h"
#include "clock.h"
#include "config.h"
#include "http.h"
#include "cluster_incident.h"
#include "incident.h"
#include "log.h"
#include "node_watchdog.h"
#include "nodes.h"
#include "notify.h"
#include "registry.h"
#include "server.h"
#include "straggler.h"
#include "upstream.h"
#include "watchdog.h"

#include <assert.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <malloc.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../dumps/dump.h"
#include "../include/flightrec.h"

#define DEFAULT_LISTEN "127.0.0.1:7420"
#define DEFAULT_HTTP "127.0.0.1:7421"
#define DEFAULT_DUMP_DIR "/var/lib/flightrec"
#define DEFAULT_MAX_DUMP_SIZE (64ull << 20)
#define DEFAULT_MAX_CONNECTIONS 65536u
/* A job's world is not known before its first HELLO: the largest one accepted. */
#define DEFAULT_MAX_JOB_CONNECTIONS DAEMON_MAX_WORLD
#define DEFAULT_MAX_INCIDENTS_PER_HOUR 60u
#define DEFAULT_HELLO_TIMEOUT_S 10.0
/*
 * A node's ranks start together and each says HELLO within milliseconds,
 * but the loop accepts a whole burst before it reads any HELLO: room for
 * the largest nodes' bursts.
 */
#define DEFAULT_MAX_PENDING_PER_ADDRESS 1024u
/*
 * Seconds SIGTERM may take before the process ends anyway: closing an
 * incident writes its manifest at once, and nothing else is waited for.
 * Below the unit's TimeoutStopSec, so that systemd never needs SIGKILL.
 */
#define STOP_DEADLINE_S 10
#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)
/* The smallest --max-frame-size: a full DUMP_DATA piece must still fit. */
#define MIN_FRAME_SIZE (FR_WIRE_DUMP_CHUNK + 2 + FR_INCIDENT_MAX + 8 + 8 + 4)

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
	OPT_CONFIG,
	OPT_TOKEN_FILE,
	OPT_MAX_JOB_CONNECTIONS,
	OPT_MAX_FRAME_SIZE,
	OPT_MAX_INCIDENTS_PER_HOUR,
	OPT_JOB_KEY,
	OPT_HELLO_TIMEOUT,
	OPT_MAX_PENDING_PER_ADDRESS,
	OPT_MAX_MEMORY,
	OPT_HTTP_ALLOWED_HOSTS,
	OPT_INSECURE,
	OPT_AGENT_SOCKET,
	OPT_UPSTREAM,
	OPT_STRAGGLER_THRESHOLD,
	OPT_STRAGGLER_MIN_DURATION,
};

static const struct option long_options[] = {
	{ "listen", required_argument, NULL, OPT_LISTEN },
	{ "agent-socket", required_argument, NULL, OPT_AGENT_SOCKET },
	{ "upstream", required_argument, NULL, OPT_UPSTREAM },
	{ "http", required_argument, NULL, OPT_HTTP },
	{ "dump-dir", required_argument, NULL, OPT_DUMP_DIR },
	{ "timeout", required_argument, NULL, OPT_TIMEOUT },
	{ "heartbeat-timeout", required_argument, NULL, OPT_HEARTBEAT_TIMEOUT },
	{ "ports-file", required_argument, NULL, OPT_PORTS_FILE },
	{ "dump-deadline", required_argument, NULL, OPT_DUMP_DEADLINE },
	{ "max-dump-size", required_argument, NULL, OPT_MAX_DUMP_SIZE },
	{ "max-connections", required_argument, NULL, OPT_MAX_CONNECTIONS },
	{ "max-job-connections", required_argument, NULL, OPT_MAX_JOB_CONNECTIONS },
	{ "max-frame-size", required_argument, NULL, OPT_MAX_FRAME_SIZE },
	{ "max-incidents-per-hour", required_argument, NULL, OPT_MAX_INCIDENTS_PER_HOUR },
	{ "hello-timeout", required_argument, NULL, OPT_HELLO_TIMEOUT },
	{ "max-pending-per-address", required_argument, NULL, OPT_MAX_PENDING_PER_ADDRESS },
	{ "max-memory", required_argument, NULL, OPT_MAX_MEMORY },
	{ "straggler-threshold", required_argument, NULL, OPT_STRAGGLER_THRESHOLD },
	{ "straggler-min-duration", required_argument, NULL, OPT_STRAGGLER_MIN_DURATION },
	{ "config", required_argument, NULL, OPT_CONFIG },
	{ "token-file", required_argument, NULL, OPT_TOKEN_FILE },
	{ "job-key", required_argument, NULL, OPT_JOB_KEY },
	{ "http-allowed-hosts", required_argument, NULL, OPT_HTTP_ALLOWED_HOSTS },
	{ "insecure", no_argument, NULL, OPT_INSECURE },
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
		"  --agent-socket PATH          agents may also connect to a Unix socket at\n"
		"                               PATH (e.g. /run/flightrec/agent.sock, where\n"
		"                               agents look when FLIGHTREC_ADDR is unset); its\n"
		"                               directory must exist, owned by this user or\n"
		"                               root and not writable by others unless sticky;\n"
		"                               a stale socket of this user there is replaced;\n"
		"                               made mode 0666, removed on a clean stop\n"
		"  --upstream ADDR:PORT         run as a node daemon: keep one connection to the\n"
		"                               central daemon's --listen port and send it what\n"
		"                               this daemon's ranks do (proving --token-file\n"
		"                               both ways); address literals only\n"
		"  --http ADDR:PORT             HTTP API (default " DEFAULT_HTTP ")\n"
		"  --dump-dir DIR               incident directories (default " DEFAULT_DUMP_DIR ")\n"
		"  --timeout SECONDS            an operation waiting longer is a hang (default 300)\n"
		"  --heartbeat-timeout SECONDS  a rank silent longer is unresponsive (default 30)\n"
		"  --dump-deadline SECONDS      how long to wait for dumps (default 5)\n"
		"  --max-dump-size BYTES        largest dump accepted (default 67108864)\n"
		"  --max-connections N          agent connections at once (default 65536; held\n"
		"                               below RLIMIT_NOFILE, whose soft limit is raised\n"
		"                               to the hard one at startup); at most half of them\n"
		"                               may wait for their HELLO, and at either limit the\n"
		"                               one waiting longest is closed for a newcomer\n"
		"  --max-job-connections N      ranks of one job connected at once (default 1048576)\n"
		"  --max-frame-size BYTES       largest agent frame payload (default and most\n"
		"                               1048576, at least 262229)\n"
		"  --max-incidents-per-hour N   incidents one job may open, manual ones included:\n"
		"                               a burst of N, then one every 3600/N s (default 60);\n"
		"                               POST /v1/jobs/<job>/dump answers 429 beyond it\n"
		"  --hello-timeout SECONDS      an agent connection that has not said HELLO\n"
		"                               (with a token: proved it) by then is closed\n"
		"                               (default 10)\n"
		"  --max-pending-per-address N  agent connections from one address (IPv6: one\n"
		"                               /64) that have not said HELLO yet (default 1024);\n"
		"                               more are refused\n"
		"  --max-memory BYTES           memory peers may make the daemon hold: member\n"
		"                               lists, incident uploads, live looks (default a\n"
		"                               quarter of RAM, at least 268435456); one job may\n"
		"                               hold half of it; beyond it the newest is refused\n"
		"  --straggler-threshold MS     a rank last to its job's collectives by at least\n"
		"                               this much (decayed) is a straggler (default 2)\n"
		"  --straggler-min-duration SECONDS\n"
		"                               ... once it has been so this long (default 10);\n"
		"                               /v1/jobs/<job> lists stragglers, no incident opens\n"
		"  --ports-file FILE            write {\"listen\": N, \"http\": M} once bound\n"
		"  --token-file FILE            agents must prove they hold the token in FILE;\n"
		"                               POST /v1/jobs/<job>/dump needs it as a bearer token,\n"
		"                               a job's data over HTTP it or the job's key;\n"
		"                               SIGHUP reads FILE again (a rotated token)\n"
		"  --http-allowed-hosts NAMES   host names the HTTP API answers to besides its\n"
		"                               address and localhost, comma-separated (others:\n"
		"                               421, against DNS rebinding)\n"
		"  --insecure                   allow --listen or --http beyond loopback without\n"
		"                               --token-file (anyone who reaches it can register\n"
		"                               ranks and read every job)\n"
		"  --config FILE                read settings from FILE first (see below)\n"
		"  --job-key JOB                print JOB's key in hex (for FLIGHTREC_JOB_KEY_FILE),\n"
		"                               made from the token of --token-file, and exit\n"
		"  --help, --version\n"
		"\n"
		"Port 0 binds an ephemeral port. IPv6 addresses go in brackets: [::1]:7420.\n"
		"\n"
		"FILE holds \"key = value\" lines, a key being an option's name without\n"
		"dashes (timeout = 120); '#' starts a comment. The command line overrides\n"
		"the file. SIGHUP re-reads FILE and applies the timeouts and limits (the\n"
		"addresses and directories need a restart), and reads the token file again;\n"
		"SIGTERM or SIGINT stops after closing any incident in progress (marked\n"
		"incomplete). Under systemd (Type=notify) the daemon reports readiness and\n"
		"pings the watchdog.\n"
		"\n"
		"Every limit is counted in /metrics and logged once per offender (address,\n"
		"or job and rank) a minute, with how many times it was hit meanwhile.\n");
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

/* --job-key JOB: the job whose key to print instead of running (NULL: run). */
static const char *job_key_job;

/* The config file parse_args() is reading, so errors can name its lines. */
static const struct config_args *parsing_file;
/* The options the command line gives, which the config file cannot change. */
static bool cmdline_given[sizeof(long_options) / sizeof(long_options[0])];

static int bad_option(const char *name, const char *value)
{
	if (parsing_file)
		daemon_log("%s:%u: invalid value for %s: '%s'", parsing_file->path,
			   parsing_file->lines[optind - 1], name, value);
	else
		fprintf(stderr, "flightrecd: invalid value for --%s: '%s'\n", name, value);
	return -EINVAL;
}

static void set_defaults(struct daemon_config *cfg)
{
	*cfg = (struct daemon_config){
		.dump_dir = DEFAULT_DUMP_DIR,
		.timeout_s = 300,
		.heartbeat_timeout_s = 30,
		.dump_deadline_s = 5,
		.max_dump_size = DEFAULT_MAX_DUMP_SIZE,
		.max_connections = DEFAULT_MAX_CONNECTIONS,
		.max_job_connections = DEFAULT_MAX_JOB_CONNECTIONS,
		.max_frame_size = FR_WIRE_MAX_PAYLOAD,
		.max_incidents_per_hour = DEFAULT_MAX_INCIDENTS_PER_HOUR,
		.hello_timeout_s = DEFAULT_HELLO_TIMEOUT_S,
		.max_pending_per_address = DEFAULT_MAX_PENDING_PER_ADDRESS,
		.max_memory = budget_default_max(),
		.straggler_threshold_s = STRAGGLER_DEFAULT_THRESHOLD_S,
		.straggler_min_duration_s = STRAGGLER_DEFAULT_MIN_DURATION_S,
	};
	parse_addr(DEFAULT_LISTEN, &cfg->listen_addr);
	parse_addr(DEFAULT_HTTP, &cfg->http_addr);
}

/*
 * Applies the options in argv over cfg: the command line's, or the config
 * file's as config_read() turned them into arguments. Returns 0, 1 when
 * --help/--version was answered, or -EINVAL.
 */
static int parse_args(int argc, char **argv, struct daemon_config *cfg)
{
	uint64_t u;
	int opt;
	int idx = -1;

	/* Each call reads a new vector from its start. */
	optind = 0;
	while ((opt = getopt_long(argc, argv, "hV", long_options, &idx)) != -1) {
		if (!parsing_file && idx >= 0 && opt != OPT_CONFIG)
			cmdline_given[idx] = true;
		idx = -1;
		switch (opt) {
		case OPT_LISTEN:
			if (parse_addr(optarg, &cfg->listen_addr))
				return bad_option("listen", optarg);
			break;
		case OPT_UPSTREAM:
			if (parse_addr(optarg, &cfg->upstream_addr))
				return bad_option("upstream", optarg);
			cfg->upstream = optarg;
			break;
		case OPT_AGENT_SOCKET:
			if (optarg[0] != '/')
				return bad_option("agent-socket", optarg);
			cfg->agent_socket = optarg;
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
		case OPT_STRAGGLER_THRESHOLD:
			if (parse_seconds(optarg, &cfg->straggler_threshold_s))
				return bad_option("straggler-threshold", optarg);
			cfg->straggler_threshold_s /= 1000;
			break;
		case OPT_STRAGGLER_MIN_DURATION:
			if (parse_seconds(optarg, &cfg->straggler_min_duration_s))
				return bad_option("straggler-min-duration", optarg);
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
		case OPT_MAX_JOB_CONNECTIONS:
			if (parse_u64(optarg, 1, UINT32_MAX, &u))
				return bad_option("max-job-connections", optarg);
			cfg->max_job_connections = (uint32_t)u;
			break;
		case OPT_MAX_FRAME_SIZE:
			if (parse_u64(optarg, MIN_FRAME_SIZE, FR_WIRE_MAX_PAYLOAD, &u))
				return bad_option("max-frame-size", optarg);
			cfg->max_frame_size = (uint32_t)u;
			break;
		case OPT_MAX_INCIDENTS_PER_HOUR:
			if (parse_u64(optarg, 1, 1000000, &u))
				return bad_option("max-incidents-per-hour", optarg);
			cfg->max_incidents_per_hour = (uint32_t)u;
			break;
		case OPT_HELLO_TIMEOUT:
			if (parse_seconds(optarg, &cfg->hello_timeout_s))
				return bad_option("hello-timeout", optarg);
			break;
		case OPT_MAX_PENDING_PER_ADDRESS:
			if (parse_u64(optarg, 1, UINT32_MAX, &u))
				return bad_option("max-pending-per-address", optarg);
			cfg->max_pending_per_address = (uint32_t)u;
			break;
		case OPT_MAX_MEMORY:
			/* Below a megabyte not even one member list of a big job fits. */
			if (parse_u64(optarg, 1u << 20, UINT64_MAX / 2, &cfg->max_memory))
				return bad_option("max-memory", optarg);
			break;
		case OPT_CONFIG:
			cfg->config_file = optarg;
			break;
		case OPT_TOKEN_FILE:
			cfg->token_file = optarg;
			break;
		case OPT_HTTP_ALLOWED_HOSTS: {
			const char *why = access_allowed_hosts_check(optarg);

			if (why) {
				bad_option("http-allowed-hosts", optarg);
				fprintf(stderr, "flightrecd: --http-allowed-hosts: %s\n", why);
				return -EINVAL;
			}
			cfg->http_allowed_hosts = optarg;
			break;
		}
		case OPT_INSECURE:
			cfg->insecure = true;
			break;
		case OPT_JOB_KEY:
			/* config_read() refuses it as a setting: only the command line. */
			job_key_job = optarg;
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

/*
 * The settings: the defaults, then the config file's, then the command
 * line's (which were checked once already). On success `file` holds what
 * cfg's strings from the file point into.
 */
static int load_settings(int argc, char **argv, const char *config_file,
			 struct daemon_config *cfg, struct config_args *file)
{
	char err[PATH_MAX + 256];
	int rc;

	set_defaults(cfg);
	if (config_file) {
		rc = config_read(config_file, long_options, file, err, sizeof(err));
		if (rc) {
			daemon_log("%s", err);
			return rc;
		}
		parsing_file = file;
		rc = parse_args(file->argc, file->argv, cfg);
		parsing_file = NULL;
		if (rc) {
			config_args_free(file);
			return -EINVAL;
		}
	}
	return parse_args(argc, argv, cfg);
}

/*
 * Returns 0 to run, 1 when --help/--version was answered, or -EINVAL. The
 * command line is read once alone, for --config, --help and its errors.
 */
static int parse_options(struct flightrecd *d, int argc, char **argv)
{
	int rc;

	d->argc = argc;
	d->argv = argv;
	set_defaults(&d->cfg);
	rc = parse_args(argc, argv, &d->cfg);
	if (rc || !d->cfg.config_file)
		return rc;
	return load_settings(argc, argv, d->cfg.config_file, &d->cfg, &d->file);
}

/* Holds --max-connections to what the descriptor limit allows, and says so. */
static void size_max_connections(struct flightrecd *d)
{
	uint32_t asked = d->cfg.max_connections;

	d->cfg.max_connections = config_fd_max_connections(asked);
	if (d->cfg.max_connections < asked)
		daemon_log("max-connections %" PRIu32 " held to %" PRIu32
			   ": RLIMIT_NOFILE is %" PRIu64 " and %u descriptors are kept for incident files and HTTP (raise LimitNOFILE or ulimit -n)",
			   asked, d->cfg.max_connections, config_fd_limit(), config_fd_reserve());
	else
		daemon_log("file descriptors: RLIMIT_NOFILE %" PRIu64 ", max-connections %" PRIu32,
			   config_fd_limit(), d->cfg.max_connections);
}

/*
 * SIGALRM after SIGTERM: the daemon did not finish stopping within
 * STOP_DEADLINE_S (a thread stuck, a listener that cannot be closed, the
 * loop blocked). It ends now rather than linger; only async-signal-safe
 * calls. The line is written only if stderr can take it at once: a log
 * reader that stopped reading may be what blocks the daemon.
 */
static void on_stop_deadline(int signum)
{
	static const char msg[] = "flightrecd: did not stop within " STRINGIFY(STOP_DEADLINE_S)
		" s of SIGTERM; exiting now\n";
	struct pollfd p = { .fd = STDERR_FILENO, .events = POLLOUT };
	ssize_t n;

	(void)signum;
	if (poll(&p, 1, 0) == 1 && (p.revents & POLLOUT)) {
		n = write(STDERR_FILENO, msg, sizeof(msg) - 1);
		(void)n;
	}
	_exit(1);
}

static volatile sig_atomic_t stop_deadline_armed;

/* Starts the stop deadline once; async-signal-safe (on_stop_signal calls it). */
static void arm_stop_deadline(void)
{
	if (stop_deadline_armed)
		return;
	stop_deadline_armed = 1;
	alarm(STOP_DEADLINE_S);
}

/* What libuv installed for SIGTERM and SIGINT, which on_stop_signal() passes the signal on to. */
static struct sigaction uv_sigterm_action;
static struct sigaction uv_sigint_action;

/*
 * SIGTERM and SIGINT, in the thread the kernel picked: the stop deadline
 * starts here, not in the loop's callback, so that a loop that is blocked
 * (and would never run the callback) is still ended in time. Then libuv's
 * handler, which wakes the loop for on_signal().
 */
static void on_stop_signal(int signum, siginfo_t *info, void *uctx)
{
	const struct sigaction *uv = signum == SIGTERM ? &uv_sigterm_action : &uv_sigint_action;
	int saved_errno = errno;

	arm_stop_deadline();
	errno = saved_errno;
	if (uv->sa_flags & SA_SIGINFO)
		uv->sa_sigaction(signum, info, uctx);
	else if (uv->sa_handler != SIG_DFL && uv->sa_handler != SIG_IGN)
		uv->sa_handler(signum);
}

/*
 * Installs on_stop_deadline() for SIGALRM, and on_stop_signal() in front
 * of the handlers uv_signal_start() installed for SIGTERM and SIGINT (so
 * after it; libuv installs its handler once, when the first watcher of a
 * signal starts, and nothing here starts another).
 */
static int wrap_stop_signals(void)
{
	struct sigaction alrm = { .sa_handler = on_stop_deadline };
	struct sigaction sa = { .sa_sigaction = on_stop_signal };

	sigemptyset(&alrm.sa_mask);
	if (sigaction(SIGALRM, &alrm, NULL))
		return -errno;
	if (sigaction(SIGTERM, NULL, &uv_sigterm_action) ||
	    sigaction(SIGINT, NULL, &uv_sigint_action))
		return -errno;
	/* libuv's mask and flags (every signal blocked, SA_RESTART), and siginfo to pass on. */
	sa.sa_mask = uv_sigterm_action.sa_mask;
	sa.sa_flags = (uv_sigterm_action.sa_flags & ~SA_RESETHAND) | SA_SIGINFO;
	if (sigaction(SIGTERM, &sa, NULL))
		return -errno;
	sa.sa_mask = uv_sigint_action.sa_mask;
	sa.sa_flags = (uv_sigint_action.sa_flags & ~SA_RESETHAND) | SA_SIGINFO;
	if (sigaction(SIGINT, &sa, NULL))
		return -errno;
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

static void daemon_stop(struct flightrecd *d);

static void on_signal(uv_signal_t *s, int signum)
{
	struct flightrecd *d = s->data;
	const char *name = signum == SIGTERM ? "SIGTERM" : "SIGINT";

	if (d->stopping) {
		daemon_log("received %s again: still finishing the incidents in progress", name);
		return;
	}
	daemon_log("received %s, shutting down", name);
	daemon_stop(d);
}

/* Says which settings the config file cannot change, since the command line gives them. */
static void log_cmdline_settings(const struct flightrecd *d)
{
	char names[512] = "";
	size_t n = 0;

	if (!d->cfg.config_file)
		return;
	for (size_t i = 0; i < sizeof(cmdline_given) / sizeof(cmdline_given[0]); i++)
		if (cmdline_given[i] && n < sizeof(names))
			n += (size_t)snprintf(names + n, sizeof(names) - n, "%s%s", n ? ", " : "",
					      long_options[i].name);
	if (n)
		daemon_log("the command line sets %s over %s, also on reload", names,
			   d->cfg.config_file);
}

/* What systemd shows as the service's status line. */
static void ready_status(const struct flightrecd *d, char *buf, size_t cap)
{
	char la[INET6_ADDRSTRLEN + 8];
	char ha[INET6_ADDRSTRLEN + 8];

	daemon_format_addr((const struct sockaddr *)&d->cfg.listen_addr, la, sizeof(la));
	daemon_format_addr((const struct sockaddr *)&d->cfg.http_addr, ha, sizeof(ha));
	snprintf(buf, cap, "agents on %s, http on %s, dumps in %s", la, ha, d->cfg.dump_dir);
}

/*
 * Reads --token-file again, so that a token can be rotated without a
 * restart: the HELLOs verified from now on, and the bearer tokens of
 * manual dumps, need the new token (and job keys made from it);
 * connections already authenticated stay. A file that cannot be read or
 * holds no valid token leaves the token in effect: a daemon started with
 * a token never runs without one.
 */
static void reload_token(struct flightrecd *d)
{
	const char *path = d->cfg.token_file;
	struct fr_token next;
	const char *why;
	bool others;
	bool same;
	int err;

	err = fr_wire_token_read(path, &next, &why, &others);
	if (err) {
		daemon_log("reload: cannot use --token-file %s: %s; the token in effect stays", path,
			   why ? why : strerror(-err));
		return;
	}
	if (others)
		daemon_log("warning: --token-file %s is readable by other users; chmod o-r it", path);
	/* The HTTP thread checks bearer tokens against it: changed under the lock. */
	pthread_mutex_lock(&d->lock);
	same = fr_wire_token_equal(&d->cfg.token, (const char *)next.bytes, next.len);
	if (!same)
		d->cfg.token = next;
	pthread_mutex_unlock(&d->lock);
	explicit_bzero(&next, sizeof(next));
	if (same)
		daemon_log("reload: the token of %s is unchanged", path);
	else
		daemon_log("reload: the token of %s changed: agents must prove the new one from now on; connections already authenticated stay",
			   path);
}

/*
 * Re-reads the config file and applies what can change without a restart.
 * A file that does not parse changes nothing.
 */
static void reload_config(struct flightrecd *d)
{
	struct daemon_config next;
	struct config_args file = { 0 };
	int changed;

	daemon_log("received SIGHUP: reloading %s", d->cfg.config_file);
	if (load_settings(d->argc, d->argv, d->cfg.config_file, &next, &file)) {
		daemon_log("reload: %s not applied; the settings in effect stay",
			   d->cfg.config_file);
		return;
	}
	pthread_mutex_lock(&d->lock);
	changed = config_apply_reload(d, &next);
	pthread_mutex_unlock(&d->lock);
	if (changed)
		config_log_settings(&d->configured, "reload");
	log_cmdline_settings(d);
	/* Only numbers were taken from `next`: its strings can go. */
	config_args_free(&file);
}

/* SIGHUP: the config file, then the token file (whose path stays). */
static void reload(struct flightrecd *d)
{
	char status[512];

	if (!d->cfg.config_file && !d->cfg.token_file) {
		daemon_log("received SIGHUP: no --config file or --token-file to reload");
		return;
	}
	notify_reloading(d);
	if (d->cfg.config_file)
		reload_config(d);
	else
		daemon_log("received SIGHUP: no --config file; reading --token-file %s again",
			   d->cfg.token_file);
	if (d->cfg.token_file)
		reload_token(d);
	ready_status(d, status, sizeof(status));
	notify_ready(d, status);
}

static void on_sighup(uv_signal_t *s, int signum)
{
	struct flightrecd *d = s->data;

	(void)signum;
	if (!d->stopping)
		reload(d);
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
static void daemon_stop(struct flightrecd *d)
{
	if (d->stopping)
		return;
	d->stopping = true;
	arm_stop_deadline();
	notify_stopping(d);
	pthread_mutex_lock(&d->lock);
	for (struct job *job = d->jobs; job; job = job->next)
		if (job->active)
			incident_close(job->active, true);
	cluster_incident_stop(d);
	server_close_all(d);
	pthread_mutex_unlock(&d->lock);
	upstream_close(d);
	uv_close((uv_handle_t *)&d->tick_timer, on_handle_closed);
	uv_close((uv_handle_t *)&d->watchdog_timer, on_handle_closed);
	/* The signals stay caught while incidents drain (a second SIGTERM or
	 * a SIGHUP must not kill the daemon with its default action), but no
	 * longer keep the loop running; main() closes them. */
	uv_unref((uv_handle_t *)&d->sigterm);
	uv_unref((uv_handle_t *)&d->sigint);
	uv_unref((uv_handle_t *)&d->sighup);
}

static int start_signals(struct flightrecd *d)
{
	int err;

	uv_signal_init(d->loop, &d->sigterm);
	uv_signal_init(d->loop, &d->sigint);
	uv_signal_init(d->loop, &d->sighup);
	d->sigterm.data = d;
	d->sigint.data = d;
	d->sighup.data = d;
	err = uv_signal_start(&d->sigterm, on_signal, SIGTERM);
	if (!err)
		err = uv_signal_start(&d->sigint, on_signal, SIGINT);
	if (!err)
		err = uv_signal_start(&d->sighup, on_sighup, SIGHUP);
	if (!err)
		err = uv_translate_sys_error(-wrap_stop_signals());
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
	char status[512];
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
	if (!err)
		err = notify_init(d);
	if (err) {
		daemon_log("cannot start the event loop: %s", uv_strerror(err));
		return 1;
	}
	if (server_start(d) || http_start(d))
		return 1;
	err = upstream_start(d);
	if (err) {
		daemon_log("cannot start the upstream connection: %s", uv_strerror(err));
		return 1;
	}
	if (d->cfg.ports_file) {
		err = write_ports_file(d);
		if (err) {
			daemon_log("cannot write ports file %s: %s", d->cfg.ports_file,
				   strerror(-err));
			return 1;
		}
	}
	config_log_settings(&d->configured, "startup");
	log_cmdline_settings(d);
	ready_status(d, status, sizeof(status));
	daemon_log("%s ready: %s", FLIGHTREC_VERSION, status);
	/* Both sockets are bound and the ports file written: systemd may
	 * start what depends on us. */
	notify_ready(d, status);
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

/*
 * flightrecd --job-key JOB: prints the key that proves HELLOs of JOB only,
 * for a launcher to hand that job (FLIGHTREC_JOB_KEY_FILE) instead of the
 * token. Returns the exit status: 0, or 2 for a bad job id or no token.
 */
static int print_job_key(const struct daemon_config *cfg, const char *job)
{
	uint8_t key[FR_WIRE_JOB_KEY_SIZE];
	char hex[FR_WIRE_JOB_KEY_HEX + 1];
	struct fr_token token;
	const char *why;
	bool others;
	int err;

	if (!fr_wire_valid_name(job)) {
		fprintf(stderr, "flightrecd: --job-key '%s' is not a job id (1 to %d letters, digits, '.', '_' or '-', not starting with '.')\n",
			job, FR_JOB_MAX);
		return 2;
	}
	if (!cfg->token_file) {
		fprintf(stderr, "flightrecd: --job-key needs the token it is made from: give --token-file FILE, or --config FILE that sets token-file\n");
		return 2;
	}
	err = fr_wire_token_read(cfg->token_file, &token, &why, &others);
	if (err) {
		fprintf(stderr, "flightrecd: cannot use --token-file %s: %s\n", cfg->token_file,
			why ? why : strerror(-err));
		return 2;
	}
	err = fr_wire_job_key(&token, job, key);
	explicit_bzero(&token, sizeof(token));
	assert(err == 0);
	fr_wire_job_key_hex(key, hex);
	explicit_bzero(key, sizeof(key));
	printf("%s\n", hex);
	explicit_bzero(hex, sizeof(hex));
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "flightrecd: --job-key: cannot write the key: %s\n", strerror(errno));
		return 2;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct flightrecd d = { 0 };
	int rc;

	rc = parse_options(&d, argc, argv);
	if (rc)
		return rc > 0 ? 0 : 2;
	if (job_key_job) {
		rc = print_job_key(&d.cfg, job_key_job);
		config_args_free(&d.file);
		return rc;
	}
	if (config_check_exposure(&d.cfg)) {
		config_args_free(&d.file);
		return 2;
	}
	config_raise_fd_limit();
	/* What a reload compares against is what was asked for. */
	d.configured = d.cfg;
	size_max_connections(&d);
	budget_set_max(d.cfg.max_memory);
	/* A peer that vanishes mid-write must not kill the daemon. */
	signal(SIGPIPE, SIG_IGN);
	/*
	 * glibc serves an allocation over its mmap threshold (128 KiB) by
	 * mmap, but on freeing one raises the threshold to its size. A
	 * node daemon reads one COMM frame of 256 KiB per rank at a world
	 * of 65,536 (server.c grows a connection's buffer for it, then
	 * shrinks it): after the first, every later one comes from the heap
	 * and leaves it fragmented, about 256 KiB of RSS per rank kept for
	 * good (260 MB for 1,024 ranks). Setting the threshold fixes it and
	 * turns that adjustment off, so big buffers go back to the kernel
	 * when freed.
	 */
	mallopt(M_MMAP_THRESHOLD, 128 << 10);
	json_object_seed(0);
	pthread_mutex_init(&d.lock, NULL);
	d.loop = uv_default_loop();

	rc = run(&d);
	if (rc) {
		pthread_mutex_lock(&d.lock);
		server_close_all(&d);
		pthread_mutex_unlock(&d.lock);
	}
	/* What a failed startup left open, and what a shutdown only unref'd
	 * (the signals, the watchdog pings), is closed now. */
	notify_close(&d);
	/* The HTTP threads may signal the loop's async handles until told
	 * not to; only then are those closed with the rest. */
	http_quiesce();
	uv_walk(d.loop, close_leftovers, NULL);
	uv_run(d.loop, UV_RUN_DEFAULT);
	http_stop(&d);
	registry_free(&d);
	node_watchdog_free();
	nodes_free();
	cluster_incident_free_all();
	config_args_free(&d.file);
	uv_loop_close(d.loop);
	pthread_mutex_destroy(&d.lock);
	return rc;
}
