package cluster

import (
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
)

// diskCollector exports the free and total bytes of the filesystem that
// holds the data dir, read at scrape time: the store and the Raft log
// grow until it is full, and a node without a node exporter beside it
// should still be able to say so.
type diskCollector struct {
	dir        string
	free, size *prometheus.Desc
}

func newDiskCollector(dir string) *diskCollector {
	return &diskCollector{dir: dir,
		free: prometheus.NewDesc("idemnode_disk_free_bytes",
			"Bytes available to this node on the filesystem of its data dir.", nil, nil),
		size: prometheus.NewDesc("idemnode_disk_size_bytes",
			"Size of the filesystem of the data dir.", nil, nil)}
}

func (c *diskCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.free
	ch <- c.size
}

// Collect sends nothing when statfs fails (the data dir is gone): a
// missing series, not a false zero.
func (c *diskCollector) Collect(ch chan<- prometheus.Metric) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(c.dir, &st); err != nil {
		return
	}
	block := float64(st.Bsize)
	ch <- prometheus.MustNewConstMetric(c.free, prometheus.GaugeValue, float64(st.Bavail)*block)
	ch <- prometheus.MustNewConstMetric(c.size, prometheus.GaugeValue, float64(st.Blocks)*block)
}
