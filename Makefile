# ngx_llm: nginx module + inference engine.
#
#   make            build build/ngx_llm_engine and the nginx module
#   make deps       install missing Debian packages, fetch the default model
#   make run        deps + build + nginx in the foreground on 127.0.0.1:8080
#   make test       deps + build + every test suite (what CI runs), test-ops too
#   make test-ops   deps + prometheus + the alert rules, dashboard, live Prometheus
#   make deb        the Debian package libnginx-mod-http-llm (build/deb/)
#   make test-package  make deb, install it, Debian's nginx serves with it, purge
#   make test-ui    the playground page in headless Chromium, with a screenshot
#   make bench      benchmarks (long; not part of test); with LLAMA_BIN=DIR
#                   and/or IK_LLAMA_BIN=DIR (folders of llama-bench and
#                   llama-server that you built from llama.cpp's /
#                   ik_llama.cpp's public sources, outside this tree) also
#                   against them, interleaved (docs/perf.md, peer mode)
#   make bench-peers  only that comparison (the same variables), then the
#                   peer rows of issues 28-30 on synthetic 1B/MoE files and
#                   Gemma 3 270M (PEER_8B=1: the 8B too; bench/peer_suite.sh)
#   make CUDA=0     skip the CUDA objects even when nvcc exists

SHELL      := /bin/bash
BUILD      := build
CC         ?= cc
NVCC       ?= nvcc
CUDA       ?= $(if $(shell command -v $(NVCC) 2>/dev/null),1,0)
NGINX_SRC  ?=
CACHE_DIR  ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/ngx_llm
MODEL      ?= $(CACHE_DIR)/SmolLM2-135M-Instruct.Q4_1.gguf
# the real Gemma 3 270M (t/033-gemma3.t), also from `make deps`
GEMMA      ?= $(CACHE_DIR)/gemma-3-270m-q4_k_m.gguf
# test fixtures: fetched and made by `make deps` (tools/deps.sh)
FIXTURES   ?= $(CACHE_DIR)/fixtures
# the engine the module runs unless llm_engine's `binary` says (the
# Debian package sets its installed path, tools/debian/rules)
ENGINE_BIN ?= $(abspath $(BUILD))/ngx_llm_engine

CFLAGS     ?= -O2 -g
CFLAGS     += -std=gnu11 -Wall -Wextra -fPIC -pthread -Iengine -Ikernels \
              -ffp-contract=off
# sanitizers for every object, the engine, the unit tests and the module
# (make test-asan sets them, in a tree of its own)
SAN        ?=
CFLAGS     += $(SAN)
LDLIBS     := -lpcre2-8 -lcjson -lutf8proc -lm -lpthread

# everything but the engine's main() is a library shared by the engine,
# the unit tests and (a subset) the nginx module
ENGINE_LIB_SRCS := $(filter-out engine/server/main.c,$(wildcard engine/*/*.c kernels/*.c))
HEADERS         := $(wildcard engine/*/*.h kernels/*.h)
# objects differ with and without CUDA (NGX_LLM_CUDA): one tree each
OBJ             := $(BUILD)/obj$(if $(filter 1,$(CUDA)),-cuda)
ENGINE_LIB_OBJS := $(ENGINE_LIB_SRCS:%.c=$(OBJ)/%.o)
CU_SRCS         := $(wildcard engine/*/*.cu kernels/*.cu)
CU_OBJS         := $(CU_SRCS:%.cu=$(OBJ)/%.cu.o)
UNIT_SRCS       := $(wildcard t/unit/test_*.c)
# tap.h and what several tests share (sched_fixture.h)
UNIT_HEADERS    := $(wildcard t/unit/*.h)
UNIT_BINS       := $(UNIT_SRCS:t/unit/%.c=$(BUILD)/t/%)
# with SAN: the sanitizers' default options (report files in the tree),
# which the engine needs as nginx starts it with an empty environment
SAN_OBJS        := $(if $(SAN),$(OBJ)/t/asan/options.o)

ifeq ($(CUDA),1)
CUDA_HOME  ?= $(patsubst %/bin/nvcc,%,$(realpath $(shell command -v $(NVCC))))
NVFLAGS    := -O2 -std=c++17 -Iengine -Ikernels \
              -gencode arch=compute_80,code=sm_80 \
              -gencode arch=compute_90,code=sm_90 \
              -gencode arch=compute_90,code=compute_90
CUDA_LIBS  := -L$(CUDA_HOME)/lib64 -lcudart -lcublas -lcublasLt -lnccl -lstdc++
ENGINE_OBJS_CUDA := $(CU_OBJS)
CFLAGS     += -DNGX_LLM_CUDA=1
else
CUDA_LIBS  :=
ENGINE_OBJS_CUDA :=
endif

.PHONY: all engine module unit deps run test t-nginx bench bench-isolation \
        bench-routing bench-spec bench-peers \
        clean fuzz test-ops deb test-package test-ui \
        fuzz-smoke cuda-check layer-check unit-asan test-asan soak

all: engine module

engine: $(BUILD)/ngx_llm_engine

# each object depends on the headers it includes (-MMD: a .d file beside
# it, read below; -MP: a header removed or moved does not stop make). An
# object without its .d (built before -MMD, or the .d lost) is rebuilt:
# the empty rule below makes a missing .d newer than any object
$(OBJ)/%.o: %.c $(OBJ)/%.d
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(OBJ)/%.cu.o: %.cu $(OBJ)/%.cu.d
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -MMD -MP -MF $(@:.o=.d) -c $< -o $@

$(BUILD)/ngx_llm_engine: $(OBJ)/engine/server/main.o $(ENGINE_LIB_OBJS) $(ENGINE_OBJS_CUDA) $(SAN_OBJS)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS) $(CUDA_LIBS)

$(OBJ)/t/asan/options.o: t/asan/options.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DNGX_LLM_SAN_LOG='"$(abspath $(BUILD))/san/engine"' -c $< -o $@

$(BUILD)/t/%: t/unit/%.c $(BUILD)/t/%.d $(ENGINE_LIB_OBJS) $(ENGINE_OBJS_CUDA) $(UNIT_HEADERS) $(SAN_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -MF $@.d -It/unit -o $@ $< $(ENGINE_LIB_OBJS) $(ENGINE_OBJS_CUDA) $(SAN_OBJS) $(LDLIBS) $(CUDA_LIBS)

# tools/json_schema_dump.sh: test binaries that record every schema they
# convert and the grammar it gives (t/unit/js_dump.c), and a converter of
# schema files
JS_DUMP_WRAP := -Wl,--wrap=llm_json_schema_compile \
                -Wl,--wrap=llm_json_schema_to_gbnf t/unit/js_dump.c
$(BUILD)/dump/%: t/unit/%.c t/unit/js_dump.c $(ENGINE_LIB_OBJS) $(ENGINE_OBJS_CUDA) $(UNIT_HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -It/unit -o $@ $< $(JS_DUMP_WRAP) $(ENGINE_LIB_OBJS) $(ENGINE_OBJS_CUDA) $(LDLIBS) $(CUDA_LIBS)

# the unit tests two at a time (UNIT_JOBS): each writes only files of its
# own (mkstemp, its pid, its name), and the sanitized pass is CI's longest
UNIT_JOBS  ?= 2
unit: $(UNIT_BINS) $(BUILD)/ngx_llm_engine
	FIXTURES=$(FIXTURES) MODEL=$(MODEL) BUILD=$(abspath $(BUILD)) \
	    prove -j$(UNIT_JOBS) -e '' $(UNIT_BINS)

# --- the nginx module -------------------------------------------------------

module: $(BUILD)/modules/ngx_http_llm_module.so

$(BUILD)/modules/ngx_http_llm_module.so: $(BUILD)/nginx/Makefile $(wildcard ngx_module/*.[ch]) $(HEADERS) $(ENGINE_LIB_SRCS) config
	$(MAKE) -C "$$(cat $(BUILD)/nginx/srcdir)" -f $(abspath $(BUILD))/nginx/Makefile modules
	@mkdir -p $(dir $@)
	@# a new file, not overwritten in place: a running nginx maps the old one
	cp $(BUILD)/nginx/ngx_http_llm_module.so $@.tmp && mv -f $@.tmp $@

# config globs these folders (NGX_LLM_ROOMS): a file added to or removed
# from one (the folder's mtime) configures again
$(BUILD)/nginx/Makefile: config ngx_module engine/api engine/jinja \
                         engine/tokenizer engine/params engine/text \
                         engine/format
	NGX_LLM_ENGINE_BIN=$(ENGINE_BIN) NGX_LLM_SAN="$(SAN)" \
	    tools/configure-nginx.sh "$(abspath $(BUILD)/nginx)" "$(NGINX_SRC)"

# --- set-up, run, test --------------------------------------------------------

deps:
	@tools/deps.sh "$(CACHE_DIR)"

# nginx in the foreground with its own prefix; Ctrl-C stops nginx, and the
# engine follows its master out (docs/architecture.md)
run: deps all
	@mkdir -p $(BUILD)/run/logs $(BUILD)/run/models
	@ln -sf "$(MODEL)" $(BUILD)/run/models/default.gguf
	@ln -sfn $(abspath conf.example/playground) $(BUILD)/run/playground
	@echo "serving $(MODEL) on http://127.0.0.1:8080 (Ctrl-C stops)"
	nginx -p $(abspath $(BUILD)/run)/ -c $(abspath conf.example/nginx.conf) \
	    -g 'daemon off;'

T_NGINX_ENV = TEST_NGINX_BINARY=$${TEST_NGINX_BINARY:-/usr/sbin/nginx} \
	TEST_NGINX_LOAD_MODULES=$(abspath $(BUILD)/modules/ngx_http_llm_module.so) \
	TEST_NGINX_MODEL=$(MODEL) TEST_NGINX_FIXTURES=$(FIXTURES) \
	TEST_NGINX_GEMMA=$(GEMMA) TEST_NGINX_ENGINE=$(abspath $(BUILD)/ngx_llm_engine) \
	TEST_NGINX_BUILD=$(abspath $(BUILD))

# CPAN's Test::Nginx when installed, else our work-alike in t/lib
T_NGINX_INC = $(shell perl -MTest::Nginx::Socket -e1 2>/dev/null || echo -I t/lib)

$(BUILD)/t/ring_poke: t/tools/ring_poke.c engine/ring/ngx_llm_ring.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $<

t-nginx: all $(BUILD)/t/ring_poke
	$(T_NGINX_ENV) prove $(T_NGINX_INC) $(or $(T),t/*.t)

# the operations kit (docs/operations.md): promtool on /metrics, the alert
# rules and their unit tests, the dashboard's metric names, a live
# Prometheus scraping ngx_llm; deps.sh --ops installs Debian's prometheus
test-ops: all
	@tools/deps.sh --ops "$(CACHE_DIR)"
	$(T_NGINX_ENV) prove $(T_NGINX_INC) t/ops/*.t

# the Debian package (docs/operations.md): the tree copied to
# build/deb/src (git's files, tracked or new and not ignored; without git,
# as in conf.example/docker/Dockerfile, the tree less build/) with
# tools/debian/ as its debian/, built there by dpkg-buildpackage (CPU
# only). dpkg-buildpackage names missing build dependencies:
# tools/deps.sh --package installs them.
DEB_SRC := $(BUILD)/deb/src

deb:
	rm -rf $(BUILD)/deb && mkdir -p $(DEB_SRC)
	if git rev-parse --show-toplevel >/dev/null 2>&1; then \
	    git ls-files -z -co --exclude-standard | xargs -0 tar -cf -; \
	else tar --exclude=./$(BUILD) --exclude=./.git -cf - .; fi \
	    | tar -xf - -C $(DEB_SRC)
	rm -rf $(DEB_SRC)/debian && cp -r tools/debian $(DEB_SRC)/debian
	cd $(DEB_SRC) && DEB_BUILD_OPTIONS="noautodbgsym parallel=$$(nproc)" \
	    dpkg-buildpackage -us -uc -b > ../build.log 2>&1 \
	    || { tail -40 ../build.log; exit 1; }
	@ls $(BUILD)/deb/*.deb

# installs the package (root), serves with Debian's nginx and purges it;
# refuses to run if the package is installed already. Not part of test.
test-package:
	@tools/deps.sh --package "$(CACHE_DIR)"
	$(MAKE) deb
	TEST_NGINX_MODEL=$(MODEL) TEST_NGINX_BUILD=$(abspath $(BUILD)) \
	    prove t/package/containers.t t/package/package.t

# the playground in Debian's headless Chromium, driven over the DevTools
# protocol; the screenshot is $(BUILD)/t/playground/playground.png
test-ui: all
	@tools/deps.sh --ui "$(CACHE_DIR)"
	$(T_NGINX_ENV) prove $(T_NGINX_INC) t/ui/playground.t

# the layers of docs/architecture.md, over includes and the objects' symbols;
# first its self-test: planted loops and a call from sched into api must fail
layer-check: all
	python3 tools/layer_check.py --self-test
	python3 tools/layer_check.py $(OBJ) $(BUILD)/nginx
	@# a symbol the module's sources lack shows only at dlopen: say it here
	@u=$$(nm -u $(BUILD)/modules/ngx_http_llm_module.so \
	      | awk '$$2 ~ /^(llm_|tok_|jinja|j[a-z]+_|gguf|ggml|st_|hf_)/ {print $$2}'); \
	    if [ -n "$$u" ]; then \
	        echo "layer-check: the module lacks: $$u (config builds ngx_module/," \
	             "engine/{api,jinja,tokenizer,params,text,format}/ and" \
	             "kernels/tensor_type.c)"; \
	        exit 1; fi

# the suites in turn; what each builds, TEST_JOBS at a time (CI's machines
# have 2 cores, and a plain `make test` would compile one file at a time)
TEST_JOBS ?= 2
test: deps
	$(MAKE) -j$(TEST_JOBS) all
	$(MAKE) layer-check
	$(MAKE) -j$(TEST_JOBS) unit
	$(MAKE) -j$(TEST_JOBS) t-nginx
	$(MAKE) test-ops
	$(MAKE) -j$(TEST_JOBS) fuzz-smoke
	$(MAKE) -j$(TEST_JOBS) test-asan T="$(ASAN_T_CI)"

# --- ASan + UBSan + LeakSanitizer (docs/testing.md) ------------------------------

# the engine, the unit tests and the module in a tree of their own, built
# with gcc's sanitizers; Debian's nginx loads the module with the runtime
# preloaded by a wrapper (only nginx: perl and curl under the preload fail
# or hang). Every report, of the engine, nginx or a unit test, goes to a
# file in $(ASAN_LOGS); one there fails the target, printed.
ASAN_BUILD := $(BUILD)/asan
ASAN_LOGS  := $(abspath $(ASAN_BUILD))/san
ASAN_SAN   := -fsanitize=address,undefined -fno-sanitize-recover=undefined \
              -fno-omit-frame-pointer
ASAN_RT     = $(shell $(CC) -print-file-name=libasan.so)
# nginx has no frame pointers: the slow unwinder gives its leaks a stack
ASAN_OPTS  := detect_leaks=1:halt_on_error=1:fast_unwind_on_malloc=0:log_path=$(ASAN_LOGS)/asan
ASAN_ENV    = ASAN_OPTIONS=$(ASAN_OPTS) \
	LSAN_OPTIONS=suppressions=$(abspath t/asan/lsan.supp):print_suppressions=0 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:log_path=$(ASAN_LOGS)/ubsan
# without the CUDA objects: nothing runs them under the sanitizers (no
# device here; ASan beside the CUDA runtime needs options of its own), and
# nvcc is the slowest part of a fresh ASan build
ASAN_MAKE   = CFLAGS='-O1 -g' $(MAKE) BUILD=$(ASAN_BUILD) CUDA=0 SAN='$(ASAN_SAN)'
# the suites of test-asan (T= for others); make test runs the unit tests
# and ASAN_T_CI only, for CI's time (docs/testing.md)
ASAN_T     ?= t/*.t
ASAN_T_CI  ?= t/001-engine.t t/020-api.t

$(ASAN_BUILD)/preload.so: t/asan/preload.c
	@mkdir -p $(dir $@)
	$(CC) -shared -fPIC -O -o $@ $<

$(ASAN_BUILD)/nginx-asan: Makefile $(ASAN_BUILD)/preload.so
	@mkdir -p $(dir $@)
	@printf '%s\n' '#!/bin/sh' \
	    '# nginx with the ASan runtime first (make test-asan)' \
	    'LD_PRELOAD=$(ASAN_RT):$(abspath $(ASAN_BUILD))/preload.so$${LD_PRELOAD:+:$$LD_PRELOAD} ASAN_OPTIONS=$(ASAN_OPTS) \' \
	    '    LSAN_OPTIONS=suppressions=$(abspath t/asan/lsan.supp) \' \
	    '    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:log_path=$(ASAN_LOGS)/ubsan \' \
	    '    exec $${NGX_LLM_NGINX:-/usr/sbin/nginx} "$$@"' > $@.tmp
	@chmod +x $@.tmp && mv -f $@.tmp $@

# `+`: $(MAKE) reaches these lines through ASAN_MAKE, which make does not
# see as recursive, so without it the sub-makes ran at -j1 ("jobserver
# unavailable") and the sanitizer build took one core of CI's two
test-asan: $(ASAN_BUILD)/nginx-asan
	+$(ASAN_MAKE) all $(ASAN_BUILD)/t/ring_poke
	@# nginx workers and the engine run as nobody under root; a WARNING
	@# in a report file (test_scheduler asks ASan for 2^48 bytes) is no error
	@rm -rf $(ASAN_LOGS) && mkdir -p $(ASAN_LOGS) && chmod 1777 $(ASAN_LOGS)
	+@rc=0; \
	$(ASAN_ENV) $(ASAN_MAKE) unit || rc=1; \
	$(ASAN_ENV) TEST_NGINX_BINARY=$(abspath $(ASAN_BUILD))/nginx-asan \
	    $(ASAN_MAKE) t-nginx T="$(or $(T),$(ASAN_T))" || rc=1; \
	bad=$$(grep -l -E 'ERROR: |runtime error:' $(ASAN_LOGS)/* 2>/dev/null); \
	if [ -n "$$bad" ]; then \
	    for f in $$bad; do echo "== $$f"; head -n 60 "$$f"; done; \
	    echo "test-asan: sanitizer reports in $(ASAN_LOGS)"; rc=1; fi; \
	exit $$rc

# --- benchmarks (docs/perf.md; not part of test) ----------------------------------

BENCH_BINS := $(BUILD)/bench/serve_bench $(BUILD)/bench/decode \
              $(BUILD)/bench/ring_ping $(BUILD)/bench/isolation \
              $(BUILD)/bench/grammar_bench $(BUILD)/bench/moe
# grammar_bench's folders of JSON Schemas (*.json): ours (bench/schemas,
# with examples/) and SchemaStore's from `make deps`
GRAMMAR_SCHEMAS ?= bench/schemas $(wildcard $(FIXTURES)/jsonschema/schemastore)

$(BUILD)/bench/serve_bench: bench/serve_bench.c engine/format/file.c engine/format/file.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< engine/format/file.c -lcjson

$(BUILD)/bench/decode: bench/decode.c bench/membw.c bench/membw.h $(ENGINE_LIB_OBJS) $(ENGINE_OBJS_CUDA)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Ibench -o $@ bench/decode.c bench/membw.c \
	    $(ENGINE_LIB_OBJS) $(ENGINE_OBJS_CUDA) $(LDLIBS) $(CUDA_LIBS)

$(BUILD)/bench/moe: bench/moe.c $(ENGINE_LIB_OBJS) $(ENGINE_OBJS_CUDA)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ bench/moe.c \
	    $(ENGINE_LIB_OBJS) $(ENGINE_OBJS_CUDA) $(LDLIBS) $(CUDA_LIBS)

$(BUILD)/bench/isolation: bench/isolation.c $(ENGINE_LIB_OBJS) $(ENGINE_OBJS_CUDA)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ bench/isolation.c \
	    $(ENGINE_LIB_OBJS) $(ENGINE_OBJS_CUDA) $(LDLIBS) $(CUDA_LIBS)

$(BUILD)/bench/grammar_bench: bench/grammar_bench.c $(ENGINE_LIB_OBJS) $(ENGINE_OBJS_CUDA)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(ENGINE_LIB_OBJS) $(ENGINE_OBJS_CUDA) \
	    $(LDLIBS) $(CUDA_LIBS)

$(BUILD)/bench/ring_ping: bench/ring_ping.c engine/ring/ngx_llm_ring.h engine/ring/ring_client.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $<

# one run, 3-7 minutes: prints the table, writes docs/perf.md and
# docs/perf.svg (ROUNDS=n interleaves n rounds of every variant);
# LLAMA_BIN / IK_LLAMA_BIN (from the environment or make's command line)
# add the peers to bench/run.sh's rounds and their block to docs/perf.md
bench: all $(BENCH_BINS)
	$(BUILD)/bench/grammar_bench $(MODEL) $(GRAMMAR_SCHEMAS)
	BUILD=$(abspath $(BUILD)) MODEL=$(MODEL) bench/run.sh
	$(MAKE) bench-isolation
	$(MAKE) bench-spec

# ngx_llm against llama.cpp and/or ik_llama.cpp only: bench/run.sh with
# PEERS_ONLY=1 (LLAMA_BIN and/or IK_LLAMA_BIN required; ROUNDS, PEER_SIZES,
# PEER_STREAMS, PEER_REPS, PEER_KERNELS, PEER_SERVE, EMBED_GGUF:
# docs/perf.md), then,
# with IK_LLAMA_BIN, the rows of issues 28-30 (bench/peer_suite.sh: the
# synthetic 1B in five types, the qwen3moe shape, Gemma 3 270M; PEER_8B=1
# adds the 8B; PEER_SUITE=0 skips them; SYNTH_DIR holds the model files)
PEER_SUITE ?= 1
SYNTH_DIR  ?= $(BUILD)/bench/models
bench-peers: all $(BENCH_BINS)
	BUILD=$(abspath $(BUILD)) MODEL=$(MODEL) PEERS_ONLY=1 bench/run.sh
	if [ "$(PEER_SUITE)" = 1 ] && [ -n "$(IK_LLAMA_BIN)" ]; then \
	    BUILD=$(abspath $(BUILD)) FIXTURES=$(FIXTURES) GEMMA=$(GEMMA) \
	    SYNTH_DIR=$(abspath $(SYNTH_DIR)) bench/peer_suite.sh; fi

# prompt-lookup speculative decoding off and on, interleaved, on the
# input-grounded workload at 1 and 16 streams (docs/scheduler.md; about 5
# minutes; SPEC_ARGS adds options, e.g. --speculative 3 --ngram 2)
bench-spec: all
	$(BUILD)/ngx_llm_engine bench --model $(MODEL) --threads 2 \
	    --workload grounded --streams 1,16 --tokens 128 --spec-compare \
	    --speculative 5 --repeat 5 $(SPEC_ARGS)

# interactive TTFT/TPOT beside 32 batch streams, classes against one class
# (docs/scheduler.md; about 3 minutes; ISOLATION_ARGS adds options)
bench-isolation: $(BUILD)/bench/isolation
	$(BUILD)/bench/isolation --model $(MODEL) $(ISOLATION_ARGS)

# a front with llm_tokenizer and two nodes: prefix-cache hits and TTFT with
# hash $llm_prefix_hash against round robin (docs/operations.md, Routing;
# a few minutes; ROUTING_ARGS adds options, e.g. --rounds 2)
bench-routing: all
	python3 bench/routing.py --build $(BUILD) --model $(MODEL) $(ROUTING_ARGS)

# --- soak (docs/testing.md; not part of test) ------------------------------------

# 16 clients for SOAK_SECS (600) on the default model: RSS and descriptors
# flat, /metrics idle at the end
soak: all
	BUILD=$(abspath $(BUILD)) MODEL=$(MODEL) bench/soak.sh

# --- fuzzing (docs/testing.md) ----------------------------------------------------

FUZZ_SRCS   := $(wildcard fuzz/fuzz_*.c)
FUZZ_BINS   := $(FUZZ_SRCS:fuzz/%.c=$(BUILD)/fuzz/%)
FUZZ_SECS   ?= 10
# make fuzz: FUZZ_RUNS executions of each fast harness, FUZZ_SLOW_SECS
# seconds of each slow one (7,000-20,000 executions a second here)
FUZZ_RUNS      ?= 10000000
FUZZ_SLOW      := chat jinja tokenizer json_schema
FUZZ_SLOW_SECS ?= $(or $(SECS),600)
# harnesses run at once, each on a core of its own for its whole limit
FUZZ_JOBS      ?= 2
# undefined behaviour stops a run as a crash does
FUZZ_SAN    := -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_CFLAGS := -std=gnu11 -g -O1 $(FUZZ_SAN) -Iengine -Ikernels
# the library once, instrumented for coverage. The harnesses link the
# rooms they fuzz (FUZZ_ROOMS, each closed under its calls, as the nginx
# module's set), so a fuzz build compiles no kernel, model or scheduler
# (the sanitized SIMD files were most of its time: docs/testing.md);
# unit-asan's tests link the whole library, built when they are
FUZZ_ROOMS    := api format grammar jinja params text tokenizer
FUZZ_LIB_OBJS := $(filter-out %/server.o %/cli_plan.o,$(ENGINE_LIB_SRCS:%.c=$(BUILD)/fuzz/obj/%.o))
FUZZ_OBJS     := $(filter $(FUZZ_ROOMS:%=$(BUILD)/fuzz/obj/engine/%/%) \
                   $(BUILD)/fuzz/obj/kernels/tensor_type.o \
                   $(BUILD)/fuzz/obj/engine/server/server_slot.o,$(FUZZ_LIB_OBJS))
.SECONDARY: $(FUZZ_LIB_OBJS)

# clang writes the .d after the object (gcc before it): the touch keeps
# the object the newer, or every make would compile the whole tree again
# (make test's unit-asan did, after fuzz-smoke: twice the tree's CPU)
$(BUILD)/fuzz/obj/%.o: %.c $(BUILD)/fuzz/obj/%.d
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -MMD -MP -fsanitize=fuzzer-no-link -c $< -o $@
	@touch $@

$(BUILD)/fuzz/fuzz_%: fuzz/fuzz_%.c $(BUILD)/fuzz/fuzz_%.d $(FUZZ_OBJS)
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -MMD -MP -MF $@.d -fsanitize=fuzzer -o $@ $< $(FUZZ_OBJS) $(LDLIBS)

# the scheduler's tests again, linked with clang's sanitized objects:
# memory errors on their error paths (a use after free was one,
# test_scheduler's test_create_oom) fail here. Not in make test since
# session 11: test-asan runs these two whole (gcc's ASan and UBSan, which
# fail on that use after free too), where this runs them SCHED_TINY_ONLY
ASAN_UNIT := $(BUILD)/fuzz/test_scheduler $(BUILD)/fuzz/test_sched_decode

$(ASAN_UNIT): $(BUILD)/fuzz/%: t/unit/%.c $(UNIT_HEADERS) $(FUZZ_LIB_OBJS)
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -It/unit -o $@ $< $(FUZZ_LIB_OBJS) $(LDLIBS)

unit-asan: $(ASAN_UNIT)
	FIXTURES=$(FIXTURES) MODEL=$(MODEL) SCHED_TINY_ONLY=1 \
	    prove -j$(UNIT_JOBS) -e '' $(ASAN_UNIT)

# the tokenizer and chat harnesses load vocabularies and templates from
# FIXTURES (and t/data, from the repository root)
fuzz-smoke: $(FUZZ_BINS)
	FIXTURES=$(FIXTURES) FUZZ_JOBS=$(FUZZ_JOBS) fuzz/run.sh $(BUILD) -max_total_time=$(FUZZ_SECS) \
	    -max_total_time=$(FUZZ_SECS) "" $(FUZZ_BINS)

fuzz: $(FUZZ_BINS)
	FIXTURES=$(FIXTURES) FUZZ_JOBS=$(FUZZ_JOBS) fuzz/run.sh $(BUILD) -runs=$(FUZZ_RUNS) \
	    -max_total_time=$(FUZZ_SLOW_SECS) "$(FUZZ_SLOW)" $(FUZZ_BINS)

clean:
	rm -rf $(BUILD)

# the header dependencies the compilers wrote (-MMD); a missing one is
# made by nothing, which rebuilds its object (above)
%.d: ;
.PRECIOUS: %.d
# and named, so that make does not take a .d for an intermediate file of
# the pattern rules above: make 4.3 would leave a missing intermediate
# file (and the object that needs it) alone
DEP_FILES := $(ENGINE_LIB_OBJS:.o=.d) $(OBJ)/engine/server/main.d \
             $(CU_OBJS:.o=.d) $(UNIT_BINS:=.d) $(FUZZ_LIB_OBJS:.o=.d) \
             $(FUZZ_BINS:=.d)
$(DEP_FILES):
-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
