// Package ledgerredis is a ledger.Store on Redis or Valkey, through
// github.com/redis/go-redis/v9: a standalone server, a primary with
// replicas (Sentinel), or Redis Cluster / Valkey Cluster.
//
// Claim, Complete, Fail and Extend are Lua scripts, one round trip each:
// of any number of concurrent claims on a key exactly one wins, and a
// claim that does not win gets the blocking record in the same reply.
// Complete, Fail and Extend change a record only while it is pending,
// live and owned by the caller's owner token; otherwise they return
// ledger.ErrNotOwner. Readers apply expiry from the record's fields with
// Config.Clock (the host's clock, not the server's); key TTLs only reclaim
// memory, and never cut a live claim short. A ledger's keys share a few
// hash tags (DefaultSpread buckets placed evenly over a cluster's slots,
// Config.Spread), every script touches one slot and only the keys it declares,
// and List reads a sorted set per state, or per run: listing the stuck
// records costs the stuck records, and listing a run its records, not the
// ledger. Each write trims at most a few index
// entries of records whose keys have gone; Store.Purge trims the rest and
// deletes expired records, a page per script.
//
// Durability is the server's. Redis answers a write once it is in memory,
// and a claim or done record it loses lets the action run again, without
// reconciling: a provider that deduplicates by the downstream key turns
// the repeat into a replay, one that does not performs the effect twice.
// For tools that move money run the server with appendonly yes,
// appendfsync always and maxmemory-policy noeviction, with at least one
// replica and Config.WaitReplicas 1 (WAIT after each write; a shortfall is
// ErrNotReplicated), or keep the ledger in PostgreSQL or DynamoDB. OpenURL
// refuses a server without those three settings (a *DurabilityError,
// matching ledger.ErrConfig) unless Config.Durability or the URL's
// durability parameter accepts less; Store.Check applies the same rule to
// a Store made by New. A claim the store could not confirm is an error,
// and the executor does not run the tool on it.
//
// README.md beside this file says how keys, expiry, List and the cluster
// layout work, what each server setting loses in a crash, the memory per
// record and the cost of each call.
package ledgerredis
