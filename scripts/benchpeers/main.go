// Command benchpeers measures one idempotent function call with a
// one-field key through oncely and through Powertools for AWS Lambda
// (TypeScript, tools/peers), on DynamoDB (one dynalite: ledgerdynamo
// beside Powertools' DynamoDBPersistenceLayer) and on Redis (one
// redis-server: ledgerredis beside Powertools' CachePersistenceLayer), and
// prints the results as Go benchmark lines for benchreport.
//
// It starts dynalite (dynalitetest.Start) and a redis-server of its own
// (redistest.StartBinary, appendonly yes, appendfsync always, files in
// memory where the machine allows), installs tools/peers from its lockfile
// when node_modules is missing (npm ci), and runs the peer as one node
// process per store that takes commands on its standard input. Both sides
// talk to the servers directly, so that the timed path is the same for
// both: nothing stands between either side and the server. The requests
// each call sends are counted in a separate pass that is not timed: on
// DynamoDB its calls go through a counting HTTP proxy (a second client on
// each side), on Redis the server shows them (its MONITOR stream, without
// the commands scripts run inside it; the server is the run's own, so
// nobody else's commands are counted). Each
// round runs, per workload, calls on each side in turns of -chunk calls,
// the side that goes first alternating, so that the drift of a shared
// machine falls on both. Workloads: fresh (a new ticket each call: claim,
// run, record) and replay (a repeat of a done call). Both sides use their
// defaults (Powertools' local cache is off by default, as oncely has
// none).
//
//	go run ./scripts/benchpeers -rounds 10 -calls 100 > .tmp/peers.txt
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
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
	"github.com/redis/go-redis/v9"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/internal/ledgerbench"
	"github.com/oncely/oncely/internal/tooling"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerdynamo"
	"github.com/oncely/oncely/ledger/ledgerdynamo/dynalitetest"
	"github.com/oncely/oncely/ledger/ledgerredis"
	"github.com/oncely/oncely/ledger/ledgerredis/redistest"
)

func main() {
	rounds := flag.Int("rounds", 10, "rounds; each runs every workload once on each side")
	calls := flag.Int("calls", 100, "calls per side, workload and round")
	chunk := flag.Int("chunk", 10, "calls per side in a row: the sides alternate every chunk calls")
	warmup := flag.Int("warmup", 50, "calls per side and workload before the first round, not measured")
	counted := flag.Int("counted", 50, "calls per side and workload of the counting pass, not timed")
	stores := flag.String("stores", "dynamodb,redis", "stores to measure on, in order")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("benchpeers: ")
	o := options{rounds: *rounds, calls: *calls, chunk: *chunk, warmup: *warmup, counted: *counted}
	if err := run(context.Background(), o, strings.Split(*stores, ",")); err != nil {
		log.Fatal(err)
	}
}

// options are the run's sizes.
type options struct{ rounds, calls, chunk, warmup, counted int }

// side is one implementation under measurement on one store.
type side struct {
	name string
	// batch makes n calls of op ("fresh" or "replay"), fresh tickets
	// numbered from seq, directly to the server, and returns each call's
	// time.
	batch func(op string, n, seq int) ([]time.Duration, error)
	// count makes n calls as batch does, untimed, and returns the
	// requests they sent, by operation (DynamoDB) or command (Redis).
	count func(op string, n, seq int) (map[string]int64, error)
}

func run(ctx context.Context, o options, stores []string) error {
	if o.rounds < 1 || o.calls < 1 || o.chunk < 1 || o.warmup < 1 || o.counted < 1 {
		return fmt.Errorf("rounds, calls, chunk, warmup and counted must be at least 1")
	}
	fmt.Printf("note: Each side makes %d calls per workload in each of %d rounds, one after another (no concurrency); within a round the sides take turns every %d calls, the side that goes first alternating. fresh is a new ticket each call (claim, run a function that does nothing, record the result); replay repeats a done call. The key is one field (ticketId) of a two-field input. Both sides run with their defaults, oncely's client.Executor and Powertools' makeIdempotent with eventKeyJmesPath (its local cache is off by default), and talk to the server directly: the timed path is the same for both. Times are taken inside each process around the call. A row's ns/op, p50 and p99 are the medians over the rounds of each round's mean, median and 99th percentile. requests/op come from a separate pass of %d calls per side and workload that is not timed: on DynamoDB (one dynalite, started for the run) through a counting HTTP proxy in front of a second client on each side; on Redis (a redis-server started for the run, appendonly yes, appendfsync always, files in memory) counted by the server (its MONITOR stream, without the commands a script runs inside the server). dynalite does not return the old item when a write's condition fails, as DynamoDB does: there Powertools' replay (a conditional PutItem) needs no GetItem after it.\n", o.calls, o.rounds, o.chunk, o.counted)
	fmt.Println("pkg: peers")
	var notes []string
	for _, store := range stores {
		var (
			sides []*side
			stop  func()
			err   error
		)
		switch store {
		case "dynamodb":
			sides, stop, err = dynamoSides(ctx)
		case "redis":
			sides, stop, err = redisSides(ctx)
		default:
			err = fmt.Errorf("unknown store %q (dynamodb, redis)", store)
		}
		if err != nil {
			return err
		}
		note, err := measure(store, sides, o)
		stop()
		if err != nil {
			return err
		}
		notes = append(notes, note)
	}
	fmt.Println("note: Requests per call, by operation or command, from the counting pass: " + strings.Join(notes, "; ") + ".")
	return nil
}

// measure warms both sides up, counts their requests, and runs the timed
// rounds on one store; it prints the rounds' lines and returns the counts
// by operation, for the note.
func measure(store string, sides []*side, o options) (string, error) {
	ops := []string{"fresh", "replay"}
	seq := 0
	for _, s := range sides { // the replayed call's first, executed, run; and warm-up
		for _, op := range ops {
			if _, err := s.batch(op, o.warmup, seq); err != nil {
				return "", fmt.Errorf("%s %s %s: %w", store, s.name, op, err)
			}
		}
	}
	seq += o.warmup
	for _, s := range sides { // the counting path's first calls (connections, a run's first read)
		for _, op := range ops {
			if _, err := s.count(op, o.chunk, seq); err != nil {
				return "", fmt.Errorf("%s %s %s (counting): %w", store, s.name, op, err)
			}
		}
	}
	seq += o.chunk
	requests := map[string]float64{} // "side workload" → requests per call
	var note []string
	for _, s := range sides {
		for _, op := range ops {
			counts, err := s.count(op, o.counted, seq)
			if err != nil {
				return "", fmt.Errorf("%s %s %s (counting): %w", store, s.name, op, err)
			}
			var total int64
			described := fmt.Sprintf("%s %s %s:", store, s.name, op)
			for _, name := range slices.Sorted(maps.Keys(counts)) {
				total += counts[name]
				described += fmt.Sprintf(" %s %.2f", name, float64(counts[name])/float64(o.counted))
			}
			requests[s.name+" "+op] = float64(total) / float64(o.counted)
			note = append(note, described)
		}
	}
	seq += o.counted
	for r := range o.rounds {
		for _, op := range ops {
			times := map[string][]time.Duration{}
			for c := 0; c < o.calls; c += o.chunk {
				order := sides
				if (r+c/o.chunk)%2 == 1 {
					order = []*side{sides[1], sides[0]}
				}
				for _, s := range order {
					t, err := s.batch(op, min(o.chunk, o.calls-c), seq+c)
					if err != nil {
						return "", fmt.Errorf("%s %s %s: %w", store, s.name, op, err)
					}
					times[s.name] = append(times[s.name], t...)
				}
			}
			seq += o.calls
			line := fmt.Sprintf("BenchmarkPeers/%s/%s\t%d", store, op, o.calls)
			for _, s := range sides {
				t := times[s.name]
				line += fmt.Sprintf("\t%.0f %s-ns/op\t%.0f %s-p50-ns\t%.0f %s-p99-ns\t%.3g %s-requests/op",
					float64(mean(t)), s.name, float64(ledgerbench.Quantile(t, 0.50)), s.name, float64(ledgerbench.Quantile(t, 0.99)), s.name,
					requests[s.name+" "+op], s.name)
			}
			line += fmt.Sprintf("\t%.4f %s/%s", float64(mean(times[sides[0].name]))/float64(mean(times[sides[1].name])), sides[0].name, sides[1].name)
			fmt.Println(line)
		}
	}
	return strings.Join(note, "; "), nil
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
// Only the counting pass goes through it.
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

// executor returns oncely's side on store: a send_reply tool keyed by
// ticketId, and its batch of calls.
func executor(ctx context.Context, store ledger.Store) (func(op string, calls, seq int) ([]time.Duration, error), error) {
	exec := client.New(store, nil)
	if err := exec.Register(client.Tool{
		Name:     "send_reply",
		Identity: []client.Field{{Path: "ticketId", Norm: client.String}},
		Run: func(context.Context, client.Invocation) (client.Effect, error) {
			return client.Effect{Summary: "sent", Ref: "msg_1", Result: json.RawMessage(`{"id":"msg_1"}`)}, nil
		},
	}); err != nil {
		return nil, err
	}
	return func(op string, calls, seq int) ([]time.Duration, error) {
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
	}, nil
}

// dynamoSides starts dynalite and returns oncely on ledgerdynamo and
// Powertools on DynamoDBPersistenceLayer, each on a new table; their
// counting passes go through a counting proxy each.
func dynamoSides(ctx context.Context) (_ []*side, stop func(), err error) {
	srv, err := dynalitetest.Start(ctx)
	if err != nil {
		return nil, nil, err
	}
	var cleanup []func()
	stop = func() {
		for _, f := range slices.Backward(cleanup) {
			f()
		}
	}
	cleanup = append(cleanup, srv.Close)
	defer func() {
		if err != nil {
			stop()
		}
	}()
	api := dynalitetest.NewClient(srv.Endpoint)

	oncelyProxy, oncelyCounts, err := countingProxy(srv.Endpoint)
	if err != nil {
		return nil, nil, err
	}
	table := "oncely-peers-" + strconv.Itoa(os.Getpid())
	if err := ledgerdynamo.CreateTable(ctx, api, table, nil); err != nil {
		return nil, nil, err
	}
	cleanup = append(cleanup, func() { deleteTable(api, table) })
	timed, err := executor(ctx, ledgerdynamo.New(api, table, nil))
	if err != nil {
		return nil, nil, err
	}
	counted, err := executor(ctx, ledgerdynamo.New(dynalitetest.NewClient(oncelyProxy), table, nil))
	if err != nil {
		return nil, nil, err
	}
	oncely := &side{name: "oncely", batch: timed, count: func(op string, n, seq int) (map[string]int64, error) {
		oncelyCounts.take()
		if _, err := counted(op, n, seq); err != nil {
			return nil, err
		}
		return oncelyCounts.take(), nil
	}}

	peerProxy, peerCounts, err := countingProxy(srv.Endpoint)
	if err != nil {
		return nil, nil, err
	}
	peerTable := "powertools-peers-" + strconv.Itoa(os.Getpid())
	if _, err := api.CreateTable(ctx, &dynamodb.CreateTableInput{ // the layout Powertools expects: partition key id
		TableName:            aws.String(peerTable),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	}); err != nil {
		return nil, nil, err
	}
	cleanup = append(cleanup, func() { deleteTable(api, peerTable) })
	if err := dynamodb.NewTableExistsWaiter(api).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(peerTable)}, time.Minute); err != nil {
		return nil, nil, err
	}
	counting := func(run func() error) (map[string]int64, error) {
		peerCounts.take()
		if err := run(); err != nil {
			return nil, err
		}
		return peerCounts.take(), nil
	}
	peer, end, err := powertools(ctx, "dynamodb", counting, "ENDPOINT="+srv.Endpoint, "COUNT_ENDPOINT="+peerProxy, "TABLE="+peerTable)
	if err != nil {
		return nil, nil, err
	}
	cleanup = append(cleanup, end)
	return []*side{oncely, peer}, stop, nil
}

// deleteTable deletes a table the run created.
func deleteTable(api *dynamodb.Client, table string) {
	if _, err := api.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)}); err != nil {
		log.Printf("delete table %s: %v", table, err)
	}
}

// redisSides starts a redis-server of the run's own and returns oncely on
// ledgerredis and Powertools on CachePersistenceLayer; their counting
// passes count the commands the server receives (MONITOR, open only
// during the counting batches).
func redisSides(ctx context.Context) (_ []*side, stop func(), err error) {
	srv, err := redistest.StartBinary(ctx, "redis-server", "redis-server", "--appendonly", "yes", "--appendfsync", "always")
	if err != nil {
		return nil, nil, err
	}
	var cleanup []func()
	stop = func() {
		for _, f := range slices.Backward(cleanup) {
			f()
		}
	}
	cleanup = append(cleanup, srv.Close)
	defer func() {
		if err != nil {
			stop()
		}
	}()
	opts, err := redis.ParseURL(srv.URL)
	if err != nil {
		return nil, nil, err
	}
	rc := redis.NewClient(opts)
	cleanup = append(cleanup, func() { rc.Close() })
	admin := redis.NewClient(opts) // sends the monitor's marks
	cleanup = append(cleanup, func() { admin.Close() })
	timed, err := executor(ctx, ledgerredis.New(rc, &ledgerredis.Config{Prefix: "oncely-peers"}))
	if err != nil {
		return nil, nil, err
	}
	// The MONITOR connection is open only while a counting batch runs:
	// the server formats every command, scripts' included, for it, which
	// would slow the timed calls (oncely's scripts more than single
	// commands).
	counting := func(run func() error) (map[string]int64, error) {
		mon, err := startMonitor(opts.Addr, admin)
		if err != nil {
			return nil, err
		}
		defer mon.conn.Close()
		if err := run(); err != nil {
			return nil, err
		}
		return mon.take(ctx)
	}
	oncely := &side{name: "oncely", batch: timed, count: func(op string, n, seq int) (map[string]int64, error) {
		return counting(func() error { _, err := timed(op, n, seq); return err })
	}}
	peer, end, err := powertools(ctx, "redis", counting, "REDIS_URL="+srv.URL)
	if err != nil {
		return nil, nil, err
	}
	cleanup = append(cleanup, end)
	return []*side{oncely, peer}, stop, nil
}

// monitor counts the commands clients send to a server, by command, from
// its MONITOR stream: the commands a script runs inside the server (shown
// as from "lua") are not counted, nor the marks take sends.
type monitor struct {
	conn  net.Conn
	admin *redis.Client // sends the marks
	marks chan string   // the marks the stream showed
	seq   int

	mu     sync.Mutex
	counts map[string]int64
}

// markPrefix starts the argument of the ECHO commands take sends.
const markPrefix = "benchpeers-mark-"

// startMonitor opens a MONITOR connection to the server at addr.
func startMonitor(addr string, admin *redis.Client) (*monitor, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	r := bufio.NewReader(conn)
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		conn.Close()
		return nil, err
	}
	if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "+OK") {
		conn.Close()
		return nil, fmt.Errorf("MONITOR: %q %v", line, err)
	}
	m := &monitor{conn: conn, admin: admin, marks: make(chan string, 1), counts: map[string]int64{}}
	go m.read(r)
	return m, nil
}

// read counts the stream's lines, such as
//
//	+1700000000.123456 [0 127.0.0.1:54321] "EVALSHA" "a1b2..." "1" ...
//	+1700000000.123470 [0 lua] "HGETALL" "oncely:..."
func (m *monitor) read(r *bufio.Reader) {
	defer close(m.marks)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		_, rest, _ := strings.Cut(line, " [")
		from, rest, ok := strings.Cut(rest, "] ")
		if !ok || strings.HasSuffix(from, " lua") {
			continue
		}
		args := strings.Split(strings.TrimSpace(rest), " ")
		cmd := strings.ToUpper(strings.Trim(args[0], `"`))
		if cmd == "ECHO" && len(args) > 1 && strings.HasPrefix(strings.Trim(args[1], `"`), markPrefix) {
			m.marks <- strings.Trim(args[1], `"`)
			continue
		}
		m.mu.Lock()
		m.counts[cmd]++
		m.mu.Unlock()
	}
}

// take returns the commands counted since the connection opened or take
// was last called: up to a mark it sends now and waits to see in the
// stream, so that every command sent before it is in.
func (m *monitor) take(ctx context.Context) (map[string]int64, error) {
	m.seq++
	mark := markPrefix + strconv.Itoa(m.seq)
	if err := m.admin.Echo(ctx, mark).Err(); err != nil {
		return nil, err
	}
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case seen, ok := <-m.marks:
			if !ok {
				return nil, errors.New("MONITOR connection closed")
			}
			if seen != mark {
				continue
			}
			m.mu.Lock()
			defer m.mu.Unlock()
			counts := m.counts
			m.counts = map[string]int64{}
			return counts, nil
		case <-timeout.C:
			return nil, fmt.Errorf("MONITOR did not show %s", mark)
		}
	}
}

// powertools starts tools/peers/powertools.mjs on store with env, and
// returns its side; counting runs a batch of the counting pass and
// returns the requests it sent.
func powertools(ctx context.Context, store string, counting func(run func() error) (map[string]int64, error), env ...string) (_ *side, stop func(), err error) {
	dir, err := filepath.Abs(filepath.Join("tools", "peers"))
	if err != nil {
		return nil, nil, err
	}
	if err := tooling.NPMCI(ctx, dir); err != nil {
		return nil, nil, err
	}
	script := filepath.Join(dir, "powertools.mjs")
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Env = append(append(os.Environ(), "STORE="+store), env...)
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
		return nil, nil, fmt.Errorf("powertools.mjs did not start (a tools/peers/node_modules older than its package-lock.json? remove it to install again): %v", answers.Err())
	}
	stop = func() { stdin.Close(); cmd.Wait() }
	enc := json.NewEncoder(stdin)
	batch := func(op string, calls, seq int, count bool) ([]time.Duration, error) {
		if err := enc.Encode(map[string]any{"op": op, "n": calls, "seq": seq, "count": count}); err != nil {
			return nil, err
		}
		if !answers.Scan() {
			return nil, errors.Join(errors.New("powertools.mjs stopped"), answers.Err())
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
	}
	return &side{
		name:  "powertools",
		batch: func(op string, n, seq int) ([]time.Duration, error) { return batch(op, n, seq, false) },
		count: func(op string, n, seq int) (map[string]int64, error) {
			return counting(func() error { _, err := batch(op, n, seq, true); return err })
		},
	}, stop, nil
}
