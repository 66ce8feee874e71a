# oncely — build and test.
#
#   make demo    a seeded agent workload under faults: a plain retrying
#                client vs oncely (DEMO_FLAGS, e.g. --runs 500 --seed 7)
#   make readme-demo  the README's demo table from a run of the current code
#   make test    go vet, then every test under the race detector (what CI runs)
#   make api-check  the exported API against the last release's (what CI runs first)
#   make api-snapshot  record the API as the last release's (at a release)
#   make release-check  a release rehearsal: every module of versions.yaml served
#                by version from a file-system module proxy, gorelease on each,
#                and a stranger's modules outside the repository that go get
#                them, build and run the README's Quick start, each
#                integration's example and the go-installed oncely (what CI runs)
#   make dist    the oncely command's archives (linux, darwin, windows; amd64,
#                arm64) and their sha256 checksums, in .tmp/dist
#   make bench   every backend's benchmarks beside their raw floors, into BENCHMARKS.md
#   make bench-sweep  the sweeper's listing at 10^3 and 10^6 records, into BENCHMARKS.md
#   make bench-console  the console's pages at 10^3 and 10^6 records, into BENCHMARKS.md
#   make bench-peers  oncely and Powertools (TypeScript) on one dynalite and one Redis, into BENCHMARKS.md
#   make chaos   a long seeded chaos run (CHAOS_RUNS, CHAOS_SEED)
#   make faultpoints  the fault-point enumeration with every pair of points failed
#   make lambda-build  the Lambda example's bootstrap for linux/arm64
#   make screenshots  the console screenshots of docs/operating.md, taken by its browser test

GO       ?= go
# Every package of the root workspace (go.work: the core module and the
# integration modules), and the workspaces of the integrations whose
# dependencies cannot join it (each directory holds its own go.work).
PKGS     ?= work
WORKSPACES ?= agent/oncelygenkit
TESTLOG  ?= .tmp/test.log

.PHONY: bench-console screenshots demo readme-demo test vet api-check api-snapshot release-check dist bench bench-sweep bench-peers chaos faultpoints clean lambda-build

# The demo's oncely is built with the tag oncely_demo: the fakes and the
# SQLite ledger only, without the AWS SDK, pgx, go-redis and the MCP SDK
# that the ledger commands link (cmd/oncely/commands_demo.go).
DEMO_FLAGS ?=
demo:
	@mkdir -p .tmp
	@echo "building oncely for the demo (.tmp/oncely-demo; minutes on a cold build cache, SQLite is most of it)..."
	@start=$$(date +%s); $(GO) build -tags oncely_demo -o .tmp/oncely-demo ./cmd/oncely && echo "built in $$(( $$(date +%s) - start ))s"
	.tmp/oncely-demo demo $(DEMO_FLAGS)

# The README's demo table, from a run of the default demo (checked by
# TestREADMEDemoTable).
readme-demo:
	$(GO) test -count=1 -run '^TestREADMEDemoTable$$' ./cmd/oncely/ -update-readme -v

# The DynamoDB tests install and start their own dynalite (tools/dynalite,
# npm ci from the committed lockfile) through ledgerdynamo/dynalitetest.
# The Stripe tests install (go install, into .tmp) and start stripe-mock
# through fakes/stripefake/stripemocktest.
#
# The Temporal tests of workflow/oncelytemporal run a real dev server and
# worker processes (build tag temporalserver): the Temporal CLI is built
# from the module proxy into .tmp/bin once (a few minutes on a cold build
# cache; the version is pinned below).
TEMPORAL_CLI ?= github.com/temporalio/cli/cmd/temporal@v1.5.1
TEST_TAGS    ?= temporalserver
test: vet .tmp/bin/temporal
	@mkdir -p $(dir $(TESTLOG))
	@ONCELY_TEMPORAL_CLI=$(CURDIR)/.tmp/bin/temporal GOTEST_WORKSPACES='$(WORKSPACES)' bash scripts/gotest.sh $(TESTLOG) -race -count=1 -timeout 25m -tags '$(TEST_TAGS)' -- $(PKGS)

.tmp/bin/temporal:
	@mkdir -p .tmp/bin
	@echo "building the Temporal CLI for the Temporal tests ($(TEMPORAL_CLI), into .tmp/bin)..."
	@start=$$(date +%s); GOBIN=$(CURDIR)/.tmp/bin $(GO) install $(TEMPORAL_CLI) && echo "built in $$(( $$(date +%s) - start ))s"

# An incompatible change to a stable package fails the check unless
# CHANGELOG.md's unreleased section names it (scripts/apicheck; apidiff is
# fetched through the module proxy; api/README.md).
api-check:
	$(GO) run ./scripts/apicheck

api-snapshot:
	$(GO) run ./scripts/apicheck -write

# versions.yaml against every go.mod and go.work (no replace in a go.mod,
# every requirement on our modules at the version being released), then
# the rehearsal (scripts/release; docs/install.md): the modules' zips
# (golang.org/x/mod/zip) served from a file-system GOPROXY in front of the
# machine's own, the checksum database off for our paths only, GOWORK=off;
# gorelease -base=none on each module (there is no earlier version); a
# stranger's modules in a temporary directory go get them by version and
# build and run the README's Quick start and each integration's example;
# go install of cmd/oncely by version, run in an empty directory; and the
# linux/amd64 archive of make dist, checked and run. Third-party modules
# come from the machine's module cache.
# The tool builds from the root module alone (GOWORK=off), so that a fault
# in a nested go.mod fails its check, not its build.
release-check:
	GOWORK=off $(GO) run ./scripts/release check
	GOWORK=off $(GO) run ./scripts/release rehearse

# The oncely command for every platform, CGO_ENABLED=0, by plain go build
# (scripts/release dist): .tmp/dist/oncely_<version>_<os>_<arch>.tar.gz
# (.zip for Windows) and oncely_<version>_checksums.txt (sha256sum -c).
DIST_TARGETS ?= linux/amd64,linux/arm64,darwin/amd64,darwin/arm64,windows/amd64,windows/arm64
dist:
	GOWORK=off $(GO) run ./scripts/release dist -out .tmp/dist -targets $(DIST_TARGETS)

# go vet compiles every package first: minutes on a cold build cache.
# gofmt first: every Go file the repository tracks.
vet:
	@unformatted=$$($$($(GO) env GOROOT)/bin/gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	@echo "go vet $(PKGS) $(WORKSPACES): compiling and checking every package of every module"
	@start=$$(date +%s); $(GO) vet -tags '$(TEST_TAGS)' $(PKGS) && for d in $(WORKSPACES); do $(GO) -C $$d vet -tags '$(TEST_TAGS)' $$($(GO) -C $$d list -m -f '{{if ne .Dir "$(CURDIR)"}}{{.Path}}/...{{end}}') || exit 1; done && echo "vet: ok in $$(( $$(date +%s) - start ))s"

# The benchmarks start what they need, as the tests do (dynalite,
# PostgreSQL, Redis). Go's benchmark format, kept in .tmp/bench.txt for
# benchstat; scripts/benchreport writes its section of BENCHMARKS.md. The
# defaults finish in a few minutes on 2 cores.
BENCH_COUNT ?= 5
BENCH_TIME  ?= 300ms
BENCH_PKGS  ?= ./client/ ./ledger/...
BENCH_CMD    = $(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCH_TIME) -count $(BENCH_COUNT) -timeout 30m $(BENCH_PKGS)
bench:
	@mkdir -p .tmp
	bash -o pipefail -c "$(BENCH_CMD) | tee .tmp/bench.txt"
	$(GO) run ./scripts/benchreport -in .tmp/bench.txt -out BENCHMARKS.md -section ledgers \
		-title "Ledgers and executor" -cmd "make bench (BENCH_CMD: $(BENCH_CMD))"
	$(MAKE) bench-console

# The operator console's pages on SQLite and PostgreSQL ledgers of 10^3
# and 10^6 records, paired, beside one Get (also part of make bench; this
# target runs only those, building each 10^6-record ledger once per run).
CONSOLE_CMD = $(GO) test -run '^$$' -bench 'Pages' -benchtime 10x -count 1 -timeout 30m ./console/
bench-console:
	@mkdir -p .tmp
	bash -o pipefail -c "$(CONSOLE_CMD) | tee .tmp/console.txt"
	$(GO) run ./scripts/benchreport -in .tmp/console.txt -out BENCHMARKS.md -section console \
		-title "The console's pages at 10^3 and 10^6 records" -cmd "make bench-console (CONSOLE_CMD: $(CONSOLE_CMD))"

# One sweep's listing with 10^3 stuck records among 10^3 and among 10^6
# records, on each SQL and Redis ledger (also part of make bench; this
# target runs only those, building the 10^6-record ledgers once per run).
SWEEP_CMD = $(GO) test -run '^$$' -bench 'SweepListing' -benchtime 300x -count 3 -timeout 30m ./ledger/ledgersqlite/ ./ledger/ledgerpg/ ./ledger/ledgerredis/
bench-sweep:
	@mkdir -p .tmp
	bash -o pipefail -c "$(SWEEP_CMD) | tee .tmp/sweep.txt"
	$(GO) run ./scripts/benchreport -in .tmp/sweep.txt -out BENCHMARKS.md -section sweep \
		-title "The sweeper's listing at 10^3 and 10^6 records" -cmd "make bench-sweep (SWEEP_CMD: $(SWEEP_CMD))"

# One idempotent call through oncely and through Powertools for AWS
# Lambda (TypeScript, pinned in tools/peers, npm ci on first use), on one
# dynalite (ledgerdynamo beside DynamoDBPersistenceLayer) and on one
# redis-server (ledgerredis beside CachePersistenceLayer), both started
# for the run, in alternating rounds, each side connected directly; the
# requests per call are counted in a pass of their own (scripts/benchpeers).
PEERS_ROUNDS ?= 10
PEERS_CALLS  ?= 100
bench-peers:
	@mkdir -p .tmp
	$(GO) run ./scripts/benchpeers -rounds $(PEERS_ROUNDS) -calls $(PEERS_CALLS) > .tmp/peers.txt
	$(GO) run ./scripts/benchreport -in .tmp/peers.txt -out BENCHMARKS.md -section peers \
		-title "Beside Powertools for AWS Lambda (TypeScript)" -cmd "make bench-peers PEERS_ROUNDS=$(PEERS_ROUNDS) PEERS_CALLS=$(PEERS_CALLS)"

CHAOS_RUNS ?= 100000
CHAOS_SEED ?= 0
chaos:
	$(GO) test -count=1 -timeout 2h -run 'TestChaos' ./integration/ -chaos.runs=$(CHAOS_RUNS) -chaos.seed=$(CHAOS_SEED) -v

# The fault-point enumeration with every pair of points failed on the
# memory and SQLite ledgers (make test fails each single point, on every
# ledger).
faultpoints:
	$(GO) test -count=1 -timeout 2h -run 'TestFaultPoints' ./integration/ -faultpoints.pairs -v

# The Lambda example's bootstrap, as deployed (examples/lambda/infra).
lambda-build:
	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) build -tags lambda.norpc -ldflags "-s -w" -o .tmp/lambda/bootstrap ./examples/lambda

clean:
	rm -rf .tmp tools/dynalite/node_modules tools/mcp/node_modules tools/peers/node_modules

# The console's screenshots in docs/operating.md (console/screenshots), taken by
# its browser test in headless Chromium (Debian's package chromium).
screenshots:
	@mkdir -p console/screenshots
	$(GO) test -count=1 -run '^TestConsoleBrowserSQLite$$' ./cmd/oncely/ -screenshots $(CURDIR)/console/screenshots -v
