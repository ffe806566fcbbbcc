package certgen

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"

	"github.com/idemnode/idemnode/cluster"
)

// gossipKeyBytes is the size of a new gossip key: AES-256, the largest
// memberlist takes.
const gossipKeyBytes = 32

// NewGossipKey returns a new random gossip key in the form --gossip-key
// takes and a line of --gossip-key-file holds: 32 bytes, standard base64.
func NewGossipKey() (string, error) {
	b := make([]byte, gossipKeyBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate a gossip key: %w", err)
	}
	key := base64.StdEncoding.EncodeToString(b)
	// The node's own parser decides what a key is.
	if _, err := cluster.ParseGossipKeys(key); err != nil {
		return "", fmt.Errorf("%w: %w", ErrRefused, err)
	}
	return key, nil
}

// CreateGossipKey writes a keyring of one new key to gossip.keys (mode
// 0600), the file --gossip-key-file reads.
func (d Dir) CreateGossipKey() ([]string, error) {
	key, err := NewGossipKey()
	if err != nil {
		return nil, err
	}
	outs := []output{{name: GossipKeyFile, data: []byte(key + "\n"), secret: true}}
	return d.publish(outs, func(staged map[string]string) error {
		b, err := os.ReadFile(staged[GossipKeyFile])
		if err == nil {
			_, err = cluster.ParseGossipKeys(string(b))
		}
		if err != nil {
			return refused(d, staged, err)
		}
		return nil
	})
}
