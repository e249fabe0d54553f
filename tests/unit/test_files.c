/*
 * Files of an incident directory written safely (dumps/files.c): atomic
 * writes that survive short writes, EINTR, a full disk and stale temporary
 * files, and directories opened without trusting what is on the way.
 */
#include "dump_fixtures.h"

#include <sys/syscall.h>

/*
 * write() is replaced for the whole test program so that the atomic writer
 * can be made to see what disks and signals do to it: short writes, EINTR,
 * and a full disk. Descriptors 0-2 are always passed through.
 */
enum write_mode { WRITE_PASS, WRITE_CHOPPY, WRITE_FULL_AFTER };

static enum write_mode write_mode;
static size_t write_full_after;  /* WRITE_FULL_AFTER: bytes accepted before ENOSPC */
static size_t write_written;
static unsigned write_calls, write_eintrs;

ssize_t write(int fd, const void *buf, size_t n)
{
	if (fd > 2 && write_mode == WRITE_CHOPPY) {
		/* Every other call is interrupted; the rest take 7 bytes at most. */
		if (write_calls++ % 2 == 0) {
			write_eintrs++;
			errno = EINTR;
			return -1;
		}
		if (n > 7)
			n = 7;
	} else if (fd > 2 && write_mode == WRITE_FULL_AFTER) {
		write_calls++;
		if (write_written >= write_full_after) {
			errno = ENOSPC;
			return -1;
		}
		if (n > write_full_after - write_written)
			n = write_full_after - write_written;
		write_written += n;
	}
	return syscall(SYS_write, fd, buf, n);
}

/* fdatasync() and syncfs() counted, for fr_sync_dir()'s choice between them. */
static unsigned datasyncs, fs_syncs;

int fdatasync(int fd)
{
	datasyncs++;
	return (int)syscall(SYS_fdatasync, fd);
}

int syncfs(int fd)
{
	fs_syncs++;
	return (int)syscall(SYS_syncfs, fd);
}

static void write_reset(enum write_mode mode)
{
	write_mode = mode;
	write_full_after = 0;
	write_written = 0;
	write_calls = 0;
	write_eintrs = 0;
}

/* Runs after each write test, so that a failed one does not disturb the next. */
static int write_teardown(void **state)
{
	(void)state;
	write_reset(WRITE_PASS);
	return 0;
}

static char *read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = malloc(1 << 16);

	assert_non_null(f);
	assert_non_null(buf);
	*len = fread(buf, 1, 1 << 16, f);
	fclose(f);
	return buf;
}

/* Files in dir, other than . and .., counted; asserts that none is a temp file. */
static unsigned count_files_no_temp(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	unsigned n = 0;

	assert_non_null(d);
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (strstr(de->d_name, ".tmp."))
			fail_msg("temporary file %s left in %s", de->d_name, dir);
		n++;
	}
	closedir(d);
	return n;
}

/* Runs `sh -c cmd` and asserts it succeeded. */
static void sh(const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	assert_int_equal(system(cmd), 0);
}

/*
 * fr_dir_open() creates what is missing with the mode asked for, follows
 * the caller's own links, and refuses a component that is a file, another
 * user's directory, or another user's link, naming it; what was refused is
 * never written through. Another user is played by chown, so as root only.
 */
static void test_dir_open_trust(void **state)
{
	char *dir = make_temp_dir();
	char err[PATH_MAX + 64], path[PATH_MAX];
	struct stat st;
	int fd;

	(void)state;
	/* Created 0700, whatever the umask; the dump inside 0600. */
	snprintf(path, sizeof(path), "%s/a//b/./c", dir);
	fd = fr_dir_open(AT_FDCWD, path, 0700, err, sizeof(err));
	assert_true(fd >= 0);
	assert_int_equal(fr_write_file_at(fd, "rank-0.json", "{}", 2, 0600), 0);
	close(fd);
	snprintf(path, sizeof(path), "%s/a/b/c/rank-0.json", dir);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	snprintf(path, sizeof(path), "%s/a/b", dir);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);
	/* The daemon's files: 0640. */
	snprintf(path, sizeof(path), "%s/a/daemon.json", dir);
	assert_int_equal(fr_write_file_atomic_mode(path, "{}", 2, 0640), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0640);
	/* A relative path, from a directory's descriptor. */
	fd = open(dir, O_RDONLY | O_DIRECTORY);
	assert_true(fd >= 0);
	{
		int sub = fr_dir_open(fd, "a/b", 0700, err, sizeof(err));

		assert_true(sub >= 0);
		close(sub);
	}
	close(fd);
	/* A file where a directory should be. */
	sh("touch %s/file", dir);
	snprintf(path, sizeof(path), "%s/file/x", dir);
	assert_int_equal(fr_dir_open(AT_FDCWD, path, 0700, err, sizeof(err)), -ENOTDIR);
	assert_non_null(strstr(err, "/file exists and is not a directory"));
	/* Our own link is followed. */
	sh("ln -s %s/a %s/mine", dir, dir);
	snprintf(path, sizeof(path), "%s/mine/b", dir);
	fd = fr_dir_open(AT_FDCWD, path, 0700, err, sizeof(err));
	assert_true(fd >= 0);
	close(fd);
	if (geteuid() == 0) {
		/* Another user's link and directory are refused. */
		sh("mkdir -m 777 %s/loot && ln -s %s/loot %s/planted && chown -h 65534 %s/planted",
		   dir, dir, dir, dir);
		snprintf(path, sizeof(path), "%s/planted/inc", dir);
		assert_int_equal(fr_dir_open(AT_FDCWD, path, 0700, err, sizeof(err)), -ELOOP);
		assert_non_null(strstr(err, "/planted is a symbolic link owned by another user"));
		snprintf(path, sizeof(path), "%s/loot/inc", dir);
		assert_int_not_equal(access(path, F_OK), 0);
		sh("mkdir %s/theirs && chown 65534 %s/theirs", dir, dir);
		snprintf(path, sizeof(path), "%s/theirs", dir);
		assert_int_equal(fr_dir_open(AT_FDCWD, path, 0700, err, sizeof(err)), -EPERM);
		assert_non_null(strstr(err, "/theirs is a directory owned by another user"));
		/* fr_mkdir_p (the daemon's) refuses them alike. */
		snprintf(path, sizeof(path), "%s/planted/x", dir);
		assert_int_equal(fr_mkdir_p(path), -ELOOP);
	}
	sh("rm -rf %s", dir);
	free(dir);
}

static void test_atomic_write_and_replace(void **state)
{
	char *dir = make_temp_dir();
	char *path = join(dir, "rank-3.json");
	char *got;
	size_t len;
	struct stat st;

	(void)state;
	assert_int_equal(fr_write_file_atomic(path, "first version", 13), 0);
	got = read_all(path, &len);
	assert_int_equal(len, 13);
	assert_memory_equal(got, "first version", 13);
	free(got);
	assert_int_equal(stat(path, &st), 0);
	{
		mode_t mask = umask(0);

		umask(mask);
		assert_int_equal(st.st_mode & 0777, 0644 & ~mask);
	}

	assert_int_equal(fr_write_file_atomic(path, "2nd", 3), 0);
	got = read_all(path, &len);
	assert_int_equal(len, 3);
	assert_memory_equal(got, "2nd", 3);
	free(got);

	assert_int_equal(fr_write_file_atomic(path, "", 0), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, 0);
	assert_int_equal(count_files_no_temp(dir), 1);

	free(path);
	remove_dir(dir);
}

static void test_atomic_write_missing_dir(void **state)
{
	char *dir = make_temp_dir();
	char *path = join(dir, "no-such-dir/rank-0.json");

	(void)state;
	assert_int_equal(fr_write_file_atomic(path, "x", 1), -ENOENT);
	assert_int_equal(count_files_no_temp(dir), 0);
	free(path);
	remove_dir(dir);
}

/* Short writes and EINTR must not lose or repeat a byte. */
static void test_atomic_write_choppy(void **state)
{
	char *dir = make_temp_dir();
	char *path = join(dir, "manifest.json");
	char text[1000];
	char *got;
	size_t len;

	(void)state;
	for (size_t i = 0; i < sizeof(text); i++)
		text[i] = (char)('a' + i % 26);
	write_reset(WRITE_CHOPPY);
	assert_int_equal(fr_write_file_atomic(path, text, sizeof(text)), 0);
	assert_true(write_eintrs > 0);
	write_reset(WRITE_PASS);
	got = read_all(path, &len);
	assert_int_equal(len, sizeof(text));
	assert_memory_equal(got, text, sizeof(text));
	free(got);
	free(path);
	remove_dir(dir);
}

/* A full disk is reported as such, and the previous file survives whole. */
static void test_atomic_write_enospc(void **state)
{
	char *dir = make_temp_dir();
	char *path = join(dir, "rank-1.json");
	char big[4096];
	char *got;
	size_t len;

	(void)state;
	memset(big, 'x', sizeof(big));
	assert_int_equal(fr_write_file_atomic(path, "old dump", 8), 0);
	write_reset(WRITE_FULL_AFTER);
	write_full_after = 1000;
	assert_int_equal(fr_write_file_atomic(path, big, sizeof(big)), -ENOSPC);
	assert_true(write_calls >= 2);
	write_reset(WRITE_PASS);

	got = read_all(path, &len);
	assert_int_equal(len, 8);
	assert_memory_equal(got, "old dump", 8);
	free(got);
	assert_int_equal(count_files_no_temp(dir), 1);
	free(path);
	remove_dir(dir);
}

/*
 * A directory of a few files (a node daemon's incident) is made durable a
 * file at a time, never by flushing the whole file system, which also
 * writes back whatever the training job left there; one of many files
 * (thousands of ranks' dumps) by one syncfs(). A missing directory is an
 * error.
 */
static void test_sync_dir(void **state)
{
	char *dir = make_temp_dir();
	char path[PATH_MAX];

	(void)state;
	for (int i = 0; i < FR_SYNC_EACH_MAX; i++) {
		snprintf(path, sizeof(path), "%s/rank-%d.json", dir, i);
		assert_int_equal(fr_write_file_unsynced(path, "{}\n", 3, 0640), 0);
	}
	snprintf(path, sizeof(path), "%s/sub", dir);
	assert_int_equal(mkdir(path, 0700), 0);
	datasyncs = fs_syncs = 0;
	assert_int_equal(fr_sync_dir(dir), 0);
	assert_int_equal(datasyncs, FR_SYNC_EACH_MAX);
	assert_int_equal(fs_syncs, 0);

	snprintf(path, sizeof(path), "%s/rank-%d.json", dir, FR_SYNC_EACH_MAX);
	assert_int_equal(fr_write_file_unsynced(path, "{}\n", 3, 0640), 0);
	datasyncs = fs_syncs = 0;
	assert_int_equal(fr_sync_dir(dir), 0);
	assert_int_equal(datasyncs, 0);
	assert_int_equal(fs_syncs, 1);

	snprintf(path, sizeof(path), "%s/missing", dir);
	assert_int_equal(fr_sync_dir(path), -ENOENT);
	snprintf(path, sizeof(path), "%s/sub", dir);
	rmdir(path);
	remove_dir(dir);
}

/* A temporary file left by a crashed process with the same pid is no obstacle. */
static void test_atomic_write_stale_temp(void **state)
{
	char *dir = make_temp_dir();
	char *path = join(dir, "rank-2.json");
	char *tmp;
	char *got;
	size_t len;
	int fd;

	(void)state;
	assert_true(asprintf(&tmp, "%s.tmp.%ld", path, (long)getpid()) > 0);
	fd = open(tmp, O_CREAT | O_WRONLY, 0644);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(fr_write_file_atomic(path, "fresh", 5), 0);
	got = read_all(path, &len);
	assert_int_equal(len, 5);
	free(got);
	assert_int_equal(count_files_no_temp(dir), 1);
	free(tmp);
	free(path);
	remove_dir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_atomic_write_and_replace),
		cmocka_unit_test(test_dir_open_trust),
		cmocka_unit_test(test_atomic_write_missing_dir),
		cmocka_unit_test_teardown(test_atomic_write_choppy, write_teardown),
		cmocka_unit_test_teardown(test_atomic_write_enospc, write_teardown),
		cmocka_unit_test(test_atomic_write_stale_temp),
		cmocka_unit_test(test_sync_dir),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
