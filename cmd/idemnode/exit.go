package main

import (
	"errors"
	"strconv"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/cluster"
	"github.com/idemnode/idemnode/rpc/idempb"
)

// Exit codes of the client subcommands, one table by outcome, so that a
// script can branch on them (`if idemnode claim …; then charge; fi` charges
// once). serve keeps its own (docs/OPERATIONS.md): 1 a failure, 2 a
// configuration error, 3 a failed Raft log write.
const (
	exitOK        = 0 // you hold the key, or the operation took effect
	exitRefused   = 1 // refused or absent: mismatch, fenced, not_found, expired; wait: the record is gone
	exitUsage     = 2 // usage or invalid input (InvalidArgument)
	exitHeld      = 3 // someone else holds it: in_progress; wait: still pending
	exitCompleted = 4 // already completed: the stored response is printed
	exitRetry     = 5 // unavailable, timed out or rate-limited: safe to retry
	exitDenied    = 6 // not allowed: unauthenticated, permission denied, quota exceeded
	// exitCursorAhead: abandoned --after is past the cluster's last feed
	// event; retrying never helps (abandoned.go).
	exitCursorAhead = 7
)

// exitFailed is what serve and the local subcommands exit with on a
// failure at run time.
const exitFailed = 1

// exitStorage is what serve and snapshot restore exit with when the disk
// failed a Raft log write or a store read or write (cluster.ErrStorageFault):
// restart it (docs/OPERATIONS.md).
const exitStorage = 3

// exitCodesHelp is the table above as every client subcommand's --help and
// docs/CLI.md show it.
const exitCodesHelp = `Exit codes:
  0  you hold the key, or it took effect (won, ok; get of an existing record)
  1  refused or absent (mismatch, fenced, not_found; remove-member of an
     unknown id); wait: the record is gone
     (released or expired), claim again; expired: the key's record is a
     tombstone, the operation ran (or may have): do not run it again
  2  usage or invalid input (a claim without --fingerprint, --request-file
     or --no-fingerprint)
  3  someone else holds it (in_progress; wait: the record is still pending)
  4  already completed (completed): the stored response is printed
  5  unavailable, timed out or rate-limited: safe to retry (a claim with the
     same --owner, which claim prints on stderr when it generated one)
  6  not allowed: unauthenticated, permission denied, quota exceeded
  7  abandoned: --after is past the cluster's last event (restored from an
     older backup?): reconcile, then watch from the seq printed`

// outcomeExit is the exit code of an answer. Outcomes this binary does not
// know yet are refusals: a script must not take them for success.
func outcomeExit(o idempb.Outcome) int {
	switch o {
	case idempb.Outcome_OUTCOME_WON, idempb.Outcome_OUTCOME_OK:
		return exitOK
	case idempb.Outcome_OUTCOME_IN_PROGRESS:
		return exitHeld
	case idempb.Outcome_OUTCOME_COMPLETED:
		return exitCompleted
	}
	return exitRefused
}

// exitError is returned once the answer is printed: main exits with code
// and prints nothing more.
type exitError struct{ code int }

func (e exitError) Error() string { return "exit status " + strconv.Itoa(e.code) }

// failureExit is the exit code of a failed call, by what can be done
// about it.
var failureExit = map[client.Kind]int{
	client.KindRefused:     exitRefused,
	client.KindInvalid:     exitUsage,
	client.KindRetry:       exitRetry,
	client.KindDenied:      exitDenied,
	client.KindCursorAhead: exitCursorAhead,
}

// exitCodeOf is the exit code of what a command returned: an answer's code,
// a failed call's, a storage fault (3), a runtime failure (1) or, for
// anything else, a usage error (2: cobra's own parse errors, bad flag
// values).
func exitCodeOf(err error) int {
	var answered exitError
	var failed *client.Failure
	var runtime runtimeError
	var local *client.LocalError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, cluster.ErrStorageFault):
		return exitStorage
	case errors.As(err, &answered):
		return answered.code
	case errors.As(err, &failed):
		return failureExit[failed.Kind]
	case errors.As(err, &runtime), errors.As(err, &local):
		return exitFailed
	}
	return exitUsage
}
