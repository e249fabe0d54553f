/*
 * Unit tests of authentication (protocol/auth.c, and the SHA-256 and
 * HMAC-SHA256 of protocol/sha256.h it is made of): the hashes against
 * their standards' test vectors, token files, the proof of PROTOCOL.md's
 * worked example, the daemon's proof, job keys (the proof from a key, a
 * key of one job refused for another, key files) and the small-file
 * reader. Moved here from test_wire.c with the code they test.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cmocka.h>

#include "auth.h"
#include "sha256.h"
#include "wire.h"
#include "wire_samples.h"

static int all_zero(const void *p, size_t n)
{
	const uint8_t *c = p;

	for (size_t i = 0; i < n; i++)
		if (c[i])
			return 0;
	return 1;
}

/* SHA-256 and HMAC-SHA256 */

static void hex(const char *s, uint8_t *out, size_t n)
{
	assert_int_equal(strlen(s), 2 * n);
	for (size_t i = 0; i < n; i++) {
		unsigned v;

		assert_int_equal(sscanf(s + 2 * i, "%2x", &v), 1);
		out[i] = (uint8_t)v;
	}
}

static void expect_digest(const uint8_t *got, const char *want, size_t n)
{
	uint8_t w[FR_SHA256_SIZE];

	hex(want, w, n);
	assert_memory_equal(got, w, n);
}

/* FIPS 180-4's examples (and the empty message), fed whole and in pieces. */
static void test_sha256_vectors(void **state)
{
	static const struct {
		const char *msg;
		const char *digest;
	} v[] = {
		{ "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" },
		{ "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" },
		{ "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
		  "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1" },
		{ "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
		  "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1" },
	};
	static uint8_t million[1000000];
	uint8_t out[FR_SHA256_SIZE];
	struct fr_sha256 sha;

	(void)state;
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		size_t len = strlen(v[i].msg);

		fr_sha256(v[i].msg, len, out);
		expect_digest(out, v[i].digest, sizeof(out));
		/* One byte at a time crosses every block boundary. */
		fr_sha256_init(&sha);
		for (size_t k = 0; k < len; k++)
			fr_sha256_update(&sha, v[i].msg + k, 1);
		fr_sha256_final(&sha, out);
		expect_digest(out, v[i].digest, sizeof(out));
	}
	/* A million 'a', in uneven pieces. */
	memset(million, 'a', sizeof(million));
	fr_sha256_init(&sha);
	for (size_t off = 0, step = 1; off < sizeof(million); off += step, step = step * 3 % 1000 + 1)
		fr_sha256_update(&sha, million + off,
				 step < sizeof(million) - off ? step : sizeof(million) - off);
	fr_sha256_final(&sha, out);
	expect_digest(out, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0",
		      sizeof(out));
	/* Lengths around the padding boundary: 55 bytes fit one block, 56 need two. */
	fr_sha256(million, 55, out);
	expect_digest(out, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318",
		      sizeof(out));
	fr_sha256(million, 56, out);
	expect_digest(out, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a",
		      sizeof(out));
	fr_sha256(million, 64, out);
	expect_digest(out, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb",
		      sizeof(out));
}

/* RFC 4231, test cases 1 to 7 (case 5 compares its first 128 bits). */
static void test_hmac_rfc4231(void **state)
{
	static uint8_t key_aa[131], data_dd[50], data_cd[50], key_19[25];
	static const struct {
		const uint8_t *key;
		size_t key_len;
		const char *data; /* NULL: the `bytes` data below */
		const uint8_t *bytes;
		size_t len;
		const char *mac;
	} v[] = {
		{ (const uint8_t *)"\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b",
		  20, "Hi There", NULL, 0,
		  "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7" },
		{ (const uint8_t *)"Jefe", 4, "what do ya want for nothing?", NULL, 0,
		  "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843" },
		{ key_aa, 20, NULL, data_dd, sizeof(data_dd),
		  "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe" },
		{ key_19, sizeof(key_19), NULL, data_cd, sizeof(data_cd),
		  "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b" },
		{ (const uint8_t *)"\x0c\x0c\x0c\x0c\x0c\x0c\x0c\x0c\x0c\x0c\x0c\x0c\x0c\x0c\x0c\x0c\x0c\x0c\x0c\x0c",
		  20, "Test With Truncation", NULL, 0, "a3b6167473100ee06e0c796c2955552b" },
		{ key_aa, sizeof(key_aa), "Test Using Larger Than Block-Size Key - Hash Key First", NULL, 0,
		  "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54" },
		{ key_aa, sizeof(key_aa),
		  "This is a test using a larger than block-size key and a larger than block-size data. The key needs to be hashed before being used by the HMAC algorithm.",
		  NULL, 0, "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2" },
	};
	uint8_t out[FR_SHA256_SIZE];

	(void)state;
	memset(key_aa, 0xaa, sizeof(key_aa));
	memset(data_dd, 0xdd, sizeof(data_dd));
	memset(data_cd, 0xcd, sizeof(data_cd));
	for (size_t i = 0; i < sizeof(key_19); i++)
		key_19[i] = (uint8_t)(i + 1);
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		const void *data = v[i].data ? (const void *)v[i].data : (const void *)v[i].bytes;
		size_t len = v[i].data ? strlen(v[i].data) : v[i].len;

		fr_hmac_sha256(v[i].key, v[i].key_len, data, len, out);
		expect_digest(out, v[i].mac, strlen(v[i].mac) / 2);
	}
}

static void test_ct_equal(void **state)
{
	uint8_t a[32], b[32];

	(void)state;
	memset(a, 7, sizeof(a));
	memcpy(b, a, sizeof(b));
	assert_true(fr_ct_equal(a, b, sizeof(a)));
	assert_true(fr_ct_equal(a, b, 0));
	for (size_t i = 0; i < sizeof(a); i++) {
		b[i] ^= 0x80;
		assert_false(fr_ct_equal(a, b, sizeof(a)));
		b[i] ^= 0x80;
	}
}

/* Token files and proofs */

static char token_dir[] = "/tmp/fr-test-wire-XXXXXX";

static const char *token_file(const char *name, const void *data, size_t len, mode_t mode)
{
	static char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", token_dir, name);
	f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(chmod(path, mode), 0);
	return path;
}

/* Reads a token file: 0 or the error, and the reason or NULL. */
static int read_token(const char *path, struct fr_token *t, const char **why, bool *others)
{
	memset(t, 0xa5, sizeof(*t));
	return fr_wire_token_read(path, t, why, others);
}

static void test_token_read(void **state)
{
	static const char *const names[] = { "nl", "bare", "two", "short", "empty", "space",
					     "crlf", "max", "over", "open", "fifo" };
	char big[FR_TOKEN_MAX + 2];
	struct fr_token t;
	const char *why;
	const char *path;
	bool others;

	(void)state;
	assert_non_null(mkdtemp(token_dir));

	/* One trailing newline is not part of the token. */
	path = token_file("nl", "0123456789abcdef\n", 17, 0600);
	assert_int_equal(read_token(path, &t, &why, &others), 0);
	assert_int_equal(t.len, 16);
	assert_memory_equal(t.bytes, "0123456789abcdef", 16);
	assert_false(others);
	/* Without one, the same; with two, the second one is a byte not allowed. */
	path = token_file("bare", "0123456789abcdef", 16, 0640);
	assert_int_equal(read_token(path, &t, &why, &others), 0);
	assert_int_equal(t.len, 16);
	assert_false(others);
	path = token_file("two", "0123456789abcdef\n\n", 18, 0600);
	assert_int_equal(read_token(path, &t, &why, &others), -EINVAL);
	assert_non_null(why);
	assert_int_equal(t.len, 0);
	/* Too short, empty, a space, a carriage return. */
	path = token_file("short", "0123456789abcde\n", 16, 0600);
	assert_int_equal(read_token(path, &t, &why, &others), -EINVAL);
	assert_string_equal(why, "shorter than 16 bytes");
	path = token_file("empty", "\n", 1, 0600);
	assert_int_equal(read_token(path, &t, &why, &others), -EINVAL);
	assert_string_equal(why, "empty");
	path = token_file("space", "0123456789 abcdef", 17, 0600);
	assert_int_equal(read_token(path, &t, &why, &others), -EINVAL);
	path = token_file("crlf", "0123456789abcdef\r\n", 18, 0600);
	assert_int_equal(read_token(path, &t, &why, &others), -EINVAL);
	/* The longest token, and one byte more. */
	memset(big, 'x', sizeof(big));
	path = token_file("max", big, FR_TOKEN_MAX, 0600);
	assert_int_equal(read_token(path, &t, &why, &others), 0);
	assert_int_equal(t.len, FR_TOKEN_MAX);
	path = token_file("over", big, FR_TOKEN_MAX + 1, 0600);
	assert_int_equal(read_token(path, &t, &why, &others), -EINVAL);
	assert_string_equal(why, "longer than 1024 bytes");
	assert_int_equal(t.len, 0);
	/* Readable by everyone: read, and said. */
	path = token_file("open", "0123456789abcdef", 16, 0644);
	assert_int_equal(read_token(path, &t, &why, &others), 0);
	assert_true(others);
	/* Missing, a directory, a FIFO (which must not block). */
	snprintf(big, sizeof(big), "%s/missing", token_dir);
	assert_int_equal(read_token(big, &t, &why, &others), -ENOENT);
	assert_null(why);
	assert_int_equal(read_token(token_dir, &t, &why, &others), -EINVAL);
	assert_string_equal(why, "not a regular file");
	snprintf(big, sizeof(big), "%s/fifo", token_dir);
	assert_int_equal(mkfifo(big, 0600), 0);
	assert_int_equal(read_token(big, &t, &why, &others), -EINVAL);

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(big, sizeof(big), "%s/%s", token_dir, names[i]);
		unlink(big);
	}
	rmdir(token_dir);
}

static void set_token(struct fr_token *t, const char *s)
{
	memset(t, 0, sizeof(*t));
	t->len = strlen(s);
	memcpy(t->bytes, s, t->len);
}

static void test_token_equal(void **state)
{
	struct fr_token t;

	(void)state;
	set_token(&t, "0123456789abcdef");
	assert_true(fr_wire_token_equal(&t, "0123456789abcdef", 16));
	assert_false(fr_wire_token_equal(&t, "0123456789abcdeF", 16));
	assert_false(fr_wire_token_equal(&t, "0123456789abcde", 15));
	assert_false(fr_wire_token_equal(&t, "0123456789abcdef0", 17));
	assert_false(fr_wire_token_equal(&t, "", 0));
	memset(&t, 0, sizeof(t));
	assert_false(fr_wire_token_equal(&t, "", 0));
}

/* PROTOCOL.md's worked example of a proof, byte for byte. */
static void test_auth_proof_example(void **state)
{
	static const uint8_t expect[FR_WIRE_PROOF_SIZE] = {
		0x79, 0x01, 0x96, 0x32, 0xb8, 0xf2, 0x11, 0x12, 0xf8, 0x44, 0x96,
		0x9b, 0x46, 0xcb, 0x40, 0x86, 0xb4, 0x7a, 0xa1, 0x33, 0xf2, 0x38,
		0x76, 0xd8, 0x16, 0xd9, 0x8f, 0xe6, 0x3a, 0xe0, 0xf6, 0xa8,
	};
	struct fr_msg_challenge c;
	struct fr_msg_hello h;
	struct fr_token t;
	uint8_t proof[FR_WIRE_PROOF_SIZE];

	(void)state;
	set_token(&t, "flightrec-example-token-0123456789");
	sample_challenge(&c);
	sample_hello(&h);
	assert_int_equal(fr_wire_auth_proof(&t, c.nonce, &h, proof), 0);
	assert_memory_equal(proof, expect, sizeof(expect));
	assert_true(fr_wire_auth_verify(&t, c.nonce, &h, proof));
}

/*
 * The daemon's proof (DAEMON_PROOF): the same from the token as from the
 * job's key, bound to both nonces and the HELLO, and never the agent's
 * proof for the same nonces, so a peer that reflects proofs proves nothing.
 */
static void test_daemon_proof(void **state)
{
	struct fr_msg_challenge c;
	struct fr_msg_daemon_challenge dc;
	struct fr_msg_hello h;
	struct fr_token t, other;
	uint8_t key[FR_WIRE_JOB_KEY_SIZE], proof[FR_WIRE_PROOF_SIZE], agent[FR_WIRE_PROOF_SIZE];

	(void)state;
	set_token(&t, "flightrec-example-token-0123456789");
	set_token(&other, "flightrec-other-token-0123456789");
	sample_challenge(&c);
	sample_daemon_challenge(&dc);
	sample_hello(&h);
	assert_int_equal(fr_wire_daemon_proof(&t, dc.nonce, c.nonce, &h, proof), 0);
	assert_int_equal(fr_wire_job_key(&t, h.job, key), 0);
	assert_true(fr_wire_daemon_verify_key(key, dc.nonce, c.nonce, &h, proof));
	/* Another agent nonce (a replayed proof), the nonces swapped, another
	 * HELLO, another token: refused. */
	assert_false(fr_wire_daemon_verify_key(key, c.nonce, c.nonce, &h, proof));
	assert_false(fr_wire_daemon_verify_key(key, c.nonce, dc.nonce, &h, proof));
	h.rank++;
	assert_false(fr_wire_daemon_verify_key(key, dc.nonce, c.nonce, &h, proof));
	h.rank--;
	assert_int_equal(fr_wire_job_key(&other, h.job, key), 0);
	assert_false(fr_wire_daemon_verify_key(key, dc.nonce, c.nonce, &h, proof));
	/* Not the agent's proof for either nonce. */
	assert_int_equal(fr_wire_auth_proof(&t, c.nonce, &h, agent), 0);
	assert_memory_not_equal(agent, proof, sizeof(proof));
	assert_int_equal(fr_wire_auth_proof(&t, dc.nonce, &h, agent), 0);
	assert_memory_not_equal(agent, proof, sizeof(proof));
	/* No token, no proof. */
	memset(&other, 0, sizeof(other));
	assert_int_equal(fr_wire_daemon_proof(&other, dc.nonce, c.nonce, &h, proof), -EINVAL);
}

/*
 * A proof holds for one token, one nonce and one HELLO: replayed on another
 * connection (another nonce), or with any field of the HELLO changed, it is
 * refused; so is any single bit flipped in it.
 */
static void test_auth_proof_binds(void **state)
{
	struct fr_msg_challenge c;
	struct fr_msg_hello h, other;
	struct fr_token t, t2;
	uint8_t proof[FR_WIRE_PROOF_SIZE];
	uint8_t nonce2[FR_WIRE_NONCE_SIZE];

	(void)state;
	set_token(&t, "flightrec-example-token-0123456789");
	set_token(&t2, "flightrec-example-token-0123456788");
	sample_challenge(&c);
	sample_hello(&h);
	assert_int_equal(fr_wire_auth_proof(&t, c.nonce, &h, proof), 0);
	assert_true(fr_wire_auth_verify(&t, c.nonce, &h, proof));
	assert_false(fr_wire_auth_verify(&t2, c.nonce, &h, proof));
	memcpy(nonce2, c.nonce, sizeof(nonce2));
	nonce2[31] ^= 1;
	assert_false(fr_wire_auth_verify(&t, nonce2, &h, proof));
	for (int field = 0; field < 8; field++) {
		other = h;
		switch (field) {
		case 0: strcpy(other.job, "job-43"); break;
		case 1: other.rank = 4; break;
		case 2: other.world_size = 9; break;
		case 3: other.pid = 123457; break;
		case 4: strcpy(other.host, "node-b.cluster"); break;
		case 5: other.ring_capacity = 2001; break;
		case 6: other.start_ns++; break;
		case 7: strcpy(other.comm_lib, "Open MPI v4.1.5"); break;
		}
		if (fr_wire_auth_verify(&t, c.nonce, &other, proof))
			fail_msg("a proof held with HELLO field %d changed", field);
	}
	for (unsigned bit = 0; bit < 8 * FR_WIRE_PROOF_SIZE; bit++) {
		proof[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		assert_false(fr_wire_auth_verify(&t, c.nonce, &h, proof));
		proof[bit / 8] ^= (uint8_t)(1u << (bit % 8));
	}
	/* No token, or a HELLO that cannot be encoded: no proof. */
	memset(&t2, 0, sizeof(t2));
	assert_int_equal(fr_wire_auth_proof(&t2, c.nonce, &h, proof), -EINVAL);
	assert_true(all_zero(proof, sizeof(proof)));
	assert_false(fr_wire_auth_verify(&t2, c.nonce, &h, proof));
	other = h;
	memset(other.job, 'j', sizeof(other.job));
	assert_int_equal(fr_wire_auth_proof(&t, c.nonce, &other, proof), -EINVAL);
}

/* Job keys and the small-file reader */

/* flightrecd --job-key job-42 with the worked example's token, as PROTOCOL.md gives it. */
static const char example_job_key_hex[] =
	"dce0aff9428a8eb01ba7e4562eb96ba4a31b611be4d3e4715ba2fa07b8f551c2";

/*
 * The key of a job proves what the token proves, for that job: the proof
 * made from it is the token's proof byte for byte, and PROTOCOL.md's key.
 */
static void test_job_key_proof(void **state)
{
	struct fr_msg_challenge c;
	struct fr_msg_hello h;
	struct fr_token t;
	uint8_t key[FR_WIRE_JOB_KEY_SIZE], want_key[FR_WIRE_JOB_KEY_SIZE];
	uint8_t from_token[FR_WIRE_PROOF_SIZE], from_key[FR_WIRE_PROOF_SIZE];
	const char *why;

	(void)state;
	set_token(&t, "flightrec-example-token-0123456789");
	sample_challenge(&c);
	sample_hello(&h);
	assert_int_equal(fr_wire_job_key(&t, "job-42", key), 0);
	assert_int_equal(fr_wire_job_key_parse(example_job_key_hex, FR_WIRE_JOB_KEY_HEX, want_key,
					       &why), 0);
	assert_memory_equal(key, want_key, sizeof(key));
	assert_int_equal(fr_wire_auth_proof(&t, c.nonce, &h, from_token), 0);
	assert_int_equal(fr_wire_auth_proof_key(key, c.nonce, &h, from_key), 0);
	assert_memory_equal(from_key, from_token, sizeof(from_key));
	assert_true(fr_wire_auth_verify(&t, c.nonce, &h, from_key));
}

/*
 * A key made for job A proves nothing for job B, whatever else of the
 * HELLO is kept; nor does a key made from another token. No token, or a
 * job id too long to be one, gives no key.
 */
static void test_job_key_one_job(void **state)
{
	struct fr_msg_challenge c;
	struct fr_msg_hello a, b;
	struct fr_token t, t2;
	uint8_t key_a[FR_WIRE_JOB_KEY_SIZE], key_b[FR_WIRE_JOB_KEY_SIZE];
	uint8_t proof[FR_WIRE_PROOF_SIZE];
	char job[FR_JOB_MAX + 2];

	(void)state;
	set_token(&t, "flightrec-example-token-0123456789");
	set_token(&t2, "flightrec-example-token-0123456788");
	sample_challenge(&c);
	sample_hello(&a);
	b = a;
	strcpy(b.job, "job-43");
	assert_int_equal(fr_wire_job_key(&t, a.job, key_a), 0);
	assert_int_equal(fr_wire_job_key(&t, b.job, key_b), 0);
	assert_memory_not_equal(key_a, key_b, sizeof(key_a));
	/* A's key, B's HELLO: refused. A's key, A's HELLO: accepted. */
	assert_int_equal(fr_wire_auth_proof_key(key_a, c.nonce, &b, proof), 0);
	assert_false(fr_wire_auth_verify(&t, c.nonce, &b, proof));
	assert_int_equal(fr_wire_auth_proof_key(key_a, c.nonce, &a, proof), 0);
	assert_true(fr_wire_auth_verify(&t, c.nonce, &a, proof));
	/* The same job's key from another token (a rotated one): refused. */
	assert_int_equal(fr_wire_job_key(&t2, a.job, key_b), 0);
	assert_int_equal(fr_wire_auth_proof_key(key_b, c.nonce, &a, proof), 0);
	assert_false(fr_wire_auth_verify(&t, c.nonce, &a, proof));
	/* A job id that differs only past a prefix, or by case. */
	strcpy(b.job, "job-4");
	assert_int_equal(fr_wire_auth_proof_key(key_a, c.nonce, &b, proof), 0);
	assert_false(fr_wire_auth_verify(&t, c.nonce, &b, proof));
	strcpy(b.job, "JOB-42");
	assert_int_equal(fr_wire_auth_proof_key(key_a, c.nonce, &b, proof), 0);
	assert_false(fr_wire_auth_verify(&t, c.nonce, &b, proof));

	/* The longest job id has a key; one character more has none. */
	memset(job, 'j', sizeof(job));
	job[FR_JOB_MAX] = '\0';
	assert_int_equal(fr_wire_job_key(&t, job, key_a), 0);
	job[FR_JOB_MAX] = 'j';
	job[FR_JOB_MAX + 1] = '\0';
	assert_int_equal(fr_wire_job_key(&t, job, key_a), -EINVAL);
	assert_true(all_zero(key_a, sizeof(key_a)));
	memset(&t2, 0, sizeof(t2));
	memset(key_a, 0xa5, sizeof(key_a));
	assert_int_equal(fr_wire_job_key(&t2, "job-42", key_a), -EINVAL);
	assert_true(all_zero(key_a, sizeof(key_a)));
	/* A HELLO that cannot be encoded has no proof from a key either. */
	memset(b.job, 'j', sizeof(b.job));
	memset(proof, 0xa5, sizeof(proof));
	assert_int_equal(fr_wire_auth_proof_key(key_b, c.nonce, &b, proof), -EINVAL);
	assert_true(all_zero(proof, sizeof(proof)));
}

/* Parses `s` as a key: 0 or the error; on failure the key must be zeroed. */
static int parse_key(const char *s, size_t len, uint8_t key[FR_WIRE_JOB_KEY_SIZE],
		     const char **why)
{
	int rc;

	memset(key, 0xa5, FR_WIRE_JOB_KEY_SIZE);
	rc = fr_wire_job_key_parse(s, len, key, why);
	if (rc)
		assert_true(all_zero(key, FR_WIRE_JOB_KEY_SIZE));
	return rc;
}

/* The hex a key is printed as (flightrecd --job-key, fr-analyze's bearer)
 * is the documented example's, lowercase, and parses back to the key. */
static void test_job_key_hex(void **state)
{
	struct fr_token t;
	uint8_t key[FR_WIRE_JOB_KEY_SIZE], back[FR_WIRE_JOB_KEY_SIZE];
	char hex[FR_WIRE_JOB_KEY_HEX + 1];
	const char *why;

	(void)state;
	set_token(&t, "flightrec-example-token-0123456789");
	assert_int_equal(fr_wire_job_key(&t, "job-42", key), 0);
	memset(hex, 'x', sizeof(hex));
	fr_wire_job_key_hex(key, hex);
	assert_string_equal(hex, example_job_key_hex);
	assert_int_equal(fr_wire_job_key_parse(hex, strlen(hex), back, &why), 0);
	assert_memory_equal(back, key, sizeof(key));
}

static void test_job_key_parse(void **state)
{
	char text[FR_WIRE_JOB_KEY_HEX + 2];
	uint8_t key[FR_WIRE_JOB_KEY_SIZE], upper[FR_WIRE_JOB_KEY_SIZE];
	const char *why;

	(void)state;
	assert_int_equal(parse_key(example_job_key_hex, 64, key, &why), 0);
	assert_null(why);
	assert_int_equal(key[0], 0xdc);
	assert_int_equal(key[1], 0xe0);
	assert_int_equal(key[31], 0xc2);
	/* Uppercase is the same key. */
	for (size_t i = 0; i < 64; i++)
		text[i] = (char)(example_job_key_hex[i] >= 'a' ? example_job_key_hex[i] - 32 :
								  example_job_key_hex[i]);
	assert_int_equal(parse_key(text, 64, upper, &why), 0);
	assert_memory_equal(upper, key, sizeof(key));
	/* 63 and 65 digits, none. */
	assert_int_equal(parse_key(example_job_key_hex, 63, key, &why), -EINVAL);
	assert_string_equal(why, "shorter than 64 hex digits");
	memcpy(text, example_job_key_hex, 64);
	text[64] = '0';
	assert_int_equal(parse_key(text, 65, key, &why), -EINVAL);
	assert_string_equal(why, "longer than 64 hex digits");
	assert_int_equal(parse_key("", 0, key, &why), -EINVAL);
	assert_string_equal(why, "empty");
	/* A character that is not a hex digit, first, last, in either nibble. */
	static const char bad[] = { 'g', 'G', ' ', '\n', '\0', 'x', '/', ':', '@', '`' };
	for (size_t b = 0; b < sizeof(bad); b++) {
		for (size_t pos = 0; pos < 64; pos += 21) {
			memcpy(text, example_job_key_hex, 64);
			text[pos] = bad[b];
			assert_int_equal(parse_key(text, 64, key, &why), -EINVAL);
			assert_string_equal(why, "holds a character that is not a hex digit");
		}
		memcpy(text, example_job_key_hex, 64);
		text[63] = bad[b];
		assert_int_equal(parse_key(text, 64, key, &why), -EINVAL);
	}
}

static char key_dir[] = "/tmp/fr-test-wire-key-XXXXXX";

static const char *key_file(const char *name, const void *data, size_t len, mode_t mode)
{
	static char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", key_dir, name);
	f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(chmod(path, mode), 0);
	return path;
}

/* Reads a key file: 0 or the error; on failure the key must be zeroed. */
static int read_key(const char *path, uint8_t key[FR_WIRE_JOB_KEY_SIZE], const char **why,
		    bool *others)
{
	int rc;

	memset(key, 0xa5, FR_WIRE_JOB_KEY_SIZE);
	rc = fr_wire_job_key_read(path, key, why, others);
	if (rc)
		assert_true(all_zero(key, FR_WIRE_JOB_KEY_SIZE));
	return rc;
}

static void test_job_key_read(void **state)
{
	static const char *const names[] = { "nl", "bare", "two", "short", "long", "big",
					     "crlf", "open", "fifo" };
	char text[512];
	uint8_t key[FR_WIRE_JOB_KEY_SIZE], want[FR_WIRE_JOB_KEY_SIZE];
	const char *why;
	const char *path;
	bool others;

	(void)state;
	assert_non_null(mkdtemp(key_dir));
	assert_int_equal(fr_wire_job_key_parse(example_job_key_hex, 64, want, &why), 0);

	/* What flightrecd --job-key prints (one newline), and without it. */
	snprintf(text, sizeof(text), "%s\n", example_job_key_hex);
	path = key_file("nl", text, 65, 0600);
	assert_int_equal(read_key(path, key, &why, &others), 0);
	assert_memory_equal(key, want, sizeof(key));
	assert_false(others);
	path = key_file("bare", example_job_key_hex, 64, 0600);
	assert_int_equal(read_key(path, key, &why, &others), 0);
	assert_memory_equal(key, want, sizeof(key));
	/* A second newline, a carriage return, a digit short or over. */
	snprintf(text, sizeof(text), "%s\n\n", example_job_key_hex);
	path = key_file("two", text, 66, 0600);
	assert_int_equal(read_key(path, key, &why, &others), -EINVAL);
	assert_string_equal(why, "longer than 64 hex digits");
	snprintf(text, sizeof(text), "%s\r\n", example_job_key_hex);
	path = key_file("crlf", text, 66, 0600);
	assert_int_equal(read_key(path, key, &why, &others), -EINVAL);
	snprintf(text, sizeof(text), "%.63s\n", example_job_key_hex);
	path = key_file("short", text, 64, 0600);
	assert_int_equal(read_key(path, key, &why, &others), -EINVAL);
	assert_string_equal(why, "shorter than 64 hex digits");
	snprintf(text, sizeof(text), "%s0\n", example_job_key_hex);
	path = key_file("long", text, 66, 0600);
	assert_int_equal(read_key(path, key, &why, &others), -EINVAL);
	assert_string_equal(why, "longer than 64 hex digits");
	/* A file far too big (the token, say) is refused by its size. */
	memset(text, 'a', sizeof(text));
	path = key_file("big", text, sizeof(text), 0600);
	assert_int_equal(read_key(path, key, &why, &others), -EINVAL);
	assert_string_equal(why, "longer than 64 hex digits");
	/* Readable by everyone: read, and said. */
	path = key_file("open", example_job_key_hex, 64, 0644);
	assert_int_equal(read_key(path, key, &why, &others), 0);
	assert_true(others);
	/* Missing, a directory, a FIFO (which must not block). */
	snprintf(text, sizeof(text), "%s/missing", key_dir);
	assert_int_equal(read_key(text, key, &why, &others), -ENOENT);
	assert_null(why);
	assert_int_equal(read_key(key_dir, key, &why, &others), -EINVAL);
	assert_string_equal(why, "not a regular file");
	snprintf(text, sizeof(text), "%s/fifo", key_dir);
	assert_int_equal(mkfifo(text, 0600), 0);
	assert_int_equal(read_key(text, key, &why, &others), -EINVAL);
	assert_string_equal(why, "not a regular file");

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(text, sizeof(text), "%s/%s", key_dir, names[i]);
		unlink(text);
	}
	rmdir(key_dir);
}

/* The reader behind token, key and config files, at its bounds. */
static void test_read_small_file(void **state)
{
	static char dir[] = "/tmp/fr-test-wire-file-XXXXXX";
	char path[PATH_MAX], fifo[PATH_MAX], empty[PATH_MAX];
	struct stat st;
	char *data;
	size_t len;
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/ten", dir);
	f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite("0123456789", 1, 10, f), 10);
	assert_int_equal(fclose(f), 0);

	/* Exactly the limit: read whole, NUL-terminated, with its fstat(). */
	assert_int_equal(fr_read_small_file(path, 10, &data, &len, &st), 0);
	assert_int_equal(len, 10);
	assert_string_equal(data, "0123456789");
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_size, 10);
	free(data);
	/* One byte over the limit. */
	data = (char *)path;
	assert_int_equal(fr_read_small_file(path, 9, &data, &len, NULL), -EFBIG);
	assert_null(data);
	assert_int_equal(len, 0);
	/* Empty: an empty string, not an error. */
	snprintf(empty, sizeof(empty), "%s/empty", dir);
	f = fopen(empty, "wb");
	assert_non_null(f);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(fr_read_small_file(empty, 10, &data, &len, NULL), 0);
	assert_int_equal(len, 0);
	assert_string_equal(data, "");
	free(data);
	/* A FIFO without a writer, a directory, nothing. */
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	assert_int_equal(fr_read_small_file(fifo, 10, &data, &len, NULL), -EINVAL);
	assert_null(data);
	assert_int_equal(fr_read_small_file(dir, 10, &data, &len, NULL), -EINVAL);
	unlink(fifo);
	assert_int_equal(fr_read_small_file(fifo, 10, &data, &len, NULL), -ENOENT);

	unlink(path);
	unlink(empty);
	rmdir(dir);
}

/*
 * A node daemon's proofs (--upstream) come from the token itself and bind
 * the nonces and NODE_HELLO's payload; the node's and the central
 * daemon's differ, and neither is an agent's.
 */
static void test_node_proofs(void **state)
{
	static const uint8_t payload[] = "node-hello-payload";
	struct fr_msg_challenge c;
	struct fr_msg_daemon_challenge dc;
	struct fr_token t, other, none = { 0 };
	uint8_t node[FR_WIRE_PROOF_SIZE], central[FR_WIRE_PROOF_SIZE];

	(void)state;
	set_token(&t, "flightrec-example-token-0123456789");
	set_token(&other, "flightrec-other-token-0123456789");
	sample_challenge(&c);
	sample_daemon_challenge(&dc);
	assert_int_equal(fr_wire_node_proof(&t, false, c.nonce, NULL, payload, sizeof(payload), node), 0);
	assert_true(fr_wire_node_verify(&t, false, c.nonce, NULL, payload, sizeof(payload), node));
	assert_int_equal(fr_wire_node_proof(&t, true, dc.nonce, c.nonce, payload, sizeof(payload),
					    central), 0);
	assert_true(fr_wire_node_verify(&t, true, dc.nonce, c.nonce, payload, sizeof(payload),
					central));
	assert_memory_not_equal(node, central, sizeof(node));
	/* Another token, another nonce, another payload, the other side's label: refused. */
	assert_false(fr_wire_node_verify(&other, false, c.nonce, NULL, payload, sizeof(payload), node));
	assert_false(fr_wire_node_verify(&t, false, dc.nonce, NULL, payload, sizeof(payload), node));
	assert_false(fr_wire_node_verify(&t, false, c.nonce, NULL, payload, sizeof(payload) - 1, node));
	assert_false(fr_wire_node_verify(&t, true, c.nonce, NULL, payload, sizeof(payload), node));
	assert_false(fr_wire_node_verify(&t, true, c.nonce, dc.nonce, payload, sizeof(payload),
					 central));
	/* No token, no proof. */
	assert_int_equal(fr_wire_node_proof(&none, false, c.nonce, NULL, payload, sizeof(payload), node),
			 -EINVAL);
	assert_false(fr_wire_node_verify(&none, false, c.nonce, NULL, payload, sizeof(payload), node));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_daemon_proof),
		cmocka_unit_test(test_sha256_vectors),
		cmocka_unit_test(test_hmac_rfc4231),
		cmocka_unit_test(test_ct_equal),
		cmocka_unit_test(test_token_read),
		cmocka_unit_test(test_token_equal),
		cmocka_unit_test(test_auth_proof_example),
		cmocka_unit_test(test_auth_proof_binds),
		cmocka_unit_test(test_job_key_proof),
		cmocka_unit_test(test_job_key_one_job),
		cmocka_unit_test(test_job_key_hex),
		cmocka_unit_test(test_job_key_parse),
		cmocka_unit_test(test_job_key_read),
		cmocka_unit_test(test_read_small_file),
		cmocka_unit_test(test_node_proofs),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
