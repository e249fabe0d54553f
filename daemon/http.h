/* The HTTP API (http.c). */
#ifndef FR_DAEMON_HTTP_H
#define FR_DAEMON_HTTP_H

#include <stddef.h>

#include <jansson.h>

struct flightrecd;
struct MHD_Connection;

int http_start(struct flightrecd *d);
/*
 * The HTTP threads hand nothing more to the loop (they answer 503): called
 * before the loop's handles are closed, since those threads may otherwise
 * signal a closed handle. Any thread.
 */
void http_quiesce(void);
void http_stop(struct flightrecd *d);
/*
 * Answers with JSON document `doc` (reference taken; NULL: out of memory),
 * one line. Returns an enum MHD_Result (an int: this header does not
 * include microhttpd.h).
 */
int http_reply_doc(struct MHD_Connection *mc, unsigned status, json_t *doc);
/* Answers with JSON text `body` (len bytes, taken), as it is. */
int http_reply_body(struct MHD_Connection *mc, unsigned status, char *body, size_t len);
/* Answers {"error": msg}. */
int http_reply_error(struct MHD_Connection *mc, unsigned status, const char *msg);

#endif
