package consume

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemnode/idemnode/client"
)

func TestCheckKey(t *testing.T) {
	for _, ok := range []string{"m-1", "a b~", strings.Repeat("k", 255)} {
		if err := CheckKey(ok); err != nil {
			t.Errorf("CheckKey(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", strings.Repeat("k", 256), "évt", "a\tb", "a\x7f"} {
		if err := CheckKey(bad); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("CheckKey(%q): %v, want ErrInvalidKey", bad, err)
		}
	}
}

func TestHashedKeyIsValidAndStable(t *testing.T) {
	f := Hashed("orders", FromHeader("id"))
	long := payload{headers: map[string]string{"id": "évt-" + strings.Repeat("9", 300)}}
	k1, err := f(long)
	if err != nil || CheckKey(k1) != nil {
		t.Fatalf("Hashed key %q, %v: want a key idemnode accepts", k1, err)
	}
	if k2, _ := f(long); k2 != k1 {
		t.Errorf("Hashed gave %q then %q for one message", k1, k2)
	}
	if k3, _ := f(payload{headers: map[string]string{"id": "other"}}); k3 == k1 {
		t.Errorf("Hashed gave one key to two ids")
	}
	if _, err := f(payload{}); !errors.Is(err, ErrNoKey) {
		t.Errorf("Hashed of a message without a key: %v, want ErrNoKey", err)
	}
}

func TestBoundedKeepsSmallResults(t *testing.T) {
	if got := bounded([]byte("ok"), 2); string(got) != "ok" {
		t.Errorf("bounded kept %q, want ok", got)
	}
	got := string(bounded([]byte("abc"), 2))
	if !strings.HasPrefix(got, "sha256:ba7816bf") || !strings.HasSuffix(got, " 3 bytes") {
		t.Errorf("bounded of 3 bytes over a cap of 2: %q, want the SHA-256 and length", got)
	}
}

// settled records what Process told the broker.
type settled struct {
	payload
	naks, terms int
}

func (s *settled) Nak(time.Duration) error { s.naks++; return nil }
func (s *settled) Term(string) error       { s.terms++; return nil }

// TestKeyFuncFailureNaks: a KeyFunc that fails for a reason other than
// ErrNoKey (a lookup that may succeed next time) hands the message back;
// only a message without a key, or with one idemnode refuses, is ended.
func TestKeyFuncFailureNaks(t *testing.T) {
	cl, err := client.New(client.Config{Addrs: []string{"127.0.0.1:1"}}) // never dialled
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, tc := range []struct {
		name string
		key  KeyFunc
		want Disposition
	}{
		{"lookup failed", func(Message) (string, error) { return "", errors.New("registry unreachable") }, Retry},
		{"no key", FromHeader("id"), Terminated},
		{"invalid key", func(Message) (string, error) { return "évt", nil }, Terminated},
	} {
		p, err := New(Config{Client: cl, Scope: "s", Key: tc.key})
		if err != nil {
			t.Fatal(err)
		}
		m := &settled{}
		d, err := p.Process(context.Background(), m, func(context.Context, Message) ([]byte, error) {
			t.Errorf("%s: the handler ran", tc.name)
			return nil, nil
		})
		if d != tc.want || err == nil {
			t.Errorf("%s: Process = %s, %v; want %s with the reason", tc.name, d, err, tc.want)
		}
		if (m.naks == 1) != (tc.want == Retry) || (m.terms == 1) != (tc.want == Terminated) {
			t.Errorf("%s: %d Naks, %d Terms; want one %s", tc.name, m.naks, m.terms, tc.want)
		}
	}
}
