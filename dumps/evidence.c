/*
 * The evidence layer (evidence.h): an incident directory read into the
 * correlation engine's input, with the warnings as data.
 */
#include "evidence.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arena.h"
#include "correlate.h"
#include "grow.h"
#include "ids.h"
#include "pytorch.h"
#include "pickle.h"
#include "value.h"

/* How many known ids the reply to an unknown communicator lists. */
#define KNOWN_COMMS_SHOWN 10

static void warn(struct fr_evidence *ev, const char *file, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int fail(struct fr_evidence *ev, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Adds a warning about `file` (NULL: none). Out of memory costs it. */
static void warn(struct fr_evidence *ev, const char *file, const char *fmt, ...)
{
	struct fr_evidence_warning *w;
	va_list ap;
	int rc;

	if (fr_grow((void **)&ev->warnings, &ev->warnings_cap, ev->nwarnings + 1,
		    sizeof(*ev->warnings), 16) < 0)
		return;
	w = &ev->warnings[ev->nwarnings];
	w->file = NULL;
	va_start(ap, fmt);
	rc = vasprintf(&w->text, fmt, ap);
	va_end(ap);
	if (rc < 0)
		return;
	if (file && !(w->file = strdup(file))) {
		free(w->text);
		return;
	}
	ev->nwarnings++;
}

/* Says why the call fails (ev->error) and returns `rc`. */
static int fail(struct fr_evidence *ev, int rc, const char *fmt, ...)
{
	va_list ap;

	free(ev->error);
	va_start(ap, fmt);
	if (vasprintf(&ev->error, fmt, ap) < 0)
		ev->error = NULL;
	va_end(ap);
	return rc;
}

static int fail_nomem(struct fr_evidence *ev)
{
	return fail(ev, -ENOMEM, "out of memory");
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
static int evidence_add(struct fr_evidence *ev, struct fr_trace *t, char *path)
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
 * its content says so (other *.json: our "format" or a PyTorch dump), a
 * PyTorch dump only (a name ending with the rank, pickle or JSON), or as
 * many dumps, one a line (summaries-*.jsonl: a central daemon's summaries
 * from one node, dumps/FORMAT.md "Summaries"). */
enum file_kind { FILE_DUMP, FILE_SNIFF_JSON, FILE_SNIFF_PYTORCH, FILE_LINES };

/* Bad lines of a summaries-*.jsonl file whose error is kept, a file. */
#define LINE_ERRORS_MAX 8

/* A dump file to read, and what became of it. */
struct dump_file {
	char *path;            /* owned */
	const char *name;      /* in path: the name in the directory */
	enum file_kind kind;
	bool named_rank;       /* the name ends with a rank (PyTorch's naming) */
	uint32_t rank;         /* that rank */
	int rc;                /* 0 read, 1 not a dump, else a negative errno */
	struct fr_trace *t;    /* owned once read */
	char err[512];
	/* FILE_LINES: a dump a line (each owned) with its line number, and
	 * the lines left out with the first LINE_ERRORS_MAX errors (owned). */
	struct line_dump {
		struct fr_trace *t;
		size_t no;
	} *lines;
	size_t nlines, lines_cap;
	size_t nbad_lines;
	char *line_errors[LINE_ERRORS_MAX];
};

/*
 * Parsing dominates the time to analyze a large job (a 1024-rank incident
 * is over a gigabyte of JSON), so the files are read by a pool of threads
 * that share no state.
 */
struct pool {
	struct dump_file *files;
	size_t n;
	int dirfd;             /* the directory the files are named in */
	atomic_size_t next;
};

/* One reading thread: the pool it takes files from, its own arena, and
 * what it reuses from file to file (a buffer for small files, the
 * documents fr_dump_parse() parses into). */
struct reader {
	struct pool *pool;
	struct fr_arena *arena;
	char *buf;
	size_t cap;
	struct fr_doc *doc, *scratch;
};

/*
 * Files up to this size are read into the reader's buffer, larger ones
 * mapped. An incident of summaries is tens of thousands of files of
 * tens of KiB: mapping one costs more (mmap, its page faults, munmap and
 * the other thread's TLB flushed) than copying it; a full dump of
 * megabytes is better mapped.
 */
#define READ_MAX ((size_t)256 << 10)

static uint64_t mtime_ns(const struct stat *st)
{
	return (uint64_t)st->st_mtim.tv_sec * 1000000000u + (uint64_t)st->st_mtim.tv_nsec;
}

/*
 * Files larger than READ_MAX are mapped, not read: copying a gigabyte out
 * of the page cache cost a quarter of the time. A file cut short while mapped (someone
 * rewriting it under us) raises SIGBUS at the first access past its new
 * end; the handler jumps back to the reader of that file, which reports it
 * and goes on with the others. What the interrupted parse had allocated
 * is lost: once per file cut short, which is rare and leaves a reader
 * such as fr-analyze, about to exit, no worse off.
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

/* Keeps line `no`'s dump `t` of file f. */
static int keep_line(struct dump_file *f, struct fr_trace *t, size_t no)
{
	if (fr_grow((void **)&f->lines, &f->lines_cap, f->nlines + 1, sizeof(*f->lines), 256))
		return -ENOMEM;
	f->lines[f->nlines++] = (struct line_dump){ t, no };
	return 0;
}

/*
 * A summaries-*.jsonl file: one dump a line, each parsed on its own, so
 * that a bad line (cut short by a full disk, garbled) costs that line
 * only. Blank lines are passed over. Returns 0, or -ENOMEM.
 */
static int parse_lines(struct dump_file *f, const char *buf, size_t len)
{
	const char *p = buf, *end = buf + len;
	size_t no = 0;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *eol = nl ? nl : end;
		struct fr_trace *t;
		char name[PATH_MAX + 32];
		int rc;

		no++;
		if (eol == p || strspn(p, " \t\r") >= (size_t)(eol - p)) {
			p = eol + 1;
			continue;
		}
		t = calloc(1, sizeof(*t));
		if (!t)
			return -ENOMEM;
		snprintf(name, sizeof(name), "%s:%zu", f->path, no);
		rc = fr_dump_parse(p, (size_t)(eol - p), name, t, f->err, sizeof(f->err));
		if (!rc) {
			fr_trace_seal_ops(t);
			rc = keep_line(f, t, no);
			if (rc) {
				fr_trace_free(t);
				free(t);
				return rc;
			}
		} else {
			free(t);
			if (rc == -ENOMEM)
				return rc;
			if (f->nbad_lines < LINE_ERRORS_MAX)
				f->line_errors[f->nbad_lines] = strdup(f->err);
			f->nbad_lines++;
		}
		p = eol + 1;
	}
	f->err[0] = '\0';
	return 0;
}

/* Parses file f, whose bytes are at buf, as its kind says. */
static int parse(struct dump_file *f, const char *buf, size_t len, const struct stat *st)
{
	if (f->kind == FILE_LINES)
		return parse_lines(f, buf, len);
	if (f->kind == FILE_DUMP)
		return fr_dump_parse(buf, len, f->path, f->t, f->err, sizeof(f->err));
	if (f->kind == FILE_SNIFF_JSON)
		return read_sniffed_json(f, buf, len, st);
	return read_sniffed_pytorch(f, buf, len, st);
}

/* Parses file f, mapped at buf, as its kind says. */
static int parse_mapped(struct dump_file *f, const char *buf, size_t len, const struct stat *st)
{
	sigjmp_buf jump;
	int rc;

	if (sigsetjmp(jump, 1)) {
		bus_jump = NULL;
		/* A summaries file has no single trace: it is left out
		 * whole, as any file cut short under the reader is. */
		if (f->t)
			fr_trace_free(f->t);
		snprintf(f->err, sizeof(f->err), "%s: the file was cut short while being read",
			 f->path);
		return -EIO;
	}
	bus_jump = &jump;
	rc = parse(f, buf, len, st);
	bus_jump = NULL;
	return rc;
}

/*
 * Reads open file f (`size` bytes by fstat, at most READ_MAX) into r's
 * buffer. Returns the bytes read, or a negative errno with f->err set.
 * A file cut short since fstat is reported as the mapped read reports it.
 */
static int read_small(struct reader *r, struct dump_file *f, int fd, size_t size)
{
	size_t n = 0;

	if (r->cap < size + 1) {
		size_t ncap = size + 1 > 65536 ? size + 1 : 65536;
		char *nb = realloc(r->buf, ncap);

		if (!nb) {
			snprintf(f->err, sizeof(f->err), "%s: out of memory", f->path);
			return -ENOMEM;
		}
		r->buf = nb;
		r->cap = ncap;
	}
	/* As much as fstat said, as the mapping reads: the bytes a writer
	 * adds meanwhile are not the dump that was looked at (and asking for
	 * them would cost a read() per file). */
	while (n < size) {
		ssize_t got = read(fd, r->buf + n, size - n);

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			int err = errno;

			snprintf(f->err, sizeof(f->err), "%s: cannot read: %s", f->path,
				 strerror(err));
			return -err;
		}
		if (got == 0)
			break;
		n += (size_t)got;
	}
	if (n < size) {
		snprintf(f->err, sizeof(f->err), "%s: the file was cut short while being read",
			 f->path);
		return -EIO;
	}
	return (int)size;
}

/*
 * Reads file f: a dump by its name (errors are reported), or one whose
 * content must say it is one (a file that cannot be read, or is too large
 * for a dump, is passed over: 1). A directory is passed over whatever its
 * name. A symbolic link, a FIFO or a device is refused and reported, by
 * any name (fr_dump_open()): it cannot be a dump the daemon or an agent
 * wrote, and a FIFO swapped in would otherwise block the reader for good.
 */
static int read_file(struct reader *r, struct dump_file *f)
{
	bool sniff = f->kind == FILE_SNIFF_JSON || f->kind == FILE_SNIFF_PYTORCH;
	const char *buf;
	struct stat st;
	size_t len;
	int fd, rc;

	fd = fr_dump_openat(r->pool->dirfd, f->name, f->path, &st, f->err, sizeof(f->err));
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
	if (len <= READ_MAX) {
		rc = read_small(r, f, fd, len);
		close(fd);
		/* As when mapped: a file that cannot be read is no dump to
		 * sniff, one cut short is reported. */
		if (rc < 0)
			return sniff && rc != -EIO && rc != -ENOMEM ? 1 : rc;
		/* Read, not mapped: nothing can cut it short under the parser. */
		return parse(f, r->buf, (size_t)rc, &st);
	}
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

static void read_one(struct reader *r, struct dump_file *f)
{
	if (f->kind == FILE_LINES) {
		f->rc = read_file(r, f);
		return;
	}
	f->t = calloc(1, sizeof(*f->t));
	if (!f->t) {
		f->rc = -ENOMEM;
		return;
	}
	f->rc = read_file(r, f);
	fr_trace_seal_ops(f->t);
	if (f->rc) {
		free(f->t);
		f->t = NULL;
	}
}

static void *reader(void *arg)
{
	struct reader *r = arg;
	struct pool *p = r->pool;
	size_t i;

	fr_trace_use_arena(r->arena);
	/* Without them each dump makes its own (out of memory is no worse). */
	r->doc = fr_doc_new();
	r->scratch = fr_doc_new();
	fr_dump_use_docs(r->doc, r->scratch);
	while ((i = atomic_fetch_add(&p->next, 1)) < p->n)
		read_one(r, &p->files[i]);
	fr_dump_use_docs(NULL, NULL);
	fr_trace_use_arena(NULL);
	fr_doc_free(r->doc);
	fr_doc_free(r->scratch);
	free(r->buf);
	return NULL;
}

/* Reads the n files, each thread's operations into an arena of `arenas`. */
static void read_all(struct dump_file *files, size_t n, int dirfd,
		     struct fr_arena *arenas[FR_EVIDENCE_READERS_MAX])
{
	pthread_t tids[FR_EVIDENCE_READERS_MAX - 1];
	struct reader readers[FR_EVIDENCE_READERS_MAX] = { { 0 } };
	struct pool p = { files, n, dirfd, 0 };
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	size_t want = cpus > 1 ? (size_t)cpus : 1;
	size_t started = 0;

	/* No file (a manifest alone, an empty directory): no reader to run,
	 * and readers[0] below would be one that was never set up. */
	if (!n)
		return;
	if (want > FR_EVIDENCE_READERS_MAX)
		want = FR_EVIDENCE_READERS_MAX;
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

static void free_lines(struct dump_file *f)
{
	for (size_t i = 0; i < f->nlines; i++) {
		if (f->lines[i].t) {
			fr_trace_free(f->lines[i].t);
			free(f->lines[i].t);
		}
	}
	free(f->lines);
	for (size_t i = 0; i < f->nbad_lines && i < LINE_ERRORS_MAX; i++)
		free(f->line_errors[i]);
	f->lines = NULL;
	f->nlines = 0;
}

/* The dumps of summaries file f, each named by its file and line, and
 * warnings for its bad lines. Returns 0, or -ENOMEM (ev->error set). */
static int add_lines(struct fr_evidence *ev, struct dump_file *f)
{
	for (size_t i = 0; i < f->nbad_lines && i < LINE_ERRORS_MAX; i++)
		warn(ev, f->path, "%s; leaving this line out",
		     f->line_errors[i] ? f->line_errors[i] : f->path);
	if (f->nbad_lines > LINE_ERRORS_MAX)
		warn(ev, f->path, "%s: %zu more lines left out", f->path,
		     f->nbad_lines - LINE_ERRORS_MAX);
	ev->nbad += f->nbad_lines;
	for (size_t i = 0; i < f->nlines; i++) {
		char *path;

		if (asprintf(&path, "%s:%zu", f->path, f->lines[i].no) < 0)
			return fail_nomem(ev);
		if (evidence_add(ev, f->lines[i].t, path) < 0) {
			free(path);
			return fail_nomem(ev);
		}
		ev->dumps_in_lines++;
		f->lines[i].t = NULL;
	}
	return 0;
}

static int cmp_names(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

/*
 * Reads the directory's dumps and manifest into `ev`. Returns 0 or a
 * negative errno (ev->error set). Warnings come in file-name order.
 */
static int read_dir(struct fr_evidence *ev, const char *dir)
{
	struct dirent **names = NULL;
	struct dump_file *files;
	size_t nfiles = 0;
	int n = scandir(dir, &names, NULL, cmp_names);
	int dirfd, rc = 0;

	if (n < 0)
		return fail(ev, -errno, "%s: %s", dir, strerror(errno));
	files = calloc(n ? (size_t)n : 1, sizeof(*files));
	if (!files) {
		rc = fail_nomem(ev);
		goto out_free;
	}
	/*
	 * What each name is, is looked at only on the descriptor each file is
	 * read from (fr_dump_open()), not here: a file looked at here could
	 * be another (a FIFO, a link) by the time it is opened.
	 */
	for (int i = 0; i < n; i++) {
		const char *name = names[i]->d_name;
		bool json = fnmatch("*.json", name, 0) == 0;
		bool lines = fnmatch("summaries-*.jsonl", name, 0) == 0;
		struct dump_file *f = &files[nfiles];
		char *path;

		f->named_rank = !lines && fr_pytorch_rank_from_name(name, &f->rank);
		/* A directory is nothing to read, whatever its name. */
		if (name[0] == '.' || (!json && !lines && !f->named_rank) || names[i]->d_type == DT_DIR)
			continue;
		path = join(dir, name);
		if (!path) {
			rc = fail_nomem(ev);
			goto out_free;
		}
		if (strcmp(name, "manifest.json") == 0) {
			char err[512];
			int mrc = fr_manifest_read_file(path, &ev->manifest, err, sizeof(err));

			if (mrc == 0) {
				ev->have_manifest = true;
				ev->manifest_path = path;
				continue;
			} else if (mrc == -ENOMEM) {
				free(path);
				rc = fail_nomem(ev);
				goto out_free;
			} else if (mrc != -EISDIR) {
				warn(ev, path, "%s; going on without the manifest", err[0] ? err : path);
				ev->bad_manifest = true;
			}
		} else {
			f->path = path;
			f->name = path + strlen(path) - strlen(name);
			f->kind = lines ? FILE_LINES :
				  fnmatch("rank-*.json", name, 0) == 0 ? FILE_DUMP :
				  json ? FILE_SNIFF_JSON : FILE_SNIFF_PYTORCH;
			nfiles++;
			continue;
		}
		free(path);
	}

	dirfd = nfiles ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	if (nfiles && dirfd < 0) {
		rc = fail(ev, -errno, "%s: %s", dir, strerror(errno));
		goto out_free;
	}
	read_all(files, nfiles, dirfd, ev->arenas);
	if (dirfd >= 0)
		close(dirfd);
	/* Out of memory stops the dumps being kept, not the warnings about
	 * the files left out. */
	for (size_t i = 0; i < nfiles; i++) {
		struct dump_file *f = &files[i];

		if (f->rc == 0 && f->kind == FILE_LINES && !rc) {
			rc = add_lines(ev, f);
			continue;
		}
		if (f->rc == -ENOMEM && !rc) {
			rc = fail_nomem(ev);
		} else if (f->rc < 0 && f->rc != -ENOMEM) {
			warn(ev, f->path, "%s; leaving this file out", f->err[0] ? f->err : f->path);
			ev->nbad++;
		} else if (f->rc == 0 && !rc) {
			if (evidence_add(ev, f->t, f->path) < 0) {
				rc = fail_nomem(ev);
				continue;
			}
			f->t = NULL;
			f->path = NULL;
		}
	}

out_free:
	for (size_t i = 0; files && i < nfiles; i++) {
		if (files[i].t) {
			fr_trace_free(files[i].t);
			free(files[i].t);
		}
		free_lines(&files[i]);
		free(files[i].path);
	}
	free(files);
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return rc;
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
static uint32_t agreed_world(const struct fr_evidence *ev)
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

/* The place of c's first member outside a world of `world`, UINT32_MAX for none. */
static uint32_t first_outside(const struct fr_comm *c, uint32_t world)
{
	for (uint32_t k = 0; c->members && k < c->size; k++)
		/* An NCCL rank's dump knows only its own entry. */
		if (c->members[k] >= world && c->members[k] != FR_RANK_UNKNOWN)
			return k;
	return UINT32_MAX;
}

/* first_outside() of a list read before (a manifest lends all its views
 * one list per communicator), else read now. */
static uint32_t list_outside(struct fr_lists *checked, const struct fr_comm *c, uint32_t world)
{
	uint64_t *val;
	int seen = fr_lists_find(checked, c, &val);

	if (seen < 0)
		return first_outside(c, world);
	if (!seen)
		*val = first_outside(c, world);
	return (uint32_t)*val;
}

/*
 * Whether trace `t` names a rank outside a world of `world` ranks (as its
 * own rank or as a member of a communicator); if so, says which in buf.
 * Such evidence is from another job or corrupt, and the engine would size
 * its arrays by it.
 */
static bool outside_world(struct fr_lists *checked, const struct fr_trace *t, uint32_t world,
			  char *buf, size_t cap)
{
	if (t->rank >= world) {
		snprintf(buf, cap, "rank %" PRIu32 " is outside the world of %" PRIu32 " ranks",
			 t->rank, world);
		return true;
	}
	for (size_t i = 0; i < t->ncomms; i++) {
		const struct fr_comm *c = &t->comms[i];
		uint32_t k;

		if (!c->members || !c->size || (k = list_outside(checked, c, world)) == UINT32_MAX)
			continue;
		snprintf(buf, cap, "communicator %s lists rank %" PRIu32 ", outside the "
			 "world of %" PRIu32 " ranks", c->id, c->members[k], world);
		return true;
	}
	return false;
}

/*
 * One piece of evidence per rank: its dump, else the manifest's live view,
 * into ev->traces. Evidence outside the job's world is left out with a
 * warning. Returns 0, -ENODATA (nothing left), -ENOTUNIQ (two dumps of one
 * rank) or -ENOMEM, with ev->error set.
 */
/* Whether dump i came from a summaries-*.jsonl file (named "<path>:<line>"). */
static bool in_lines(const struct fr_evidence *ev, size_t i)
{
	const char *colon = strrchr(ev->paths[i], ':');

	return ev->dumps_in_lines && colon && colon[1] && strspn(colon + 1, "0123456789") == strlen(colon + 1) &&
	       colon - ev->paths[i] > 6 && strncmp(colon - 6, ".jsonl", 6) == 0;
}

static int assemble(struct fr_evidence *ev)
{
	const struct fr_trace **traces = NULL;
	struct fr_lists checked = { 0 };
	bool *keep = NULL;
	/* By rank: the first dump kept of it, NONE for none, and its place
	 * in `traces`. */
	size_t *dump_of = NULL, *slot_of = NULL;
	size_t n = 0;
	size_t nmax = ev->ndumps + (ev->have_manifest ? ev->manifest.nranks : 0);
	uint32_t w = agreed_world(ev);
	char why[256];
	int rc;

	traces = calloc(nmax ? nmax : 1, sizeof(*traces));
	keep = calloc(ev->ndumps ? ev->ndumps : 1, sizeof(*keep));
	dump_of = w ? malloc(w * sizeof(*dump_of)) : NULL;
	slot_of = w ? malloc(w * sizeof(*slot_of)) : NULL;
	if (!traces || !keep || !dump_of || !slot_of) {
		rc = fail_nomem(ev);
		goto out_free;
	}
	memset(dump_of, 0xff, w * sizeof(*dump_of));
	for (size_t i = 0; i < ev->ndumps; i++) {
		const struct fr_trace *t = ev->dumps[i];

		if (outside_world(&checked, t, w, why, sizeof(why))) {
			warn(ev, ev->paths[i], "%s: %s%s; leaving this file out", ev->paths[i], why,
			     ev->have_manifest ? " (the manifest's)" : "");
			continue;
		}
		keep[i] = true;
		if (t->world_size != w)
			warn(ev, ev->paths[i], "%s: world_size %" PRIu32 " is not the job's %" PRIu32,
			     ev->paths[i], t->world_size, w);
		if (ev->have_manifest && t->job[0] && ev->manifest.job[0] &&
		    strcmp(t->job, ev->manifest.job) != 0)
			warn(ev, ev->paths[i], "%s: job \"%s\" is not the manifest's \"%s\"",
			     ev->paths[i], t->job, ev->manifest.job);
	}
	/* Two files for one rank mean a mixed-up directory. A kept dump's
	 * rank is below the world. */
	for (size_t i = 0; i < ev->ndumps; i++) {
		size_t k;

		if (!keep[i])
			continue;
		k = dump_of[ev->dumps[i]->rank];
		if (k != SIZE_MAX && in_lines(ev, i) != in_lines(ev, k)) {
			/* A central daemon fetched this rank's full dump after
			 * its node's summary: the file is the evidence. */
			size_t file = in_lines(ev, i) ? k : i;

			traces[slot_of[ev->dumps[i]->rank]] = ev->dumps[file];
			dump_of[ev->dumps[i]->rank] = file;
			continue;
		}
		if (k != SIZE_MAX) {
			rc = fail(ev, -ENOTUNIQ, "%s: rank %" PRIu32 " is dumped twice (also in %s)",
				  ev->paths[i], ev->dumps[i]->rank, ev->paths[k]);
			goto out_free;
		}
		dump_of[ev->dumps[i]->rank] = i;
		slot_of[ev->dumps[i]->rank] = n;
		traces[n++] = ev->dumps[i];
	}
	for (size_t i = 0; ev->have_manifest && i < ev->manifest.nranks; i++) {
		struct fr_trace *live = &ev->manifest.ranks[i];

		if (outside_world(&checked, live, w, why, sizeof(why))) {
			warn(ev, ev->manifest_path, "%s: ranks[%zu]: %s; leaving it out",
			     ev->manifest_path, i, why);
			continue;
		}
		if (dump_of[live->rank] != SIZE_MAX)
			continue;
		/* It answered, but its file is gone or unreadable: what remains
		 * is the daemon's view of it, without stacks. */
		if (live->status == FR_RANK_DUMPED)
			live->status = FR_RANK_LIVE;
		traces[n++] = live;
	}
	if (!n) {
		rc = fail(ev, -ENODATA, "no usable dump (every one was left out, see above)");
		goto out_free;
	}
	free(keep);
	free(dump_of);
	free(slot_of);
	fr_lists_free(&checked);
	ev->traces = traces;
	ev->ntraces = n;
	ev->world_size = w;
	return 0;

out_free:
	free(keep);
	free(dump_of);
	free(slot_of);
	fr_lists_free(&checked);
	free(traces);
	return rc;
}

/* Whether member list `p` is one of the manifest's table (a 2.x
 * manifest's views share them), not a list of its own. */
static bool in_table(const struct fr_evidence *ev, const uint32_t *p)
{
	const uint32_t *table = ev->have_manifest ? ev->manifest.members : NULL;

	return table && p >= table && p < table + ev->manifest.nmembers;
}

static int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)*(uint32_t *const *)a;
	uintptr_t y = (uintptr_t)*(uint32_t *const *)b;

	return (x > y) - (x < y);
}

/* Whether member list `p` is lent (the table's, or ev->lent's), which the
 * trace holding it must not free. */
static bool is_lent(const struct fr_evidence *ev, const uint32_t *p)
{
	return in_table(ev, p) ||
	       (ev->nlent && bsearch(&p, ev->lent, ev->nlent, sizeof(*ev->lent), cmp_ptr));
}

/* A summary's communicator without members, for lend_members(). */
struct lend_ref {
	struct fr_comm *c;
	uint32_t rank;
	const char *id;        /* c's */
	uint32_t id_rank;      /* fr_ids_rank() */
};

static int cmp_lend_ref(const void *a, const void *b)
{
	const struct lend_ref *x = a;
	const struct lend_ref *y = b;

	if (x->id_rank != y->id_rank)
		return x->id_rank < y->id_rank ? -1 : 1;
	return (x->c->size > y->c->size) - (x->c->size < y->c->size);
}

/* The manifest's list of communicator `c` as rank `rank`'s view names it,
 * when it is one of the table's and of c's size; else NULL. */
static uint32_t *table_list(const struct fr_evidence *ev, uint32_t rank, const struct fr_comm *c)
{
	const struct fr_trace *view;
	const struct fr_comm *vc;

	if (!ev->have_manifest || rank >= ev->manifest.nranks)
		return NULL;
	view = &ev->manifest.ranks[rank];
	vc = view->rank == rank ? fr_trace_comm(view, c->id) : NULL;
	if (!vc || vc->size != c->size || !in_table(ev, vc->members))
		return NULL;
	return vc->members;
}

/*
 * Lends the summaries' communicators (summary.h: they list no members) a
 * member list: the manifest's table's, written once per incident; else
 * one list per communicator, shared by its summaries, made of the place
 * each says it has in it (what an NCCL rank's dump says of itself). Only
 * the list the engine merges is made, not one per rank: a summary of a
 * world of N ranks would otherwise cost N lists of N.
 */
static int lend_members(struct fr_evidence *ev)
{
	struct lend_ref *refs = NULL;
	size_t nrefs = 0, total = 0;
	int rc = 0;

	for (size_t i = 0; i < ev->ntraces; i++)
		if (ev->traces[i]->summary)
			total += ev->traces[i]->ncomms;
	if (!total)
		return 0;
	refs = malloc(total * sizeof(*refs));
	ev->lent = malloc(total * sizeof(*ev->lent));
	if (!refs || !ev->lent) {
		rc = fail_nomem(ev);
		goto out_free;
	}
	for (size_t i = 0; i < ev->ntraces; i++) {
		/* ev's own dumps, which assemble() only picked. */
		struct fr_trace *t = (struct fr_trace *)ev->traces[i];

		for (size_t j = 0; t->summary && j < t->ncomms; j++) {
			struct fr_comm *c = &t->comms[j];

			if (c->members || !c->size)
				continue;
			c->members = table_list(ev, t->rank, c);
			if (!c->members)
				refs[nrefs++] = (struct lend_ref){ c, t->rank, c->id, 0 };
		}
	}
	if (fr_ids_rank(refs, nrefs, sizeof(*refs), offsetof(struct lend_ref, id),
			offsetof(struct lend_ref, id_rank)) < 0) {
		rc = fail_nomem(ev);
		goto out_free;
	}
	qsort(refs, nrefs, sizeof(*refs), cmp_lend_ref);
	for (size_t i = 0, j; i < nrefs; i = j) {
		uint32_t size = refs[i].c->size;
		uint32_t *list = malloc(size * sizeof(*list));

		if (!list) {
			rc = fail_nomem(ev);
			goto out_free;
		}
		ev->lent[ev->nlent++] = list;
		for (uint32_t k = 0; k < size; k++)
			list[k] = FR_RANK_UNKNOWN;
		for (j = i; j < nrefs && cmp_lend_ref(&refs[i], &refs[j]) == 0; j++) {
			struct fr_comm *c = refs[j].c;

			if (c->rank < size && list[c->rank] == FR_RANK_UNKNOWN)
				list[c->rank] = refs[j].rank;
			c->members = list;
		}
	}
out_free:
	qsort(ev->lent, ev->nlent, sizeof(*ev->lent), cmp_ptr);
	free(refs);
	return rc;
}

bool fr_evidence_has_summaries(const struct fr_evidence *ev)
{
	for (size_t i = 0; i < ev->ntraces; i++)
		if (ev->traces[i]->summary)
			return true;
	return false;
}

/*
 * Tells apart the communicators that share an id but not their members
 * (fr_traces_split_comms()), its notes taken as warnings. The traces are
 * ev's to change: assemble() only picked them.
 */
static int split_comms(struct fr_evidence *ev)
{
	char *notes = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&notes, &len);
	int rc;

	if (!f)
		return fail_nomem(ev);
	/* Its lines begin with the name given and ": ", here none. */
	rc = fr_traces_split_comms((struct fr_trace *const *)ev->traces, ev->ntraces, f, "");
	if (fclose(f) != 0 && rc >= 0)
		rc = -ENOMEM;
	for (char *line = notes, *nl; line && *line; line = nl + 1) {
		nl = strchr(line, '\n');
		if (!nl)
			break;
		*nl = '\0';
		warn(ev, NULL, "%s", line + (strncmp(line, ": ", 2) == 0 ? 2 : 0));
	}
	free(notes);
	return rc < 0 ? fail_nomem(ev) : 0;
}

int fr_evidence_add_dump(struct fr_evidence *ev, struct fr_trace *t, const char *path)
{
	char *p = strdup(path);

	if (!p || evidence_add(ev, t, p) < 0) {
		free(p);
		return -ENOMEM;
	}
	return 0;
}

int fr_evidence_load_dir(struct fr_evidence *ev, const char *dir)
{
	int rc;

	if (!ev->dir && !(ev->dir = strdup(dir)))
		return fail_nomem(ev);
	rc = read_dir(ev, dir);
	if (rc)
		return rc;
	return fr_evidence_assemble(ev, dir);
}

int fr_evidence_assemble(struct fr_evidence *ev, const char *dir)
{
	int rc;

	if (!ev->dir && !(ev->dir = strdup(dir)))
		return fail_nomem(ev);
	if (!ev->ndumps && !(ev->have_manifest && ev->manifest.nranks))
		return fail(ev, -ENODATA, "%s: no usable dump (%s%s)", dir,
			    ev->nbad ? "every dump file was left out, see above" :
				       "no rank-*.json or flightrec dump in it",
			    ev->bad_manifest ? ", and its manifest.json is unusable, see above" :
			    ev->have_manifest ? ", and its manifest.json lists no rank" : "");
	if (!ev->ndumps)
		warn(ev, NULL, "%s: no rank dumped; judging from the daemon's live view in "
		     "manifest.json only", dir);
	rc = assemble(ev);
	if (rc)
		return rc;
	rc = lend_members(ev);
	if (rc)
		return rc;
	return split_comms(ev);
}

/* One rank's list of one communicator, for warn_member_conflicts(). */
struct comm_ref {
	const char *id;
	uint32_t rank;
	const struct fr_comm *c;
	uint32_t id_rank;      /* fr_ids_rank() */
};

static int cmp_comm_ref(const void *a, const void *b)
{
	const struct comm_ref *x = a;
	const struct comm_ref *y = b;

	if (x->id_rank != y->id_rank)
		return x->id_rank < y->id_rank ? -1 : 1;
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
static bool warn_comm_conflict(struct fr_evidence *ev, const struct comm_ref *refs, size_t n)
{
	const struct fr_comm *first = refs[0].c;
	uint32_t *val = malloc(first->size * sizeof(*val));
	uint32_t *from = malloc(first->size * sizeof(*from));
	/* The list compared last: a manifest's views share one, which
	 * compared again has nothing new to say. */
	const uint32_t *last = first->members;
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
			warn(ev, NULL, "communicator %s: rank %" PRIu32 "'s evidence lists %" PRIu32
			     " members where rank %" PRIu32 "'s lists %" PRIu32 "; using rank %"
			     PRIu32 "'s", refs[0].id, refs[i].rank, c->size, refs[0].rank,
			     first->size, refs[0].rank);
			warned = true;
			continue;
		}
		if (c->members == last)
			continue;
		last = c->members;
		for (uint32_t k = 0; k < c->size && !warned; k++) {
			if (c->members[k] == FR_RANK_UNKNOWN || c->members[k] == val[k])
				continue;
			if (val[k] == FR_RANK_UNKNOWN) {
				val[k] = c->members[k];
				from[k] = refs[i].rank;
				continue;
			}
			warn(ev, NULL, "communicator %s: rank %" PRIu32 "'s evidence has global rank %"
			     PRIu32 " as member %" PRIu32 " where rank %" PRIu32 "'s has %" PRIu32
			     "; using rank %" PRIu32 "'s", refs[0].id, refs[i].rank, c->members[k], k,
			     from[k], val[k], from[k]);
			warned = true;
		}
	}
	free(val);
	free(from);
	return true;
}

/* The correlation engine merges each communicator's member lists across
 * ranks (an NCCL rank's dump knows only its own entry). */
void fr_evidence_check_members(struct fr_evidence *ev)
{
	const struct fr_trace *const *traces = ev->traces;
	size_t n = ev->ntraces;
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
			refs[nrefs++] = (struct comm_ref){ t->comms[j].id, t->rank, &t->comms[j], 0 };
		}
	}
	/* Out of memory costs the warnings, as it would below. */
	if (fr_ids_rank(refs, nrefs, sizeof(*refs), offsetof(struct comm_ref, id),
			offsetof(struct comm_ref, id_rank)) < 0) {
		free(refs);
		return;
	}
	qsort(refs, nrefs, sizeof(*refs), cmp_comm_ref);
	for (size_t i = 0, j; i < nrefs; i = j) {
		for (j = i + 1; j < nrefs && refs[j].id_rank == refs[i].id_rank; j++)
			;
		if (j - i > 1 && !warn_comm_conflict(ev, &refs[i], j - i))
			break;
	}
	free(refs);
}

/* Every trace of `ev`, dumps first, then the manifest's live views. */
static size_t evidence_count(const struct fr_evidence *ev)
{
	return ev->ndumps + (ev->have_manifest ? ev->manifest.nranks : 0);
}

static struct fr_trace *evidence_trace(struct fr_evidence *ev, size_t i)
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
 * The reply to a communicator that no evidence names: the ids the evidence
 * does name, sorted, the first KNOWN_COMMS_SHOWN and how many more, so that
 * a typo or a PyTorch group number is easy to put right. Out of memory only
 * costs the list. Returns -ENOENT.
 */
static int say_known_comms(struct fr_evidence *ev, const char *id)
{
	const char **ids;
	size_t total = 0, n = 0, uniq = 0;
	char *text = NULL;
	size_t len = 0;
	FILE *out;

	for (size_t i = 0; i < evidence_count(ev); i++)
		total += evidence_trace(ev, i)->ncomms + evidence_trace(ev, i)->nops;
	ids = malloc((total ? total : 1) * sizeof(*ids));
	out = ids ? open_memstream(&text, &len) : NULL;
	if (!out) {
		free(ids);
		return fail(ev, -ENOENT, "%s: no evidence names communicator \"%s\"", ev->dir, id);
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
	fprintf(out, "%s: no evidence names communicator \"%s\"", ev->dir, id);
	if (!uniq)
		fprintf(out, " (it names no communicator at all)");
	for (size_t i = 0; i < uniq && i < KNOWN_COMMS_SHOWN; i++)
		fprintf(out, "%s%s", i ? ", " : "; known communicators: ", ids[i]);
	if (uniq > KNOWN_COMMS_SHOWN)
		fprintf(out, ", and %zu more", uniq - KNOWN_COMMS_SHOWN);
	free(ids);
	if (fclose(out) != 0) {
		free(text);
		return fail(ev, -ENOENT, "%s: no evidence names communicator \"%s\"", ev->dir, id);
	}
	free(ev->error);
	ev->error = text;
	return -ENOENT;
}

/*
 * Keeps communicator `id` and the operations on it in `t`, and no other
 * communicator or operation, so that the engine correlates that
 * communicator alone. The member lists dropped are freed, but for those
 * lent (the manifest's table, which fr_manifest_free() frees whole, and
 * the summaries' lists in ev->lent); the arrays
 * keep their allocation, which fr_trace_free() releases as before.
 */
static void trace_keep_comm(const struct fr_evidence *ev, struct fr_trace *t, const char *id)
{
	size_t n = 0;

	for (size_t i = 0; i < t->ncomms; i++) {
		if (strcmp(t->comms[i].id, id) == 0)
			t->comms[n++] = t->comms[i];
		else if (!is_lent(ev, t->comms[i].members))
			free(t->comms[i].members);
	}
	t->ncomms = n;
	n = 0;
	for (size_t i = 0; i < t->nops; i++)
		if (strcmp(t->ops[i].comm, id) == 0)
			t->ops[n++] = t->ops[i];
	t->nops = n;
}

int fr_evidence_keep_comm(struct fr_evidence *ev, const char *id)
{
	bool named = false;

	for (size_t i = 0; i < evidence_count(ev) && !named; i++)
		named = trace_names_comm(evidence_trace(ev, i), id);
	if (!named)
		return say_known_comms(ev, id);
	for (size_t i = 0; i < evidence_count(ev); i++)
		trace_keep_comm(ev, evidence_trace(ev, i), id);
	return 0;
}

const char *fr_evidence_source(const struct fr_evidence *ev, const struct fr_trace *t)
{
	for (size_t i = 0; i < ev->ndumps; i++)
		if (ev->dumps[i] == t)
			return ev->paths[i];
	return ev->manifest_path;
}

void fr_evidence_free(struct fr_evidence *ev)
{
	for (size_t i = 0; i < ev->ndumps; i++) {
		for (size_t j = 0; ev->dumps[i]->summary && j < ev->dumps[i]->ncomms; j++)
			if (is_lent(ev, ev->dumps[i]->comms[j].members))
				ev->dumps[i]->comms[j].members = NULL;
		fr_trace_free(ev->dumps[i]);
		free(ev->dumps[i]);
		free(ev->paths[i]);
	}
	for (size_t i = 0; i < ev->nlent; i++)
		free(ev->lent[i]);
	free(ev->lent);
	free(ev->dumps);
	free(ev->paths);
	if (ev->have_manifest)
		fr_manifest_free(&ev->manifest);
	free(ev->manifest_path);
	for (size_t i = 0; i < FR_EVIDENCE_READERS_MAX; i++)
		fr_arena_free(ev->arenas[i]);
	free(ev->traces);
	for (size_t i = 0; i < ev->nwarnings; i++) {
		free(ev->warnings[i].file);
		free(ev->warnings[i].text);
	}
	free(ev->warnings);
	free(ev->error);
	free(ev->dir);
	memset(ev, 0, sizeof(*ev));
}
