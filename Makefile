# tdist: the two commands a new user needs.
#   make run   -- install what is missing, build, run the main job
#   make test  -- install what is missing, build, run every test (ctest)
# Other targets: build, test-asan, test-tsan, ci, clean, install.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps build run test test-asan test-tsan ci clean install

all: build

deps:
	@./scripts/deps.sh

build: deps
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

run: build
	./scripts/run-main.sh $(BUILD)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -LE gpu --timeout 300

# Sanitizer builds of the CPU runtime (CUDA off; TSan runs the runtime tests).
test-asan: deps
	@cmake -S . -B build-asan -DTD_SANITIZE=address -DTD_WITH_CUDA=OFF >/dev/null
	@cmake --build build-asan -j $(JOBS)
	cd build-asan && ctest --output-on-failure -j $(JOBS) -L cpu -LE gpu --timeout 600

test-tsan: deps
	@cmake -S . -B build-tsan -DTD_SANITIZE=thread -DTD_WITH_CUDA=OFF >/dev/null
	@cmake --build build-tsan -j $(JOBS)
	cd build-tsan && ctest --output-on-failure -j $(JOBS) -L runtime -LE gpu --timeout 600

ci: test test-asan test-tsan

install: build
	cmake --install $(BUILD)

clean:
	rm -rf $(BUILD) build-asan build-tsan
