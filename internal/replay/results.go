package replay

import (
	"encoding/json"
	"math"
	"os"
	"slices"
	"time"

	"github.com/tephra-dev/tephra/internal/replay/report"
)

// Saved is a replay's results as written to runs.json, from which the report can be written again
// (tephra-replay --report) after a change to it, without replaying.
type Saved struct {
	// Command made the replay; Trace and Cluster describe what it replayed on what.
	Command string   `json:"command"`
	Trace   []string `json:"trace"`
	Cluster string   `json:"cluster"`
	Speedup float64  `json:"speedup"`
	Results []Result `json:"results"`
}

// MarshalJSON writes a Result with its times: NaN, which JSON cannot hold, becomes null.
func (r Result) MarshalJSON() ([]byte, error) {
	type plain Result
	data, err := json.Marshal(struct {
		plain
		Wall string `json:"wall"`
	}{plain(r), r.Wall.String()})
	if err != nil {
		return nil, err
	}
	return data, nil
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (r *Result) UnmarshalJSON(data []byte) error {
	type plain Result
	var v struct {
		plain
		Wall string `json:"wall"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*r = Result(v.plain)
	wall, err := time.ParseDuration(v.Wall)
	r.Wall = wall
	return err
}

// SaveResults writes a replay's results to path. It leaves s as it was: the caller goes on to
// report from it.
func SaveResults(path string, s Saved) error {
	s.Results = slices.Clone(s.Results)
	for i := range s.Results {
		s.Results[i].Run = nanToSentinel(s.Results[i].Run)
	}
	data, err := json.MarshalIndent(s, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// LoadResults reads what SaveResults wrote.
func LoadResults(path string) (Saved, error) {
	var s Saved
	data, err := os.ReadFile(path)
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return s, err
	}
	for i := range s.Results {
		s.Results[i].Run = sentinelToNaN(s.Results[i].Run)
	}
	return s, nil
}

// never stands for NaN ("never") in runs.json: times are never negative otherwise.
const never = -1

func nanToSentinel(run report.Run) report.Run { return mapTimes(run, math.IsNaN, never) }

func sentinelToNaN(run report.Run) report.Run {
	return mapTimes(run, func(v float64) bool { return v == never }, math.NaN())
}

// mapTimes returns a copy of run whose times that match are replaced by to.
func mapTimes(run report.Run, match func(float64) bool, to float64) report.Run {
	fix := func(v float64) float64 {
		if match(v) {
			return to
		}
		return v
	}
	out := run
	out.End = fix(run.End)
	out.Jobs = make([]report.Job, len(run.Jobs))
	for i, j := range run.Jobs {
		j.Submit, j.Ended = fix(j.Submit), fix(j.Ended)
		j.Started = append([]float64(nil), j.Started...)
		for k := range j.Started {
			j.Started[k] = fix(j.Started[k])
		}
		j.Pods = append([]report.Pod(nil), j.Pods...)
		for k, p := range j.Pods {
			p.Bound, p.Running, p.Ended = fix(p.Bound), fix(p.Running), fix(p.Ended)
			j.Pods[k] = p
		}
		out.Jobs[i] = j
	}
	return out
}
