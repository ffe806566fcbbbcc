package idempb

// The ErrorInfo reasons the servers send (domain ErrorDomain): the wire
// contract of docs/API.md, spelled once for the servers (rpc, rpc/jsonapi)
// and the client, which re-exports them.
const (
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
	// ReasonLeaderBusy: the leader cannot take more forwarded calls from
	// one follower now (Unavailable); retry.
	ReasonLeaderBusy = "LEADER_BUSY"
	ReasonInternal   = "INTERNAL"
	// Authentication and authorization (rpc/auth.go).
	ReasonUnauthenticated = "UNAUTHENTICATED"
	ReasonTenantMismatch  = "TENANT_MISMATCH"
	ReasonAdminRequired   = "ADMIN_REQUIRED"
	ReasonPeerRequired    = "PEER_REQUIRED"
	// ReasonRateLimited and ReasonQuotaExceeded carry a RetryInfo.
	ReasonRateLimited   = "RATE_LIMITED"
	ReasonQuotaExceeded = "QUOTA_EXCEEDED"
	// ReasonFeedPruned refuses a feed cursor whose next events were pruned;
	// ReasonFeedCursorAhead one past the cluster's last event.
	ReasonFeedPruned      = "FEED_PRUNED"
	ReasonFeedCursorAhead = "FEED_CURSOR_AHEAD"
)

// ErrorDomain is the ErrorInfo domain of every error idemnode returns.
const ErrorDomain = "idemnode.io"
