package cluster

// faultReporter hands a storage fault to Config.OnFatal or, without one,
// to the channel Fatal returns. It exists before the Node does: the store
// opened first reports through it too.
type faultReporter struct {
	onFatal func(error)
	ch      chan error
}

func newFaultReporter(onFatal func(error)) *faultReporter {
	return &faultReporter{onFatal: onFatal, ch: make(chan error, 1)}
}

// report passes err on; on the channel only the first fault is kept, since
// the caller stops the node at the first.
func (r *faultReporter) report(err error) {
	if r.onFatal != nil {
		r.onFatal(err)
		return
	}
	select {
	case r.ch <- err:
	default:
	}
}
