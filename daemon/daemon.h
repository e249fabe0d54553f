/*
 * flightrecd as a whole: its state (struct flightrecd), its configuration
 * and counters, and its limits. Each module's own interface is in the
 * header named after it (registry.h: jobs, ranks and communicators;
 * server.h: connections; incident.h, look.h, http.h, ...).
 *
 * Threads. The libuv loop (main thread) owns all state and is the only
 * thread that changes it; it holds `lock` while doing so. The HTTP server
 * runs in libmicrohttpd's own threads (a pool of several: handlers run
 * concurrently, so they share no unguarded state) and holds `lock` while
 * it reads the state and builds its answer. Dump validation and file writes run on the
 * libuv thread pool with data they own; their results are applied on the
 * loop. Only `last_tick_ns` is read without the lock.
 */
#ifndef FR_DAEMON_H
#define FR_DAEMON_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <uv.h>

#include "../protocol/auth.h"
#include "clock.h"
#include "config.h"
#include "notify.h"

/*
 * Largest world size the daemon accepts; bounds every per-rank table,
 * each sized by the job's own world. 1,048,576: a 100,000-GPU job (today's
 * largest clusters) and room beyond (STAT merged stacks of 1M MPI tasks);
 * it was 65,536, and a job of 100,000 ranks was refused at its HELLO.
 */
#define DAEMON_MAX_WORLD (1u << 20)
/* Jobs kept at once; beyond it, a job with no connected rank is forgotten. */
#define DAEMON_MAX_JOBS 1024
/* A job with no connected rank and no incident is forgotten after this long. */
#define DAEMON_JOB_IDLE_NS (600ull * NS_PER_S)
/* Communicators per job (and per rank); COMMs beyond it are ignored. */
#define DAEMON_MAX_COMMS 16384
/* Incident records kept per job; the oldest are forgotten first. */
#define DAEMON_MAX_INCIDENT_RECORDS 256
/* What a connection's read buffer shrinks back to between big frames. */
#define DAEMON_CONN_BUF_MIN 4096
/* A disconnected rank counts as a fault after min(this, heartbeat timeout). */
#define DAEMON_DISCONNECT_GRACE_S 2.0
/* The loop is healthy when it ticked within this long. */
#define DAEMON_HEALTH_MAX_AGE_NS (2ull * 1000000000ull)
#define DAEMON_TICK_MS 100
#define DAEMON_WATCHDOG_MS 100

struct conn;
struct job;
struct MHD_Daemon;

/*
 * What the command line and the --config file set. Reloading the file
 * (SIGHUP) changes only the timeouts and the limits; the rest needs a
 * restart.
 */
struct daemon_config {
	const char *config_file;    /* NULL: none */
	struct sockaddr_storage listen_addr;
	struct sockaddr_storage http_addr;
	const char *dump_dir;
	const char *ports_file;     /* NULL: none */
	const char *agent_socket;   /* --agent-socket: a Unix socket for agents; NULL: none */
	/* --upstream: the central daemon this node daemon reports to
	 * (upstream.c); NULL: none, this daemon is central or alone. */
	const char *upstream;
	struct sockaddr_storage upstream_addr;
	double timeout_s;           /* an op in flight longer than this is a hang */
	double heartbeat_timeout_s; /* a rank silent longer than this is unresponsive */
	double dump_deadline_s;     /* how long an incident waits for dumps */
	uint64_t max_dump_size;
	uint32_t max_connections;
	uint32_t max_job_connections; /* ranks of one job connected at once */
	uint32_t max_frame_size;      /* largest frame payload, at most FR_WIRE_MAX_PAYLOAD */
	uint32_t max_incidents_per_hour; /* per job, manual ones included */
	double hello_timeout_s;     /* a connection must say HELLO within this long */
	uint32_t max_pending_per_address; /* connections of one address before their HELLO */
	uint64_t max_memory;        /* the memory budget (budget.c) */
	/* --straggler-threshold (given in ms) and --straggler-min-duration
	 * (straggler.c). */
	double straggler_threshold_s;
	double straggler_min_duration_s;
	/* --http-allowed-hosts: names the HTTP API answers to besides its
	 * address and localhost (access.c); NULL: none. */
	const char *http_allowed_hosts;
	/* --insecure: listening beyond loopback without a token is allowed. */
	bool insecure;
	/* --token-file: NULL when agents need no proof and manual dumps are refused. */
	const char *token_file;
	struct fr_token token;      /* read from token_file by server_start(), again on SIGHUP (main.c) */
};

/*
 * The daemon's counters, guarded by its lock: X(field, name, help), where
 * /metrics calls the counter flightrec_<name> and explains it with help.
 */
#define DAEMON_COUNTERS(X)                                                                        \
	X(frames_received, "frames_received_total", "Agent frames accepted.")                     \
	X(frames_rejected, "frames_rejected_total",                                               \
	  "Agent frames rejected (the connection was closed).")                                   \
	X(connections_rejected, "connections_rejected_total",                                     \
	  "Agent connections refused: over --max-connections, or claiming a rank another live "  \
	  "process holds.")                                                                       \
	X(auth_failures, "auth_failures_total",                                                   \
	  "Agent connections refused for a missing or wrong proof of the token.")                 \
	X(comms_dropped, "comms_dropped_total",                                                   \
	  "Communicators ignored because their job had too many.")                                \
	X(incidents, "incidents_total", "Incidents opened.")                                      \
	X(dumps_received, "dumps_received_total", "Complete dumps received.")                     \
	X(dumps_invalid, "dumps_invalid_total", "Complete dumps that failed validation.")         \
	X(dumps_rejected, "dumps_rejected_total", "Dump uploads refused (too big or out of order).") \
	X(incident_write_errors, "incident_write_errors_total",                                   \
	  "Incident files or directories that could not be written.")                             \
	X(job_connections_rejected, "job_connections_rejected_total",                             \
	  "Agent connections refused over --max-job-connections (also in "                        \
	  "connections_rejected_total).")                                                         \
	X(frames_oversized, "frames_oversized_total",                                             \
	  "Agent frames over --max-frame-size (also in frames_rejected_total).")                  \
	X(incidents_suppressed, "incidents_suppressed_total",                                     \
	  "Incidents not opened, manual ones included: over --max-incidents-per-hour.")           \
	X(hello_timeouts, "hello_timeouts_total",                                                 \
	  "Agent connections closed for saying no HELLO within --hello-timeout (without a token; " \
	  "with one they count as auth failures).")                                               \
	X(pending_rejected, "pending_rejected_total",                                             \
	  "Agent connections refused over --max-pending-per-address (also in "                    \
	  "connections_rejected_total).")                                                         \
	X(pending_evicted, "pending_evicted_total",                                               \
	  "Agent connections without HELLO closed for a newer one, at --max-connections or at "  \
	  "the cap of connections without HELLO (half of it).")                                   \
	X(accept_errors, "accept_errors_total",                                                   \
	  "Agent connections the daemon could not accept (out of file descriptors).")            \
	X(nodes_refused, "nodes_refused_total",                                                   \
	  "Node daemons' node_hello refused: a name a connected node of another boot id holds, "  \
	  "a name that is empty or not printable, 16384 nodes all connected, or over "            \
	  "--max-memory.")                                                                      \
	X(node_state_refused, "node_state_refused_total",                                         \
	  "Node daemons' jobs, ranks or progress records not kept: over a cap on what a node "    \
	  "may hold or on the jobs all nodes hold together, an invalid id, or over --max-memory.") \
	X(node_ranks_conflicting, "node_ranks_conflicting_total",                                 \
	  "Node daemons' NODE_RANKS refused in part or whole: ranks another connected node of "  \
	  "the job holds, or a world size the job's other nodes do not say.")                    \
	X(cluster_incidents_deferred, "cluster_incidents_deferred_total",                         \
	  "Incidents of node-held jobs not opened because CLUSTER_COLLECTING_MAX were "          \
	  "collecting already (tried again on a later pass).")                                   \
	X(node_jobs_conflicting, "node_jobs_conflicting_total",                                   \
	  "Ranks refused because their job id is held by the other kind of peer: node daemons, " \
	  "or agents connected to this daemon.")

struct daemon_metrics {
#define DAEMON_COUNTER_FIELD(field, name, help) uint64_t field;
	DAEMON_COUNTERS(DAEMON_COUNTER_FIELD)
#undef DAEMON_COUNTER_FIELD
};

struct flightrecd {
	struct daemon_config cfg;
	/* The settings as configured, before port 0 became a bound port: what
	 * a reload compares the file against. */
	struct daemon_config configured;
	/* The command line, kept to apply over the file again on a reload. */
	int argc;
	char **argv;
	struct config_args file;    /* what cfg's strings from the file point into */
	struct notify notify;
	uv_loop_t *loop;
	uv_tcp_t server;
	/* The --agent-socket listener; `agent_socket_bound` once its file is
	 * ours to unlink on a clean stop. */
	uv_pipe_t agent_pipe;
	bool agent_socket_bound;
	uv_timer_t tick_timer;
	uv_timer_t watchdog_timer;
	uv_signal_t sigterm;
	uv_signal_t sigint;
	uv_signal_t sighup;         /* reloads the --config file */
	struct MHD_Daemon *http;
	uint16_t listen_port;
	uint16_t http_port;
	bool stopping;
	atomic_uint_fast64_t last_tick_ns; /* monotonic, written by the loop */
	pthread_mutex_t lock;
	/* Everything below is guarded by `lock`. */
	struct daemon_metrics m;
	struct job *jobs;
	size_t njobs;
	struct conn *conns;
	size_t nconns;
	size_t npending;          /* of those, the ones that have not said HELLO */
	uint64_t incident_seq;
};

#endif
