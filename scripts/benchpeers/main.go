// Command benchpeers measures one idempotent function call with a
// one-field key on DynamoDB through idemkit and through Powertools for AWS
// Lambda (TypeScript, tools/peers), against one dynalite in one run, and
// prints the results as Go benchmark lines for benchreport.
//
// It starts dynalite (dynalitetest.Start), installs tools/peers from its
// lockfile when node_modules is missing (npm ci), puts one counting HTTP proxy in
// front of it per side, so that each side's requests on the wire are
// counted, and runs the peer as a node process that takes commands on its
// standard input. Each round runs, per workload, calls on each side in
// turns of -chunk calls, the side that goes first alternating, so that the
// drift of a shared machine falls on both. Workloads: fresh (a new
// ticket each call: claim, run, record) and replay (a repeat of a done
// call). Both sides use their defaults (Powertools' local cache is off by
// default, as idemkit has none).
//
//	go run ./scripts/benchpeers -rounds 10 -calls 100 > .tmp/peers.txt
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/client"
	"github.com/idemkit/idemkit/internal/ledgerbench"
	"github.com/idemkit/idemkit/internal/tooling"
	"github.com/idemkit/idemkit/ledger/ledgerdynamo"
	"github.com/idemkit/idemkit/ledger/ledgerdynamo/dynalitetest"
)

func main() {
	rounds := flag.Int("rounds", 10, "rounds; each runs every workload once on each side")
	calls := flag.Int("calls", 100, "calls per side, workload and round")
	chunk := flag.Int("chunk", 10, "calls per side in a row: the sides alternate every chunk calls")
	warmup := flag.Int("warmup", 50, "calls per side and workload before the first round, not measured")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("benchpeers: ")
	if err := run(context.Background(), *rounds, *calls, *chunk, *warmup); err != nil {
		log.Fatal(err)
	}
}

// side is one implementation under measurement.
type side struct {
	name     string
	requests *requests // requests on the wire through its proxy
	// batch makes n calls of op ("fresh" or "replay"), fresh tickets
	// numbered from seq, and returns each call's time.
	batch func(op string, n, seq int) ([]time.Duration, error)
}

func run(ctx context.Context, rounds, calls, chunk, warmup int) error {
	if rounds < 1 || calls < 1 || chunk < 1 || warmup < 1 {
		return fmt.Errorf("rounds, calls, chunk and warmup must be at least 1")
	}
	srv, err := dynalitetest.Start(ctx)
	if err != nil {
		return err
	}
	defer srv.Close()
	idem, drop, err := idemkitSide(ctx, srv.Endpoint)
	if err != nil {
		return err
	}
	defer drop()
	peer, stop, err := powertoolsSide(ctx, srv.Endpoint)
	if err != nil {
		return err
	}
	defer stop()
	sides := []*side{idem, peer}
	ops := []string{"fresh", "replay"}
	seq := 0
	for _, s := range sides { // the replayed call's first, executed, run; and warm-up
		for _, op := range ops {
			if _, err := s.batch(op, warmup, seq); err != nil {
				return fmt.Errorf("%s %s: %w", s.name, op, err)
			}
		}
	}
	seq += warmup

	fmt.Printf("note: Each side makes %d calls per workload in each of %d rounds, one after another (no concurrency), against one dynalite (started for the run) through its own counting HTTP proxy; within a round the sides take turns every %d calls, the side that goes first alternating. fresh is a new ticket each call (claim, run a function that does nothing, record the result); replay repeats a done call. The key is one field (ticketId) of a two-field input. Both sides run with their defaults: idemkit's client.Executor on ledgerdynamo, Powertools' makeIdempotent with DynamoDBPersistenceLayer and eventKeyJmesPath (its local cache is off by default). Times are taken inside each process around the call; requests/op are the requests that reached the proxy. A row's ns/op, p50 and p99 are the medians over the rounds of each round's mean, median and 99th percentile.\n", calls, rounds, chunk)
	fmt.Println("pkg: peers")
	byOp := map[string]map[string]int64{} // "side workload" → operation → requests
	for _, s := range sides {
		for _, op := range ops {
			byOp[s.name+" "+op] = map[string]int64{}
		}
	}
	for r := range rounds {
		for _, op := range ops {
			times := map[string][]time.Duration{}
			reqs := map[string]int64{}
			for c := 0; c < calls; c += chunk {
				order := sides
				if (r+c/chunk)%2 == 1 {
					order = []*side{sides[1], sides[0]}
				}
				for _, s := range order {
					s.requests.take()
					t, err := s.batch(op, min(chunk, calls-c), seq+c)
					if err != nil {
						return fmt.Errorf("%s %s: %w", s.name, op, err)
					}
					times[s.name] = append(times[s.name], t...)
					for name, n := range s.requests.take() {
						reqs[s.name] += n
						byOp[s.name+" "+op][name] += n
					}
				}
			}
			seq += calls
			line := fmt.Sprintf("BenchmarkPeers/%s\t%d", op, calls)
			for _, s := range sides {
				t := times[s.name]
				line += fmt.Sprintf("\t%.0f %s-ns/op\t%.0f %s-p50-ns\t%.0f %s-p99-ns\t%.3g %s-requests/op",
					float64(mean(t)), s.name, float64(ledgerbench.Quantile(t, 0.50)), s.name, float64(ledgerbench.Quantile(t, 0.99)), s.name,
					float64(reqs[s.name])/float64(calls), s.name)
			}
			line += fmt.Sprintf("\t%.4f %s/%s", float64(mean(times[sides[0].name]))/float64(mean(times[sides[1].name])), sides[0].name, sides[1].name)
			fmt.Println(line)
		}
	}
	note := "note: Requests per call on the wire, by operation:"
	for _, s := range sides {
		for _, op := range ops {
			counts := byOp[s.name+" "+op]
			names := slices.Sorted(maps.Keys(counts))
			note += fmt.Sprintf(" %s %s:", s.name, op)
			for _, name := range names {
				note += fmt.Sprintf(" %s %.2f", name, float64(counts[name])/float64(rounds*calls))
			}
			note += ";"
		}
	}
	fmt.Println(strings.TrimSuffix(note, ";") + ".")
	return nil
}

// mean is the mean of d.
func mean(d []time.Duration) time.Duration {
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	return sum / time.Duration(len(d))
}

// requests counts the requests through a proxy by DynamoDB operation
// (the X-Amz-Target header).
type requests struct {
	mu sync.Mutex
	n  map[string]int64
}

// add counts one request of the operation named by target.
func (c *requests) add(target string) {
	op := target[strings.LastIndexByte(target, '.')+1:]
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int64{}
	}
	c.n[op]++
}

// take returns the counts since the last take and starts again from zero.
func (c *requests) take() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = nil
	return n
}

// countingProxy starts a reverse proxy to endpoint on a loopback port that
// counts the requests it forwards, and returns its URL and the counts.
func countingProxy(endpoint string) (string, *requests, error) {
	target, err := url.Parse(endpoint)
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	n := new(requests)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 16}
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.add(r.Header.Get("X-Amz-Target"))
		rp.ServeHTTP(w, r)
	}))
	return "http://" + ln.Addr().String(), n, nil
}

// idemkitSide is a send_reply tool keyed by ticketId on ledgerdynamo, on
// a new table, through its own proxy.
func idemkitSide(ctx context.Context, endpoint string) (*side, func(), error) {
	proxy, n, err := countingProxy(endpoint)
	if err != nil {
		return nil, nil, err
	}
	api := dynalitetest.NewClient(proxy)
	table := "idemkit-peers-" + strconv.Itoa(os.Getpid())
	if err := ledgerdynamo.CreateTable(ctx, api, table, nil); err != nil {
		return nil, nil, err
	}
	drop := func() { deleteTable(api, table) }
	exec := client.New(ledgerdynamo.New(api, table, nil), nil)
	if err := exec.Register(client.Tool{
		Name:     "send_reply",
		Identity: []client.Field{{Path: "ticketId", Norm: client.String}},
		Run: func(context.Context, client.Invocation) (client.Effect, error) {
			return client.Effect{Summary: "sent", Ref: "msg_1", Result: json.RawMessage(`{"id":"msg_1"}`)}, nil
		},
	}); err != nil {
		drop()
		return nil, nil, err
	}
	return &side{name: "idemkit", requests: n, batch: func(op string, calls, seq int) ([]time.Duration, error) {
		times := make([]time.Duration, calls)
		for i := range calls {
			ticket := "replay"
			if op == "fresh" {
				ticket = "fresh-" + strconv.Itoa(seq+i)
			}
			call := client.Call{Tool: "send_reply", Input: json.RawMessage(`{"ticketId":"` + ticket + `","text":"Your refund is on its way."}`)}
			t0 := time.Now()
			res, err := exec.Execute(ctx, "run-1", call)
			times[i] = time.Since(t0)
			if err != nil {
				return nil, err
			}
			want := client.Executed // fresh, and the first call of the replayed ticket
			if op == "replay" && seq+i > 0 {
				want = client.AlreadyDone
			}
			if res.Outcome != want {
				return nil, fmt.Errorf("outcome %v, want %v", res.Outcome, want)
			}
		}
		return times, nil
	}}, drop, nil
}

// deleteTable deletes a table the run created.
func deleteTable(api *dynamodb.Client, table string) {
	if _, err := api.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)}); err != nil {
		log.Printf("delete table %s: %v", table, err)
	}
}

// powertoolsSide starts tools/peers/powertools.mjs on a new table (the
// layout Powertools expects: partition key id) through its own proxy.
func powertoolsSide(ctx context.Context, endpoint string) (_ *side, stop func(), err error) {
	proxy, n, err := countingProxy(endpoint)
	if err != nil {
		return nil, nil, err
	}
	api := dynalitetest.NewClient(proxy)
	table := "powertools-peers-" + strconv.Itoa(os.Getpid())
	if _, err := api.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	}); err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			deleteTable(api, table)
		}
	}()
	if err := dynamodb.NewTableExistsWaiter(api).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, time.Minute); err != nil {
		return nil, nil, err
	}
	dir, err := filepath.Abs(filepath.Join("tools", "peers"))
	if err != nil {
		return nil, nil, err
	}
	if err := tooling.NPMCI(ctx, dir); err != nil {
		return nil, nil, err
	}
	script := filepath.Join(dir, "powertools.mjs")
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Env = append(os.Environ(), "ENDPOINT="+proxy, "TABLE="+table)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("node: %w", err)
	}
	answers := bufio.NewScanner(stdout)
	answers.Buffer(make([]byte, 1<<20), 1<<24)
	if !answers.Scan() {
		stdin.Close()
		cmd.Wait()
		return nil, nil, fmt.Errorf("powertools.mjs did not start: %v", answers.Err())
	}
	stop = func() { stdin.Close(); cmd.Wait(); deleteTable(api, table) }
	enc := json.NewEncoder(stdin)
	return &side{name: "powertools", requests: n, batch: func(op string, calls, seq int) ([]time.Duration, error) {
		if err := enc.Encode(map[string]any{"op": op, "n": calls, "seq": seq}); err != nil {
			return nil, err
		}
		if !answers.Scan() {
			return nil, fmt.Errorf("powertools.mjs stopped: %v", answers.Err())
		}
		var a struct {
			NS   []int64
			Runs int
		}
		if err := json.Unmarshal(answers.Bytes(), &a); err != nil {
			return nil, err
		}
		wantRuns := calls // fresh: every call runs the function
		if op == "replay" {
			wantRuns = 0
			if seq == 0 {
				wantRuns = 1 // the first call of the warm-up executes
			}
		}
		if a.Runs != wantRuns || len(a.NS) != calls {
			return nil, fmt.Errorf("powertools %s: %d runs of the function in %d calls, want %d", op, a.Runs, len(a.NS), wantRuns)
		}
		times := make([]time.Duration, calls)
		for i, ns := range a.NS {
			times[i] = time.Duration(ns)
		}
		return times, nil
	}}, stop, nil
}
