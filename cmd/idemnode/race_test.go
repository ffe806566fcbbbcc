//go:build race

package main

// raceFlag builds the server under test with the race detector when the
// tests themselves run with -race.
var raceFlag = []string{"-race"}
