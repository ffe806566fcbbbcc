package cluster

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/memberlist"
)

// ErrGossipPlaintext is returned by SetGossipKeys on a node started
// without gossip encryption: turning it on needs a restart, or the node
// would stop understanding its peers mid-flight.
var ErrGossipPlaintext = errors.New("gossip encryption is off on this node; restart it with a key")

// ParseGossipKeys reads a keyring: one base64 key of 16, 24 or 32 bytes per
// line, the first the primary (it encrypts), the others accepted when
// decrypting. Blank lines and lines starting with # are skipped.
func ParseGossipKeys(text string) ([][]byte, error) {
	var keys [][]byte
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, err := base64.StdEncoding.DecodeString(line)
		if err != nil {
			return nil, fmt.Errorf("gossip key on line %d is not base64: %w", i+1, err)
		}
		if err := memberlist.ValidateKey(k); err != nil {
			return nil, fmt.Errorf("gossip key on line %d is %d bytes: %w", i+1, len(k), err)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, errors.New("no gossip key given")
	}
	return keys, nil
}

// newKeyring returns memberlist's keyring of keys (primary first), or nil
// for none.
func newKeyring(keys [][]byte) (*memberlist.Keyring, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	kr, err := memberlist.NewKeyring(keys[1:], keys[0])
	if err != nil {
		return nil, fmt.Errorf("gossip keyring: %w", err)
	}
	return kr, nil
}

// SetGossipKeys replaces the gossip keyring while the node runs: keys[0]
// becomes the key that encrypts, every key in keys decrypts, and keys not
// in the list stop being accepted. Rotation is three rounds over all nodes
// (docs/SECURITY.md): add the new key as a secondary, make it the primary,
// drop the old one; after each round, every node can read every other.
func (n *Node) SetGossipKeys(keys [][]byte) error {
	if len(keys) == 0 {
		return errors.New("no gossip key given")
	}
	if n.members == nil || n.members.keyring == nil {
		return ErrGossipPlaintext
	}
	kr := n.members.keyring
	for _, k := range keys {
		if err := kr.AddKey(k); err != nil {
			return fmt.Errorf("add gossip key: %w", err)
		}
	}
	if err := kr.UseKey(keys[0]); err != nil {
		return fmt.Errorf("use gossip key: %w", err)
	}
	dropUnlisted(kr, keys)
	return nil
}

// dropUnlisted removes the keys of kr that are not in keep. memberlist's
// RemoveKey shifts the ring's slice in place, without its lock, under the
// readers that decrypt with it, unless the key removed is the last one;
// so keys are only ever removed from the end (the primary, first, is
// always kept), and wanted keys removed on the way are added back.
func dropUnlisted(kr *memberlist.Keyring, keep [][]byte) {
	listed := func(k []byte) bool {
		for _, w := range keep {
			if bytes.Equal(w, k) {
				return true
			}
		}
		return false
	}
	for {
		ring := kr.GetKeys()
		unlisted := false
		for _, k := range ring {
			unlisted = unlisted || !listed(k)
		}
		if !unlisted || len(ring) < 2 {
			break
		}
		_ = kr.RemoveKey(ring[len(ring)-1]) // never the primary: len >= 2
	}
	for _, k := range keep {
		_ = kr.AddKey(k) // no-op when still there
	}
}

// GossipKeys returns the keys in use, primary first (nil when gossip is
// plain or off).
func (n *Node) GossipKeys() [][]byte {
	if n.members == nil || n.members.keyring == nil {
		return nil
	}
	return append([][]byte(nil), n.members.keyring.GetKeys()...)
}
