/* The agent-facing server (TCP and Unix socket) and its connections (server.c). */
#ifndef FR_DAEMON_SERVER_H
#define FR_DAEMON_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>
#include <uv.h>

struct flightrecd;
struct job;
struct look_conn;
struct node;

/* A libuv stream of either kind an agent connects over. */
union agent_stream {
	uv_handle_t handle;
	uv_stream_t stream;
	uv_tcp_t tcp;             /* --listen */
	uv_pipe_t pipe;           /* --agent-socket */
};

/* One agent connection: over TCP (--listen) or the Unix socket (--agent-socket). */
struct conn {
	union agent_stream sock;
	struct flightrecd *d;
	struct conn *prev;
	struct conn *next;
	/* "1.2.3.4:N", "[::1]:N", or "unix:uid=N,pid=M" for a Unix peer. */
	char peer[INET6_ADDRSTRLEN + 8];
	/* A Unix peer's credentials (SO_PEERCRED) when it connected. */
	bool has_cred;
	uint32_t uid;
	uint32_t pid;
	bool closing;
	/* Closed by the daemon over a refused frame, which its log line told:
	 * the disconnect that follows is not news. */
	bool rejected;
	/* Frame reassembly: bytes received and not consumed yet. */
	uint8_t *buf;
	size_t len;
	size_t cap;
	size_t need;                /* bytes the frame being read needs */
	/* Set by an accepted HELLO; cleared when another connection takes over. */
	bool said_hello;
	struct job *job;
	uint32_t rank;
	/* The newest protocol version the agent said it speaks (VERSION), 0
	 * before: one of 6 or more says EXIT rather than vanish. */
	uint16_t agent_version;
	/* look.c's state of the live looks asked of this agent; NULL before
	 * the first. Owned by look.c, freed when the connection closes. */
	struct look_conn *live;
	/* Set by an accepted NODE_HELLO: a node daemon's upstream connection
	 * (nodes.h), which holds no rank and may send NODE_* frames. */
	struct node *node;
};

int server_start(struct flightrecd *d);
void server_close_all(struct flightrecd *d);
/* Closes an agent connection; the caller holds the lock. */
void conn_close(struct conn *c);
int conn_send_dump_request(struct conn *c, const char *incident, const char *reason);
/* To a node daemon's connection (c->node): NODE_DUMP_REQUEST, NODE_FETCH. */
struct fr_msg_node_dump_request;
struct fr_msg_node_fetch;
int conn_send_node_dump_request(struct conn *c, const struct fr_msg_node_dump_request *m);
int conn_send_node_fetch(struct conn *c, const struct fr_msg_node_fetch *m);
struct fr_msg_node_look_request;
int conn_send_node_look_request(struct conn *c, const struct fr_msg_node_look_request *m);

#endif
