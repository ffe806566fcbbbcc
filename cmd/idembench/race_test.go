package main

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func TestTally(t *testing.T) {
	won, lost, failed := raceReply{won: true, token: 7}, raceReply{}, raceReply{err: errors.New("deadline exceeded")}
	for _, tc := range []struct {
		name    string
		reps    []raceReply
		want    verdict
		winner  int
		winners int
	}{
		{"exactly one winner", []raceReply{lost, won, lost}, roundOK, 1, 1},
		{"one winner and an error", []raceReply{failed, lost, won}, roundOK, 2, 1},
		{"two winners", []raceReply{won, lost, won}, roundViolation, 2, 2},
		{"nobody won, all answered", []raceReply{lost, lost, lost}, roundViolation, -1, 0},
		{"nobody won, a claim errored", []raceReply{lost, failed, lost}, roundIndeterminate, -1, 0},
	} {
		v, winner, winners := tally(tc.reps)
		if v != tc.want || winner != tc.winner || winners != tc.winners {
			t.Errorf("%s: got verdict %d winner %d winners %d, want %d %d %d", tc.name, v, winner, winners, tc.want, tc.winner, tc.winners)
		}
	}
}

// TestAddRoundCountsTwoWinners feeds the recorder a fake round with two
// winners: it must be a violation and no won key may be kept for read-back.
func TestAddRoundCountsTwoWinners(t *testing.T) {
	now := time.Now()
	reps := []raceReply{
		{member: 0, won: true, token: 1, s: now, e: now.Add(time.Millisecond)},
		{member: 1, s: now, e: now.Add(2 * time.Millisecond)},
		{member: 2, won: true, token: 2, s: now, e: now.Add(3 * time.Millisecond)},
	}
	var r recorder
	r.addRound("k", reps, 10)
	if r.raceViol != 1 || r.raceKeys != 1 || r.requests != 3 || len(r.raceWins) != 0 {
		t.Fatalf("two winners: %+v", r)
	}
	reps[2].won = false
	r.addRound("k2", reps, 10)
	if r.raceViol != 1 || len(r.raceWins) != 1 || r.raceWins[0].token != 1 || r.raceWins[0].key != "k2" ||
		string(r.raceWins[0].fp) != string(fingerprint("k2", 0)) {
		t.Fatalf("one winner: %+v", r)
	}
	reps[0].err, reps[0].won = errors.New("unavailable"), false
	r.addRound("k3", reps, 10)
	if r.raceIndet != 1 || r.errors != 1 || r.requests != 8 {
		t.Fatalf("errored round: %+v", r)
	}
}

func TestRaceGroups(t *testing.T) {
	for _, tc := range []struct {
		clients, g int
		want       []int
	}{
		{64, 8, []int{8, 8, 8, 8, 8, 8, 8, 8}},
		{8, 4, []int{4, 4}},
		{10, 4, []int{4, 4, 2}},
		{9, 4, []int{4, 5}},
		{3, 8, []int{3}},
	} {
		if got := raceGroups(tc.clients, tc.g); !slices.Equal(got, tc.want) {
			t.Errorf("raceGroups(%d, %d) = %v, want %v", tc.clients, tc.g, got, tc.want)
		}
	}
}
