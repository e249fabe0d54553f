/*
 * Names for code addresses of this process, for the stacks in dumps: the
 * function containing an address, static functions included, read from
 * the ELF symbol tables of the executable and of each loaded library.
 *
 * Link thread only (it reads files, maps them and allocates); what it
 * learns of a module is kept for the life of the process.
 */
#ifndef FR_AGENT_SYMBOLS_H
#define FR_AGENT_SYMBOLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Writes the name of the function containing `addr` into `name` (cut to
 * `len`) and the offset of `addr` into it. When no symbol covers the
 * address (a stripped library's static function), the module's file name
 * in brackets, "[libpython3.11.so.1.0]", and the address in that file.
 * False outside every module (a JIT's code, an address gone).
 */
bool fr_symbolize(uintptr_t addr, char *name, size_t len, uint64_t *offset);

#endif
