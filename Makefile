# idemkit — build and test.
#
#   make test    go vet, then every test under the race detector (what CI runs)
#   make bench   the benchmarks with their raw floors
#   make chaos   a long seeded chaos run (CHAOS_RUNS, CHAOS_SEED)
#   make lambda-build  the Lambda example's bootstrap for linux/arm64

GO       ?= go
PKGS     ?= ./...
TESTLOG  ?= .tmp/test.log

.PHONY: test vet bench chaos clean lambda-build

# The DynamoDB tests install and start their own dynalite (tools/dynalite,
# npm ci from the committed lockfile) through ledgerdynamo/dynalitetest.
# The Stripe tests install (go install, into .tmp) and start stripe-mock
# through fakes/stripefake/stripemocktest.
test: vet
	@mkdir -p $(dir $(TESTLOG))
	@bash scripts/gotest.sh $(TESTLOG) -race -count=1 -timeout 20m $(PKGS)

vet:
	$(GO) vet $(PKGS)

bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 5 $(PKGS)

CHAOS_RUNS ?= 100000
CHAOS_SEED ?= 0
chaos:
	$(GO) test -count=1 -timeout 2h -run 'TestChaos' ./integration/ -chaos.runs=$(CHAOS_RUNS) -chaos.seed=$(CHAOS_SEED) -v

# The Lambda example's bootstrap, as deployed (examples/lambda/infra).
lambda-build:
	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) build -tags lambda.norpc -ldflags "-s -w" -o .tmp/lambda/bootstrap ./examples/lambda

clean:
	rm -rf .tmp tools/dynalite/node_modules tools/mcp/node_modules
