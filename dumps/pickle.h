/*
 * A reader for Python pickles that hold plain data, so that fr-analyze can
 * read the per-rank dumps PyTorch's Flight Recorder writes (pickle.dumps of
 * a dict, protocol 2 from C++, 4 or 5 from Python). It decodes the opcodes
 * that build None, bools, ints, floats, str, bytes, lists, tuples, dicts and
 * sets into a tree of plain values in a document (value.h), and refuses
 * every opcode that would name, call or build an object: it never imports
 * or runs anything. (Python's own pickler writes bytes and sets at protocol
 * 2 as calls, which are refused; Flight Recorder dumps hold neither.)
 *
 * Mapping from Python to values (the same as JSON's):
 *
 *   None, True, False      null, true, false
 *   int                    integer when it fits int64; otherwise a string of
 *                          its decimal digits ("-" for negatives), exact
 *   float                  real; NaN and the infinities, which JSON cannot
 *                          hold, become the strings "NaN", "Infinity" and
 *                          "-Infinity" (the spelling of Python's json module)
 *   str                    string; byte sequences that are not UTF-8 (lone
 *                          surrogates, which Python writes with
 *                          surrogatepass) become U+FFFD, and so does the
 *                          character NUL, which a value's string may not
 *                          hold
 *   bytes, bytearray       string of lowercase hex digits, two per byte
 *   list, tuple, set,      array (sets keep the pickle's order)
 *   frozenset
 *   dict                   object with one member per key, in the order the
 *                          keys were first set, each with the value set last
 *                          (as Python's dict); a key that is not a str is
 *                          stored under its JSON text: 1 -> "1", True ->
 *                          "true", None -> "null", 2.5 -> "2.5", (0, 1) ->
 *                          "[0, 1]"; list, dict and set keys are refused
 *                          (unhashable)
 *
 * Objects the pickle shares through its memo (BINGET) are the same value in
 * every place they appear, keys included, and so are the None, True and
 * False of one load, so the tree is a DAG (value.h). It never has a cycle:
 * a pickle that would make one is refused. Nor can sharing make the tree,
 * written out in full, have many more values than the pickle has bytes (a
 * pickle can say x = [x, x] forty times in a few bytes): past 64 values a
 * byte, plus 2^20, it is refused, so that recursive readers of the tree
 * take time linear in the input. (A long string shared many times still
 * counts as one value a place.) The text of keys that are not strs, which
 * the reader writes, is bounded by 32 bytes a byte of pickle, plus a MiB.
 */
#ifndef FR_PICKLE_H
#define FR_PICKLE_H

#include <stdbool.h>
#include <stddef.h>

struct fr_doc;
struct fr_val;

/*
 * The deepest nesting accepted (a scalar in a list in a dict is 2):
 * FR_VAL_DEPTH_MAX of value.h, which pickle.c checks. Flight Recorder dumps
 * need 5.
 */
#define FR_PICKLE_DEPTH_MAX 256

/* The longest int accepted, in bytes of two's complement (2466 digits). */
#define FR_PICKLE_LONG_MAX 1024

/*
 * Whether `buf` starts like a pickle this reader may read: the PROTO opcode
 * (0x80) with a protocol from 2 to 5. Used to tell the format of a dump
 * file from its content.
 */
bool fr_pickle_sniff(const void *buf, size_t len);

/*
 * Decodes the pickle in buf[0..len) into document `d`, the top object at
 * *out. Returns 0; -EPROTO (not a pickle, malformed, truncated, a refused
 * opcode or structure, a limit exceeded) or -ENOMEM, with *out NULL and a
 * message in err that starts with the byte offset of the opcode at fault,
 * such as "offset 1234: opcode 0x63 (GLOBAL) is not allowed: this reader
 * only reads plain data". Bytes after the STOP opcode are an error. The
 * values made before a failure stay in `d` until it is freed or reset.
 *
 * Memory use is bounded by a constant times `len`, plus about a MiB; the
 * function does not recurse on the input's structure and takes time
 * O(len log len) at worst, linear for what picklers write. It is
 * thread-safe (no shared state) as long as each thread has its own `d`.
 */
int fr_pickle_load(struct fr_doc *d, const void *buf, size_t len, struct fr_val **out,
		   char *err, size_t errlen);

/*
 * fr_pickle_load(), with the items of one list read by a hook instead of
 * made into values of the document: the list that the top-level dict
 * holds under `key` ("entries" of a Flight Recorder dump, two thousand
 * dicts whose members are mostly memo references and small ints).
 *
 * Each such item written the way picklers write them (a dict of str keys
 * whose values are None, bools, ints of 64 bits, floats, strs, lists and
 * tuples of those, and values shared through the memo) is decoded
 * straight from the opcodes into a short-lived object and passed to
 * `item`, in order; the list in the document stays empty. The object, and
 * the lists, tuples and numbers it holds, live only during the call; its
 * strs and the values it shares with the rest of the pickle (the memo's)
 * live as long as the document. A key set twice appears twice, the later
 * last (fr_val_get() finds it). `item` returns 0, or -ENOMEM, which the
 * load fails with (any other error ends it as below, in -EAGAIN).
 *
 * The result is the document fr_pickle_load() would make, less the list's
 * items, or -EAGAIN (err set) when the pickle does what this reading does
 * not follow: an item of another shape after some were read, an item or
 * anything in one used again through the memo, the list used elsewhere or
 * replaced, any error once an item was tried. Load it again then with
 * fr_pickle_load(), which gives the answer (and any error) of record;
 * whatever `item` kept is to be dropped. -ENOMEM as fr_pickle_load().
 */
struct fr_pickle_hook {
	const char *key;
	int (*item)(void *arg, const struct fr_val *item);
	void *arg;
	size_t nitems;		/* out: the items passed to `item` */
};

int fr_pickle_load_with(struct fr_doc *d, const void *buf, size_t len,
			struct fr_pickle_hook *hook, struct fr_val **out, char *err,
			size_t errlen);

#endif
