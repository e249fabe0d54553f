/*
 * What the agent and the daemon must agree on beyond bytes: what a token
 * or a job key file may hold, and how each side proves that it holds one
 * (protocol/PROTOCOL.md, versions 2 and 3). The frames that carry nonces
 * and proofs (CHALLENGE, AUTH, DAEMON_CHALLENGE, DAEMON_PROOF) are wire.h's;
 * this is what goes into them. HMAC-SHA256 itself is sha256.h's.
 *
 * The small-file reader is here too: token and key files are read with it,
 * and so is the daemon's --config file, so that every file of secrets or
 * settings is refused for the same reasons.
 */
#ifndef FR_AUTH_H
#define FR_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire.h"

/*
 * Reads a small regular file whole, the way every file of secrets or
 * settings is read: opened without waiting (a FIFO has no writer to wait
 * for, a device is refused), refused unless it is a regular file, refused
 * when larger than `max` bytes (-EFBIG, also when it grows past `max`
 * while being read). On success `*data` is a NUL-terminated copy of the
 * `*len` bytes read, which the caller owns and frees, wiping it first
 * when it held a secret; `st`, when not NULL, receives the file's fstat().
 * Returns 0, -EINVAL for a file that is not a regular file, -EFBIG,
 * -ENOMEM or the errno of open() or read(); on failure `*data` is NULL.
 */
struct stat;
int fr_read_small_file(const char *path, size_t max, char **data, size_t *len,
		       struct stat *st);

/*
 * The shared token of a daemon and its agents (flightrecd --token-file,
 * FLIGHTREC_TOKEN_FILE): FR_TOKEN_MIN to FR_TOKEN_MAX bytes of printable
 * ASCII without spaces, so that it can also travel as an HTTP bearer token.
 */
#define FR_TOKEN_MIN 16
#define FR_TOKEN_MAX 1024
struct fr_token {
	size_t len;                     /* 0: no token */
	uint8_t bytes[FR_TOKEN_MAX];
};

/*
 * Reads a token file: its bytes, less one trailing newline. Never blocks on
 * a FIFO or a device (only a regular file is read). Returns 0, or a
 * negative errno: -EINVAL with `*why` naming what is wrong with the file's
 * contents (too short, too long, a byte not allowed), other errors from
 * opening or reading it (`*why` NULL: say strerror()). `*others_can_read`
 * tells whether the file's mode lets users other than its owner and group
 * read it, which callers warn about. On failure `t` is empty.
 */
int fr_wire_token_read(const char *path, struct fr_token *t, const char **why,
		       bool *others_can_read);

/*
 * Whether `s` (len bytes) is the token, compared in a time that depends on
 * neither where they differ nor the token's length. False when `t` is empty.
 */
bool fr_wire_token_equal(const struct fr_token *t, const char *s, size_t len);

/*
 * The proof an agent sends in AUTH, binding the token, the connection's
 * nonce and everything its HELLO says:
 *
 *   key   = HMAC-SHA256(token, "flightrec job key" 0x00 job)
 *   proof = HMAC-SHA256(key, "flightrec hello" 0x00 nonce hello-payload)
 *
 * where hello-payload is the HELLO's payload as fr_wire_hello_encode()
 * writes it: fr_wire_job_key() then fr_wire_auth_proof_key(). Returns 0,
 * or -EINVAL when the HELLO cannot be encoded (a string over its limit) or
 * `t` is empty.
 */
int fr_wire_auth_proof(const struct fr_token *t, const uint8_t nonce[FR_WIRE_NONCE_SIZE],
		       const struct fr_msg_hello *hello, uint8_t proof[FR_WIRE_PROOF_SIZE]);

/* Whether `proof` is the proof of `hello` for `nonce`, compared in constant time. */
bool fr_wire_auth_verify(const struct fr_token *t, const uint8_t nonce[FR_WIRE_NONCE_SIZE],
			 const struct fr_msg_hello *hello, const uint8_t proof[FR_WIRE_PROOF_SIZE]);

/*
 * A job's key, the first step of the proof: HMAC-SHA256(token, "flightrec
 * job key" 0x00 job). It proves HELLOs of that job only, so a launcher can
 * hand a job its key (flightrecd --job-key, FLIGHTREC_JOB_KEY_FILE) instead
 * of the cluster's token. Returns 0, or -EINVAL when `t` is empty or `job`
 * is longer than FR_JOB_MAX (and `key` is zeroed). The caller wipes `key`.
 */
#define FR_WIRE_JOB_KEY_SIZE 32
#define FR_WIRE_JOB_KEY_HEX (2 * FR_WIRE_JOB_KEY_SIZE)
int fr_wire_job_key(const struct fr_token *t, const char *job,
		    uint8_t key[FR_WIRE_JOB_KEY_SIZE]);

/*
 * The second step: the proof of `hello` for `nonce` from its job's key.
 * Equal to fr_wire_auth_proof() with the token the key was made from, when
 * `hello->job` is the key's job. Returns 0, or -EINVAL when the HELLO
 * cannot be encoded (and `proof` is zeroed).
 */
int fr_wire_auth_proof_key(const uint8_t key[FR_WIRE_JOB_KEY_SIZE],
			   const uint8_t nonce[FR_WIRE_NONCE_SIZE],
			   const struct fr_msg_hello *hello, uint8_t proof[FR_WIRE_PROOF_SIZE]);

/*
 * The proof a daemon sends in DAEMON_PROOF, from the key of the HELLO's job
 * (which the daemon derives from its token, and an agent may hold alone):
 *
 *   proof = HMAC-SHA256(key, "flightrec daemon" 0x00 agent-nonce nonce
 *                       hello-payload)
 *
 * `agent_nonce` is the DAEMON_CHALLENGE's, `nonce` the CHALLENGE's. Its
 * own label keeps it from ever equalling an agent's proof, so a peer that
 * only reflects proofs proves nothing. Returns 0, or -EINVAL when the HELLO
 * cannot be encoded or `t` is empty (and `proof` is zeroed).
 */
int fr_wire_daemon_proof_key(const uint8_t key[FR_WIRE_JOB_KEY_SIZE],
			     const uint8_t agent_nonce[FR_WIRE_NONCE_SIZE],
			     const uint8_t nonce[FR_WIRE_NONCE_SIZE],
			     const struct fr_msg_hello *hello, uint8_t proof[FR_WIRE_PROOF_SIZE]);
int fr_wire_daemon_proof(const struct fr_token *t, const uint8_t agent_nonce[FR_WIRE_NONCE_SIZE],
			 const uint8_t nonce[FR_WIRE_NONCE_SIZE], const struct fr_msg_hello *hello,
			 uint8_t proof[FR_WIRE_PROOF_SIZE]);

/* Whether `proof` is the daemon's proof for these nonces and `hello`, from
 * the job's key, compared in constant time. */
bool fr_wire_daemon_verify_key(const uint8_t key[FR_WIRE_JOB_KEY_SIZE],
			       const uint8_t agent_nonce[FR_WIRE_NONCE_SIZE],
			       const uint8_t nonce[FR_WIRE_NONCE_SIZE],
			       const struct fr_msg_hello *hello,
			       const uint8_t proof[FR_WIRE_PROOF_SIZE]);

/*
 * The proofs on a node daemon's upstream connection (flightrecd
 * --upstream), made from the cluster token itself: a node claims no job,
 * so no job's key may stand in for it.
 *
 *   node:    HMAC-SHA256(token, "flightrec node" 0x00 nonce node-hello-payload)
 *   central: HMAC-SHA256(token, "flightrec central" 0x00 node-nonce nonce
 *                        node-hello-payload)
 *
 * The node sends its proof in AUTH before NODE_HELLO (`first` the
 * CHALLENGE's nonce, `second` NULL); the central daemon answers DAEMON_PROOF
 * (`central` true, `first` the node's DAEMON_CHALLENGE nonce, `second` the
 * CHALLENGE's). `payload` is NODE_HELLO's payload as sent. Returns 0, or
 * -EINVAL when `t` is empty (and `proof` is zeroed).
 */
int fr_wire_node_proof(const struct fr_token *t, bool central,
		       const uint8_t first[FR_WIRE_NONCE_SIZE], const uint8_t *second,
		       const uint8_t *payload, size_t len, uint8_t proof[FR_WIRE_PROOF_SIZE]);
/* Whether `proof` is fr_wire_node_proof()'s, compared in constant time. */
bool fr_wire_node_verify(const struct fr_token *t, bool central,
			 const uint8_t first[FR_WIRE_NONCE_SIZE], const uint8_t *second,
			 const uint8_t *payload, size_t len, const uint8_t proof[FR_WIRE_PROOF_SIZE]);

/*
 * Parses a job key written as FR_WIRE_JOB_KEY_HEX hex digits (`len` bytes
 * of `s`, nothing else: no newline). Both cases are accepted; flightrecd
 * writes lowercase. Returns 0, or -EINVAL with `*why` naming what is wrong
 * (and `key` zeroed).
 */
int fr_wire_job_key_parse(const char *s, size_t len, uint8_t key[FR_WIRE_JOB_KEY_SIZE],
			  const char **why);

/*
 * Writes a job key as fr_wire_job_key_parse() reads it: FR_WIRE_JOB_KEY_HEX
 * lowercase hex digits and a NUL. The caller wipes `hex`.
 */
void fr_wire_job_key_hex(const uint8_t key[FR_WIRE_JOB_KEY_SIZE],
			 char hex[FR_WIRE_JOB_KEY_HEX + 1]);

/*
 * Reads a job key file (FLIGHTREC_JOB_KEY_FILE): the key in hex, optionally
 * followed by one newline, read as fr_read_small_file() reads. Returns 0,
 * or a negative errno: -EINVAL with `*why` naming what is wrong (not a
 * regular file, too short, too long, not hex), other errors from open()
 * and read() with `*why` NULL. `*others_can_read` as fr_wire_token_read()
 * says. On failure `key` is zeroed.
 */
int fr_wire_job_key_read(const char *path, uint8_t key[FR_WIRE_JOB_KEY_SIZE], const char **why,
			 bool *others_can_read);

#endif
