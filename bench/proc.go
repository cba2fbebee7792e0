package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of utime and stime in /proc/<pid>/stat (USER_HZ,
// 100 on every Linux the bench runs on; Go cannot ask sysconf without cgo).
const clockTick = 10 * time.Millisecond

// procCPU returns the CPU time (user + system) the process pid has used so
// far, from /proc/<pid>/stat.
func procCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read the CPU time of process %d (the bench needs Linux /proc): %w", pid, err)
	}
	// The command name (field 2) may hold spaces and parentheses; the
	// fields after the last ')' start at field 3, the state.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name in %q", pid, clip(s))
	}
	f := strings.Fields(s[i+1:])
	// utime and stime are fields 14 and 15, here at 11 and 12.
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the name, want at least 13", pid, len(f))
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q, stime %q are not numbers", pid, f[11], f[12])
	}
	return time.Duration(ut+st) * clockTick, nil
}

// procRSS returns the resident set size of process pid in bytes (VmRSS of
// /proc/<pid>/status).
func procRSS(pid int) (int64, error) {
	m, err := procMem(pid)
	return m.rss, err
}

// memInfo is a process's resident memory in bytes, from /proc/<pid>/status:
// rss (VmRSS) = anon (RssAnon: heap, stacks, the runtime's memory) + file
// (RssFile: the binary's and libraries' pages, shared by every process of
// the same binary) + shmem (RssShmem); pss is the proportional set size of
// /proc/<pid>/smaps_rollup (each shared page divided among the processes
// that map it), 0 unless read by procPss.
type memInfo struct {
	rss, anon, file, shmem, pss int64
}

// procMem reads the VmRSS, RssAnon, RssFile and RssShmem lines of
// /proc/<pid>/status.
func procMem(pid int) (memInfo, error) {
	var m memInfo
	path := fmt.Sprintf("/proc/%d/status", pid)
	found, err := scanKB(path, map[string]*int64{"VmRSS:": &m.rss, "RssAnon:": &m.anon, "RssFile:": &m.file, "RssShmem:": &m.shmem})
	if err != nil {
		return m, fmt.Errorf("read the RSS of process %d (the bench needs Linux /proc): %w", pid, err)
	}
	if !found["VmRSS:"] {
		return m, fmt.Errorf("%s has no VmRSS line (a zombie?)", path)
	}
	return m, nil
}

// procPss returns procMem's reading of process pid with its proportional
// set size (the Pss line of /proc/<pid>/smaps_rollup).
func procPss(pid int) (memInfo, error) {
	m, err := procMem(pid)
	if err != nil {
		return m, err
	}
	path := fmt.Sprintf("/proc/%d/smaps_rollup", pid)
	found, err := scanKB(path, map[string]*int64{"Pss:": &m.pss})
	if err != nil {
		return m, fmt.Errorf("read the PSS of process %d: %w", pid, err)
	}
	if !found["Pss:"] {
		return m, fmt.Errorf("%s has no Pss line", path)
	}
	return m, nil
}

// scanKB reads the lines "<key> <n> kB" of a /proc file whose key is in
// want, stores n in bytes into want[key], and reports which it found.
func scanKB(path string, want map[string]*int64) (map[string]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	found := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		dst := want[k+":"]
		if !ok || dst == nil || found[k+":"] {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return found, fmt.Errorf("%s: %s %q is not a kB count", path, k, strings.TrimSpace(v))
		}
		*dst = kb << 10
		found[k+":"] = true
	}
	if err := sc.Err(); err != nil {
		return found, fmt.Errorf("%s: %w", path, err)
	}
	return found, nil
}

// cpuModel is the first "model name" of /proc/cpuinfo, or why there is none.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown (no model name in /proc/cpuinfo)"
}

// loadAvg is the 1, 5 and 15 minute load averages of /proc/loadavg.
func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
