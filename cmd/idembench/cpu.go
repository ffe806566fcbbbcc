package main

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuSnap holds the CPU counters read at one edge of the measured window.
// The machine has 2 cores shared by the load generator and every server, so
// a result is only readable together with how busy they were.
type cpuSnap struct {
	at        time.Time
	sysBusy   uint64 // /proc/stat jiffies neither idle nor iowait, all CPUs
	sysTotal  uint64
	sysIOWait uint64
	sysSteal  uint64
	self      time.Duration  // this process, user+sys
	pids      map[int]uint64 // server processes' utime+stime in jiffies
	names     map[int]string
}

const clkTck = 100 // USER_HZ on Linux

func takeCPU(pids []int) cpuSnap {
	s := cpuSnap{at: time.Now(), pids: map[int]uint64{}, names: map[int]string{}}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		s.addMachine(strings.Fields(line))
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		s.self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	for _, pid := range pids {
		if name, jiffies, ok := procCPU(pid); ok {
			s.names[pid], s.pids[pid] = name, jiffies
		}
	}
	return s
}

// addMachine reads the "cpu user nice system idle iowait irq softirq steal
// guest guest_nice" line; guest time is already counted in user.
func (s *cpuSnap) addMachine(f []string) {
	for i, v := range f[1:min(len(f), 9)] {
		n, _ := strconv.ParseUint(v, 10, 64)
		s.sysTotal += n
		switch i {
		case 3: // idle
		case 4:
			s.sysIOWait += n
		case 7: // steal: the hypervisor ran someone else on our vCPU
			s.sysSteal += n
		default:
			s.sysBusy += n
		}
	}
}

// procCPU returns a process's name and utime+stime from /proc/<pid>/stat.
func procCPU(pid int) (string, uint64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0, false
	}
	s := string(b)
	// The name may contain spaces; the fields after its closing paren are fixed.
	open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || close < 0 || close+2 > len(s) {
		return "", 0, false
	}
	f := strings.Fields(s[close+2:])
	if len(f) < 13 {
		return "", 0, false
	}
	ut, _ := strconv.ParseUint(f[11], 10, 64) // field 14 utime
	st, _ := strconv.ParseUint(f[12], 10, 64) // field 15 stime
	return s[open+1 : close], ut + st, true
}

// CPUReport is the "cpu" object of the result line, as in bench-peers.
type CPUReport struct {
	Cores         int                `json:"cores"`
	MachineBusy   float64            `json:"machine_busy_pct"`   // all cores, 100 = every core busy
	MachineIOWait float64            `json:"machine_iowait_pct"` // share of all cores waiting on IO
	MachineSteal  float64            `json:"machine_steal_pct"`  // share of all cores taken by the hypervisor
	LoadgenCores  float64            `json:"loadgen_cores"`      // CPU-seconds per second used by idembench
	ServerCores   float64            `json:"server_cores"`       // same, summed over -pids
	PerPID        map[string]float64 `json:"per_pid_cores,omitempty"`
}

func cpuBetween(a, b cpuSnap, cores int) CPUReport {
	r := CPUReport{Cores: cores, PerPID: map[string]float64{}}
	if dt := float64(b.sysTotal - a.sysTotal); dt > 0 {
		r.MachineBusy = round1(100 * float64(b.sysBusy-a.sysBusy) / dt)
		r.MachineIOWait = round1(100 * float64(b.sysIOWait-a.sysIOWait) / dt)
		r.MachineSteal = round1(100 * float64(b.sysSteal-a.sysSteal) / dt)
	}
	wall := b.at.Sub(a.at).Seconds()
	if wall <= 0 {
		return r
	}
	r.LoadgenCores = round2((b.self - a.self).Seconds() / wall)
	var servers float64
	for pid, j1 := range b.pids {
		j0, ok := a.pids[pid]
		if !ok {
			continue
		}
		c := float64(j1-j0) / clkTck / wall
		servers += c
		r.PerPID[strconv.Itoa(pid)+"/"+b.names[pid]] = round2(c)
	}
	r.ServerCores = round2(servers)
	if len(r.PerPID) == 0 {
		r.PerPID = nil
	}
	return r
}
