#include "trace.h"
#include "arena.h"
#include "scan.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const rank_status_names[FR_RANK__COUNT] = {
#define FR_RS_NAME(e, n) [FR_RANK_##e] = n,
	FR_RANK_STATUSES(FR_RS_NAME)
#undef FR_RS_NAME
};

const char *fr_rank_status_name(unsigned s)
{
	if (s >= FR_RANK__COUNT)
		return "unknown";
	return rank_status_names[s];
}

int fr_rank_status_from_name(const char *name)
{
	for (unsigned i = 0; i < FR_RANK__COUNT; i++)
		if (strcmp(rank_status_names[i], name) == 0)
			return (int)i;
	return -1;
}

/*
 * The strings of a trace's operations. A rank's entries name a handful of
 * communicators, datatypes and reductions over and over: the last few
 * distinct ones are looked up before a string is copied. The copies are
 * carved from chunks that never move, so that pointers to them stay valid.
 */
#define STRS_RECENT 8
#define STRS_CHUNK_MIN 256
#define STRS_CHUNK_MAX 65536

struct strs_chunk {
	struct strs_chunk *next;
	char text[];
};

struct fr_strs {
	struct strs_chunk *chunks;
	char *at, *end;          /* the free part of the newest chunk */
	size_t next_size;
	const char *recent[STRS_RECENT];
	size_t recent_len[STRS_RECENT];
	unsigned next_recent;    /* the slot the next new string replaces */
};

void fr_strs_free(struct fr_strs *ss)
{
	struct strs_chunk *c, *next;

	if (!ss)
		return;
	for (c = ss->chunks; c; c = next) {
		next = c->next;
		free(c);
	}
	free(ss);
}

const char *fr_strs_keep(struct fr_strs **pool, const char *s, size_t len)
{
	struct fr_strs *ss = *pool;
	char *copy;

	if (len == 0)
		return "";
	if (!ss) {
		if (!(ss = *pool = calloc(1, sizeof(*ss))))
			return NULL;
		ss->next_size = STRS_CHUNK_MIN;
	}
	for (unsigned i = 0; i < STRS_RECENT; i++)
		if (ss->recent_len[i] == len && fr_same_bytes(ss->recent[i], s, len))
			return ss->recent[i];
	if ((size_t)(ss->end - ss->at) < len + 1) {
		size_t size = ss->next_size;
		struct strs_chunk *c;

		if (size < len + 1)
			size = len + 1;
		if (size > SIZE_MAX - sizeof(*c) || !(c = malloc(sizeof(*c) + size)))
			return NULL;
		c->next = ss->chunks;
		ss->chunks = c;
		ss->at = c->text;
		ss->end = c->text + size;
		if (ss->next_size < STRS_CHUNK_MAX)
			ss->next_size *= 2;
	}
	copy = ss->at;
	memcpy(copy, s, len);
	copy[len] = '\0';
	ss->at += len + 1;
	ss->recent[ss->next_recent] = copy;
	ss->recent_len[ss->next_recent] = len;
	ss->next_recent = (ss->next_recent + 1) % STRS_RECENT;
	return copy;
}

const char *fr_trace_strn(struct fr_trace *t, const char *s, size_t len)
{
	return fr_strs_keep(&t->strs, s, len);
}

const char *fr_trace_str(struct fr_trace *t, const char *s)
{
	return fr_trace_strn(t, s, strlen(s));
}

/* fr-analyze holds millions of these (README, Performance). */
_Static_assert(sizeof(void *) != 8 || sizeof(struct fr_op) == 104,
	       "struct fr_op grew past 104 bytes");

void fr_op_init(struct fr_op *op)
{
	memset(op, 0, sizeof(*op));
	op->peer = op->root = op->peer_in_comm = -1;
	op->comm = op->dtype = op->redop = "";
}

const struct fr_thread *fr_trace_app_thread(const struct fr_trace *t)
{
	for (size_t i = 0; t && i < t->nthreads; i++)
		if (!t->threads[i].current && t->threads[i].nframes)
			return &t->threads[i];
	return NULL;
}

const struct fr_thread *fr_trace_py_thread(const struct fr_trace *t)
{
	for (size_t i = 0; t && i < t->nthreads; i++)
		if (!t->threads[i].current && t->threads[i].npyframes)
			return &t->threads[i];
	return NULL;
}

void fr_thread_free(struct fr_thread *th)
{
	for (size_t j = 0; j < th->nframes; j++)
		free(th->frames[j].name);
	free(th->frames);
	for (size_t j = 0; j < th->npyframes; j++) {
		free(th->pyframes[j].function);
		free(th->pyframes[j].file);
	}
	free(th->pyframes);
	th->frames = NULL;
	th->nframes = 0;
	th->pyframes = NULL;
	th->npyframes = 0;
}

int fr_thread_copy(struct fr_thread *dst, const struct fr_thread *src)
{
	*dst = *src;
	dst->frames = NULL;
	dst->nframes = 0;
	dst->pyframes = NULL;
	dst->npyframes = 0;
	if (src->nframes && !(dst->frames = calloc(src->nframes, sizeof(*dst->frames))))
		return -ENOMEM;
	for (size_t i = 0; i < src->nframes; i++) {
		const struct fr_frame *f = &src->frames[i];

		dst->frames[i] = *f;
		dst->frames[i].name = NULL;
		dst->nframes = i + 1;
		if (f->name && !(dst->frames[i].name = strdup(f->name)))
			return -ENOMEM;
	}
	if (src->npyframes && !(dst->pyframes = calloc(src->npyframes, sizeof(*dst->pyframes))))
		return -ENOMEM;
	for (size_t i = 0; i < src->npyframes; i++) {
		const struct fr_pyframe *f = &src->pyframes[i];

		dst->npyframes = i + 1;
		dst->pyframes[i].line = f->line;
		dst->pyframes[i].entry = f->entry;
		if (!(dst->pyframes[i].function = strdup(f->function)) ||
		    !(dst->pyframes[i].file = strdup(f->file)))
			return -ENOMEM;
	}
	return 0;
}

void fr_trace_free(struct fr_trace *t)
{
	for (size_t i = 0; i < t->ncomms; i++)
		free(t->comms[i].members);
	free(t->comms);
	if (!t->arena)
		free(t->ops);
	for (size_t i = 0; i < t->nthreads; i++)
		fr_thread_free(&t->threads[i]);
	free(t->threads);
	fr_strs_free(t->strs);
	if (t->summary)
		free(t->summary->full_dump);
	free(t->summary);
	fr_crash_free(t->crash);
	memset(t, 0, sizeof(*t));
}

const char *fr_signal_name(unsigned signo, char buf[16])
{
	/* Linux numbers, as the CRASH message carries them. */
	static const char *const names[] = {
		[4] = "SIGILL", [5] = "SIGTRAP", [6] = "SIGABRT", [7] = "SIGBUS",
		[8] = "SIGFPE", [11] = "SIGSEGV", [31] = "SIGSYS",
	};

	if (signo < sizeof(names) / sizeof(names[0]) && names[signo])
		return names[signo];
	snprintf(buf, 16, "SIG%u", signo);
	return buf;
}

void fr_crash_free(struct fr_crash *c)
{
	if (!c)
		return;
	fr_thread_free(&c->thread);
	free(c);
}

/* A crash of `n` frames, zeroed, with its frame array; NULL when out of memory. */
static struct fr_crash *crash_new(size_t n)
{
	struct fr_crash *c = calloc(1, sizeof(*c));

	if (c && n && !(c->thread.frames = calloc(n, sizeof(*c->thread.frames)))) {
		free(c);
		return NULL;
	}
	return c;
}

int fr_crash_copy(struct fr_crash **dst, const struct fr_crash *src)
{
	struct fr_crash *c;

	*dst = NULL;
	if (!src)
		return 0;
	c = crash_new(0);
	if (!c)
		return -ENOMEM;
	*c = *src;
	if (fr_thread_copy(&c->thread, &src->thread))
		goto out_free;
	*dst = c;
	return 0;

out_free:
	fr_crash_free(c);
	return -ENOMEM;
}

int fr_crash_from_wire(struct fr_crash **dst, const struct fr_msg_crash *m)
{
	struct fr_crash *c = crash_new(m->nframes);

	*dst = NULL;
	if (!c)
		return -ENOMEM;
	c->signo = m->signo;
	c->code = m->code;
	c->fault_addr = m->fault_addr;
	c->time_ns = m->time_ns;
	c->ring_head = m->ring_head;
	c->thread.tid = m->tid;
	c->thread.current = true;
	for (size_t i = 0; i < m->nframes && i < FR_WIRE_CRASH_FRAMES_MAX; i++) {
		struct fr_frame *f = &c->thread.frames[i];

		c->thread.nframes = i + 1;
		f->ip = m->frames[i].ip;
		f->offset = m->frames[i].offset;
		if (m->frames[i].name[0] && !(f->name = strdup(m->frames[i].name))) {
			fr_crash_free(c);
			return -ENOMEM;
		}
	}
	*dst = c;
	return 0;
}

/* The C library's frames of a signal a thread sends itself: abort(),
 * raise(), and the internals they call (names starting "__"). */
static bool libc_signal_frame(const char *name)
{
	static const char *const names[] = { "raise", "abort", "gsignal", "pthread_kill",
					     "kill", "tgkill" };

	if (!strncmp(name, "__", 2))
		return true;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(name, names[i]))
			return true;
	return false;
}

void fr_exit_from_wire(struct fr_exit *e, const struct fr_msg_exit *m)
{
	memset(e, 0, sizeof(*e));
	e->kind = FR_EXIT_EXITED;
	e->has_code = m->flags & FR_WIRE_EXIT_CODE_KNOWN;
	e->code = e->has_code ? m->code : 0;
	e->underscore = m->flags & FR_WIRE_EXIT_UNDERSCORE;
	e->finalised = m->flags & FR_WIRE_EXIT_FINALISED;
	e->inflight = m->inflight;
	e->time_ns = m->time_ns;
	e->ring_head = m->ring_head;
}

const char *fr_nccl_result_name(uint32_t result, char buf[24])
{
	static const char *const names[] = { "ncclSuccess", "ncclUnhandledCudaError",
		"ncclSystemError", "ncclInternalError", "ncclInvalidArgument", "ncclInvalidUsage",
		"ncclRemoteError", "ncclInProgress" };

	if (result < sizeof(names) / sizeof(names[0]))
		return names[result];
	snprintf(buf, 24, "ncclResult %" PRIu32, result);
	return buf;
}

void fr_nccl_error_from_wire(struct fr_nccl_error *e, const struct fr_msg_nccl_error *m)
{
	memset(e, 0, sizeof(*e));
	memcpy(e->comm, m->comm, sizeof(e->comm));
	e->result = m->result;
	e->time_ns = m->time_ns;
	memcpy(e->message, m->message, sizeof(e->message));
}

const char *fr_exit_kind_name(unsigned kind)
{
	return kind == FR_EXIT_EXITED ? "exited" : kind == FR_EXIT_KILLED ? "killed" : NULL;
}

bool fr_exit_is_fault(const struct fr_exit *e)
{
	return e->kind == FR_EXIT_KILLED || e->inflight || (e->has_code && e->code != 0);
}

const char *fr_crash_function(const struct fr_crash *c)
{
	const char *first = NULL;

	for (size_t i = 0; c && i < c->thread.nframes; i++) {
		const char *name = c->thread.frames[i].name;

		if (!name || !name[0])
			continue;
		/* A module without a symbol ("[libc.so.6]", agent/symbols.c)
		 * names no function: only when nothing else does. */
		if (name[0] != '[' && !libc_signal_frame(name))
			return name;
		if (!first)
			first = name;
	}
	return first;
}

static size_t list_slot(const struct fr_lists *ls, const struct fr_comm *c)
{
	uint64_t x = (uint64_t)(uintptr_t)c->members ^ c->size;

	/* splitmix64's finaliser: addresses differ mostly in a few bits. */
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x & (ls->slots_cap - 1);
}

/* Open addressing, UINT32_MAX for a free slot, at most half full. */
static int lists_rehash(struct fr_lists *ls)
{
	size_t cap = ls->slots_cap ? ls->slots_cap * 2 : 64;
	uint32_t *slots = malloc(cap * sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	memset(slots, 0xff, cap * sizeof(*slots));
	free(ls->slots);
	ls->slots = slots;
	ls->slots_cap = cap;
	for (size_t i = 0; i < ls->n; i++) {
		size_t s = list_slot(ls, ls->lists[i]);

		while (ls->slots[s] != UINT32_MAX)
			s = (s + 1) & (cap - 1);
		ls->slots[s] = (uint32_t)i;
	}
	return 0;
}

int fr_lists_find(struct fr_lists *ls, const struct fr_comm *c, uint64_t **val)
{
	size_t s;

	if ((ls->n + 1) * 2 > ls->slots_cap && lists_rehash(ls) < 0)
		return -ENOMEM;
	for (s = list_slot(ls, c); ls->slots[s] != UINT32_MAX; s = (s + 1) & (ls->slots_cap - 1)) {
		const struct fr_comm *o = ls->lists[ls->slots[s]];

		if (o->members == c->members && o->size == c->size) {
			*val = &ls->vals[ls->slots[s]];
			return 1;
		}
	}
	if (ls->n == ls->cap) {
		size_t ncap = ls->cap ? ls->cap * 2 : 16;
		const struct fr_comm **nl = realloc(ls->lists, ncap * sizeof(*nl));
		uint64_t *nv;

		if (!nl)
			return -ENOMEM;
		ls->lists = nl;
		nv = realloc(ls->vals, ncap * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		ls->vals = nv;
		ls->cap = ncap;
	}
	ls->lists[ls->n] = c;
	ls->vals[ls->n] = 0;
	ls->slots[s] = (uint32_t)ls->n;
	*val = &ls->vals[ls->n++];
	return 0;
}

void fr_lists_free(struct fr_lists *ls)
{
	free(ls->lists);
	free(ls->vals);
	free(ls->slots);
	memset(ls, 0, sizeof(*ls));
}

static __thread struct fr_arena *thread_arena;

void fr_trace_use_arena(struct fr_arena *arena)
{
	thread_arena = arena;
}

const struct fr_comm *fr_trace_comm(const struct fr_trace *t, const char *id)
{
	for (size_t i = 0; i < t->ncomms; i++)
		if (strcmp(t->comms[i].id, id) == 0)
			return &t->comms[i];
	return NULL;
}

/* Array `arr` (NULL for a new one), of which `used` bytes matter, made
 * `size` bytes long: in `arena` when one is given, else with realloc. */
static void *resize(struct fr_arena *arena, void *arr, size_t used, size_t size)
{
	return arena ? fr_arena_grow(arena, arr, used, size) : realloc(arr, size);
}

/*
 * Makes room for one more element of `size` bytes in *arr, which holds `n`
 * of a capacity of *cap, doubling the capacity when full (resize()).
 * Returns the new element, zeroed, or NULL (the array untouched) when out
 * of memory.
 */
static void *grow(void **arr, size_t n, size_t *cap, size_t size, struct fr_arena *arena)
{
	if (n >= *cap) {
		size_t ncap = *cap ? *cap * 2 : 16;
		void *p;

		if (ncap < n + 1)
			ncap = n + 1;
		if (ncap > SIZE_MAX / size)
			return NULL;
		p = resize(arena, *arr, n * size, ncap * size);
		if (!p)
			return NULL;
		*arr = p;
		*cap = ncap;
	}
	memset((char *)*arr + n * size, 0, size);
	return (char *)*arr + n * size;
}

struct fr_op *fr_trace_add_op(struct fr_trace *t, size_t *cap)
{
	void *arr = t->ops;
	struct fr_op *op;

	if (!t->ops)
		t->arena = thread_arena;
	op = grow(&arr, t->nops, cap, sizeof(*op), t->arena);

	t->ops = arr;
	if (op) {
		t->nops++;
		fr_op_init(op);
	}
	return op;
}

struct fr_comm *fr_trace_add_comm(struct fr_trace *t, size_t *cap)
{
	void *arr = t->comms;
	struct fr_comm *c = grow(&arr, t->ncomms, cap, sizeof(*c), NULL);

	t->comms = arr;
	if (c)
		t->ncomms++;
	return c;
}

int fr_trace_reserve_ops(struct fr_trace *t, size_t n, size_t *cap)
{
	struct fr_op *ops;

	if (t->ops || n == 0)
		return 0;
	if (n > SIZE_MAX / sizeof(*ops))
		return -ENOMEM;
	t->arena = thread_arena;
	ops = resize(t->arena, NULL, 0, n * sizeof(*ops));
	if (!ops)
		return -ENOMEM;
	t->ops = ops;
	*cap = n;
	return 0;
}

void fr_trace_seal_ops(struct fr_trace *t)
{
	if (t->arena)
		fr_arena_seal(t->arena, t->ops, t->nops * sizeof(*t->ops));
}
