// Package netfault cuts network links between test nodes with iptables.
// All rules live in one chain of our own, jumped to from INPUT and OUTPUT,
// so healing flushes one chain and closing removes every trace. Rules only
// ever name the addresses the caller gives: the test's own node addresses.
package netfault

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
)

// ErrUnavailable means iptables cannot be used here (not root, or no
// iptables binary); callers skip the faults that need it and say why.
var ErrUnavailable = errors.New("iptables partitions need root and the iptables command")

// Available reports whether partitions can be made, with the reason if not.
func Available() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: not running as root", ErrUnavailable)
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if out, err := exec.Command("iptables", "-w", "-L", "-n").CombinedOutput(); err != nil {
		return fmt.Errorf("%w: iptables -L: %v: %s", ErrUnavailable, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Partitioner owns one iptables chain.
type Partitioner struct {
	chain string

	// mu serialises rule changes; iptables -w also waits for the kernel lock.
	mu     sync.Mutex
	closed bool
}

// New creates the chain IDEMNODE-<tag> (removing a stale one left by a
// killed run with the same tag) and hooks it into INPUT and OUTPUT.
func New(tag string) (*Partitioner, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	p := &Partitioner{chain: "IDEMNODE-" + tag}
	if len(p.chain) > 28 {
		return nil, fmt.Errorf("chain name %q longer than 28 characters", p.chain)
	}
	p.remove()
	if err := ipt("-N", p.chain); err != nil {
		return nil, err
	}
	for _, hook := range []string{"INPUT", "OUTPUT"} {
		if err := ipt("-I", hook, "-j", p.chain); err != nil {
			p.remove()
			return nil, err
		}
	}
	return p, nil
}

// CutOneWay drops every packet from one address to another (TCP and UDP).
// TCP needs both directions, so a one-way cut stops TCP connections either
// way while datagrams still flow the other way — the asymmetric link of a
// misconfigured firewall.
func (p *Partitioner) CutOneWay(from, to string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("partitioner closed")
	}
	return ipt("-A", p.chain, "-s", from, "-d", to, "-j", "DROP")
}

// Cut drops all traffic between a and b, both ways.
func (p *Partitioner) Cut(a, b string) error {
	if err := p.CutOneWay(a, b); err != nil {
		return err
	}
	return p.CutOneWay(b, a)
}

// Isolate cuts node off from every address in others.
func (p *Partitioner) Isolate(node string, others ...string) error {
	for _, o := range others {
		if o == node {
			continue
		}
		if err := p.Cut(node, o); err != nil {
			return err
		}
	}
	return nil
}

// Heal removes every cut.
func (p *Partitioner) Heal() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	return ipt("-F", p.chain)
}

// Close removes the chain and its hooks. It is safe to call more than once.
func (p *Partitioner) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		p.closed = true
		p.remove()
	}
}

// remove deletes the hooks and the chain, ignoring what is already gone.
func (p *Partitioner) remove() {
	for _, hook := range []string{"INPUT", "OUTPUT"} {
		for ipt("-D", hook, "-j", p.chain) == nil {
		}
	}
	_ = ipt("-F", p.chain)
	_ = ipt("-X", p.chain)
}

func ipt(args ...string) error {
	out, err := exec.Command("iptables", append([]string{"-w"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("iptables %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
