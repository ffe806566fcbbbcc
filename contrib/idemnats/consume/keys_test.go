package consume

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemnode/idemnode/client"
)

// payload is a Message with only a payload and headers: key extraction
// reads nothing else.
type payload struct {
	data    string
	headers map[string]string
}

func (p payload) Data() []byte              { return []byte(p.data) }
func (p payload) Header(name string) string { return p.headers[name] }
func (payload) Deliveries() int             { return 1 }
func (payload) Ack() error                  { return nil }
func (payload) Nak(time.Duration) error     { return nil }
func (payload) InProgress() error           { return nil }
func (payload) Term(string) error           { return nil }

func TestFromJSONField(t *testing.T) {
	for _, tc := range []struct {
		pointer, data, want string
	}{
		{"/id", `{"id":"evt_1"}`, "evt_1"},
		{"/event/id", `{"event":{"id":"evt_2"}}`, "evt_2"},
		{"/items/1", `{"items":["a","b"]}`, "b"},
		{"/n", `{"n":12345678901234567890}`, "12345678901234567890"},
		{"/a~1b", `{"a/b":"slash"}`, "slash"},
		{"/m~0n", `{"m~n":"tilde"}`, "tilde"},
		{"/~01", `{"~1":"not a slash"}`, "not a slash"},
		{"/", `{"":"empty name"}`, "empty name"},
		{"/items/0", `{"items":["a"]}` + " \n", "a"},
		// Errors: every one is ErrNoKey.
		{"/id", `{"other":"x"}`, ""},
		{"/id", `{"id":""}`, ""},
		{"/id", `{"id":null}`, ""},
		{"/id", `{"id":true}`, ""},
		{"/id", `{"id":{"x":1}}`, ""},
		{"/id/x", `{"id":"scalar"}`, ""},
		{"/items/2", `{"items":["a","b"]}`, ""},
		{"/items/01", `{"items":["a","b"]}`, ""},
		{"/items/-1", `{"items":["a","b"]}`, ""},
		{"/id", `not json`, ""},
		{"/items/+1", `{"items":["a","b"]}`, ""},
		{"/items/-0", `{"items":["a","b"]}`, ""},
		{"/id", `{"id":"a"} {"id":"b"}`, ""},
		{"/id", `{"id":"a"} trailing`, ""},
	} {
		got, err := FromJSONField(tc.pointer)(payload{data: tc.data})
		if tc.want == "" {
			if !errors.Is(err, ErrNoKey) {
				t.Errorf("%s in %s = %q, %v; want ErrNoKey", tc.pointer, tc.data, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s in %s = %q, %v; want %q", tc.pointer, tc.data, got, err, tc.want)
		}
	}
}

func TestParsePointerRefusesMalformed(t *testing.T) {
	for _, p := range []string{"", "id", "/a~", "/a~2"} {
		if _, err := ParsePointer(p); err == nil {
			t.Errorf("ParsePointer(%q) accepted", p)
		}
	}
}

func TestFromHeader(t *testing.T) {
	key := FromHeader("webhook-id")
	if got, err := key(payload{headers: map[string]string{"webhook-id": "msg_1"}}); err != nil || got != "msg_1" {
		t.Errorf("key = %q, %v; want msg_1", got, err)
	}
	if _, err := key(payload{}); !errors.Is(err, ErrNoKey) {
		t.Errorf("missing header: %v, want ErrNoKey", err)
	}
}

func TestNewRefusesIncompleteConfig(t *testing.T) {
	// New does not connect: the address is never dialled.
	cl, err := client.New(client.Config{Addrs: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for name, cfg := range map[string]Config{
		"no client":      {Scope: "s", Key: FromHeader("id")},
		"no scope":       {Client: cl, Key: FromHeader("id")},
		"no key":         {Client: cl, Scope: "s"},
		"negative lease": {Client: cl, Scope: "s", Key: FromHeader("id"), Lease: -time.Second},
		"long scope":     {Client: cl, Scope: strings.Repeat("s", 257), Key: FromHeader("id")},
		"control scope":  {Client: cl, Scope: "a\tb", Key: FromHeader("id")},
		"spaced tenant":  {Client: cl, Tenant: "a b", Scope: "s", Key: FromHeader("id")},
		"huge result":    {Client: cl, Scope: "s", Key: FromHeader("id"), MaxResult: 1<<20 + 1},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New accepted %+v", name, cfg)
		}
	}
}
