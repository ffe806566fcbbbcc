package netlimit

import (
	"errors"
	"fmt"
	"strings"
)

// DefaultReserve is the number of file descriptors the client listeners
// leave to the node for a descriptor limit of limit: 1024 (the store keeps
// up to 1000 table files open; Raft, gossip, forwarding and the log's
// segments take a few dozen), but no more than half of a small limit.
func DefaultReserve(limit int) int {
	return min(1024, limit/2)
}

// Cap is one client listener's connection cap before it is fitted.
type Cap struct {
	// Name names the listener's flag in errors.
	Name string
	// Max is the cap.
	Max int
	// Set says an operator chose Max; otherwise it is a default that Fit
	// may lower.
	Set bool
}

// Fit sizes the caps so that every client listener full at once still
// leaves reserve descriptors of limit to the node: the sum of the caps plus
// reserve stays within limit. Caps an operator set are kept (an error when
// they alone do not fit); defaults are lowered in proportion to fit what is
// left. It returns the caps in order, and whether it lowered any. A limit
// of 0 (unknown or unlimited) keeps every cap.
func Fit(limit, reserve int, caps []Cap) ([]int, bool, error) {
	out := make([]int, len(caps))
	set, defaults := 0, 0
	var setNames []string
	for i, c := range caps {
		if c.Max < 1 {
			return nil, false, fmt.Errorf("%s must be at least 1, got %d", c.Name, c.Max)
		}
		out[i] = c.Max
		if c.Set {
			set += c.Max
			setNames = append(setNames, fmt.Sprintf("%s %d", c.Name, c.Max))
		} else {
			defaults += c.Max
		}
	}
	if reserve < 0 {
		return nil, false, errors.New("the descriptor reserve must not be negative")
	}
	if limit <= 0 || set+defaults+reserve <= limit {
		return out, false, nil
	}
	room := limit - reserve - set
	if room < 0 {
		what := fmt.Sprintf("the reserve of %d descriptors exceeds", reserve)
		if set > 0 {
			what = fmt.Sprintf("the connection caps (%s) and the reserve of %d descriptors exceed",
				strings.Join(setNames, ", "), reserve)
		}
		return nil, false, fmt.Errorf("%s the process's limit of %d open files: lower them, "+
			"or raise the limit (ulimit -n, LimitNOFILE)", what, limit)
	}
	for i, c := range caps {
		if c.Set {
			continue
		}
		out[i] = c.Max * room / defaults
		if out[i] < 1 {
			return nil, false, fmt.Errorf("the process's limit of %d open files leaves no connections for %s beside "+
				"the reserve of %d descriptors: raise the limit (ulimit -n, LimitNOFILE) or lower the reserve", limit, c.Name, reserve)
		}
	}
	return out, true, nil
}
