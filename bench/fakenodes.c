/*
 * fakenodes: NODES node daemons in one process, for the central daemon's
 * side of an incident at scale alone (bench/central.sh).
 *
 *   fakenodes HOST:PORT JOB WORLD NODES SUMMARY_DIR [--full DIR] [--token FILE]
 *             [--pace MS] [--stall NODE:N]
 *
 * Node i (named "fake<i>") connects to the central daemon at HOST:PORT,
 * says NODE_HELLO and holds ranks [i * WORLD / NODES, (i + 1) * WORLD /
 * NODES) of JOB, all connected (proving the token of FILE first, as a
 * node daemon does, when the central daemon has one). When the central daemon asks for an
 * incident (NODE_DUMP_REQUEST) it answers at once with each rank's
 * SUMMARY_DIR/rank-<r>.json, read into memory at start (bench/summarize
 * writes them), then NODE_DUMP_DONE; a NODE_FETCH is answered with
 * DIR/rank-<r>.json of --full, or FAILED when there is none. So the time
 * from the request to a complete incident is the central daemon's alone:
 * what a real node daemon does (ask its agents, write their dumps, cut
 * the summaries) runs on each node in parallel at scale, and is measured
 * by bench/nodes.sh.
 *
 * --pace MS: each node sends a summary every MS milliseconds instead of
 * all at once (a node slowed by its machine); --stall NODE:N: node NODE
 * sends its first N summaries, then nothing more, and never says it is
 * done (a node wedged mid-answer). tests/e2e/test_cluster_deadline.sh.
 *
 * Prints "ready" once every node has said who it is, then one line per
 * request and per node done ("request INCIDENT", "sent NODE SECONDS"
 * after the request), to stdout. Runs until killed or a node's
 * connection closes (exit 1).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../protocol/auth.h"
#include "../protocol/node_wire.h"
#include "../protocol/wire.h"

#define PROG "fakenodes"
/* Bytes a node queues before it waits for the socket. */
#define QUEUE_LOW (1u << 20)

struct doc {
	uint8_t *data;
	size_t len;
};

struct node {
	int fd;
	char name[FR_HOST_MAX + 1];
	uint32_t first, count;
	uint8_t *in;
	size_t in_len, in_cap;
	uint8_t *out;
	size_t out_len, out_off, out_cap;
	/* The incident being answered: the next rank to send, or none. */
	bool answering;
	uint32_t next;
	struct fr_msg_node_dump_request req;
	double asked;
	double due;             /* --pace: when the next summary may go */
};

static struct {
	const char *job;
	uint32_t world;
	struct doc *summaries;  /* per rank */
	struct doc *full;       /* per rank; data NULL: none */
	struct fr_token token;
	double pace_s;          /* --pace, 0: none */
	long stall_node;        /* --stall, -1: none */
	uint32_t stall_after;
	struct node *nodes;
} G = { .stall_node = -1 };

__attribute__((format(printf, 1, 2))) static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, PROG ": ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(2);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* DIR/rank-<r>.json into `d`; false when it is missing. */
static bool load(const char *dir, uint32_t r, struct doc *d)
{
	char path[4096];
	char *data;
	int err;

	snprintf(path, sizeof(path), "%s/rank-%" PRIu32 ".json", dir, r);
	err = fr_read_small_file(path, FR_WIRE_MAX_PAYLOAD * 64, &data, &d->len, NULL);
	if (err == -ENOENT)
		return false;
	if (err || !d->len)
		die("cannot read %s: %s", path, err ? strerror(-err) : "it is empty");
	d->data = (uint8_t *)data;
	return true;
}

static uint8_t *reserve(struct node *n, size_t size)
{
	if (n->out_off) {
		memmove(n->out, n->out + n->out_off, n->out_len - n->out_off);
		n->out_len -= n->out_off;
		n->out_off = 0;
	}
	if (n->out_len + size > n->out_cap) {
		size_t cap = n->out_cap ? n->out_cap : 4096;

		while (cap < n->out_len + size)
			cap *= 2;
		n->out = realloc(n->out, cap);
		if (!n->out)
			die("%s", "out of memory");
		n->out_cap = cap;
	}
	return n->out + n->out_len;
}

#define QUEUE(n, kind, m)                                                          \
	do {                                                                       \
		size_t size_ = fr_wire_##kind##_size(m);                           \
		int w_ = fr_wire_##kind##_encode(m, reserve(n, size_), size_);     \
		if (w_ < 0)                                                        \
			die("cannot encode %s", #kind);                            \
		(n)->out_len += (size_t)w_;                                        \
	} while (0)

/* One document (or a failure) as NODE_SUMMARY pieces. */
static void queue_doc(struct node *n, const char *incident, uint32_t rank, uint8_t flags,
		      const struct doc *d)
{
	struct fr_msg_node_summary m = { .rank = rank, .flags = flags };

	snprintf(m.incident, sizeof(m.incident), "%s", incident);
	snprintf(m.job, sizeof(m.job), "%s", G.job);
	if (!d || !d->data) {
		m.flags |= FR_NODE_SUMMARY_FAILED;
		snprintf(m.reason, sizeof(m.reason), "fakenodes holds no such dump");
		QUEUE(n, node_summary, &m);
		return;
	}
	m.total = d->len;
	for (size_t off = 0; off < d->len; off += m.len) {
		m.offset = off;
		m.len = (uint32_t)(d->len - off < FR_WIRE_DUMP_CHUNK ? d->len - off : FR_WIRE_DUMP_CHUNK);
		m.data = d->data + off;
		QUEUE(n, node_summary, &m);
	}
}

/* Tops up the node's queue with the incident's next summaries. */
static void pump(struct node *n)
{
	while (n->answering && n->out_len - n->out_off < QUEUE_LOW) {
		if (G.stall_node == n - G.nodes && n->next - n->first >= G.stall_after)
			return;
		if (n->next < n->first + n->count) {
			if (G.pace_s) {
				if (now_s() < n->due)
					return;
				n->due += G.pace_s;
			}
			queue_doc(n, n->req.incident, n->next, 0, &G.summaries[n->next]);
			n->next++;
			continue;
		}
		struct fr_msg_node_dump_done done = { .answered = n->count };

		snprintf(done.incident, sizeof(done.incident), "%s", n->req.incident);
		snprintf(done.job, sizeof(done.job), "%s", G.job);
		QUEUE(n, node_dump_done, &done);
		n->answering = false;
		printf("sent %s %.3f\n", n->name, now_s() - n->asked);
		fflush(stdout);
	}
}

static void hello(struct node *n, const uint8_t *nonce)
{
	struct fr_node_job job = { .world_size = G.world, .nranks = n->count };
	struct fr_msg_node_hello h = { .boot_id = ((uint64_t)getpid() << 20) ^ (uint64_t)n->first,
				       .protocol = FR_WIRE_VERSION, .njobs = 1, .jobs = &job };
	struct fr_node_rank *ranks = calloc(FR_NODE_RANKS_BATCH, sizeof(*ranks));

	if (!ranks)
		die("%s", "out of memory");
	snprintf(h.node, sizeof(h.node), "%s", n->name);
	snprintf(job.job, sizeof(job.job), "%s", G.job);
	if (G.token.len) {
		struct fr_msg_daemon_challenge dc = { { 0 } };
		struct fr_msg_auth auth;
		size_t size = fr_wire_node_hello_size(&h);
		uint8_t *frame = malloc(size);

		if (!frame || fr_wire_node_hello_encode(&h, frame, size) < 0)
			die("%s", "cannot encode NODE_HELLO");
		fr_wire_node_proof(&G.token, false, nonce, NULL, frame + FR_WIRE_HEADER_SIZE,
				   size - FR_WIRE_HEADER_SIZE, auth.proof);
		free(frame);
		QUEUE(n, daemon_challenge, &dc);
		QUEUE(n, auth, &auth);
	}
	QUEUE(n, node_hello, &h);
	for (uint32_t done = 0; done < n->count;) {
		struct fr_msg_node_ranks m = { .world_size = G.world, .flags = done ? 0 : FR_NODE_RANKS_FULL };

		snprintf(m.job, sizeof(m.job), "%s", G.job);
		while (m.nranks < FR_NODE_RANKS_BATCH && done < n->count) {
			struct fr_node_rank *r = &ranks[m.nranks++];
			uint32_t rank = n->first + done++;

			*r = (struct fr_node_rank){ .rank = rank, .pid = 100000 + rank,
						    .state = FR_NODE_RANK_CONNECTED,
						    .start_ns = 1700000000000000000ull,
						    .ring_capacity = 2048 };
			snprintf(r->host, sizeof(r->host), "%s", n->name);
		}
		m.ranks = ranks;
		QUEUE(n, node_ranks, &m);
	}
	free(ranks);
}

/* The frames the central daemon sent; false when the node must go. */
static bool take(struct node *n)
{
	size_t off = 0;

	for (;;) {
		struct fr_wire_header h;
		int rc = fr_wire_header_decode(n->in + off, n->in_len - off, &h);

		if (rc == -EAGAIN || (!rc && n->in_len - off < FR_WIRE_HEADER_SIZE + h.length))
			break;
		if (rc) {
			fprintf(stderr, PROG ": %s: bad frame from the central daemon: %s\n", n->name,
				strerror(-rc));
			return false;
		}
		const uint8_t *p = n->in + off + FR_WIRE_HEADER_SIZE;

		if (h.type == FR_MSG_NODE_DUMP_REQUEST) {
			struct fr_msg_node_dump_request req;

			if (fr_wire_node_dump_request_decode(p, h.length, &req))
				return false;
			if (!n->answering) {
				n->req = req;
				n->answering = true;
				n->next = n->first;
				n->asked = now_s();
				n->due = n->asked;
				if (n->first == 0) {
					printf("request %s\n", req.incident);
					fflush(stdout);
				}
			}
		} else if (h.type == FR_MSG_NODE_FETCH) {
			struct fr_msg_node_fetch f;

			if (fr_wire_node_fetch_decode(p, h.length, &f))
				return false;
			queue_doc(n, f.incident, f.rank, FR_NODE_SUMMARY_FULL,
				  f.rank < G.world ? &G.full[f.rank] : NULL);
		} else if (h.type == FR_MSG_ERROR) {
			fprintf(stderr, PROG ": %s: the central daemon sent an ERROR\n", n->name);
		}
		off += FR_WIRE_HEADER_SIZE + h.length;
	}
	memmove(n->in, n->in + off, n->in_len - off);
	n->in_len -= off;
	return true;
}

/* Connects; with a token, reads the central daemon's CHALLENGE into `nonce`. */
static int dial(const char *host, const char *port, uint8_t nonce[FR_WIRE_NONCE_SIZE])
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;
	uint8_t buf[FR_WIRE_HEADER_SIZE + FR_WIRE_NONCE_SIZE];
	struct fr_wire_header h;
	struct fr_msg_challenge c;
	int fd, one = 1;

	if (getaddrinfo(host, port, &hints, &ai))
		die("cannot resolve %s", host);
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen) < 0)
		die("cannot connect to the central daemon at %s", host);
	freeaddrinfo(ai);
	if (G.token.len) {
		if (recv(fd, buf, sizeof(buf), MSG_WAITALL) != (ssize_t)sizeof(buf) ||
		    fr_wire_header_decode(buf, sizeof(buf), &h) || h.type != FR_MSG_CHALLENGE ||
		    fr_wire_challenge_decode(buf + FR_WIRE_HEADER_SIZE, h.length, &c))
			die("%s", "no CHALLENGE from the central daemon");
		memcpy(nonce, c.nonce, FR_WIRE_NONCE_SIZE);
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	return fd;
}

int main(int argc, char **argv)
{
	const char *full_dir = NULL;
	char *host, *port;
	uint32_t nodes;
	struct node *ns;
	struct pollfd *pfd;
	bool ready = false;

	for (int i = 6; i < argc; i += 2) {
		const char *why = NULL;
		bool loose;

		if (i + 1 < argc && strcmp(argv[i], "--full") == 0)
			full_dir = argv[i + 1];
		else if (i + 1 < argc && strcmp(argv[i], "--pace") == 0)
			G.pace_s = strtod(argv[i + 1], NULL) / 1000;
		else if (i + 1 < argc && strcmp(argv[i], "--stall") == 0 &&
			 sscanf(argv[i + 1], "%ld:%" SCNu32, &G.stall_node, &G.stall_after) == 2)
			;
		else if (i + 1 < argc && strcmp(argv[i], "--token") == 0 &&
			 !fr_wire_token_read(argv[i + 1], &G.token, &why, &loose))
			continue;
		else
			die("%s", "usage: " PROG " HOST:PORT JOB WORLD NODES SUMMARY_DIR [--full DIR] [--token FILE] [--pace MS] [--stall NODE:N]");
	}
	if (argc < 6)
		die("%s", "usage: " PROG " HOST:PORT JOB WORLD NODES SUMMARY_DIR [--full DIR] [--token FILE] [--pace MS] [--stall NODE:N]");
	host = argv[1];
	port = strrchr(host, ':');
	if (!port)
		die("%s: HOST:PORT expected", host);
	*port++ = '\0';
	G.job = argv[2];
	G.world = (uint32_t)strtoul(argv[3], NULL, 10);
	nodes = (uint32_t)strtoul(argv[4], NULL, 10);
	if (!G.world || !nodes || nodes > G.world)
		die("%s", "WORLD and NODES must be numbers, 0 < NODES <= WORLD");
	G.summaries = calloc(G.world, sizeof(*G.summaries));
	G.full = calloc(G.world, sizeof(*G.full));
	ns = G.nodes = calloc(nodes, sizeof(*ns));
	pfd = calloc(nodes, sizeof(*pfd));
	if (!G.summaries || !G.full || !ns || !pfd)
		die("%s", "out of memory");
	for (uint32_t r = 0; r < G.world; r++) {
		if (!load(argv[5], r, &G.summaries[r]))
			die("a summary is missing in %s", argv[5]);
		if (full_dir)
			load(full_dir, r, &G.full[r]);
	}
	for (uint32_t i = 0; i < nodes; i++) {
		struct node *n = &ns[i];

		n->first = (uint32_t)((uint64_t)i * G.world / nodes);
		n->count = (uint32_t)((uint64_t)(i + 1) * G.world / nodes) - n->first;
		snprintf(n->name, sizeof(n->name), "fake%04" PRIu32, i);
		uint8_t nonce[FR_WIRE_NONCE_SIZE];

		n->fd = dial(host, port, nonce);
		hello(n, nonce);
	}
	for (;;) {
		bool queued = false;

		for (uint32_t i = 0; i < nodes; i++) {
			pump(&ns[i]);
			pfd[i] = (struct pollfd){ .fd = ns[i].fd, .events = POLLIN };
			if (ns[i].out_len > ns[i].out_off) {
				pfd[i].events |= POLLOUT;
				queued = true;
			}
		}
		if (!ready && !queued) {
			ready = true;
			printf("ready\n");
			fflush(stdout);
		}
		if (poll(pfd, nodes, G.pace_s ? (int)(G.pace_s * 1000 / 4) + 1 : -1) < 0 && errno != EINTR)
			die("poll: %s", strerror(errno));
		for (uint32_t i = 0; i < nodes; i++) {
			struct node *n = &ns[i];

			if (pfd[i].revents & POLLOUT) {
				ssize_t w = send(n->fd, n->out + n->out_off, n->out_len - n->out_off, MSG_NOSIGNAL);

				if (w < 0 && errno != EAGAIN && errno != EINTR)
					die("%s: lost the central daemon", n->name);
				if (w > 0 && (n->out_off += (size_t)w) == n->out_len)
					n->out_len = n->out_off = 0;
			}
			if (pfd[i].revents & (POLLIN | POLLHUP | POLLERR)) {
				if (n->in_cap - n->in_len < 65536) {
					n->in_cap = n->in_cap ? n->in_cap * 2 : 1u << 17;
					n->in = realloc(n->in, n->in_cap);
					if (!n->in)
						die("%s", "out of memory");
				}
				ssize_t got = recv(n->fd, n->in + n->in_len, n->in_cap - n->in_len, 0);

				if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) {
					fprintf(stderr, PROG ": %s: the central daemon closed the connection\n",
						n->name);
					return 1;
				}
				if (got > 0) {
					n->in_len += (size_t)got;
					if (!take(n))
						return 1;
				}
			}
		}
	}
}
