# idemkit — build and test.
#
#   make test    go vet, then every test under the race detector (what CI runs)
#   make bench   the benchmarks with their raw floors
#   make chaos   a long seeded chaos run (CHAOS_RUNS, CHAOS_SEED)

GO       ?= go
PKGS     ?= ./...
TESTLOG  ?= .tmp/test.log

.PHONY: test vet bench chaos tools clean

test: vet tools
	@mkdir -p $(dir $(TESTLOG))
	@bash scripts/gotest.sh $(TESTLOG) -race -count=1 $(PKGS)

vet:
	$(GO) vet $(PKGS)

# Node packages the tests run (dynalite), from the committed lockfile.
tools:
	@if [ -f tools/dynalite/package-lock.json ] && command -v npm >/dev/null 2>&1 && [ ! -d tools/dynalite/node_modules ]; then \
		npm ci --prefix tools/dynalite --no-audit --no-fund --loglevel=error; fi

bench: tools
	$(GO) test -run '^$$' -bench . -benchmem -count 5 $(PKGS)

CHAOS_RUNS ?= 100000
CHAOS_SEED ?= 0
chaos:
	$(GO) test -count=1 -timeout 2h -run 'TestChaos' ./integration/ -chaos.runs=$(CHAOS_RUNS) -chaos.seed=$(CHAOS_SEED) -v

clean:
	rm -rf .tmp tools/dynalite/node_modules
