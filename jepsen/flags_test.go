package main

import (
	"strings"
	"testing"
	"time"
)

func TestParseFlags(t *testing.T) {
	bad := map[string][]string{
		"even cluster":            {"-nodes", "4"},
		"unknown nemesis":         {"-nemesis", "meteor"},
		"ring needs five":         {"-nodes", "3", "-nemesis", "partition-ring"},
		"expect without bug":      {"-expect", "fencing"},
		"unknown profile":         {"-profile", "weekly"},
		"too many clients":        {"-clients", "500"},
		"subnet out of range":     {"-subnet", "0"},
		"non-positive key space":  {"-hot-keys", "0"},
		"check timeout too short": {"-check-timeout", "500ms"},
		"check timeout too long":  {"-check-timeout", "2h"},
	}
	for name, args := range bad {
		if _, err := parseFlags(args); err == nil {
			t.Errorf("%s: %v accepted", name, args)
		}
	}
	cfg, err := parseFlags([]string{"-profile", "ci"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.nodes != 3 || cfg.seed != 1 || cfg.nemesis != "all" {
		t.Errorf("ci profile: %+v", cfg)
	}
	faults, err := cfg.chosenFaults(true)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range faults {
		if f.minNodes > 3 {
			t.Errorf("ci profile on 3 nodes chose %s", f.name)
		}
	}
	noRoot, _ := cfg.chosenFaults(false)
	for _, f := range noRoot {
		if f.needsRoot {
			t.Errorf("without root, %s was kept", f.name)
		}
	}
	if !strings.Contains(cfg.reproduce(), "-seed 1") {
		t.Errorf("reproduce line lacks the seed: %s", cfg.reproduce())
	}
	long, err := parseFlags([]string{"-check-timeout", "20m"})
	if err != nil || long.checkTimeout != 20*time.Minute || !strings.Contains(long.reproduce(), "-check-timeout 20m0s") {
		t.Errorf("-check-timeout 20m: %v, %s, reproduce %s", err, long.checkTimeout, long.reproduce())
	}
}
