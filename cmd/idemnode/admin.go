package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

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
}

type serverView struct {
	ID      string `json:"id"`
	Address string `json:"address"`
	Voter   bool   `json:"voter"`
}

func newMembersCmd() *cobra.Command {
	var c clientFlags
	cmd := &cobra.Command{
		Use:   "members",
		Short: "Show the gossip members and the Raft voters as one node sees them",
		Args:  cobra.NoArgs,
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
			Raft: m.GetRaftAddr(), GRPC: m.GetGrpcAddr()})
	}
	for _, s := range out.GetServers() {
		v.Servers = append(v.Servers, serverView{ID: s.GetId(), Address: s.GetAddress(), Voter: s.GetVoter()})
	}
	if c.output == "json" {
		return c.print(v, idempb.Outcome_OUTCOME_OK)
	}
	fmt.Println("gossip members:")
	for _, m := range v.Members {
		fmt.Printf("  %-12s %-8s gossip=%s raft=%s grpc=%s\n", m.ID, m.State, m.Gossip, m.Raft, m.GRPC)
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
		Use:   "remove-member ID",
		Short: "Remove a server from the Raft configuration",
		Args:  cobra.ExactArgs(1),
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

func newTransferLeadershipCmd() *cobra.Command {
	var c clientFlags
	var to string
	cmd := &cobra.Command{
		Use:   "transfer-leadership",
		Short: "Hand leadership to another server (--to ID, or the most up-to-date follower)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := c.check(false); err != nil {
				return err
			}
			return c.call(cmd.Context(), func(ctx context.Context, conn *grpc.ClientConn) error {
				req := &idempb.TransferLeadershipRequest{Id: to}
				if _, err := idempb.NewAdminClient(conn).TransferLeadership(ctx, req); err != nil {
					return err
				}
				return c.print(outcomeView{Outcome: "ok"}, idempb.Outcome_OUTCOME_OK)
			})
		},
	}
	c.register(cmd, false)
	cmd.Flags().StringVar(&to, "to", "", "id of the new leader")
	return cmd
}
