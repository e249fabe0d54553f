/*
 * The --config file: the command line's settings, one per line, as
 *
 *     # a comment
 *     timeout = 120
 *     dump-dir = /var/lib/flightrec
 *
 * A key is a long option's name without its dashes; a '#' at the start of
 * a line or after a blank starts a comment. An option without a value
 * (insecure) is a setting "key = true" (or yes, 1; false, no, 0: unset). The file is turned into
 * "--key=value" arguments that the command-line parser reads, so every
 * option the daemon has is a setting, checked by the same code.
 *
 * What a reload (SIGHUP) may change is applied here: the timeouts and the
 * limits, which the loop reads afresh each time. Addresses and directories
 * are bound or opened once; a change to them is logged and ignored. The
 * token file keeps its path but its contents are read again on every
 * reload (server_reload_token()), so that a token can be rotated.
 */
#include "config.h"
#include "daemon.h"
#include "addr.h"
#include "budget.h"
#include "http_conns.h"
#include "log.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <sys/resource.h>

/* A settings file is a few dozen lines; anything this big is a mistake. */
#define CONFIG_MAX_SIZE (1u << 20)

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

/* The option `key` names when it is a setting, else NULL. */
static const struct option *config_find(const struct option *opts, const char *key)
{
	for (const struct option *o = opts; o->name; o++)
		if (strcmp(o->name, key) == 0)
			return o;
	return NULL;
}

/* Appends an argument from line `line`, taking ownership of `arg` (NULL: out of memory). */
static int config_append(struct config_args *ca, char *arg, unsigned line)
{
	char **argv;
	unsigned *lines;

	if (!arg)
		return -ENOMEM;
	argv = realloc(ca->argv, (size_t)(ca->argc + 2) * sizeof(*argv));
	if (!argv)
		goto out_free_arg;
	ca->argv = argv;
	lines = realloc(ca->lines, (size_t)(ca->argc + 2) * sizeof(*lines));
	if (!lines)
		goto out_free_arg;
	ca->lines = lines;
	ca->argv[ca->argc] = arg;
	ca->lines[ca->argc] = line;
	ca->argc++;
	ca->argv[ca->argc] = NULL;
	return 0;

out_free_arg:
	free(arg);
	return -ENOMEM;
}

/*
 * Splits one line (modified in place) into key and value; *key is NULL for
 * a blank or comment line. Returns a reason when the line is malformed.
 */
static const char *config_split(char *s, char **key, char **value)
{
	char *eq;
	char *end;

	*key = NULL;
	for (char *p = s; *p; p++) {
		if (*p == '#' && (p == s || is_blank(p[-1]))) {
			*p = '\0';
			break;
		}
	}
	while (is_blank(*s))
		s++;
	end = s + strlen(s);
	while (end > s && is_blank(end[-1]))
		*--end = '\0';
	if (*s == '\0')
		return NULL;
	eq = strchr(s, '=');
	if (!eq)
		return "expected 'key = value'";
	*value = eq + 1;
	while (is_blank(**value))
		(*value)++;
	end = eq;
	while (end > s && is_blank(end[-1]))
		end--;
	*end = '\0';
	if (*s == '\0')
		return "no key before '='";
	if (**value == '\0')
		return "no value after '='";
	*key = s;
	return NULL;
}

int config_read(const char *path, const struct option *opts, struct config_args *out, char *err,
		size_t errcap)
{
	struct config_args ca = { .path = path };
	char *text = NULL;
	char *line;
	size_t len = 0;
	unsigned lineno = 0;
	int rc;

	rc = fr_read_small_file(path, CONFIG_MAX_SIZE, &text, &len, NULL);
	if (rc) {
		snprintf(err, errcap, "%s: cannot read: %s", path,
			 rc == -EINVAL ? "not a regular file" :
			 rc == -EFBIG  ? "larger than 1 MiB" :
					 strerror(-rc));
		return rc;
	}
	if (memchr(text, '\0', len)) {
		snprintf(err, errcap, "%s: not a text file (it holds a NUL byte)", path);
		rc = -EINVAL;
		goto out_free_text;
	}
	/* argv[0] is the program name, which getopt skips. */
	rc = config_append(&ca, strdup("flightrecd"), 0);
	if (rc)
		goto out_nomem;
	for (line = text; line; ) {
		char *next = strchr(line, '\n');
		const struct option *o;
		const char *why;
		char *arg;
		char *key;
		char *value;

		if (next)
			*next++ = '\0';
		lineno++;
		why = config_split(line, &key, &value);
		if (why) {
			snprintf(err, errcap, "%s:%u: %s", path, lineno, why);
			rc = -EINVAL;
			goto out_free_args;
		}
		line = next;
		if (!key)
			continue;
		o = config_find(opts, key);
		/* --config and --job-key are actions of the command line, not
		 * settings; --help and --version neither. */
		if (!o || o->has_arg == optional_argument || strcmp(key, "config") == 0 ||
		    strcmp(key, "job-key") == 0 || strcmp(key, "help") == 0 ||
		    strcmp(key, "version") == 0) {
			snprintf(err, errcap, "%s:%u: unknown setting '%s'", path, lineno, key);
			rc = -EINVAL;
			goto out_free_args;
		}
		if (o->has_arg == no_argument) {
			bool on = strcmp(value, "true") == 0 || strcmp(value, "yes") == 0 ||
				  strcmp(value, "1") == 0;

			if (!on && strcmp(value, "false") != 0 && strcmp(value, "no") != 0 &&
			    strcmp(value, "0") != 0) {
				snprintf(err, errcap, "%s:%u: %s takes true or false, not '%s'", path,
					 lineno, key, value);
				rc = -EINVAL;
				goto out_free_args;
			}
			if (!on)
				continue;
			arg = NULL;
			if (asprintf(&arg, "--%s", key) < 0)
				arg = NULL;
		} else if (asprintf(&arg, "--%s=%s", key, value) < 0) {
			arg = NULL;
		}
		rc = config_append(&ca, arg, lineno);
		if (rc)
			goto out_nomem;
	}
	free(text);
	*out = ca;
	return 0;

out_nomem:
	snprintf(err, errcap, "%s: out of memory", path);
	rc = -ENOMEM;
out_free_args:
	config_args_free(&ca);
out_free_text:
	free(text);
	return rc;
}

void config_args_free(struct config_args *ca)
{
	for (int i = 0; i < ca->argc; i++)
		free(ca->argv[i]);
	free(ca->argv);
	free(ca->lines);
	memset(ca, 0, sizeof(*ca));
}

void config_log_settings(const struct daemon_config *cfg, const char *when)
{
	char la[INET6_ADDRSTRLEN + 8];
	char ha[INET6_ADDRSTRLEN + 8];

	daemon_format_addr((const struct sockaddr *)&cfg->listen_addr, la, sizeof(la));
	daemon_format_addr((const struct sockaddr *)&cfg->http_addr, ha, sizeof(ha));
	daemon_log("settings (%s%s%s): listen %s, http %s, dump-dir %s, timeout %g s, "
		   "heartbeat-timeout %g s, dump-deadline %g s, max-dump-size %" PRIu64
		   ", max-connections %" PRIu32 ", max-job-connections %" PRIu32
		   ", max-frame-size %" PRIu32 ", max-incidents-per-hour %" PRIu32
		   ", hello-timeout %g s, max-pending-per-address %" PRIu32 ", max-memory %" PRIu64
		   ", straggler-threshold %g ms, straggler-min-duration %g s"
		   ", token-file %s, http-allowed-hosts %s, agent-socket %s%s%s%s",
		   when, cfg->config_file ? ", config " : "",
		   cfg->config_file ? cfg->config_file : "", la, ha, cfg->dump_dir, cfg->timeout_s,
		   cfg->heartbeat_timeout_s, cfg->dump_deadline_s, cfg->max_dump_size,
		   cfg->max_connections, cfg->max_job_connections, cfg->max_frame_size,
		   cfg->max_incidents_per_hour, cfg->hello_timeout_s, cfg->max_pending_per_address,
		   cfg->max_memory, cfg->straggler_threshold_s * 1000, cfg->straggler_min_duration_s,
		   cfg->token_file ? cfg->token_file : "(none)",
		   cfg->http_allowed_hosts ? cfg->http_allowed_hosts : "(none)",
		   cfg->agent_socket ? cfg->agent_socket : "(none)",
		   cfg->upstream ? ", upstream " : "", cfg->upstream ? cfg->upstream : "",
		   cfg->insecure ? ", insecure" : "");
}

static bool same_string(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

static void needs_restart(const char *name, const char *was, const char *now)
{
	daemon_log("reload: %s changed from %s to %s: needs a restart, ignored", name, was, now);
}

static void addr_needs_restart(const char *name, const struct sockaddr_storage *was,
			       const struct sockaddr_storage *now)
{
	char a[INET6_ADDRSTRLEN + 8];
	char b[INET6_ADDRSTRLEN + 8];

	daemon_format_addr((const struct sockaddr *)was, a, sizeof(a));
	daemon_format_addr((const struct sockaddr *)now, b, sizeof(b));
	if (strcmp(a, b) != 0)
		needs_restart(name, a, b);
}

/* Applies one reloadable setting to both the live and the configured copy;
 * FMT prints one value of it. */
#define RELOAD(d, next, field, name, fmt)                                                   \
	do {                                                                               \
		if ((d)->configured.field != (next)->field) {                              \
			daemon_log("reload: " name " " fmt " -> " fmt,                     \
				   (d)->configured.field, (next)->field);                  \
			(d)->configured.field = (next)->field;                             \
			(d)->cfg.field = (next)->field;                                    \
			changed++;                                                         \
		}                                                                          \
	} while (0)
#define RELOAD_SECONDS(d, next, field, name) RELOAD(d, next, field, name, "%g s")
#define RELOAD_COUNT(d, next, field, name) RELOAD(d, next, field, name, "%" PRIu32)
#define RELOAD_BYTES(d, next, field, name) RELOAD(d, next, field, name, "%" PRIu64)

int config_apply_reload(struct flightrecd *d, const struct daemon_config *next)
{
	struct daemon_config *was = &d->configured;
	int changed = 0;

	addr_needs_restart("listen", &was->listen_addr, &next->listen_addr);
	addr_needs_restart("http", &was->http_addr, &next->http_addr);
	if (!same_string(was->dump_dir, next->dump_dir))
		needs_restart("dump-dir", was->dump_dir, next->dump_dir);
	if (!same_string(was->upstream, next->upstream))
		needs_restart("upstream", was->upstream ? was->upstream : "(none)",
			      next->upstream ? next->upstream : "(none)");
	if (!same_string(was->agent_socket, next->agent_socket))
		needs_restart("agent-socket", was->agent_socket ? was->agent_socket : "(none)",
			      next->agent_socket ? next->agent_socket : "(none)");
	if (!same_string(was->ports_file, next->ports_file))
		needs_restart("ports-file", was->ports_file ? was->ports_file : "(none)",
			      next->ports_file ? next->ports_file : "(none)");
	if (!same_string(was->http_allowed_hosts, next->http_allowed_hosts))
		needs_restart("http-allowed-hosts",
			      was->http_allowed_hosts ? was->http_allowed_hosts : "(none)",
			      next->http_allowed_hosts ? next->http_allowed_hosts : "(none)");
	if (was->insecure != next->insecure)
		needs_restart("insecure", was->insecure ? "true" : "false",
			      next->insecure ? "true" : "false");
	if (!same_string(was->token_file, next->token_file))
		needs_restart("token-file", was->token_file ? was->token_file : "(none)",
			      next->token_file ? next->token_file : "(none)");

	RELOAD_SECONDS(d, next, timeout_s, "timeout");
	RELOAD_SECONDS(d, next, heartbeat_timeout_s, "heartbeat-timeout");
	/* An incident being collected keeps the deadline it opened with. */
	RELOAD_SECONDS(d, next, dump_deadline_s, "dump-deadline");
	RELOAD_SECONDS(d, next, straggler_threshold_s, "straggler-threshold");
	RELOAD_SECONDS(d, next, straggler_min_duration_s, "straggler-min-duration");
	RELOAD_BYTES(d, next, max_dump_size, "max-dump-size");
	if (was->max_connections != next->max_connections) {
		daemon_log("reload: max-connections %" PRIu32 " -> %" PRIu32
			   "%s", was->max_connections, next->max_connections,
			   d->nconns > next->max_connections ?
				   " (connections over the limit stay; new ones are refused)" : "");
		was->max_connections = next->max_connections;
		d->cfg.max_connections = config_fd_max_connections(next->max_connections);
		if (d->cfg.max_connections < next->max_connections)
			daemon_log("reload: max-connections held to %" PRIu32
				   " by RLIMIT_NOFILE", d->cfg.max_connections);
		changed++;
	}
	/* Ranks over a lowered limit stay connected; new ones are refused. */
	RELOAD_COUNT(d, next, max_job_connections, "max-job-connections");
	/* Applies from the next frame's header on. */
	RELOAD_COUNT(d, next, max_frame_size, "max-frame-size");
	/* Each job's budget is held to the new limit at its next incident. */
	RELOAD_COUNT(d, next, max_incidents_per_hour, "max-incidents-per-hour");
	/* Applies at the next sweep, to connections already waiting too. */
	RELOAD_SECONDS(d, next, hello_timeout_s, "hello-timeout");
	/* What is held stays; new charges are held to the new budget. */
	if (was->max_memory != next->max_memory)
		budget_set_max(next->max_memory);
	RELOAD_BYTES(d, next, max_memory, "max-memory");
	/* Connections over a lowered limit stay until they say HELLO or time out. */
	RELOAD_COUNT(d, next, max_pending_per_address, "max-pending-per-address");
	if (!changed)
		daemon_log("reload: no timeout or limit changed");
	return changed;
}

/* Whether `ss` is a loopback address: 127.0.0.0/8, ::1, or ::ffff:127.x.y.z. */
static bool is_loopback(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >> 24) == 127;
	if (ss->ss_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)ss)->sin6_addr;

		return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
	}
	return false;
}

int config_check_exposure(const struct daemon_config *cfg)
{
	static const struct {
		const char *name;
		size_t off;
	} addrs[] = {
		{ "listen", offsetof(struct daemon_config, listen_addr) },
		{ "http", offsetof(struct daemon_config, http_addr) },
	};

	if (cfg->token_file || cfg->insecure)
		return 0;
	for (size_t i = 0; i < sizeof(addrs) / sizeof(addrs[0]); i++) {
		const struct sockaddr_storage *ss =
			(const void *)((const char *)cfg + addrs[i].off);
		char a[INET6_ADDRSTRLEN + 8];

		if (is_loopback(ss))
			continue;
		daemon_format_addr((const struct sockaddr *)ss, a, sizeof(a));
		fprintf(stderr,
			"flightrecd: --%s %s is reachable from other hosts and no --token-file is set: anyone who can reach it could %s; give --token-file FILE, or --insecure to run open anyway\n",
			addrs[i].name, a,
			i == 0 ? "register ranks of any job and feed the daemon false progress" :
				 "read every job's state, stacks and incidents");
		return -EPERM;
	}
	return 0;
}

/*
 * Descriptors the daemon holds whatever its peers do: stdin/out/err, the
 * loop's epoll, eventfd and signal pipe, the two listeners, each
 * libmicrohttpd worker's epoll and eventfd, systemd's notify socket; and
 * the few it opens for a moment: the incident file being written and its
 * directory, --config and --token-file on SIGHUP, /proc for memory. An
 * idle daemon holds 22 (ls /proc/PID/fd); the rest is margin.
 */
#define FD_FIXED 32u
/*
 * Per HTTP connection slot, its socket and the incident file
 * MHD_create_response_from_fd64() may keep open while serving it.
 */
#define FD_RESERVE (2u * HTTP_CONN_SLOTS + FD_FIXED)
/* Under the soft limit most systems start with (1024), three quarters
 * still go to agents. */
_Static_assert(FD_RESERVE <= 1024 / 4,
	       "the HTTP connection slots leave too few descriptors for agents under ulimit -n 1024");

/* The descriptors this process may have open, after config_raise_fd_limit(). */
static uint64_t fd_limit;

/*
 * Raises the soft RLIMIT_NOFILE to the hard one: the soft default (1024)
 * is far below what --max-connections asks for, and the hard one is what
 * the administrator (or the unit's LimitNOFILE) allows.
 */
void config_raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl)) {
		daemon_log("cannot read RLIMIT_NOFILE: %s", strerror(errno));
		fd_limit = 1024;
		return;
	}
	if (rl.rlim_cur < rl.rlim_max) {
		rlim_t was = rl.rlim_cur;

		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl)) {
			daemon_log("cannot raise RLIMIT_NOFILE from %llu to %llu: %s",
				   (unsigned long long)was, (unsigned long long)rl.rlim_max,
				   strerror(errno));
			rl.rlim_cur = was;
		}
	}
	fd_limit = rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)rl.rlim_cur;
}

uint32_t config_fd_max_connections(uint32_t asked)
{
	/* With almost no descriptors, a quarter still goes to agents. */
	uint64_t allowed = fd_limit > 4 * FD_RESERVE ? fd_limit - FD_RESERVE : fd_limit / 4;

	if (allowed == 0)
		allowed = 1;
	return asked <= allowed ? asked : (uint32_t)allowed;
}

unsigned config_fd_reserve(void)
{
	return FD_RESERVE;
}

uint64_t config_fd_limit(void)
{
	return fd_limit;
}
