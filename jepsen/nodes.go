package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/idemnode/idemnode/rpc/idempb"
)

// node is one idemnode server process on its own loopback address.
type node struct {
	id    string
	ip    string
	dir   string
	bin   string
	flags []string // the command line shared by all nodes, minus addresses

	// mu guards the process state below.
	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	want    bool          // the supervisor restarts the process while want is true
	skew    time.Duration // --fault-clock-offset for the next start
	paused  bool
	starts  int
	exit    int // exit code of the last process that ended (-1: killed by a signal)
	conn    *grpc.ClientConn
	stopSup chan struct{}
}

func (n *node) grpcAddr() string   { return net.JoinHostPort(n.ip, "7400") }
func (n *node) raftAddr() string   { return net.JoinHostPort(n.ip, "7401") }
func (n *node) gossipAddr() string { return net.JoinHostPort(n.ip, "7402") }
func (n *node) dataDir() string    { return filepath.Join(n.dir, "data") }
func (n *node) logFile() string    { return filepath.Join(n.dir, "log") }
func (n *node) stallFile() string  { return filepath.Join(n.dir, "stall") }

// start launches the process (if not running) and keeps it supervised.
func (n *node) start(peers []string) error { return n.launch(peers, true) }

// startOnce launches the process unsupervised: when it exits it stays
// down (a node expected to stop by itself).
func (n *node) startOnce(peers []string) error { return n.launch(peers, false) }

func (n *node) launch(peers []string, supervised bool) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.want = supervised
	if n.cmd != nil {
		return nil
	}
	return n.spawnLocked(peers)
}

func (n *node) spawnLocked(peers []string) error {
	args := []string{"serve", "--node-id", n.id, "--data-dir", n.dataDir(),
		"--grpc-addr", n.grpcAddr(), "--raft-addr", n.raftAddr(),
		"--gossip-addr", n.gossipAddr(), "--http-addr", net.JoinHostPort(n.ip, "7403"),
		"--api-addr", net.JoinHostPort(n.ip, "7404"),
		"--join", strings.Join(peers, ","), "--fault-disk-stall-file", n.stallFile(),
		// Plaintext: the harness tests consensus under faults, not transport security.
		"--insecure"}
	args = append(args, n.flags...)
	if n.skew != 0 {
		args = append(args, "--fault-clock-offset", n.skew.String())
	}
	logf, err := os.OpenFile(n.logFile(), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("%s: open log: %w", n.id, err)
	}
	fmt.Fprintf(logf, "=== start %d: %s %s\n", n.starts+1, n.bin, strings.Join(args, " "))
	cmd := exec.Command(n.bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Own process group, so a Ctrl-C of the harness reaches the harness
	// (which cleans up) and not the nodes directly.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("%s: start: %w", n.id, err)
	}
	n.starts++
	n.cmd, n.exited, n.paused = cmd, make(chan struct{}), false
	exited := n.exited
	go func() {
		_ = cmd.Wait()
		logf.Close()
		n.onExit(cmd, peers) // first, so a waiter on exited sees the exit code
		close(exited)
	}()
	return nil
}

// onExit is the supervisor: a process that exits while it is wanted (the
// disk-stall watchdog, a crash) is restarted after a short pause.
func (n *node) onExit(cmd *exec.Cmd, peers []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != cmd {
		return
	}
	n.cmd, n.exit = nil, cmd.ProcessState.ExitCode()
	if n.want {
		go func() {
			time.Sleep(500 * time.Millisecond)
			n.mu.Lock()
			defer n.mu.Unlock()
			if n.want && n.cmd == nil {
				_ = n.spawnLocked(peers)
			}
		}()
	}
}

// kill sends SIGKILL and waits for the process to be gone; it stays down
// until start is called again.
func (n *node) kill() { n.end(syscall.SIGKILL, 0) }

// stop sends SIGTERM (a clean shutdown) and waits for the process to be
// gone, killing it after timeout.
func (n *node) stop(timeout time.Duration) { n.end(syscall.SIGTERM, timeout) }

// end stops supervising the process, sends it sig and waits for it to
// exit; after timeout, unless 0, it kills it.
func (n *node) end(sig syscall.Signal, timeout time.Duration) {
	n.mu.Lock()
	n.want = false
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	if timeout == 0 {
		<-exited
		return
	}
	select {
	case <-exited:
	case <-time.After(timeout):
		n.kill()
	}
}

// lastExit reports whether the process ran and ended, and its exit code.
func (n *node) lastExit() (ended bool, code int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd == nil && n.starts > 0, n.exit
}

// signal sends sig to a running process.
func (n *node) signal(sig syscall.Signal) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return errors.New("not running")
	}
	if sig == syscall.SIGSTOP {
		n.paused = true
	}
	if sig == syscall.SIGCONT {
		n.paused = false
	}
	return n.cmd.Process.Signal(sig)
}

func (n *node) running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil
}

// client returns an API connection to the node (clients do not bind their
// source address: client traffic is not what partitions cut).
func (n *node) client() (*grpc.ClientConn, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.conn == nil {
		c, err := grpc.NewClient(n.grpcAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, err
		}
		n.conn = c
	}
	return n.conn, nil
}

func (n *node) status(ctx context.Context) (*idempb.StatusResponse, error) {
	c, err := n.client()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return idempb.NewAdminClient(c).Status(ctx, &idempb.StatusRequest{})
}
