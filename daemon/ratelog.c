/*
 * Log lines about limits, once per offender. A peer that hits a limit over
 * and over (an agent reconnecting in a loop past --max-connections, a job
 * whose hang keeps re-triggering) would otherwise write one line per
 * attempt and bury everything else in the log. The first line for a pair
 * (limit, offender) is written; further ones within RATELOG_INTERVAL_NS are
 * only counted, and the next line written for the pair, or the sweep once
 * the pair has been quiet for an interval, says how many were held back.
 *
 * The pairs live in a fixed table (no offender can make it grow): a new pair
 * takes a free slot near its hash, else the one used longest ago there,
 * whose held-back count is logged first so that no count is lost.
 */
#include "ratelog.h"
#include "clock.h"
#include "log.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "../protocol/hash.h"

#define RATELOG_SLOTS 512
/* Slots a pair may land in, from its hash on. */
#define RATELOG_PROBES 8

struct ratelog_slot {
	bool used;
	uint64_t hash;
	char limit[32];
	char offender[96];
	uint64_t logged_mono;   /* when a line for the pair was last written */
	uint64_t last_mono;     /* when the pair was last seen */
	uint64_t held;          /* lines not written since logged_mono */
	char line[384];         /* the last line held back */
};

static struct ratelog_slot slots[RATELOG_SLOTS];
static pthread_mutex_t ratelog_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_uint_fast64_t held_total;

static uint64_t pair_hash(const char *limit, const char *offender)
{
	uint64_t h = fr_fnv1a(FR_FNV_INIT, limit, strlen(limit) + 1);

	return fr_fnv1a(h, offender, strlen(offender));
}

static uint64_t whole_seconds(uint64_t ns)
{
	return (ns + NS_PER_S / 2) / NS_PER_S;
}

/* Writes the count a slot holds back, with the last line it held. */
static void slot_flush(struct ratelog_slot *s, uint64_t now_mono)
{
	if (!s->held)
		return;
	daemon_log("%s (repeated %" PRIu64 " times in the last %" PRIu64 " s)", s->line, s->held,
		   whole_seconds(now_mono - s->logged_mono));
	s->held = 0;
	s->logged_mono = now_mono;
}

/*
 * The slot of a pair: its own, else a free one, else the one near its hash
 * used longest ago.
 */
static struct ratelog_slot *slot_find(uint64_t hash, const char *limit, const char *offender,
				      uint64_t now_mono)
{
	struct ratelog_slot *victim = NULL;

	for (unsigned i = 0; i < RATELOG_PROBES; i++) {
		struct ratelog_slot *s = &slots[(hash + i) % RATELOG_SLOTS];

		if (s->used && s->hash == hash && strcmp(s->limit, limit) == 0 &&
		    strcmp(s->offender, offender) == 0)
			return s;
		if (!s->used) {
			if (!victim || victim->used)
				victim = s;
			continue;
		}
		if (!victim || (victim->used && s->last_mono < victim->last_mono))
			victim = s;
	}
	if (victim->used)
		slot_flush(victim, now_mono);
	memset(victim, 0, sizeof(*victim));
	victim->used = true;
	victim->hash = hash;
	snprintf(victim->limit, sizeof(victim->limit), "%s", limit);
	snprintf(victim->offender, sizeof(victim->offender), "%s", offender);
	return victim;
}

static bool ratelog_v(uint64_t now_mono, const char *limit, const char *offender,
		      const char *fmt, va_list ap)
{
	struct ratelog_slot *s;
	char line[sizeof(s->line)];
	char lim[sizeof(s->limit)];
	char off[sizeof(s->offender)];
	bool logged = false;
	uint64_t hash;

	/* Compared as the slot keeps them: a long name is cut the same way. */
	snprintf(lim, sizeof(lim), "%s", limit);
	snprintf(off, sizeof(off), "%s", offender);
	hash = pair_hash(lim, off);
	vsnprintf(line, sizeof(line), fmt, ap);
	pthread_mutex_lock(&ratelog_lock);
	s = slot_find(hash, lim, off, now_mono);
	s->last_mono = now_mono;
	if (s->logged_mono && now_mono - s->logged_mono < RATELOG_INTERVAL_NS) {
		s->held++;
		memcpy(s->line, line, sizeof(line));
		atomic_fetch_add(&held_total, 1);
	} else {
		if (s->held)
			daemon_log("%s (and %" PRIu64 " more times in the last %" PRIu64 " s)", line,
				   s->held, whole_seconds(now_mono - s->logged_mono));
		else
			daemon_log("%s", line);
		s->held = 0;
		/* 0 means "never": a clock at 0 still starts an interval. */
		s->logged_mono = now_mono ? now_mono : 1;
		logged = true;
	}
	pthread_mutex_unlock(&ratelog_lock);
	return logged;
}

bool ratelog(const char *limit, const char *offender, const char *fmt, ...)
{
	va_list ap;
	bool logged;

	va_start(ap, fmt);
	logged = ratelog_v(daemon_mono_ns(), limit, offender, fmt, ap);
	va_end(ap);
	return logged;
}

bool ratelog_at(uint64_t now_mono, const char *limit, const char *offender, const char *fmt, ...)
{
	va_list ap;
	bool logged;

	va_start(ap, fmt);
	logged = ratelog_v(now_mono, limit, offender, fmt, ap);
	va_end(ap);
	return logged;
}

void ratelog_sweep(uint64_t now_mono)
{
	pthread_mutex_lock(&ratelog_lock);
	for (size_t i = 0; i < RATELOG_SLOTS; i++) {
		struct ratelog_slot *s = &slots[i];

		if (s->used && s->held && now_mono - s->logged_mono >= RATELOG_INTERVAL_NS)
			slot_flush(s, now_mono);
	}
	pthread_mutex_unlock(&ratelog_lock);
}

uint64_t ratelog_held_total(void)
{
	return atomic_load(&held_total);
}

void ratelog_offender_addr(const char *peer, char *out, size_t cap)
{
	const char *colon = strrchr(peer, ':');
	size_t n = colon && colon != peer ? (size_t)(colon - peer) : strlen(peer);

	/* A Unix peer "unix:uid=N,pid=M" is its user, whatever its process. */
	if (strncmp(peer, "unix:", 5) == 0)
		n = strcspn(peer, ",");

	if (n >= cap)
		n = cap - 1;
	memcpy(out, peer, n);
	out[n] = '\0';
}
