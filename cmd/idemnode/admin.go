package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/idemnode/idemnode/client"
	"github.com/idemnode/idemnode/rpc/idempb"
)

type membersView struct {
	Members []memberView `json:"members"`
	Servers []serverView `json:"servers"`
}

type memberView struct {
	ID     string `json:"id"`
	State  string `json:"state"`
	Gossip string `json:"gossip_addr"`
	Raft   string `json:"raft_addr"`
	GRPC   string `json:"grpc_addr"`
	// Cluster is the identity of the cluster whose state it holds.
	Cluster string `json:"cluster_id,omitempty"`
}

type serverView struct {
	ID      string `json:"id"`
	Address string `json:"address"`
	Voter   bool   `json:"voter"`
}

func newMembersCmd() *cobra.Command {
	var c clientFlags
	cmd := &cobra.Command{
		Use:     "members",
		Short:   "Show the gossip members and the Raft voters as one node sees them",
		Example: "  idemnode members --addr 127.0.0.11:7400 -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := c.check(false); err != nil {
				return err
			}
			return c.sdk(cmd.Context(), func(ctx context.Context, cl *client.Client) error {
				out, err := cl.Members(ctx)
				if err != nil {
					return err
				}
				return c.printMembers(out)
			})
		},
	}
	c.register(cmd, false)
	return cmd
}

func (c *clientFlags) printMembers(out client.Membership) error {
	v := membersView{Members: []memberView{}, Servers: []serverView{}}
	for _, m := range out.Members {
		v.Members = append(v.Members, memberView{ID: m.ID, State: m.State, Gossip: m.GossipAddr,
			Raft: m.RaftAddr, GRPC: m.GRPCAddr, Cluster: m.ClusterID})
	}
	for _, s := range out.Servers {
		v.Servers = append(v.Servers, serverView{ID: s.ID, Address: s.Address, Voter: s.Voter})
	}
	if c.output == "json" {
		return c.print(v, idempb.Outcome_OUTCOME_OK)
	}
	fmt.Println("gossip members:")
	for _, m := range v.Members {
		fmt.Printf("  %-12s %-8s gossip=%s raft=%s grpc=%s cluster=%s\n", m.ID, m.State, m.Gossip, m.Raft, m.GRPC, orDefault(m.Cluster, "none"))
	}
	fmt.Println("raft servers:")
	for _, s := range v.Servers {
		role := "voter"
		if !s.Voter {
			role = "nonvoter"
		}
		fmt.Printf("  %-12s %-8s %s\n", s.ID, role, s.Address)
	}
	return nil
}

func newRemoveMemberCmd() *cobra.Command {
	var c clientFlags
	cmd := &cobra.Command{
		Use:     "remove-member ID",
		Short:   "Remove a server from the Raft configuration",
		Example: "  idemnode remove-member node3 --addr 127.0.0.11:7400,127.0.0.12:7400",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := c.check(false); err != nil {
				return err
			}
			return c.sdk(cmd.Context(), func(ctx context.Context, cl *client.Client) error {
				if err := cl.RemoveMember(ctx, args[0]); err != nil {
					return err
				}
				return c.print(outcomeView{Outcome: "ok"}, idempb.Outcome_OUTCOME_OK)
			})
		},
	}
	c.register(cmd, false)
	return cmd
}

// transferView is the answer of transfer-leadership: the new leader.
type transferView struct {
	Outcome    string `json:"outcome"`
	LeaderID   string `json:"leader_id"`
	LeaderAddr string `json:"leader_addr"`
}

func newTransferLeadershipCmd() *cobra.Command {
	var c clientFlags
	var to string
	cmd := &cobra.Command{
		Use:   "transfer-leadership",
		Short: "Hand leadership to another server (--to ID, or the most up-to-date follower); prints the new leader",
		Example: `  idemnode transfer-leadership --addr 127.0.0.11:7400 --to node2
  # outcome: ok, then leader_id and leader_addr of the new leader`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := c.check(false); err != nil {
				return err
			}
			return c.sdk(cmd.Context(), func(ctx context.Context, cl *client.Client) error {
				st, err := cl.TransferLeadership(ctx, to)
				if err != nil {
					return err
				}
				return c.print(transferView{Outcome: "ok", LeaderID: st.LeaderID, LeaderAddr: st.LeaderAddr}, idempb.Outcome_OUTCOME_OK)
			})
		},
	}
	c.register(cmd, false)
	cmd.Flags().StringVar(&to, "to", "", "id of the new leader")
	return cmd
}
