# framefarm: `make run` sets up and serves; `make test` runs the whole suite (what CI runs).

GO       ?= go
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT   ?= $(shell git rev-parse HEAD 2>/dev/null)
DATE     ?= $(shell git log -1 --format=%cI 2>/dev/null)
LDFLAGS  := -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.date=$(DATE)
CONFIG   ?= config.example.toml
FUZZTIME ?= 30s
TEAM     ?= demo
SUDO     := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# Debian packages the coordinator, its built-in render node and the tests need; Node.js (for the
# Lottie worker) comes from Debian only where no node is installed.
APT_PACKAGES := ffmpeg fonts-dejavu-core ca-certificates
# The dashboard's tests drive a real browser, the packages' test checks their units with
# systemd-analyze, the monitoring kit is checked by a real Prometheus (and promtool), and the
# partition tests make network namespaces with iproute2's ip.
TEST_APT_PACKAGES := chromium systemd prometheus iproute2
LOTTIE_WORKER := renderer/lottie/worker
# make check runs staticcheck at this version (go run fetches it; go.mod is left alone).
STATICCHECK_VERSION := v0.8.2
# The tests' S3 server: SeaweedFS, built once from its pinned Go module into a cache folder outside
# the checkout. Its module has replace directives, so `go install` refuses it: the source is
# downloaded and built in a writable copy.
WEED_VERSION := v0.0.0-20261109003541-7506e5f91cd6
WEED_CACHE   ?= $(HOME)/.cache/framefarm
WEED         := $(WEED_CACHE)/weed-$(WEED_VERSION)
# make package builds the Debian packages with nfpm at this version, installed into the same cache.
NFPM_VERSION := v2.45.2
NFPM         := $(WEED_CACHE)/nfpm-$(NFPM_VERSION)
DIST         ?= dist
# What make package builds: the Debian packages' systems, and the After Effects machines'.
PACKAGE_TARGETS := linux/amd64 linux/arm64 windows/amd64 darwin/arm64

# apt_install installs the Debian packages of $(1) that are missing. Another apt-get holding
# the lock (unattended-upgrades, on render machines) is waited for, up to APT_LOCK_WAIT seconds.
APT_LOCK_WAIT ?= 600
define apt_install
	@missing=""; for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		$(SUDO) apt-get -o DPkg::Lock::Timeout=$(APT_LOCK_WAIT) update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get -o DPkg::Lock::Timeout=$(APT_LOCK_WAIT) install -y -qq --no-install-recommends $$missing; \
	fi
endef

.PHONY: setup build run token test stress check bench fuzz clean proto weed generate package

setup: ## install system packages and Go modules
	@command -v $(GO) >/dev/null || { echo "Go 1.26 or newer is required (https://go.dev/dl/)"; exit 1; }
	$(call apt_install,$(APT_PACKAGES) $(shell command -v node >/dev/null && command -v npm >/dev/null || echo nodejs npm))
	$(GO) mod download
	@$(MAKE) -s --no-print-directory $(LOTTIE_WORKER)/node_modules/.package-lock.json

# npm ci again only when the pinned versions change.
$(LOTTIE_WORKER)/node_modules/.package-lock.json: $(LOTTIE_WORKER)/package-lock.json $(LOTTIE_WORKER)/package.json
	cd $(LOTTIE_WORKER) && npm ci --no-audit --no-fund --loglevel=error

build: ## build bin/framefarm
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/framefarm ./cmd/framefarm

run: setup build ## serve on 127.0.0.1:8080 with an embedded render node and the embedded store
	bin/framefarm serve --config $(CONFIG)

token: setup build ## print an API token for TEAM (asks the running server, or writes ./data when none runs)
	bin/framefarm token create --config $(CONFIG) --team $(TEAM)

package: setup $(NFPM) ## $(DIST)/: Debian packages (amd64, arm64), a Windows zip and a macOS tarball of render nodes
	rm -rf $(DIST) && mkdir -p $(DIST)/build
	@set -e; for target in $(PACKAGE_TARGETS); do \
		os=$${target%/*}; arch=$${target#*/}; ext=; [ $$os = windows ] && ext=.exe; \
		echo "building framefarm for $$os/$$arch"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(DIST)/build/framefarm-$$os-$$arch$$ext ./cmd/framefarm; \
	done
	@# The Lottie worker with the native module of each Debian architecture (npm names amd64 x64).
	@set -e; for arch in amd64 arm64; do \
		worker=$(DIST)/build/lottie-worker-$$arch; mkdir -p $$worker; \
		cp $(LOTTIE_WORKER)/worker.js $(LOTTIE_WORKER)/package.json $(LOTTIE_WORKER)/package-lock.json $$worker/; \
		echo "installing the Lottie worker's modules for linux/$$arch"; \
		(cd $$worker && npm ci --omit=dev --no-audit --no-fund --loglevel=error --os=linux --libc=glibc \
			--cpu=$$([ $$arch = amd64 ] && echo x64 || echo $$arch)); \
	done
	$(GO) run ./cmd/package --dist $(DIST) --build $(DIST)/build --version $(VERSION) --nfpm $(NFPM)
	@rm -rf $(DIST)/build && ls -l $(DIST)

$(NFPM):
	@mkdir -p $(WEED_CACHE)
	@set -e; bin=$$(mktemp -d); trap 'rm -rf $$bin' EXIT; \
		GOBIN=$$bin $(GO) install github.com/goreleaser/nfpm/v2/cmd/nfpm@$(NFPM_VERSION) && mv $$bin/nfpm $@

generate: ## write the code that follows from the tags of persistence.Job (cmd/jobfields)
	$(GO) generate ./persistence

check: ## formatting, vet, staticcheck, and the builds of render nodes on Windows and macOS (After Effects machines)
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); [ -z "$$unformatted" ] || { echo "not gofmt-formatted: $$unformatted"; exit 1; }
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	GOOS=windows GOARCH=amd64 $(GO) build -o /dev/null ./cmd/framefarm
	GOOS=darwin GOARCH=arm64 $(GO) build -o /dev/null ./cmd/framefarm

# The end-to-end suite runs a second time with its files in the S3 server. Both passes run
# whatever the first gives, and both outcomes are reported.
test: setup check weed package ## the whole suite, with the race detector (FRAMEFARM_ARTIFACTS=DIR keeps the dashboard's screenshots)
	$(call apt_install,$(TEST_APT_PACKAGES))
	@local=passed; bucket=passed; \
	FRAMEFARM_WEED=$(WEED) FRAMEFARM_DIST=$(abspath $(DIST)) $(GO) test -race -count=1 -timeout 30m ./... || local=FAILED; \
	FRAMEFARM_WEED=$(WEED) FRAMEFARM_TEST_OBJECTS=s3 $(GO) test -race -count=1 -timeout 30m ./cmd/framefarm || bucket=FAILED; \
	echo "make test: every package with files in a local folder $$local; the end-to-end suite with files in a bucket $$bucket"; \
	[ $$local = passed ] && [ $$bucket = passed ]

# make stress runs every package but the end-to-end one STRESS times in one go, and the
# end-to-end suite (coordinator and node processes) STRESS times, then reports each test's
# passes; LOAD=1 keeps another make test running beside it for the whole time.
STRESS ?= 20
stress: setup check weed ## every test STRESS (20) times under -race, reporting each one's passes (LOAD=1: beside a make test)
	$(call apt_install,$(TEST_APT_PACKAGES))
	@set -u; log=$$(mktemp -d); echo "stress logs in $$log"; \
	if [ "$(LOAD)" = 1 ]; then setsid sh -c 'while :; do $(MAKE) -s --no-print-directory test; done' >>$$log/load.log 2>&1 & load=$$!; fi; \
	FRAMEFARM_WEED=$(WEED) $(GO) test -race -count=$(STRESS) -timeout 6h -v $$($(GO) list ./... | grep -v '/cmd/framefarm$$') > $$log/unit.log 2>&1; \
	FRAMEFARM_WEED=$(WEED) $(GO) test -race -count=$(STRESS) -timeout 12h -v ./cmd/framefarm > $$log/process.log 2>&1; \
	if [ "$(LOAD)" = 1 ]; then kill -TERM -$$load 2>/dev/null; fi; \
	for part in unit process; do \
		echo "== $$part tests: passes of $(STRESS) (every test that failed once is listed)"; \
		awk -v want=$(STRESS) '/^--- (PASS|FAIL|SKIP)/ { name=$$3; seen[name]++; if ($$2 == "FAIL:") failed[name]++ } \
			END { n=0; bad=0; for (t in seen) { n++; if (failed[t] > 0 || seen[t] != want) { bad++; printf "  %s: %d of %d passed\n", t, seen[t]-failed[t], want } } \
			printf "  %d tests, %d passed %d of %d times\n", n, n-bad, want, want; exit bad > 0 }' $$log/$$part.log || status=1; \
	done; \
	if [ "$(LOAD)" = 1 ]; then echo "== the make test runs beside it (an unfinished last one is cut short)"; grep '^make test:' $$log/load.log | sort | uniq -c; fi; \
	exit $${status:-0}

weed: $(WEED) ## build the tests' S3 server (SeaweedFS) into $(WEED_CACHE)

$(WEED):
	@echo "building SeaweedFS $(WEED_VERSION) into $(WEED_CACHE) (once; several minutes)"
	@mkdir -p $(WEED_CACHE)
	@set -e; work=$$(mktemp -d); trap 'chmod -R u+w $$work; rm -rf $$work' EXIT; \
		src=$$(cd $$work && GOFLAGS=-mod=mod $(GO) mod download -json github.com/seaweedfs/seaweedfs@$(WEED_VERSION) \
			| sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$$/\1/p'); \
		[ -n "$$src" ] || { echo "could not download github.com/seaweedfs/seaweedfs@$(WEED_VERSION)"; exit 1; }; \
		cp -R $$src $$work/seaweedfs && chmod -R u+w $$work/seaweedfs; \
		cd $$work/seaweedfs && $(GO) build -o $@.partial ./weed && mv $@.partial $@

proto: ## regenerate cluster/protocol/envelope.pb.go (needs protoc and protoc-gen-go)
	cd cluster/protocol && protoc --go_out=. --go_opt=paths=source_relative envelope.proto

bench: setup weed ## benchmarks (load over loopback against real coordinator processes)
	FRAMEFARM_WEED=$(WEED) $(GO) test -run '^$$' -bench . -benchtime 1x -timeout 30m ./...

# Minimizing a new input may otherwise outlast FUZZTIME, which go test reports as a failure. A
# failure that writes no failing input is Go's fuzz coordinator racing its own deadline
# (golang/go#75804, fixed in Go 1.27), not a finding: that target runs once more.
fuzz: setup ## run every fuzz target for FUZZTIME each
	@for target in $$($(GO) test -list '^Fuzz' ./... | grep '^Fuzz'); do \
		pkg=$$(grep -rl "func $$target(" --include='*_test.go' . | xargs dirname | head -1); \
		for attempt in 1 2; do \
			echo "fuzzing $$target in $$pkg for $(FUZZTIME)"; \
			inputs=$$(ls $$pkg/testdata/fuzz/$$target 2>/dev/null | wc -l); \
			$(GO) test -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 5s $$pkg && break; \
			if [ $$attempt = 2 ] || [ $$(ls $$pkg/testdata/fuzz/$$target 2>/dev/null | wc -l) != $$inputs ]; then exit 1; fi; \
			echo "$$target failed without writing a failing input (golang/go#75804): once more"; \
		done; \
	done

clean:
	rm -rf bin $(DIST)
