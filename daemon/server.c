/*
 * The agent-facing TCP server: accepts connections, reassembles frames from
 * each byte stream, decodes them and hands them to the registry and the
 * incident collector. A connection that sends anything malformed is closed,
 * counted and logged; everyone else keeps being served.
 */
#include "daemon.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LISTEN_BACKLOG 511

struct conn_write {
	uv_write_t req;
	struct conn *conn;
	uint8_t frame[];
};

static void conn_log_reject(const struct conn *c, unsigned type, const char *why)
{
	const char *name = fr_msg_name(type);
	char who[FR_JOB_MAX + 32] = "";
	char what[32];

	if (c->job)
		snprintf(who, sizeof(who), " (job %s rank %" PRIu32 ")", c->job->id, c->rank);
	if (name)
		snprintf(what, sizeof(what), "%s", name);
	else if (type == 0)
		snprintf(what, sizeof(what), "frame header");
	else
		snprintf(what, sizeof(what), "message type %u", type);
	daemon_log("rejected frame from %s%s: %s: %s; closing the connection", c->peer, who,
		   what, why);
}

/* Closes a connection over a bad frame; the caller holds the lock. */
static void conn_reject(struct conn *c, unsigned type, const char *why)
{
	c->d->m.frames_rejected++;
	conn_log_reject(c, type, why);
	conn_close(c);
}

static void conn_reject_err(struct conn *c, unsigned type, int err)
{
	conn_reject(c, type, strerror(-err));
}

static void on_conn_closed(uv_handle_t *h)
{
	struct conn *c = h->data;
	struct flightrecd *d = c->d;

	pthread_mutex_lock(&d->lock);
	if (c->prev)
		c->prev->next = c->next;
	else
		d->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	d->nconns--;
	pthread_mutex_unlock(&d->lock);
	free(c->up.data);
	free(c->buf);
	free(c);
}

void conn_drop_upload(struct conn *c)
{
	free(c->up.data);
	memset(&c->up, 0, sizeof(c->up));
}

void conn_close(struct conn *c)
{
	if (c->closing)
		return;
	c->closing = true;
	registry_conn_lost(c->d, c);
	conn_drop_upload(c);
	uv_read_stop((uv_stream_t *)&c->tcp);
	uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

static void on_write_done(uv_write_t *req, int status)
{
	struct conn_write *w = (struct conn_write *)req;
	struct conn *c = w->conn;

	free(w);
	if (status == 0 || status == UV_ECANCELED)
		return;
	pthread_mutex_lock(&c->d->lock);
	if (!c->closing) {
		daemon_log("cannot write to %s: %s; closing the connection", c->peer,
			   uv_strerror(status));
		conn_close(c);
	}
	pthread_mutex_unlock(&c->d->lock);
}

int conn_send_dump_request(struct conn *c, const char *incident, const char *reason)
{
	struct fr_msg_dump_request m = { 0 };
	struct conn_write *w;
	size_t size;
	uv_buf_t buf;
	int n;

	if (c->closing)
		return -EPIPE;
	snprintf(m.incident, sizeof(m.incident), "%s", incident);
	snprintf(m.reason, sizeof(m.reason), "%s", reason);
	size = fr_wire_dump_request_size(&m);
	w = malloc(sizeof(*w) + size);
	if (!w)
		return -ENOMEM;
	n = fr_wire_dump_request_encode(&m, w->frame, size);
	if (n < 0) {
		free(w);
		return n;
	}
	w->conn = c;
	buf = uv_buf_init((char *)w->frame, (unsigned)n);
	n = uv_write(&w->req, (uv_stream_t *)&c->tcp, &buf, 1, on_write_done);
	if (n) {
		free(w);
		return n;
	}
	return 0;
}

/* Decodes and handles one complete frame; the caller holds the lock. */
static void conn_dispatch(struct conn *c, const struct fr_wire_header *h, const uint8_t *p)
{
	struct flightrecd *d = c->d;
	const char *why = NULL;
	int err = 0;

	if (!c->said_hello && h->type != FR_MSG_HELLO) {
		conn_reject(c, h->type, "the first frame must be hello");
		return;
	}
	if (c->said_hello && h->type == FR_MSG_HELLO) {
		conn_reject(c, h->type, "hello sent twice on one connection");
		return;
	}
	switch (h->type) {
	case FR_MSG_HELLO: {
		struct fr_msg_hello m;

		err = fr_wire_hello_decode(p, h->length, &m);
		if (!err)
			err = registry_hello(d, c, &m, &why);
		if (err == -EBUSY) {
			/* The frame is fine; the connection is not wanted. */
			d->m.connections_rejected++;
			conn_close(c);
			return;
		}
		break;
	}
	case FR_MSG_COMM: {
		struct fr_msg_comm m = { 0 };

		err = fr_wire_comm_decode(p, h->length, &m);
		if (!err) {
			err = registry_comm(c, &m, &why);
			fr_wire_comm_free(&m);
		}
		break;
	}
	case FR_MSG_PROGRESS: {
		struct fr_msg_progress m = { 0 };

		err = fr_wire_progress_decode(p, h->length, &m);
		if (!err) {
			err = registry_progress(c, &m, &why);
			fr_wire_progress_free(&m);
		}
		break;
	}
	case FR_MSG_HEARTBEAT: {
		struct fr_msg_heartbeat m;

		err = fr_wire_heartbeat_decode(p, h->length, &m);
		break;
	}
	case FR_MSG_DUMP_DATA: {
		struct fr_msg_dump_data m;

		err = fr_wire_dump_data_decode(p, h->length, &m);
		if (!err)
			incident_dump_data(c, &m);
		break;
	}
	case FR_MSG_BYE: {
		struct fr_msg_bye m;

		err = fr_wire_bye_decode(p, h->length, &m);
		if (!err)
			registry_bye(c);
		break;
	}
	default:
		why = "not a message an agent sends";
		err = -EBADMSG;
		break;
	}
	if (err) {
		if (why)
			conn_reject(c, h->type, why);
		else
			conn_reject_err(c, h->type, err);
		return;
	}
	d->m.frames_received++;
	registry_seen(c);
}

/*
 * The message type of a header that failed to decode, for the log line; 0
 * when the bytes do not even start like a frame.
 */
static unsigned raw_type(const uint8_t *buf, size_t len)
{
	uint32_t magic;

	if (len < 8)
		return 0;
	magic = (uint32_t)buf[0] | (uint32_t)buf[1] << 8 | (uint32_t)buf[2] << 16 |
		(uint32_t)buf[3] << 24;
	if (magic != FR_WIRE_MAGIC)
		return 0;
	return (unsigned)buf[6] | (unsigned)buf[7] << 8;
}

/*
 * Handles every complete frame in the buffer, then keeps what is left of
 * the next one at the start. The caller holds the lock.
 */
static void conn_process(struct conn *c)
{
	size_t off = 0;

	c->need = FR_WIRE_HEADER_SIZE;
	while (!c->closing) {
		struct fr_wire_header h;
		size_t avail = c->len - off;
		size_t frame;
		int err;

		err = fr_wire_header_decode(c->buf + off, avail, &h);
		if (err == -EAGAIN)
			break;
		if (err) {
			conn_reject_err(c, raw_type(c->buf + off, avail), err);
			return;
		}
		frame = FR_WIRE_HEADER_SIZE + (size_t)h.length;
		if (avail < frame) {
			c->need = frame;
			break;
		}
		conn_dispatch(c, &h, c->buf + off + FR_WIRE_HEADER_SIZE);
		off += frame;
	}
	if (c->closing)
		return;
	memmove(c->buf, c->buf + off, c->len - off);
	c->len -= off;
	/* Give back the memory of a big frame once it has been handled. */
	if (c->cap > DAEMON_CONN_BUF_MIN && c->need <= DAEMON_CONN_BUF_MIN) {
		uint8_t *b = realloc(c->buf, DAEMON_CONN_BUF_MIN);

		if (b) {
			c->buf = b;
			c->cap = DAEMON_CONN_BUF_MIN;
		}
	}
}

/*
 * Offers the free end of the connection's buffer, grown to hold the frame
 * being read (its size is known once its header is in).
 */
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct conn *c = h->data;
	size_t want = c->need > DAEMON_CONN_BUF_MIN ? c->need : DAEMON_CONN_BUF_MIN;

	(void)suggested;
	if (c->cap < want) {
		uint8_t *b = realloc(c->buf, want);

		if (!b) {
			*buf = uv_buf_init(NULL, 0);
			return;
		}
		c->buf = b;
		c->cap = want;
	}
	*buf = uv_buf_init((char *)c->buf + c->len, (unsigned)(c->cap - c->len));
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
	struct conn *c = s->data;
	struct flightrecd *d = c->d;

	(void)buf;
	if (nread == 0)
		return;
	pthread_mutex_lock(&d->lock);
	if (nread < 0) {
		if (nread != UV_EOF)
			daemon_log("connection from %s lost: %s", c->peer, uv_strerror((int)nread));
		conn_close(c);
	} else {
		c->len += (size_t)nread;
		conn_process(c);
	}
	pthread_mutex_unlock(&d->lock);
}

static void on_rejected_closed(uv_handle_t *h)
{
	free(h);
}

/* Accepts and closes a connection over the limit, so it does not linger. */
static void server_refuse(struct flightrecd *d)
{
	uv_tcp_t *t = malloc(sizeof(*t));

	if (!t)
		return;
	uv_tcp_init(d->loop, t);
	if (uv_accept((uv_stream_t *)&d->server, (uv_stream_t *)t) == 0)
		d->m.connections_rejected++;
	uv_close((uv_handle_t *)t, on_rejected_closed);
}

static void conn_set_peer(struct conn *c)
{
	struct sockaddr_storage ss;
	int len = sizeof(ss);

	if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) ||
	    daemon_format_addr((const struct sockaddr *)&ss, c->peer, sizeof(c->peer)))
		snprintf(c->peer, sizeof(c->peer), "unknown peer");
}

static void server_accept(struct flightrecd *d)
{
	struct conn *c = calloc(1, sizeof(*c));
	int err;

	if (!c) {
		server_refuse(d);
		return;
	}
	c->d = d;
	c->need = FR_WIRE_HEADER_SIZE;
	uv_tcp_init(d->loop, &c->tcp);
	c->tcp.data = c;
	err = uv_accept((uv_stream_t *)&d->server, (uv_stream_t *)&c->tcp);
	if (!err) {
		conn_set_peer(c);
		uv_tcp_nodelay(&c->tcp, 1);
		err = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
	}
	c->next = d->conns;
	if (d->conns)
		d->conns->prev = c;
	d->conns = c;
	d->nconns++;
	if (err) {
		daemon_log("cannot accept a connection: %s", uv_strerror(err));
		c->closing = true;
		uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
	}
}

static void on_connection(uv_stream_t *s, int status)
{
	struct flightrecd *d = s->data;

	if (status < 0) {
		daemon_log("accept failed: %s", uv_strerror(status));
		return;
	}
	pthread_mutex_lock(&d->lock);
	if (d->stopping)
		server_refuse(d);
	else if (d->nconns >= d->cfg.max_connections)
		server_refuse(d);
	else
		server_accept(d);
	pthread_mutex_unlock(&d->lock);
}

int server_start(struct flightrecd *d)
{
	char addr[INET6_ADDRSTRLEN + 8];
	struct sockaddr_storage ss;
	int len = sizeof(ss);
	int err;

	daemon_format_addr((const struct sockaddr *)&d->cfg.listen_addr, addr, sizeof(addr));
	uv_tcp_init(d->loop, &d->server);
	d->server.data = d;
	err = uv_tcp_bind(&d->server, (const struct sockaddr *)&d->cfg.listen_addr, 0);
	if (!err)
		err = uv_listen((uv_stream_t *)&d->server, LISTEN_BACKLOG, on_connection);
	if (!err)
		err = uv_tcp_getsockname(&d->server, (struct sockaddr *)&ss, &len);
	if (err) {
		daemon_log("cannot listen on %s: %s", addr, uv_strerror(err));
		return -1;
	}
	d->listen_port = ntohs(ss.ss_family == AF_INET6 ?
				       ((struct sockaddr_in6 *)&ss)->sin6_port :
				       ((struct sockaddr_in *)&ss)->sin_port);
	daemon_set_port(&d->cfg.listen_addr, d->listen_port);
	return 0;
}

/* Stops listening and closes every agent connection; the caller holds the lock. */
void server_close_all(struct flightrecd *d)
{
	if (d->server.type == UV_TCP && !uv_is_closing((uv_handle_t *)&d->server))
		uv_close((uv_handle_t *)&d->server, NULL);
	for (struct conn *c = d->conns; c; c = c->next)
		conn_close(c);
}
