package lockctl

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

func (d *doctor) postgres(ctx context.Context) error {
	q := d.u.Query()
	for _, p := range []string{"table", "schema", "ttl", "autorenew"} {
		q.Del(p)
	}
	cu := *d.u
	cu.Scheme, cu.RawQuery = "postgres", q.Encode()
	cfg, err := pgx.ParseConfig(cu.String())
	if err != nil {
		return err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)

	var rtt time.Duration
	var st, b, a time.Time
	for range 5 {
		before := time.Now()
		var t time.Time
		if err := conn.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&t); err != nil {
			return err
		}
		after := time.Now()
		if took := after.Sub(before); rtt == 0 || took < rtt {
			rtt, st, b, a = took, t, before, after
		}
	}
	d.clockSkew("clock.skew", st, b, a, time.Microsecond)
	d.roundTrip("rtt", rtt)

	var version string
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&version); err != nil {
		return err
	}
	major, _ := strconv.Atoi(strings.SplitN(version, ".", 2)[0])
	if major > 0 && major < 13 {
		d.add("postgres.version", LevelWarning, "PostgreSQL "+version,
			"a release past its end of life gets no fixes", "upgrade to a supported PostgreSQL (13 or later)")
	} else {
		d.ok("postgres.version", "PostgreSQL "+version)
	}
	var sc string
	if err := conn.QueryRow(ctx, "SHOW synchronous_commit").Scan(&sc); err != nil {
		d.unknown("postgres.synchronous-commit", err)
	} else if sc == "off" {
		d.add("postgres.synchronous-commit", LevelWarning, "synchronous_commit off",
			"a commit is reported before it is on disk: after a server crash the last acquires can be lost, and a second client takes a key its holder still holds. Only a crash breaks it, so a warning",
			"ALTER SYSTEM SET synchronous_commit = on (or for the lock role: ALTER ROLE ... SET synchronous_commit = on)")
	} else {
		d.ok("postgres.synchronous-commit", "synchronous_commit "+sc)
	}
	var fsync string
	if err := conn.QueryRow(ctx, "SHOW fsync").Scan(&fsync); err == nil && fsync == "off" {
		d.add("postgres.fsync", LevelWarning, "fsync off",
			"a crash of the machine can lose or corrupt committed lease rows: locks and tokens roll back",
			"ALTER SYSTEM SET fsync = on")
	}
	return nil
}
