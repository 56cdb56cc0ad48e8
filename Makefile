# ngx_llm: nginx module + inference engine.
#
#   make            build build/ngx_llm_engine and the nginx module
#   make deps       install missing Debian packages, fetch the default model
#   make run        deps + build + nginx in the foreground on 127.0.0.1:8080
#   make test       deps + build + every test suite (what CI runs)
#   make bench      benchmarks (long; not part of test)
#   make CUDA=0     skip the CUDA objects even when nvcc exists

SHELL      := /bin/bash
BUILD      := build
CC         ?= cc
NVCC       ?= nvcc
CUDA       ?= $(if $(shell command -v $(NVCC) 2>/dev/null),1,0)
NGINX_SRC  ?=
CACHE_DIR  ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/ngx_llm
MODEL      ?= $(CACHE_DIR)/SmolLM2-135M-Instruct.Q4_1.gguf
# test fixtures: fetched and made by `make deps` (tools/deps.sh)
FIXTURES   ?= $(CACHE_DIR)/fixtures

CFLAGS     ?= -O2 -g
CFLAGS     += -std=gnu11 -Wall -Wextra -fPIC -pthread -Iengine -Ikernels
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
UNIT_BINS       := $(UNIT_SRCS:t/unit/%.c=$(BUILD)/t/%)

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

.PHONY: all engine module unit deps run test t-nginx bench clean fuzz \
        fuzz-smoke cuda-check layer-check unit-asan

all: engine module

engine: $(BUILD)/ngx_llm_engine

$(OBJ)/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(OBJ)/%.cu.o: %.cu $(HEADERS)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -c $< -o $@

$(BUILD)/ngx_llm_engine: $(OBJ)/engine/server/main.o $(ENGINE_LIB_OBJS) $(ENGINE_OBJS_CUDA)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS) $(CUDA_LIBS)

$(BUILD)/t/%: t/unit/%.c $(ENGINE_LIB_OBJS) $(ENGINE_OBJS_CUDA) t/unit/tap.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -It/unit -o $@ $< $(ENGINE_LIB_OBJS) $(ENGINE_OBJS_CUDA) $(LDLIBS) $(CUDA_LIBS)

unit: $(UNIT_BINS) $(BUILD)/ngx_llm_engine
	FIXTURES=$(FIXTURES) MODEL=$(MODEL) BUILD=$(abspath $(BUILD)) \
	    prove -e '' $(UNIT_BINS)

# --- the nginx module -------------------------------------------------------

module: $(BUILD)/modules/ngx_http_llm_module.so

$(BUILD)/modules/ngx_http_llm_module.so: $(BUILD)/nginx/Makefile $(wildcard ngx_module/*.[ch]) $(HEADERS) $(ENGINE_LIB_SRCS) config
	$(MAKE) -C "$$(cat $(BUILD)/nginx/srcdir)" -f $(abspath $(BUILD))/nginx/Makefile modules
	@mkdir -p $(dir $@)
	@# a new file, not overwritten in place: a running nginx maps the old one
	cp $(BUILD)/nginx/ngx_http_llm_module.so $@.tmp && mv -f $@.tmp $@

# config globs these folders: a file added to or removed from one (the
# folder's mtime) configures again
$(BUILD)/nginx/Makefile: config ngx_module engine/text engine/format
	NGX_LLM_ENGINE_BIN=$(abspath $(BUILD))/ngx_llm_engine \
	    tools/configure-nginx.sh "$(abspath $(BUILD)/nginx)" "$(NGINX_SRC)"

# --- set-up, run, test --------------------------------------------------------

deps:
	@tools/deps.sh "$(CACHE_DIR)"

# nginx in the foreground with its own prefix; Ctrl-C stops nginx, and the
# engine follows its master out (docs/architecture.md)
run: deps all
	@mkdir -p $(BUILD)/run/logs $(BUILD)/run/models
	@ln -sf "$(MODEL)" $(BUILD)/run/models/default.gguf
	@echo "serving $(MODEL) on http://127.0.0.1:8080 (Ctrl-C stops)"
	nginx -p $(abspath $(BUILD)/run)/ -c $(abspath conf.example/nginx.conf) \
	    -g 'daemon off;'

T_NGINX_ENV = TEST_NGINX_BINARY=$${TEST_NGINX_BINARY:-/usr/sbin/nginx} \
	TEST_NGINX_LOAD_MODULES=$(abspath $(BUILD)/modules/ngx_http_llm_module.so) \
	TEST_NGINX_MODEL=$(MODEL) TEST_NGINX_FIXTURES=$(FIXTURES) \
	TEST_NGINX_ENGINE=$(abspath $(BUILD)/ngx_llm_engine) \
	TEST_NGINX_BUILD=$(abspath $(BUILD))

# CPAN's Test::Nginx when installed, else our work-alike in t/lib
T_NGINX_INC = $(shell perl -MTest::Nginx::Socket -e1 2>/dev/null || echo -I t/lib)

$(BUILD)/t/ring_poke: t/tools/ring_poke.c engine/ring/ngx_llm_ring.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $<

t-nginx: all $(BUILD)/t/ring_poke
	$(T_NGINX_ENV) prove $(T_NGINX_INC) $(or $(T),t/*.t)

# the layers of docs/architecture.md, over includes and the objects' symbols
layer-check: all
	python3 tools/layer_check.py $(OBJ) $(BUILD)/nginx
	@# a symbol the module's sources lack shows only at dlopen: say it here
	@u=$$(nm -u $(BUILD)/modules/ngx_http_llm_module.so \
	      | awk '$$2 ~ /^(llm_|tok_|jinja|j[a-z]+_|gguf|ggml|st_|hf_)/ {print $$2}'); \
	    if [ -n "$$u" ]; then \
	        echo "layer-check: the module lacks: $$u (config builds ngx_module/," \
	             "engine/text/, engine/format/ and kernels/tensor_type.c)"; \
	        exit 1; fi

test: deps all
	$(MAKE) layer-check
	$(MAKE) unit
	$(MAKE) t-nginx
	$(MAKE) fuzz-smoke
	$(MAKE) unit-asan

# --- benchmarks (docs/perf.md; not part of test) ----------------------------------

BENCH_BINS := $(BUILD)/bench/serve_bench $(BUILD)/bench/decode \
              $(BUILD)/bench/ring_ping

$(BUILD)/bench/serve_bench: bench/serve_bench.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< -lcjson

$(BUILD)/bench/decode: bench/decode.c bench/membw.c bench/membw.h $(ENGINE_LIB_OBJS) $(ENGINE_OBJS_CUDA)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Ibench -o $@ bench/decode.c bench/membw.c \
	    $(ENGINE_LIB_OBJS) $(ENGINE_OBJS_CUDA) $(LDLIBS) $(CUDA_LIBS)

$(BUILD)/bench/ring_ping: bench/ring_ping.c engine/ring/ngx_llm_ring.h engine/ring/ring_client.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $<

# one run, 3-7 minutes: prints the table, writes docs/perf.md and
# docs/perf.svg (ROUNDS=n interleaves n rounds of every variant)
bench: all $(BENCH_BINS)
	BUILD=$(abspath $(BUILD)) MODEL=$(MODEL) bench/run.sh

# --- fuzzing (docs/testing.md) ----------------------------------------------------

FUZZ_SRCS   := $(wildcard fuzz/fuzz_*.c)
FUZZ_BINS   := $(FUZZ_SRCS:fuzz/%.c=$(BUILD)/fuzz/%)
FUZZ_SECS   ?= 30
FUZZ_SAN    := -fsanitize=address,undefined
FUZZ_CFLAGS := -std=gnu11 -g -O1 $(FUZZ_SAN) -Iengine -Ikernels
# the library once, instrumented for coverage; each harness links it
FUZZ_OBJS   := $(filter-out %/server.o,$(ENGINE_LIB_SRCS:%.c=$(BUILD)/fuzz/obj/%.o))
.SECONDARY: $(FUZZ_OBJS)

$(BUILD)/fuzz/obj/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(BUILD)/fuzz/fuzz_%: fuzz/fuzz_%.c $(FUZZ_OBJS)
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_OBJS) $(LDLIBS)

# the scheduler's test again, linked with the sanitized objects: memory
# errors on its error paths (a use after free was one) fail here
$(BUILD)/fuzz/test_scheduler: t/unit/test_scheduler.c t/unit/tap.h $(FUZZ_OBJS)
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -It/unit -o $@ $< $(FUZZ_OBJS) $(LDLIBS)

unit-asan: $(BUILD)/fuzz/test_scheduler
	FIXTURES=$(FIXTURES) MODEL=$(MODEL) SCHED_TINY_ONLY=1 \
	    prove -e '' $(BUILD)/fuzz/test_scheduler

fuzz-smoke: $(FUZZ_BINS)
	@set -e; for f in $(FUZZ_BINS); do \
	    n=$${f##*/fuzz_}; mkdir -p $(BUILD)/fuzz/corpus-$$n; \
	    echo "fuzz $$n: $(FUZZ_SECS) s"; \
	    if ! $$f -max_total_time=$(FUZZ_SECS) -print_final_stats=1 \
	        -artifact_prefix=$(BUILD)/fuzz/$$n- \
	        $(BUILD)/fuzz/corpus-$$n fuzz/corpus/$$n \
	        > $(BUILD)/fuzz/$$n.log 2>&1; then \
	        tail -n 40 $(BUILD)/fuzz/$$n.log; \
	        echo "fuzz $$n FAILED: see $(BUILD)/fuzz/$$n.log"; exit 1; \
	    fi; \
	    grep -E "stat::number_of_executed_units" $(BUILD)/fuzz/$$n.log; \
	done

fuzz:
	$(MAKE) fuzz-smoke FUZZ_SECS=$(or $(SECS),300)

clean:
	rm -rf $(BUILD)
