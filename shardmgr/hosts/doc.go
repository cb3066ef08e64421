// Package hosts changes the servers behind a cluster's hosts: a failover
// to a promoted standby (Failover), which first carries every shard's
// counter on the standby past anything the old primary could have handed
// out (docs/uniqueness.md#failover), then records the new server in the
// catalog and the cluster file.
//
// It must never record a new server for a host before that server's
// counters are past the old primary's, nor move a counter back.
package hosts
