# Two commands for a fresh machine (see README): `make run` and `make test`.
VENV   := .venv
PY     := $(VENV)/bin/python
EXTRAS := asr,llm,llm-small,llm-gpu,tts,tts-gpl,face,dev
# Derived model files (engines/cache.py); Kokoro's voices are packed there from npm.
CACHE  := $(or $(RTC_AVATAR_CACHE),$(HOME)/.cache/rtc-avatar)
KOKORO_VOICES := $(CACHE)/kokoro/kokoro-js-1.2.1.tgz
# llama.cpp is built here, for this CPU's instruction sets named one by one (GGML_NATIVE would
# also switch on AMX, whose kernels crash on Q4_K weights: a segfault in
# ggml_backend_amx_mul_mat on Sapphire Rapids, llama.cpp issue 20824, seen on this project's
# CI machine). Other architectures keep llama.cpp's own native build.
LLAMA_VERSION := 0.3.36
CPU_FLAGS := $(shell grep -m1 -o -w -E 'avx|avx2|fma|f16c|bmi2|avx512f|avx512vbmi|avx512_vnni|avx512_bf16|avx_vnni' /proc/cpuinfo 2>/dev/null | sort -u)
on_if = $(if $(filter $(1),$(CPU_FLAGS)),ON,OFF)
LLAMA_CMAKE_ARGS := $(if $(filter x86_64,$(shell uname -m)),-DGGML_NATIVE=OFF \
  -DGGML_AVX=$(call on_if,avx) -DGGML_AVX2=$(call on_if,avx2) -DGGML_FMA=$(call on_if,fma) \
  -DGGML_F16C=$(call on_if,f16c) -DGGML_BMI2=$(call on_if,bmi2) \
  -DGGML_AVX512=$(call on_if,avx512f) -DGGML_AVX512_VBMI=$(call on_if,avx512vbmi) \
  -DGGML_AVX512_VNNI=$(call on_if,avx512_vnni) -DGGML_AVX512_BF16=$(call on_if,avx512_bf16) \
  -DGGML_AVX_VNNI=$(call on_if,avx_vnni) -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF \
  -DGGML_AMX_BF16=OFF)
STAMP  := $(VENV)/.installed-$(shell (cat pyproject.toml; echo '$(LLAMA_VERSION) $(LLAMA_CMAKE_ARGS)') | cksum | cut -d' ' -f1)
ARGS   ?=
PYTEST_ARGS ?=

.PHONY: setup run test lint browser clients cluster-deps cluster slow-llama clean kokoro-voices

setup: $(STAMP) kokoro-voices

# torch is installed first by exact version: this machine keeps the 2.13.0 CPU wheel on disk,
# while an unpinned `torch` would pull a multi-GB CUDA build from the registry.
$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	@echo "building llama-cpp-python $(LLAMA_VERSION) for this CPU (~3-8 min on 2 cores)"
	CMAKE_BUILD_PARALLEL_LEVEL=2 CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PY) -m pip install -q \
	  --no-cache-dir --no-binary llama-cpp-python --force-reinstall --no-deps \
	  "llama-cpp-python==$(LLAMA_VERSION)"
	CMAKE_BUILD_PARALLEL_LEVEL=2 $(PY) -m pip install -q -e '.[$(EXTRAS)]'
	rm -f $(VENV)/.installed-*
	touch $@

# Kokoro-82M's 54 voices: the npm package kokoro-js@1.2.1, packed (not installed; no
# dependencies) into the engine cache, then the model joined from its PyPI parts and the voices
# extracted, both checked against their sha256 (engines/tts/kokoro_files.py).
kokoro-voices: $(KOKORO_VOICES)

$(KOKORO_VOICES): | $(STAMP)
	mkdir -p $(dir $@)
	cd $(dir $@) && npm pack --silent kokoro-js@1.2.1 >/dev/null
	$(PY) -c "from engines.tts.kokoro_files import KokoroFiles; print(KokoroFiles.locate())"

run: setup
	$(PY) -m rtc_server $(ARGS)

# Debian's chromium for the browser test (no browser downloads). Needs root; without it the
# browser tests skip with a reason.
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	  || echo "chromium not installed: browser tests will skip"; }

# Pipecat's client SDKs for the embedding tests (docs/embedding.md): the JS SDK example
# web_client/embed/app.js bundled by esbuild into
# web_client/embed/bundle.js (npm ci from its lock file into .cache/pipecat-js), and the
# prebuilt web client's static files (pip --no-deps: its FastAPI is never imported). Debian's
# npm is installed as root when missing; without it (or the registries) those tests skip.
PIPECAT_JS := .cache/pipecat-js
clients: setup
	@command -v npm >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null); } || true
	@if command -v npm >/dev/null 2>&1; then \
	  mkdir -p $(PIPECAT_JS) && cp web_client/embed/package.json web_client/embed/package-lock.json $(PIPECAT_JS)/ && \
	  (cd $(PIPECAT_JS) && npm ci --no-audit --no-fund --loglevel=error) && \
	  NODE_PATH=$(PIPECAT_JS)/node_modules $(PIPECAT_JS)/node_modules/.bin/esbuild web_client/embed/app.js \
	    --bundle --format=iife --minify --log-level=warning --outfile=web_client/embed/bundle.js \
	  || echo "Pipecat JS SDK example not built: its tests will skip"; \
	else echo "npm not installed: the Pipecat JS SDK tests will skip"; fi
	@$(PY) -m pip install -q --no-deps 'pipecat-ai-small-webrtc-prebuilt==2.5.0' \
	  || echo "pipecat-ai-small-webrtc-prebuilt not installed: its test will skip"

# Debian's redis-server and coturn for the scale-out tests and `make cluster`. Needs root;
# without them those tests skip with a reason.
cluster-deps:
	@{ command -v redis-server && command -v turnserver; } >/dev/null 2>&1 || { \
	  [ "$$(id -u)" = 0 ] && (apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	  apt-get install -y -qq redis-server coturn >/dev/null) \
	  || echo "redis-server/coturn not installed: cluster tests will skip"; }

# A whole cluster on loopback: redis-server, coturn, the shared LLM server (llama_cpp.server,
# built once from source, ~3 min), two workers and the gateway (docs/scale-out.md).
cluster: setup cluster-deps
	$(PY) -m pip install -q 'llama-cpp-python[server]==0.3.36'
	$(PY) -m rtc_server.cluster $(ARGS)

# The emulated slow machine of the benchmarks (bench/slow_machine.py,
# docs/hardware-and-latency.md): llama.cpp built without AVX-512 (AVX2/FMA/F16C on) beside
# the main venv, put first on the server's PYTHONPATH by `--modes slow`. ~8 min on 2 cores;
# not needed to run.
AVX2_LLAMA := .venv-avx2/site-packages
slow-llama: setup
	test -d $(AVX2_LLAMA)/llama_cpp || CMAKE_BUILD_PARALLEL_LEVEL=2 \
	  CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX512=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" \
	  $(PY) -m pip install -q --no-deps --no-cache-dir --no-binary llama-cpp-python \
	  --target $(AVX2_LLAMA) "llama-cpp-python==$$($(PY) -c 'import llama_cpp; print(llama_cpp.__version__)')"

# Lint first (ruff, then mypy over the product, testkit, the tests and the benchmarks); then
# every test runs inside a fresh network namespace that has only loopback: nothing can leave
# 127.0.0.1 (docs/architecture.md, "Tests and benchmarks").
test: setup browser clients cluster-deps lint
	unshare -n sh -c 'ip link set lo up && exec $(PY) -m pytest -q $(PYTEST_ARGS)'

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) .venv-avx2 .pytest_cache .mypy_cache
