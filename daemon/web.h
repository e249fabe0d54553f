/* The web page (web.c). */
#ifndef FR_DAEMON_WEB_H
#define FR_DAEMON_WEB_H

struct MHD_Connection;

/*
 * Answers GET / with the web page (daemon/web/index.html, compiled in),
 * with its Content-Security-Policy. Returns MHD_YES or MHD_NO, as
 * libmicrohttpd's request handler does (an int: this header does not
 * include microhttpd.h).
 */
int web_page_reply(struct MHD_Connection *mc);

#endif
