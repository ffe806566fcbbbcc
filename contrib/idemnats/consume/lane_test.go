package consume

import (
	"context"
	"errors"
	"testing"

	"github.com/idemnode/idemnode/client"
)

// TestGoAfterDrainRefuses: a message handed over while the subscriber stops
// is refused (the adapter hands it back), not raced against Drain's wait.
func TestGoAfterDrainRefuses(t *testing.T) {
	cl, err := client.New(client.Config{Addrs: []string{"127.0.0.1:1"}}) // never dialled
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	p, err := New(Config{Client: cl, Scope: "s", Key: FromHeader("id")})
	if err != nil {
		t.Fatal(err)
	}
	l := p.Lane(func(context.Context, Message) ([]byte, error) {
		t.Error("the handler ran after Drain")
		return nil, nil
	})
	l.Drain()
	if err := l.Go(context.Background(), payload{}); !errors.Is(err, ErrDrained) {
		t.Errorf("Go after Drain: %v, want ErrDrained", err)
	}
}
