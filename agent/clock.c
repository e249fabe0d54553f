#include "clock.h"

#include <stdio.h>
#include <string.h>

bool fr_clock_use_tsc;

/* Anchor (ticks, ns) taken at init, and the rate measured since. Only the
 * link thread (which also runs the dumper) measures and converts, so these
 * need no synchronisation. */
static uint64_t anchor_ticks, anchor_ns;
static double ns_per_tick = 1.0;

/* The counter must tick at a constant rate through frequency changes and
 * idle states, or converted times drift. */
static bool tsc_is_invariant(void)
{
	char line[4096];
	bool constant = false, nonstop = false;
	FILE *f = fopen("/proc/cpuinfo", "re");

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "flags", 5) != 0)
			continue;
		constant = strstr(line, " constant_tsc") != NULL;
		nonstop = strstr(line, " nonstop_tsc") != NULL;
		break;
	}
	fclose(f);
	return constant && nonstop;
}

static void measure(void)
{
	uint64_t t = fr_ticks(), n = fr_now_ns();

	if (t > anchor_ticks && n > anchor_ns)
		ns_per_tick = (double)(n - anchor_ns) / (double)(t - anchor_ticks);
}

void fr_clock_init(void)
{
#if defined(__x86_64__) || defined(__i386__)
	fr_clock_use_tsc = tsc_is_invariant();
#endif
	anchor_ticks = fr_ticks();
	anchor_ns = fr_now_ns();
	if (!fr_clock_use_tsc)
		return;
	/* A first rate over ~2 ms; the link thread refines it every tick, and
	 * its precision grows with the time since the anchor. */
	while (fr_now_ns() - anchor_ns < 2000000)
		;
	measure();
}

void fr_clock_recalibrate(void)
{
	if (fr_clock_use_tsc)
		measure();
}

uint64_t fr_ticks_to_ns(uint64_t ticks)
{
	if (!fr_clock_use_tsc || ticks == 0)
		return ticks;
	if (ticks >= anchor_ticks)
		return anchor_ns + (uint64_t)((double)(ticks - anchor_ticks) * ns_per_tick);
	return anchor_ns - (uint64_t)((double)(anchor_ticks - ticks) * ns_per_tick);
}
