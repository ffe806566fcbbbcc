package netlimit

import (
	"slices"
	"strings"
	"testing"
)

func TestFit(t *testing.T) {
	for _, tc := range []struct {
		name           string
		limit, reserve int
		caps           []Cap
		want           []int
		lowered        bool
		err            string
	}{
		{name: "fits", limit: 20000, reserve: 1024, caps: []Cap{{"--grpc-max-conns", 4096, false}, {"--api-max-conns", 4096, false}},
			want: []int{4096, 4096}},
		{name: "unknown limit", limit: 0, reserve: 1024, caps: []Cap{{"--a", 1 << 20, true}}, want: []int{1 << 20}},
		{name: "defaults lowered in proportion", limit: 4096, reserve: 1024,
			caps: []Cap{{"--grpc-max-conns", 4096, false}, {"--api-max-conns", 4096, false}, {"--http-max-conns", 256, false}},
			want: []int{1489, 1489, 93}, lowered: true},
		{name: "a cap given is kept, the defaults share the rest", limit: 4096, reserve: 1024,
			caps: []Cap{{"--grpc-max-conns", 2000, true}, {"--api-max-conns", 4096, false}, {"--http-max-conns", 256, false}},
			want: []int{2000, 1008, 63}, lowered: true},
		{name: "caps given that do not fit", limit: 4096, reserve: 1024,
			caps: []Cap{{"--grpc-max-conns", 4000, true}, {"--api-max-conns", 4096, false}},
			err:  "the connection caps (--grpc-max-conns 4000) and the reserve of 1024 descriptors exceed the process's limit of 4096 open files"},
		{name: "no room for a default", limit: 2000, reserve: 1000,
			caps: []Cap{{"--grpc-max-conns", 1000, true}, {"--http-max-conns", 256, false}},
			err:  "leaves no connections for --http-max-conns"},
		{name: "a cap below 1", limit: 20000, reserve: 1024, caps: []Cap{{"--grpc-max-conns", 0, true}},
			err: "--grpc-max-conns must be at least 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, lowered, err := Fit(tc.limit, tc.reserve, tc.caps)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Fit: %v, want an error with %q", err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) || lowered != tc.lowered {
				t.Fatalf("Fit = %v, %v, %v; want %v, %v", got, lowered, err, tc.want, tc.lowered)
			}
			sum := tc.reserve
			for _, c := range got {
				sum += c
			}
			if tc.limit > 0 && sum > tc.limit {
				t.Fatalf("caps %v and the reserve %d exceed the limit %d", got, tc.reserve, tc.limit)
			}
		})
	}
}

func TestDefaultReserve(t *testing.T) {
	if got := DefaultReserve(1 << 20); got != 1024 {
		t.Errorf("DefaultReserve(1 Mi) = %d, want 1024", got)
	}
	if got := DefaultReserve(384); got != 192 {
		t.Errorf("DefaultReserve(384) = %d, want 192", got)
	}
}
