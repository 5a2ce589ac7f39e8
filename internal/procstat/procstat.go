// Package procstat reads a process's resource use from /proc: what the benchmark and the trace
// replay report for each process of a control plane.
package procstat

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on every Linux port Go
// supports (sysconf(_SC_CLK_TCK) would need cgo).
const clockTicks = 100

// Stats are a process's resource use so far.
type Stats struct {
	// CPUSeconds is user plus system time.
	CPUSeconds float64
	// PeakRSSBytes is the resident set's high-water mark (VmHWM).
	PeakRSSBytes int64
}

// Read reads a process's CPU time from /proc/<pid>/stat and its peak RSS from
// /proc/<pid>/status.
func Read(pid int) (Stats, error) {
	var s Stats
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, err
	}
	if s.CPUSeconds, err = parseCPUSeconds(string(stat)); err != nil {
		return s, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	if s.PeakRSSBytes, err = parsePeakRSS(string(status)); err != nil {
		return s, fmt.Errorf("/proc/%d/status: %w", pid, err)
	}
	return s, nil
}

// parseCPUSeconds takes utime and stime (fields 14 and 15) from a /proc/<pid>/stat line. The
// command name, field 2, is in parentheses and may hold spaces, so fields count from its end.
func parseCPUSeconds(stat string) (float64, error) {
	end := strings.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, fmt.Errorf("no command name in %q", stat)
	}
	fields := strings.Fields(stat[end+1:])
	// fields[0] is field 3 (state); utime is field 14, stime field 15.
	if len(fields) < 13 {
		return 0, fmt.Errorf("too few fields in %q", stat)
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, err
		}
		ticks += n
	}
	return float64(ticks) / clockTicks, nil
}

// parsePeakRSS takes VmHWM from /proc/<pid>/status, in bytes.
func parsePeakRSS(status string) (int64, error) {
	for line := range strings.SplitSeq(status, "\n") {
		rest, ok := strings.CutPrefix(line, "VmHWM:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("unexpected VmHWM line %q", line)
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		return kb * 1024, err
	}
	return 0, fmt.Errorf("no VmHWM")
}
