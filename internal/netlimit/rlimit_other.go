//go:build !unix

package netlimit

// DescriptorLimit returns 0: the system sets no per-process limit on open
// files that this package reads.
func DescriptorLimit() (int, error) { return 0, nil }
