package main

import (
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ublk-raid/ublk-raid/array"
	"github.com/ublk-raid/ublk-raid/daemon"
)

// A raid5/6 check or repair that found rows unreadable on more members
// than the parity covers ends without error, but their data is lost: the
// README says the job's log line tells how many (unreadable_rows), as the
// daemon's does, at error level. run's log said "sync ended" at info with
// no trace of them.
func TestRunSyncLogUnreadableRows(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	daemon.SyncLog(zap.New(core))("sync ended", array.SyncReport{Kind: "check", LostRows: 3}, nil)
	es := logs.All()
	if len(es) != 1 {
		t.Fatalf("%d log entries, want 1", len(es))
	}
	e := es[0]
	if e.Level != zapcore.ErrorLevel {
		t.Errorf("logged at %v, want error: data is lost", e.Level)
	}
	if v, ok := e.ContextMap()["unreadable_rows"]; !ok || v != uint64(3) {
		t.Errorf("fields %v: no unreadable_rows 3", e.ContextMap())
	}
}
