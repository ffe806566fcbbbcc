package main

import (
	"fmt"
	"strconv"
	"strings"
)

// byteSize is a flag holding a size in bytes, written as a number with an
// optional unit: B, KB/MB/GB (powers of 1000) or KiB/MiB/GiB (of 1024).
type byteSize struct{ v *int64 }

func newByteSize(v *int64, def int64) *byteSize {
	*v = def
	return &byteSize{v: v}
}

var byteUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1},
}

func (b *byteSize) Set(s string) error {
	num, mult := strings.TrimSpace(s), int64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(num, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > (1<<50)/mult {
		return fmt.Errorf("want a positive size such as 64MiB or 1GiB, got %q", s)
	}
	*b.v = n * mult
	return nil
}

func (b *byteSize) String() string {
	if b.v == nil {
		return "0"
	}
	for _, u := range byteUnits[:3] {
		if *b.v >= u.mult && *b.v%u.mult == 0 && *b.v/u.mult < 1024 {
			return fmt.Sprintf("%d%s", *b.v/u.mult, u.suffix)
		}
	}
	return strconv.FormatInt(*b.v, 10)
}

func (b *byteSize) Type() string { return "size" }
