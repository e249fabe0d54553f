/*
 * The web page (GET /): daemon/web/index.html, assembled into the daemon's
 * read-only data with .incbin, so that the daemon needs no file at run time
 * and the page always matches the API it reads. The page is self-contained
 * (inline style and script, no external fetches) and is served with a
 * Content-Security-Policy that holds it to that: it may talk to this daemon
 * only.
 */
#include "web.h"
#include "http_conns.h"

#include <microhttpd.h>

/*
 * The page's bytes, between two hidden labels. The path is relative to the
 * repository root, where the compiler runs; the Makefile makes this object
 * depend on every file of daemon/web/.
 */
__asm__(".pushsection .rodata\n"
	".balign 16\n"
	".globl web_page_start\n"
	".hidden web_page_start\n"
	"web_page_start:\n"
	".incbin \"daemon/web/index.html\"\n"
	".globl web_page_end\n"
	".hidden web_page_end\n"
	"web_page_end:\n"
	".popsection\n");

extern const char web_page_start[] __attribute__((visibility("hidden")));
extern const char web_page_end[] __attribute__((visibility("hidden")));

/*
 * Inline script and style are the page's own; everything it loads or asks
 * for comes from this daemon; it may not be framed, nor submit anywhere.
 */
#define WEB_CSP                                                                        \
	"default-src 'self'; script-src 'self' 'unsafe-inline'; "                      \
	"style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; " \
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

int web_page_reply(struct MHD_Connection *mc)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;

	resp = MHD_create_response_from_buffer((size_t)(web_page_end - web_page_start),
					       (void *)web_page_start, MHD_RESPMEM_PERSISTENT);
	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/html; charset=utf-8");
	/* A page from an older daemon must not outlive an upgrade in a cache. */
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	MHD_add_response_header(resp, "Content-Security-Policy", WEB_CSP);
	MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
	MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
	ret = MHD_queue_response(mc, MHD_HTTP_OK, resp);
	MHD_destroy_response(resp);
	if (ret == MHD_YES)
		http_conns_answer(mc, (uint64_t)(web_page_end - web_page_start));
	return ret;
}
