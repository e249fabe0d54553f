/*
 * The daemon's log: one line on stderr per event, which journald (or
 * whoever started flightrecd) keeps. Every module logs through it, so it
 * lives apart from main.c, which the fuzz targets replace.
 */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>

void daemon_log(const char *fmt, ...)
{
	char line[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* What peers send (ids, names, hosts, a dump's text) goes into lines:
	 * none may start a line of its own or move the terminal's cursor. */
	for (char *p = line; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	/* One write per line, so lines from the HTTP thread never interleave. */
	fprintf(stderr, "flightrecd: %s\n", line);
}
