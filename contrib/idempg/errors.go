package idempg

import "errors"

// ErrCommitUnknown means a COMMIT returned an error and Do could not find
// out whether it committed. The key is released: the next call's fence
// finds the row if it did commit and replays it, or runs the function.
var ErrCommitUnknown = errors.New("idempg: commit outcome unknown")
