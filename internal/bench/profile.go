package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/tephra-dev/tephra/internal/localcluster"
)

// profileChunk is the length of each CPU profile taken while a run drains. pprof's profile
// endpoint answers only at the end of its period, so the driver takes consecutive short ones
// and `go tool pprof` merges them.
const profileChunk = 3 * time.Second

// profiler takes consecutive CPU profiles of a scheduler from its /debug/pprof/profile (served
// on the secure port when the configuration's enableProfiling is true, its default) until
// stopped.
type profiler struct {
	dir, prefix string
	client      *rest.RESTClient
	files       []string
	err         error
	stop        chan struct{}
	done        chan struct{}
}

// startProfiler starts profiling the cluster's scheduler, writing dir/prefix-N.pb.gz.
func startProfiler(ctx context.Context, b *benchCluster, dir, prefix string) (*profiler, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	client, err := b.schedulerClient(profileChunk + 30*time.Second)
	if err != nil {
		return nil, err
	}
	p := &profiler{dir: dir, prefix: prefix, client: client, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for i := 0; ; i++ {
			select {
			case <-p.stop:
				return
			case <-ctx.Done():
				return
			default:
			}
			data, err := client.Get().AbsPath("/debug/pprof/profile").
				Param("seconds", strconv.Itoa(int(profileChunk.Seconds()))).DoRaw(ctx)
			if err != nil {
				p.err = fmt.Errorf("fetching the scheduler's CPU profile: %w", err)
				return
			}
			path := filepath.Join(dir, fmt.Sprintf("%s-%d.pb.gz", prefix, i))
			if err := os.WriteFile(path, data, 0o644); err != nil {
				p.err = err
				return
			}
			p.files = append(p.files, path)
			// What the scheduler holds while it drains, beside each CPU profile: the peak of its
			// memory is in one of them, rarely at the end.
			if heap, err := client.Get().AbsPath("/debug/pprof/heap").DoRaw(ctx); err == nil {
				_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-heap-during-%d.pb.gz", prefix, i)), heap, 0o644)
			}
		}
	}()
	return p, nil
}

// schedulerClient is a client of the scheduler's secure port (pprof, metrics). The scheduler
// serves with a self-signed certificate; the client still authenticates with the admin
// certificate, which the scheduler authorizes through the apiserver.
func (b *benchCluster) schedulerClient(timeout time.Duration) (*rest.RESTClient, error) {
	config := rest.CopyConfig(b.Config)
	config.Host = fmt.Sprintf("https://127.0.0.1:%d", b.Port(localcluster.Scheduler))
	config.CAData = nil
	config.Insecure = true
	config.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	config.Timeout = timeout
	return rest.UnversionedRESTClientFor(config)
}

// finish takes a heap profile (what the scheduler holds at the end of the drain, as of its last
// garbage collection, and what it allocated since it started), waits for the CPU profile being
// taken and returns the CPU profiles' files. The heap profile is dir/prefix-heap.pb.gz; memory
// is not a figure the run fails on, so an error fetching it is only logged in its place.
func (p *profiler) finish(ctx context.Context) ([]string, error) {
	heap := filepath.Join(p.dir, p.prefix+"-heap.pb.gz")
	data, err := p.client.Get().AbsPath("/debug/pprof/heap").DoRaw(ctx)
	if err != nil {
		data = []byte(fmt.Sprintf("fetching the scheduler's heap profile: %v\n", err))
		heap = strings.TrimSuffix(heap, ".pb.gz") + "-error.txt"
	}
	if err := os.WriteFile(heap, data, 0o644); err != nil {
		p.err = errors.Join(p.err, err)
	}
	close(p.stop)
	<-p.done
	return p.files, p.err
}

// analyzeHeapProfile writes `go tool pprof -top` of the largest of the heap profiles taken
// while the run drained and at its end (heap, and heap-during-N beside it), by what is held
// (inuse_space) and by what was allocated (alloc_space), and adds them to the summary's files.
func analyzeHeapProfile(ctx context.Context, runDir, heap string, summary *ProfileSummary) {
	candidates, _ := filepath.Glob(strings.TrimSuffix(heap, ".pb.gz") + "-during-*.pb.gz")
	if _, err := os.Stat(heap); err == nil {
		candidates = append(candidates, heap)
	}
	largest, most := "", -1.0
	for _, f := range candidates {
		out, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-sample_index=inuse_space", "-top", "-nodecount=1", f).Output()
		if err != nil {
			continue
		}
		if total := parseHeapTotal(string(out)); total > most {
			largest, most = f, total
		}
	}
	if largest == "" {
		return
	}
	base := strings.TrimSuffix(heap, ".pb.gz")
	for _, index := range []string{"inuse_space", "alloc_space"} {
		out := base + "-" + index + ".txt"
		data, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-sample_index="+index, "-top", "-nodecount=60", largest).Output()
		if err != nil {
			continue
		}
		if err := os.WriteFile(out, data, 0o644); err != nil {
			continue
		}
		for _, f := range []string{largest, out} {
			if rel, err := filepath.Rel(runDir, f); err == nil && !slices.Contains(summary.Files, rel) {
				summary.Files = append(summary.Files, rel)
			}
		}
	}
}

// parseHeapTotal reads the total of `go tool pprof -top` of a heap profile ("... of 54.67MB
// total"), in bytes; -1 if there is none.
func parseHeapTotal(top string) float64 {
	for _, line := range strings.Split(top, "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 || fields[len(fields)-1] != "total" || !strings.HasPrefix(line, "Showing nodes") {
			continue
		}
		text := fields[len(fields)-2]
		for _, unit := range []struct {
			suffix string
			scale  float64
		}{{"GB", 1 << 30}, {"MB", 1 << 20}, {"kB", 1 << 10}, {"B", 1}} {
			if number, ok := strings.CutSuffix(text, unit.suffix); ok {
				if v, err := strconv.ParseFloat(number, 64); err == nil {
					return v * unit.scale
				}
				return -1
			}
		}
	}
	return -1
}

// ProfileSummary is where a scheduler's CPU time went in one run, from `go tool pprof -top` of
// the profiles taken while it drained.
type ProfileSummary struct {
	Configuration string `json:"configuration"`
	Scenario      string `json:"scenario"`
	Rep           int    `json:"rep"`
	// Files are the raw profiles and the pprof reports, relative to the run's folder.
	Files []string `json:"files"`
	// SampledSeconds is the CPU time the profiles sampled; WallSeconds how long they ran.
	SampledSeconds float64 `json:"sampledSeconds"`
	WallSeconds    float64 `json:"wallSeconds"`
	// Phases are the cumulative shares of the scheduler's main parts (profilePhases).
	Phases []ProfileEntry `json:"phases"`
	// TopFlat are the functions that spent the most CPU themselves.
	TopFlat []ProfileEntry `json:"topFlat"`
	// Tephra are Tephra's own functions with the most CPU below them.
	Tephra []ProfileEntry `json:"tephra"`
	// Error says why there is no analysis (e.g. no go tool).
	Error string `json:"error,omitempty"`
}

// ProfileEntry is a function (or a phase) and its share of the sampled CPU time.
type ProfileEntry struct {
	Name string  `json:"name"`
	Flat float64 `json:"flat,omitempty"`
	Cum  float64 `json:"cum"`
}

// Names of the summary's parts that the report refers to.
const (
	tephraPhase = "Tephra's plugins (samples with a Tephra frame)"
	gcPhase     = "garbage collection (background marking)"
	nodesPhase  = "nodes checked in parallel (filters and scores)"
)

// profilePhases are parts of kube-scheduler (and of a Go program) whose cumulative CPU the
// summary reports: each is the largest cumulative share among the functions whose names contain
// one of the patterns.
var profilePhases = []struct {
	name     string
	patterns []string
}{
	{"scheduling cycles, serial part (ScheduleOne)", []string{"scheduler.(*Scheduler).ScheduleOne"}},
	{"· PreFilter plugins", []string{"(*frameworkImpl).RunPreFilterPlugins"}},
	{"· Reserve plugins", []string{"(*frameworkImpl).RunReservePluginsReserve"}},
	{"· PostFilter (preemption, gang release)", []string{"(*frameworkImpl).RunPostFilterPlugins"}},
	{nodesPhase, []string{"workqueue.ParallelizeUntil.func1"}},
	{"· Filter plugins", []string{"(*Scheduler).findNodesThatPassFilters"}},
	{"· Score plugins", []string{"(*frameworkImpl).RunScorePlugins"}},
	{"binding cycles (Permit wait, bind, events)", []string{"(*Scheduler).bindingCycle", "(*Scheduler).runBindingCycle"}},
	{"scheduling queue (pop, requeue on events)", []string{"(*PriorityQueue).Pop", "(*PriorityQueue).MoveAllToActiveOrBackoffQueue", "(*PriorityQueue).movePodsToActiveOrBackoffQueue", "(*PriorityQueue).flushUnschedulablePodsLeftover", "(*PriorityQueue).flushBackoffQCompleted"}},
	{"informer event handlers", []string{"(*processorListener).run"}},
	{"watch decoding", []string{"(*Reflector).watch", "(*StreamWatcher).receive"}},
	{"event recording", []string{"(*eventBroadcasterImpl)", "(*recorderImpl)"}},
	{gcPhase, []string{"runtime.gcBgMarkWorker"}},
	{"memory allocation", []string{"runtime.mallocgc"}},
}

// analyzeProfiles runs `go tool pprof -top` on the profiles (merged), writes its reports beside
// them and summarizes them. runDir is the run's folder, which Files are relative to.
func analyzeProfiles(ctx context.Context, runDir string, files []string, wall time.Duration, summary *ProfileSummary) {
	summary.WallSeconds = wall.Seconds()
	for _, f := range files {
		if rel, err := filepath.Rel(runDir, f); err == nil {
			summary.Files = append(summary.Files, rel)
		}
	}
	if len(files) == 0 {
		summary.Error = "no profile was taken"
		return
	}
	base := strings.TrimSuffix(strings.TrimSuffix(files[0], ".pb.gz"), "-0")
	pprof := func(out string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "go", append(append([]string{"tool", "pprof"}, args...), files...)...)
		data, err := cmd.Output()
		if err != nil {
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				err = fmt.Errorf("%w: %s", err, exit.Stderr)
			}
			return "", fmt.Errorf("go tool pprof: %w", err)
		}
		if err := os.WriteFile(out, data, 0o644); err != nil {
			return "", err
		}
		if rel, err := filepath.Rel(runDir, out); err == nil {
			summary.Files = append(summary.Files, rel)
		}
		return string(data), nil
	}
	flat, err := pprof(base+"-top.txt", "-top", "-nodecount=60")
	if err != nil {
		summary.Error = err.Error()
		return
	}
	cum, err := pprof(base+"-top-cum.txt", "-top", "-cum", "-nodecount=600")
	if err != nil {
		summary.Error = err.Error()
		return
	}
	// Every node of the samples with a Tephra frame on their stack: their flat times add up to
	// the share of the CPU spent in or below Tephra's code.
	tephra, err := pprof(base+"-top-tephra.txt", "-top", "-focus=github.com/tephra-dev/tephra/", "-nodecount=100000")
	if err != nil {
		summary.Error = err.Error()
		return
	}
	flatEntries, total := parsePprofTop(flat)
	cumEntries, _ := parsePprofTop(cum)
	tephraEntries, _ := parsePprofTop(tephra)
	summary.SampledSeconds = total
	var tephraShare float64
	for _, e := range tephraEntries {
		tephraShare += e.Flat
	}
	summary.Phases = append(summary.Phases, ProfileEntry{Name: tephraPhase, Cum: tephraShare})
	summary.TopFlat = flatEntries[:min(len(flatEntries), 12)]
	for _, phase := range profilePhases {
		var best float64
		found := false
		for _, e := range cumEntries {
			for _, pattern := range phase.patterns {
				if strings.Contains(e.Name, pattern) && e.Cum >= best {
					best, found = e.Cum, true
				}
			}
		}
		if found {
			summary.Phases = append(summary.Phases, ProfileEntry{Name: phase.name, Cum: best})
		}
	}
	for _, e := range cumEntries {
		if strings.Contains(e.Name, "github.com/tephra-dev/tephra/") && e.Cum >= 0.5 {
			summary.Tephra = append(summary.Tephra, e)
		}
	}
	slices.SortStableFunc(summary.Tephra, func(a, b ProfileEntry) int { return compareDesc(a.Cum, b.Cum) })
	summary.Tephra = summary.Tephra[:min(len(summary.Tephra), 12)]
}

func compareDesc(a, b float64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

// parsePprofTop reads `go tool pprof -top` output: the entries (shares in percent of the total)
// and the total sampled CPU in seconds.
func parsePprofTop(text string) (entries []ProfileEntry, totalSeconds float64) {
	scanner := bufio.NewScanner(strings.NewReader(text))
	scanner.Buffer(make([]byte, 1<<16), 1<<20)
	header := false
	for scanner.Scan() {
		line := scanner.Text()
		// "Showing nodes accounting for 12.34s, 85.00% of 14.52s total"
		if _, rest, ok := strings.Cut(line, "% of "); ok && strings.HasSuffix(line, " total") {
			if d, err := parsePprofDuration(strings.TrimSuffix(rest, " total")); err == nil {
				totalSeconds = d
			}
			continue
		}
		fields := strings.Fields(line)
		if len(fields) >= 5 && fields[0] == "flat" && fields[1] == "flat%" {
			header = true
			continue
		}
		if !header || len(fields) < 6 {
			continue
		}
		flat, err1 := strconv.ParseFloat(strings.TrimSuffix(fields[1], "%"), 64)
		cum, err2 := strconv.ParseFloat(strings.TrimSuffix(fields[4], "%"), 64)
		if err1 != nil || err2 != nil {
			continue
		}
		entries = append(entries, ProfileEntry{Name: strings.Join(fields[5:], " "), Flat: flat, Cum: cum})
	}
	return entries, totalSeconds
}

// parsePprofDuration reads pprof's durations: "14.52s", "850ms", "1.20mins", "2.5hrs".
func parsePprofDuration(text string) (float64, error) {
	text = strings.TrimSpace(text)
	for _, unit := range []struct {
		suffix string
		scale  float64
	}{{"mins", 60}, {"hrs", 3600}, {"ms", 1e-3}, {"us", 1e-6}, {"µs", 1e-6}, {"ns", 1e-9}, {"s", 1}} {
		if number, ok := strings.CutSuffix(text, unit.suffix); ok {
			v, err := strconv.ParseFloat(number, 64)
			return v * unit.scale, err
		}
	}
	return 0, fmt.Errorf("unknown duration %q", text)
}
