package ledgerdynamo

import (
	"errors"
	"fmt"
	"hash/fnv"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncely/oncely/ledger"
)

// Attributes names the attributes of the table, so that the Store can use
// a table that already exists with other names (for example one made for
// Powertools for AWS Lambda: key "id", "status", "expiration", ...). An
// empty field takes the default name, given in brackets. Names that are
// DynamoDB reserved words are fine: every expression refers to attributes
// through #placeholders.
type Attributes struct {
	Key         string // [pk] the partition key: the action key, or Layout.PartitionKeyValue
	State       string // [state] pending | done | failed | uncertain; the unsharded index's partition key
	Shard       string // [state_shard] the sharded index's partition key, "state#NN" (Layout.Shards)
	Owner       string // [owner] owner token of the latest claim
	LeaseUntil  string // [lease_until] ms since the epoch; the index's sort key
	ExpiresAt   string // [expires_at] s since the epoch; the table's TTL attribute
	Fingerprint string // [fingerprint]
	Summary     string // [summary]
	Ref         string // [ref]
	Result      string // [result]
	Truncated   string // [truncated]
	Reason      string // [reason]
	Attempts    string // [attempts]
	AttemptAt   string // [attempt_at]
	RunID       string // [run_id]
	Tool        string // [tool]
	UpdatedAt   string // [updated_at]
}

// Layout is how records sit in the table. The zero value is the default
// layout: one item per action key, in the partition key Attributes.Key,
// with the default attribute names.
//
// Every process on the table must use the same Layout: the application
// that claims, the sweeper (reconcile.Sweeper over a Store from New with
// the same Config.Layout), the CLI and CreateTable (TableOptions.Layout).
// A Store with another layout does not find the records, or finds items
// it cannot read.
//
// Several layouts may share one table when they use the same key schema
// and index (Attributes, SortKey, Index) and differ in PartitionKeyValue
// or KeyPrefix, none of them empty and no KeyPrefix a prefix of another
// under the same PartitionKeyValue: each Store then reads and lists only
// its own records.
type Layout struct {
	// Attributes names the attributes; empty fields take the defaults.
	Attributes Attributes
	// PartitionKeyValue, when set, is the value of the partition key of
	// every record (a single-table design: one partition for the ledger,
	// or one per tenant), and the action key goes in the sort key SortKey.
	// PartitionKeyValue and SortKey are set together or not at all.
	PartitionKeyValue string
	// SortKey names the sort key attribute that holds the action key when
	// PartitionKeyValue is set.
	SortKey string
	// KeyPrefix is prepended to the action key in the attribute that holds
	// it (Attributes.Key, or SortKey), and stripped when reading, so that
	// ledger records are told apart from the other items of a shared
	// table (for example "oncely#").
	KeyPrefix string
	// Index names the global secondary index that List (and so the
	// sweeper) queries: on (Attributes.State, Attributes.LeaseUntil)
	// [IndexName], or with Shards on (Attributes.Shard,
	// Attributes.LeaseUntil) [ShardedIndexName].
	Index string
	// Shards is the number of write shards of the index [DefaultShards].
	// Every write that sets a record's state also sets Attributes.Shard
	// to the state and one of Shards numbers taken from a hash of the
	// action key ("pending#07", Layout.IndexKey); the index is keyed on
	// that attribute and projects the keys, the run and the expiry (what
	// List filters on); List queries the shards of a state concurrently,
	// merges their entries and fetches the records of the page it returns
	// with BatchGetItem. One index partition key then takes 1/Shards of
	// the index's writes: DefaultShards keeps every one below DynamoDB's
	// 1,000 write units per second up to 10,000 actions per second (see
	// "Sizing and cost" in docs/ledgers.md). Unsharded (-1) is the index
	// whose partition key is the state, which projects whole records and
	// takes every pending record's writes on one key: for tables made
	// with it. At most MaxShards. The shard of a key depends on Shards:
	// raising it is safe once every process that lists uses the new
	// value; lowering it hides records from List.
	Shards int
}

// DefaultShards is the number of index shards of a Layout whose Shards
// is zero: up to 10,000 actions per second, each renewed once, no index
// partition key takes more than 1,000 write units per second (an action
// writes 4 one-unit index entries on its pending shard with one renewal:
// 40,000 units per second over 64 keys is 625 each; TestIndexWritesPerAction).
const DefaultShards = 64

// Unsharded, as Layout.Shards, selects the unsharded index (IndexName),
// keyed on the state alone: every pending record's index writes go to
// one partition key, which caps the table near 250 actions per second
// with a renewal each, and the index holds whole records, results
// included. For tables made with it.
const Unsharded = -1

// MaxShards bounds Layout.Shards: List queries every shard of a state.
const MaxShards = 1000

// ErrLayout is matched by the error of CreateTable, and of every Store
// method, when the Layout is not valid.
var ErrLayout = errors.New("ledgerdynamo: invalid layout")

// Placeholders of the attributes in expressions: every attribute name is
// written as its placeholder, never as itself, and layout.names maps the
// placeholders an expression uses to the layout's names.
const (
	phKey         = "#pk"
	phSortKey     = "#sk"
	phState       = "#state"
	phShard       = "#state_shard"
	phOwner       = "#owner"
	phLeaseUntil  = "#lease_until"
	phExpiresAt   = "#expires_at"
	phFingerprint = "#fingerprint"
	phSummary     = "#summary"
	phRef         = "#ref"
	phResult      = "#result"
	phTruncated   = "#truncated"
	phReason      = "#reason"
	phAttempts    = "#attempts"
	phAttemptAt   = "#attempt_at"
	phRunID       = "#run_id"
	phTool        = "#tool"
	phUpdatedAt   = "#updated_at"
)

// indexNameRE is what DynamoDB accepts as an index name.
var indexNameRE = regexp.MustCompile(`^[a-zA-Z0-9_.-]{3,255}$`)

// layout is a validated Layout with its defaults applied.
type layout struct {
	attr   map[string]string // placeholder → attribute name
	keyPH  string            // placeholder of the attribute holding the action key
	pkv    string            // static partition key value; "" when the key is the partition key
	prefix string
	index  string
	shards int // 0: the index's partition key is the state
}

// resolve applies the defaults and validates the Layout.
func (l Layout) resolve() (layout, error) {
	a := l.Attributes
	attr := map[string]string{}
	var errs []error
	for _, f := range []struct{ ph, name string }{
		{phKey, a.Key}, {phState, a.State}, {phOwner, a.Owner}, {phLeaseUntil, a.LeaseUntil},
		{phExpiresAt, a.ExpiresAt}, {phFingerprint, a.Fingerprint}, {phSummary, a.Summary},
		{phRef, a.Ref}, {phResult, a.Result}, {phTruncated, a.Truncated}, {phReason, a.Reason},
		{phAttempts, a.Attempts}, {phAttemptAt, a.AttemptAt}, {phRunID, a.RunID}, {phTool, a.Tool},
		{phUpdatedAt, a.UpdatedAt}, {phShard, a.Shard},
	} {
		if f.name == "" {
			f.name = f.ph[1:]
		}
		attr[f.ph] = f.name
	}
	res := layout{attr: attr, keyPH: phKey, prefix: l.KeyPrefix, index: l.Index, shards: l.Shards}
	switch l.Shards {
	case 0:
		res.shards = DefaultShards
	case Unsharded:
		res.shards = 0
	}
	switch {
	case l.PartitionKeyValue != "" && l.SortKey != "":
		attr[phSortKey] = l.SortKey
		res.keyPH, res.pkv = phSortKey, l.PartitionKeyValue
	case l.PartitionKeyValue != "":
		errs = append(errs, errors.New("PartitionKeyValue needs a SortKey name for the action key"))
	case l.SortKey != "":
		errs = append(errs, errors.New("SortKey needs a PartitionKeyValue"))
	}
	switch {
	case l.Shards < Unsharded || l.Shards > MaxShards:
		errs = append(errs, fmt.Errorf("Shards %d: want 1 to %d, 0 for %d, or -1 (Unsharded)", l.Shards, MaxShards, DefaultShards))
	case res.index == "" && res.shards > 0:
		res.index = ShardedIndexName
	case res.index == "":
		res.index = IndexName
	}
	if !indexNameRE.MatchString(res.index) {
		errs = append(errs, fmt.Errorf("index name %q: want 3 to 255 of a-z A-Z 0-9 _ . -", res.index))
	}
	for _, v := range []struct{ what, s string }{
		{"PartitionKeyValue", l.PartitionKeyValue}, {"KeyPrefix", l.KeyPrefix},
	} {
		if !utf8.ValidString(v.s) {
			errs = append(errs, fmt.Errorf("%s is not valid UTF-8", v.what))
		}
	}
	// Partition keys take up to 2048 bytes and sort keys 1024; an action
	// key takes up to ledger.MaxKeyBytes (512) after the prefix.
	if len(l.KeyPrefix) > 512 || len(l.PartitionKeyValue) > 2048 {
		errs = append(errs, errors.New("KeyPrefix takes at most 512 bytes, PartitionKeyValue 2048"))
	}
	byName := map[string]string{}
	for _, ph := range res.placeholders() {
		name := attr[ph]
		if len(name) > 255 || !utf8.ValidString(name) {
			errs = append(errs, fmt.Errorf("attribute name %.20q...: want 1 to 255 bytes of UTF-8", name))
		}
		if other, dup := byName[name]; dup {
			errs = append(errs, fmt.Errorf("attribute name %q is used for both %s and %s", name, other[1:], ph[1:]))
		}
		byName[name] = ph
	}
	if len(errs) > 0 {
		return layout{}, fmt.Errorf("%w: %w", ErrLayout, errors.Join(errs...))
	}
	return res, nil
}

// Validate reports whether the layout can be used, with an error matching
// ErrLayout that says what is wrong when not. New and CreateTable validate
// too; call it to refuse a bad configuration at startup.
func (l Layout) Validate() error {
	_, err := l.resolve()
	return err
}

// placeholders lists the placeholders of the layout in a fixed order.
func (l layout) placeholders() []string {
	phs := []string{phKey, phSortKey, phState, phShard, phOwner, phLeaseUntil, phExpiresAt, phFingerprint,
		phSummary, phRef, phResult, phTruncated, phReason, phAttempts, phAttemptAt, phRunID, phTool, phUpdatedAt}
	return slices.DeleteFunc(phs, func(ph string) bool {
		return ph == phSortKey && l.pkv == "" || ph == phShard && l.shards == 0
	})
}

// placeholderRE finds the #placeholders of an expression.
var placeholderRE = regexp.MustCompile(`#[a-z_]+`)

// names returns the ExpressionAttributeNames that the expressions use
// (DynamoDB rejects unused ones, and several attribute names are reserved
// words, so every attribute goes through a placeholder).
func (l layout) names(exprs ...string) map[string]string {
	m := map[string]string{}
	for _, e := range exprs {
		for _, p := range placeholderRE.FindAllString(e, -1) {
			name, ok := l.attr[p]
			if !ok {
				panic("ledgerdynamo: unknown placeholder " + p + " in " + e)
			}
			m[p] = name
		}
	}
	return m
}

// keyOf is the primary key of the action key's item.
func (l layout) keyOf(key string) item {
	if l.pkv == "" {
		return item{l.attr[phKey]: sv(l.prefix + key)}
	}
	return item{l.attr[phKey]: sv(l.pkv), l.attr[phSortKey]: sv(l.prefix + key)}
}

// actionKey returns the action key that the item holds, without the
// prefix, or an error when the item is not one of this layout's.
func (l layout) actionKey(it item) (string, error) {
	if l.pkv != "" {
		if v, _ := it[l.attr[phKey]].(*types.AttributeValueMemberS); v == nil || v.Value != l.pkv {
			return "", fmt.Errorf("partition key %s is not %q", l.attr[phKey], l.pkv)
		}
	}
	name := l.attr[l.keyPH]
	v, _ := it[name].(*types.AttributeValueMemberS)
	if v == nil {
		return "", fmt.Errorf("no string key attribute %s", name)
	}
	key, ok := strings.CutPrefix(v.Value, l.prefix)
	if !ok || key == "" {
		return "", fmt.Errorf("key attribute %s: %q is not the key prefix %q and an action key", name, v.Value, l.prefix)
	}
	return key, nil
}

// IndexKey returns the value of the index partition key under which a
// record of the action key in state is filed: the state itself when
// Shards is Unsharded, else the state, "#" and the key's shard in two digits
// at least ("pending#07"). The shard is FNV-1a (32 bits) of the action
// key modulo Shards; it never changes between versions, so records stay
// where they were written.
func (l Layout) IndexKey(key string, state ledger.State) string {
	n := l.Shards
	switch {
	case n == 0:
		n = DefaultShards
	case n < 0:
		return string(state)
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return shardKey(state, int(h.Sum32()%uint32(n)))
}

// shardKey is the index partition key of shard n of state.
func shardKey(state ledger.State, n int) string { return fmt.Sprintf("%s#%02d", state, n) }

// indexKey is Layout.IndexKey.
func (l layout) indexKey(key string, state ledger.State) string {
	if l.shards == 0 {
		return string(state)
	}
	return Layout{Shards: l.shards}.IndexKey(key, state)
}

// indexPH is the placeholder of the index's partition key attribute.
func (l layout) indexPH() string {
	if l.shards > 0 {
		return phShard
	}
	return phState
}

// indexKeys lists the index partition keys that hold the records of
// state: the state, or each of its shards.
func (l layout) indexKeys(state ledger.State) []string {
	if l.shards == 0 {
		return []string{string(state)}
	}
	keys := make([]string, l.shards)
	for n := range keys {
		keys[n] = shardKey(state, n)
	}
	return keys
}

// shardSet is the assignment, to append to an update's SET clause, that
// files the record of key under the index shard of its new state, with
// its value added to values; "" when the index is unsharded (the state
// is its key). Every update that sets the state appends it.
func (l layout) shardSet(key string, state ledger.State, values item) string {
	if l.shards == 0 {
		return ""
	}
	values[":state_shard"] = sv(l.indexKey(key, state))
	return ", #state_shard = :state_shard"
}

// filter is the condition that keeps this layout's items, for a Query on
// the index of a table that other layouts share ("" when nothing needs
// filtering), with its values.
func (l layout) filter() (string, item) {
	var conds []string
	values := item{}
	if l.pkv != "" {
		conds = append(conds, phKey+" = :layout_pk")
		values[":layout_pk"] = sv(l.pkv)
	}
	if l.prefix != "" {
		conds = append(conds, "begins_with("+l.keyPH+", :layout_prefix)")
		values[":layout_prefix"] = sv(l.prefix)
	}
	return strings.Join(conds, " AND "), values
}
