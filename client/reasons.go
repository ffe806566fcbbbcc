package client

import "github.com/idemnode/idemnode/rpc/idempb"

// Reasons are the ErrorInfo reasons of idemnode's errors (domain
// idemnode.io): those the servers send, re-exported from rpc/idempb where
// server and clients spell them once, and those Describe gives to
// failures that carry none because no server answered.
const (
	// Sent by the servers (rpc/idempb holds the wire contract).
	ReasonInvalidField     = idempb.ReasonInvalidField
	ReasonInvalidJSON      = idempb.ReasonInvalidJSON
	ReasonNotLeader        = idempb.ReasonNotLeader
	ReasonNoLeader         = idempb.ReasonNoLeader
	ReasonLeadershipLost   = idempb.ReasonLeadershipLost
	ReasonShuttingDown     = idempb.ReasonShuttingDown
	ReasonCommitTimeout    = idempb.ReasonCommitTimeout
	ReasonClusterUpgrading = idempb.ReasonClusterUpgrading
	ReasonTooManyWaits     = idempb.ReasonTooManyWaits
	ReasonInternal         = idempb.ReasonInternal
	ReasonUnauthenticated  = idempb.ReasonUnauthenticated
	ReasonTenantMismatch   = idempb.ReasonTenantMismatch
	ReasonAdminRequired    = idempb.ReasonAdminRequired
	ReasonPeerRequired     = idempb.ReasonPeerRequired
	ReasonRateLimited      = idempb.ReasonRateLimited
	ReasonQuotaExceeded    = idempb.ReasonQuotaExceeded
	ReasonFeedPruned       = idempb.ReasonFeedPruned
	ReasonFeedCursorAhead  = idempb.ReasonFeedCursorAhead

	// Given by Describe to a failure before any answer.
	ReasonUsage              = "USAGE"
	ReasonConnectionRefused  = "CONNECTION_REFUSED"
	ReasonUnresolvable       = "UNRESOLVABLE"
	ReasonNoAnswer           = "NO_ANSWER"
	ReasonConnectionLost     = "CONNECTION_LOST"
	ReasonTimeout            = "TIMEOUT"
	ReasonClientCertRequired = "CLIENT_CERT_REQUIRED"
	ReasonClientCertRefused  = "CLIENT_CERT_REFUSED"
	ReasonServerCertUnknown  = "SERVER_CERT_UNVERIFIED"
	ReasonNotTLS             = "NOT_TLS"
)

// ErrorDomain is the ErrorInfo domain of every error idemnode returns.
const ErrorDomain = idempb.ErrorDomain
