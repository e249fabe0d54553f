# flightrec: make, make test, make demo, make bench, make install.
#
#   make V=1                 show the commands
#   make WERROR=1            warnings are errors (CI)
#   make SANITIZE=address    also undefined, thread
#   make install PREFIX=/usr/local DESTDIR=

CC ?= gcc
MPICC ?= mpicc
PKG_CONFIG ?= pkg-config
PREFIX ?= /usr/local
DESTDIR ?=
# systemd units make install lays out, each with its environment file
# (/etc/default) and config file (/etc/flightrec), which are kept when they
# exist: the central (or only) daemon's and the node daemon's.
UNITS := flightrecd flightrecd-node
BUILD ?= build

CFLAGS ?= -O2 -g
WARNINGS := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 \
	-Wvla -Wpointer-arith -Wundef
ifeq ($(WERROR),1)
WARNINGS += -Werror
endif
ifneq ($(SANITIZE),)
CFLAGS += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer
LDFLAGS += -fsanitize=$(SANITIZE)
endif

MPI_CFLAGS := $(shell $(MPICC) --showme:compile 2>/dev/null)
DEP_CFLAGS := $(shell $(PKG_CONFIG) --cflags libuv jansson libmicrohttpd 2>/dev/null)
ALL_CFLAGS := -std=gnu11 -fPIC -D_GNU_SOURCE -MMD -MP $(WARNINGS) $(DEP_CFLAGS) $(CFLAGS)

ifeq ($(V),1)
Q :=
else
Q := @
endif

# Code shared by the agent, the daemon and fr-analyze: compiled once.
# An archive: each program links only the objects it calls into (the agent
# takes the dump writer, never the readers).
CORE_SRC := $(wildcard protocol/*.c dumps/*.c)
AGENT_SRC := $(wildcard agent/*.c)
DAEMON_SRC := $(wildcard daemon/*.c)
CLI_SRC := $(wildcard cli/*.c)

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

CORE_LIB := $(BUILD)/lib/libfrcore.a
AGENT_LIB := $(BUILD)/lib/libflightrec.so
DAEMON := $(BUILD)/bin/flightrecd
CLI := $(BUILD)/bin/fr-analyze

# Every tests/unit/test_*.c is a unit test: its object and the core
# archive, plus what its line below adds.
UNIT_TESTS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(wildcard tests/unit/test_*.c))
MPI_PROGS := $(addprefix $(BUILD)/tests/,mpi_hang mpi_overhead dlopen_mpi mpi_hang_plugin.so)
# The CPU stand-in for NCCL and the CUDA runtime, and the NCCL test program.
NCCL_FAKE := $(BUILD)/tests/nccl/nccl_hang
# Generators the end-to-end tests run too (test_summary): our dumps at
# scale, and the summaries a node daemon would send up for them.
BENCH_GEN := $(BUILD)/bench/gen_dumps
BENCH_SUMMARIZE := $(BUILD)/bench/summarize
BENCH_LOAD := $(BUILD)/bench/loadgen
BENCH_FAKENODES := $(BUILD)/bench/fakenodes

.PHONY: all test unit e2e demo bench install clean fuzz
all: $(AGENT_LIB) $(DAEMON) $(CLI)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) -c $< -o $@

# The web page is compiled into the daemon (.incbin in daemon/web.c).
$(BUILD)/obj/daemon/web.o: $(wildcard daemon/web/*)

# The agent sees mpi.h; nothing else does.
$(BUILD)/obj/agent/hooks_mpi.o: ALL_CFLAGS += $(MPI_CFLAGS)
$(call obj,$(AGENT_SRC)): ALL_CFLAGS += -fvisibility=hidden
$(BUILD)/obj/tests/%.o: ALL_CFLAGS += -Iprotocol -Idumps -Iagent

$(CORE_LIB): $(call obj,$(CORE_SRC))
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

# The agent carries libuv, jansson and the compiler's unwinder inside, so
# that it loads in training containers that have none of them: it needs
# only the C library. Debian's static archives are built for executables;
# agent/embed.sh makes them fit for a shared object.
UV_ARCHIVE := $(firstword $(wildcard $(addprefix $(shell $(PKG_CONFIG) --variable=libdir libuv)/, \
	libuv_a.a libuv.a)) libuv_a.a)
JANSSON_ARCHIVE := $(shell $(PKG_CONFIG) --variable=libdir jansson)/libjansson.a
EMBED := $(BUILD)/embed
EMBED_LIBS := $(EMBED)/libuv.a $(EMBED)/libjansson.a
EMBED_OBJ := $(EMBED)/uv_shim.o $(EMBED)/jansson_shim.o

$(EMBED)/libuv.a $(EMBED)/uv_shim.c &: agent/embed.sh $(UV_ARCHIVE)
	@$(if $(Q),echo "  EMBED   $(UV_ARCHIVE)")
	$(Q)CC="$(CC)" agent/embed.sh uv $(UV_ARCHIVE) $(EMBED)
$(EMBED)/libjansson.a $(EMBED)/jansson_shim.c &: agent/embed.sh $(JANSSON_ARCHIVE)
	@$(if $(Q),echo "  EMBED   $(JANSSON_ARCHIVE)")
	$(Q)CC="$(CC)" agent/embed.sh jansson $(JANSSON_ARCHIVE) $(EMBED)
$(EMBED)/%_shim.o: $(EMBED)/%_shim.c
	$(Q)$(CC) $(ALL_CFLAGS) -fvisibility=hidden -c $< -o $@

# Never linked against libmpi, nor referencing it: the MPI hooks find
# libmpi at run time (agent/mpi_real.h), so the library loads in any
# process and follows an MPI that the program loads late with dlopen.
$(AGENT_LIB): $(call obj,$(AGENT_SRC)) $(CORE_LIB) $(EMBED_OBJ) $(EMBED_LIBS) agent/exports.map
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -shared -static-libgcc -Wl,--version-script=agent/exports.map -Wl,-z,lazy \
		-Wl,-z,nodelete $(LDFLAGS) -o $@ $(call obj,$(AGENT_SRC)) $(EMBED_OBJ) \
		$(CORE_LIB) $(EMBED_LIBS) -ldl -lpthread

$(DAEMON): $(call obj,$(DAEMON_SRC)) $(CORE_LIB)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $(call obj,$(DAEMON_SRC)) $(CORE_LIB) \
		$$($(PKG_CONFIG) --libs libuv jansson libmicrohttpd) -lpthread -lm

$(CLI): $(call obj,$(CLI_SRC)) $(CORE_LIB)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $(call obj,$(CLI_SRC)) $(CORE_LIB) \
		$$($(PKG_CONFIG) --libs jansson) -lpthread -lm

# ---- tests ----

$(UNIT_TESTS): $(BUILD)/tests/%: $(BUILD)/obj/tests/unit/%.o $(CORE_LIB)
$(BUILD)/tests/test_ring: $(call obj,agent/ring.c)
$(BUILD)/tests/test_pyframes: $(call obj,agent/pyframes.c)
# With python3.11-dev, test_pyframes checks the agent's CPython 3.11
# offsets against the real headers (as system headers: their own code is
# not held to our warnings).
PY311_CFLAGS := $(patsubst -I%,-isystem %,$(shell $(PKG_CONFIG) --cflags python-3.11-embed 2>/dev/null))
$(BUILD)/obj/tests/unit/test_pyframes.o: ALL_CFLAGS += $(if $(PY311_CFLAGS),$(PY311_CFLAGS) -DFR_HAVE_PY311_HEADERS)
# ... and embeds it, to read the entry marks of a real interpreter.
$(BUILD)/tests/test_pyframes: UNIT_LIBS = $(if $(PY311_CFLAGS),$$($(PKG_CONFIG) --libs python-3.11-embed))
# The stress run of tests/e2e/test_python_stress embeds CPython 3.11: built
# only where python3.11-dev is (the test skips otherwise).
PY_STRESS := $(if $(PY311_CFLAGS),$(BUILD)/bench/pyframes)
$(BUILD)/tests/test_handles: $(call obj,agent/handles.c)
$(BUILD)/tests/test_route: $(call obj,daemon/route.c)
$(BUILD)/tests/test_ratelog: $(call obj,daemon/ratelog.c)
$(BUILD)/tests/test_log: $(call obj,daemon/log.c)
$(BUILD)/tests/test_kmsg: $(call obj,daemon/kmsg.c)
$(BUILD)/tests/test_addr: $(call obj,daemon/addr.c)
$(BUILD)/tests/test_access: $(call obj,daemon/access.c daemon/route.c)
$(BUILD)/tests/test_registry: $(call obj,daemon/registry.c daemon/budget.c daemon/straggler.c)
$(BUILD)/tests/test_straggler_live: $(call obj,daemon/straggler.c)
$(BUILD)/tests/test_upload: $(call obj,daemon/upload.c)
$(BUILD)/tests/test_aggregate: $(call obj,daemon/aggregate.c)
$(BUILD)/tests/test_node_verdict: $(call obj,daemon/node_verdict.c daemon/aggregate.c)
$(BUILD)/tests/test_look_merge: $(call obj,daemon/look_merge.c)
$(BUILD)/tests/test_nodes: $(call obj,daemon/nodes.c) $(call obj,daemon/clock.c) $(call obj,daemon/budget.c) $(call obj,daemon/ratelog.c)
$(BUILD)/tests/test_node_watchdog: $(call obj,daemon/node_watchdog.c daemon/node_verdict.c daemon/aggregate.c daemon/nodes.c daemon/clock.c daemon/budget.c daemon/ratelog.c)
# Counts the job keys registry.c makes (HMACs).
$(BUILD)/tests/test_registry: LDFLAGS += -Wl,--wrap=fr_wire_job_key
$(UNIT_TESTS):
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $(filter-out %.a,$^) $(filter %.a,$^) \
		$$($(PKG_CONFIG) --libs cmocka jansson) $(UNIT_LIBS) -lpthread -lm

# An application that sleeps, for what the agent may do to it (test_agent_trust).
MPI_PROGS += $(BUILD)/tests/mpi_sleeper
# Application signal handlers the crash handler chains to (test_crash_chaining).
MPI_PROGS += $(BUILD)/tests/mpi_chain

# MPI test programs keep frame pointers and no tail calls, so that stacks in
# dumps name the function a rank is stuck in.
$(BUILD)/tests/mpi_%: tests/mpi/%.c tests/planted.h
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  MPICC   $<")
	$(Q)$(MPICC) -std=gnu11 -O1 -g -fno-omit-frame-pointer -fno-optimize-sibling-calls \
		-Iinclude $(WARNINGS) $< -o $@

# The planted-fault program as a plug-in, and a host not linked against MPI
# that dlopens it (RTLD_LOCAL): MPI loaded late, as mpi4py loads it.
$(BUILD)/tests/mpi_hang_plugin.so: tests/mpi/hang.c tests/planted.h
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  MPICC   $@")
	$(Q)$(MPICC) -std=gnu11 -O1 -g -fPIC -shared -fno-omit-frame-pointer \
		-fno-optimize-sibling-calls -Dmain=plugin_main -Iinclude $(WARNINGS) \
		-Wno-missing-prototypes $< -o $@
$(BUILD)/tests/dlopen_mpi: tests/mpi/dlopen_main.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $@")
	$(Q)$(CC) -std=gnu11 -O1 -g $(WARNINGS) $< -o $@ -ldl

$(NCCL_FAKE): tests/nccl/build.sh $(wildcard tests/nccl/*.c) tests/planted.h \
		agent/nccl_abi.h agent/cuda_abi.h
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  FAKE    $(dir $@)")
	$(Q)CC="$(CC)" EXTRA_CFLAGS="$(if $(filter 1,$(WERROR)),-Werror) \
		$(if $(SANITIZE),-fsanitize=$(SANITIZE) -fno-omit-frame-pointer)" \
		tests/nccl/build.sh $(dir $@)

# Every daemon header compiles on its own: it includes what it needs and
# forward-declares what it only points at, so that a module includes just
# the headers it uses.
HEADER_CHECKS := $(patsubst %.h,$(BUILD)/obj/%.h.ok,$(wildcard daemon/*.h))
$(BUILD)/obj/%.h.ok: %.h
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  HDR     $<")
	$(Q)echo '#include "$(CURDIR)/$<"' | $(CC) $(ALL_CFLAGS) -fsyntax-only -MF $@.d -MT $@ \
		-x c - && touch $@

unit: $(UNIT_TESTS) $(CLI) $(HEADER_CHECKS)
	$(Q)tests/run-unit $(UNIT_TESTS)

e2e: all $(MPI_PROGS) $(NCCL_FAKE) $(BENCH_GEN) $(BENCH_SUMMARIZE) $(BENCH_LOAD) $(BENCH_FAKENODES) $(PY_STRESS)
	$(Q)BUILD=$(BUILD) tests/e2e/run

# The libFuzzer targets (tests/fuzz) are built with clang into
# $(BUILD)/fuzz, whatever $(CC) is. make test replays every regression
# input and fuzzes each target for FUZZ_SECONDS (0: replay only); without
# clang it skips them (tests/fuzz/run exits 77), make fuzz fails.
FUZZ_SECONDS ?= 15

test: all $(UNIT_TESTS) $(HEADER_CHECKS) $(MPI_PROGS) $(NCCL_FAKE) $(BENCH_GEN) $(BENCH_SUMMARIZE) $(BENCH_LOAD) $(BENCH_FAKENODES) $(PY_STRESS)
	$(Q)tests/run-unit $(UNIT_TESTS)
	$(Q)BUILD=$(BUILD) tests/e2e/run
	$(Q)BUILD=$(BUILD) tests/fuzz/run $(if $(filter 0,$(FUZZ_SECONDS)),--replay,$(FUZZ_SECONDS)) \
		|| [ $$? -eq 77 ]

fuzz:
	$(Q)BUILD=$(BUILD) tests/fuzz/run 60

demo: all $(MPI_PROGS)
	$(Q)BUILD=$(BUILD) tests/e2e/demo.sh

# The synthetic incident of bench/analyze.sh: 1024 ranks x 2048 entries.
$(BENCH_GEN): $(call obj,bench/gen_dumps.c) $(CORE_LIB)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $(call obj,bench/gen_dumps.c) $(CORE_LIB) \
		$$($(PKG_CONFIG) --libs jansson) -lm

# What one live verdict costs as the job grows: fr_correlate() on the
# traces of a live view of 4096 to 65536 ranks.
BENCH_SCALE := $(BUILD)/bench/scale_correlate
$(BENCH_SCALE): $(call obj,bench/scale_correlate.c) $(CORE_LIB)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $(call obj,bench/scale_correlate.c) $(CORE_LIB) \
		$$($(PKG_CONFIG) --libs jansson) -lm

# What reading Python frames costs a dump: 64 threads of 50 frames in an
# embedded CPython 3.11 (needs python3.11-dev).
BENCH_PYFRAMES := $(BUILD)/bench/pyframes
$(BUILD)/obj/bench/pyframes.o: ALL_CFLAGS += $(PY311_CFLAGS)
$(BENCH_PYFRAMES): $(call obj,bench/pyframes.c agent/pyframes.c) $(CORE_LIB)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $(call obj,bench/pyframes.c agent/pyframes.c) $(CORE_LIB) \
		$$($(PKG_CONFIG) --libs python-3.11-embed) $$($(PKG_CONFIG) --libs jansson) -lm

# What member lists cost on the wire and in a dump, before and after runs.
BENCH_MEMBERS := $(BUILD)/bench/member_bytes
$(BENCH_MEMBERS): $(call obj,bench/member_bytes.c) $(CORE_LIB)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $(call obj,bench/member_bytes.c) $(CORE_LIB) \
		$$($(PKG_CONFIG) --libs jansson) -lm

# The summaries a node daemon would send up for an incident (tests/e2e/test_summary.sh).
$(BENCH_SUMMARIZE): $(call obj,bench/summarize.c) $(CORE_LIB)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $(call obj,bench/summarize.c) $(CORE_LIB) \
		$$($(PKG_CONFIG) --libs jansson) -lpthread -lm

# The simulated agents of bench/load.sh (RANKS ranks from one process), of
# bench/nodes.sh and of test_scale_nodes (ranks behind node daemons).
$(BENCH_LOAD): $(call obj,bench/loadgen.c) $(CORE_LIB)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $(call obj,bench/loadgen.c) $(CORE_LIB) \
		$$($(PKG_CONFIG) --libs jansson) -lpthread -lm

# The node daemons of bench/central.sh: summaries ready in memory, sent at once.
$(BENCH_FAKENODES): $(call obj,bench/fakenodes.c) $(CORE_LIB)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $(call obj,bench/fakenodes.c) $(CORE_LIB) \
		$$($(PKG_CONFIG) --libs jansson) -lm

bench: all $(MPI_PROGS) $(NCCL_FAKE) $(BENCH_GEN) $(BENCH_SUMMARIZE) $(BENCH_LOAD) $(BENCH_FAKENODES) $(BENCH_SCALE) $(BENCH_MEMBERS) $(PY_STRESS)
	$(Q)BUILD=$(BUILD) bench/run
	$(Q)$(BENCH_SCALE)
	$(Q)$(if $(PY_STRESS),echo "== reading Python frames (64 threads x 50 frames, CPython 3.11)" && $(PY_STRESS))
	$(Q)$(BENCH_MEMBERS)
	$(Q)BUILD=$(BUILD) bench/analyze.sh
	$(Q)BUILD=$(BUILD) bench/load.sh
	$(Q)BUILD=$(BUILD) bench/nodes.sh
	$(Q)BUILD=$(BUILD) CACHE=$(BUILD)/bench/cache bench/central.sh
	$(Q)BUILD=$(BUILD) CACHE=$(BUILD)/bench/cache NODES=8192 bench/central.sh
	$(Q)BUILD=$(BUILD) bench/summaries.sh

# ---- install ----

# Installs what `make` built (it does not build: a sanitizer or debug build
# directory is installed as it is, never rebuilt with other flags).
install:
	@test -e $(AGENT_LIB) -a -e $(DAEMON) -a -e $(CLI) || \
		{ echo "make install: nothing built in $(BUILD); run make first" >&2; exit 1; }
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include \
		$(DESTDIR)$(PREFIX)/lib/systemd/system $(DESTDIR)/etc/default
	install -m 0755 $(DAEMON) $(CLI) $(DESTDIR)$(PREFIX)/bin/
	install -m 0755 $(AGENT_LIB) $(DESTDIR)$(PREFIX)/lib/
	install -m 0644 include/flightrec.h $(DESTDIR)$(PREFIX)/include/
	install -d $(DESTDIR)/etc/flightrec
	for u in $(UNITS); do \
		sed 's|@BINDIR@|$(PREFIX)/bin|g' systemd/$$u.service \
			> $(DESTDIR)$(PREFIX)/lib/systemd/system/$$u.service && \
		chmod 0644 $(DESTDIR)$(PREFIX)/lib/systemd/system/$$u.service && \
		{ test -e $(DESTDIR)/etc/default/$$u || \
			install -m 0644 systemd/$$u.default $(DESTDIR)/etc/default/$$u; } && \
		{ test -e $(DESTDIR)/etc/flightrec/$$u.conf || \
			install -m 0644 systemd/$$u.conf $(DESTDIR)/etc/flightrec/$$u.conf; } || exit 1; \
	done

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
