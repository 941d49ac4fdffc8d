# framefarm: `make run` sets up and serves; `make test` runs the whole suite (what CI runs).

GO       ?= go
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)
CONFIG   ?= config.example.toml
FUZZTIME ?= 30s
TEAM     ?= demo
SUDO     := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# Debian packages the coordinator, its built-in render node and the tests need; Node.js (for the
# Lottie worker) comes from Debian only where no node is installed.
APT_PACKAGES := ffmpeg fonts-dejavu-core ca-certificates
# The dashboard's tests drive a real browser.
TEST_APT_PACKAGES := chromium
LOTTIE_WORKER := renderer/lottie/worker
# The tests' S3 server: SeaweedFS, built once from its pinned Go module into a cache folder outside
# the checkout. Its module has replace directives, so `go install` refuses it: the source is
# downloaded and built in a writable copy.
WEED_VERSION := v0.0.0-20261109003541-7506e5f91cd6
WEED_CACHE   ?= $(HOME)/.cache/framefarm
WEED         := $(WEED_CACHE)/weed-$(WEED_VERSION)

# apt_install installs the Debian packages of $(1) that are missing.
define apt_install
	@missing=""; for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi
endef

.PHONY: setup build run token test check bench fuzz clean proto weed

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

token: setup build ## print an API token for TEAM (while no server holds ./data)
	bin/framefarm token create --config $(CONFIG) --team $(TEAM)

check: ## formatting, vet, and the builds of render nodes on Windows and macOS (After Effects machines)
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); [ -z "$$unformatted" ] || { echo "not gofmt-formatted: $$unformatted"; exit 1; }
	$(GO) vet ./...
	GOOS=windows GOARCH=amd64 $(GO) build -o /dev/null ./cmd/framefarm
	GOOS=darwin GOARCH=arm64 $(GO) build -o /dev/null ./cmd/framefarm

# The end-to-end suite runs a second time with its files in the S3 server.
test: setup check weed ## the whole suite, with the race detector (FRAMEFARM_ARTIFACTS=DIR keeps the dashboard's screenshots)
	$(call apt_install,$(TEST_APT_PACKAGES))
	FRAMEFARM_WEED=$(WEED) $(GO) test -race -count=1 -timeout 20m ./...
	FRAMEFARM_WEED=$(WEED) FRAMEFARM_TEST_OBJECTS=s3 $(GO) test -race -count=1 -timeout 20m ./cmd/framefarm

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
	rm -rf bin
