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
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "../dumps/correlate.h"
#include "../dumps/dump.h"
#include "../dumps/pickle.h"
#include "../dumps/pytorch.h"
#include "../include/flightrec.h"


#define PROG "fr-analyze"

/* A *.json file bigger than this that is not named rank-*.json is not read. */
#define SNIFF_MAX (1ll << 30)

enum {
	EXIT_VERDICT_OK = 0,
	EXIT_PROBLEM = 1,
	EXIT_UNUSABLE = 2,
};

static const char usage_text[] =
	"Usage: " PROG " [--json] PATH\n"
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
	"state, and a rank without a dump counts as missing.\n"
	"\n"
	"A dump that cannot be read (malformed, unknown format version, I/O error)\n"
	"is reported on stderr with its file name and left out: that rank is then\n"
	"treated as having no dump, so that one lost file does not hide the verdict.\n"
	"So is a dump of a rank outside that world size, or naming such a rank.\n"
	"Two dumps of the same rank are an error.\n"
	"\n"
	"Options:\n"
	"  --json      print the verdict as JSON (the contract documented in the\n"
	"              README) instead of the report for a person\n"
	"  -h, --help     print this help and exit\n"
	"  -V, --version  print the version and exit\n"
	"\n"
	"Exit status:\n"
	"  0  no problem found (nothing in flight, no mismatch)\n"
	"  1  a problem was named: hang, mismatch or deadlock\n"
	"  2  bad usage, or no usable evidence (no dump could be read, PATH is not\n"
	"     a readable directory, two dumps of one rank)\n";

/* Everything read from the directory: owned traces and the manifest. */
struct evidence {
	struct fr_trace **dumps;   /* each owned */
	char **paths;              /* the file each dump came from, owned */
	size_t ndumps;
	size_t cap;
	bool have_manifest;
	struct fr_manifest manifest;
	char *manifest_path;       /* owned, when have_manifest */
	size_t nbad;               /* dump files left out */
};

static void evidence_free(struct evidence *ev)
{
	for (size_t i = 0; i < ev->ndumps; i++) {
		fr_trace_free(ev->dumps[i]);
		free(ev->dumps[i]);
		free(ev->paths[i]);
	}
	free(ev->dumps);
	free(ev->paths);
	if (ev->have_manifest)
		fr_manifest_free(&ev->manifest);
	free(ev->manifest_path);
	memset(ev, 0, sizeof(*ev));
}

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
 * Parsing JSON dominates the time to analyze a large job (a 1024-rank
 * incident is over a gigabyte of JSON), so the files are read by a pool of
 * threads. The reader shares no state between calls.
 */
struct pool {
	struct dump_file *files;
	size_t n;
	atomic_size_t next;
};

#define READERS_MAX 16

static uint64_t mtime_ns(const struct stat *st)
{
	return (uint64_t)st->st_mtim.tv_sec * 1000000000u + (uint64_t)st->st_mtim.tv_nsec;
}

/*
 * Reads a *.json file not named rank-*.json into f->t when it is a dump:
 * only its content says so, our "format" or PyTorch's dump shape. Anything
 * else in the directory (notes, other tools' output, files too big to be a
 * dump, text that is not JSON) is passed over in silence (1). The file is
 * parsed once, and the parsed document is what the dump is read from.
 */
static int read_sniffed_json(struct dump_file *f, int fd, const struct stat *st)
{
	json_error_t je;
	const json_t *format;
	json_t *root;
	int rc = 1;

	root = json_loadfd(fd, JSON_REJECT_DUPLICATES, &je);
	if (!root)
		return json_error_code(&je) == json_error_out_of_memory ? -ENOMEM : 1;
	format = json_object_get(root, "format");
	if (json_is_string(format) && strcmp(json_string_value(format), FR_DUMP_FORMAT) == 0) {
		rc = fr_dump_from_json(root, f->path, f->t, f->err, sizeof(f->err));
	} else if (fr_pytorch_is_dump(root) && f->named_rank) {
		rc = fr_pytorch_from_json(root, f->path, f->rank, mtime_ns(st), f->t, f->err,
					  sizeof(f->err));
	} else if (fr_pytorch_is_dump(root)) {
		snprintf(f->err, sizeof(f->err), "%s: a PyTorch Flight Recorder dump, but its "
			 "name does not end with the rank it belongs to", f->path);
		rc = -EPROTO;
	}
	json_decref(root);
	return rc;
}

/* Reads a file whose name ends with a rank as a PyTorch dump, pickle or
 * JSON; anything else is passed over (1). */
static int read_sniffed_pytorch(struct dump_file *f, int fd, const struct stat *st)
{
	unsigned char head[2];
	char *buf;
	size_t len;
	int rc;

	/* Look before reading it all: a core file may end with a number too. */
	if (pread(fd, head, sizeof(head), 0) != (ssize_t)sizeof(head) ||
	    (!fr_pickle_sniff(head, sizeof(head)) && head[0] != '{'))
		return 1;
	rc = fr_read_fd(fd, f->path, &buf, &len, f->err, sizeof(f->err));
	if (rc)
		return rc == -ENOMEM ? rc : 1;
	rc = fr_pytorch_parse(buf, len, f->path, f->rank, mtime_ns(st), f->t, f->err,
			      sizeof(f->err));
	free(buf);
	return rc;
}

static int read_sniffed(struct dump_file *f)
{
	struct stat st;
	int fd, rc;

	fd = open(f->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 1;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > SNIFF_MAX) {
		close(fd);
		return 1;
	}
	rc = f->kind == FILE_SNIFF_JSON ? read_sniffed_json(f, fd, &st) :
					  read_sniffed_pytorch(f, fd, &st);
	close(fd);
	return rc;
}

static void read_one(struct dump_file *f)
{
	f->t = calloc(1, sizeof(*f->t));
	if (!f->t) {
		f->rc = -ENOMEM;
		return;
	}
	if (f->kind != FILE_DUMP)
		f->rc = read_sniffed(f);
	else
		f->rc = fr_dump_read_file(f->path, f->t, f->err, sizeof(f->err));
	if (f->rc) {
		free(f->t);
		f->t = NULL;
	}
}

static void *reader(void *arg)
{
	struct pool *p = arg;
	size_t i;

	while ((i = atomic_fetch_add(&p->next, 1)) < p->n)
		read_one(&p->files[i]);
	return NULL;
}

static void read_all(struct dump_file *files, size_t n)
{
	pthread_t tids[READERS_MAX - 1];
	struct pool p = { files, n, 0 };
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	size_t want = cpus > 1 ? (size_t)cpus : 1;
	size_t started = 0;

	if (want > READERS_MAX)
		want = READERS_MAX;
	if (want > n)
		want = n;
	/* Jansson seeds its hash function on first use; do it before the
	 * threads race to. */
	json_object_seed(0);
	/* A thread that cannot start leaves its share to the others. */
	while (started + 1 < want && pthread_create(&tids[started], NULL, reader, &p) == 0)
		started++;
	reader(&p);
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
	for (int i = 0; i < n; i++) {
		const char *name = names[i]->d_name;
		bool json = fnmatch("*.json", name, 0) == 0;
		struct dump_file *f = &files[nfiles];
		struct stat st;
		char *path;

		f->named_rank = fr_pytorch_rank_from_name(name, &f->rank);
		if (name[0] == '.' || (!json && !f->named_rank))
			continue;
		path = join(dir, name);
		if (!path) {
			status = EXIT_UNUSABLE;
			goto out_nomem;
		}
		if (stat(path, &st) < 0) {
			fprintf(stderr, PROG ": %s: %s; leaving this file out\n", path,
				strerror(errno));
			ev->nbad++;
		} else if (!S_ISREG(st.st_mode)) {
			/* Not a file: nothing to read. */
		} else if (strcmp(name, "manifest.json") == 0) {
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
			} else {
				fprintf(stderr, PROG ": %s; going on without the manifest\n",
					err[0] ? err : path);
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

	read_all(files, nfiles);
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

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct evidence ev;
	const struct fr_trace **traces = NULL;
	size_t ntraces = 0;
	uint32_t world = 0;
	struct stat st;
	bool json = false;
	int status;
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "hV", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'h':
			fputs(usage_text, stdout);
			return 0;
		case 'V':
			printf(PROG " (flightrec) %s, reads dump format %d.x\n", FLIGHTREC_VERSION,
			       FR_DUMP_VERSION_MAJOR);
			return 0;
		default:
			fprintf(stderr, PROG ": bad option '%s'\n", argv[optind - 1]);
			fprintf(stderr, "Try '" PROG " --help'.\n");
			return EXIT_UNUSABLE;
		}
	}
	if (argc - optind != 1) {
		fprintf(stderr, PROG ": %s\nUsage: " PROG " [--json] PATH\n",
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
		fprintf(stderr, PROG ": %s: no usable dump (%s)\n", argv[optind],
			ev.nbad ? "every dump file was left out, see above" :
				  "no rank-*.json or flightrec dump in it");
		status = EXIT_UNUSABLE;
		goto out_free;
	}
	if (!ev.ndumps)
		fprintf(stderr, PROG ": %s: no rank dumped; judging from the daemon's live view "
			"in manifest.json only\n", argv[optind]);
	status = assemble(&ev, &traces, &ntraces, &world);
	if (status)
		goto out_free;
	status = report(traces, ntraces, world, json);
out_free:
	free(traces);
	evidence_free(&ev);
	return status;
}
