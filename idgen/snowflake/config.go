package snowflake

import (
	"fmt"
	"strings"
	"time"
)

// Config is the snowflake: section of a shardid configuration file, for
// `shardid serve`:
//
//	snowflake:
//	  leases: postgres://postgres@127.0.0.1:5433/idleases
//	  datacenter: 1            # optional, 0..31
//	  epoch_ms: 1288834974657  # optional
//	  ttl: 10s                 # optional
type Config struct {
	// Leases is the DSN of the database holding the lease table (its
	// ${VAR}s already expanded by whoever read the file).
	Leases string `yaml:"leases"`
	// Datacenter is the datacenter field, 0..31. Default 0.
	Datacenter int64 `yaml:"datacenter"`
	// EpochMS is the epoch in milliseconds since the Unix epoch. 0 means
	// TwitterEpoch.
	EpochMS int64 `yaml:"epoch_ms"`
	// TTL is the lease's time to live. 0 means DefaultTTL.
	TTL time.Duration `yaml:"ttl"`
}

// Validate checks the section; the error wraps ErrInvalidSettings.
func (c Config) Validate() error {
	switch {
	case strings.TrimSpace(c.Leases) == "":
		return fmt.Errorf("%w: snowflake.leases: the lease database's DSN is required", ErrInvalidSettings)
	case c.Datacenter < 0 || c.Datacenter > Twitter.MaxDatacenter():
		return fmt.Errorf("%w: snowflake.datacenter %d not in 0..%d", ErrInvalidSettings, c.Datacenter, Twitter.MaxDatacenter())
	case c.EpochMS < 0 || c.EpochMS > time.Now().UnixMilli():
		return fmt.Errorf("%w: snowflake.epoch_ms %d is negative or in the future", ErrInvalidSettings, c.EpochMS)
	case c.TTL < 0 || (c.TTL > 0 && c.TTL < time.Second):
		return fmt.Errorf("%w: snowflake.ttl %s: want at least 1s", ErrInvalidSettings, c.TTL)
	}
	return nil
}

// Settings are the generator settings the section describes (Twitter's
// layout with the section's epoch and datacenter).
func (c Config) Settings() Settings {
	l := Twitter
	if c.EpochMS != 0 {
		l.Epoch = c.EpochMS
	}
	return Settings{Layout: l, Datacenter: c.Datacenter}
}

// LeaseOptions are the lease options the section describes.
func (c Config) LeaseOptions() []LeaseOption {
	if c.TTL == 0 {
		return nil
	}
	return []LeaseOption{WithTTL(c.TTL)}
}
