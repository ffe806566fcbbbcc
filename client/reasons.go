package client

// Reasons are the ErrorInfo reasons of idemnode's errors (domain
// idemnode.io): those the servers send (rpc refers to these constants, so
// server and clients spell them once), and those Describe gives to
// failures that carry none because no server answered.
const (
	// Sent by the servers.
	ReasonInvalidField = "INVALID_FIELD"
	// ReasonInvalidJSON: a JSON API body that is not the request message.
	ReasonInvalidJSON    = "INVALID_JSON"
	ReasonNotLeader      = "NOT_LEADER"
	ReasonNoLeader       = "NO_LEADER"
	ReasonLeadershipLost = "LEADERSHIP_LOST"
	ReasonShuttingDown   = "SHUTTING_DOWN"
	ReasonCommitTimeout  = "COMMIT_TIMEOUT"
	// ReasonClusterUpgrading: a voter runs a release that cannot apply
	// the call's command (FailedPrecondition); retry after the upgrade.
	ReasonClusterUpgrading = "CLUSTER_UPGRADING"
	ReasonTooManyWaits     = "TOO_MANY_WAITS"
	ReasonInternal         = "INTERNAL"
	ReasonUnauthenticated  = "UNAUTHENTICATED"
	ReasonTenantMismatch   = "TENANT_MISMATCH"
	ReasonAdminRequired    = "ADMIN_REQUIRED"
	ReasonPeerRequired     = "PEER_REQUIRED"
	// ReasonRateLimited and ReasonQuotaExceeded carry a RetryInfo.
	ReasonRateLimited     = "RATE_LIMITED"
	ReasonQuotaExceeded   = "QUOTA_EXCEEDED"
	ReasonFeedPruned      = "FEED_PRUNED"
	ReasonFeedCursorAhead = "FEED_CURSOR_AHEAD"

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
const ErrorDomain = "idemnode.io"
