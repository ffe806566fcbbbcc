package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

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
			return c.call(cmd.Context(), func(ctx context.Context, conn *grpc.ClientConn) error {
				out, err := idempb.NewAdminClient(conn).Members(ctx, &idempb.MembersRequest{})
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

func (c *clientFlags) printMembers(out *idempb.MembersResponse) error {
	v := membersView{Members: []memberView{}, Servers: []serverView{}}
	for _, m := range out.GetMembers() {
		v.Members = append(v.Members, memberView{ID: m.GetId(), State: m.GetState(), Gossip: m.GetGossipAddr(),
			Raft: m.GetRaftAddr(), GRPC: m.GetGrpcAddr(), Cluster: m.GetClusterId()})
	}
	for _, s := range out.GetServers() {
		v.Servers = append(v.Servers, serverView{ID: s.GetId(), Address: s.GetAddress(), Voter: s.GetVoter()})
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
	c := clientFlags{once: true}
	cmd := &cobra.Command{
		Use:     "remove-member ID",
		Short:   "Remove a server from the Raft configuration",
		Example: "  idemnode remove-member node3 --addr 127.0.0.11:7400,127.0.0.12:7400",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := c.check(false); err != nil {
				return err
			}
			return c.call(cmd.Context(), func(ctx context.Context, conn *grpc.ClientConn) error {
				if _, err := idempb.NewAdminClient(conn).RemoveMember(ctx, &idempb.RemoveMemberRequest{Id: args[0]}); err != nil {
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
	c := clientFlags{once: true}
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
			return c.call(cmd.Context(), func(ctx context.Context, conn *grpc.ClientConn) error {
				admin := idempb.NewAdminClient(conn)
				before, err := admin.Status(ctx, &idempb.StatusRequest{})
				if err != nil {
					return err
				}
				if _, err := admin.TransferLeadership(ctx, &idempb.TransferLeadershipRequest{Id: to}); err != nil {
					return err
				}
				st, err := client.AwaitNewLeader(ctx, admin, before.GetLeaderId(), to)
				if err != nil {
					return err
				}
				return c.print(transferView{Outcome: "ok", LeaderID: st.GetLeaderId(), LeaderAddr: st.GetLeaderAddr()}, idempb.Outcome_OUTCOME_OK)
			})
		},
	}
	c.register(cmd, false)
	cmd.Flags().StringVar(&to, "to", "", "id of the new leader")
	return cmd
}
