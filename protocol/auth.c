/*
 * Token and job key files, and the proofs made from them (auth.h). A proof
 * covers the HELLO's payload as fr_wire_hello_encode() writes it, so that
 * the two sides agree on its bytes through the codec rather than through a
 * second encoding kept in step by hand. Token bytes, keys and proofs made
 * along the way are wiped (explicit_bzero) before their memory is reused.
 */
#include "auth.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sha256.h"

int fr_read_small_file(const char *path, size_t max, char **data, size_t *len,
		       struct stat *st)
{
	struct stat sb;
	size_t n = 0;
	char *buf;
	int fd, err;

	*data = NULL;
	*len = 0;
	/* O_NONBLOCK: opening a FIFO for reading would wait for a writer. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &sb) < 0) {
		err = -errno;
		goto out_close;
	}
	if (!S_ISREG(sb.st_mode)) {
		err = -EINVAL;
		goto out_close;
	}
	if ((uint64_t)sb.st_size > max) {
		err = -EFBIG;
		goto out_close;
	}
	/*
	 * Room for one byte past the limit, to tell a file that grew since
	 * fstat() (or that, like those of /proc, says it is empty), and for
	 * the NUL.
	 */
	buf = malloc(max + 2);
	if (!buf) {
		err = -ENOMEM;
		goto out_close;
	}
	while (n < max + 1) {
		ssize_t r = read(fd, buf + n, max + 1 - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			err = -errno;
			goto out_free;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	if (n > max) {
		err = -EFBIG;
		goto out_free;
	}
	buf[n] = '\0';
	*data = buf;
	*len = n;
	if (st)
		*st = sb;
	close(fd);
	return 0;

out_free:
	explicit_bzero(buf, n);
	free(buf);
out_close:
	close(fd);
	return err;
}

/*
 * Reads a file of secrets for fr_wire_token_read() and
 * fr_wire_job_key_read(): at most `max` bytes, less one trailing newline,
 * into `out`. Returns 0, or a negative errno with `*why` set for -EINVAL;
 * `too_long` is the reason for a file over `max` bytes.
 */
static int read_secret(const char *path, size_t max, const char *too_long, char *out,
		       size_t *len, const char **why, bool *others_can_read)
{
	struct stat st;
	char *text;
	int err;

	*why = NULL;
	*others_can_read = false;
	*len = 0;
	err = fr_read_small_file(path, max, &text, len, &st);
	if (err == -EINVAL)
		*why = "not a regular file";
	if (err == -EFBIG) {
		*why = too_long;
		err = -EINVAL;
	}
	if (err)
		return err;
	*others_can_read = (st.st_mode & S_IROTH) != 0;
	if (*len && text[*len - 1] == '\n')
		(*len)--;
	memcpy(out, text, *len);
	explicit_bzero(text, *len);
	free(text);
	return 0;
}

/* What a token may hold: printable ASCII, no space. */
static bool token_byte(uint8_t c)
{
	return c > 0x20 && c < 0x7f;
}

int fr_wire_token_read(const char *path, struct fr_token *t, const char **why,
		       bool *others_can_read)
{
	/* One byte over the limit and its newline tell a token that is too long. */
	char buf[FR_TOKEN_MAX + 2];
	size_t len;
	int err;

	memset(t, 0, sizeof(*t));
	err = read_secret(path, sizeof(buf), "longer than 1024 bytes", buf, &len, why,
			  others_can_read);
	if (err)
		return err;
	if (len == 0) {
		*why = "empty";
		err = -EINVAL;
	} else if (len < FR_TOKEN_MIN) {
		*why = "shorter than 16 bytes";
		err = -EINVAL;
	} else if (len > FR_TOKEN_MAX) {
		*why = "longer than 1024 bytes";
		err = -EINVAL;
	}
	for (size_t i = 0; !err && i < len; i++) {
		if (!token_byte((uint8_t)buf[i])) {
			*why = "holds a byte that is not printable ASCII, or a space";
			err = -EINVAL;
		}
	}
	if (!err) {
		memcpy(t->bytes, buf, len);
		t->len = len;
	}
	explicit_bzero(buf, sizeof(buf));
	return err;
}

bool fr_wire_token_equal(const struct fr_token *t, const char *s, size_t len)
{
	uint8_t want[FR_SHA256_SIZE], got[FR_SHA256_SIZE];

	/* Comparing digests hides the token's length along with its bytes. */
	fr_sha256(t->bytes, t->len, want);
	fr_sha256(s, len, got);
	return t->len > 0 && fr_ct_equal(want, got, sizeof(want));
}

int fr_wire_job_key(const struct fr_token *t, const char *job,
		    uint8_t key[FR_WIRE_JOB_KEY_SIZE])
{
	/* The label goes with its NUL (sizeof), which ends it. */
	static const char job_label[] = "flightrec job key";
	size_t len = strnlen(job, FR_JOB_MAX + 1);
	struct fr_hmac_sha256 m;

	memset(key, 0, FR_WIRE_JOB_KEY_SIZE);
	if (!t->len || len > FR_JOB_MAX)
		return -EINVAL;
	fr_hmac_sha256_init(&m, t->bytes, t->len);
	fr_hmac_sha256_update(&m, job_label, sizeof(job_label));
	fr_hmac_sha256_update(&m, job, len);
	fr_hmac_sha256_final(&m, key);
	return 0;
}

/*
 * HMAC-SHA256 under `key` of `label` (its NUL included), the nonces (the
 * second one may be NULL) and a payload: what every proof is made of, told
 * apart by their labels.
 */
static void payload_mac(const uint8_t *key, size_t key_len, const char *label,
			const uint8_t first[FR_WIRE_NONCE_SIZE], const uint8_t *second,
			const uint8_t *payload, size_t len, uint8_t proof[FR_WIRE_PROOF_SIZE])
{
	struct fr_hmac_sha256 m;

	fr_hmac_sha256_init(&m, key, key_len);
	fr_hmac_sha256_update(&m, label, strlen(label) + 1);
	fr_hmac_sha256_update(&m, first, FR_WIRE_NONCE_SIZE);
	if (second)
		fr_hmac_sha256_update(&m, second, FR_WIRE_NONCE_SIZE);
	fr_hmac_sha256_update(&m, payload, len);
	fr_hmac_sha256_final(&m, proof);
}

/* payload_mac() of the HELLO's payload as encoded: an agent's proof and the daemon's. */
static int hello_mac(const uint8_t key[FR_WIRE_JOB_KEY_SIZE], const char *label,
		     const uint8_t first[FR_WIRE_NONCE_SIZE], const uint8_t *second,
		     const struct fr_msg_hello *hello, uint8_t proof[FR_WIRE_PROOF_SIZE])
{
	uint8_t frame[FR_WIRE_HEADER_SIZE + FR_WIRE_HELLO_MAX_PAYLOAD];
	int n;

	memset(proof, 0, FR_WIRE_PROOF_SIZE);
	n = fr_wire_hello_encode(hello, frame, sizeof(frame));
	if (n < 0)
		return -EINVAL;
	payload_mac(key, FR_WIRE_JOB_KEY_SIZE, label, first, second, frame + FR_WIRE_HEADER_SIZE,
		    (size_t)n - FR_WIRE_HEADER_SIZE, proof);
	return 0;
}

int fr_wire_node_proof(const struct fr_token *t, bool central,
		       const uint8_t first[FR_WIRE_NONCE_SIZE], const uint8_t *second,
		       const uint8_t *payload, size_t len, uint8_t proof[FR_WIRE_PROOF_SIZE])
{
	memset(proof, 0, FR_WIRE_PROOF_SIZE);
	if (!t->len)
		return -EINVAL;
	payload_mac(t->bytes, t->len, central ? "flightrec central" : "flightrec node", first,
		    second, payload, len, proof);
	return 0;
}

bool fr_wire_node_verify(const struct fr_token *t, bool central,
			 const uint8_t first[FR_WIRE_NONCE_SIZE], const uint8_t *second,
			 const uint8_t *payload, size_t len, const uint8_t proof[FR_WIRE_PROOF_SIZE])
{
	uint8_t want[FR_WIRE_PROOF_SIZE];
	bool ok = fr_wire_node_proof(t, central, first, second, payload, len, want) == 0 &&
		  fr_ct_equal(want, proof, sizeof(want));

	explicit_bzero(want, sizeof(want));
	return ok;
}

int fr_wire_auth_proof_key(const uint8_t key[FR_WIRE_JOB_KEY_SIZE],
			   const uint8_t nonce[FR_WIRE_NONCE_SIZE],
			   const struct fr_msg_hello *hello, uint8_t proof[FR_WIRE_PROOF_SIZE])
{
	return hello_mac(key, "flightrec hello", nonce, NULL, hello, proof);
}

int fr_wire_auth_proof(const struct fr_token *t, const uint8_t nonce[FR_WIRE_NONCE_SIZE],
		       const struct fr_msg_hello *hello, uint8_t proof[FR_WIRE_PROOF_SIZE])
{
	uint8_t key[FR_WIRE_JOB_KEY_SIZE];
	int err;

	memset(proof, 0, FR_WIRE_PROOF_SIZE);
	/* A HELLO whose job is too long to encode has no proof either. */
	err = fr_wire_job_key(t, hello->job, key);
	if (!err)
		err = fr_wire_auth_proof_key(key, nonce, hello, proof);
	explicit_bzero(key, sizeof(key));
	return err;
}

bool fr_wire_auth_verify(const struct fr_token *t, const uint8_t nonce[FR_WIRE_NONCE_SIZE],
			 const struct fr_msg_hello *hello, const uint8_t proof[FR_WIRE_PROOF_SIZE])
{
	uint8_t want[FR_WIRE_PROOF_SIZE];
	bool ok = fr_wire_auth_proof(t, nonce, hello, want) == 0 &&
		  fr_ct_equal(want, proof, sizeof(want));

	explicit_bzero(want, sizeof(want));
	return ok;
}

int fr_wire_daemon_proof_key(const uint8_t key[FR_WIRE_JOB_KEY_SIZE],
			     const uint8_t agent_nonce[FR_WIRE_NONCE_SIZE],
			     const uint8_t nonce[FR_WIRE_NONCE_SIZE],
			     const struct fr_msg_hello *hello, uint8_t proof[FR_WIRE_PROOF_SIZE])
{
	return hello_mac(key, "flightrec daemon", agent_nonce, nonce, hello, proof);
}

int fr_wire_daemon_proof(const struct fr_token *t, const uint8_t agent_nonce[FR_WIRE_NONCE_SIZE],
			 const uint8_t nonce[FR_WIRE_NONCE_SIZE], const struct fr_msg_hello *hello,
			 uint8_t proof[FR_WIRE_PROOF_SIZE])
{
	uint8_t key[FR_WIRE_JOB_KEY_SIZE];
	int err;

	memset(proof, 0, FR_WIRE_PROOF_SIZE);
	err = fr_wire_job_key(t, hello->job, key);
	if (!err)
		err = fr_wire_daemon_proof_key(key, agent_nonce, nonce, hello, proof);
	explicit_bzero(key, sizeof(key));
	return err;
}

bool fr_wire_daemon_verify_key(const uint8_t key[FR_WIRE_JOB_KEY_SIZE],
			       const uint8_t agent_nonce[FR_WIRE_NONCE_SIZE],
			       const uint8_t nonce[FR_WIRE_NONCE_SIZE],
			       const struct fr_msg_hello *hello,
			       const uint8_t proof[FR_WIRE_PROOF_SIZE])
{
	uint8_t want[FR_WIRE_PROOF_SIZE];
	bool ok = fr_wire_daemon_proof_key(key, agent_nonce, nonce, hello, want) == 0 &&
		  fr_ct_equal(want, proof, sizeof(want));

	explicit_bzero(want, sizeof(want));
	return ok;
}

/* The value of a hex digit, either case; -1 for any other character. */
static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int fr_wire_job_key_parse(const char *s, size_t len, uint8_t key[FR_WIRE_JOB_KEY_SIZE],
			  const char **why)
{
	memset(key, 0, FR_WIRE_JOB_KEY_SIZE);
	*why = NULL;
	if (len == 0)
		*why = "empty";
	else if (len < FR_WIRE_JOB_KEY_HEX)
		*why = "shorter than 64 hex digits";
	else if (len > FR_WIRE_JOB_KEY_HEX)
		*why = "longer than 64 hex digits";
	for (size_t i = 0; !*why && i < FR_WIRE_JOB_KEY_HEX; i += 2) {
		int hi = hex_value(s[i]), lo = hex_value(s[i + 1]);

		if (hi < 0 || lo < 0)
			*why = "holds a character that is not a hex digit";
		else
			key[i / 2] = (uint8_t)(hi << 4 | lo);
	}
	if (!*why)
		return 0;
	explicit_bzero(key, FR_WIRE_JOB_KEY_SIZE);
	return -EINVAL;
}

void fr_wire_job_key_hex(const uint8_t key[FR_WIRE_JOB_KEY_SIZE],
			 char hex[FR_WIRE_JOB_KEY_HEX + 1])
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < FR_WIRE_JOB_KEY_SIZE; i++) {
		hex[2 * i] = digits[key[i] >> 4];
		hex[2 * i + 1] = digits[key[i] & 0xf];
	}
	hex[FR_WIRE_JOB_KEY_HEX] = '\0';
}

int fr_wire_job_key_read(const char *path, uint8_t key[FR_WIRE_JOB_KEY_SIZE], const char **why,
			 bool *others_can_read)
{
	/* One digit over and its newline tell a key that is too long. */
	char buf[FR_WIRE_JOB_KEY_HEX + 2];
	size_t len;
	int err;

	memset(key, 0, FR_WIRE_JOB_KEY_SIZE);
	err = read_secret(path, sizeof(buf), "longer than 64 hex digits", buf, &len, why,
			  others_can_read);
	if (!err)
		err = fr_wire_job_key_parse(buf, len, key, why);
	explicit_bzero(buf, sizeof(buf));
	return err;
}
