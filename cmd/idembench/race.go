package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/idemnode/idemnode/rpc/idempb"
)

// raceGroups splits clients into groups of size g; a remainder of 2 or more
// forms a smaller last group, a remainder of 1 joins the last group.
func raceGroups(clients, g int) []int {
	var sizes []int
	for clients >= g {
		sizes = append(sizes, g)
		clients -= g
	}
	switch {
	case clients >= 2 || len(sizes) == 0:
		sizes = append(sizes, clients)
	case clients == 1:
		sizes[len(sizes)-1]++
	}
	return sizes
}

// raceReply is one member's answer in a round.
type raceReply struct {
	member int
	won    bool // OUTCOME_WON
	token  uint64
	err    error
	s, e   time.Time
}

// raceWin is a won key kept for the read-back after the run.
type raceWin struct {
	key   string
	fp    []byte
	token uint64
}

type verdict int

const (
	roundOK            verdict = iota // exactly one winner
	roundViolation                    // 2+ winners, or none while every claim was answered
	roundIndeterminate                // none won but a claim errored: its win may have been lost
)

// tally judges one round: exactly one member may win. It returns the index
// in reps of the winner (-1 if none) and the number of winners.
func tally(reps []raceReply) (v verdict, winner, winners int) {
	errs := 0
	winner = -1
	for i, rep := range reps {
		switch {
		case rep.err != nil:
			errs++
		case rep.won:
			winners++
			winner = i
		}
	}
	switch {
	case winners > 1:
		return roundViolation, winner, winners
	case winners == 1:
		return roundOK, winner, winners
	case errs == 0:
		return roundViolation, winner, winners
	}
	return roundIndeterminate, winner, winners
}

// raceGroup runs one group: every round, all members claim the same fresh key
// at once, each with its own owner and its own fingerprint (the same
// idempotency key sent with differing requests, so a loser gets MISMATCH),
// and the round is tallied. first is the global index of member 0, which
// pins each member to its node.
func raceGroup(ctx context.Context, p *pool, w window, prefix string, first, size, keepWins int, r *recorder) {
	keys := make([]chan string, size)
	replies := make(chan raceReply, size)
	for m := range size {
		keys[m] = make(chan string)
		go raceMember(ctx, p.client(first+m), w.timeout, m, keys[m], replies)
	}
	defer func() {
		for _, c := range keys {
			close(c)
		}
	}()
	reps := make([]raceReply, size)
	for round := 0; ctx.Err() == nil && time.Now().Before(w.end); round++ {
		key := prefix + strconv.Itoa(round)
		start := time.Now()
		for _, c := range keys {
			c <- key
		}
		last := start
		for i := range reps {
			reps[i] = <-replies
			if reps[i].e.After(last) {
				last = reps[i].e
			}
		}
		if w.in(start, last) {
			r.addRound(key, reps, keepWins)
		}
		for _, rep := range reps {
			if rep.err != nil {
				time.Sleep(errorPause)
				break
			}
		}
	}
}

func raceMember(ctx context.Context, c idempb.IdempotencyClient, timeout time.Duration, m int, keys <-chan string, replies chan<- raceReply) {
	rng := newRNG()
	for key := range keys {
		s := time.Now()
		cl, err := call(ctx, timeout, c.Claim, claimRequest(key, fingerprint(key, m), newOwner(rng)))
		replies <- raceReply{member: m, won: err == nil && cl.GetOutcome() == idempb.Outcome_OUTCOME_WON,
			token: cl.GetToken(), err: err, s: s, e: time.Now()}
	}
}

// addRound counts a measured round: every answered claim is a request.
func (r *recorder) addRound(key string, reps []raceReply, keepWins int) {
	r.raceKeys++
	for _, rep := range reps {
		if rep.err != nil {
			r.err(rep.err)
			continue
		}
		r.requests++
		r.storeOps++
		r.lat = append(r.lat, rep.e.Sub(rep.s))
	}
	v, winner, winners := tally(reps)
	switch {
	case v == roundViolation:
		r.raceViol++
		if r.raceViol <= 5 {
			fmt.Fprintf(os.Stderr, "RACE VIOLATION: key %s won by %d clients\n", key, winners)
		}
	case v == roundIndeterminate:
		r.raceIndet++
	case len(r.raceWins) < keepWins:
		w := reps[winner]
		r.raceWins = append(r.raceWins, raceWin{key: key, fp: fingerprint(key, w.member), token: w.token})
	}
}

// verifyRace reads won keys back (linearizable, after the measured window)
// and checks that the stored record is the winner's: its fingerprint and its
// token (the record does not expose the owner; with one fingerprint per
// member the fingerprint names the winner).
func verifyRace(ctx context.Context, c idempb.IdempotencyClient, wins []raceWin, limit int) (checked, bad int) {
	step := 1
	if limit > 0 && len(wins) > limit {
		step = len(wins) / limit
	}
	for i := 0; i < len(wins) && checked < limit; i += step {
		win := wins[i]
		got, err := call(ctx, 5*time.Second, c.Get, getRequest(win.key))
		checked++
		rec := got.GetRecord()
		if err != nil || got.GetOutcome() != idempb.Outcome_OUTCOME_OK ||
			!bytes.Equal(rec.GetFingerprint(), win.fp) || rec.GetToken() != win.token {
			bad++
			if bad <= 5 {
				fmt.Fprintf(os.Stderr, "RACE VERIFY: key %s: outcome %v err %v, stored token %d fingerprint %x, winner token %d fingerprint %x\n",
					win.key, got.GetOutcome(), err, rec.GetToken(), rec.GetFingerprint(), win.token, win.fp)
			}
		}
	}
	return checked, bad
}
