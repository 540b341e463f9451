# traceprof - top-level build.  `make` builds, `make check` tests,
# `make demo` runs the main job, `make bench` prints benchmark tables.
# The extension keeps its own PGXS makefile under extension/.

PG_CONFIG ?= /usr/lib/postgresql/15/bin/pg_config
CC        ?= cc
BUILD     := build

WARNINGS  := -Wall -Wextra -Werror -Wno-missing-field-initializers
CFLAGS    ?= -O2 -g
CPPFLAGS  += -D_GNU_SOURCE -Icommon -I$(BUILD)/proto -I$(shell $(PG_CONFIG) --includedir)
# Frame pointers: our own profiles need them (the sampler walks the chain).
# -fno-plt: the extension links this code too (see extension/Makefile).
ALL_CFLAGS = -std=c11 -fPIC -fno-omit-frame-pointer -fno-plt $(WARNINGS) $(CFLAGS)
LDLIBS    := -lcurl -lprotobuf-c -lunwind-generic -lunwind -lz -lm

PROTOS        := $(wildcard proto/*.proto)
PROTO_C       := $(patsubst proto/%.proto,$(BUILD)/proto/%.pb-c.c,$(PROTOS))
PROTO_H       := $(PROTO_C:.c=.h)

COMMON_SRC    := $(wildcard common/*.c)
GENERATOR_SRC := $(filter-out generator/main.c,$(wildcard generator/*.c))
LOADER_SRC    := $(filter-out loader/main.c,$(wildcard loader/*.c))
UNIT_SRC      := $(wildcard tests/unit/test_*.c)

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))
COMMON_LIB    := $(BUILD)/libtraceprof_common.a
GENERATOR     := $(BUILD)/bin/generator
LOADER        := $(BUILD)/bin/loader
UNIT_TESTS    := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRC))

.PHONY: all deps extension install-extension check check-unit check-regress check-integration soak demo bench clean
.PHONY: fuzz check-fuzz check-sanitize check-valgrind
.SECONDARY: $(PROTO_C) $(PROTO_H)

all: $(GENERATOR) $(LOADER) extension

# The extension links the position-independent common library.
extension: $(COMMON_LIB)
	$(MAKE) --no-print-directory -C extension PG_CONFIG=$(PG_CONFIG)

# PostgreSQL loads extensions only from its own directories: needs root.
install-extension: extension
	$(MAKE) --no-print-directory -C extension PG_CONFIG=$(PG_CONFIG) install >/dev/null

deps:
	scripts/install-deps.sh

$(BUILD)/proto/%.pb-c.c $(BUILD)/proto/%.pb-c.h: proto/%.proto
	@mkdir -p $(@D)
	protoc-c --proto_path=proto --c_out=$(BUILD)/proto $<

# protobuf-c's generated code is not ours: compile it without -Werror.
$(BUILD)/obj/proto/%.o: $(BUILD)/proto/%.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) -std=c11 -fPIC $(CFLAGS) -c -o $@ $<

$(BUILD)/obj/%.o: %.c $(PROTO_H)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -MMD -MP -c -o $@ $<

$(COMMON_LIB): $(call obj,$(COMMON_SRC)) $(patsubst $(BUILD)/proto/%.c,$(BUILD)/obj/proto/%.o,$(PROTO_C))
	@mkdir -p $(@D)
	$(AR) rcs $@ $^

$(GENERATOR): $(call obj,generator/main.c $(GENERATOR_SRC)) $(COMMON_LIB)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS)

$(LOADER): $(call obj,loader/main.c $(LOADER_SRC)) $(COMMON_LIB)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $^ -L$(shell $(PG_CONFIG) --libdir) -lpq $(LDLIBS)

# Unit tests link the non-main objects of every component.
$(BUILD)/tests/%: tests/unit/%.c tests/unit/unit.h $(call obj,$(GENERATOR_SRC) $(LOADER_SRC)) $(COMMON_LIB)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) -Itests/unit -Igenerator -Iloader $(ALL_CFLAGS) -o $@ $(filter %.c %.o %.a,$^) -lpq $(LDLIBS)

check: deps all $(UNIT_TESTS) install-extension
	$(MAKE) --no-print-directory check-unit check-regress check-integration check-fuzz check-sanitize check-valgrind

check-unit: $(UNIT_TESTS)
	@set -e; for t in $(UNIT_TESTS); do echo "== $$t"; $$t; done

check-regress: install-extension
	scripts/run-regress-tests.sh

check-integration: all
	scripts/run-integration-tests.sh

# The soak of tests/integration/extension-soak.test.js at length (make check
# runs it for 45 s): pgbench clients, every statement traced, the sampler at
# 250 Hz, span and profile endpoints flapping up and down; no crash, memory
# flat.  `make soak SOAK_SECONDS=600 SOAK_CLIENTS=8` to change them.  The
# runner's time limit applies to the whole file: the soak's length plus room.
SOAK_SECONDS ?= 1800
SOAK_CLIENTS ?= 16
soak: all install-extension
	TRACEPROF_SOAK_SECONDS=$(SOAK_SECONDS) TRACEPROF_SOAK_CLIENTS=$(SOAK_CLIENTS) \
	TEST_TIMEOUT_MS=$$(( ($(SOAK_SECONDS) + 900) * 1000 )) \
	scripts/run-integration-tests.sh extension-soak.test.js

# Hardening: libFuzzer targets (build/fuzz/), ASan+UBSan (build/asan/),
# valgrind; each orchestrated by its script.  FUZZ_SECONDS per target.
fuzz:
	FUZZ_SECONDS=$${FUZZ_SECONDS:-60} scripts/run-fuzz.sh

check-fuzz:
	FUZZ_SECONDS=10 scripts/run-fuzz.sh

check-sanitize:
	scripts/run-sanitize-checks.sh

check-valgrind:
	scripts/run-valgrind-checks.sh

demo: deps all install-extension
	scripts/demo.sh

bench: deps all
	bench/run.sh

clean:
	rm -rf $(BUILD)
	$(MAKE) --no-print-directory -C extension clean

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
