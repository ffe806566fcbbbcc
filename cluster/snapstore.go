package cluster

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/idemnode/idemnode/fsm"
)

// storeSnapshots is Raft's snapshot store over the state machine's own
// store, in the manner of Vault's BoltSnapshotStore: a local snapshot
// copies nothing.
//
//   - List describes the store itself: its applied index, that entry's
//     term and the Raft configuration as of it, all read from the store's
//     metadata. So Raft's latest snapshot is always what the store holds:
//     at start Raft replays the log from the store's durable index, and no
//     entry can fall between the store and the log (the hole of rqlite
//     #2747, where a snapshot recorded at N met a store that had lost
//     entries before N).
//   - Create for a local snapshot returns a sink nobody writes to: FSM
//     Persist has made the store durable (fsm/raft.go), and Close records
//     nothing.
//   - Open streams a point-in-time view of the store (fsm.WriteSnapshot) to
//     a follower that needs InstallSnapshot; its metadata is the view's, so
//     index, term and records agree.
//   - A follower receiving InstallSnapshot gets a sink that decodes the
//     stream straight into a new store (fsm.ReadSnapshot into a Builder), no
//     file staged; Close finishes it, and Open of that id hands Restore a
//     marker naming the finished build, which Restore installs by swapping
//     the store (trackedFSM.Restore).
type storeSnapshots struct {
	machine func() *fsm.Machine
	// failed counts a failure at a stage (stageSend, stageInstall); the
	// error itself goes back to raft, which logs it.
	failed func(stage string)

	// mu guards built: finished InstallSnapshot builds by snapshot id,
	// waiting for Restore; and closed, set at shutdown, after which no
	// Restore will come to claim a build.
	mu     sync.Mutex
	built  map[string]*builtInstall
	closed bool
}

// builtInstall is a finished InstallSnapshot build and the log position
// the leader sent it at.
type builtInstall struct {
	builder     fsm.Builder
	index, term uint64
}

var _ raft.SnapshotStore = (*storeSnapshots)(nil)

func newStoreSnapshots(machine func() *fsm.Machine) *storeSnapshots {
	return &storeSnapshots{machine: machine, failed: func(string) {}, built: map[string]*builtInstall{}}
}

// installMarker opens the stream Open returns for a finished build.
const installMarker = "IDEMINST"

// List returns the store's own state as the one snapshot, or none for an
// empty store.
func (s *storeSnapshots) List() ([]*raft.SnapshotMeta, error) {
	m := s.machine().Meta()
	if m.Applied == 0 {
		return nil, nil
	}
	return []*raft.SnapshotMeta{snapshotMeta(m, "store")}, nil
}

func snapshotMeta(m fsm.Meta, id string) *raft.SnapshotMeta {
	meta := &raft.SnapshotMeta{
		Version: raft.SnapshotVersionMax,
		ID:      fmt.Sprintf("%s-%d-%d", id, m.Term, m.Applied),
		Index:   m.Applied, Term: m.Term, ConfigurationIndex: m.ConfigIndex,
		Size: fsm.SnapshotSize(m),
	}
	if len(m.Config) > 0 {
		meta.Configuration = raft.DecodeConfiguration(m.Config)
	}
	return meta
}

// Create returns a sink: a local snapshot never writes to it; an
// InstallSnapshot stream written to it is built into a new store.
func (s *storeSnapshots) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, _ raft.Transport) (raft.SnapshotSink, error) {
	base := fsm.Meta{Term: term, ConfigIndex: configurationIndex, Config: raft.EncodeConfiguration(configuration)}
	id := fmt.Sprintf("%d-%d-%d", term, index, time.Now().UnixMilli())
	return &storeSink{store: s, id: id, base: base, index: index}, nil
}

// Open streams the store as it is now, or hands over a finished build.
func (s *storeSnapshots) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	s.mu.Lock()
	_, ok := s.built[id]
	s.mu.Unlock()
	if ok {
		meta := &raft.SnapshotMeta{ID: id, Size: int64(len(installMarker) + len(id))}
		return meta, io.NopCloser(bytes.NewReader([]byte(installMarker + id))), nil
	}
	v, err := s.machine().View()
	if err != nil {
		return nil, nil, fmt.Errorf("open a view of the store: %w", err)
	}
	pr, pw := io.Pipe()
	go func() {
		err := fsm.WriteSnapshot(pw, v)
		v.Close()
		if err != nil {
			// The reader went away (a follower's connection broke) or the
			// store could not be read: either way the stream did not arrive.
			s.failed(stageSend)
		}
		pw.CloseWithError(err)
	}()
	return snapshotMeta(v.Meta(), "view"), pr, nil
}

// close discards the finished builds no Restore claimed: after shutdown
// none will be, and each holds a store open on disk. A build finishing
// later is discarded at once.
func (s *storeSnapshots) close() {
	s.mu.Lock()
	builds := s.built
	s.built, s.closed = map[string]*builtInstall{}, true
	s.mu.Unlock()
	for _, b := range builds {
		b.builder.Abort()
	}
}

// take removes and returns the finished build of id.
func (s *storeSnapshots) take(id string) (*builtInstall, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.built[id]
	delete(s.built, id)
	return b, ok
}

// preparedInstall reads the marker Open returned for a finished build, if
// r starts with one, and returns that build.
func (s *storeSnapshots) preparedInstall(r *bufio.Reader) (*builtInstall, bool, error) {
	head, err := r.Peek(len(installMarker))
	if err != nil || string(head) != installMarker {
		return nil, false, nil // a stream, read as one
	}
	all, err := io.ReadAll(r)
	if err != nil {
		return nil, false, err
	}
	id := string(all[len(installMarker):])
	b, ok := s.take(id)
	if !ok {
		return nil, false, fmt.Errorf("installed snapshot %s is not waiting to be restored", id)
	}
	return b, true, nil
}

// storeSink receives an InstallSnapshot stream into a new store, or
// nothing for a local snapshot.
type storeSink struct {
	store *storeSnapshots
	id    string
	base  fsm.Meta
	index uint64 // the log index the snapshot ends at

	pw      *io.PipeWriter
	builder fsm.Builder
	done    chan error
}

func (k *storeSink) ID() string { return k.id }

// Write feeds the stream to a build running beside it, started at the
// first write.
func (k *storeSink) Write(p []byte) (int, error) {
	if k.pw == nil {
		if err := k.start(); err != nil {
			k.store.failed(stageInstall)
			return 0, err
		}
	}
	return k.pw.Write(p)
}

func (k *storeSink) start() error {
	b, err := k.store.machine().NewBuilder()
	if err != nil {
		return fmt.Errorf("start a store for snapshot %s: %w", k.id, err)
	}
	pr, pw := io.Pipe()
	k.pw, k.builder, k.done = pw, b, make(chan error, 1)
	go func() {
		_, err := fsm.ReadSnapshot(pr, b, k.base)
		// The stream must end where the reader stopped: anything the
		// writer still sends is an error (ReadSnapshot checked for
		// trailing bytes on what it read).
		pr.CloseWithError(errors.Join(err, errSnapshotRead))
		k.done <- err
	}()
	return nil
}

var errSnapshotRead = errors.New("snapshot stream already read")

// Close finishes an install (the store is built and durable, waiting for
// Restore); for a local snapshot it records nothing.
func (k *storeSink) Close() error {
	if k.pw == nil {
		return nil
	}
	k.pw.Close()
	if err := <-k.done; err != nil {
		k.builder.Abort()
		k.store.failed(stageInstall)
		return fmt.Errorf("install snapshot %s: %w", k.id, err)
	}
	k.store.mu.Lock()
	closed := k.store.closed
	if !closed {
		k.store.built[k.id] = &builtInstall{builder: k.builder, index: k.index, term: k.base.Term}
	}
	k.store.mu.Unlock()
	if closed {
		k.builder.Abort()
		return fmt.Errorf("install snapshot %s: %w", k.id, ErrShutdown)
	}
	return nil
}

// Cancel abandons an install: raft cancels a stream that broke or came
// short, so it counts as a failed install.
func (k *storeSink) Cancel() error {
	if k.pw == nil {
		return nil
	}
	k.pw.CloseWithError(errors.New("snapshot cancelled"))
	<-k.done
	k.builder.Abort()
	k.store.failed(stageInstall)
	return nil
}
