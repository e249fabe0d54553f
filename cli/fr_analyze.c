/*
 * fr-analyze: the offline analyzer. Reads an incident directory (or any
 * directory of rank dumps), correlates the ranks' evidence with the same
 * engine the daemon uses live, and says which rank the job is stuck on and
 * why, for a person or as JSON.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <getopt.h>
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "../dumps/arena.h"
#include "../dumps/correlate.h"
#include "../dumps/dump.h"
#include "../dumps/pickle.h"
#include "../dumps/pytorch.h"
#include "../include/flightrec.h"
#include "live.h"

#define PROG "fr-analyze"

enum {
	EXIT_VERDICT_OK = 0,
	EXIT_PROBLEM = 1,
	EXIT_UNUSABLE = 2,
};

/* The synopsis, in the help and in the reply to bad usage. */
#define SYNOPSIS PROG " [--json] [--rank N] [--comm ID] PATH"
#define SYNOPSIS_LIVE PROG " [--json] --live http://HOST:PORT/JOB"

static const char usage_text[] =
	"Usage: " SYNOPSIS "\n"
	"       " SYNOPSIS_LIVE "\n"
	"       " PROG " --help | --version\n"
	"\n"
	"Names the rank(s) and the operation a hung MPI/NCCL job is stuck on, from\n"
	"the dumps flightrec collected.\n"
	"\n"
	"PATH is an incident directory written by flightrecd, or any directory of\n"
	"rank dumps. " PROG " reads every rank-*.json in it, and any other *.json\n"
	"whose \"format\" is \"" FR_DUMP_FORMAT "\". It also reads PyTorch Flight\n"
	"Recorder dumps (pickle or JSON, told apart by content), one per rank, named\n"
	"with the global rank at the end (nccl_trace_rank_0, nccl_trace_rank_1, ...):\n"
	"process groups become communicators, and a rank's stack is the Python frames\n"
	"of its latest operation. When manifest.json is present, the\n"
	"job's world size comes from it, and a rank without a usable dump file is\n"
	"judged from the daemon's live view of it (and its status: unresponsive,\n"
	"disconnected, finished); otherwise the world size is the one most dumps\n"
	"state, and a rank without a dump counts as missing. When no rank dumped at\n"
	"all (the whole job froze), the ranks the daemon found unresponsive or\n"
	"disconnected are named as a hang even with nothing in flight.\n"
	"\n"
	"A dump that cannot be read (malformed, unknown format version, I/O error)\n"
	"is reported on stderr with its file name and left out: that rank is then\n"
	"treated as having no dump, so that one lost file does not hide the verdict.\n"
	"So is a dump of a rank outside that world size, or naming such a rank,\n"
	"and a symbolic link, a FIFO, a socket or a device in place of a dump or\n"
	"the manifest: links are not followed (copy dumps in from elsewhere).\n"
	"Two dumps of the same rank are an error.\n"
	"\n"
	"Options:\n"
	"  --json      print the verdict as JSON (the contract documented in the\n"
	"              README) instead of the report for a person\n"
	"  --rank N    print what the evidence says of global rank N instead of a\n"
	"              verdict (nothing is correlated): its identity, status, dump\n"
	"              time and dropped entries, its communicators (its rank in each,\n"
	"              size, last seq entered and completed), its flight-recorder\n"
	"              entries oldest first (times relative to its dump) and the\n"
	"              stacks of its threads; with --json, its evidence as a dump\n"
	"              object (dumps/FORMAT.md). The evidence is its dump, else the\n"
	"              manifest's live view of it\n"
	"  --comm ID   look at communicator ID only: every rank's evidence keeps\n"
	"              that communicator and the operations on it, so the verdict\n"
	"              (or --rank's entries) concerns ID alone\n"
	"  --live URL  print the live verdict of a running job instead, from the\n"
	"              flightrecd that watches it: URL is http://HOST:PORT/JOB (HOST\n"
	"              a name, an IPv4 address or an IPv6 address in brackets; PORT\n"
	"              the daemon's --http port, " LIVE_DEFAULT_PORT " when left out). The output is\n"
	"              what " PROG " prints for the same evidence, text or --json;\n"
	"              no PATH, --rank or --comm with it. Plain HTTP, one request,\n"
	"              bounded to 10 s\n"
	"  -h, --help     print this help and exit\n"
	"  -V, --version  print the version and exit\n"
	"\n"
	"Exit status:\n"
	"  0  no problem found (nothing in flight, no mismatch)\n"
	"  1  a problem was named: hang, mismatch or deadlock\n"
	"  2  bad usage, or no usable evidence (no dump could be read, PATH is not\n"
	"     a readable directory, two dumps of one rank)\n"
	"With --rank: 0 when the evidence has rank N, 2 when it has none of it.\n"
	"With --live: 0 and 1 as above for the daemon's verdict; 2 when the daemon\n"
	"cannot be reached or does not answer in time, or knows no such job.\n"
	"A --comm that no evidence names is bad usage (2).\n";

/* Dump files are read by a pool of at most this many threads, one a CPU. */
#define READERS_MAX 16

/* Everything read from the directory: owned traces and the manifest. */
struct evidence {
	struct fr_trace **dumps;   /* each owned */
	char **paths;              /* the file each dump came from, owned */
	size_t ndumps;
	size_t cap;
	bool have_manifest;
	struct fr_manifest manifest;
	char *manifest_path;       /* owned, when have_manifest */
	bool bad_manifest;         /* manifest.json is there, but unusable */
	size_t nbad;               /* dump files left out */
	/* Where the dumps' operations are, one arena per reading thread
	 * (NULL where one could not be made: malloc then). */
	struct fr_arena *arenas[READERS_MAX];
};

static char *join(const char *dir, const char *name)
{
	size_t dl = strlen(dir);
	bool slash = dl && dir[dl - 1] == '/';
	char *p = malloc(dl + strlen(name) + 2);

	if (p)
		sprintf(p, "%s%s%s", dir, slash ? "" : "/", name);
	return p;
}

/* Adds a dump that was read; takes ownership of `t` and `path`. */
static int evidence_add(struct evidence *ev, struct fr_trace *t, char *path)
{
	if (ev->ndumps == ev->cap) {
		size_t ncap = ev->cap ? ev->cap * 2 : 64;
		struct fr_trace **d = realloc(ev->dumps, ncap * sizeof(*d));
		char **p;

		if (!d)
			return -ENOMEM;
		ev->dumps = d;
		p = realloc(ev->paths, ncap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		ev->paths = p;
		ev->cap = ncap;
	}
	ev->dumps[ev->ndumps] = t;
	ev->paths[ev->ndumps] = path;
	ev->ndumps++;
	return 0;
}

/* How a file is read: as a dump by its name (rank-*.json), a dump only if
 * its content says so (other *.json: our "format" or a PyTorch dump), or a
 * PyTorch dump only (a name ending with the rank, pickle or JSON). */
enum file_kind { FILE_DUMP, FILE_SNIFF_JSON, FILE_SNIFF_PYTORCH };

/* A dump file to read, and what became of it. */
struct dump_file {
	char *path;            /* owned */
	enum file_kind kind;
	bool named_rank;       /* the name ends with a rank (PyTorch's naming) */
	uint32_t rank;         /* that rank */
	int rc;                /* 0 read, 1 not a dump, else a negative errno */
	struct fr_trace *t;    /* owned once read */
	char err[512];
};

/*
 * Parsing dominates the time to analyze a large job (a 1024-rank incident
 * is over a gigabyte of JSON), so the files are read by a pool of threads
 * that share no state.
 */
struct pool {
	struct dump_file *files;
	size_t n;
	atomic_size_t next;
};

static uint64_t mtime_ns(const struct stat *st)
{
	return (uint64_t)st->st_mtim.tv_sec * 1000000000u + (uint64_t)st->st_mtim.tv_nsec;
}

/*
 * Files are mapped, not read: copying a gigabyte out of the page cache
 * cost a quarter of the time. A file cut short while mapped (someone
 * rewriting it under us) raises SIGBUS at the first access past its new
 * end; the handler jumps back to the reader of that file, which reports it
 * and goes on with the others. What the interrupted parse had allocated
 * is lost, once, in a process about to exit.
 */
static __thread sigjmp_buf *bus_jump;

static void on_sigbus(int sig)
{
	if (bus_jump)
		siglongjmp(*bus_jump, 1);
	/* Not a mapped dump: die of it as if there were no handler. */
	signal(sig, SIG_DFL);
}

static void catch_sigbus(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigbus;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, NULL);
}

/* The bytes of open file `fd` (of `size` bytes), or "" for an empty one;
 * NULL with errno set when it cannot be mapped. */
static const char *map_file(int fd, size_t size)
{
	void *p;

	if (size == 0)
		return "";
	p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
	return p == MAP_FAILED ? NULL : p;
}

static void unmap_file(const char *p, size_t size)
{
	if (size)
		munmap((void *)p, size);
}

/*
 * Reads a *.json file not named rank-*.json into f->t when it is a dump:
 * only its content says so, our "format" or PyTorch's dump shape. Anything
 * else in the directory (notes, other tools' output, files too big to be a
 * dump, text that is not JSON) is passed over in silence (1). The file is
 * parsed once, and the parsed document is what the dump is read from.
 */
static int read_sniffed_json(struct dump_file *f, const char *buf, size_t len,
			     const struct stat *st)
{
	struct fr_doc *d = fr_doc_new();
	struct fr_val *root;
	const char *format;
	int rc;

	if (!d)
		return -ENOMEM;
	rc = fr_json_parse(d, buf, len, &root, NULL, 0);
	if (rc) {
		rc = rc == -ENOMEM ? rc : 1;
		goto out_free;
	}
	rc = 1;
	format = fr_val_str(fr_val_get(root, "format"));
	if (format && strcmp(format, FR_DUMP_FORMAT) == 0) {
		rc = fr_dump_from_val(root, f->path, f->t, f->err, sizeof(f->err));
	} else if (fr_pytorch_is_dump(root) && f->named_rank) {
		rc = fr_pytorch_from_val(d, root, f->path, f->rank, mtime_ns(st), f->t, f->err,
					 sizeof(f->err));
	} else if (fr_pytorch_is_dump(root)) {
		snprintf(f->err, sizeof(f->err), "%s: a PyTorch Flight Recorder dump, but its "
			 "name does not end with the rank it belongs to", f->path);
		rc = -EPROTO;
	}
out_free:
	fr_doc_free(d);
	return rc;
}

/* Reads a file whose name ends with a rank as a PyTorch dump, pickle or
 * JSON; anything else is passed over (1). */
static int read_sniffed_pytorch(struct dump_file *f, const char *buf, size_t len,
				const struct stat *st)
{
	/* Look before reading it all: a core file may end with a number too. */
	if (len < 2 || (!fr_pickle_sniff(buf, len) && buf[0] != '{'))
		return 1;
	return fr_pytorch_parse(buf, len, f->path, f->rank, mtime_ns(st), f->t, f->err,
				sizeof(f->err));
}

/* Parses file f, mapped at buf, as its kind says. */
static int parse_mapped(struct dump_file *f, const char *buf, size_t len, const struct stat *st)
{
	sigjmp_buf jump;
	int rc;

	if (sigsetjmp(jump, 1)) {
		bus_jump = NULL;
		fr_trace_free(f->t);
		snprintf(f->err, sizeof(f->err), "%s: the file was cut short while being read",
			 f->path);
		return -EIO;
	}
	bus_jump = &jump;
	if (f->kind == FILE_DUMP)
		rc = fr_dump_parse(buf, len, f->path, f->t, f->err, sizeof(f->err));
	else if (f->kind == FILE_SNIFF_JSON)
		rc = read_sniffed_json(f, buf, len, st);
	else
		rc = read_sniffed_pytorch(f, buf, len, st);
	bus_jump = NULL;
	return rc;
}

/*
 * Reads file f: a dump by its name (errors are reported), or one whose
 * content must say it is one (a file that cannot be read, or is too large
 * for a dump, is passed over: 1). A directory is passed over whatever its
 * name. A symbolic link, a FIFO or a device is refused and reported, by
 * any name (fr_dump_open()): it cannot be a dump the daemon or an agent
 * wrote, and a FIFO swapped in would otherwise block the reader for good.
 */
static int read_file(struct dump_file *f)
{
	bool sniff = f->kind != FILE_DUMP;
	const char *buf;
	struct stat st;
	size_t len;
	int fd, rc;

	fd = fr_dump_open(f->path, &st, f->err, sizeof(f->err));
	if (fd == -EISDIR)
		return 1;
	if (fd < 0)
		return sniff && fd != -ELOOP && fd != -EINVAL ? 1 : fd;
	if ((uint64_t)st.st_size > FR_DUMP_FILE_MAX) {
		close(fd);
		if (sniff)
			return 1;
		snprintf(f->err, sizeof(f->err), "%s: larger than a dump may be (1 GiB)", f->path);
		return -EFBIG;
	}
	len = (size_t)st.st_size;
	buf = map_file(fd, len);
	close(fd);
	if (!buf) {
		rc = errno;
		snprintf(f->err, sizeof(f->err), "%s: cannot map: %s", f->path, strerror(rc));
		return sniff ? 1 : -rc;
	}
	rc = parse_mapped(f, buf, len, &st);
	unmap_file(buf, len);
	return rc;
}

static void read_one(struct dump_file *f)
{
	f->t = calloc(1, sizeof(*f->t));
	if (!f->t) {
		f->rc = -ENOMEM;
		return;
	}
	f->rc = read_file(f);
	fr_trace_seal_ops(f->t);
	if (f->rc) {
		free(f->t);
		f->t = NULL;
	}
}

/* One reading thread: the pool it takes files from, its own arena. */
struct reader {
	struct pool *pool;
	struct fr_arena *arena;
};

static void *reader(void *arg)
{
	struct reader *r = arg;
	struct pool *p = r->pool;
	size_t i;

	fr_trace_use_arena(r->arena);
	while ((i = atomic_fetch_add(&p->next, 1)) < p->n)
		read_one(&p->files[i]);
	fr_trace_use_arena(NULL);
	return NULL;
}

/* Reads the n files, each thread's operations into an arena of `arenas`. */
static void read_all(struct dump_file *files, size_t n, struct fr_arena *arenas[READERS_MAX])
{
	pthread_t tids[READERS_MAX - 1];
	struct reader readers[READERS_MAX];
	struct pool p = { files, n, 0 };
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	size_t want = cpus > 1 ? (size_t)cpus : 1;
	size_t started = 0;

	/* No file (a manifest alone, an empty directory): no reader to run,
	 * and readers[0] below would be one that was never set up. */
	if (!n)
		return;
	if (want > READERS_MAX)
		want = READERS_MAX;
	catch_sigbus();
	if (want > n)
		want = n;
	for (size_t i = 0; i < want; i++) {
		readers[i].pool = &p;
		readers[i].arena = arenas[i] = fr_arena_new();
	}
	/* A thread that cannot start leaves its share to the others. */
	while (started + 1 < want &&
	       pthread_create(&tids[started], NULL, reader, &readers[started + 1]) == 0)
		started++;
	reader(&readers[0]);
	for (size_t i = 0; i < started; i++)
		pthread_join(tids[i], NULL);
}

static int cmp_names(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

/*
 * Reads the directory's dumps and manifest into `ev`. Returns 0, or an exit
 * status after printing why. Warnings come in file-name order.
 */
static int read_dir(const char *dir, struct evidence *ev)
{
	struct dirent **names = NULL;
	struct dump_file *files;
	size_t nfiles = 0;
	int n = scandir(dir, &names, NULL, cmp_names);
	int status = 0;

	if (n < 0) {
		fprintf(stderr, PROG ": %s: %s\n", dir, strerror(errno));
		return EXIT_UNUSABLE;
	}
	files = calloc(n ? (size_t)n : 1, sizeof(*files));
	if (!files) {
		status = EXIT_UNUSABLE;
		goto out_nomem;
	}
	/*
	 * What each name is, is looked at only on the descriptor each file is
	 * read from (fr_dump_open()), not here: a file looked at here could
	 * be another (a FIFO, a link) by the time it is opened.
	 */
	for (int i = 0; i < n; i++) {
		const char *name = names[i]->d_name;
		bool json = fnmatch("*.json", name, 0) == 0;
		struct dump_file *f = &files[nfiles];
		char *path;

		f->named_rank = fr_pytorch_rank_from_name(name, &f->rank);
		/* A directory is nothing to read, whatever its name. */
		if (name[0] == '.' || (!json && !f->named_rank) || names[i]->d_type == DT_DIR)
			continue;
		path = join(dir, name);
		if (!path) {
			status = EXIT_UNUSABLE;
			goto out_nomem;
		}
		if (strcmp(name, "manifest.json") == 0) {
			char err[512];
			int rc = fr_manifest_read_file(path, &ev->manifest, err, sizeof(err));

			if (rc == 0) {
				ev->have_manifest = true;
				ev->manifest_path = path;
				continue;
			} else if (rc == -ENOMEM) {
				free(path);
				status = EXIT_UNUSABLE;
				goto out_nomem;
			} else if (rc != -EISDIR) {
				fprintf(stderr, PROG ": %s; going on without the manifest\n",
					err[0] ? err : path);
				ev->bad_manifest = true;
			}
		} else {
			f->path = path;
			f->kind = fnmatch("rank-*.json", name, 0) == 0 ? FILE_DUMP :
				  json ? FILE_SNIFF_JSON : FILE_SNIFF_PYTORCH;
			nfiles++;
			continue;
		}
		free(path);
	}

	read_all(files, nfiles, ev->arenas);
	for (size_t i = 0; i < nfiles; i++) {
		struct dump_file *f = &files[i];

		if (f->rc == -ENOMEM && !status) {
			status = EXIT_UNUSABLE;
			fprintf(stderr, PROG ": out of memory\n");
		} else if (f->rc < 0 && f->rc != -ENOMEM) {
			fprintf(stderr, PROG ": %s; leaving this file out\n",
				f->err[0] ? f->err : f->path);
			ev->nbad++;
		} else if (f->rc == 0 && !status) {
			if (evidence_add(ev, f->t, f->path) < 0) {
				status = EXIT_UNUSABLE;
				fprintf(stderr, PROG ": out of memory\n");
				continue;
			}
			f->t = NULL;
			f->path = NULL;
		}
	}
	goto out_free;

out_nomem:
	fprintf(stderr, PROG ": out of memory\n");
out_free:
	for (size_t i = 0; files && i < nfiles; i++) {
		if (files[i].t) {
			fr_trace_free(files[i].t);
			free(files[i].t);
		}
		free(files[i].path);
	}
	free(files);
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return status;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a;
	uint32_t y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * The job's world size: the manifest's when there is one (the daemon took
 * it from every rank's hello), else the one most dumps state, the larger on
 * a tie. One stray file (from another run, or corrupt) that claims a bigger
 * world must not stretch the job to it. Returns 0 when out of memory.
 */
static uint32_t agreed_world(const struct evidence *ev)
{
	uint32_t *ws;
	uint32_t best = 0;
	size_t bestn = 0;

	if (ev->have_manifest)
		return ev->manifest.world_size;
	ws = malloc((ev->ndumps ? ev->ndumps : 1) * sizeof(*ws));
	if (!ws)
		return 0;
	for (size_t i = 0; i < ev->ndumps; i++)
		ws[i] = ev->dumps[i]->world_size;
	qsort(ws, ev->ndumps, sizeof(*ws), cmp_u32);
	for (size_t i = 0, j; i < ev->ndumps; i = j) {
		for (j = i; j < ev->ndumps && ws[j] == ws[i]; j++)
			;
		/* Ascending: on a tie the later, larger size wins. */
		if (j - i >= bestn) {
			bestn = j - i;
			best = ws[i];
		}
	}
	free(ws);
	return best;
}

/*
 * Whether trace `t` names a rank outside a world of `world` ranks (as its
 * own rank or as a member of a communicator); if so, says which in buf.
 * Such evidence is from another job or corrupt, and the engine would size
 * its arrays by it.
 */
static bool outside_world(const struct fr_trace *t, uint32_t world, char *buf, size_t cap)
{
	if (t->rank >= world) {
		snprintf(buf, cap, "rank %" PRIu32 " is outside the world of %" PRIu32 " ranks",
			 t->rank, world);
		return true;
	}
	for (size_t i = 0; i < t->ncomms; i++) {
		const struct fr_comm *c = &t->comms[i];

		for (uint32_t k = 0; c->members && k < c->size; k++) {
			/* An NCCL rank's dump knows only its own entry. */
			if (c->members[k] < world || c->members[k] == FR_RANK_UNKNOWN)
				continue;
			snprintf(buf, cap, "communicator %s lists rank %" PRIu32 ", outside the "
				 "world of %" PRIu32 " ranks", c->id, c->members[k], world);
			return true;
		}
	}
	return false;
}

/*
 * One piece of evidence per rank: its dump, else the manifest's live view.
 * Evidence outside the job's world is left out with a warning. Fills a
 * newly allocated array (the caller frees the array only; traces stay owned
 * by `ev`). Returns 0, or an exit status after printing why.
 */
static int assemble(struct evidence *ev, const struct fr_trace ***out, size_t *nout,
		    uint32_t *world)
{
	const struct fr_trace **traces = NULL;
	bool *keep = NULL;
	size_t n = 0;
	size_t nmax = ev->ndumps + (ev->have_manifest ? ev->manifest.nranks : 0);
	uint32_t w = agreed_world(ev);
	char why[256];

	traces = calloc(nmax ? nmax : 1, sizeof(*traces));
	keep = calloc(ev->ndumps ? ev->ndumps : 1, sizeof(*keep));
	if (!traces || !keep || !w) {
		fprintf(stderr, PROG ": out of memory\n");
		goto out_unusable;
	}
	for (size_t i = 0; i < ev->ndumps; i++) {
		const struct fr_trace *t = ev->dumps[i];

		if (outside_world(t, w, why, sizeof(why))) {
			fprintf(stderr, PROG ": %s: %s%s; leaving this file out\n", ev->paths[i],
				why, ev->have_manifest ? " (the manifest's)" : "");
			continue;
		}
		keep[i] = true;
		if (t->world_size != w)
			fprintf(stderr, PROG ": %s: world_size %" PRIu32 " is not the job's %"
				PRIu32 "\n", ev->paths[i], t->world_size, w);
		if (ev->have_manifest && t->job[0] && ev->manifest.job[0] &&
		    strcmp(t->job, ev->manifest.job) != 0)
			fprintf(stderr, PROG ": %s: job \"%s\" is not the manifest's \"%s\"\n",
				ev->paths[i], t->job, ev->manifest.job);
	}
	/* Two files for one rank mean a mixed-up directory. */
	for (size_t i = 0; i < ev->ndumps; i++) {
		for (size_t k = 0; keep[i] && k < i; k++) {
			if (keep[k] && ev->dumps[k]->rank == ev->dumps[i]->rank) {
				fprintf(stderr, PROG ": %s: rank %" PRIu32 " is dumped twice (also "
					"in %s)\n", ev->paths[i], ev->dumps[i]->rank, ev->paths[k]);
				goto out_unusable;
			}
		}
		if (keep[i])
			traces[n++] = ev->dumps[i];
	}
	for (size_t i = 0; ev->have_manifest && i < ev->manifest.nranks; i++) {
		struct fr_trace *live = &ev->manifest.ranks[i];
		bool dumped = false;

		if (outside_world(live, w, why, sizeof(why))) {
			fprintf(stderr, PROG ": %s: ranks[%zu]: %s; leaving it out\n",
				ev->manifest_path, i, why);
			continue;
		}
		for (size_t k = 0; k < ev->ndumps && !dumped; k++)
			dumped = keep[k] && ev->dumps[k]->rank == live->rank;
		if (dumped)
			continue;
		/* It answered, but its file is gone or unreadable: what remains
		 * is the daemon's view of it, without stacks. */
		if (live->status == FR_RANK_DUMPED)
			live->status = FR_RANK_LIVE;
		traces[n++] = live;
	}
	if (!n) {
		fprintf(stderr, PROG ": no usable dump (every one was left out, see above)\n");
		goto out_unusable;
	}
	free(keep);
	*out = traces;
	*nout = n;
	*world = w;
	return 0;

out_unusable:
	free(keep);
	free(traces);
	return EXIT_UNUSABLE;
}

/* One rank's list of one communicator, for warn_member_conflicts(). */
struct comm_ref {
	const char *id;
	uint32_t rank;
	const struct fr_comm *c;
};

static int cmp_comm_ref(const void *a, const void *b)
{
	const struct comm_ref *x = a;
	const struct comm_ref *y = b;
	int c = strcmp(x->id, y->id);

	if (c)
		return c;
	return (x->rank > y->rank) - (x->rank < y->rank);
}

/*
 * Warns about one communicator's lists (`refs`, ascending ranks): a size or
 * a known entry that differs from what a lower rank said. The engine merges
 * them the same way, lowest rank first, filling entries unknown so far, and
 * keeps the first value; a person should know that the dumps disagree,
 * which usually means two runs' dumps in one directory. Returns false when
 * out of memory.
 */
static bool warn_comm_conflict(const struct comm_ref *refs, size_t n)
{
	const struct fr_comm *first = refs[0].c;
	uint32_t *val = malloc(first->size * sizeof(*val));
	uint32_t *from = malloc(first->size * sizeof(*from));
	bool warned = false;

	if (!val || !from) {
		free(val);
		free(from);
		return false;
	}
	memcpy(val, first->members, first->size * sizeof(*val));
	for (uint32_t k = 0; k < first->size; k++)
		from[k] = refs[0].rank;
	for (size_t i = 1; i < n && !warned; i++) {
		const struct fr_comm *c = refs[i].c;

		if (c->size != first->size) {
			fprintf(stderr, PROG ": communicator %s: rank %" PRIu32 "'s evidence lists %"
				PRIu32 " members where rank %" PRIu32 "'s lists %" PRIu32
				"; using rank %" PRIu32 "'s\n", refs[0].id, refs[i].rank, c->size,
				refs[0].rank, first->size, refs[0].rank);
			warned = true;
			continue;
		}
		for (uint32_t k = 0; k < c->size && !warned; k++) {
			if (c->members[k] == FR_RANK_UNKNOWN || c->members[k] == val[k])
				continue;
			if (val[k] == FR_RANK_UNKNOWN) {
				val[k] = c->members[k];
				from[k] = refs[i].rank;
				continue;
			}
			fprintf(stderr, PROG ": communicator %s: rank %" PRIu32 "'s evidence has "
				"global rank %" PRIu32 " as member %" PRIu32 " where rank %" PRIu32
				"'s has %" PRIu32 "; using rank %" PRIu32 "'s\n", refs[0].id,
				refs[i].rank, c->members[k], k, from[k], val[k], from[k]);
			warned = true;
		}
	}
	free(val);
	free(from);
	return true;
}

/*
 * The correlation engine merges each communicator's member lists across
 * ranks (an NCCL rank's dump knows only its own entry); this says, one line
 * per communicator, where the lists disagree. Out of memory only costs the
 * warnings.
 */
static void warn_member_conflicts(const struct fr_trace *const *traces, size_t n)
{
	struct comm_ref *refs;
	size_t nrefs = 0;
	size_t total = 0;

	for (size_t i = 0; i < n; i++)
		if (traces[i]->status != FR_RANK_MISSING)
			total += traces[i]->ncomms;
	if (!total)
		return;
	refs = malloc(total * sizeof(*refs));
	if (!refs)
		return;
	for (size_t i = 0; i < n; i++) {
		const struct fr_trace *t = traces[i];

		for (size_t j = 0; t->status != FR_RANK_MISSING && j < t->ncomms; j++) {
			/* A list without members says nothing to disagree with. */
			if (!t->comms[j].members || !t->comms[j].size)
				continue;
			refs[nrefs++] = (struct comm_ref){ t->comms[j].id, t->rank, &t->comms[j] };
		}
	}
	qsort(refs, nrefs, sizeof(*refs), cmp_comm_ref);
	for (size_t i = 0, j; i < nrefs; i = j) {
		for (j = i + 1; j < nrefs && strcmp(refs[j].id, refs[i].id) == 0; j++)
			;
		if (j - i > 1 && !warn_comm_conflict(&refs[i], j - i))
			break;
	}
	free(refs);
}

static int report(const struct fr_trace *const *traces, size_t n, uint32_t world, bool json)
{
	struct fr_verdict v;
	int status;
	int rc;

	warn_member_conflicts(traces, n);
	rc = fr_correlate(traces, n, world, &v);
	if (rc < 0) {
		fprintf(stderr, PROG ": correlating: %s\n", strerror(-rc));
		return EXIT_UNUSABLE;
	}
	/* No rank dumped (every one frozen or gone): whoever the daemon saw
	 * go silent is the finding, even with nothing in flight. */
	rc = fr_verdict_name_silent(&v, traces, n);
	if (rc < 0) {
		fprintf(stderr, PROG ": correlating: %s\n", strerror(-rc));
		fr_verdict_free(&v);
		return EXIT_UNUSABLE;
	}
	status = v.kind == FR_VERDICT_OK ? EXIT_VERDICT_OK : EXIT_PROBLEM;
	if (json) {
		json_t *o = fr_verdict_to_json(&v);

		if (!o || json_dumpf(o, stdout, JSON_INDENT(2)) < 0) {
			fprintf(stderr, PROG ": cannot write the verdict as JSON\n");
			status = EXIT_UNUSABLE;
		}
		fputc('\n', stdout);
		json_decref(o);
	} else {
		fr_verdict_print(stdout, &v, traces, n);
	}
	fr_verdict_free(&v);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, PROG ": writing the report: %s\n", strerror(errno));
		return EXIT_UNUSABLE;
	}
	return status;
}

/* ---- --comm: one communicator only ---- */

/* How many known ids the reply to an unknown --comm lists. */
#define KNOWN_COMMS_SHOWN 10

/* Every trace of `ev`, dumps first, then the manifest's live views. */
static size_t evidence_count(const struct evidence *ev)
{
	return ev->ndumps + (ev->have_manifest ? ev->manifest.nranks : 0);
}

static struct fr_trace *evidence_trace(struct evidence *ev, size_t i)
{
	return i < ev->ndumps ? ev->dumps[i] : &ev->manifest.ranks[i - ev->ndumps];
}

/* Whether `t` names communicator `id`, in its list or in an operation. */
static bool trace_names_comm(const struct fr_trace *t, const char *id)
{
	if (fr_trace_comm(t, id))
		return true;
	for (size_t i = 0; i < t->nops; i++)
		if (strcmp(t->ops[i].comm, id) == 0)
			return true;
	return false;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/*
 * The reply to a --comm that no evidence names: the ids the evidence does
 * name, sorted, the first KNOWN_COMMS_SHOWN and how many more, so that a
 * typo or a PyTorch group number is easy to put right. Out of memory only
 * costs the list.
 */
static void say_known_comms(struct evidence *ev, const char *id, const char *dir)
{
	const char **ids;
	size_t total = 0, n = 0, uniq = 0;

	fprintf(stderr, PROG ": %s: no evidence names communicator \"%s\"", dir, id);
	for (size_t i = 0; i < evidence_count(ev); i++)
		total += evidence_trace(ev, i)->ncomms + evidence_trace(ev, i)->nops;
	ids = malloc((total ? total : 1) * sizeof(*ids));
	if (!ids) {
		fputc('\n', stderr);
		return;
	}
	for (size_t i = 0; i < evidence_count(ev); i++) {
		const struct fr_trace *t = evidence_trace(ev, i);

		for (size_t j = 0; j < t->ncomms; j++)
			ids[n++] = t->comms[j].id;
		/* Runs of operations on one communicator are the rule: keep
		 * one of each run. */
		for (size_t j = 0; j < t->nops; j++)
			if (t->ops[j].comm[0] && (!j || strcmp(t->ops[j].comm, t->ops[j - 1].comm)))
				ids[n++] = t->ops[j].comm;
	}
	qsort(ids, n, sizeof(*ids), cmp_str);
	for (size_t i = 0; i < n; i++)
		if (!uniq || strcmp(ids[i], ids[uniq - 1]) != 0)
			ids[uniq++] = ids[i];
	if (!uniq)
		fprintf(stderr, " (it names no communicator at all)");
	for (size_t i = 0; i < uniq && i < KNOWN_COMMS_SHOWN; i++)
		fprintf(stderr, "%s%s", i ? ", " : "; known communicators: ", ids[i]);
	if (uniq > KNOWN_COMMS_SHOWN)
		fprintf(stderr, ", and %zu more", uniq - KNOWN_COMMS_SHOWN);
	fputc('\n', stderr);
	free(ids);
}

/*
 * Keeps communicator `id` and the operations on it in `t`, and no other
 * communicator or operation, so that the engine correlates that
 * communicator alone. The member lists dropped are freed; the arrays keep
 * their allocation, which fr_trace_free() releases as before.
 */
static void trace_keep_comm(struct fr_trace *t, const char *id)
{
	size_t n = 0;

	for (size_t i = 0; i < t->ncomms; i++) {
		if (strcmp(t->comms[i].id, id) == 0)
			t->comms[n++] = t->comms[i];
		else
			free(t->comms[i].members);
	}
	t->ncomms = n;
	n = 0;
	for (size_t i = 0; i < t->nops; i++)
		if (strcmp(t->ops[i].comm, id) == 0)
			t->ops[n++] = t->ops[i];
	t->nops = n;
}

/*
 * --comm: restricts every trace of `ev` to communicator `id`. Returns 0, or
 * an exit status after saying that no evidence names it.
 */
static int restrict_to_comm(struct evidence *ev, const char *id, const char *dir)
{
	bool named = false;

	for (size_t i = 0; i < evidence_count(ev) && !named; i++)
		named = trace_names_comm(evidence_trace(ev, i), id);
	if (!named) {
		say_known_comms(ev, id, dir);
		return EXIT_UNUSABLE;
	}
	for (size_t i = 0; i < evidence_count(ev); i++)
		trace_keep_comm(evidence_trace(ev, i), id);
	return 0;
}

/* ---- --rank: one rank's evidence ---- */

/* No rank reaches this: FORMAT.md caps a dump's world_size at 2^24. */
#define RANK_ARG_MAX ((1u << 24) - 1)

/*
 * Reads --rank's value, a global rank in decimal. Returns false after
 * saying what is wrong with it.
 */
static bool parse_rank(const char *s, uint32_t *out)
{
	const char *digits = s[0] == '-' ? s + 1 : s;
	uint64_t v = 0;

	if (!digits[0] || strspn(digits, "0123456789") != strlen(digits)) {
		fprintf(stderr, PROG ": --rank '%s': not a rank (a global rank is a number: "
			"0, 1, ...)\n", s);
		return false;
	}
	if (digits != s) {
		fprintf(stderr, PROG ": --rank '%s': a rank is not negative\n", s);
		return false;
	}
	for (const char *p = digits; *p && v <= RANK_ARG_MAX; p++)
		v = v * 10 + (uint64_t)(*p - '0');
	if (v > RANK_ARG_MAX) {
		fprintf(stderr, PROG ": --rank '%s': too large (a rank is below %u, the "
			"largest world a dump may state)\n", s, RANK_ARG_MAX + 1);
		return false;
	}
	*out = (uint32_t)v;
	return true;
}

/* A table cell: a communicator id (63 bytes) is the widest. */
#define CELL_MAX 80
#define COLS_MAX 12

/* A table printed in two passes: widen() over every row, then row(). */
struct table {
	size_t ncols;
	size_t width[COLS_MAX];
	bool right[COLS_MAX];      /* numbers align right */
};

static void table_widen(struct table *tb, char (*cells)[CELL_MAX])
{
	for (size_t i = 0; i < tb->ncols; i++) {
		size_t n = strlen(cells[i]);

		if (n > tb->width[i])
			tb->width[i] = n;
	}
}

static void table_row(FILE *out, const struct table *tb, char (*cells)[CELL_MAX])
{
	char line[COLS_MAX * (CELL_MAX + 2) + 1];
	size_t len = 0;

	for (size_t i = 0; i < tb->ncols; i++)
		len += (size_t)sprintf(line + len, tb->right[i] ? "  %*s" : "  %-*s",
				       (int)tb->width[i], cells[i]);
	/* Empty cells at the end leave no trailing blanks. */
	while (len && line[len - 1] == ' ')
		len--;
	line[len] = '\0';
	fprintf(out, "%s\n", line);
}

/* "2023-11-14 22:13:20.123 UTC", or "unknown" for 0. */
static void time_text(char *buf, size_t cap, uint64_t ns)
{
	time_t s = (time_t)(ns / 1000000000u);
	char day[32];
	struct tm tm;

	if (!ns || !gmtime_r(&s, &tm) || !strftime(day, sizeof(day), "%Y-%m-%d %H:%M:%S", &tm)) {
		snprintf(buf, cap, "unknown");
		return;
	}
	snprintf(buf, cap, "%s.%03u UTC", day, (unsigned)(ns % 1000000000u / 1000000u));
}

/* When `at_ns` was, from the reference time: "-12.345s"; "?" if unknown. */
static void age_text(char *buf, size_t cap, uint64_t at_ns, uint64_t ref_ns)
{
	if (!at_ns || !ref_ns)
		snprintf(buf, cap, "?");
	else if (at_ns <= ref_ns)
		snprintf(buf, cap, "-%.3fs", (double)(ref_ns - at_ns) / 1e9);
	else
		snprintf(buf, cap, "+%.3fs", (double)(at_ns - ref_ns) / 1e9);
}

/* "1.250s", "0.900ms", "12.0us": collectives span microseconds to hours. */
static void span_text(char *buf, size_t cap, uint64_t ns)
{
	if (ns >= 1000000000u)
		snprintf(buf, cap, "%.3fs", (double)ns / 1e9);
	else if (ns >= 1000000u)
		snprintf(buf, cap, "%.3fms", (double)ns / 1e6);
	else
		snprintf(buf, cap, "%.1fus", (double)ns / 1e3);
}

static bool op_is_p2p(const struct fr_op *op)
{
	return op->is_p2p || op->type == FR_OP_SEND || op->type == FR_OP_RECV ||
	       op->type == FR_OP_SENDRECV;
}

/* The state as the report names it: a GPU operation in flight is
 * "enqueued" until the device reaches it, then "started". */
static const char *op_state_text(const struct fr_op *op)
{
	if (op->captured)
		return "captured";
	if (op->gpu && op->state != FR_STATE_COMPLETED)
		return op->started ? "started" : "enqueued";
	return fr_state_name(op->state);
}

/* What --rank shows: the rank's trace, and every rank's, to name members. */
struct rank_view {
	const struct fr_trace *t;
	const struct fr_trace *const *all;
	size_t nall;
};

/*
 * The global rank of member `k` of communicator `id` as the lowest rank
 * whose evidence knows it says (the engine merges member lists the same
 * way), or FR_RANK_UNKNOWN: an NCCL rank knows only its own entry.
 */
static uint32_t member_named(const struct rank_view *v, const char *id, uint32_t k)
{
	uint32_t named = FR_RANK_UNKNOWN;
	uint32_t from = FR_RANK_UNKNOWN;

	for (size_t i = 0; i < v->nall; i++) {
		const struct fr_comm *c = fr_trace_comm(v->all[i], id);

		if (!c || !c->members || k >= c->size || c->members[k] == FR_RANK_UNKNOWN ||
		    v->all[i]->rank >= from)
			continue;
		named = c->members[k];
		from = v->all[i]->rank;
	}
	return named;
}

/*
 * "peer 2", "root 1", "peer any" (a receive from any source), "-" for
 * neither; "peer c1" is communicator rank 1, whose global rank no evidence
 * names. Returns whether it wrote such a "c" form.
 */
static bool peer_text(char *buf, size_t cap, const struct rank_view *v, const struct fr_op *op)
{
	bool p2p = op_is_p2p(op);
	const char *what = p2p ? "peer" : "root";
	int32_t global = p2p ? op->peer : op->root;
	uint32_t named;

	if (!p2p && !fr_op_is_rooted(op->type)) {
		snprintf(buf, cap, "-");
		return false;
	}
	if (global >= 0) {
		snprintf(buf, cap, "%s %" PRId32, what, global);
		return false;
	}
	if (op->peer_in_comm < 0) {
		snprintf(buf, cap, "%s %s", what, p2p && op->type != FR_OP_SEND ? "any" : "?");
		return false;
	}
	named = member_named(v, op->comm, (uint32_t)op->peer_in_comm);
	if (named != FR_RANK_UNKNOWN) {
		snprintf(buf, cap, "%s %" PRIu32, what, named);
		return false;
	}
	snprintf(buf, cap, "%s c%" PRId32, what, op->peer_in_comm);
	return true;
}

enum {
	E_RECORD, E_COMM, E_SEQ, E_OP, E_STATE, E_COUNT, E_DTYPE, E_PEER, E_ENTERED,
	E_DURATION, E_NOTES, E__COLS
};

static const char *const entry_heads[E__COLS] = {
	"record", "comm", "seq", "op", "state", "count", "dtype", "peer/root", "entered",
	"duration", "",
};

_Static_assert(E__COLS <= COLS_MAX, "the entries table has too many columns");

/* One entry's cells; returns whether its peer or root is a "c" form. */
static bool entry_cells(char (*c)[CELL_MAX], const struct rank_view *v, const struct fr_op *op)
{
	const struct fr_trace *t = v->t;
	bool cform;

	snprintf(c[E_RECORD], CELL_MAX, "%" PRIu64, op->record_id);
	snprintf(c[E_COMM], CELL_MAX, "%s", op->comm[0] ? op->comm : "?");
	snprintf(c[E_SEQ], CELL_MAX, "%" PRIu64, op->seq);
	snprintf(c[E_OP], CELL_MAX, "%s", fr_op_name(op->type));
	snprintf(c[E_STATE], CELL_MAX, "%s", op_state_text(op));
	snprintf(c[E_COUNT], CELL_MAX, "%" PRIu64, op->count);
	snprintf(c[E_DTYPE], CELL_MAX, "%s", op->dtype[0] ? op->dtype : "?");
	cform = peer_text(c[E_PEER], CELL_MAX, v, op);
	age_text(c[E_ENTERED], CELL_MAX, op->t_entered_ns, t->time_ns);
	if (op->state == FR_STATE_COMPLETED && op->t_entered_ns && op->t_completed_ns >= op->t_entered_ns)
		span_text(c[E_DURATION], CELL_MAX, op->t_completed_ns - op->t_entered_ns);
	else
		snprintf(c[E_DURATION], CELL_MAX, "-");
	snprintf(c[E_NOTES], CELL_MAX, "%s%s", op->nonblocking ? "nonblocking" : "",
		 op->waited ? ", waited on" : "");
	return cform;
}

static void print_rank_entries(FILE *out, const struct rank_view *v, const char *comm)
{
	const struct fr_trace *t = v->t;
	struct table tb = { .ncols = E__COLS };
	char cells[E__COLS][CELL_MAX];
	bool cform = false;

	if (!t->nops) {
		fprintf(out, "\nEntries: none%s%s in its evidence\n", comm ? " on " : "",
			comm ? comm : "");
		return;
	}
	fprintf(out, "\nEntries%s%s (%zu, oldest first; entered: before the %s):\n",
		comm ? " on " : "", comm ? comm : "", t->nops,
		t->status == FR_RANK_DUMPED ? "dump" : "daemon's view");
	tb.right[E_RECORD] = tb.right[E_SEQ] = tb.right[E_COUNT] = true;
	tb.right[E_ENTERED] = tb.right[E_DURATION] = true;
	for (size_t i = 0; i < E__COLS; i++)
		snprintf(cells[i], CELL_MAX, "%s", entry_heads[i]);
	table_widen(&tb, cells);
	for (size_t i = 0; i < t->nops; i++) {
		cform |= entry_cells(cells, v, &t->ops[i]);
		table_widen(&tb, cells);
	}
	for (size_t i = 0; i < E__COLS; i++)
		snprintf(cells[i], CELL_MAX, "%s", entry_heads[i]);
	table_row(out, &tb, cells);
	for (size_t i = 0; i < t->nops; i++) {
		entry_cells(cells, v, &t->ops[i]);
		table_row(out, &tb, cells);
	}
	if (cform)
		fprintf(out, "  (cN: communicator rank N, whose global rank no evidence names)\n");
}

enum { C_ID, C_DESC, C_RANK, C_SIZE, C_ENTERED, C_COMPLETED, C__COLS };

static const char *const comm_heads[C__COLS] = {
	"communicator", "desc", "its rank", "size", "last entered", "last completed",
};

static void comm_cells(char (*c)[CELL_MAX], const struct fr_comm *cm)
{
	snprintf(c[C_ID], CELL_MAX, "%s", cm->id);
	snprintf(c[C_DESC], CELL_MAX, "%s", cm->desc[0] ? cm->desc : "-");
	if (cm->rank == FR_RANK_UNKNOWN)
		snprintf(c[C_RANK], CELL_MAX, "?");
	else
		snprintf(c[C_RANK], CELL_MAX, "%" PRIu32, cm->rank);
	snprintf(c[C_SIZE], CELL_MAX, "%" PRIu32, cm->size);
	snprintf(c[C_ENTERED], CELL_MAX, "#%" PRIu64, cm->last_entered);
	snprintf(c[C_COMPLETED], CELL_MAX, "#%" PRIu64, cm->last_completed);
}

static void print_rank_comms(FILE *out, const struct fr_trace *t, const char *comm)
{
	struct table tb = { .ncols = C__COLS };
	char cells[C__COLS][CELL_MAX];

	if (!t->ncomms && comm) {
		fprintf(out, "\nCommunicators: its evidence does not list %s\n", comm);
		return;
	}
	if (!t->ncomms) {
		fprintf(out, "\nCommunicators: none in its evidence\n");
		return;
	}
	fprintf(out, "\nCommunicators (%zu):\n", t->ncomms);
	tb.right[C_RANK] = tb.right[C_SIZE] = tb.right[C_ENTERED] = tb.right[C_COMPLETED] = true;
	for (size_t i = 0; i < C__COLS; i++)
		snprintf(cells[i], CELL_MAX, "%s", comm_heads[i]);
	table_widen(&tb, cells);
	for (size_t i = 0; i < t->ncomms; i++) {
		comm_cells(cells, &t->comms[i]);
		table_widen(&tb, cells);
	}
	for (size_t i = 0; i < C__COLS; i++)
		snprintf(cells[i], CELL_MAX, "%s", comm_heads[i]);
	table_row(out, &tb, cells);
	for (size_t i = 0; i < t->ncomms; i++) {
		comm_cells(cells, &t->comms[i]);
		table_row(out, &tb, cells);
	}
}

/*
 * Each thread's stack, innermost frame first, as the report prints a
 * culprit's. The thread that wrote the dump is the agent's own and is left
 * out, as there: it says nothing about the application.
 */
static void print_rank_stacks(FILE *out, const struct fr_trace *t)
{
	size_t shown = 0;

	fprintf(out, "\nStacks:\n");
	for (size_t i = 0; i < t->nthreads; i++) {
		const struct fr_thread *th = &t->threads[i];

		if (th->current)
			continue;
		shown++;
		fr_thread_print(out, th);
	}
	if (!shown)
		fprintf(out, "  none in its evidence%s\n", t->status != FR_RANK_DUMPED ?
			" (the daemon's live view has none)" : "");
}

static void print_rank_head(FILE *out, const struct fr_trace *t, const char *from)
{
	bool dumped = t->status == FR_RANK_DUMPED;
	char when[64];

	time_text(when, sizeof(when), t->time_ns);
	fprintf(out, "Rank %" PRIu32 " of %" PRIu32 "\n", t->rank, t->world_size);
	/* A PyTorch dump names neither host nor pid. */
	fprintf(out, "  host:      %s", t->host[0] ? t->host : "unknown");
	if (t->pid)
		fprintf(out, ", pid %" PRIu32, t->pid);
	fputc('\n', out);
	if (dumped)
		fprintf(out, "  status:    dumped (its own dump, %s)\n", from);
	else
		fprintf(out, "  status:    %s (no dump: the daemon's live view of it, in %s)\n",
			fr_rank_status_name(t->status), from);
	fprintf(out, "  job:       %s\n", t->job[0] ? t->job : "unknown");
	fprintf(out, "  comm lib:  %s\n", t->comm_lib[0] ? t->comm_lib : "unknown");
	fprintf(out, "  %s %s\n", dumped ? "dumped at:" : "viewed at:", when);
	if (t->incident[0])
		fprintf(out, "  incident:  %s\n", t->incident);
	if (t->reason[0])
		fprintf(out, "  reason:    %s\n", t->reason);
	if (t->dropped)
		fprintf(out, "  dropped:   %" PRIu64 " older entries lost to ring wrap\n",
			t->dropped);
	else
		fprintf(out, "  dropped:   none\n");
}

/*
 * --rank: prints the evidence of global rank `rank` among `traces` (one per
 * rank, assembled from `ev`), for a person or as a dump object. `comm` is
 * --comm's communicator or NULL. Returns an exit status.
 */
static int show_rank(const struct evidence *ev, const struct fr_trace *const *traces,
		     size_t n, uint32_t world, uint32_t rank, bool json, const char *dir,
		     const char *comm)
{
	const struct fr_trace *t = NULL;
	struct rank_view view;
	const char *from;

	for (size_t i = 0; i < n && !t; i++)
		if (traces[i]->rank == rank)
			t = traces[i];
	view = (struct rank_view){ t, traces, n };
	if (!t || t->status == FR_RANK_MISSING) {
		fprintf(stderr, PROG ": %s: no evidence of rank %" PRIu32 " (", dir, rank);
		if (rank >= world)
			fprintf(stderr, "the job has %" PRIu32 " ranks, 0 to %" PRIu32 ")\n", world,
				world - 1);
		else if (t)
			fprintf(stderr, "no dump, and the manifest lists it as missing)\n");
		else
			fprintf(stderr, "no dump of it%s)\n", ev->have_manifest ?
				", and no view of it in the manifest" : "");
		return EXIT_UNUSABLE;
	}
	from = ev->manifest_path;
	for (size_t i = 0; i < ev->ndumps; i++)
		if (ev->dumps[i] == t)
			from = ev->paths[i];
	if (json) {
		json_t *o = fr_dump_to_json(t);

		if (!o || json_dumpf(o, stdout, JSON_INDENT(2)) < 0) {
			fprintf(stderr, PROG ": cannot write rank %" PRIu32 "'s evidence as JSON\n",
				rank);
			json_decref(o);
			return EXIT_UNUSABLE;
		}
		fputc('\n', stdout);
		json_decref(o);
	} else {
		print_rank_head(stdout, t, from ? from : "?");
		print_rank_comms(stdout, t, comm);
		print_rank_entries(stdout, &view, comm);
		print_rank_stacks(stdout, t);
	}
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, PROG ": writing rank %" PRIu32 "'s evidence: %s\n", rank,
			strerror(errno));
		return EXIT_UNUSABLE;
	}
	return EXIT_VERDICT_OK;
}

/* ---- --live: the verdict of a running job, from the daemon ---- */

/*
 * --live URL: the daemon's live verdict, printed as it sends it. `filters`
 * says whether --rank or --comm was given, `npaths` how many PATHs: the
 * daemon judges the whole job, so neither goes with --live. Returns an
 * exit status.
 */
static int analyze_live(const char *url, bool json, bool filters, int npaths)
{
	int rc;

	if (filters || npaths) {
		fprintf(stderr, PROG ": --live takes no %s\nUsage: " SYNOPSIS_LIVE "\n",
			npaths ? "PATH (the daemon's live view is the evidence)" :
				 "--rank or --comm (the daemon judges the whole job)");
		return EXIT_UNUSABLE;
	}
	rc = live_analyze(PROG, url, json, stdout);
	if (rc < 0)
		return EXIT_UNUSABLE;
	return rc == 0 ? EXIT_VERDICT_OK : EXIT_PROBLEM;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "rank", required_argument, NULL, 'r' },
		{ "comm", required_argument, NULL, 'c' },
		{ "live", required_argument, NULL, 'l' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	/* Static, so that what it holds at exit is still reachable (below). */
	static struct evidence ev;
	const struct fr_trace **traces = NULL;
	size_t ntraces = 0;
	uint32_t world = 0;
	struct stat st;
	const char *comm = NULL;
	const char *live = NULL;
	bool json = false;
	bool by_rank = false;
	uint32_t rank = 0;
	int status;
	int c;

	/*
	 * Each reading thread parses file after file into scratch memory of the
	 * same sizes (a pickle's objects, tens of MiB): kept by malloc between
	 * files, it is faulted in once, where returning it to the kernel after
	 * each file made every file fault it in again (three times the time).
	 */
	mallopt(M_MMAP_THRESHOLD, 32 << 20);
	mallopt(M_TRIM_THRESHOLD, 1 << 30);
	opterr = 0;
	/* The leading ':' tells a missing value (':') from an unknown option. */
	while ((c = getopt_long(argc, argv, ":hV", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'r':
			if (!parse_rank(optarg, &rank))
				return EXIT_UNUSABLE;
			by_rank = true;
			break;
		case 'c':
			if (!optarg[0]) {
				fprintf(stderr, PROG ": --comm needs a communicator id\n");
				return EXIT_UNUSABLE;
			}
			comm = optarg;
			break;
		case 'l':
			live = optarg;
			break;
		case 'h':
			fputs(usage_text, stdout);
			return 0;
		case 'V':
			printf(PROG " (flightrec) %s, reads dump format %d.x\n", FLIGHTREC_VERSION,
			       FR_DUMP_VERSION_MAJOR);
			return 0;
		case ':':
			fprintf(stderr, PROG ": option '%s' needs a value\n", argv[optind - 1]);
			fprintf(stderr, "Usage: " SYNOPSIS "\n");
			return EXIT_UNUSABLE;
		default:
			fprintf(stderr, PROG ": bad option '%s'\n", argv[optind - 1]);
			fprintf(stderr, "Try '" PROG " --help'.\n");
			return EXIT_UNUSABLE;
		}
	}
	if (live)
		return analyze_live(live, json, by_rank || comm, argc - optind);
	if (argc - optind != 1) {
		fprintf(stderr, PROG ": %s\nUsage: " SYNOPSIS "\n",
			argc - optind ? "one PATH only" : "missing PATH (an incident directory)");
		return EXIT_UNUSABLE;
	}
	if (stat(argv[optind], &st) < 0) {
		fprintf(stderr, PROG ": %s: %s\n", argv[optind], strerror(errno));
		return EXIT_UNUSABLE;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, PROG ": %s: not a directory (give the incident directory "
			"that holds the rank-*.json dumps)\n", argv[optind]);
		return EXIT_UNUSABLE;
	}

	memset(&ev, 0, sizeof(ev));
	status = read_dir(argv[optind], &ev);
	if (status)
		goto out_free;
	if (!ev.ndumps && !(ev.have_manifest && ev.manifest.nranks)) {
		fprintf(stderr, PROG ": %s: no usable dump (%s%s)\n", argv[optind],
			ev.nbad ? "every dump file was left out, see above" :
				  "no rank-*.json or flightrec dump in it",
			ev.bad_manifest ? ", and its manifest.json is unusable, see above" :
			ev.have_manifest ? ", and its manifest.json lists no rank" : "");
		status = EXIT_UNUSABLE;
		goto out_free;
	}
	if (!ev.ndumps)
		fprintf(stderr, PROG ": %s: no rank dumped; judging from the daemon's live view "
			"in manifest.json only\n", argv[optind]);
	status = assemble(&ev, &traces, &ntraces, &world);
	if (status)
		goto out_free;
	/* (The traces are ev's, to change: assemble() only picked them.) */
	if (fr_traces_split_comms((struct fr_trace *const *)traces, ntraces, stderr, PROG) < 0) {
		fprintf(stderr, PROG ": out of memory\n");
		status = EXIT_UNUSABLE;
		goto out_free;
	}
	if (comm) {
		status = restrict_to_comm(&ev, comm, argv[optind]);
		if (status)
			goto out_free;
	}
	if (by_rank)
		status = show_rank(&ev, traces, ntraces, world, rank, json, argv[optind], comm);
	else
		status = report(traces, ntraces, world, json);
out_free:
	/*
	 * The evidence of a large incident is hundreds of megabytes in
	 * thousands of blocks: the exit returns them at once, where freeing
	 * them one by one cost a tenth of a second of unmapping.
	 */
	free(traces);
	return status;
}
